//! Goals: `--goal read=223.4MB/s,write=150MB/s,iops=20k,latency-p99=2ms`,
//! parsed with headroom-units and evaluated against a result document.
//!
//! Owns which figure of a document each goal metric reads; knows nothing of
//! exit codes or printing.

use crate::verdict::{Analysis, Direction};
use crate::Setting;
use headroom_result::{NetProbeKind, Probe, ProbeSpec, ResultDoc};
use headroom_units::setting::Message;
use std::time::Duration;

/// Every metric `--goal` accepts, with the unit it takes; shown in errors.
pub const ACCEPTED: &str = "read=RATE, write=RATE (e.g. 223.4MB/s, 1Gb/s), iops=COUNT, read-iops=COUNT, \
write-iops=COUNT (e.g. 20k, 1.5M, 900), latency-mean|latency-p50|latency-p99|latency-p999=DURATION (e.g. 2ms, 500us)";

/// A goal metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// `read=RATE`: read throughput, bytes/s; the verdict's read figure,
    /// else the best read disk probe or `tcp_reverse` probe.
    Read,
    /// `write=RATE`: write throughput, bytes/s; the verdict's write figure,
    /// else the best write disk probe or `tcp` probe.
    Write,
    /// `iops=COUNT`: the highest IO/s of any disk probe.
    Iops,
    /// `read-iops=COUNT`: the highest IO/s of a disk probe whose `rw` contains "read".
    ReadIops,
    /// `write-iops=COUNT`: the highest IO/s of a disk probe whose `rw` contains "write".
    WriteIops,
    /// `latency-mean=DURATION` (or `latency`): mean latency, ns, of the
    /// latency probe (the random disk probe with the shallowest queue, else a ping probe).
    LatencyMean,
    /// `latency-p50=DURATION`: median latency of the latency probe, ns.
    LatencyP50,
    /// `latency-p99=DURATION`: 99th-percentile latency of the latency probe, ns.
    LatencyP99,
    /// `latency-p999=DURATION` (or `latency-p99.9`): 99.9th-percentile latency, ns.
    LatencyP999,
}

impl Metric {
    /// The metric's name as `--goal` takes it and results show it ("read-iops").
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Read => "read",
            Metric::Write => "write",
            Metric::Iops => "iops",
            Metric::ReadIops => "read-iops",
            Metric::WriteIops => "write-iops",
            Metric::LatencyMean => "latency-mean",
            Metric::LatencyP50 => "latency-p50",
            Metric::LatencyP99 => "latency-p99",
            Metric::LatencyP999 => "latency-p999",
        }
    }
    fn parse(name: &str) -> Option<Metric> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "read" => Metric::Read,
            "write" => Metric::Write,
            "iops" => Metric::Iops,
            "read-iops" => Metric::ReadIops,
            "write-iops" => Metric::WriteIops,
            "latency-mean" | "latency" => Metric::LatencyMean,
            "latency-p50" => Metric::LatencyP50,
            "latency-p99" => Metric::LatencyP99,
            "latency-p999" | "latency-p99.9" => Metric::LatencyP999,
            _ => return None,
        })
    }
    /// Latency goals are ceilings (lower is better); the others are floors.
    pub fn lower_is_better(self) -> bool {
        matches!(self, Metric::LatencyMean | Metric::LatencyP50 | Metric::LatencyP99 | Metric::LatencyP999)
    }
}

/// One goal: a metric and its target in base units (bytes/s, IO/s, ns).
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// Which figure of the document the goal is held against.
    pub metric: Metric,
    /// The value to reach: bytes/s for read/write (a typed rate in bits is
    /// divided by 8), IO/s for the IOPS metrics, ns for latencies; always
    /// finite and above zero. A floor, or a ceiling for latencies.
    pub target: f64,
    /// As the user typed it, for messages.
    pub text: String,
}

/// Why `--goal` could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalError {
    /// The whole `--goal` value as typed, not just the bad part.
    pub input: String,
    /// What was wrong, naming the part or metric ("unknown metric 'foo'").
    pub reason: String,
}

