//! Detectors over per-second samples: periodic dips, latency drift and link
//! flaps. (The write-cache cliff lives in `crate::cliff`, shared with
//! `disk --preset sustained`.)
//!
//! Every detector is a pure function: series or log lines in, findings out.
//! No I/O, no clocks, no printing, so each is tested with synthetic series,
//! including noise-only ones that must produce no detection. Algorithms and
//! thresholds are documented in docs/detectors.md; the constants here are the
//! ones that page names.

mod drift;
mod flaps;
mod periodic;

pub use drift::{latency_drift, DriftBucket, DriftConfig, LatencyDrift, LatencyPoint};
pub use flaps::{
    around_flap, flaps_from_link_events, flaps_from_observations, merge_flaps, parse_kernel_log_line, parse_utc_stamp,
    parse_vmkernel_line, AroundFlap, Flap, FlapSource, FlapUpdate, LinkEvent, LinkEventKind, LinkObservation,
    LinkTracker, LogFlapTracker,
};
pub use periodic::{dips_across, find_dips, periodic_dips, periodic_dips_across, Dip, DipConfig, PeriodicDips, Point};

/// Median of a slice (NaN-free); `None` when empty. Sorts a copy.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Least-squares line through (x, y): (slope, intercept, standard error of
/// the slope). `None` with fewer than 3 points or no spread in x.
pub(crate) fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    let sse: f64 = points.iter().map(|p| (p.1 - (intercept + slope * p.0)).powi(2)).sum();
    let se = (sse / (nf - 2.0) / sxx).sqrt();
    Some((slope, intercept, se))
}

#[cfg(test)]
pub(crate) mod testkit {
    /// A tiny deterministic PRNG (xorshift64*) so noise in tests is repeatable
    /// without a dependency.
    pub struct Noise(u64);
    impl Noise {
        pub fn new(seed: u64) -> Self {
            Noise(seed.max(1))
        }
        /// Uniform in [0, 1).
        pub fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Approximately normal (sum of 12 uniforms), mean 0, sd 1.
        pub fn gauss(&mut self) -> f64 {
            (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0
        }
    }
}
