//! Write-cliff detection: a per-second write rate that drops and stays low
//! (an SLC or controller cache filling up: 270 MB/s falling to 32 MB/s). Pure
//! over samples, so `disk` (sustained writes) and `soak` share it, and what
//! both say about one: the disk probe's warning and details, soak's detection.
//! A rate that steps down several times (a drive slowing as it fills, a
//! throttle tightening) is a staircase, said as such and not as a cliff.

use headroom_result::details::{WriteCliffDetails, WRITE_CLIFF};
use headroom_result::{Detection, Probe, Sample, Warning, WarningCode};
use headroom_units::{format_bytes_per_sec, format_size};

/// Where a write cliff happened and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteCliff {
    /// Seconds into the measured phase when the rate fell (end of the last fast sample).
    pub at_s: f64,
    /// Index of the first slow sample.
    pub index: usize,
    /// Bytes written before the cliff.
    pub bytes_before: f64,
    /// Median rate before and after, bytes/s (medians: the sample that
    /// straddles the cliff must not blur either figure).
    pub rate_before: f64,
    /// Median rate of the samples from `index` on, bytes/s.
    pub rate_after: f64,
}

/// The rate must fall below this share of the rate before the cliff...
const DROP_RATIO: f64 = 0.5;
/// ...and this share of the later samples must stay below it (a dip that
/// recovers is not a cliff; a brief spike after the cliff does not undo it).
const STAY_LOW_SHARE: f64 = 0.8;
/// Samples needed on each side so a noisy second alone is never a cliff.
const MIN_SAMPLES_EACH_SIDE: usize = 3;
/// A cliff falls from the level it held: the samples just before the fall
/// are still at this share of the median before it. Lower, the rate was
/// already going down: a staircase.
const SHARP_SHARE: f64 = 0.75;
/// A step of a staircase: the level falls below this share of the last one.
const STEP_SHARE: f64 = 0.85;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Finds the first point where the rate falls under half of the median rate
/// before it and stays there (80 % of the remaining samples), with at least
/// three samples on each side, falling from the level it held (see
/// [`detect_write_decline`] for a rate that went down in steps). Samples
/// must be in time order.
pub fn detect_write_cliff(samples: &[Sample]) -> Option<WriteCliff> {
    find_fall(samples).filter(|(_, sharp)| *sharp).map(|(c, _)| c)
}

/// A rate that fell to under half and stayed there, but in steps rather than
/// off one cliff: where it started and ended, and how many steps it took.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteDecline {
    /// Median of the first samples, bytes/s.
    pub rate_first: f64,
    /// Median of the samples after the fall, bytes/s.
    pub rate_after: f64,
    /// Seconds into the measured phase when it fell under half.
    pub at_s: f64,
    /// Falls of the level by more than 15 % on the way down.
    pub steps: usize,
}

/// A fall to under half that was not sharp: the staircase [`detect_write_cliff`] leaves out.
pub fn detect_write_decline(samples: &[Sample]) -> Option<WriteDecline> {
    let (fall, sharp) = find_fall(samples)?;
    if sharp {
        return None;
    }
    let rates: Vec<f64> = samples.iter().map(|s| s.bytes_per_sec).collect();
    let level = |k: usize| median(&mut rates[k..k + MIN_SAMPLES_EACH_SIDE].to_vec());
    let mut current = level(0);
    let mut steps = 0;
    for k in 1..=rates.len() - MIN_SAMPLES_EACH_SIDE {
        let here = level(k);
        if here < STEP_SHARE * current {
            steps += 1;
            current = here;
        }
    }
    Some(WriteDecline { rate_first: level(0), rate_after: fall.rate_after, at_s: fall.at_s, steps: steps.max(2) })
}

impl WriteDecline {
    /// "the write rate went down in 4 steps, from 400.0 MB/s to 100.0 MB/s
    /// (under half by +30 s): no single cliff".
    pub fn describe(&self) -> String {
        format!(
            "the write rate went down in {} steps, from {} to {} (under half by +{:.0} s): no single cliff \
             (a device slowing as it fills, or a throttle tightening)",
            self.steps,
            format_bytes_per_sec(self.rate_first),
            format_bytes_per_sec(self.rate_after),
            self.at_s
        )
    }
}

