//! Deadlines and Ctrl-C for every wait of the protocol clients: a server
//! that sends a byte now and then must not hold a login or a request open
//! for ever (a silence timer alone restarts on each byte), and Ctrl-C must
//! end any wait within [`SLICE`]. What it owns: the phase's end and the
//! shared stop flag's check; it must not do I/O itself.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The longest a client waits on a socket before it looks at the stop flag again.
pub const SLICE: Duration = Duration::from_millis(100);

/// The end of one phase (a login, a request) and what it is called in errors.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
    what: &'static str,
}

impl Deadline {
    /// `what` must be over within `limit` from now.
    pub fn after(limit: Duration, what: &'static str) -> Deadline {
        Deadline { at: Instant::now() + limit, limit, what }
    }

    /// The earlier of the two.
    pub fn min(self, other: Deadline) -> Deadline {
        if other.at < self.at {
            other
        } else {
            self
        }
    }

    /// How long the next wait may be (at most [`SLICE`]); an error naming
    /// the phase once it is over or Ctrl-C was pressed.
    pub fn left(&self, stop: &AtomicBool) -> io::Result<Duration> {
        if stop.load(Ordering::Relaxed) {
            return Err(stopped(self.what));
        }
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{} took more than {} s", self.what, self.limit.as_secs()),
            ));
        }
        Ok(left.min(SLICE))
    }
}

/// The error of a wait that Ctrl-C ended (ErrorKind::Interrupted: the disk
/// runner does not report it as the test's error).
pub fn stopped(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, format!("stopped by Ctrl-C during {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_ends_and_the_stop_flag_ends_it_sooner() {
        let stop = AtomicBool::new(false);
        let d = Deadline::after(Duration::from_millis(30), "the test phase");
        assert!(d.left(&stop).unwrap() <= SLICE);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(d.left(&stop).unwrap_err().kind(), io::ErrorKind::Interrupted);
        stop.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(40));
        let e = d.left(&stop).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("the test phase took more than 0 s"), "{e}");
    }
}
