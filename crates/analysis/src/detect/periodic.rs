//! Periodic dips: samples that fall below a share of the rolling median, and
//! the period at which they recur ("12 dips, every 35 min +/- 1 min, each
//! ~40 s long, down to 120 MB/s").
//!
//! Algorithm (docs/detectors.md has the reasoning):
//! 1. Baseline: the rolling median over a centred window of
//!    [`DipConfig::window`] samples (by index, so gaps between soak cycles do
//!    not empty the window).
//! 2. Dip cores: runs of samples below `share` x baseline. Each core grows to
//!    neighbouring samples below `edge_share` x baseline, so a dip that
//!    straddles two one-second samples is weighed in full.
//! 3. A dip's time is the deficit-weighted centroid of its samples: a 1 s
//!    dip split 30/70 over two samples gets a sub-second position.
//! 4. Period: the periodogram of the dip times (a Rayleigh / phase-coherence
//!    scan, which needs no even sampling and tolerates missing dips when a
//!    soak cycles through several probes), then a least-squares fit of
//!    time = t0 + n x period for the best candidate. The largest period whose
//!    coherence is within 90% of the best is taken, so harmonics (period/2,
//!    period/3, which are just as coherent) are not reported.
//!
//! Across probes ([`periodic_dips_across`]): a soak cycles write, read, iops,
//! so a path's dip falls into whichever probe's turn is running. Each probe's
//! samples are judged against that probe's own baseline (steps 1-3), the dips
//! of all probes are pooled in time order (a dip cut in two by a probe switch
//! is one dip), and step 4 runs once on the pool: one period for the path,
//! not a multiple of it seen through one probe's turns.
//!
//! Long only through its unit tests (about 410 lines of code).

use super::{least_squares, median};
use serde::{Deserialize, Serialize};

/// One sample of a series: time in seconds (end of the interval) and value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// End of the sample's interval, seconds on any forward clock (the soak
    /// passes seconds since its start); dips and periods come out on it.
    pub t_s: f64,
    /// The measured figure, in whatever unit the caller uses (the soak passes
    /// bytes/s); dips, baselines and `describe`'s `show` keep that unit.
    pub value: f64,
}

impl Point {
    /// A sample ending at `t_s` seconds with `value`.
    pub fn new(t_s: f64, value: f64) -> Self {
        Point { t_s, value }
    }
}

/// Thresholds of the dip detector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DipConfig {
    /// A sample is in a dip when below `share` x the rolling median.
    pub share: f64,
    /// Neighbours below `edge_share` x the rolling median join a dip.
    pub edge_share: f64,
    /// Samples in the centred rolling-median window (odd).
    pub window: usize,
    /// Fewest dips before a period is reported.
    pub min_dips: usize,
    /// Least phase coherence (0..1) of the dip times at the period.
    pub min_coherence: f64,
    /// Largest jitter (rms residual of the fit) as a share of the period.
    pub max_jitter_share: f64,
    /// Least Rayleigh significance N x coherence^2 - ln(trial periods): how
    /// unlikely the coherence is for dips at random times, after the scan's
    /// many tries (3: a false alarm in about 5% of dip-only-noise series).
    pub min_significance: f64,
}

impl Default for DipConfig {
    fn default() -> Self {
        DipConfig {
            share: 0.7,
            edge_share: 0.9,
            window: 301,
            min_dips: 3,
            min_coherence: 0.8,
            max_jitter_share: 0.15,
            min_significance: 3.0,
        }
    }
}

/// One dip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dip {
    /// Start of the first sample in the dip (seconds, same clock as the input).
    pub start_s: f64,
    /// End of the last sample in the dip.
    pub end_s: f64,
    /// Deficit-weighted centre: the dip's position for the period search.
    pub center_s: f64,
    /// Time below `share` x baseline: the core samples x the sample interval.
    pub duration_s: f64,
    /// Lowest value in the dip.
    pub min_value: f64,
    /// The rolling median around the dip.
    pub baseline: f64,
    /// Throughput lost, in seconds at the baseline: sum of (1 - value /
    /// baseline) x interval. Weighs dips of different probes against each other.
    #[serde(default)]
    pub depth_s: f64,
    /// The probe whose samples showed the dip (cross-probe search only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
}

