//! `headroom ping` on a terminal, in ping(8)'s shape: a heading, one line per
//! round trip as it comes back (TCP handshakes), and the summary of the
//! probe: sent, answered, failed; min/avg/max/stddev/p99; jitter.

use headroom_result::{details, Probe};
use headroom_units::format_millis;
use std::fmt::Display;
use std::time::Duration;

/// "TCP handshake to nas:3260 (192.0.2.7:3260), 10 round trips", and
/// "via eth1" when a source was chosen.
pub fn tcp_heading(target: &str, addr: impl Display, count: u32, source: Option<&str>) -> String {
    format!("TCP handshake to {target} ({addr}){}, {count} round trips\n", from(source))
}

/// "UDP echo to nas:5201 (192.0.2.7:5201), 10 round trips".
pub fn udp_heading(target: &str, peer: impl Display, count: u32, source: Option<&str>) -> String {
    format!("UDP echo to {target} ({peer}){}, {count} round trips\n", from(source))
}

fn from(source: Option<&str>) -> String {
    source.map(|s| format!(" {s}")).unwrap_or_default()
}

/// One round trip: its time, or why it failed.
pub fn round_trip(seq: u32, result: Result<Duration, impl Display>) -> String {
    match result {
        Ok(d) => format!("  seq={seq} time={}\n", format_millis(d.as_nanos() as f64)),
        Err(e) => format!("  seq={seq} failed: {e}\n"),
    }
}

/// Round trips tried (`details.attempts` for TCP, `details.sent` for UDP echo).
fn sent(probe: &Probe) -> u64 {
    probe.details.get(details::ATTEMPTS).or(probe.details.get(details::SENT)).and_then(|v| v.as_u64()).unwrap_or(0)
}

/// The closing lines: how many answered, the round-trip statistics, jitter.
pub fn summary(probe: &Probe) -> String {
    let sent = sent(probe);
    let ok = probe.summary.ops.unwrap_or(0);
    let mut text = format!(
        "{sent} sent, {ok} answered, {:.1}% failed\n",
        if sent > 0 { (sent - ok.min(sent)) as f64 / sent as f64 * 100.0 } else { 0.0 }
    );
    if let Some(l) = &probe.summary.latency_ns {
        text += &format!(
            "rtt min/avg/max/stddev/p99 = {:.3}/{:.3}/{:.3}/{:.3}/{:.3} ms\n",
            l.min.unwrap_or(0.0) / 1e6,
            l.mean / 1e6,
            l.max / 1e6,
            l.stddev.unwrap_or(0.0) / 1e6,
            l.p99 / 1e6
        );
    }
    if let Some(j) = probe.details.get(details::JITTER_MS).and_then(|v| v.as_f64()) {
        text += &format!("jitter {j:.3} ms\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::{Latency, PingSpec, ProbeSpec, Summary};
    use serde_json::json;

    fn echo() -> Probe {
        let spec = PingSpec {
            method: "udp_echo".into(),
            peer: "nas:5201".into(),
            count: 5,
            interval_ms: 200.0,
            ..Default::default()
        };
        Probe {
            id: "udp-echo".into(),
            name: "UDP echo".into(),
            spec: ProbeSpec::Ping(spec),
            summary: Summary {
                ops: Some(4),
                latency_ns: Some(Latency {
                    min: Some(87_000.0),
                    mean: 97_400.0,
                    max: 108_000.0,
                    stddev: Some(7_000.0),
                    p99: 108_000.0,
                    ..Latency::default()
                }),
                ..Summary::default()
            },
            samples: vec![],
            histogram: None,
            warnings: vec![],
            details: [("sent".to_string(), json!(5)), ("jitter_ms".to_string(), json!(0.0021))].into(),
            host: None,
        }
    }

    #[test]
    fn the_summary_reads_like_ping() {
        assert_eq!(
            summary(&echo()),
            "5 sent, 4 answered, 20.0% failed\n\
             rtt min/avg/max/stddev/p99 = 0.087/0.097/0.108/0.007/0.108 ms\n\
             jitter 0.002 ms\n"
        );
    }

    #[test]
    fn round_trips_and_headings() {
        assert_eq!(round_trip(2, Ok::<_, String>(Duration::from_micros(22_389))), "  seq=2 time=22.389 ms\n");
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(round_trip(3, Err(&refused)), "  seq=3 failed: connection refused\n");
        assert_eq!(
            tcp_heading("nas:3260", "192.0.2.7:3260", 10, None),
            "TCP handshake to nas:3260 (192.0.2.7:3260), 10 round trips\n"
        );
        assert_eq!(
            udp_heading("nas:5201", "192.0.2.7:5201", 3, Some("via eth1")),
            "UDP echo to nas:5201 (192.0.2.7:5201) via eth1, 3 round trips\n"
        );
    }
}
