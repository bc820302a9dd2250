//! A soak database as a `headroom.result/v1` document: one probe per soak
//! probe (write, read, iops, net, and the server's remote-write, remote-read,
//! remote-iops, with their `host`) summarising all its cycles, the soak
//! section (gaps, events), the detectors' findings, and the server's
//! inventory as `peers` (with its virtual-disk warning). `soak --json` prints
//! it without samples; `report FILE.sqlite` loads it with samples thinned to
//! what a chart can show.
//!
//! Memory: samples are streamed from the database; the detectors need one
//! time and value per stored second (16 bytes per sample: about 1.4 MB per
//! day of soak, whatever the cycle, since one probe runs at a time), never
//! the rows themselves.
//!
//! Long only through its unit tests (about 420 lines of code).

use crate::store::{CycleRow, EventRow, Store, StoreError};
use headroom_analysis::detect::{
    around_flap, dips_across, latency_drift, merge_flaps, periodic_dips_across, DipConfig, DriftConfig, Flap,
    FlapSource, LatencyPoint, Point,
};
use headroom_result::{
    Detection, DetectionKind, Histogram, Latency, Probe, ResultDoc, Sample, Soak, SoakEvent, SoakEventKind, SoakGap,
    Summary, Warning,
};
use std::collections::BTreeMap;
use std::path::Path;

/// How many samples a loaded document carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleDetail {
    /// None: summaries and detections only (`soak --json`).
    None,
    /// At most this many points per probe, each the mean of consecutive samples.
    AtMost(usize),
}

/// Loads the soak in `path` as a result document (see the module doc).
pub fn load_result(path: &Path, detail: SampleDetail) -> Result<ResultDoc, StoreError> {
    let store = Store::open(path)?;
    result_from_store(&store, detail)
}