/// Dips that recur at a period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeriodicDips {
    /// Number of dips the period was fitted to (`dips.len()`).
    pub count: usize,
    /// Time between dips, seconds: the least-squares fit of the dip centres
    /// against cycle number, the fundamental rather than a harmonic.
    pub period_s: f64,
    /// Root-mean-square deviation of the dip times from the fitted grid.
    pub jitter_s: f64,
    /// Phase coherence of the dip times at `period_s` (1 = perfectly regular).
    pub coherence: f64,
    /// N x coherence^2 - ln(independent periods tried); see [`DipConfig::min_significance`].
    pub significance: f64,
    /// Mean of the dips' `duration_s`, seconds.
    pub mean_duration_s: f64,
    /// Lowest value over all dips.
    pub min_value: f64,
    /// Median baseline around the dips.
    pub baseline: f64,
    /// Lowest value / baseline over all dips (0.2: down to 20% of the level
    /// around it); the depth that compares across probes.
    #[serde(default)]
    pub min_share: f64,
    /// Probes whose turns showed dips, with how many each (cross-probe search).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<(String, usize)>,
    /// Every dip found, in time order.
    pub dips: Vec<Dip>,
}

impl PeriodicDips {
    /// "12 dips, every 35 min +/- 1 min, each ~40 s long, down to 120 MB/s",
    /// with values shown by `show` (e.g. a byte-rate formatter).
    pub fn describe(&self, show: impl Fn(f64) -> String) -> String {
        format!(
            "{} dips, every {} +/- {}, each ~{} long, down to {} (baseline {})",
            self.count,
            format_span(self.period_s),
            format_span(self.jitter_s),
            format_span(self.mean_duration_s),
            show(self.min_value),
            show(self.baseline)
        )
    }

    /// As [`PeriodicDips::describe`] for dips pooled across probes, whose
    /// values are in different units: depth as a share of each baseline.
    /// "9 dips in write (3), read (3), iops (3), every 6.0 s +/- 0.1 s, each
    /// ~1.5 s long, down to 12% of the probe's level".
    pub fn describe_across(&self) -> String {
        let seen: Vec<String> = self.probes.iter().map(|(p, n)| format!("{p} ({n})")).collect();
        format!(
            "{} dips in {}, every {} +/- {}, each ~{} long, down to {:.0}% of the probe's level",
            self.count,
            seen.join(", "),
            format_span(self.period_s),
            format_span(self.jitter_s),
            format_span(self.mean_duration_s),
            self.min_share * 100.0
        )
    }
}

/// "35 min", "4.0 s", "1.5 h": a span for sentences.
pub fn format_span(seconds: f64) -> String {
    if seconds >= 5400.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else if seconds >= 90.0 {
        format!("{:.0} min", seconds / 60.0)
    } else if seconds >= 10.0 {
        format!("{seconds:.0} s")
    } else {
        format!("{seconds:.1} s")
    }
}

/// The typical spacing of the samples (median of positive time steps).
fn sample_interval(points: &[Point]) -> f64 {
    let steps: Vec<f64> = points.windows(2).map(|w| w[1].t_s - w[0].t_s).filter(|d| *d > 0.0).collect();
    median(&steps).unwrap_or(1.0)
}

/// The centred rolling median of `values` over `window` samples, kept as a
/// sorted window so a day of one-second samples costs O(n x window) moves
/// rather than a sort per sample.
fn rolling_median(values: &[f64], window: usize) -> Vec<f64> {
    let n = values.len();
    let half = window.max(1) / 2;
    let mut sorted: Vec<f64> = Vec::with_capacity(2 * half + 1);
    let mut out = Vec::with_capacity(n);
    let (mut lo, mut hi) = (0usize, 0usize); // window is values[lo..hi]
    for i in 0..n {
        let want_lo = i.saturating_sub(half);
        let want_hi = (i + half + 1).min(n);
        while hi < want_hi {
            let v = values[hi];
            let at = sorted.partition_point(|x| x.total_cmp(&v).is_lt());
            sorted.insert(at, v);
            hi += 1;
        }
        while lo < want_lo {
            let v = values[lo];
            let at = sorted.partition_point(|x| x.total_cmp(&v).is_lt());
            sorted.remove(at);
            lo += 1;
        }
        let m = sorted.len();
        out.push(if m % 2 == 1 { sorted[m / 2] } else { (sorted[m / 2 - 1] + sorted[m / 2]) / 2.0 });
    }
    out
}