/// The first fall under half that stays low, and whether it was sharp (the
/// samples just before it still at the level held before).
fn find_fall(samples: &[Sample]) -> Option<(WriteCliff, bool)> {
    let n = samples.len();
    if n < 2 * MIN_SAMPLES_EACH_SIDE {
        return None;
    }
    for i in MIN_SAMPLES_EACH_SIDE..=n - MIN_SAMPLES_EACH_SIDE {
        let mut before: Vec<f64> = samples[..i].iter().map(|s| s.bytes_per_sec).collect();
        let m_before = median(&mut before);
        let threshold = m_before * DROP_RATIO;
        if m_before <= 0.0 || samples[i].bytes_per_sec >= threshold {
            continue;
        }
        let after = &samples[i..];
        let low = after.iter().filter(|s| s.bytes_per_sec < threshold).count();
        if (low as f64) < STAY_LOW_SHARE * after.len() as f64 {
            continue;
        }
        let interval = |k: usize| if k == 0 { samples[0].t_s } else { samples[k].t_s - samples[k - 1].t_s };
        let bytes_before: f64 = (0..i).map(|k| samples[k].bytes_per_sec * interval(k).max(0.0)).sum();
        let mut after_rates: Vec<f64> = after.iter().map(|s| s.bytes_per_sec).collect();
        let mut just_before: Vec<f64> = samples[i - MIN_SAMPLES_EACH_SIDE..i].iter().map(|s| s.bytes_per_sec).collect();
        let sharp = median(&mut just_before) >= SHARP_SHARE * m_before;
        let cliff = WriteCliff {
            at_s: samples[i - 1].t_s,
            index: i,
            bytes_before,
            rate_before: m_before,
            rate_after: median(&mut after_rates),
        };
        return Some((cliff, sharp));
    }
    None
}

impl WriteCliff {
    /// The cliff as stored in a document.
    pub fn details(&self) -> WriteCliffDetails {
        WriteCliffDetails {
            at_s: self.at_s,
            bytes_before: Some(self.bytes_before),
            bytes_per_sec_before: self.rate_before,
            bytes_per_sec_after: self.rate_after,
        }
    }

    /// Soak's finding over its whole write series.
    pub fn detection(&self, probe: &str) -> Detection {
        Detection {
            kind: headroom_result::DetectionKind::WriteCliff,
            probe: Some(probe.into()),
            message: format!(
                "{probe}: the rate fell from {} to {} at +{:.0} s and stayed there",
                format_bytes_per_sec(self.rate_before),
                format_bytes_per_sec(self.rate_after),
                self.at_s
            ),
            details: self.details().detection_json(),
        }
    }
}

