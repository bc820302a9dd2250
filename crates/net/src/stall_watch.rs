//! Ends a request/response exchange whose peer went silent, without a timer
//! on every blocking call: a watching thread shuts the socket down when the
//! exchange made no progress for the allowed time, or when the stop flag is
//! set, and the blocked read or write returns at once.
//!
//! Why not a socket timeout (SO_RCVTIMEO): with one set, every blocking
//! `recv` arms a kernel timer and removes it again. On a round trip of 64
//! bytes with both ends on one CPU (14 us) that cost 0.2-0.4 us per round
//! trip, measured with a C ping-pong with and without the option (13.2-13.3
//! against 13.5-13.6 us), and was the whole of headroom's gap to sockperf,
//! which sets none. The watcher wakes a few times a second instead.
//!
//! It owns no protocol: the RR client (client.rs) and the RR server
//! (server/headroom.rs) run their loops inside [`guarded`].

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the watcher looks at the exchange at most: the stop flag is
/// seen within this, and a stall within its allowance plus this.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// What the exchange reports to its watcher.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    exchanges: AtomicU64,
    stalled: AtomicBool,
}

impl Progress {
    /// One more message went both ways.
    pub(crate) fn tick(&self) {
        self.exchanges.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the watcher ended the exchange because the peer stayed silent
    /// (not because of the stop flag): the caller's error says so.
    pub(crate) fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }
}

/// Runs `exchange` on `stream` while a watcher shuts the stream down once
/// `stop` is set or `exchange` has not called [`Progress::tick`] for
/// `allowed`; the watcher ends with `exchange`.
///
/// On platforms other than Linux the stream also gets `allowed` as its read
/// timeout, in case shutting a socket down there does not end a blocked read.
pub(crate) fn guarded<T>(
    stream: &TcpStream,
    allowed: Duration,
    stop: &AtomicBool,
    exchange: impl FnOnce(&Progress) -> T,
) -> T {
    if cfg!(not(target_os = "linux")) {
        let _ = stream.set_read_timeout(Some(allowed));
    }
    let progress = Progress::default();
    let finished = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let watching = || watch(stream, allowed, stop, &progress, &finished);
        let Ok(watcher) = std::thread::Builder::new().name("stall-watch".into()).spawn_scoped(scope, watching) else {
            // No thread to spare (a process at its thread limit): the
            // socket's own timeout ends a stall instead.
            let _ = stream.set_read_timeout(Some(allowed));
            return exchange(&progress);
        };
        let out = exchange(&progress);
        finished.store(true, Ordering::Release);
        watcher.thread().unpark();
        out
    })
}

fn watch(stream: &TcpStream, allowed: Duration, stop: &AtomicBool, progress: &Progress, finished: &AtomicBool) {
    let look_every = LOOK_EVERY.min(allowed / 4).max(Duration::from_millis(1));
    let (mut seen, mut since) = (progress.exchanges.load(Ordering::Relaxed), Instant::now());
    while !finished.load(Ordering::Acquire) {
        std::thread::park_timeout(look_every);
        if finished.load(Ordering::Acquire) {
            return;
        }
        if stop.load(Ordering::Relaxed) {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        let now = progress.exchanges.load(Ordering::Relaxed);
        if now != seen {
            (seen, since) = (now, Instant::now());
        } else if since.elapsed() >= allowed {
            progress.stalled.store(true, Ordering::Relaxed);
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn a_silent_peer_ends_a_blocked_read_after_the_allowance() {
        let (client, _silent) = pair();
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        let (read, stalled) = guarded(&client, Duration::from_millis(300), &stop, |p| {
            let mut buf = [0u8; 8];
            ((&client).read_exact(&mut buf), p.stalled())
        });
        assert!(read.is_err(), "a read from a silent peer must end");
        assert!(stalled, "the watcher says the peer stalled");
        assert!(started.elapsed() >= Duration::from_millis(300), "not before the allowance");
    }

    #[test]
    fn the_stop_flag_ends_a_blocked_read_and_is_not_a_stall() {
        let (client, _silent) = pair();
        let stop = AtomicBool::new(false);
        let (read, stalled) = std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(150));
                stop.store(true, Ordering::Relaxed);
            });
            guarded(&client, Duration::from_secs(60), &stop, |p| {
                let mut buf = [0u8; 8];
                ((&client).read_exact(&mut buf), p.stalled())
            })
        });
        assert!(read.is_err());
        assert!(!stalled, "stopping is not the peer's stall");
    }

    #[test]
    fn an_exchange_that_keeps_ticking_outlives_the_allowance_and_its_socket_stays_open() {
        let (client, mut echo) = pair();
        let echoer = std::thread::spawn(move || {
            let mut buf = [0u8; 4];
            while echo.read_exact(&mut buf).is_ok() {
                if echo.write_all(&buf).is_err() {
                    break;
                }
            }
        });
        let stop = AtomicBool::new(false);
        let allowed = Duration::from_millis(200);
        let rounds = guarded(&client, allowed, &stop, |p| {
            let started = Instant::now();
            let mut rounds = 0u32;
            while started.elapsed() < allowed * 3 {
                let mut buf = *b"ping";
                (&client).write_all(&buf).unwrap();
                (&client).read_exact(&mut buf).unwrap();
                p.tick();
                rounds += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            rounds
        });
        assert!(rounds > 0);
        // The watcher ended with the exchange and left the socket usable.
        let mut buf = *b"pong";
        (&client).write_all(&buf).unwrap();
        (&client).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"pong");
        drop(client);
        echoer.join().unwrap();
    }
}