impl GoalError {
    /// The line, naming the goal setting for the front end to spell (the
    /// same list is `--goal` or `--host-goal` there).
    pub fn message(&self) -> Message<Setting> {
        Message::of(Setting::Goal).then(format!(" '{}': {}; accepted: {ACCEPTED}", self.input, self.reason))
    }
}

impl std::fmt::Display for GoalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.message().fmt(f)
    }
}

impl std::error::Error for GoalError {}

/// Parses a comma-separated goal list.
pub fn parse_goals(input: &str) -> Result<Vec<Goal>, GoalError> {
    let fail = |reason: String| GoalError { input: input.to_string(), reason };
    let mut goals = Vec::new();
    for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part.split_once('=').ok_or_else(|| fail(format!("'{part}' is not METRIC=VALUE")))?;
        let metric = Metric::parse(name).ok_or_else(|| fail(format!("unknown metric '{}'", name.trim())))?;
        let value = value.trim();
        let target = match metric {
            Metric::Read | Metric::Write => {
                headroom_units::parse_rate(value).map_err(|e| fail(format!("{}: {e}", metric.as_str())))? / 8.0
            }
            Metric::Iops | Metric::ReadIops | Metric::WriteIops => parse_count(value)
                .ok_or_else(|| fail(format!("{}: '{value}' is not a count (e.g. 20k, 1.5M, 900)", metric.as_str())))?,
            _ => {
                let d: Duration =
                    headroom_units::parse_duration(value).map_err(|e| fail(format!("{}: {e}", metric.as_str())))?;
                d.as_nanos() as f64
            }
        };
        if !(target.is_finite() && target > 0.0) {
            return Err(fail(format!("{} must be above zero", metric.as_str())));
        }
        goals.push(Goal { metric, target, text: part.to_string() });
    }
    if goals.is_empty() {
        return Err(fail("no goal given".into()));
    }
    Ok(goals)
}

/// "20k" -> 20000, "1.5M" -> 1500000, "900" -> 900 (SI multipliers: IOPS are counts).
fn parse_count(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1e3),
        'm' | 'M' => (&s[..s.len() - 1], 1e6),
        'g' | 'G' => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    v.is_finite().then_some(v * mult)
}

/// A goal next to the figure it was held against.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GoalResult {
    /// The goal as the user typed it ("read=223.4MB/s").
    pub goal: String,
    /// [`Metric::as_str`] of the goal's metric.
    pub metric: &'static str,
    /// [`Goal::target`]: bytes/s, IO/s or ns.
    pub target: f64,
    /// None when no probe measured the metric (which counts as missed).
    pub measured: Option<f64>,
    /// `measured` reached `target` (at or above it; at or below for
    /// latencies); false when nothing was measured. `headroom run` exits 1 when
    /// any goal is not met.
    pub met: bool,
    /// The probe (or "verdict") the figure came from.
    pub source: Option<String>,
}

/// Holds each goal against the document. Read/write goals use the verdict's
/// end-to-end figure when there is one, else the best probe of that direction.
pub fn evaluate(goals: &[Goal], doc: &ResultDoc, analysis: Option<&Analysis>) -> Vec<GoalResult> {
    goals
        .iter()
        .map(|g| {
            let (measured, source) = figure_for(g.metric, doc, analysis).unzip();
            let met = match measured {
                Some(m) if g.metric.lower_is_better() => m <= g.target,
                Some(m) => m >= g.target,
                None => false,
            };
            GoalResult { goal: g.text.clone(), metric: g.metric.as_str(), target: g.target, measured, met, source }
        })
        .collect()
}

fn disk_rw(p: &Probe) -> Option<&str> {
    match &p.spec {
        ProbeSpec::Disk(d) => Some(d.rw.as_str()),
        _ => None,
    }
}

