//! Compare: every figure several result documents share, side by side, with
//! its ratio to the first document and whether the difference is beyond the
//! noise of the per-second samples.
//!
//! Significance uses the two-sided Mann-Whitney U test (normal approximation
//! with tie correction and continuity correction) on the per-second samples of
//! the two probes; it needs no assumption about the shape of the distribution,
//! which for throughput samples (warm-up, dips, caches) is rarely normal.
//! Short tests sample every 100 ms or so (about 20 samples, so two `run`s can
//! be told apart at all); such samples are correlated, which the test does not
//! correct for, and it measures the noise within each run, not between runs.
//! Owns nothing but arithmetic on documents.

use crate::{analyse, verdict_source, PathHints, VerdictSource};
use headroom_result::{Direction, DirectionVerdict, Probe, ResultDoc, Sample};
use serde::Serialize;

/// The name of the significance test, as shown in output and docs.
pub const SIGNIFICANCE_TEST: &str = "Mann-Whitney U (two-sided, p < 0.05) on per-second samples";
/// The p-value below which a difference counts as beyond the noise.
pub const ALPHA: f64 = 0.05;
/// Fewest samples on each side for the test to say anything.
pub const MIN_SAMPLES: usize = 3;

/// A figure a probe reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// `summary.bytes_per_sec`, bytes/s; a probe reporting 0 has none.
    Throughput,
    /// `summary.iops`, I/O operations per second (disk probes).
    Iops,
    /// `summary.latency_ns.mean`, nanoseconds.
    LatencyMean,
    /// `summary.latency_ns.p99`, nanoseconds.
    LatencyP99,
}

impl Figure {
    /// The figure's name in compare's tables ("latency p99"); the JSON uses
    /// the snake_case variant name instead.
    pub fn as_str(self) -> &'static str {
        match self {
            Figure::Throughput => "throughput",
            Figure::Iops => "iops",
            Figure::LatencyMean => "latency mean",
            Figure::LatencyP99 => "latency p99",
        }
    }
    /// bytes/s, IO/s or ns.
    pub fn unit(self) -> &'static str {
        match self {
            Figure::Throughput => "bytes/s",
            Figure::Iops => "IO/s",
            _ => "ns",
        }
    }
    /// True for latencies: a ratio below 1 is the improvement.
    pub fn lower_is_better(self) -> bool {
        matches!(self, Figure::LatencyMean | Figure::LatencyP99)
    }
    fn of(self, p: &Probe) -> Option<f64> {
        let s = &p.summary;
        match self {
            Figure::Throughput => (s.bytes_per_sec > 0.0).then_some(s.bytes_per_sec),
            Figure::Iops => s.iops,
            Figure::LatencyMean => s.latency_ns.as_ref().map(|l| l.mean),
            Figure::LatencyP99 => s.latency_ns.as_ref().map(|l| l.p99),
        }
    }
    fn of_sample(self, s: &Sample) -> Option<f64> {
        match self {
            Figure::Throughput => Some(s.bytes_per_sec),
            Figure::Iops => s.iops,
            Figure::LatencyMean => s.latency_ns_mean,
            Figure::LatencyP99 => s.latency_ns_p99,
        }
    }
}

/// Whether two sample sets differ beyond the noise.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Significance {
    /// The first document itself.
    Baseline,
    /// The samples differ: the Mann-Whitney p-value is below [`ALPHA`].
    Significant {
        /// Two-sided p-value, 0..1.
        p_value: f64,
    },
    /// The difference could be noise: p is [`ALPHA`] or more.
    WithinNoise {
        /// Two-sided p-value, 0..1.
        p_value: f64,
    },
    /// Too few samples to tell: fewer than [`MIN_SAMPLES`] on one side, or so
    /// few that even two sets with no overlap could not reach [`ALPHA`] (3
    /// against 3 gives p = 0.08 at best).
    TooFewSamples,
}

impl Significance {
    /// The verdict in a few words for a table cell ("significant (p=0.012)");
    /// empty for the baseline.
    pub fn short(&self) -> String {
        match self {
            Significance::Baseline => String::new(),
            Significance::Significant { p_value } => format!("significant (p={})", p_text(*p_value)),
            Significance::WithinNoise { p_value } => format!("within noise (p={})", p_text(*p_value)),
            Significance::TooFewSamples => "too few samples".into(),
        }
    }
}

fn p_text(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// One document's value of a shared figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// The figure in this document, in [`Figure::unit`] (bytes/s, IO/s or ns).
    pub value: f64,
    /// value / the first document's value.
    pub ratio: f64,
    /// This document's samples against the first's; [`Significance::Baseline`]
    /// in the first cell.
    pub significance: Significance,
}

