//! TCP_INFO from the sending side of a stream: retransmits, smoothed RTT,
//! congestion window and the share of time the flow was limited by the
//! receiver's window, by the send buffer, or busy on the network.
//!
//! The figures and what they explain are the same on every platform; how
//! they are read is the platform seam's (`crate::os::tcp_info`).

use serde::{Deserialize, Serialize};

/// The TCP_INFO figures headroom reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Segments retransmitted over the connection's life.
    pub retransmits: u64,
    /// Smoothed RTT, microseconds.
    pub srtt_us: u64,
    /// RTT variation, microseconds (absent where the platform does not say
    /// it: Windows' SIO_TCP_INFO has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rttvar_us: Option<u64>,
    /// Congestion window, bytes (segments x MSS).
    pub cwnd_bytes: u64,
    /// Send maximum segment size, bytes.
    pub snd_mss: u32,
    /// Path MTU, bytes (absent where the platform does not say it, as rttvar_us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmtu: Option<u32>,
    /// Time the connection had data in flight, microseconds (busy_time).
    pub busy_us: u64,
    /// Time limited by the receiver's window, microseconds.
    pub rwnd_limited_us: u64,
    /// Time limited by the send buffer, microseconds.
    pub sndbuf_limited_us: u64,
    /// Whether the kernel filled the limited/busy fields (Linux >= 4.10).
    pub has_limits: bool,
}

impl TcpInfo {
    /// Share of the busy time limited by the receive window (0..1).
    pub fn rwnd_limited_share(&self) -> f64 {
        share(self.rwnd_limited_us, self.busy_us)
    }
    /// Share of the busy time limited by the send buffer (0..1).
    pub fn sndbuf_limited_share(&self) -> f64 {
        share(self.sndbuf_limited_us, self.busy_us)
    }

    /// Adds another stream's counters (times and retransmits sum; RTT and
    /// cwnd average; a figure some stream lacks is absent).
    pub fn merge(items: &[TcpInfo]) -> Option<TcpInfo> {
        if items.is_empty() {
            return None;
        }
        let n = items.len() as u64;
        let mut out = TcpInfo { has_limits: items.iter().all(|t| t.has_limits), ..Default::default() };
        out.rttvar_us = items.iter().map(|t| t.rttvar_us).sum::<Option<u64>>().map(|sum| sum / n);
        out.pmtu = items.iter().map(|t| t.pmtu).collect::<Option<Vec<u32>>>().and_then(|all| all.into_iter().max());
        for t in items {
            out.retransmits += t.retransmits;
            out.srtt_us += t.srtt_us;
            out.cwnd_bytes += t.cwnd_bytes;
            out.busy_us += t.busy_us;
            out.rwnd_limited_us += t.rwnd_limited_us;
            out.sndbuf_limited_us += t.sndbuf_limited_us;
            out.snd_mss = out.snd_mss.max(t.snd_mss);
        }
        out.srtt_us /= n;
        out.cwnd_bytes /= n;
        Some(out)
    }
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 / whole as f64).min(1.0)
    }
}

/// Reads TCP_INFO of a connected TCP socket.
pub fn read(socket: &impl crate::os::AsSocket) -> Option<TcpInfo> {
    crate::os::tcp_info(socket)
}

/// Why a single stream falls short, from the sender's TCP_INFO, as one
/// sentence with what to do; None when nothing stands out. `window` is the
/// socket buffer the user asked for (`--window`): then that cap, not a
/// sysctl, is what limited the stream; `spell` names that setting. What to
/// change on the receiver or the sender is worded for this machine's platform
/// (`crate::os::RECEIVE_WINDOW_ADVICE`, `crate::os::SEND_BUFFER_ADVICE`):
/// Linux's sysctls, Windows' autotuning.
pub fn explain(info: &TcpInfo, window: Option<u32>, spell: crate::setting::NetSpelling) -> Option<String> {
    if !info.has_limits {
        return None;
    }
    let rwnd = info.rwnd_limited_share();
    let sndbuf = info.sndbuf_limited_share();
    if let Some(asked) = window.filter(|_| rwnd.max(sndbuf) >= 0.2) {
        let which = if rwnd >= sndbuf { "receive window" } else { "send buffer" };
        let window = spell(crate::setting::NetSetting::Window);
        return Some(format!(
            "{which} limited {:.0}% of the time by the {window} {} asked for: a larger {window} (or none, the kernel's autotuning) lets the stream go faster",
            rwnd.max(sndbuf) * 100.0,
            headroom_units::format_size(u64::from(asked))
        ));
    }
    if rwnd >= 0.2 && rwnd >= sndbuf {
        Some(format!("receive window limited {:.0}% of the time: {}", rwnd * 100.0, crate::os::RECEIVE_WINDOW_ADVICE))
    } else if sndbuf >= 0.2 {
        Some(format!("send buffer limited {:.0}% of the time: {}", sndbuf * 100.0, crate::os::SEND_BUFFER_ADVICE))
    } else if info.retransmits > 0 && info.busy_us > 0 {
        Some(format!(
            "network limited (congestion window {} KiB, {} retransmits, smoothed RTT {:.2} ms): the path, not a buffer, sets the pace",
            info.cwnd_bytes / 1024,
            info.retransmits,
            info.srtt_us as f64 / 1000.0
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_live_socket_and_explains_limits() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = read(&c).expect("TCP_INFO on a connected socket");
        assert!(info.snd_mss > 0);
        let limited = TcpInfo { busy_us: 1000, rwnd_limited_us: 800, has_limits: true, ..Default::default() };
        let explain = |info, window| explain(info, window, crate::setting::test_flags);
        let advice = explain(&limited, None).unwrap();
        assert!(advice.contains("receive window limited 80%") && advice.ends_with(crate::os::RECEIVE_WINDOW_ADVICE));
        // Issue 29.4: with --window 12K the cap the user set is what to change, not a sysctl.
        let capped = explain(&limited, Some(12 * 1024)).unwrap();
        assert!(capped.contains("--window 12.00 KiB") && capped.contains("a larger --window"), "{capped}");
        assert!(!capped.contains("rmem_max"), "{capped}");
        let sndbuf = TcpInfo { busy_us: 1000, sndbuf_limited_us: 500, has_limits: true, ..Default::default() };
        let advice = explain(&sndbuf, None).unwrap();
        assert!(advice.contains("send buffer limited 50%") && advice.ends_with(crate::os::SEND_BUFFER_ADVICE));
    }

    #[test]
    fn a_figure_one_stream_lacks_is_absent_from_the_merge_never_zero() {
        let linux = TcpInfo { srtt_us: 300, rttvar_us: Some(50), pmtu: Some(1500), ..Default::default() };
        let windows = TcpInfo { srtt_us: 100, ..Default::default() };
        let both = TcpInfo::merge(&[linux.clone(), windows]).unwrap();
        assert_eq!((both.srtt_us, both.rttvar_us, both.pmtu), (200, None, None));
        let json = serde_json::to_value(&both).unwrap();
        assert!(json.get("rttvar_us").is_none() && json.get("pmtu").is_none(), "{json}");
        let two =
            TcpInfo::merge(&[linux.clone(), TcpInfo { rttvar_us: Some(150), pmtu: Some(9000), ..linux }]).unwrap();
        assert_eq!((two.rttvar_us, two.pmtu), (Some(100), Some(9000)));
    }
}
