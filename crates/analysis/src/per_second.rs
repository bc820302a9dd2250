//! Per-second samples from finer ones. Short tests are sampled every 100 ms
//! or so (for charts and for compare), but the spread of sub-second samples
//! is wider than the second-to-second noise the verdict's "level" rule is
//! documented to use: over tenths, a disk and a network 20% apart could be
//! called level. That rule works on whole seconds.

use headroom_result::Sample;

/// A second shorter than this (the run's last, cut short) is dropped: its
/// figure is noisier than the others'.
const SHORTEST_SECOND_S: f64 = 0.5;

/// The samples merged into whole seconds of the run: second k covers
/// (k-1, k] s. Throughput and IOPS are time-weighted means; latencies are
/// weighted by the operations behind them (a p99 of sub-second p99s is a
/// mean of them, an approximation: the exact value needs the histogram).
/// Samples already one second long come back unchanged.
pub fn per_second(samples: &[Sample]) -> Vec<Sample> {
    let mut seconds: Vec<Second> = Vec::new();
    let mut previous_end = 0.0;
    for s in samples {
        let length = (s.t_s - previous_end).max(0.0);
        previous_end = s.t_s;
        let index = (s.t_s - 1e-6).ceil().max(1.0);
        match seconds.last_mut() {
            Some(second) if second.index == index => second.add(s, length),
            _ => {
                let mut second = Second { index, ..Default::default() };
                second.add(s, length);
                seconds.push(second);
            }
        }
    }
    seconds.into_iter().filter(|s| s.length >= SHORTEST_SECOND_S).map(Second::sample).collect()
}

/// One second's sums while merging.
#[derive(Default)]
struct Second {
    index: f64,
    length: f64,
    bytes: f64,
    ops: Option<f64>,
    latency_mean_weighted: Option<f64>,
    latency_p99_weighted: Option<f64>,
}

impl Second {
    fn add(&mut self, s: &Sample, length: f64) {
        self.length += length;
        self.bytes += s.bytes_per_sec * length;
        let ops = s.iops.map(|iops| iops * length);
        if let Some(ops) = ops {
            *self.ops.get_or_insert(0.0) += ops;
        }
        // Without an operation count, each sample weighs by its length.
        let weight = ops.unwrap_or(length);
        if let Some(mean) = s.latency_ns_mean {
            *self.latency_mean_weighted.get_or_insert(0.0) += mean * weight;
        }
        if let Some(p99) = s.latency_ns_p99 {
            *self.latency_p99_weighted.get_or_insert(0.0) += p99 * weight;
        }
    }

    fn sample(self) -> Sample {
        let weight = self.ops.unwrap_or(self.length);
        let latency = |sum: Option<f64>| sum.filter(|_| weight > 0.0).map(|sum| sum / weight);
        Sample {
            t_s: self.index,
            bytes_per_sec: self.bytes / self.length,
            iops: self.ops.map(|ops| ops / self.length),
            latency_ns_mean: latency(self.latency_mean_weighted),
            latency_ns_p99: latency(self.latency_p99_weighted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64, bytes_per_sec: f64, iops: Option<f64>, latency: Option<f64>) -> Sample {
        Sample { t_s, bytes_per_sec, iops, latency_ns_mean: latency, latency_ns_p99: latency.map(|l| l * 2.0) }
    }

    #[test]
    fn one_second_samples_come_back_unchanged() {
        let xs: Vec<Sample> = (1..=5).map(|k| sample(k as f64, 100.0 * k as f64, Some(10.0), Some(5.0))).collect();
        let merged = per_second(&xs);
        assert_eq!(merged.len(), 5);
        for (a, b) in xs.iter().zip(&merged) {
            assert_eq!(a.t_s, b.t_s);
            assert!((a.bytes_per_sec - b.bytes_per_sec).abs() < 1e-9);
            assert_eq!(b.iops, Some(10.0));
            assert!((b.latency_ns_p99.unwrap() - 10.0).abs() < 1e-9);
        }
    }

    #[test]
    fn tenths_of_a_second_merge_into_time_weighted_seconds() {
        // 2.3 s of 100 ms samples: seconds 1 and 2 whole, 0.3 s left over and dropped.
        let xs: Vec<Sample> = (1..=23)
            .map(|k| {
                let t = k as f64 / 10.0;
                let rate = if t <= 1.0 + 1e-9 { 100.0 } else { 300.0 };
                sample(t, rate, Some(rate / 10.0), Some(rate))
            })
            .collect();
        let merged = per_second(&xs);
        assert_eq!(merged.len(), 2, "{:?}", merged.iter().map(|s| s.t_s).collect::<Vec<_>>());
        assert_eq!((merged[0].t_s, merged[1].t_s), (1.0, 2.0));
        assert!((merged[0].bytes_per_sec - 100.0).abs() < 1e-6);
        assert!((merged[1].bytes_per_sec - 300.0).abs() < 1e-6);
        assert!((merged[1].iops.unwrap() - 30.0).abs() < 1e-6);
        assert!((merged[1].latency_ns_mean.unwrap() - 300.0).abs() < 1e-6);
    }

    #[test]
    fn latencies_weigh_by_the_operations_behind_them() {
        // Half a second at 900 IOPS and 1 us, half at 100 IOPS and 9 us: 500 + 50 ops.
        let xs = [sample(0.5, 0.0, Some(900.0), Some(1000.0)), sample(1.0, 0.0, Some(100.0), Some(9000.0))];
        let merged = per_second(&xs);
        let expected = (450.0 * 1000.0 + 50.0 * 9000.0) / 500.0;
        assert!((merged[0].latency_ns_mean.unwrap() - expected).abs() < 1e-6);
        assert!((merged[0].iops.unwrap() - 500.0).abs() < 1e-6);
    }
}
