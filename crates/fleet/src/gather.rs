//! The fleet's document: every host's probes (named by host), and per test
//! the sum over the hosts that measured it: rates and counts added, latency
//! from the hosts' histograms merged (percentiles are never averaged), the
//! spread between hosts, each host's share, and one aggregate sample per
//! second of the client's clock (each host's samples moved onto it by its
//! clock offset), so a host that stalls or is lost shows as a dip.

use crate::run::HostOutcome;
use headroom_result::{Fleet, FleetHost, FleetRow, FleetSum, Histogram, Probe, Sample, Spread, Summary};
use headroom_runner::Plan;
use std::collections::BTreeMap;

/// How the agents were started (see `crate::run`).
pub const START: &str = "released_together";

/// The hosts' probes (for `ResultDoc.probes`) and the fleet section.
pub fn gather(plan: &Plan, outcomes: &[HostOutcome]) -> (Vec<Probe>, Fleet) {
    let offset = |o: &HostOutcome| o.clock.as_ref().map_or(0.0, |c| c.offset_s);
    let mut probes = Vec::new();
    let mut sums = Vec::new();
    for (index, request) in plan.requests.iter().enumerate() {
        let mut rows: Vec<(&str, Probe)> = Vec::new();
        for o in outcomes {
            if let Some(m) = &o.measured[index] {
                rows.push((&o.name, host_probe(m.probe.clone(), &o.name)));
            }
        }
        let failed_hosts = outcomes.iter().filter(|o| o.measured[index].is_none()).map(|o| o.name.clone()).collect();
        let Some((_, first)) = rows.first() else {
            continue; // nobody measured it: the hosts' errors say why
        };
        let mut sum = first.clone();
        sum.id = format!("fleet-{}", base_id(&first.id));
        sum.name = format!("{} (sum of {})", request.label, rows.len());
        sum.host = None;
        sum.details.clear();
        sum.warnings.clear();
        let histogram = Histogram::merged(rows.iter().filter_map(|(_, p)| p.histogram.as_ref()));
        let summaries: Vec<&Summary> = rows.iter().map(|(_, p)| &p.summary).collect();
        sum.summary = Summary {
            bytes_per_sec: summaries.iter().map(|s| s.bytes_per_sec).sum(),
            iops: summaries.iter().any(|s| s.iops.is_some()).then(|| summaries.iter().filter_map(|s| s.iops).sum()),
            latency_ns: histogram.as_ref().and_then(Histogram::latency),
            duration_s: summaries.iter().map(|s| s.duration_s).fold(0.0, f64::max),
            bytes: summaries.iter().any(|s| s.bytes.is_some()).then(|| summaries.iter().filter_map(|s| s.bytes).sum()),
            ops: summaries.iter().any(|s| s.ops.is_some()).then(|| summaries.iter().filter_map(|s| s.ops).sum()),
            // The sums are on their own grid, not one probe's intervals.
            sample_interval_s: None,
            // Other processes' load is each host's own, not a sum's.
            contention: None,
        };
        sum.histogram = histogram;
        // The earliest start of this test on the client's clock: t = 0 of the aggregate samples.
        let starts: Vec<f64> =
            outcomes.iter().filter_map(|o| o.measured[index].as_ref().map(|m| m.started_unix - offset(o))).collect();
        let origin = starts.iter().copied().fold(f64::INFINITY, f64::min);
        // The last answer of this test on the client's clock: no second after it has samples.
        let end = outcomes.iter().filter_map(|o| o.spans[index].map(|s| s.1)).fold(f64::NEG_INFINITY, f64::max);
        sum.samples = aggregate_samples(outcomes.iter().map(|o| host_points(o, index, offset(o))), origin, end);
        let total = sum.summary.bytes_per_sec;
        let rates: Vec<(&str, f64)> = rows.iter().map(|(h, p)| (*h, p.summary.bytes_per_sec)).collect();
        sums.push(FleetSum {
            rows: rows
                .iter()
                .map(|(h, p)| FleetRow {
                    host: h.to_string(),
                    probe_id: p.id.clone(),
                    bytes_per_sec: p.summary.bytes_per_sec,
                    iops: p.summary.iops,
                    share: if total > 0.0 { p.summary.bytes_per_sec / total } else { 0.0 },
                })
                .collect(),
            failed_hosts,
            spread: Spread::of(&rates),
            probe: sum,
        });
        probes.extend(rows.into_iter().map(|(_, p)| p));
    }
    let first_starts: Vec<Option<f64>> =
        outcomes.iter().map(|o| o.measured.iter().flatten().next().map(|m| m.started_unix - offset(o))).collect();
    let earliest = first_starts.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    let hosts = outcomes
        .iter()
        .zip(first_starts)
        .map(|(o, start)| FleetHost {
            name: o.name.clone(),
            hostname: o
                .inventory
                .as_ref()
                .and_then(|h| h.hostname.clone())
                .or_else(|| o.measured.iter().flatten().find_map(|m| m.probe.host.clone())),
            version: o.clock.as_ref().map(|c| c.server_version.clone()),
            status: if o.error.is_some() { "failed" } else { "ok" }.into(),
            error: o.error.clone(),
            clock_offset_s: o.clock.as_ref().map(|c| c.offset_s),
            clock_rtt_s: o.clock.as_ref().map(|c| c.rtt_s),
            start_skew_s: start.map(|s| s - earliest),
            inventory: o.inventory.clone(),
            verdict: None,
        })
        .collect();
    (probes, Fleet { start: START.into(), hosts, sums })
}