/// Finds the dips of a series (see the module doc). Points must be in time order.
pub fn find_dips(points: &[Point], config: &DipConfig) -> Vec<Dip> {
    if points.len() < 3 {
        return Vec::new();
    }
    let interval = sample_interval(points);
    let values: Vec<f64> = points.iter().map(|p| p.value).collect();
    let baseline = rolling_median(&values, config.window);
    let below = |i: usize, share: f64| baseline[i] > 0.0 && values[i] < share * baseline[i];
    // Two samples belong to one run only when adjacent in time, not across a gap.
    let adjacent = |i: usize| points[i + 1].t_s - points[i].t_s <= 1.5 * interval;

    let mut dips = Vec::new();
    let mut i = 0;
    while i < points.len() {
        if !below(i, config.share) {
            i += 1;
            continue;
        }
        let mut core_end = i; // inclusive
        while core_end + 1 < points.len() && adjacent(core_end) && below(core_end + 1, config.share) {
            core_end += 1;
        }
        let mut first = i;
        while first > 0 && adjacent(first - 1) && below(first - 1, config.edge_share) {
            first -= 1;
        }
        let mut last = core_end;
        while last + 1 < points.len() && adjacent(last) && below(last + 1, config.edge_share) {
            last += 1;
        }
        let (mut weight, mut weighted_t, mut min_value, mut depth) = (0.0, 0.0, f64::INFINITY, 0.0);
        for j in first..=last {
            let deficit = (baseline[j] - values[j]).max(0.0);
            depth += deficit / baseline[j] * interval;
            weight += deficit;
            weighted_t += deficit * (points[j].t_s - interval / 2.0);
            min_value = min_value.min(values[j]);
        }
        dips.push(Dip {
            start_s: points[first].t_s - interval,
            end_s: points[last].t_s,
            center_s: if weight > 0.0 { weighted_t / weight } else { points[i].t_s - interval / 2.0 },
            duration_s: (core_end - i + 1) as f64 * interval,
            min_value,
            baseline: median(&baseline[first..=last]).unwrap_or(0.0),
            depth_s: depth,
            probe: None,
        });
        i = last + 1;
    }
    dips
}

/// Phase coherence |mean(exp(2 pi i t / period))| of event times.
fn coherence(times: &[f64], period: f64) -> f64 {
    let (mut re, mut im) = (0.0, 0.0);
    for t in times {
        let phase = std::f64::consts::TAU * t / period;
        re += phase.cos();
        im += phase.sin();
    }
    (re * re + im * im).sqrt() / times.len() as f64
}

/// The dips of a series and, when they recur regularly, their period.
/// Returns `None` when there are fewer than `min_dips` dips or their times
/// are not regular (noise-only series and one-off dips land here).
pub fn periodic_dips(points: &[Point], config: &DipConfig) -> Option<PeriodicDips> {
    period_of(find_dips(points, config), config)
}

/// The dips of several probes' series, each judged against its own
/// baseline, pooled in time order (see the module doc). Dips of different
/// probes less than two sample intervals apart (a dip cut by a probe switch)
/// are one dip. Series must be in time order and on one clock.
pub fn dips_across(series: &[(String, Vec<Point>)], config: &DipConfig) -> Vec<Dip> {
    let mut all: Vec<Dip> = Vec::new();
    let mut interval = f64::INFINITY;
    for (name, points) in series {
        if points.len() >= 2 {
            interval = interval.min(sample_interval(points));
        }
        all.extend(find_dips(points, config).into_iter().map(|d| Dip { probe: Some(name.clone()), ..d }));
    }
    let interval = if interval.is_finite() { interval } else { 1.0 };
    all.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let mut merged: Vec<Dip> = Vec::with_capacity(all.len());
    for d in all {
        match merged.last_mut() {
            Some(prev) if prev.probe != d.probe && d.start_s - prev.end_s <= 2.0 * interval => {
                let (wa, wb) = (prev.depth_s.max(1e-12), d.depth_s.max(1e-12));
                prev.center_s = (prev.center_s * wa + d.center_s * wb) / (wa + wb);
                // Depth and level of the side that lost more: values of two
                // probes are in different units.
                if d.depth_s > prev.depth_s {
                    prev.min_value = d.min_value;
                    prev.baseline = d.baseline;
                    prev.probe = d.probe.clone();
                }
                prev.end_s = prev.end_s.max(d.end_s);
                prev.duration_s += d.duration_s;
                prev.depth_s += d.depth_s;
            }
            _ => merged.push(d),
        }
    }
    merged
}