/// As [`load_result`], from an open store.
pub fn result_from_store(store: &Store, detail: SampleDetail) -> Result<ResultDoc, StoreError> {
    let info = store.info()?;
    let origin = info.started_unix;
    let rel = |t: f64| t - origin;
    let mut doc = ResultDoc::new(info.started_at.clone());
    if let Some(host) = info.host.as_ref().and_then(|h| serde_json::from_value(h.clone()).ok()) {
        doc.host = host;
    }
    let cycles = store.cycles()?;
    let events = store.events()?;
    let mut detections = Vec::new();

    let mut probe_names = info.config.cycle.clone();
    for p in store.sampled_probes()? {
        if !probe_names.contains(&p) {
            probe_names.push(p);
        }
    }
    // Every probe's one-per-second values (only one probe runs at a time, so
    // all of them together are one series' worth of memory).
    let mut series: Vec<(String, Vec<Point>)> = Vec::new();
    for name in &probe_names {
        let mine: Vec<&CycleRow> = cycles.iter().filter(|c| &c.probe == name).collect();
        let count = store.sample_count(Some(name))?;
        if count == 0 && mine.iter().all(|c| c.result.is_none()) {
            continue; // never measured (e.g. the server was never reachable): the events say why
        }
        let mut points = Vec::with_capacity(count as usize);
        let mut latency = Vec::new();
        store.for_each_sample(name, |s| {
            points.push(Point::new(rel(s.t_unix), s.bytes_per_sec));
            if let Some(mean) = s.lat_mean_ns {
                latency.push(LatencyPoint { t_s: rel(s.t_unix), mean_ns: mean, p99_ns: s.lat_p99_ns });
            }
        })?;
        let mut probe = summarise_probe(name, &mine, &points);
        if let SampleDetail::AtMost(max) = detail {
            probe.samples = thin(store, name, origin, count, max)?;
        }

        let span = points.last().map_or(0.0, |p| p.t_s) - points.first().map_or(0.0, |p| p.t_s);
        let drift_config = DriftConfig { bucket_s: drift_bucket(span), ..DriftConfig::default() };
        if let Some(drift) = latency_drift(&latency, &drift_config) {
            if drift.drifting {
                detections.push(Detection {
                    kind: DetectionKind::LatencyDrift,
                    probe: Some(name.clone()),
                    message: format!("{name}: {}", drift.describe(span)),
                    details: serde_json::to_value(&drift).unwrap_or_default(),
                });
            }
            probe.details.insert("latency_drift".into(), serde_json::to_value(&drift).unwrap_or_default());
        }
        // The client's writes, and the server's own (`remote-write`).
        if matches!(name.as_str(), "write" | "remote-write") {
            if let Some(found) = write_cliff(name, &points) {
                detections.push(found);
            }
        }
        series.push((name.clone(), points));
        doc.probes.push(probe);
    }

    // Dips are a property of the path: pooled across probes, one period.
    let dip_config = DipConfig::default();
    if let Some(found) = periodic_dips_across(&series, &dip_config) {
        detections.push(Detection {
            kind: DetectionKind::PeriodicDips,
            probe: match found.probes.as_slice() {
                [(only, _)] => Some(only.clone()),
                _ => None,
            },
            message: found.describe_across(),
            details: serde_json::to_value(&found).unwrap_or_default(),
        });
    } else {
        for d in dips_across(&series, &dip_config) {
            let Some(probe) = doc.probes.iter_mut().find(|p| d.probe.as_deref() == p.id.strip_prefix("soak-")) else {
                continue;
            };
            let list = probe
                .details
                .entry(headroom_result::details::DIPS.to_string())
                .or_insert_with(|| serde_json::json!([]));
            if let Some(list) = list.as_array_mut() {
                list.push(serde_json::to_value(&d).unwrap_or_default());
            }
        }
    }
    let series_for_flaps = series.iter().find(|(n, _)| n == "net").or(series.first()).map(|(_, points)| points.clone());

    // Flaps: sysfs and logs merged, with the throughput around each.
    let as_flap = |e: &EventRow| Flap {
        device: e.device.clone().unwrap_or_default(),
        source: match e.source.as_str() {
            "sysfs" => FlapSource::Sysfs,
            "vmkernel_log" => FlapSource::VmkernelLog,
            _ => FlapSource::KernelLog,
        },
        down_s: rel(e.t_unix),
        up_s: e.end_unix.map(rel),
        duration_s: e.end_unix.map(|end| end - e.t_unix),
        detail: e.message.clone(),
    };
    let flap_events = events.iter().filter(|e| e.kind == SoakEventKind::Flap);
    let (sysfs, logs): (Vec<Flap>, Vec<Flap>) = flap_events.map(as_flap).partition(|f| f.source == FlapSource::Sysfs);
    let flaps = merge_flaps(sysfs, logs, 5.0);
    // A vmkernel.log covers days: flaps outside the soak's own span are said
    // apart, with their UTC time, and not counted as the soak's.
    let last_moment = store.sessions()?.iter().filter_map(|s| s.ended_unix).fold(info.started_unix, f64::max);
    let span = (0.0, rel(last_moment.max(info.started_unix + doc_span_hint(&series))));
    let (inside, outside): (Vec<Flap>, Vec<Flap>) =
        flaps.into_iter().partition(|f| f.down_s >= span.0 - 1.0 && f.down_s <= span.1 + 1.0);
    if !inside.is_empty() {
        let series = series_for_flaps.unwrap_or_default();
        let with_context: Vec<serde_json::Value> = inside
            .iter()
            .map(|f| serde_json::json!({"flap": f, "throughput_bytes_per_sec": around_flap(f, &series, 10.0)}))
            .collect();
        detections.push(Detection {
            kind: DetectionKind::LinkFlaps,
            probe: None,
            message: format!("{} link flap(s): {}", inside.len(), list_flaps(&inside, origin)),
            details: serde_json::Value::Array(with_context),
        });
    }
    if !outside.is_empty() {
        let before = outside.iter().filter(|f| f.down_s < 0.0).count();
        let when = match (before, outside.len() - before) {
            (_, 0) => "before it started".to_string(),
            (0, _) => "after it ended".to_string(),
            (b, a) => format!("{b} before it started, {a} after it ended"),
        };
        detections.push(Detection {
            kind: DetectionKind::LinkFlapsOutsideSoak,
            probe: None,
            message: format!(
                "{} link flap(s) in the imported log outside this soak ({when}; not counted as the soak's): {}",
                outside.len(),
                list_flaps(&outside, origin)
            ),
            details: serde_json::to_value(&outside).unwrap_or_default(),
        });
    }
    let outages: Vec<&EventRow> = events.iter().filter(|e| e.kind == SoakEventKind::ServerOutage).collect();
    if !outages.is_empty() {
        // An outage still open counts until the soak's last recorded moment.
        let soak_end = store.sessions()?.iter().filter_map(|s| s.ended_unix).fold(0.0, f64::max);
        let total: f64 = outages.iter().map(|e| (e.end_unix.unwrap_or(soak_end) - e.t_unix).max(0.0)).sum();
        // The turns that need the server share its outages: named for net, else the server's first disk probe.
        let cycle = &info.config.cycle;
        let remote = cycle.iter().find(|p| p.starts_with(crate::setup::REMOTE));
        let named = if cycle.iter().any(|p| p == "net") { None } else { remote };
        detections.push(Detection {
            kind: DetectionKind::ServerOutage,
            probe: Some(named.map_or("net", |p| p.as_str()).into()),
            message: format!(
                "server unreachable {} time(s), {:.0} s in total{}",
                outages.len(),
                total,
                if outages.iter().any(|e| e.end_unix.is_none()) { ", still unreachable at the end" } else { "" }
            ),
            details: serde_json::Value::Null,
        });
    }

    let sessions = store.sessions()?;
    let mut gaps = Vec::new();
    for pair in sessions.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        // A killed session's end is its newest sample, and a far end's samples
        // carry that host's clock: one running ahead would put the end after the
        // next session's start. The next start is this host's own clock, so the
        // gap ends there and never runs backwards.
        let from = prev.ended_unix.unwrap_or(prev.started_unix).min(next.started_unix);
        gaps.push(SoakGap {
            from_s: rel(from),
            to_s: rel(next.started_unix),
            duration_s: next.started_unix - from,
            reason: match &prev.stop_reason {
                None => "interrupted (killed, no clean stop recorded); resumed".into(),
                Some(r) => format!("stopped ({r}); resumed"),
            },
        });
    }
    for g in &gaps {
        doc.warnings.push(Warning::new(
            headroom_result::WarningCode::SoakGap,
            format!("no samples for {:.1} s from +{:.1} s: {}", g.duration_s, g.from_s, g.reason),
        ));
    }
    for d in &detections {
        doc.warnings.push(Warning::new(d.kind.as_str(), d.message.clone()));
    }
    let disk = info.config.disk_device().and_then(|name| doc.host.block_devices.iter().find(|d| d.name == name));
    doc.warnings.extend(disk.and_then(headroom_analysis::virtual_disk_warning));
    if let Some(server) = info.config.server_inventory() {
        let remote_path = info.config.remote_path();
        let disk = remote_path.and_then(|dir| headroom_analysis::peer_device_for_path(&server, &dir.to_string_lossy()));
        doc.warnings.extend(disk.as_ref().and_then(headroom_analysis::virtual_disk_warning));
        doc.peers.push(server);
    }
    // Over the whole soak: writes that kept outrunning the same file's reads.
    doc.warnings.extend(headroom_analysis::writes_outran_reads_warnings(&doc.probes).into_iter().map(|(_, w)| w));
    doc.soak = Some(Soak {
        database: Some(store.path().display().to_string()),
        planned_s: info.planned_s,
        elapsed_s: store.elapsed_s()?,
        cycles: cycles.len() as u64,
        sessions: sessions.len() as u32,
        samples: store.sample_count(None)?,
        gaps,
        events: events
            .iter()
            .map(|e| SoakEvent {
                t_s: rel(e.t_unix),
                end_s: e.end_unix.map(rel),
                kind: e.kind,
                source: e.source.clone(),
                device: e.device.clone(),
                message: e.message.clone(),
            })
            .collect(),
        detections,
    });
    Ok(doc)
}

