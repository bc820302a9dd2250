//! Latency drift: mean and p99 latency per time bucket (per hour by default:
//! the "write latency over 24 hours" view) and a least-squares trend.
//!
//! Algorithm (docs/detectors.md):
//! - Buckets of [`DriftConfig::bucket_s`] seconds from the first sample; per
//!   bucket the mean of the per-second mean latencies and the mean of the
//!   per-second p99s (a "typical p99 in that hour"; an hour's exact p99 would
//!   need the merged histograms).
//! - Trend: least squares of per-second mean latency against time. Drift is
//!   reported when the fitted line changes by at least
//!   `min_relative_change` of its starting value over the span AND the slope
//!   is at least `min_t_stat` standard errors from zero, so noise does not
//!   become a trend and a tiny-but-significant slope over a day is not
//!   alarming.

use super::least_squares;
use headroom_units::format_latency;
use serde::{Deserialize, Serialize};

/// One per-second latency sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// Seconds on any clock that only moves forward (the soak passes seconds
    /// since its start); buckets start at the first point's time.
    pub t_s: f64,
    /// Mean I/O latency over that second, nanoseconds; points that are not
    /// finite and above zero are dropped.
    pub mean_ns: f64,
    /// The second's 99th-percentile latency, nanoseconds; None when the
    /// probe did not record one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<f64>,
}

/// Thresholds of the drift detector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftConfig {
    /// Width of one bucket, seconds (3600: per hour).
    pub bucket_s: f64,
    /// Least change of the fitted line over the span, as a share of its start.
    pub min_relative_change: f64,
    /// Least |slope| / standard error of the slope.
    pub min_t_stat: f64,
    /// Fewest samples for a trend.
    pub min_samples: usize,
}

impl Default for DriftConfig {
    fn default() -> Self {
        DriftConfig { bucket_s: 3600.0, min_relative_change: 0.2, min_t_stat: 5.0, min_samples: 30 }
    }
}

/// One bucket of the drift view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftBucket {
    /// Start of the bucket, seconds on the input clock.
    pub start_s: f64,
    /// How many per-second points fell in the bucket (at least 1).
    pub samples: usize,
    /// Mean of the points' mean latencies, nanoseconds.
    pub mean_ns: f64,
    /// Mean of the points' p99s, nanoseconds (a typical p99, not the
    /// bucket's exact one); None when no point in the bucket had a p99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<f64>,
}

/// The drift view and its trend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyDrift {
    /// The per-bucket view in time order; buckets with no point are left out.
    pub buckets: Vec<DriftBucket>,
    /// Slope of mean latency, ns per hour.
    pub slope_ns_per_hour: f64,
    /// Slope of the per-second p99, ns per hour, when p99s were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_slope_ns_per_hour: Option<f64>,
    /// Fitted mean latency at the first sample, ns.
    pub fitted_start_ns: f64,
    /// Fitted mean latency at the last sample, ns.
    pub fitted_end_ns: f64,
    /// (end - start) / start of the fitted line.
    pub relative_change: f64,
    /// Measured mean latency at the start: the mean of the per-second means
    /// in the first [`EDGE_S`] seconds (a tenth of a shorter span), ns.
    #[serde(default)]
    pub measured_start_ns: f64,
    /// The same over the last [`EDGE_S`] seconds, ns.
    #[serde(default)]
    pub measured_end_ns: f64,
    /// |slope| / standard error of the slope.
    pub t_stat: f64,
    /// Whether the trend passes both thresholds.
    pub drifting: bool,
}

/// How much of each end of the series the measured start and end average:
/// a minute, or a tenth of a shorter span.
pub const EDGE_S: f64 = 60.0;

impl LatencyDrift {
    /// "mean latency rose from 1.2 ms in the first minute to 3.4 ms in the
    /// last (+183%; the fitted trend +170%, +92 us/h) over 24.0 h": the change
    /// the user can check against the samples leads, the fit (what decided
    /// that this is drift) follows.
    pub fn describe(&self, span_s: f64) -> String {
        let measured = self.measured_change();
        let direction = if measured >= 0.0 { "rose" } else { "fell" };
        let edge =
            if span_s >= 10.0 * EDGE_S { "minute".to_string() } else { super::periodic::format_span(span_s / 10.0) };
        format!(
            "mean latency {direction} from {} in the first {edge} to {} in the last ({:+.0}%; the fitted trend {:+.0}%, {}/h) over {}",
            format_latency(self.measured_start_ns),
            format_latency(self.measured_end_ns),
            measured * 100.0,
            self.relative_change * 100.0,
            format_signed_ns(self.slope_ns_per_hour),
            super::periodic::format_span(span_s),
        )
    }