/// [`periodic_dips`] over several probes' series: one period for the path
/// (see the module doc); `probes` counts the dips each probe showed.
pub fn periodic_dips_across(series: &[(String, Vec<Point>)], config: &DipConfig) -> Option<PeriodicDips> {
    let mut found = period_of(dips_across(series, config), config)?;
    for (name, _) in series {
        let n = found.dips.iter().filter(|d| d.probe.as_ref() == Some(name)).count();
        if n > 0 {
            found.probes.push((name.clone(), n));
        }
    }
    Some(found)
}

/// Step 4 of the module doc: the period of `dips`, if they recur regularly.
fn period_of(dips: Vec<Dip>, config: &DipConfig) -> Option<PeriodicDips> {
    if dips.len() < config.min_dips.max(3) {
        return None;
    }
    let times: Vec<f64> = dips.iter().map(|d| d.center_s).collect();
    let span = times[times.len() - 1] - times[0];
    let min_gap = times.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
    if span <= 0.0 || min_gap <= 0.0 {
        return None;
    }
    // Periods shorter than ~the closest two dips would put several cycles
    // between neighbours: any set of times fits such a fine grid.
    let (p_min, p_max) = (0.75 * min_gap, span / 2.0);
    if p_min > p_max {
        return None;
    }
    // Scan in frequency, oversampled 20x relative to the peak width 1/span.
    let (f_lo, f_hi) = (1.0 / p_max, 1.0 / p_min);
    let step = 0.05 / span;
    let steps = ((f_hi - f_lo) / step).ceil().min(2_000_000.0) as usize;
    let scan: Vec<(f64, f64)> = (0..=steps)
        .map(|k| {
            let f = f_lo + (f_hi - f_lo) * k as f64 / steps.max(1) as f64;
            (1.0 / f, coherence(&times, 1.0 / f))
        })
        .collect();
    let best = scan.iter().map(|s| s.1).fold(0.0, f64::max);
    if best < config.min_coherence {
        return None;
    }
    // Largest period (lowest frequency) that is nearly as coherent: the
    // fundamental, not a harmonic. Take the local peak there.
    let first = scan.iter().position(|s| s.1 >= 0.9 * best)?;
    let mut peak = first;
    while peak + 1 < scan.len() && scan[peak + 1].1 >= scan[peak].1 {
        peak += 1;
    }
    let candidate = scan[peak].0;

    // Refine: least squares of time against cycle number.
    let fit: Vec<(f64, f64)> = times.iter().map(|t| (((t - times[0]) / candidate).round(), *t)).collect();
    let (period, t0, _) = least_squares(&fit).unwrap_or((candidate, times[0], 0.0));
    if period <= 0.0 {
        return None;
    }
    let jitter = (fit.iter().map(|(n, t)| (t - (t0 + n * period)).powi(2)).sum::<f64>() / fit.len() as f64).sqrt();
    let coherence_at_period = coherence(&times, period);
    // Independent trial periods: the scan covers (f_hi - f_lo) x span peak widths.
    let trials = ((f_hi - f_lo) * span).max(1.0);
    let significance = times.len() as f64 * coherence_at_period.powi(2) - trials.ln();
    if jitter > config.max_jitter_share * period
        || coherence_at_period < config.min_coherence
        || significance < config.min_significance
    {
        return None;
    }
    let baselines: Vec<f64> = dips.iter().map(|d| d.baseline).collect();
    Some(PeriodicDips {
        count: dips.len(),
        period_s: period,
        jitter_s: jitter,
        coherence: coherence_at_period,
        significance,
        mean_duration_s: dips.iter().map(|d| d.duration_s).sum::<f64>() / dips.len() as f64,
        min_value: dips.iter().map(|d| d.min_value).fold(f64::INFINITY, f64::min),
        baseline: median(&baselines).unwrap_or(0.0),
        min_share: dips
            .iter()
            .filter(|d| d.baseline > 0.0)
            .map(|d| d.min_value / d.baseline)
            .fold(f64::INFINITY, f64::min)
            .min(1.0),
        probes: Vec::new(),
        dips,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::testkit::Noise;

    /// `n` one-second samples around `level` with `noise` relative sd, and
    /// `dip` applied where it returns a factor < 1.
    fn series(n: usize, level: f64, noise: f64, seed: u64, dip: impl Fn(f64) -> f64) -> Vec<Point> {
        let mut rng = Noise::new(seed);
        (1..=n)
            .map(|i| {
                let t = i as f64;
                Point::new(t, level * (1.0 + noise * rng.gauss()) * dip(t))
            })
            .collect()
    }

    #[test]
    fn thirty_five_minute_dips_over_seven_hours() {
        // 500 MB/s with 3% noise; every 35 min a 40 s dip to 120 MB/s, first at 10 min.
        let points = series(7 * 3600, 500e6, 0.03, 7, |t| {
            let phase = (t - 600.0).rem_euclid(2100.0);
            if t >= 600.0 && phase < 40.0 {
                0.24
            } else {
                1.0
            }
        });
        let found = periodic_dips(&points, &DipConfig::default()).expect("periodic dips");
        assert_eq!(found.count, 12, "{found:?}");
        assert!((found.period_s - 2100.0).abs() < 60.0, "period {}", found.period_s);
        assert!((found.mean_duration_s - 40.0).abs() <= 2.0, "duration {}", found.mean_duration_s);
        assert!(found.min_value < 140e6 && found.min_value > 100e6);
        let text = found.describe(|v| format!("{:.0} MB/s", v / 1e6));
        assert!(text.starts_with("12 dips, every 35 min +/- "), "{text}");
    }

    #[test]
    fn one_second_dip_every_four_seconds_straddling_samples() {
        // A 1 s outage starting at 0.3 s into every 4 s: each dip splits over
        // two one-second samples (70% / 30%).
        let points: Vec<Point> = (1..=20)
            .map(|i| {
                let t = i as f64;
                // Fraction of (t-1, t] during which the throttle is on.
                let on = |s: f64| {
                    let start = (s / 4.0).floor() * 4.0 + 0.3;
                    (start, start + 1.0)
                };
                let (a, b) = on(t - 1.0);
                let overlap = (b.min(t) - a.max(t - 1.0)).max(0.0);
                Point::new(t, 100e6 * (1.0 - overlap))
            })
            .collect();
        let found = periodic_dips(&points, &DipConfig::default()).expect("periodic dips");
        assert!((found.period_s - 4.0).abs() < 0.2, "period {}", found.period_s);
        assert_eq!(found.count, 5);
    }

    #[test]
    fn noise_only_has_no_detection() {
        let mut lone_dips = 0;
        for seed in 1..20 {
            // 4% noise: nothing below 70% of the median.
            let calm = series(3600, 300e6, 0.04, seed, |_| 1.0);
            assert!(find_dips(&calm, &DipConfig::default()).is_empty(), "seed {seed}");
            // 12% noise: a few lone samples dip, but never at a period.
            let rough = series(3600, 300e6, 0.12, seed, |_| 1.0);
            lone_dips += find_dips(&rough, &DipConfig::default()).len();
            assert!(periodic_dips(&rough, &DipConfig::default()).is_none(), "seed {seed}");
        }
        assert!(lone_dips > 0, "the rough series should tempt the detector");
    }

    #[test]
    fn irregular_dips_are_not_periodic() {
        // Nine dips at random times: dips found, no period claimed.
        for seed in 1..60u64 {
            let mut rng = Noise::new(seed * 977);
            let mut starts: Vec<f64> = (0..9).map(|_| 100.0 + rng.uniform() * 10_000.0).collect();
            starts.sort_by(f64::total_cmp);
            let points = series(10_400, 200e6, 0.03, seed, |t| {
                if starts.iter().any(|s| t >= *s && t < s + 10.0) {
                    0.2
                } else {
                    1.0
                }
            });
            let dips = find_dips(&points, &DipConfig::default());
            assert!(dips.len() >= 7, "seed {seed}: {} dips", dips.len());
            assert!(periodic_dips(&points, &DipConfig::default()).is_none(), "seed {seed}");
        }
    }

    #[test]
    fn missing_dips_still_give_the_period() {
        // Dips every 60 s, but every third one falls into a pause between
        // soak cycles (no samples there).
        let points: Vec<Point> = series(1800, 50e3, 0.02, 3, |t| if (t.rem_euclid(60.0)) < 5.0 { 0.1 } else { 1.0 })
            .into_iter()
            .filter(|p| (p.t_s / 60.0).floor() as i64 % 3 != 1 || p.t_s.rem_euclid(60.0) > 10.0)
            .collect();
        let found = periodic_dips(&points, &DipConfig::default()).expect("periodic");
        assert!((found.period_s - 60.0).abs() < 1.0, "period {}", found.period_s);
    }

    /// The default soak cycle over a path that dips: three probes at their
    /// own levels take turns of `turn` one-second samples, `switch` seconds
    /// apart; the path falls to 10% for `dip` seconds every `period`.
    fn cycled(
        total: f64,
        turn: usize,
        switch: f64,
        period: f64,
        dip: f64,
        first: f64,
        seed: u64,
    ) -> Vec<(String, Vec<Point>)> {
        let mut rng = Noise::new(seed);
        let probes = [("write", 400e6), ("read", 900e6), ("iops", 40e3)];
        let mut out: Vec<(String, Vec<Point>)> = probes.iter().map(|(n, _)| (n.to_string(), Vec::new())).collect();
        let dipped = |a: f64, b: f64| {
            let k0 = ((a - first) / period).floor().max(0.0) as i64;
            (k0..k0 + 3)
                .map(|k| {
                    let s = first + k as f64 * period;
                    ((s + dip).min(b) - s.max(a)).max(0.0)
                })
                .sum::<f64>()
        };
        let mut t = 0.0;
        'all: loop {
            for (i, (_, level)) in probes.iter().enumerate() {
                for _ in 0..turn {
                    if t + 1.0 > total {
                        break 'all;
                    }
                    let v = level * (1.0 + 0.03 * rng.gauss()) * (1.0 - 0.9 * dipped(t, t + 1.0));
                    out[i].1.push(Point::new(t + 1.0, v));
                    t += 1.0;
                }
                t += switch;
            }
        }
        out
    }

    #[test]
    fn dips_pooled_across_probes_give_the_path_period() {
        // 1.5 s every 6 s through 30 s turns with 1 s switches; several phases.
        for (seed, first) in [(1, 2.7), (2, 0.2), (3, 4.9)] {
            let series = cycled(540.0, 30, 1.0, 6.0, 1.5, first, seed);
            let found = periodic_dips_across(&series, &DipConfig::default()).expect("periodic dips");
            assert!((found.period_s - 6.0).abs() < 0.3, "seed {seed}: period {}", found.period_s);
            assert_eq!(found.probes.len(), 3, "{:?}", found.probes);
            assert!(found.count >= 80, "seed {seed}: {} dips", found.count);
            assert!(found.min_share < 0.3, "{}", found.min_share);
            assert!(found.describe_across().contains("every 6.0 s"), "{}", found.describe_across());
        }
        // 35 min dips of 40 s in a 3 h soak of 30 s turns: 5 dips, each in
        // whichever probe's turn, one period.
        let series = cycled(3.0 * 3600.0, 30, 1.0, 2100.0, 40.0, 600.0, 9);
        let found = periodic_dips_across(&series, &DipConfig::default()).expect("periodic dips");
        assert_eq!(found.count, 5, "{found:#?}");
        assert!((found.period_s - 2100.0).abs() < 60.0, "period {}", found.period_s);
    }

    #[test]
    fn a_dip_cut_by_a_probe_switch_is_one_dip() {
        // Turns of 5 samples, 1 s switch: the dip at 5.5-7.5 s spans write's
        // last sample, the switch and read's first sample.
        let series = cycled(60.0, 5, 1.0, 30.0, 2.0, 5.5, 4);
        let dips = dips_across(&series, &DipConfig::default());
        let early: Vec<&Dip> = dips.iter().filter(|d| d.center_s < 20.0).collect();
        assert_eq!(early.len(), 1, "{dips:#?}");
        assert!((early[0].center_s - 6.5).abs() < 0.8, "{:?}", early[0]);
    }

    #[test]
    fn noise_across_probes_has_no_period() {
        for seed in 1..15 {
            let series = cycled(1800.0, 30, 1.0, 1e9, 0.0, 1e9, seed);
            assert!(dips_across(&series, &DipConfig::default()).is_empty(), "seed {seed}");
            assert!(periodic_dips_across(&series, &DipConfig::default()).is_none(), "seed {seed}");
        }
    }

    #[test]
    fn rolling_median_matches_naive() {
        let mut rng = Noise::new(11);
        let values: Vec<f64> = (0..200).map(|_| rng.uniform()).collect();
        let fast = rolling_median(&values, 9);
        for (i, got) in fast.iter().enumerate() {
            let lo = i.saturating_sub(4);
            let hi = (i + 5).min(values.len());
            assert_eq!(*got, median(&values[lo..hi]).unwrap());
        }
    }
}