/// The write cliff of `disk --preset sustained` (shared detector), over the
/// whole soak's write series thinned to at most 600 points (the detector is
/// quadratic in samples; a cache that fills over hours still shows).
fn write_cliff(name: &str, points: &[Point]) -> Option<Detection> {
    let group = points.len().div_ceil(600).max(1);
    let thinned: Vec<Sample> = points
        .chunks(group)
        .map(|c| Sample {
            t_s: c[c.len() - 1].t_s,
            bytes_per_sec: c.iter().map(|p| p.value).sum::<f64>() / c.len() as f64,
            ..Sample::default()
        })
        .collect();
    if let Some(d) = headroom_analysis::detect_write_decline(&thinned) {
        return Some(Detection {
            kind: DetectionKind::WriteDecline,
            probe: Some(name.into()),
            message: format!("{name}: {}", d.describe()),
            details: serde_json::json!({
                "bytes_per_sec_first": d.rate_first,
                "bytes_per_sec_after": d.rate_after,
                "at_s": d.at_s,
                "steps": d.steps,
            }),
        });
    }
    headroom_analysis::detect_write_cliff(&thinned).map(|c| c.detection(name))
}

/// Drift buckets: per hour for soaks of 3 h and more, else per minute (or
/// per 10 s under 3 minutes), so a short soak still shows a course.
fn drift_bucket(span_s: f64) -> f64 {
    if span_s >= 3.0 * 3600.0 {
        3600.0
    } else if span_s >= 180.0 {
        60.0
    } else {
        10.0
    }
}

/// One probe summarising all its cycles: throughput and IOPS are means over
/// the measured time of every cycle with a result (each cycle weighs its
/// length: the short last sample of a cycle cut by the soak's end must not
/// weigh a full second's), else over every stored sample; latency comes from
/// the cycles' histograms merged (exact percentiles), else from their
/// summaries; spec from the last cycle.
fn summarise_probe(name: &str, cycles: &[&CycleRow], points: &[Point]) -> Probe {
    let results: Vec<Probe> =
        cycles.iter().filter_map(|c| c.result.clone().and_then(|r| serde_json::from_value(r).ok())).collect();
    let errors = cycles.iter().filter(|c| c.error.is_some()).count();
    let mut probe = results.last().cloned().unwrap_or_else(|| unmeasured_probe(name));
    probe.id = format!("soak-{name}");
    probe.name = format!("soak {name}");
    probe.samples.clear();
    let duration: f64 = results.iter().map(|r| r.summary.duration_s).sum();
    let merged = Histogram::merged(results.iter().filter_map(|r| r.histogram.as_ref()));
    let iops: Vec<f64> = results.iter().filter_map(|r| r.summary.iops.map(|i| i * r.summary.duration_s)).collect();
    let bytes_per_sec = if duration > 0.0 {
        results.iter().map(|r| r.summary.bytes_per_sec * r.summary.duration_s).sum::<f64>() / duration
    } else {
        points.iter().map(|p| p.value).sum::<f64>() / points.len().max(1) as f64
    };
    probe.summary = Summary {
        bytes_per_sec,
        iops: (!iops.is_empty() && duration > 0.0).then(|| iops.iter().sum::<f64>() / duration),
        latency_ns: merged.as_ref().map_or_else(|| mean_latency(&results), Histogram::latency),
        duration_s: duration,
        bytes: Some(results.iter().filter_map(|r| r.summary.bytes).sum()),
        ops: Some(results.iter().filter_map(|r| r.summary.ops).sum()),
        // A soak's points are on their own grid, not one probe's intervals.
        sample_interval_s: None,
        contention: None,
    };
    probe.histogram = merged;
    probe.details.insert("cycles".into(), cycles.len().into());
    probe.details.insert("failed_cycles".into(), errors.into());
    probe
}

