//! Turns a [`TestOutcome`] into a `headroom.result/v1` probe of kind disk,
//! with the honesty checks that need only the outcome and the target:
//! `page_cache_possible`, `faster_than_ceiling`, `filesystem_caveat`,
//! `queue_depth_capped`, `no_io_completed`, `stopped_early`, `io_error`.

use crate::fio::{fio_command, FioContext};
use crate::run::{histogram_buckets, RunSettings, TestOutcome};
use crate::share::Share;
use crate::storage::Storage;
use crate::target::{filesystem_caveat, ram_bytes, PreparedTarget};
use crate::Rw;
use headroom_result::{DirectFlag, DiskSpec, Histogram, Probe, ProbeSpec, Warning};
use std::collections::BTreeMap;

/// The most the bus under the target carries towards the host: a read
/// faster than this was answered by a cache (`faster_than_ceiling`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BusCeiling {
    /// e.g. `PCIe 3.0 x4`, `SATA III`.
    pub name: String,
    /// The bus's payload ceiling per direction, bytes/s.
    pub bytes_per_sec: f64,
    /// Where the figure came from, e.g. `/sys/block/nvme0n1`.
    pub source: String,
}

/// The warnings every probe on this target carries, whatever it measured.
pub fn honesty_warnings(outcome: &TestOutcome, target: &Storage, bus: Option<&BusCeiling>) -> Vec<Warning> {
    let mut w = match target {
        Storage::Local(local) => local_warnings(outcome, local),
        Storage::Share(share) => share_warnings(outcome, share.as_ref()),
    };
    w.extend(outcome_warnings(outcome, bus));
    w
}

/// A share's reads may come from the server's page cache (its RAM is not
/// known here), and the server may grant fewer I/Os in flight than asked.
fn share_warnings(outcome: &TestOutcome, share: &dyn Share) -> Vec<Warning> {
    let mut w = Vec::new();
    let info = share.info();
    if outcome.def.rw.reads() {
        w.push(Warning::new(
            headroom_result::WarningCode::PageCachePossible,
            format!(
                "reads of a {} region on the server: its page cache may have answered (headroom's {} client caches \
                 nothing); use a --size over twice the server's RAM for the disk's own figure",
                headroom_units::format_size(share.size()),
                info.name
            ),
        ));
    }
    if let Some(granted) = info.queue_depth_granted.filter(|&g| g < outcome.def.queue_depth) {
        w.push(Warning::new(
            headroom_result::WarningCode::QueueDepthCapped,
            format!(
                "the {} server granted {granted} I/Os in flight per connection, fewer than QD{} asked: at most {granted} \
                 were in flight per job",
                info.name, outcome.def.queue_depth
            ),
        ));
    }
    w
}

fn local_warnings(outcome: &TestOutcome, target: &PreparedTarget) -> Vec<Warning> {
    let mut w = Vec::new();
    let memory_fs = target.filesystem.as_ref().is_some_and(|f| f.name == "tmpfs" || f.name == "ramfs");
    let ram = ram_bytes();
    if (!outcome.direct && target.size < ram.saturating_mul(2)) || memory_fs {
        w.push(Warning::new(
            headroom_result::WarningCode::PageCachePossible,
            format!(
                "{} on a {} file with {} of RAM: the page cache may have answered; {}",
                if outcome.direct { crate::os::DIRECT_FLAG.word() } else { "buffered I/O" },
                headroom_units::format_size(target.size),
                headroom_units::format_size(ram),
                if memory_fs {
                    "this filesystem is memory".to_string()
                } else {
                    format!("use {} (--direct on) or a --size over twice the RAM", crate::os::DIRECT_FLAG.word())
                }
            ),
        ));
    }
    if let Some(fs) = &target.filesystem {
        w.extend(filesystem_caveat(fs));
    }
    w
}

