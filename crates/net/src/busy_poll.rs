//! Busy-polling request/response I/O (`net --busy-poll`): a stream made
//! non-blocking, SO_BUSY_POLL asked of the kernel (it polls the device's
//! queue instead of sleeping, on a NIC driver with NAPI), and reads and
//! writes that spin on "would block" instead of waiting for a wake-up. Both
//! ends of a round trip use it; each burns a core while the test runs.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long the kernel polls the device per receive, microseconds (what
/// sockperf's `--lls` and the kernel's documentation suggest for latency).
pub const BUSY_POLL_US: u32 = 50;

/// What one end of a busy-polled round trip did: it spun on a non-blocking
/// socket (`spin`), and its kernel accepted SO_BUSY_POLL (`so_busy_poll`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BusyPollEnd {
    /// The end read and wrote on a non-blocking socket, spinning.
    pub spin: bool,
    /// The kernel accepted SO_BUSY_POLL on its socket.
    pub so_busy_poll: bool,
}

impl BusyPollEnd {
    /// The one byte a server sends, right after an RR hello that asked for
    /// busy-polling, to say what it does (a server that predates it sends none).
    pub fn to_byte(self) -> u8 {
        u8::from(self.spin) | (u8::from(self.so_busy_poll) << 1)
    }

    /// The server's byte read back.
    pub fn from_byte(b: u8) -> Self {
        BusyPollEnd { spin: b & 1 != 0, so_busy_poll: b & 2 != 0 }
    }
}

/// Makes `stream` spin: non-blocking, SO_BUSY_POLL where the kernel allows.
pub fn prepare(stream: &TcpStream) -> BusyPollEnd {
    let so_busy_poll = crate::os::set_busy_poll(stream, BUSY_POLL_US).is_ok();
    let spin = stream.set_nonblocking(true).is_ok();
    BusyPollEnd { spin, so_busy_poll }
}

/// Reads exactly `buf.len()` bytes, spinning while none are there; an
/// error after `timeout` without a byte, as a blocking read's timeout.
pub fn read_exact(mut stream: &TcpStream, buf: &mut [u8], timeout: Duration) -> io::Result<()> {
    let (mut done, mut spins) = (0, 0u32);
    let mut last = Instant::now();
    while done < buf.len() {
        match stream.read(&mut buf[done..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => (done, last) = (done + n, Instant::now()),
            Err(e) if would_block(&e) => spin_or_time_out(last, timeout, &mut spins)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `buf`, spinning while the socket's buffer is full.
pub fn write_all(mut stream: &TcpStream, buf: &[u8], timeout: Duration) -> io::Result<()> {
    let (mut done, mut spins) = (0, 0u32);
    let mut last = Instant::now();
    while done < buf.len() {
        match stream.write(&buf[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => (done, last) = (done + n, Instant::now()),
            Err(e) if would_block(&e) => spin_or_time_out(last, timeout, &mut spins)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

/// Spins on: the core is given up now and then (every [`SPINS_PER_YIELD`]
/// empty polls) so that on a machine with more runnable threads than cores
/// the peer this end waits for still gets to run.
fn spin_or_time_out(last: Instant, timeout: Duration, spins: &mut u32) -> io::Result<()> {
    if last.elapsed() >= timeout {
        return Err(io::ErrorKind::TimedOut.into());
    }
    *spins += 1;
    if spins.is_multiple_of(SPINS_PER_YIELD) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
    Ok(())
}

/// Empty polls between two yields: a few tens of microseconds of spinning.
const SPINS_PER_YIELD: u32 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_byte_says_both_halves() {
        for end in [
            BusyPollEnd { spin: true, so_busy_poll: true },
            BusyPollEnd { spin: true, so_busy_poll: false },
            BusyPollEnd::default(),
        ] {
            assert_eq!(BusyPollEnd::from_byte(end.to_byte()), end);
        }
    }

    #[test]
    fn spinning_reads_get_every_byte_and_time_out_on_silence() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        assert!(prepare(&a).spin && prepare(&b).spin);
        let msg: Vec<u8> = (0..=255).collect();
        write_all(&a, &msg, Duration::from_secs(2)).unwrap();
        let mut got = vec![0u8; msg.len()];
        read_exact(&b, &mut got, Duration::from_secs(2)).unwrap();
        assert_eq!(got, msg);
        let err = read_exact(&b, &mut got, Duration::from_millis(20)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