/// A host's probe as the fleet document holds it: `host` is the host as the
/// fleet names it (agents may share a hostname), its id `<test>@<host>` and
/// its name `<test> @<host>` (so `compare` and `report` tell hosts apart).
fn host_probe(mut probe: Probe, name: &str) -> Probe {
    probe.id = format!("{}@{name}", base_id(&probe.id));
    if !probe.name.is_empty() {
        probe.name = format!("{} @{name}", probe.name);
    }
    probe.host = Some(name.to_string());
    probe
}

/// A remote probe's id without the `@HOSTNAME` the far end's engine added.
fn base_id(id: &str) -> &str {
    id.split_once('@').map_or(id, |(base, _)| base)
}

/// One interval of one host on the client's clock.
#[derive(Debug, Clone, Copy)]
struct Point {
    /// End of the interval, Unix seconds on the client's clock.
    t: f64,
    bytes_per_sec: f64,
    iops: Option<f64>,
    latency_ns_mean: Option<f64>,
}

/// A host's intervals of test `index` on the client's clock: its probe's
/// samples when it finished, else what it streamed before it was lost.
fn host_points(o: &HostOutcome, index: usize, offset: f64) -> Vec<Point> {
    match &o.measured[index] {
        Some(m) => m
            .probe
            .samples
            .iter()
            .map(|s| Point {
                t: m.started_unix + s.t_s - offset,
                bytes_per_sec: s.bytes_per_sec,
                iops: s.iops,
                latency_ns_mean: s.latency_ns_mean,
            })
            .collect(),
        None => o.live[index]
            .iter()
            .map(|s| Point {
                t: s.t_unix - offset,
                bytes_per_sec: s.bytes_per_sec,
                iops: s.iops,
                latency_ns_mean: s.latency_ns_mean,
            })
            .collect(),
    }
}

/// Most per-second samples of one test's sum: a week (the longest test
/// `serve --max-duration` allows), whatever times the hosts reported.
pub const MAX_SUM_SECONDS: i64 = 7 * 86_400;

/// One sample per second of the client's clock from `origin` (the earliest
/// start) to `end` (the last answer; infinite when unknown): each host's
/// interval counted in the second it ends nearest to, rates and operations
/// added, mean latency weighted by operations; a second a host missed
/// (stalled, lost) lacks its share. Intervals outside the span are not
/// counted, and there are at most [`MAX_SUM_SECONDS`] samples.
fn aggregate_samples(hosts: impl Iterator<Item = Vec<Point>>, origin: f64, end: f64) -> Vec<Sample> {
    let hosts: Vec<Vec<Point>> = hosts.collect();
    // Nobody finished: count from a second before the earliest interval's end.
    let origin = if origin.is_finite() {
        origin
    } else {
        hosts.iter().flatten().map(|p| p.t - 1.0).fold(f64::INFINITY, f64::min)
    };
    if !origin.is_finite() {
        return Vec::new();
    }
    // The second after the last answer still takes an interval ending at it.
    let last_second = if end.is_finite() { (end - origin).ceil() + 1.0 } else { f64::INFINITY };
    let last_second = last_second.clamp(1.0, MAX_SUM_SECONDS as f64) as i64;
    let mut bins: BTreeMap<i64, (f64, f64, f64, bool)> = BTreeMap::new();
    for p in hosts.iter().flatten() {
        let second = (p.t - origin).round();
        if !second.is_finite() || second > last_second as f64 {
            continue;
        }
        let second = (second as i64).max(1);
        let bin = bins.entry(second).or_insert((0.0, 0.0, 0.0, false));
        bin.0 += p.bytes_per_sec;
        if let Some(iops) = p.iops {
            bin.1 += iops;
            bin.2 += iops * p.latency_ns_mean.unwrap_or(0.0);
            bin.3 = true;
        }
    }
    let last = bins.keys().last().copied().unwrap_or(0);
    (1..=last)
        .map(|second| {
            let (bytes, iops, weighted, counted) = bins.get(&second).copied().unwrap_or((0.0, 0.0, 0.0, false));
            Sample {
                t_s: second as f64,
                bytes_per_sec: bytes,
                iops: counted.then_some(iops),
                latency_ns_mean: (counted && iops > 0.0 && weighted > 0.0).then(|| weighted / iops),
                latency_ns_p99: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64, rate: f64) -> Point {
        Point { t, bytes_per_sec: rate, iops: Some(rate / 1e6), latency_ns_mean: Some(1000.0) }
    }

    #[test]
    fn samples_meet_on_the_clients_clock_and_a_stalled_host_is_a_dip() {
        let a = vec![at(1001.0, 10e6), at(1002.0, 10e6), at(1003.0, 10e6)];
        let b = vec![at(1001.02, 20e6), at(1003.01, 20e6)]; // silent in its second second
        let s = aggregate_samples([a, b].into_iter(), 1000.0, 1003.5);
        let rates: Vec<f64> = s.iter().map(|s| s.bytes_per_sec).collect();
        assert_eq!(rates, [30e6, 10e6, 30e6]);
        assert_eq!(s[0].iops, Some(30.0));
    }

    #[test]
    fn a_time_far_from_the_test_adds_no_seconds() {
        let honest = vec![at(1001.0, 10e6), at(1002.0, 10e6)];
        let liar = vec![at(1e15, 1e6), at(-1e300, 1e6), at(f64::NAN, 1e6)];
        let s = aggregate_samples([honest.clone(), liar.clone()].into_iter(), 1000.0, 1002.2);
        assert_eq!(s.len(), 2);
        // Even with no end known, the sum stays within a week of seconds.
        let s = aggregate_samples([honest, liar].into_iter(), 1000.0, f64::INFINITY);
        assert!(s.len() as i64 <= MAX_SUM_SECONDS, "{}", s.len());
    }
}
