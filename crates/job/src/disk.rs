//! The disk job: what `headroom disk` and the main job's disk steps run on
//! the Runner. It owns the measuring loop both share (when a failure stops
//! the tests, which figures are kept, the O_DIRECT fallback notice, the
//! write-cliff check) and, for `disk`, the bus ceiling and the goals up to
//! the finished document.
//!
//! What it must not do: print, parse flags or draw progress; progress goes
//! to the sinks the caller hands in, notices to its [`DiskReport`].

use crate::path::{disk_under, disk_under_on, DiskUnder};
use crate::post::with_write_checks;
use crate::steps::StepSinks;
use crate::Spelling;
use headroom_analysis::{Goal, GoalResult};
use headroom_disk::{DiskEngine, DiskRequest, DiskTarget, ShareOpener, TestSelection};
use headroom_net::{Endpoint, RemoteEngine};
use headroom_result::{Ceiling, Probe, ResultDoc, Warning};
use headroom_runner::{EngineKind, Plan, PrepareEvent, ProbeError, Runner, Sink};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What `headroom disk` measures, checked by the caller.
pub struct DiskJob {
    /// The directory, device, file or URL and how to treat it.
    pub target: DiskTarget,
    /// The tests, resolved from the preset or the custom test's flags.
    pub selection: TestSelection,
    /// A `headroom serve` whose own disk holds `target` (the server measures).
    pub server: Option<Endpoint>,
    /// The protocol client for a URL target.
    pub share: Option<Arc<dyn ShareOpener>>,
    /// Thresholds held against the best test of each kind.
    pub goals: Vec<Goal>,
    /// How an error names a setting (the binary's flags).
    pub spelling: Spelling,
}

/// What the disk job tells its caller while it runs, beside progress.
pub trait DiskReport {
    /// The target at `path` refused O_DIRECT where it was asked for: the
    /// tests run buffered (said once per run).
    fn direct_refused(&mut self, _path: &str) {}
}

/// A report that says nothing (the main job's disk steps).
pub struct Quiet;

impl DiskReport for Quiet {}

/// Why the disk job ended without a document.
#[derive(Debug, thiserror::Error)]
pub enum DiskJobError {
    /// Stopped (Ctrl-C) while laying out the test file: nothing measured.
    #[error("stopped while laying out the test file; nothing was measured")]
    StoppedInLayout,
    /// Refused before the first test, or every test failed (the message).
    #[error("{0}")]
    Failed(String),
}

/// The finished disk job.
pub struct DiskDone {
    /// The measured document with its bus ceiling and missed-goal warnings.
    pub doc: ResultDoc,
    /// What the disk engine said about the target (for the heading).
    pub target: Option<PrepareEvent>,
    /// Each goal against the document.
    pub goals: Vec<GoalResult>,
    /// The error that stopped the tests after some were measured: the
    /// figures in `doc` are those before it.
    pub failure: Option<String>,
}

/// What the disk engine said about the target, for the heading.
#[derive(Default)]
struct TargetSeen(Option<PrepareEvent>);

impl Sink for TargetSeen {
    fn prepared(&mut self, event: &PrepareEvent) {
        if matches!(event, PrepareEvent::DiskTarget { .. }) {
            self.0 = Some(event.clone());
        }
    }
}

/// Runs `headroom disk`'s job: the tests on the target (here, over a share,
/// or by the server), the test file removed before it returns.
pub fn run(
    job: DiskJob,
    stop: &AtomicBool,
    sinks: &mut StepSinks<'_>,
    report: &mut dyn DiskReport,
) -> Result<DiskDone, DiskJobError> {
    // The disk under a server's path is found in the inventory it sends
    // (kept in the document's peers); a share's is not known here.
    // None when the server does not answer: the probes then say why.
    let server_inventory =
        job.server.as_ref().filter(|_| job.share.is_none()).and_then(|s| headroom_net::peer_inventory(s).ok());
    let DiskUnder { bus, warning } = match (&server_inventory, &job.server, &job.share) {
        (Some(inventory), _, _) => disk_under_on(inventory, &job.target.path),
        (None, None, None) => disk_under(&job.target.path),
        _ => DiskUnder::default(),
    };
    let (mut plan, requests) = DiskRequest::plan(&job.target, &job.selection, bus.as_ref());
    let mut runner = match job.server {
        Some(server) => {
            plan = plan.placed_at(&server.display());
            Runner::new().with(RemoteEngine::new(EngineKind::Disk, server).spelling_settings(job.spelling.net))
        }
        None => {
            let engine = DiskEngine::new().spelling_settings(job.spelling.disk);
            Runner::new().with(match job.share {
                Some(opener) => engine.with_shares(opener),
                None => engine,
            })
        }
    };
    let mut seen = TargetSeen::default();
    let measured = measure(&mut runner, &plan, &requests, stop, sinks, Some(&mut seen), report);
    let failure = match measured.failure {
        None => None,
        Some(DiskFailure::StoppedInLayout) => return Err(DiskJobError::StoppedInLayout),
        Some(DiskFailure::Refused(e)) => return Err(DiskJobError::Failed(e)),
        Some(DiskFailure::Failed(e)) if measured.probes.is_empty() => return Err(DiskJobError::Failed(e)),
        Some(DiskFailure::Failed(e)) => Some(e),
    };
    let mut doc = ResultDoc::new(headroom_result::now_rfc3339());
    // The machine the command ran on, as `run` records it: `report` and
    // `compare` name it, and the verdict finds the disk under the path in it.
    doc.host = headroom_sys::inventory_live();
    doc.probes = measured.probes;
    doc.warnings = measured.warnings;
    doc.warnings.extend(warning);
    doc.peers.extend(server_inventory);
    if let Some(b) = &bus {
        doc.ceilings.push(Ceiling {
            hop: headroom_result::Hop::Bus,
            name: b.name.clone(),
            bytes_per_sec: b.bytes_per_sec,
            source: Some(b.source.clone()),
        });
    }
    let goals = crate::steps::hold_goals(&mut doc, &job.goals, None);
    Ok(DiskDone { doc, target: seen.0, goals, failure })
}