/// The probe `name` of a soak none of whose cycles left a result.
fn unmeasured_probe(name: &str) -> Probe {
    Probe {
        host: None,
        id: String::new(),
        name: String::new(),
        spec: headroom_result::ProbeSpec::Disk(headroom_result::DiskSpec {
            rw: name.to_string(),
            block_size: 0,
            queue_depth: 0,
            jobs: 0,
            direct: false,
            direct_flag: headroom_result::DirectFlag::default(),
            sync: "none".into(),
            engine: "unknown".into(),
            path: String::new(),
            rwmix_read: None,
            size: None,
            filesystem: None,
            fio_equivalent: None,
            fixedbufs: false,
            force_async: false,
            protocol: None,
        }),
        summary: Summary::default(),
        samples: vec![],
        histogram: None,
        warnings: vec![],
        details: BTreeMap::new(),
    }
}

/// Mean of the cycles' mean latencies (weighted by duration); percentiles the
/// largest any cycle saw (an upper bound, named so in docs/commands/soak.md).
fn mean_latency(results: &[Probe]) -> Option<Latency> {
    let with: Vec<(&Latency, f64)> =
        results.iter().filter_map(|r| r.summary.latency_ns.as_ref().map(|l| (l, r.summary.duration_s))).collect();
    let total: f64 = with.iter().map(|(_, d)| d).sum();
    if with.is_empty() || total <= 0.0 {
        return None;
    }
    let max = |f: fn(&Latency) -> f64| with.iter().map(|(l, _)| f(l)).fold(0.0, f64::max);
    Some(Latency {
        mean: with.iter().map(|(l, d)| l.mean * d).sum::<f64>() / total,
        p50: max(|l| l.p50),
        p99: max(|l| l.p99),
        p999: max(|l| l.p999),
        max: max(|l| l.max),
        min: None,
        stddev: None,
    })
}

/// At most `max` samples of a probe: means of consecutive groups (a gap
/// between sessions ends a group, so the chart shows it).
/// "eth0 down 2.0 s at +300.0 s, vmnic1 down at 2026-11-18T04:00:00Z, not
/// back, and 3 more": the first five flaps, at the soak's clock when they
/// fall in it, in UTC otherwise.
fn list_flaps(flaps: &[Flap], origin: f64) -> String {
    let listed: Vec<String> = flaps
        .iter()
        .take(5)
        .map(|f| {
            let at = if f.down_s >= 0.0 { format!("+{:.1} s", f.down_s) } else { crate::rfc3339(origin + f.down_s) };
            match f.duration_s {
                Some(d) => format!("{} down {:.1} s at {at}", f.device, d),
                None => format!("{} down at {at}, not back", f.device),
            }
        })
        .collect();
    let more = if flaps.len() > 5 { format!(", and {} more", flaps.len() - 5) } else { String::new() };
    format!("{}{more}", listed.join(", "))
}

/// The last sample's time on the soak's clock (a soak still running has no end yet).
fn doc_span_hint(series: &[(String, Vec<Point>)]) -> f64 {
    series.iter().filter_map(|(_, points)| points.last().map(|p| p.t_s)).fold(0.0, f64::max)
}