fn figure_for(metric: Metric, doc: &ResultDoc, analysis: Option<&Analysis>) -> Option<(f64, String)> {
    let best = |it: &mut dyn Iterator<Item = (f64, String)>| it.max_by(|a, b| a.0.total_cmp(&b.0));
    match metric {
        Metric::Read | Metric::Write => {
            let dir = if metric == Metric::Read { Direction::Read } else { Direction::Write };
            if let Some(v) = analysis.and_then(|a| a.directions.iter().find(|d| d.direction == dir)) {
                return Some((v.figure_bytes_per_sec, format!("verdict ({})", dir.as_str())));
            }
            let (rw, net) =
                if dir == Direction::Read { ("read", NetProbeKind::TcpReverse) } else { ("write", NetProbeKind::Tcp) };
            best(&mut doc.probes.iter().filter_map(|p| {
                let matches = match &p.spec {
                    ProbeSpec::Disk(d) => d.rw == rw,
                    ProbeSpec::Net(n) => n.test == net,
                    _ => false,
                };
                matches.then(|| (p.summary.bytes_per_sec, p.id.clone()))
            }))
        }
        Metric::Iops | Metric::ReadIops | Metric::WriteIops => best(&mut doc.probes.iter().filter_map(|p| {
            let rw = disk_rw(p)?;
            let wanted = match metric {
                Metric::ReadIops => rw.contains("read"),
                Metric::WriteIops => rw.contains("write"),
                _ => true,
            };
            wanted.then_some(())?;
            Some((p.summary.iops?, p.id.clone()))
        })),
        _ => {
            // The latency probe: the random disk probe with the shallowest
            // queue (QD1 is what latency means to users), else a ping probe.
            let pick = |p: &Probe| -> Option<f64> {
                let l = p.summary.latency_ns.as_ref()?;
                Some(match metric {
                    Metric::LatencyMean => l.mean,
                    Metric::LatencyP50 => l.p50,
                    Metric::LatencyP99 => l.p99,
                    _ => l.p999,
                })
            };
            let disk = doc
                .probes
                .iter()
                .filter_map(|p| match &p.spec {
                    ProbeSpec::Disk(d) if p.summary.latency_ns.is_some() => {
                        Some((!d.rw.starts_with("rand"), d.queue_depth * d.jobs, p))
                    }
                    _ => None,
                })
                .min_by_key(|(sequential, depth, _)| (*sequential, *depth))
                .map(|(_, _, p)| p);
            let probe = disk.or_else(|| {
                doc.probes.iter().find(|p| matches!(p.spec, ProbeSpec::Ping(_)) && p.summary.latency_ns.is_some())
            })?;
            Some((pick(probe)?, probe.id.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let g = parse_goals("read=223.4MB/s,write=150MB/s,iops=20k,latency-p99=2ms").unwrap();
        assert_eq!(g.len(), 4);
        assert_eq!(g[0].metric, Metric::Read);
        assert!((g[0].target - 223.4e6).abs() < 1.0);
        assert!((g[1].target - 150e6).abs() < 1.0);
        assert_eq!(g[2].target, 20_000.0);
        assert_eq!(g[3].target, 2e6);
        assert_eq!(parse_goals("write=1Gb/s").unwrap()[0].target, 125e6);
    }

    #[test]
    fn unknown_metric_or_unit_lists_what_is_accepted() {
        let e = parse_goals("speed=1MB/s").unwrap_err().to_string();
        assert!(e.contains("unknown metric 'speed'") && e.contains("latency-p99"), "{e}");
        let e = parse_goals("read=100furlongs").unwrap_err().to_string();
        assert!(e.contains("unknown unit") && e.contains("accepted: read=RATE"), "{e}");
        let e = parse_goals("latency-p99=2parsecs").unwrap_err().to_string();
        assert!(e.contains("duration"), "{e}");
        assert!(parse_goals("iops=lots").is_err());
        assert!(parse_goals("read").is_err());
        assert!(parse_goals("").is_err());
        assert!(parse_goals("read=0MB/s").is_err());
    }
}