/// Why a disk plan stopped before its end.
pub(crate) enum DiskFailure {
    /// Ctrl-C while the test file was laid out.
    StoppedInLayout,
    /// The target or the first test was refused before any I/O.
    Refused(String),
    /// A test failed; the probes before it (and its own, when it did I/O) are kept.
    Failed(String),
}

/// A disk plan's measured probes (each with its write-cliff check), the
/// run's warnings, and what stopped it early.
pub(crate) struct Measured {
    pub probes: Vec<Probe>,
    pub warnings: Vec<Warning>,
    pub failure: Option<DiskFailure>,
}

/// Runs a disk plan on `runner` until its end, a failure or a stop, then
/// lets the runner remove the test file. `extra` watches beside the
/// caller's progress (the main job: the far end's CPU); probe `i` is
/// request `i`'s.
#[allow(clippy::too_many_arguments)] // two callers; a struct would only rename them
pub(crate) fn measure(
    runner: &mut Runner,
    plan: &Plan,
    requests: &[DiskRequest],
    stop: &AtomicBool,
    sinks: &mut StepSinks<'_>,
    extra: Option<&mut dyn Sink>,
    report: &mut dyn DiskReport,
) -> Measured {
    let mut progress = sinks(plan);
    let (probes, failure) = match extra {
        Some(extra) => measure_loop(runner, plan, requests, stop, &mut [progress.as_mut(), extra], report),
        None => measure_loop(runner, plan, requests, stop, &mut [progress.as_mut()], report),
    };
    let warnings = runner.warnings().to_vec();
    runner.finish(); // removes the test file before anything is printed
    drop(progress);
    let mut probes: Vec<_> = probes.into_iter().map(with_write_checks).collect();
    headroom_analysis::annotate_writes_outran_reads(&mut probes);
    Measured { probes, warnings, failure }
}

/// [`measure`]'s loop over the runs: the probes kept and what stopped them.
fn measure_loop(
    runner: &mut Runner,
    plan: &Plan,
    requests: &[DiskRequest],
    stop: &AtomicBool,
    sinks: &mut [&mut dyn Sink],
    report: &mut dyn DiskReport,
) -> (Vec<Probe>, Option<DiskFailure>) {
    let mut probes: Vec<Probe> = Vec::new();
    let mut failure = None;
    let mut fallback_said = false;
    for run in runner.execute(plan, stop, sinks) {
        match run.result {
            // Refused before its first I/O (an engine that could not start, a
            // server that will not take this block size): no row of zeros.
            Ok(measured) if measured.error.is_some() && measured.probe.summary.ops.unwrap_or(0) == 0 => {
                failure = measured.error.map(|e| DiskFailure::Failed(e.to_string()));
                break;
            }
            Ok(measured) => {
                let probe = measured.probe;
                let spec = disk_spec(&probe);
                if requests[probes.len()].wants_direct() && !spec.is_some_and(|d| d.direct) && !fallback_said {
                    report.direct_refused(spec.map_or("", |d| d.path.as_str()));
                    fallback_said = true;
                }
                let stopped = probe.stopped_early();
                probes.push(probe);
                // Keep the figures measured so far; report the error after them.
                if let Some(e) = measured.error {
                    failure = Some(DiskFailure::Failed(e.to_string()));
                    break;
                }
                if stopped {
                    break;
                }
            }
            Err(ProbeError::Stopped) => {
                failure = Some(DiskFailure::StoppedInLayout);
                break;
            }
            Err(e) if !run.started => {
                failure = Some(DiskFailure::Refused(e.to_string()));
                break;
            }
            Err(e) => {
                failure = Some(DiskFailure::Failed(e.to_string()));
                break;
            }
        }
    }
    (probes, failure)
}

/// A probe's disk spec (None for other probes).
pub fn disk_spec(p: &Probe) -> Option<&headroom_result::DiskSpec> {
    match &p.spec {
        headroom_result::ProbeSpec::Disk(d) => Some(d),
        _ => None,
    }
}