/// What the figures themselves say, wherever they were measured.
fn outcome_warnings(outcome: &TestOutcome, bus: Option<&BusCeiling>) -> Vec<Warning> {
    let mut w = Vec::new();
    if let Some(bus) = bus {
        let reads = matches!(outcome.def.rw, Rw::Read | Rw::RandRead);
        if reads && outcome.summary.bytes_per_sec > bus.bytes_per_sec {
            w.push(Warning::new(
                headroom_result::WarningCode::FasterThanCeiling,
                format!(
                    "read {} but the device's bus ({}) carries at most {}: a cache answered, not the device",
                    headroom_units::format_bytes_per_sec(outcome.summary.bytes_per_sec),
                    bus.name,
                    headroom_units::format_bytes_per_sec(bus.bytes_per_sec)
                ),
            ));
        }
    }
    let asked = u64::from(outcome.def.jobs) * u64::from(outcome.def.queue_depth);
    if outcome.engine == crate::EngineKind::Psync && u64::from(outcome.threads) < asked {
        w.push(Warning::new(
            headroom_result::WarningCode::QueueDepthCapped,
            format!(
                "psync runs one I/O per thread: {} jobs x QD{} would be {asked} threads, capped at {}, so at most {} I/Os were in flight; use --engine io_uring for deeper queues",
                outcome.def.jobs, outcome.def.queue_depth, outcome.threads, outcome.threads
            ),
        ));
    }
    if outcome.summary.ops == Some(0) && outcome.error.is_none() && !outcome.stopped {
        w.push(Warning::new(
            headroom_result::WarningCode::NoIoCompleted,
            format!(
                "{}: no I/O completed in the {:.2} s measured, so there is no figure: every I/O took longer than \
                 that (a very slow or throttled device, or writeback of earlier writes ahead of it); use a longer --time",
                outcome.def.name, outcome.summary.duration_s
            ),
        ));
    }
    if outcome.stopped {
        w.push(Warning::new(
            headroom_result::WarningCode::StoppedEarly,
            "stopped by Ctrl-C, SIGTERM or SIGHUP: figures cover the time measured until then",
        ));
    }
    if let Some(e) = &outcome.error {
        w.push(Warning::new(headroom_result::WarningCode::IoError, format!("the test ended early: {e}")));
    }
    w
}

/// Each source's part of the figures: the bytes its jobs moved. The share
/// remembers every job any test connected; this test's are those below its
/// `--jobs`.
fn with_spread(mut info: headroom_result::ProtocolInfo, outcome: &TestOutcome) -> headroom_result::ProtocolInfo {
    let secs = outcome.summary.duration_s;
    for share in &mut info.sources {
        share.jobs.retain(|&j| j < outcome.def.jobs);
        let bytes = share.jobs.iter().filter_map(|&j| outcome.worker_bytes.get(j as usize)).sum::<u64>();
        share.bytes = Some(bytes);
        share.bytes_per_sec = (secs > 0.0).then(|| bytes as f64 / secs);
    }
    info.sources.retain(|s| !s.jobs.is_empty());
    info
}

/// The probe for one test.
pub fn to_probe(outcome: &TestOutcome, target: &Storage, settings: RunSettings, warnings: Vec<Warning>) -> Probe {
    let def = &outcome.def;
    let path = target.display();
    let protocol = match target {
        Storage::Share(share) => Some(with_spread(share.info(), outcome)),
        Storage::Local(_) => None,
    };
    let fio = fio_command(
        def,
        FioContext {
            path: &path,
            size: target.size(),
            engine: outcome.engine,
            direct: outcome.direct,
            pattern: settings.pattern,
            fixedbufs: outcome.fixedbufs,
            force_async: outcome.force_async,
            protocol: protocol.as_ref().map(|p| p.name.as_str()),
        },
    );
    let mut details = BTreeMap::new();
    details.insert("threads".into(), serde_json::json!(outcome.threads));
    details.insert("ramp_s".into(), serde_json::json!(def.ramp.as_secs_f64()));
    details.insert("pattern".into(), serde_json::json!(settings.pattern.to_string()));
    if let Some(local) = target.local() {
        details.insert("dio_align".into(), serde_json::json!(local.dio_align));
        details.insert("dio_align_source".into(), serde_json::json!(local.dio_align_source));
    }
    if outcome.stopped {
        details.insert(headroom_result::details::STOPPED_EARLY.into(), serde_json::json!(true));
    }
    if !outcome.warmup_samples.is_empty() {
        details.insert("warmup_samples".into(), serde_json::json!(outcome.warmup_samples));
    }
    Probe {
        host: None,
        id: def.id.clone(),
        name: def.name.clone(),
        spec: ProbeSpec::Disk(DiskSpec {
            rw: def.rw.as_str().into(),
            block_size: def.block_size,
            queue_depth: def.queue_depth,
            jobs: def.jobs,
            direct: outcome.direct,
            // A protocol client opens nothing with this system's flag.
            direct_flag: if protocol.is_none() { crate::os::DIRECT_FLAG } else { DirectFlag::default() },
            sync: def.sync.as_str().into(),
            engine: protocol.as_ref().map_or(outcome.engine.as_str(), |p| p.name.as_str()).into(),
            path,
            rwmix_read: def.rwmix_read,
            size: Some(target.size()),
            filesystem: target.filesystem().map(|f| f.name.clone()),
            fio_equivalent: fio,
            fixedbufs: outcome.fixedbufs,
            force_async: outcome.force_async,
            protocol,
        }),
        summary: outcome.summary.clone(),
        samples: outcome.samples.clone(),
        histogram: (!outcome.histogram.is_empty())
            .then(|| Histogram { buckets: histogram_buckets(&outcome.histogram) }),
        warnings,
        details,
    }
}