/// One figure shared by every document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The probe id the documents share (e.g. "seq_read_1m"); rows are matched by it.
    pub probe: String,
    /// The probe's human name (from the first document).
    pub name: String,
    /// Which of the probe's figures this row holds; a probe gives one row
    /// per figure every document reports.
    pub figure: Figure,
    /// One per document, in the order of [`Comparison::columns`].
    pub cells: Vec<Cell>,
    /// A path row's bottleneck in each document ("link", "disk", "level"),
    /// in the order of the cells; empty for a probe's row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bottlenecks: Vec<String>,
}

impl Row {
    /// The id of the path row of `dir`: `path-read`, `path-write`.
    pub fn path_id(dir: Direction) -> String {
        format!("path-{dir}")
    }
}

/// The comparison of several documents.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Column names: each document's label, else the name the caller gave.
    pub columns: Vec<String>,
    /// Every figure all documents share, in the first document's probe order;
    /// never empty ([`CompareError::NothingInCommon`] otherwise).
    pub rows: Vec<Row>,
    /// Always [`SIGNIFICANCE_TEST`]; carried so the JSON says how it judged.
    pub significance_test: &'static str,
    /// Probes present in some documents only, by column.
    pub not_shared: Vec<String>,
    /// Settings of shared probes that not every document measured with
    /// (block size, queue depth, cipher implementation, granted iSCSI
    /// segment ...), in probe order: where a ratio is not like for like.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub measured_differently: Vec<crate::SettingDiff>,
}

/// Why documents cannot be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    /// Fewer than two documents; holds how many were given.
    #[error("compare needs at least two results, got {0}")]
    TooFew(usize),
    /// A document's `schema` differs from the first's.
    #[error("{second} uses schema '{found}' but {first} uses '{expected}': results from different schema versions cannot be compared")]
    DifferentSchemas {
        /// Column name of the first document.
        first: String,
        /// The first document's schema string.
        expected: String,
        /// Column name of the document that differs.
        second: String,
        /// That document's schema string.
        found: String,
    },
    /// No probe id is in every document, or none of the shared ones has a figure.
    #[error("nothing in common: no probe id appears in every result ({detail}); run the same preset on each side")]
    NothingInCommon {
        /// Each column's probe ids ("a.json: seq_read, tcp; b.json: no probes").
        detail: String,
    },
}