    /// (end - start) / start of the measured ends.
    pub fn measured_change(&self) -> f64 {
        if self.measured_start_ns > 0.0 {
            (self.measured_end_ns - self.measured_start_ns) / self.measured_start_ns
        } else {
            0.0
        }
    }
}

/// Mean of the per-second means within `edge_s` of the series' first
/// point, or of its last with `at_end` (never empty: the end point itself counts).
fn edge_mean(points: &[&LatencyPoint], edge_s: f64, at_end: bool) -> f64 {
    let (first, last) = (points[0].t_s, points[points.len() - 1].t_s);
    let inside: Vec<f64> = points
        .iter()
        .filter(|p| if at_end { p.t_s >= last - edge_s } else { p.t_s <= first + edge_s })
        .map(|p| p.mean_ns)
        .collect();
    inside.iter().sum::<f64>() / inside.len() as f64
}

fn format_signed_ns(ns: f64) -> String {
    if ns >= 0.0 {
        format!("+{}", format_latency(ns))
    } else {
        format!("-{}", format_latency(-ns))
    }
}

/// Buckets and trend of a latency series in time order. `None` with fewer
/// than `min_samples` samples.
pub fn latency_drift(points: &[LatencyPoint], config: &DriftConfig) -> Option<LatencyDrift> {
    let points: Vec<&LatencyPoint> = points.iter().filter(|p| p.mean_ns.is_finite() && p.mean_ns > 0.0).collect();
    if points.len() < config.min_samples.max(3) {
        return None;
    }
    let origin = points[0].t_s;
    let mut buckets: Vec<DriftBucket> = Vec::new();
    let mut p99_sum = 0.0;
    let mut p99_count = 0usize;
    let close = |b: &mut DriftBucket, p99_sum: &mut f64, p99_count: &mut usize| {
        b.mean_ns /= b.samples as f64;
        b.p99_ns = (*p99_count > 0).then(|| *p99_sum / *p99_count as f64);
        *p99_sum = 0.0;
        *p99_count = 0;
    };
    for p in &points {
        let start = origin + ((p.t_s - origin) / config.bucket_s).floor() * config.bucket_s;
        if buckets.last().is_none_or(|b| b.start_s != start) {
            if let Some(b) = buckets.last_mut() {
                close(b, &mut p99_sum, &mut p99_count);
            }
            buckets.push(DriftBucket { start_s: start, samples: 0, mean_ns: 0.0, p99_ns: None });
        }
        let b = buckets.last_mut().expect("pushed above");
        b.samples += 1;
        b.mean_ns += p.mean_ns;
        if let Some(p99) = p.p99_ns.filter(|v| v.is_finite()) {
            p99_sum += p99;
            p99_count += 1;
        }
    }
    if let Some(b) = buckets.last_mut() {
        close(b, &mut p99_sum, &mut p99_count);
    }

    let hours = |t: f64| (t - origin) / 3600.0;
    let mean_fit: Vec<(f64, f64)> = points.iter().map(|p| (hours(p.t_s), p.mean_ns)).collect();
    let (slope, intercept, se) = least_squares(&mean_fit)?;
    let p99_fit: Vec<(f64, f64)> = points.iter().filter_map(|p| p.p99_ns.map(|v| (hours(p.t_s), v))).collect();
    let p99_slope = least_squares(&p99_fit).map(|(s, _, _)| s);
    let end_h = hours(points[points.len() - 1].t_s);
    let fitted_start = intercept;
    let fitted_end = intercept + slope * end_h;
    let relative_change = if fitted_start.abs() > 0.0 { (fitted_end - fitted_start) / fitted_start.abs() } else { 0.0 };
    let t_stat = if se > 0.0 {
        (slope / se).abs()
    } else if slope != 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let span = points[points.len() - 1].t_s - origin;
    let edge = EDGE_S.min(span / 10.0);
    Some(LatencyDrift {
        measured_start_ns: edge_mean(&points, edge, false),
        measured_end_ns: edge_mean(&points, edge, true),
        buckets,
        slope_ns_per_hour: slope,
        p99_slope_ns_per_hour: p99_slope,
        fitted_start_ns: fitted_start,
        fitted_end_ns: fitted_end,
        relative_change,
        t_stat,
        drifting: relative_change.abs() >= config.min_relative_change && t_stat >= config.min_t_stat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::testkit::Noise;

    fn series(hours: f64, start_ns: f64, end_ns: f64, noise: f64, seed: u64) -> Vec<LatencyPoint> {
        let mut rng = Noise::new(seed);
        let n = (hours * 3600.0) as usize;
        (0..n)
            .map(|i| {
                let t = i as f64;
                let level = start_ns + (end_ns - start_ns) * t / (n as f64);
                let mean = level * (1.0 + noise * rng.gauss());
                LatencyPoint { t_s: t, mean_ns: mean, p99_ns: Some(mean * 3.0) }
            })
            .collect()
    }

    #[test]
    fn write_latency_creeping_up_over_a_day() {
        let points = series(24.0, 1.0e6, 3.0e6, 0.2, 5);
        let drift = latency_drift(&points, &DriftConfig::default()).expect("enough samples");
        assert!(drift.drifting);
        assert_eq!(drift.buckets.len(), 24);
        assert!((drift.slope_ns_per_hour - 2.0e6 / 24.0).abs() < 2.0e3, "{}", drift.slope_ns_per_hour);
        assert!((drift.relative_change - 2.0).abs() < 0.05);
        let first = &drift.buckets[0];
        let last = &drift.buckets[23];
        assert_eq!(first.samples, 3600);
        assert!(last.mean_ns > 2.8e6 && first.mean_ns < 1.1e6);
        assert!(last.p99_ns.unwrap() > 8.4e6);
        let p99_slope = drift.p99_slope_ns_per_hour.unwrap();
        assert!((p99_slope - 3.0 * 2.0e6 / 24.0).abs() < 1e4);
        assert!(drift.describe(24.0 * 3600.0).contains("rose"), "{}", drift.describe(86400.0));
    }

    #[test]
    fn the_headline_says_the_measured_change_and_the_fit_after_it() {
        // Flat at 1 ms for most of the day, then doubling in the last hours:
        // the first and last minutes moved +100%, a straight fit says otherwise.
        let points: Vec<LatencyPoint> = (0..86_400)
            .map(|i| {
                let t = i as f64;
                let mean = if t < 72_000.0 { 1.0e6 } else { 1.0e6 + 1.0e6 * (t - 72_000.0) / 14_340.0 };
                LatencyPoint { t_s: t, mean_ns: mean.min(2.0e6), p99_ns: None }
            })
            .collect();
        let drift = latency_drift(&points, &DriftConfig::default()).expect("enough samples");
        assert!((drift.measured_change() - 1.0).abs() < 0.01, "{}", drift.measured_change());
        assert!((drift.relative_change - 1.0).abs() > 0.05, "the fit differs: {}", drift.relative_change);
        let text = drift.describe(86_400.0);
        assert!(text.contains("in the first minute") && text.contains("(+100%; the fitted trend"), "{text}");
    }

    #[test]
    fn falling_latency_is_drift_too() {
        let points = series(2.0, 5.0e5, 2.0e5, 0.1, 9);
        let drift = latency_drift(&points, &DriftConfig::default()).unwrap();
        assert!(drift.drifting && drift.relative_change < -0.5);
    }

    #[test]
    fn noise_only_is_not_drift() {
        for seed in 1..15 {
            let points = series(6.0, 70e3, 70e3, 0.3, seed);
            let drift = latency_drift(&points, &DriftConfig::default()).unwrap();
            assert!(!drift.drifting, "seed {seed}: {drift:?}");
            assert!(drift.relative_change.abs() < 0.05);
        }
    }

    #[test]
    fn tiny_significant_slope_is_not_alarming() {
        // +5% over 24 h with little noise: significant, but below 20%.
        let points = series(24.0, 1.0e6, 1.05e6, 0.01, 3);
        let drift = latency_drift(&points, &DriftConfig::default()).unwrap();
        assert!(drift.t_stat > 5.0);
        assert!(!drift.drifting);
    }

    #[test]
    fn too_few_samples() {
        let points = series(0.005, 1.0, 2.0, 0.0, 1);
        assert!(latency_drift(&points, &DriftConfig::default()).is_none());
    }
}
