//! Statistics over measurements: latency histograms (HDR) and UDP receive
//! accounting (sequence gaps, reordering, RFC 3550 jitter).

use hdrhistogram::Histogram;
use headroom_result::Latency;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Round-trip times in nanoseconds.
#[derive(Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    sum: f64,
    sum_sq: f64,
}

impl std::fmt::Debug for LatencyRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LatencyRecorder({} values)", self.count())
    }
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder {
            // 1 ns .. 1 h at 3 significant digits.
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds"),
            sum: 0.0,
            sum_sq: 0.0,
        }
    }
}

impl LatencyRecorder {
    /// Records one round trip.
    pub fn record(&mut self, d: Duration) {
        let ns = (d.as_nanos() as u64).clamp(1, 3_600_000_000_000);
        let _ = self.hist.record(ns);
        self.sum += ns as f64;
        self.sum_sq += (ns as f64) * (ns as f64);
    }

    /// Round trips recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Mean, percentiles, min, max and standard deviation; None when empty.
    pub fn latency(&self) -> Option<Latency> {
        let n = self.hist.len();
        if n == 0 {
            return None;
        }
        let mean = self.sum / n as f64;
        let var = (self.sum_sq / n as f64 - mean * mean).max(0.0);
        Some(Latency {
            mean,
            p50: self.hist.value_at_quantile(0.5) as f64,
            p99: self.hist.value_at_quantile(0.99) as f64,
            p999: self.hist.value_at_quantile(0.999) as f64,
            max: self.hist.max() as f64,
            min: Some(self.hist.min() as f64),
            stddev: Some(var.sqrt()),
        })
    }

    /// Non-empty buckets as (upper edge ns, count).
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.hist
            .iter_recorded()
            .map(|v| (self.hist.highest_equivalent(v.value_iterated_to()), v.count_at_value()))
            .collect()
    }
}

/// What a UDP receiver saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpRecvSummary {
    /// Highest sequence number seen (= packets the sender sent, if the last arrived).
    pub packets: u64,
    /// Datagrams received.
    pub received: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Sequence gaps minus late arrivals.
    pub lost: i64,
    /// Datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// RFC 3550 interarrival jitter, seconds.
    pub jitter_s: f64,
}

impl UdpRecvSummary {
    /// The summary of several streams: counts add up, jitter is the worst stream's.
    pub fn merge(self, other: UdpRecvSummary) -> UdpRecvSummary {
        UdpRecvSummary {
            packets: self.packets + other.packets,
            received: self.received + other.received,
            bytes: self.bytes + other.bytes,
            lost: self.lost + other.lost,
            out_of_order: self.out_of_order + other.out_of_order,
            jitter_s: self.jitter_s.max(other.jitter_s),
        }
    }

    /// Share of the datagrams lost, 0..1.
    pub fn loss_ratio(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            (self.lost.max(0) as f64 / self.packets as f64).min(1.0)
        }
    }
}

/// Accounts datagrams as they arrive (iperf3's method, so figures match).
#[derive(Debug, Default, Clone)]
pub struct UdpRecvStats {
    /// The figures so far.
    pub summary: UdpRecvSummary,
    prev_transit: Option<f64>,
}

impl UdpRecvStats {
    /// One datagram: its sequence number (from 1), the sender's timestamp
    /// and our arrival time (both seconds on their own clocks) and its size.
    pub fn record(&mut self, seq: u64, sent_s: f64, arrived_s: f64, bytes: usize) {
        let s = &mut self.summary;
        s.received += 1;
        s.bytes += bytes as u64;
        // Saturating: a peer's sequence numbers are untrusted, and a jump
        // beyond i64 must not wrap the loss count negative.
        if seq > s.packets {
            let gap = i64::try_from(seq - s.packets - 1).unwrap_or(i64::MAX);
            s.lost = s.lost.saturating_add(gap);
            s.packets = seq;
        } else {
            s.out_of_order += 1;
            s.lost = s.lost.saturating_sub(1);
        }
        // Only differences of transit times mean anything: the clocks differ.
        let transit = arrived_s - sent_s;
        if let Some(prev) = self.prev_transit {
            let d = (transit - prev).abs();
            s.jitter_s += (d - s.jitter_s) / 16.0;
        }
        self.prev_transit = Some(transit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_summary() {
        let mut r = LatencyRecorder::default();
        for us in [100u64, 200, 300] {
            r.record(Duration::from_micros(us));
        }
        let l = r.latency().unwrap();
        assert!((l.mean - 200_000.0).abs() < 1.0);
        assert!((l.min.unwrap() - 100_000.0).abs() < 200.0);
        assert!(l.stddev.unwrap() > 80_000.0);
        assert!(LatencyRecorder::default().latency().is_none());
    }

    #[test]
    fn udp_loss_and_reorder() {
        let mut s = UdpRecvStats::default();
        for (seq, t) in [(1, 0.0), (2, 0.001), (4, 0.003), (3, 0.002), (6, 0.005)] {
            s.record(seq, t, t + 0.0001, 100);
        }
        assert_eq!(s.summary.packets, 6);
        assert_eq!(s.summary.lost, 1); // 5 missing; 3 arrived late
        assert_eq!(s.summary.out_of_order, 1);
        assert!(s.summary.jitter_s < 1e-9);
        // A hostile sequence jump saturates the loss count instead of wrapping it negative.
        let mut h = UdpRecvStats::default();
        h.record(1, 0.0, 0.0, 1);
        h.record(u64::MAX, 0.0, 0.0, 1);
        assert_eq!(h.summary.lost, i64::MAX);
        let mut j = UdpRecvStats::default();
        j.record(1, 0.0, 0.0, 1);
        j.record(2, 0.0, 0.016, 1);
        assert!((j.summary.jitter_s - 0.001).abs() < 1e-9);
    }
}
