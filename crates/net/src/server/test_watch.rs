//! A running test as the server watches it, for both protocols: why it
//! ended ([`Ending`]: the client asked, the client is gone, a limit or a
//! stalled stream), and the one log line per test.

use super::registry::Shared;
use super::ServerSetting;
use crate::datapath::StreamSet;
use crate::socket::{wait_readable, POLL};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[allow(clippy::too_many_arguments)] // one log line's fields, named at the call site
pub(super) fn log_test(
    s: &Shared,
    peer: SocketAddr,
    protocol: &str,
    test: &str,
    streams: u32,
    dur: f64,
    bytes: u64,
    status: &str,
) {
    log_test_with(s, peer, protocol, test, streams, dur, bytes, "", status);
}

/// The same line for a test that moved data both ways on the same
/// connections (iperf2's `--full-duplex`): each way's bytes and rate too,
/// as the server saw them (`received=`, `sent=`), where the streams don't
/// tell them apart.
#[allow(clippy::too_many_arguments)] // one log line's fields, named at the call site
pub(super) fn log_test_both_ways(
    s: &Shared,
    peer: SocketAddr,
    protocol: &str,
    streams: u32,
    dur: f64,
    (received, sent): (u64, u64),
    status: &str,
) {
    let each_way = format!(
        " received={received} received_rate={} sent={sent} sent_rate={}",
        rate_text(received, dur),
        rate_text(sent, dur)
    );
    let test = crate::wire::TrafficDirection::Bidir.test_name(false);
    log_test_with(s, peer, protocol, test.as_str(), streams, dur, received + sent, &each_way, status);
}

#[allow(clippy::too_many_arguments)]
pub(super) fn log_test_with(
    s: &Shared,
    peer: SocketAddr,
    protocol: &str,
    test: &str,
    streams: u32,
    dur: f64,
    bytes: u64,
    fields: &str,
    status: &str,
) {
    (s.cfg.log)(&format!(
        "peer={peer} protocol={protocol} test={test} streams={streams} duration={dur:.2}s bytes={bytes} rate={}{fields} status={status}",
        rate_text(bytes, dur)
    ));
}

/// "941.5Mb/s": one token, so the log line stays `key=value` pairs.
pub(super) fn rate_text(bytes: u64, secs: f64) -> String {
    let bits = if secs > 0.0 { bytes as f64 * 8.0 / secs } else { 0.0 };
    headroom_units::format_bits(bits).replace(' ', "")
}

/// Why a running test ended.
pub(super) enum Ending {
    /// The client asked (TEST_END / End).
    Client,
    /// The control connection died or the client sent something else.
    Gone(String),
    /// A limit or a stalled stream ended it.
    Server(String),
}

/// Waits for the client's end-of-test message while watching limits and streams.
/// `read_end` reads one control message when the connection is readable and
/// says whether it was the end request; `on_activity` runs whenever data moved.
pub(super) fn watch_test(
    control: &mut TcpStream,
    set: &StreamSet,
    s: &Shared,
    started: Instant,
    on_activity: &dyn Fn(),
    mut read_end: impl FnMut(&mut TcpStream) -> io::Result<bool>,
) -> Ending {
    let mut last_bytes = 0;
    let mut last_progress = Instant::now();
    loop {
        if s.stop.load(Ordering::Relaxed) {
            return Ending::Server("server shutting down".into());
        }
        if wait_readable(control, POLL) {
            let _ = control.set_read_timeout(Some(s.cfg.idle_timeout));
            return match read_end(control) {
                Ok(true) => Ending::Client,
                Ok(false) => Ending::Gone("unexpected control message during the test".into()),
                Err(e) => Ending::Gone(format!("control connection lost: {e}")),
            };
        }
        if started.elapsed() > s.cfg.max_duration + Duration::from_secs(2) {
            let limit = s.cfg.spell(ServerSetting::MaxDuration);
            return Ending::Server(format!("test exceeded {limit} {:.0}s", s.cfg.max_duration.as_secs_f64()));
        }
        let bytes = set.total_bytes();
        if bytes != last_bytes {
            last_bytes = bytes;
            last_progress = Instant::now();
            on_activity();
        } else if last_progress.elapsed() > s.cfg.idle_timeout && !set.senders_finished() {
            return Ending::Server(format!(
                "no data for {:.0}s (client gone or stalled)",
                s.cfg.idle_timeout.as_secs_f64()
            ));
        }
        if let Some(e) = set.error() {
            if set.all_finished() {
                return Ending::Server(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::registry::test_support::{shared, tcp_pair};
    use super::*;
    use crate::datapath::StreamParams;
    use std::io::{Read, Write};

    fn no_streams() -> StreamSet {
        let p = StreamParams {
            len: 1,
            limit: None,
            stall: Duration::from_secs(1),
            udp_rate: 0.0,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
        };
        StreamSet::start_tcp(Vec::new(), p)
    }

    /// Watches with a reader that takes one byte: `E` is the end request.
    fn watch(s: &Shared, control: &mut TcpStream) -> Ending {
        watch_test(control, &no_streams(), s, Instant::now(), &|| {}, |c| {
            let mut b = [0u8; 1];
            c.read_exact(&mut b).map(|_| b[0] == b'E')
        })
    }

    #[test]
    fn a_test_ends_on_the_end_request_a_hostile_message_or_a_lost_client() {
        let s = shared(Duration::from_secs(5));
        let (mut client, mut control) = tcp_pair();
        client.write_all(b"E").unwrap();
        assert!(matches!(watch(&s, &mut control), Ending::Client));
        client.write_all(b"\xff").unwrap();
        assert!(matches!(watch(&s, &mut control), Ending::Gone(e) if e.contains("unexpected")));
        drop(client);
        assert!(matches!(watch(&s, &mut control), Ending::Gone(e) if e.contains("lost")));
    }

    #[test]
    fn a_silent_client_or_a_stopping_server_ends_the_test() {
        let s = shared(Duration::from_millis(300));
        let (_client, mut control) = tcp_pair();
        let t0 = Instant::now();
        assert!(matches!(watch(&s, &mut control), Ending::Server(e) if e.contains("no data")));
        assert!(t0.elapsed() < Duration::from_secs(5), "the idle timeout bounds a silent client");
        s.stop.store(true, Ordering::Relaxed);
        assert!(matches!(watch(&s, &mut control), Ending::Server(e) if e.contains("shutting down")));
    }

    #[test]
    fn rates_in_log_lines() {
        assert_eq!(rate_text(125_000_000, 1.0), "1.000Gb/s");
        assert_eq!(rate_text(1_250_000, 10.0), "1.000Mb/s");
        assert_eq!(rate_text(5, 0.0), "0.000b/s");
    }
}
