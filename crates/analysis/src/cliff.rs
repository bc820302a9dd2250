//! Write-cliff detection: a per-second write rate that drops and stays low
//! (an SLC or controller cache filling up: 270 MB/s falling to 32 MB/s). Pure
//! over samples, so `disk` (sustained writes) and `soak` share it, and what
//! both say about one: the disk probe's warning and details, soak's detection.

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
/// three samples on each side. Samples must be in time order.
pub fn detect_write_cliff(samples: &[Sample]) -> Option<WriteCliff> {
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
        return Some(WriteCliff {
            at_s: samples[i - 1].t_s,
            index: i,
            bytes_before,
            rate_before: m_before,
            rate_after: median(&mut after_rates),
        });
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
            kind: WRITE_CLIFF.into(),
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
/// one is found, adds the `write_cliff` warning and `details.write_cliff`.
pub fn annotate_write_cliff(probe: &mut Probe) {
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
    fn one_spike_after_the_cliff_does_not_hide_it() {
        let rates = [300e6, 290e6, 310e6, 300e6, 40e6, 35e6, 250e6, 38e6, 41e6, 39e6, 40e6];
        let c = detect_write_cliff(&series(&rates)).expect("cliff");
        assert_eq!(c.index, 4);
    }
}