/// Checks a write probe (the caller knows it wrote) for a cliff and, if
/// one is found, adds the `write_cliff` warning and `details.write_cliff`;
/// a staircase instead gets the `write_decline` warning.
pub fn annotate_write_cliff(probe: &mut Probe) {
    if let Some(d) = detect_write_decline(&probe.samples) {
        probe.warnings.push(Warning::new(WarningCode::WriteDecline, format!("{}: {}", probe.name, d.describe())));
        return;
    }
    let Some(c) = detect_write_cliff(&probe.samples) else { return };
    probe.warnings.push(Warning::new(
        WarningCode::WriteCliff,
        format!(
            "{}: the write rate fell after {:.0} s and {} written, from {} to {} (a cache filled up)",
            probe.name,
            c.at_s,
            format_size(c.bytes_before as u64),
            format_bytes_per_sec(c.rate_before),
            format_bytes_per_sec(c.rate_after)
        ),
    ));
    probe.details.insert(WRITE_CLIFF.into(), c.details().probe_json());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(rates: &[f64]) -> Vec<Sample> {
        rates
            .iter()
            .enumerate()
            .map(|(i, &r)| Sample { t_s: (i + 1) as f64, bytes_per_sec: r, ..Default::default() })
            .collect()
    }

    #[test]
    fn an_slc_cache_running_full_is_a_cliff() {
        let mut rates = vec![270e6; 10];
        rates.extend([31e6, 33e6, 32e6, 30e6, 34e6, 32e6]);
        let c = detect_write_cliff(&series(&rates)).expect("cliff");
        assert_eq!(c.index, 10);
        assert_eq!(c.at_s, 10.0);
        assert!((c.bytes_before - 2.7e9).abs() < 1.0);
        assert!((c.rate_before - 270e6).abs() < 1.0 && (c.rate_after - 32e6).abs() < 1.0);
    }

    #[test]
    fn noise_a_recovered_dip_or_too_few_samples_are_not_cliffs() {
        let noisy = [200e6, 260e6, 180e6, 240e6, 210e6, 150e6, 230e6, 190e6, 250e6];
        assert_eq!(detect_write_cliff(&series(&noisy)), None);
        let dip = [200e6, 200e6, 200e6, 50e6, 40e6, 200e6, 210e6, 190e6, 200e6];
        assert_eq!(detect_write_cliff(&series(&dip)), None);
        assert_eq!(detect_write_cliff(&series(&[200e6, 200e6, 10e6, 10e6])), None);
        assert_eq!(detect_write_cliff(&[]), None);
    }

    fn write_probe(rates: &[f64]) -> Probe {
        let mut p: Probe = serde_json::from_value(serde_json::json!({
            "id": "w", "name": "SEQ1M Q1T1 write", "kind": "disk",
            "spec": {"rw": "write", "block_size": 1048576, "queue_depth": 1, "jobs": 1, "direct": true,
                     "sync": "none", "engine": "io_uring", "path": "/t"},
            "summary": {"bytes_per_sec": 1.0, "duration_s": 1.0}
        }))
        .unwrap();
        p.samples = series(rates);
        p
    }

    #[test]
    fn a_cliff_is_a_warning_and_details_on_the_probe_and_a_detection_for_soak() {
        let mut rates = vec![270e6; 10];
        rates.extend([32e6; 6]);
        let mut probe = write_probe(&rates);
        annotate_write_cliff(&mut probe);
        assert_eq!(
            probe.warnings[0].message,
            "SEQ1M Q1T1 write: the write rate fell after 10 s and 2.515 GiB written, from 270.0 MB/s to 32.00 MB/s (a cache filled up)"
        );
        let stored = probe.write_cliff().expect("details.write_cliff");
        assert_eq!((stored.at_s, stored.bytes_before), (10.0, Some(2.7e9)));
        let found = detect_write_cliff(&probe.samples).unwrap().detection("write");
        assert_eq!(found.message, "write: the rate fell from 270.0 MB/s to 32.00 MB/s at +10 s and stayed there");
        assert_eq!(found.write_cliff().unwrap(), WriteCliffDetails { bytes_before: None, ..stored });
        let mut flat = write_probe(&[200e6; 8]);
        annotate_write_cliff(&mut flat);
        assert!(flat.warnings.is_empty() && flat.write_cliff().is_none());
    }

    #[test]
    fn a_staircase_is_a_decline_not_a_cliff() {
        let mut rates = Vec::new();
        for level in [400e6, 300e6, 200e6, 100e6] {
            rates.extend([level; 8]);
        }
        assert_eq!(detect_write_cliff(&series(&rates)), None, "no single cliff");
        let d = detect_write_decline(&series(&rates)).expect("a decline");
        assert_eq!((d.rate_first, d.rate_after, d.steps), (400e6, 100e6, 3));
        let mut probe = write_probe(&rates);
        annotate_write_cliff(&mut probe);
        assert_eq!(probe.warnings.len(), 1);
        assert_eq!(probe.warnings[0].code, WarningCode::WriteDecline);
        assert!(probe.warnings[0].message.contains("went down in 3 steps, from 400.0 MB/s to 100.0 MB/s"));
        assert!(probe.write_cliff().is_none());
        // A real cliff is not a decline.
        let mut cliff = vec![270e6; 10];
        cliff.extend([32e6; 6]);
        assert_eq!(detect_write_decline(&series(&cliff)), None);
    }

    #[test]
    fn one_spike_after_the_cliff_does_not_hide_it() {
        let rates = [300e6, 290e6, 310e6, 300e6, 40e6, 35e6, 250e6, 38e6, 41e6, 39e6, 40e6];
        let c = detect_write_cliff(&series(&rates)).expect("cliff");
        assert_eq!(c.index, 4);
    }
}
