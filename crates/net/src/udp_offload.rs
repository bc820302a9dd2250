//! UDP segmentation offload arithmetic (`net --gsro`), as pure functions:
//! how many datagrams one send hands the kernel (GSO: UDP_SEGMENT) without
//! outrunning the rate, and where one coalesced receive (GRO: UDP_GRO)
//! splits back into the datagrams that were sent. The system calls are in
//! `os/`, the loops in `datapath`.
//!
//! Every datagram keeps its own header (sequence number, send time): a
//! burst is only fewer system calls, so loss, reordering and jitter stay
//! counted per datagram.

use std::ops::Range;

/// The most datagrams one GSO send carries: Linux's UDP_MAX_SEGMENTS was 64
/// until 6.2 (128 since); the lower holds on every kernel that has GSO.
pub const MAX_SEGMENTS: usize = 64;

/// The most payload one send may carry: a UDP length is 16 bits, less the
/// UDP and (IPv6's, the larger) IP header. The kernel refuses more with
/// EMSGSIZE, GSO or not.
pub const MAX_SEND_BYTES: usize = 65_535 - 8 - 40;

/// How long a burst the pacing aims at: what the rate allows in a
/// millisecond, so a modest rate still sends several datagrams per system
/// call while its traffic stays smooth at any coarser time scale.
const BURST_WINDOW_S: f64 = 1e-3;

/// The most datagrams of `len` bytes one send may carry.
pub fn max_burst(len: usize) -> usize {
    (MAX_SEND_BYTES / len.max(1)).clamp(1, MAX_SEGMENTS)
}

/// The burst the pacing waits for at `bytes_per_sec`: a millisecond of the
/// rate, at least one datagram, at most `max`.
pub fn burst_goal(bytes_per_sec: f64, len: usize, max: usize) -> usize {
    let per_window = bytes_per_sec * BURST_WINDOW_S / len.max(1) as f64;
    (per_window.floor() as usize).clamp(1, max.max(1))
}

/// How many datagrams of `len` bytes to send now, when the rate allows
/// `owed` bytes more than were sent (negative: ahead of it). None until a
/// burst of `goal` is due, else as many as are due (the last may overshoot
/// by less than a datagram, as one-at-a-time pacing does), at most `max`
/// and no more than `left` bytes need (a fixed-size transfer).
pub fn datagrams_due(owed: f64, len: usize, goal: usize, max: usize, left: Option<u64>) -> Option<usize> {
    let len_f = len.max(1) as f64;
    if owed < (goal.max(1) - 1) as f64 * len_f {
        return None;
    }
    let due = (owed / len_f).floor() as usize + 1;
    let mut n = due.clamp(1, max.max(1));
    if let Some(left) = left {
        n = n.min(left.div_ceil(len.max(1) as u64).max(1) as usize);
    }
    Some(n)
}

/// The datagrams in `received` bytes of one receive, split at `segment`
/// bytes (the gso_size the kernel reported with a coalesced receive; the
/// last datagram may be shorter). None or 0: one datagram.
pub fn datagrams_in(received: usize, segment: Option<usize>) -> impl Iterator<Item = Range<usize>> {
    let step = segment.filter(|&s| s > 0).unwrap_or(received.max(1));
    (0..received).step_by(step).map(move |start| start..(start + step).min(received))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_fits_one_udp_length_and_the_kernels_segment_limit() {
        assert_eq!(max_burst(1448), 45, "45 x 1448 = 65160 bytes, the 46th would pass 65487");
        assert!(max_burst(1448) * 1448 <= MAX_SEND_BYTES && (max_burst(1448) + 1) * 1448 > MAX_SEND_BYTES);
        assert_eq!(max_burst(100), MAX_SEGMENTS);
        assert_eq!(max_burst(65_507), 1, "a datagram as long as UDP allows goes alone");
        assert_eq!(max_burst(0), MAX_SEGMENTS, "no division by zero");
    }

    #[test]
    fn the_burst_goal_is_a_millisecond_of_the_rate() {
        // 100 Mb/s = 12.5 MB/s: 12 500 bytes a millisecond, 8 datagrams of 1448.
        assert_eq!(burst_goal(12.5e6, 1448, 45), 8);
        assert_eq!(burst_goal(125e3, 1448, 45), 1, "1 Mb/s: one at a time, as without GSO");
        assert_eq!(burst_goal(50e9, 1448, 45), 45, "an unlimited rate: the largest burst");
    }

    #[test]
    fn pacing_sends_what_is_due_and_never_runs_ahead_by_a_burst() {
        // Ahead of the rate: nothing.
        assert_eq!(datagrams_due(-1.0, 1000, 1, 64, None), None);
        // One at a time (goal 1): as soon as nothing is owed, one goes.
        assert_eq!(datagrams_due(0.0, 1000, 1, 64, None), Some(1));
        // Goal 8: waits until 7 are owed, then sends the 8.
        assert_eq!(datagrams_due(6_999.0, 1000, 8, 64, None), None);
        assert_eq!(datagrams_due(7_000.0, 1000, 8, 64, None), Some(8));
        // Behind the rate (a slow peer, an unlimited rate): the largest burst.
        assert_eq!(datagrams_due(1e9, 1000, 8, 45, None), Some(45));
        // A fixed transfer: no datagram past the last byte asked.
        assert_eq!(datagrams_due(1e9, 1000, 8, 45, Some(2_500)), Some(3));
        assert_eq!(datagrams_due(1e9, 1000, 8, 45, Some(0)), Some(1));
    }

    #[test]
    fn a_coalesced_receive_splits_into_the_datagrams_sent() {
        let parts: Vec<_> = datagrams_in(3 * 1448 + 100, Some(1448)).collect();
        assert_eq!(parts, vec![0..1448, 1448..2896, 2896..4344, 4344..4444]);
        assert_eq!(datagrams_in(1448, Some(1448)).count(), 1);
        // No gso_size: the kernel handed one datagram.
        assert_eq!(datagrams_in(900, None).collect::<Vec<_>>(), vec![0..900]);
        assert_eq!(datagrams_in(900, Some(0)).collect::<Vec<_>>(), vec![0..900]);
        assert_eq!(datagrams_in(0, Some(1448)).count(), 0, "an empty datagram carries no header");
    }

    #[test]
    fn every_split_datagram_counts_once_with_its_own_sequence_number() {
        use crate::stats::UdpRecvStats;
        use crate::udp_header::UdpHeader;
        let header = UdpHeader::Iperf3 { seq64: true };
        let (len, n) = (1448, 45);
        let mut burst = vec![0u8; len * n];
        for (i, d) in burst.chunks_mut(len).enumerate() {
            // Seq 3 is missing from the burst: 2 then 4.
            let seq = if i < 2 { i as u64 + 1 } else { i as u64 + 2 };
            header.write(d, seq, std::time::Duration::from_secs(1));
        }
        let mut stats = UdpRecvStats::default();
        for r in datagrams_in(burst.len(), Some(len)) {
            let (seq, sent) = header.parse(&burst[r.clone()]).unwrap();
            stats.record(seq, sent, 1.0, r.len());
        }
        let s = stats.summary;
        assert_eq!((s.received, s.bytes, s.lost, s.out_of_order), (45, 45 * 1448, 1, 0));
    }
}