fn thin(store: &Store, name: &str, origin: f64, count: u64, max: usize) -> Result<Vec<Sample>, StoreError> {
    let group = (count as usize).div_ceil(max.max(1)).max(1);
    let mut out = Vec::with_capacity(max.min(count as usize));
    let mut acc: Vec<crate::store::SampleRow> = Vec::with_capacity(group);
    let flush = |acc: &mut Vec<crate::store::SampleRow>, out: &mut Vec<Sample>| {
        if acc.is_empty() {
            return;
        }
        let n = acc.len() as f64;
        let mean_opt = |f: fn(&crate::store::SampleRow) -> Option<f64>| {
            let v: Vec<f64> = acc.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        out.push(Sample {
            t_s: acc[acc.len() - 1].t_unix - origin,
            bytes_per_sec: acc.iter().map(|s| s.bytes_per_sec).sum::<f64>() / n,
            iops: mean_opt(|s| s.iops),
            latency_ns_mean: mean_opt(|s| s.lat_mean_ns),
            latency_ns_p99: mean_opt(|s| s.lat_p99_ns),
        });
        acc.clear();
    };
    let mut last_t = f64::NEG_INFINITY;
    store.for_each_sample(name, |s| {
        if acc.len() >= group || s.t_unix - last_t > 120.0 {
            flush(&mut acc, &mut out);
        }
        last_t = s.t_unix;
        acc.push(*s);
    })?;
    flush(&mut acc, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SampleRow, SoakConfig, SoakInfo};
    use headroom_result::BlockDevice;

    /// A two-session soak written straight into a store: write samples with a
    /// 10 s dip every 60 s and latency doubling, a flap seen by sysfs and the
    /// kernel log, and a gap between the sessions.
    #[test]
    fn a_stored_soak_becomes_a_document_with_detections() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_800_000_000.0;
        let info = SoakInfo {
            started_at: crate::rfc3339(t0),
            started_unix: t0,
            planned_s: Some(1200.0),
            config: SoakConfig {
                cycle: vec!["write".into()],
                probe_s: 600.0,
                path: None,
                server: None,
                vmkernel_log: None,
                extra: serde_json::Value::Null,
            },
            host: None,
        };
        let path = dir.path().join("s.sqlite");
        let store = Store::create(&path, &info).unwrap();
        let write_session = |session_start: f64, from: usize, to: usize, clean: bool| {
            let session = store.begin_session(session_start).unwrap();
            let cycle = store.begin_cycle(session, session, "write", session_start).unwrap();
            for i in from..to {
                let t = t0 + i as f64;
                let rate = if i % 60 < 10 { 50e6 } else { 200e6 + (i % 7) as f64 * 1e6 };
                let lat = 1e6 * (1.0 + i as f64 / 1200.0);
                store
                    .add_sample(
                        cycle,
                        "write",
                        &SampleRow {
                            t_unix: t,
                            bytes_per_sec: rate,
                            iops: Some(rate / 1e6),
                            lat_mean_ns: Some(lat),
                            lat_p99_ns: Some(3.0 * lat),
                        },
                    )
                    .unwrap();
            }
            if clean {
                store.end_session(session, t0 + to as f64, "duration").unwrap();
            }
        };
        write_session(t0, 1, 600, false); // killed after 600 s
        write_session(t0 + 700.0, 700, 1300, true); // resumed 100 s later
                                                    // Two flaps of an imported vmkernel.log: three days before the soak, and in it.
        for (source, t) in
            [("sysfs", 300.0), ("kernel_log", 300.5), ("vmkernel_log", -259_200.0), ("vmkernel_log", 900.0)]
        {
            store
                .add_event(&EventRow {
                    id: 0,
                    t_unix: t0 + t,
                    end_unix: Some(t0 + t + 2.0),
                    kind: SoakEventKind::Flap,
                    source: source.into(),
                    device: Some("eth0".into()),
                    message: "eth0 down".into(),
                    details: None,
                })
                .unwrap();
        }
        let doc = result_from_store(&store, SampleDetail::AtMost(100)).unwrap();
        let soak = doc.soak.as_ref().unwrap();
        assert_eq!(soak.sessions, 2);
        assert_eq!(soak.gaps.len(), 1);
        assert!(
            (soak.gaps[0].from_s - 599.0).abs() < 1e-6 && (soak.gaps[0].to_s - 700.0).abs() < 1e-6,
            "{:?}",
            soak.gaps
        );
        let kinds: Vec<&str> = soak.detections.iter().map(|d| d.kind.as_str()).collect();
        assert!(kinds.contains(&"periodic_dips"), "{kinds:?}");
        assert!(kinds.contains(&"latency_drift"), "{kinds:?}");
        assert!(!kinds.contains(&"write_cliff"), "dips that recover are no cliff: {kinds:?}");
        let flaps = soak.detections.iter().find(|d| d.kind == DetectionKind::LinkFlaps).unwrap();
        assert!(
            flaps.message.starts_with("2 link flap(s): eth0 down 2.0 s at +300.0 s, eth0 down 2.0 s at +900.0 s"),
            "the soak's own flaps only: {}",
            flaps.message
        );
        let old = soak.detections.iter().find(|d| d.kind == DetectionKind::LinkFlapsOutsideSoak).unwrap();
        assert_eq!(
            old.message,
            format!(
                "1 link flap(s) in the imported log outside this soak (before it started; not counted as the soak's): \
                 eth0 down 2.0 s at {}",
                crate::rfc3339(t0 - 259_200.0)
            )
        );
        let dips = soak.detections.iter().find(|d| d.kind == DetectionKind::PeriodicDips).unwrap();
        assert!((dips.details["period_s"].as_f64().unwrap() - 60.0).abs() < 1.0, "{}", dips.message);
        let probe = &doc.probes[0];
        assert_eq!(probe.id, "soak-write");
        assert!(probe.samples.len() <= 110 && probe.samples.len() >= 50, "{}", probe.samples.len());
        assert!(probe.details.contains_key("latency_drift"));
        // The document round-trips through the schema.
        let again = ResultDoc::from_json(&doc.to_json()).expect("a valid headroom.result/v1 document");
        assert_eq!(again.soak.unwrap().detections.len(), soak.detections.len());
        // Without samples for --json.
        assert!(result_from_store(&store, SampleDetail::None).unwrap().probes[0].samples.is_empty());
    }

    /// A killed session whose newest samples are stamped after the resumed
    /// session's start (a far end's clock 20 s ahead) still has a gap that
    /// runs forwards: from no later than the resume, never negative.
    #[test]
    fn a_resume_after_samples_stamped_ahead_has_no_negative_gap() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_800_000_000.0;
        let info = SoakInfo {
            started_at: crate::rfc3339(t0),
            started_unix: t0,
            planned_s: Some(120.0),
            config: SoakConfig {
                cycle: vec!["remote-write".into()],
                probe_s: 30.0,
                path: None,
                server: Some("127.0.0.1".into()),
                vmkernel_log: None,
                extra: serde_json::Value::Null,
            },
            host: None,
        };
        let store = Store::create(&dir.path().join("g.sqlite"), &info).unwrap();
        let killed = store.begin_session(t0).unwrap();
        let cycle = store.begin_cycle(killed, 1, "remote-write", t0).unwrap();
        for i in 1..=31 {
            let row = SampleRow { t_unix: t0 + 0.4 + i as f64, bytes_per_sec: 100e6, ..SampleRow::default() };
            store.add_sample(cycle, "remote-write", &row).unwrap();
        }
        let resumed = store.begin_session(t0 + 12.0).unwrap();
        let cycle = store.begin_cycle(resumed, 2, "remote-write", t0 + 12.0).unwrap();
        let row = SampleRow { t_unix: t0 + 13.0, bytes_per_sec: 100e6, ..SampleRow::default() };
        store.add_sample(cycle, "remote-write", &row).unwrap();
        let doc = result_from_store(&store, SampleDetail::None).unwrap();
        let gaps = doc.soak.unwrap().gaps;
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].duration_s >= 0.0 && gaps[0].from_s <= gaps[0].to_s, "{gaps:?}");
        assert!((gaps[0].to_s - 12.0).abs() < 1e-6, "{gaps:?}");
        for w in &doc.warnings {
            assert!(!w.message.contains("for -"), "{}", w.message);
        }
    }

    /// A cycle cut short by the soak's end has one short last sample; the
    /// soak's mean weighs each cycle by its measured time, not each sample as
    /// one. A failed cycle leaves no result: then every sample counts once.
    #[test]
    fn the_soaks_mean_weighs_each_cycle_by_its_measured_time() {
        let mean_of = |with_results: bool| {
            let dir = tempfile::tempdir().unwrap();
            let info = one_probe_soak("write", serde_json::Value::Null);
            let store = Store::create(&dir.path().join("m.sqlite"), &info).unwrap();
            let session = store.begin_session(1000.0).unwrap();
            // (start, measured seconds, the cycle's rate, its samples' rates)
            for (n, (start, duration_s, rate, samples)) in
                [(1000.0, 2.0, 20e6, vec![20e6, 20e6]), (1003.0, 0.25, 40e6, vec![40e6])].into_iter().enumerate()
            {
                let cycle = store.begin_cycle(session, n as i64 + 1, "write", start).unwrap();
                for (i, rate) in samples.into_iter().enumerate() {
                    let row = SampleRow { t_unix: start + 1.0 + i as f64, bytes_per_sec: rate, ..SampleRow::default() };
                    store.add_sample(cycle, "write", &row).unwrap();
                }
                let summary = Summary { bytes_per_sec: rate, duration_s, ..Summary::default() };
                let result = serde_json::to_value(Probe { summary, ..unmeasured_probe("write") }).unwrap();
                let (result, error) = if with_results { (Some(&result), None) } else { (None, Some("failed")) };
                store.end_cycle(cycle, start + duration_s, result, error).unwrap();
            }
            let doc = result_from_store(&store, SampleDetail::None).unwrap();
            doc.probes[0].summary.bytes_per_sec
        };
        let weighted = (20e6 * 2.0 + 40e6 * 0.25) / 2.25;
        assert!((mean_of(true) - weighted).abs() < 1.0, "{} against {weighted}", mean_of(true));
        let per_sample = (20e6 + 20e6 + 40e6) / 3.0;
        assert!((mean_of(false) - per_sample).abs() < 1.0, "{} against {per_sample}", mean_of(false));
    }

    #[test]
    fn a_write_cache_filling_up_is_a_cliff() {
        // The client's writes, and the server's own in a soak across the wire.
        for name in ["write", "remote-write"] {
            write_cache_cliff(name);
        }
    }

    /// The disk recorded at the start, looked up in the recorded inventory:
    /// a virtual one gives the document the host-cache warning, once.
    #[test]
    fn a_soak_on_a_virtual_disk_carries_the_host_cache_warning() {
        let host = headroom_result::Host {
            block_devices: vec![
                BlockDevice { name: "vda".into(), transport: Some("virtio".into()), ..BlockDevice::default() },
                BlockDevice { name: "sda".into(), transport: Some("sata".into()), ..BlockDevice::default() },
            ],
            ..headroom_result::Host::default()
        };
        let host_cache_warnings = |extra: serde_json::Value| {
            let dir = tempfile::tempdir().unwrap();
            let info = SoakInfo { host: serde_json::to_value(&host).ok(), ..one_probe_soak("read", extra) };
            let store = Store::create(&dir.path().join("v.sqlite"), &info).unwrap();
            let doc = result_from_store(&store, SampleDetail::None).unwrap();
            doc.warnings
                .iter()
                .filter(|w| w.code == headroom_result::WarningCode::PageCachePossible)
                .map(|w| w.message.clone())
                .collect::<Vec<_>>()
        };
        let on_vda = host_cache_warnings(serde_json::json!({"disk_device": "vda"}));
        assert_eq!(on_vda.len(), 1, "{on_vda:?}");
        assert!(on_vda[0].starts_with("vda is a virtual disk (virtio)"), "{}", on_vda[0]);
        assert!(host_cache_warnings(serde_json::json!({"disk_device": "sda"})).is_empty());
        assert!(host_cache_warnings(serde_json::json!({"size": 1})).is_empty(), "a soak stored before the device was");
    }

    /// The server's inventory recorded by the first session that reached it
    /// becomes the document's peer, and a virtual disk under `--remote-path`
    /// there is warned of, named as the server's.
    #[test]
    fn a_soak_of_a_servers_virtual_disk_carries_its_inventory_and_warning() {
        let server = |transport: &str| headroom_result::Host {
            hostname: Some("truenas".into()),
            reached_as: Some("nas.lan".into()),
            block_devices: vec![BlockDevice {
                name: "vdb".into(),
                transport: Some(transport.into()),
                ..BlockDevice::default()
            }],
            filesystems: vec![headroom_result::Filesystem {
                mountpoint: "/mnt/tank".into(),
                fstype: "zfs".into(),
                device: "/dev/vdb1".into(),
                ..Default::default()
            }],
            ..headroom_result::Host::default()
        };
        let document = |inventory: Option<headroom_result::Host>| {
            let dir = tempfile::tempdir().unwrap();
            let mut info = one_probe_soak("remote-read", serde_json::json!({"remote_path": "/mnt/tank/bench"}));
            info.config.server = Some("nas.lan".into());
            if let Some(inventory) = &inventory {
                info.config.set_server_inventory(inventory);
            }
            let store = Store::create(&dir.path().join("p.sqlite"), &info).unwrap();
            result_from_store(&store, SampleDetail::None).unwrap()
        };
        let warnings = |doc: &ResultDoc| {
            let warned = doc.warnings.iter().filter(|w| w.code == headroom_result::WarningCode::PageCachePossible);
            warned.map(|w| w.message.clone()).collect::<Vec<_>>()
        };
        let on_virtio = document(Some(server("virtio")));
        assert_eq!(on_virtio.peers.len(), 1);
        assert_eq!(on_virtio.peers[0].hostname.as_deref(), Some("truenas"));
        let warned = warnings(&on_virtio);
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].starts_with("nas.lan's vdb is a virtual disk (virtio)"), "{}", warned[0]);
        let on_sata = document(Some(server("sata")));
        assert!(warnings(&on_sata).is_empty() && on_sata.peers.len() == 1);
        let unknown = document(None);
        assert!(warnings(&unknown).is_empty() && unknown.peers.is_empty(), "a server never reached");
    }

    /// A soak whose writes kept outrunning the same file's reads (500 against
    /// 200 MB/s over its whole run) says a write-back cache took them; the
    /// other way round it does not.
    #[test]
    fn writes_that_kept_outrunning_the_reads_are_named_a_caches() {
        let outran = |write: f64, read: f64| {
            let dir = tempfile::tempdir().unwrap();
            let mut info = one_probe_soak("write", serde_json::Value::Null);
            info.config.cycle.push("read".into());
            let store = Store::create(&dir.path().join("o.sqlite"), &info).unwrap();
            let session = store.begin_session(1000.0).unwrap();
            for (n, (probe, rate)) in [("write", write), ("read", read)].into_iter().enumerate() {
                let start = 1000.0 + 100.0 * n as f64;
                let cycle = store.begin_cycle(session, 1, probe, start).unwrap();
                for i in 1..=60 {
                    let row = SampleRow { t_unix: start + i as f64, bytes_per_sec: rate, ..SampleRow::default() };
                    store.add_sample(cycle, probe, &row).unwrap();
                }
            }
            let doc = result_from_store(&store, SampleDetail::None).unwrap();
            doc.warnings.into_iter().filter(|w| w.code == headroom_result::WarningCode::WritesOutranReads).count()
        };
        assert_eq!(outran(500e6, 200e6), 1);
        assert_eq!(outran(200e6, 500e6), 0);
    }

    /// A soak of the one probe `name` started at t = 1000 s, with `extra` settings.
    fn one_probe_soak(name: &str, extra: serde_json::Value) -> SoakInfo {
        SoakInfo {
            started_at: crate::rfc3339(1000.0),
            started_unix: 1000.0,
            planned_s: None,
            config: SoakConfig {
                cycle: vec![name.into()],
                probe_s: 60.0,
                path: None,
                server: None,
                vmkernel_log: None,
                extra,
            },
            host: None,
        }
    }

    fn write_cache_cliff(name: &str) {
        let dir = tempfile::tempdir().unwrap();
        let info = one_probe_soak(name, serde_json::Value::Null);
        let store = Store::create(&dir.path().join("c.sqlite"), &info).unwrap();
        let session = store.begin_session(1000.0).unwrap();
        let cycle = store.begin_cycle(session, 1, name, 1000.0).unwrap();
        for i in 1..=1500 {
            let rate = if i <= 700 { 270e6 } else { 32e6 };
            let row = SampleRow { t_unix: 1000.0 + i as f64, bytes_per_sec: rate, ..SampleRow::default() };
            store.add_sample(cycle, name, &row).unwrap();
        }
        let doc = result_from_store(&store, SampleDetail::None).unwrap();
        let cliff =
            doc.soak.unwrap().detections.into_iter().find(|d| d.kind == DetectionKind::WriteCliff).expect("a cliff");
        assert!(cliff.message.contains("from 270.0 MB/s to 32."), "{}", cliff.message);
        assert_eq!(cliff.probe.as_deref(), Some(name));
        assert!((cliff.details["at_s"].as_f64().unwrap() - 700.0).abs() <= 3.0, "{}", cliff.details);
    }
}

