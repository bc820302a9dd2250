//! `headroom ping HOST:PORT`: TCP handshake round trips to any TCP service.
//! Each connection is closed as a client that has nothing to ask closes it
//! (FIN): a reset before any byte stops some services (iperf 2.1.8's
//! `iperf -s` exits on one). That leaves one socket in TIME_WAIT here per
//! handshake for a minute; paced faster than [`GRACEFUL_MIN_INTERVAL`],
//! those would crowd out the ephemeral ports towards one service, so such
//! a series resets its connections instead (SO_LINGER 0).

use crate::address::Endpoint;
use crate::error::NetError;
use crate::socket::Source;
use crate::stats::LatencyRecorder;
use socket2::Type;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Handshake round trips.
#[derive(Debug, Clone, Default)]
pub struct ConnectResult {
    /// The service as the user named it.
    pub peer: String,
    /// Handshakes tried.
    pub attempts: u32,
    /// Handshakes that failed.
    pub failures: u32,
    /// Every handshake round trip time.
    pub rtt: LatencyRecorder,
    /// Each attempt's RTT in order (None = failed), for per-probe samples.
    pub series: Vec<Option<Duration>>,
    /// The last failure, for the warning.
    pub last_error: Option<String>,
    /// Where the connections left from (`--bind`, `--interface`).
    pub source: Option<String>,
}

/// The shortest interval between handshakes closed gracefully: at most 100
/// a second, 6,000 sockets in TIME_WAIT, a fifth of Linux's ephemeral ports.
pub const GRACEFUL_MIN_INTERVAL: Duration = Duration::from_millis(10);

/// How a handshake's connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// FIN, as any client that has nothing to ask.
    Graceful,
    /// RST (SO_LINGER 0): no TIME_WAIT, but some services stop on it.
    Reset,
}

/// One handshake from `source`: connect, then close as `close` says.
/// Returns the time connect() took.
pub fn connect_once(addr: SocketAddr, timeout: Duration, source: &Source, close: Close) -> std::io::Result<Duration> {
    let sock = crate::socket::SocketSetup::from(source).socket(&addr, Type::STREAM)?;
    if close == Close::Reset {
        sock.set_linger(Some(Duration::ZERO))?;
    }
    let t0 = Instant::now();
    crate::socket::connect_timeout(&sock, &addr, timeout)?;
    let rtt = t0.elapsed();
    drop(sock);
    Ok(rtt)
}

/// `count` handshakes to `addr` (an address of `target`), one every
/// `interval`; `on_each` sees every attempt.
pub fn tcp_connect_series(
    addr: SocketAddr,
    target: &Endpoint,
    count: u32,
    interval: Duration,
    stop: &AtomicBool,
    on_each: &mut dyn FnMut(u32, Result<Duration, &std::io::Error>),
) -> Result<ConnectResult, NetError> {
    let mut out = ConnectResult { peer: target.display(), source: target.source.describe(), ..Default::default() };
    let timeout = target.timeout;
    let close = if interval >= GRACEFUL_MIN_INTERVAL { Close::Graceful } else { Close::Reset };
    for i in 0..count {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let t0 = Instant::now();
        out.attempts += 1;
        match connect_once(addr, timeout, &target.source, close) {
            Ok(d) => {
                out.rtt.record(d);
                out.series.push(Some(d));
                on_each(i + 1, Ok(d));
            }
            Err(e) => {
                // The first failure with nothing measured is the user's answer: fail loudly.
                if out.rtt.count() == 0 && i == 0 {
                    return Err(crate::socket::connect_error_any_service(addr, &e));
                }
                out.failures += 1;
                out.series.push(None);
                on_each(i + 1, Err(&e));
                out.last_error = Some(e.to_string());
            }
        }
        if i + 1 < count {
            if let Some(pause) = interval.checked_sub(t0.elapsed()) {
                std::thread::sleep(pause);
            }
        }
    }
    Ok(out)
}