/// Compares documents; `names` (e.g. file names) stand in for missing labels.
pub fn compare(docs: &[ResultDoc], names: &[String]) -> Result<Comparison, CompareError> {
    if docs.len() < 2 {
        return Err(CompareError::TooFew(docs.len()));
    }
    let columns: Vec<String> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            d.label.clone().unwrap_or_else(|| names.get(i).cloned().unwrap_or_else(|| format!("result {}", i + 1)))
        })
        .collect();
    for (i, d) in docs.iter().enumerate().skip(1) {
        if d.schema != docs[0].schema {
            return Err(CompareError::DifferentSchemas {
                first: columns[0].clone(),
                expected: docs[0].schema.clone(),
                second: columns[i].clone(),
                found: d.schema.clone(),
            });
        }
    }
    let mut rows = path_rows(docs);
    let mut not_shared = Vec::new();
    let mut measured_differently = Vec::new();
    let ambiguous = names_of_several(&docs[0]);
    for base in docs[0].probes_and_fleet_sums() {
        let matching: Vec<Option<&Probe>> =
            docs.iter().map(|d| d.probes_and_fleet_sums().find(|p| p.id == base.id)).collect();
        if matching.iter().any(Option::is_none) {
            not_shared.push(base.id.clone());
            continue;
        }
        let probes: Vec<&Probe> = matching.into_iter().flatten().collect();
        measured_differently.extend(crate::differing_settings(&probes));
        for figure in [Figure::Throughput, Figure::Iops, Figure::LatencyMean, Figure::LatencyP99] {
            let values: Option<Vec<f64>> = probes.iter().map(|p| figure.of(p)).collect();
            let Some(values) = values else { continue };
            if values[0] <= 0.0 {
                continue;
            }
            let samples: Vec<Vec<f64>> =
                probes.iter().map(|p| p.samples.iter().filter_map(|s| figure.of_sample(s)).collect()).collect();
            let name = if base.name.is_empty() || ambiguous.contains(base.name.as_str()) {
                base.id.clone()
            } else {
                base.name.clone()
            };
            let cells = cells_against_first(&values, &samples);
            rows.push(Row { probe: base.id.clone(), name, figure, cells, bottlenecks: Vec::new() });
        }
    }
    for (i, d) in docs.iter().enumerate().skip(1) {
        for p in d.probes_and_fleet_sums() {
            if !docs[0].probes_and_fleet_sums().any(|b| b.id == p.id) {
                not_shared.push(format!("{} ({})", p.id, columns[i]));
            }
        }
    }
    if rows.is_empty() {
        let detail = docs
            .iter()
            .zip(&columns)
            .map(|(d, c)| {
                let ids: Vec<&str> = d.probes_and_fleet_sums().map(|p| p.id.as_str()).collect();
                format!("{c}: {}", if ids.is_empty() { "no probes".to_string() } else { ids.join(", ") })
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(CompareError::NothingInCommon { detail });
    }
    Ok(Comparison { columns, rows, significance_test: SIGNIFICANCE_TEST, not_shared, measured_differently })
}

/// Probe names that more than one probe of `doc` carries (a cpu kernel's
/// memory and cache figures): their rows are named by id instead.
fn names_of_several(doc: &ResultDoc) -> std::collections::HashSet<&str> {
    let mut seen = std::collections::HashSet::new();
    doc.probes_and_fleet_sums().map(|p| p.name.as_str()).filter(|name| !seen.insert(*name)).collect()
}

/// Each document's value with its ratio to the first and the significance
/// of its samples against the first's.
fn cells_against_first(values: &[f64], samples: &[Vec<f64>]) -> Vec<Cell> {
    let base = &samples[0];
    values
        .iter()
        .zip(samples)
        .enumerate()
        .map(|(i, (v, other))| {
            let significance = if i == 0 {
                Significance::Baseline
            } else {
                match mann_whitney_u(base, other) {
                    _ if smallest_p(base.len(), other.len()) >= ALPHA => Significance::TooFewSamples,
                    None => Significance::TooFewSamples,
                    Some(p) if p < ALPHA => Significance::Significant { p_value: p },
                    Some(p) => Significance::WithinNoise { p_value: p },
                }
            };
            Cell { value: *v, ratio: v / values[0], significance }
        })
        .collect()
}

/// One row per direction that every document judges as a path (two or more
/// hops measured: a disk and a network, or a network and a client over a
/// protocol), ahead of the probes' rows: the verdict's end-to-end figure with
/// each document's bottleneck. An upgrade of the network leaves the disk's
/// rows at 1.00x; this row shows what the path gained. Its samples are those
/// of the probe that set the figure (the slowest hop's), so a path whose
/// bottleneck moved is judged on what limited it in each document.
///
/// Fleets are not judged as one path; each host of a `fleet run` is, and
/// gets the same rows for its own path (`path-read@HOST`), where every
/// document has that host's verdict.
fn path_rows(docs: &[ResultDoc]) -> Vec<Row> {
    let judged: Vec<Vec<DirectionVerdict>> = docs.iter().map(path_verdicts).collect();
    let mut rows = path_rows_of(docs, &judged, None);
    for host in docs[0].fleet.iter().flat_map(|f| &f.hosts) {
        let judged: Option<Vec<Vec<DirectionVerdict>>> = docs
            .iter()
            .map(|d| {
                let same = d.fleet.as_ref()?.hosts.iter().find(|h| h.name == host.name)?;
                Some(same.verdict.as_ref()?.directions.clone())
            })
            .collect();
        rows.extend(judged.map(|j| path_rows_of(docs, &j, Some(&host.name))).unwrap_or_default());
    }
    rows
}

/// The path rows of `judged` (each document's verdicts of one path: the
/// document's, or fleet host `host`'s, whose probes carry its name).
fn path_rows_of(docs: &[ResultDoc], judged: &[Vec<DirectionVerdict>], host: Option<&str>) -> Vec<Row> {
    [Direction::Read, Direction::Write]
        .into_iter()
        .filter_map(|dir| {
            let verdicts: Option<Vec<&DirectionVerdict>> =
                judged.iter().map(|vs| vs.iter().find(|v| v.direction == dir && is_path(v))).collect();
            let verdicts = verdicts?;
            let values: Vec<f64> = verdicts.iter().map(|v| v.figure_bytes_per_sec).collect();
            if values[0] <= 0.0 {
                return None;
            }
            let samples: Vec<Vec<f64>> = verdicts
                .iter()
                .zip(docs)
                .map(|(v, doc)| {
                    let setter = v
                        .hops
                        .iter()
                        .find(|h| h.measured_bytes_per_sec == Some(v.figure_bytes_per_sec))
                        .and_then(|h| h.probe.as_deref());
                    let of_host = |p: &&Probe| host.is_none_or(|h| p.host.as_deref() == Some(h));
                    let probe = setter.and_then(|id| doc.probes.iter().filter(of_host).find(|p| p.id == id));
                    probe.map(|p| p.samples.iter().map(|s| s.bytes_per_sec).collect()).unwrap_or_default()
                })
                .collect();
            let (probe, name) = match host {
                None => (Row::path_id(dir), format!("{} end to end", dir.plural())),
                Some(h) => (format!("{}@{h}", Row::path_id(dir)), format!("{} end to end @{h}", dir.plural())),
            };
            Some(Row {
                probe,
                name,
                figure: Figure::Throughput,
                cells: cells_against_first(&values, &samples),
                bottlenecks: verdicts.iter().map(|v| v.bottleneck.to_string()).collect(),
            })
        })
        .collect()
}

/// A document's per-direction verdicts: the stored ones, else a fresh
/// analysis, as `report` shows it. None for a soak or a fleet, which are
/// not judged as one path.
fn path_verdicts(doc: &ResultDoc) -> Vec<DirectionVerdict> {
    match verdict_source(doc) {
        VerdictSource::NotJudged => Vec::new(),
        VerdictSource::Stored(directions) => directions.to_vec(),
        VerdictSource::ToJudge => analyse(doc, &PathHints::default()).map(|a| a.directions).unwrap_or_default(),
    }
}

/// Whether a verdict judged a path rather than a single probe.
fn is_path(v: &DirectionVerdict) -> bool {
    v.hops.iter().filter(|h| h.measured_bytes_per_sec.is_some()).count() >= 2
}

/// Two-sided p-value of the Mann-Whitney U test, normal approximation with
/// tie and continuity corrections; None with fewer than [`MIN_SAMPLES`] a side.
/// Hand-written because it is twenty lines and no well-kept small crate has it.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 < MIN_SAMPLES || n2 < MIN_SAMPLES {
        return None;
    }
    let mut all: Vec<(f64, usize)> = a.iter().map(|&x| (x, 0)).chain(b.iter().map(|&x| (x, 1))).collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut ranks = vec![0.0; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        ranks[i..=j].iter_mut().for_each(|r| *r = rank);
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let r1: f64 = all.iter().zip(&ranks).filter(|(x, _)| x.1 == 0).map(|(_, r)| r).sum();
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let u1 = r1 - n1f * (n1f + 1.0) / 2.0;
    let mean = n1f * n2f / 2.0;
    let variance = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if variance <= 0.0 {
        // Every sample equal: no evidence of a difference.
        return Some(1.0);
    }
    let z = ((u1 - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    Some((2.0 * (1.0 - standard_normal_cdf(z))).min(1.0))
}

/// The smallest p-value [`mann_whitney_u`] can give for these sample counts:
/// that of two sets with no overlap and no ties.
pub fn smallest_p(n1: usize, n2: usize) -> f64 {
    if n1 < MIN_SAMPLES || n2 < MIN_SAMPLES {
        return 1.0;
    }
    let (n1, n2) = (n1 as f64, n2 as f64);
    let variance = n1 * n2 / 12.0 * (n1 + n2 + 1.0);
    let z = (n1 * n2 / 2.0 - 0.5) / variance.sqrt();
    (2.0 * (1.0 - standard_normal_cdf(z))).min(1.0)
}

/// Φ(z) via the complementary error function (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7).
fn standard_normal_cdf(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let erf = 1.0 - poly * (-x * x).exp();
    let erf = if x >= 0.0 { erf } else { -erf };
    0.5 * (1.0 + erf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mann_whitney_separates_shifted_samples_and_not_identical_ones() {
        let a = [100.0, 101.0, 99.0, 100.5, 100.2, 99.8];
        let b = [110.0, 111.0, 109.0, 110.5, 110.2, 109.8];
        assert!(mann_whitney_u(&a, &b).unwrap() < 0.01);
        let c = [100.1, 100.9, 99.2, 100.4, 100.0, 99.9];
        assert!(mann_whitney_u(&a, &c).unwrap() > 0.3);
        assert_eq!(mann_whitney_u(&a[..2], &b), None);
        assert_eq!(mann_whitney_u(&[5.0; 4], &[5.0; 4]), Some(1.0));
    }

    #[test]
    fn three_samples_a_side_can_never_be_significant_eight_can() {
        assert!(smallest_p(3, 3) > ALPHA, "{}", smallest_p(3, 3));
        assert!(smallest_p(4, 4) < ALPHA, "{}", smallest_p(4, 4));
        assert!(smallest_p(8, 8) < 0.001);
        assert_eq!(smallest_p(2, 8), 1.0);
    }

    #[test]
    fn normal_cdf_matches_tables() {
        assert!((standard_normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((standard_normal_cdf(1.959964) - 0.975).abs() < 1e-6);
        assert!((standard_normal_cdf(-1.0) - 0.158655).abs() < 1e-6);
    }

    #[test]
    fn mann_whitney_matches_a_hand_computed_case() {
        // By hand: U = 0, mean 12.5, variance 5*5*11/12 = 22.917,
        // z = (12.5 - 0.5) / 4.787 = 2.5067, p = 2 * (1 - 0.99391) = 0.01219.
        let p = mann_whitney_u(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!((p - 0.01219).abs() < 2e-4, "{p}");
    }
}