#[cfg(test)]
mod cross_probe_tests {
    use super::*;
    use crate::store::{SampleRow, SoakConfig, SoakInfo};

    /// A soak of the default cycle (write, read, iops; `turn_s` each, `switch_s`
    /// without samples between turns) over a path whose throughput falls to
    /// 10% for `dip_s` every `period_s` (first at `first_s`). Each probe has its
    /// own level, so a dip is only a dip against that probe's baseline.
    fn cycled_soak(
        dir: &Path,
        total_s: f64,
        turn_s: f64,
        switch_s: f64,
        period_s: f64,
        dip_s: f64,
        first_s: f64,
    ) -> Store {
        let t0 = 1_800_000_000.0;
        let info = SoakInfo {
            started_at: crate::rfc3339(t0),
            started_unix: t0,
            planned_s: Some(total_s),
            config: SoakConfig {
                cycle: vec!["write".into(), "read".into(), "iops".into()],
                probe_s: turn_s,
                path: None,
                server: None,
                vmkernel_log: None,
                extra: serde_json::Value::Null,
            },
            host: None,
        };
        let store = Store::create(&dir.join("cycled.sqlite"), &info).unwrap();
        let session = store.begin_session(t0).unwrap();
        let levels = [("write", 400e6), ("read", 900e6), ("iops", 160e6)];
        let mut seed = 0x1234_5678_u64;
        let mut noise = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 1000) as f64 / 1000.0 * 0.06 - 0.03
        };
        // Share of (a, b] during which the path is in a dip.
        let dipped = |a: f64, b: f64| {
            let mut k = ((a - first_s) / period_s).floor().max(0.0);
            let mut covered = 0.0;
            loop {
                let (s, e) = (first_s + k * period_s, first_s + k * period_s + dip_s);
                if s >= b {
                    break;
                }
                covered += (e.min(b) - s.max(a)).max(0.0);
                k += 1.0;
            }
            covered / (b - a)
        };
        let (mut t, mut n) = (0.0, 1);
        'outer: loop {
            for (probe, level) in levels {
                let cycle = store.begin_cycle(session, n, probe, t0 + t).unwrap();
                for _ in 0..turn_s as usize {
                    if t + 1.0 > total_s {
                        break 'outer;
                    }
                    let share = dipped(t, t + 1.0);
                    let value = level * (1.0 + noise()) * (1.0 - 0.9 * share);
                    let row = SampleRow { t_unix: t0 + t + 1.0, bytes_per_sec: value, ..SampleRow::default() };
                    store.add_sample(cycle, probe, &row).unwrap();
                    t += 1.0;
                }
                t += switch_s;
            }
            n += 1;
        }
        store.end_session(session, t0 + total_s, "duration").unwrap();
        store
    }

    fn dips_of(store: &Store) -> Vec<Detection> {
        let doc = result_from_store(store, SampleDetail::None).unwrap();
        doc.soak.unwrap().detections.into_iter().filter(|d| d.kind == DetectionKind::PeriodicDips).collect()
    }

    #[test]
    fn dips_every_6_s_in_a_default_cycle_are_one_6_s_period() {
        let dir = tempfile::tempdir().unwrap();
        let store = cycled_soak(dir.path(), 600.0, 30.0, 1.0, 6.0, 1.5, 2.7);
        let found = dips_of(&store);
        assert_eq!(found.len(), 1, "one finding for the path, not one per probe: {found:#?}");
        let period = found[0].details["period_s"].as_f64().unwrap();
        assert!((period - 6.0).abs() <= 0.6, "period {period:.2} s, expected 6 s: {}", found[0].message);
        assert!(found[0].message.contains("write") && found[0].message.contains("iops"), "{}", found[0].message);
    }

    #[test]
    fn dips_every_35_min_in_a_3_h_soak_of_30_s_turns_are_one_35_min_period() {
        let dir = tempfile::tempdir().unwrap();
        let store = cycled_soak(dir.path(), 3.0 * 3600.0, 30.0, 1.0, 2100.0, 40.0, 600.0);
        let found = dips_of(&store);
        assert_eq!(found.len(), 1, "{found:#?}");
        let period = found[0].details["period_s"].as_f64().unwrap();
        assert!((period - 2100.0).abs() <= 210.0, "period {period:.0} s, expected 2100 s: {}", found[0].message);
        assert_eq!(found[0].details["count"].as_u64(), Some(5), "{}", found[0].message);
    }
}
