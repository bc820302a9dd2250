//! headroom-disk as a Runner engine. A [`DiskRequest`] (target, run-wide
//! settings, one test, the bus ceiling to hold reads against) is plain data;
//! the engine prepares the target once for all the plan's tests on it
//! (create, check every test, lay out), runs each test and hands back its
//! probe with the honesty warnings. The target (and its test file) lives
//! until [`ProbeEngine::finish`] or drop.

use crate::preset::TestSelection;
use crate::probe::{honesty_warnings, to_probe, BusCeiling};
use crate::run::{check_test, run_test, RunSettings, Tick};
use crate::share::{layout_share, looks_like_url, prepare_share, ShareOpener};
use crate::storage::Storage;
use crate::target::{test_file_name, PreparedTarget, TargetKind, TargetOptions};
use crate::{DirectMode, DiskError, PeerFault, Rw, Setting, TestDef};
use headroom_result::{details, Warning};
use headroom_runner::{
    unix_now, EngineKind, Expected, LiveSample, Measured, Plan, PrepareEvent, ProbeEngine, ProbeError, ProbeRequest,
};
use headroom_units::setting::Message;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where the tests run: PATH and what the user allowed there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskTarget {
    /// The file, directory (for a test file) or device to test.
    pub path: PathBuf,
    /// Test file or region size; None: the default for a test file, the whole device or file.
    pub size: Option<u64>,
    /// Test-file size when `size` is None, bytes.
    pub default_size: u64,
    /// `--destructive`: writing to a block device or existing file is allowed.
    pub destructive: bool,
    /// `--force`: write even where a superblock or partition table was found (never to something in use).
    pub force: bool,
    /// `--keep`: leave the test file in place after the run.
    pub keep: bool,
}

/// One disk test to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskRequest {
    /// Where the tests run.
    pub target: DiskTarget,
    /// Run-wide settings (engine, O_DIRECT, pattern).
    pub settings: RunSettings,
    /// The test.
    pub test: TestDef,
    /// Reads faster than this bus were answered by a cache (`faster_than_ceiling`).
    pub bus: Option<BusCeiling>,
}

impl DiskRequest {
    /// As a Runner request: a bar over warm-up and measured time.
    pub fn to_request(&self) -> ProbeRequest {
        let expected = Expected::About(self.test.ramp + self.test.time);
        ProbeRequest::new(EngineKind::Disk, self.test.name.clone(), expected, self)
    }

    /// Whether O_DIRECT was asked for this test (auto counts).
    pub fn wants_direct(&self) -> bool {
        self.test.direct.unwrap_or(self.settings.direct) != DirectMode::Off
    }

    /// The requests of a resolved selection on `target`, every read held
    /// against `bus`, and the Runner plan of them.
    pub fn plan(target: &DiskTarget, selection: &TestSelection, bus: Option<&BusCeiling>) -> (Plan, Vec<DiskRequest>) {
        let requests: Vec<DiskRequest> = selection
            .tests
            .iter()
            .map(|test| DiskRequest {
                target: target.clone(),
                settings: selection.settings,
                test: test.clone(),
                bus: bus.cloned(),
            })
            .collect();
        (Plan::new(requests.iter().map(DiskRequest::to_request).collect()), requests)
    }
}

/// The disk engine: one prepared target at a time.
#[derive(Default)]
pub struct DiskEngine {
    prepared: Option<(DiskTarget, Storage)>,
    /// `headroom serve --allow-path`: test files only, in these directories.
    confined_to: Option<Vec<PathBuf>>,
    /// Opens `nfs://`, `iscsi://`, `nbd://` and `smb://` targets (headroom-proto).
    shares: Option<Arc<dyn ShareOpener>>,
    /// The caller's stop flag as the protocol clients see it (see [`forward_stop`]).
    share_stop: Arc<AtomicBool>,
    /// How an error names a setting: the front end's table
    /// ([`DiskEngine::spelling_settings`]); None, the setting's own name.
    spelling: Option<fn(Setting) -> &'static str>,
}

impl DiskEngine {
    /// An engine with nothing prepared yet.
    pub fn new() -> Self {
        DiskEngine { prepared: None, confined_to: None, shares: None, share_stop: Arc::default(), spelling: None }
    }

    /// This engine also tests the URLs `opener` handles.
    pub fn with_shares(mut self, opener: Arc<dyn ShareOpener>) -> Self {
        self.shares = Some(opener);
        self
    }

    /// An engine that only creates test files, and only in one of `roots`
    /// (canonical paths) or below: the far end's engine, for requests that
    /// come from the network.
    pub fn confined_to(roots: Vec<PathBuf>) -> Self {
        DiskEngine {
            prepared: None,
            confined_to: Some(roots),
            shares: None,
            share_stop: Arc::default(),
            spelling: None,
        }
    }

    /// Names a setting in an error as `spell` does (the binary's flags, or
    /// for a server the client's).
    pub fn spelling_settings(mut self, spell: fn(Setting) -> &'static str) -> Self {
        self.spelling = Some(spell);
        self
    }

    /// Refuses a prepared target outside the confinement, judged on the
    /// descriptor it holds (not the path: a symlink swapped in between cannot
    /// lead out). Dropping the refused target removes its test file.
    fn check_confined(&self, prepared: &PreparedTarget) -> Result<(), ProbeError> {
        let Some(roots) = &self.confined_to else { return Ok(()) };
        if prepared.kind != TargetKind::TestFile {
            return Err(ProbeError::Usage(format!(
                "'{}' is not a directory: remote disk probes only create test files in an allowed directory",
                prepared.path.display()
            )));
        }
        let real = prepared.resolved_path().map_err(|e| ProbeError::Failed(format!("where is the test file: {e}")))?;
        if crate::safety::under_any(&real, roots) {
            Ok(())
        } else {
            let outside = Message::text(format!(
                "'{}' leads to {}, outside every ",
                prepared.path.display(),
                real.parent().unwrap_or(&real).display()
            ));
            Err(disk_error(
                DiskError::Invalid(outside.and(Setting::ServerAllowPath).then(" of this server")),
                self.spelling,
            ))
        }
    }

    /// Opens `target`: a URL through the share opener, a path on this machine
    /// (confined for a server).
    fn open_target(&self, target: &DiskTarget, options: &TargetOptions) -> Result<Storage, ProbeError> {
        let shown = target.path.to_string_lossy();
        if let Some(opener) = self.shares.as_ref().filter(|o| o.handles(&shown)) {
            let share = prepare_share(opener.as_ref(), &shown, options).map_err(|e| disk_error(e, self.spelling))?;
            return Ok(Storage::Share(Arc::from(share)));
        }
        if looks_like_url(&shown) {
            return Err(ProbeError::Usage(format!(
                "'{shown}' is a URL of a kind this engine cannot open: headroom tests nfs://, iscsi://, nbd:// and \
                 smb:// URLs on the client, and paths on a server"
            )));
        }
        let prepared = PreparedTarget::prepare(&target.path, options).map_err(|e| disk_error(e, self.spelling))?;
        self.check_confined(&prepared)?;
        Ok(Storage::Local(prepared))
    }

    /// Prepares `target` for `tests`: creates it, checks each test against it
    /// (misaligned O_DIRECT block sizes fail before minutes of layout) and
    /// lays out a new test file unless the tests only write sequentially
    /// (they write the file as they go).
    fn prepare_target(
        &mut self,
        target: &DiskTarget,
        tests: &[DiskRequest],
        stop: &AtomicBool,
        events: &mut dyn FnMut(&PrepareEvent),
    ) -> Result<Vec<Warning>, ProbeError> {
        self.prepared = None; // removes the test file of an earlier target
        let options = TargetOptions {
            size: target.size,
            default_size: target.default_size,
            writes: tests.iter().any(|t| t.test.rw.writes()),
            destructive: target.destructive,
            force: target.force,
            keep: target.keep,
            named_file: false,
            stop: Arc::clone(&self.share_stop),
        };
        let prepared = forward_stop(stop, &self.share_stop, || self.open_target(target, &options))?;
        let shown = prepared.display();
        // Announced before the (long) layout, so a kill during it leaves a record.
        if shown.ends_with(&test_file_name()) {
            events(&PrepareEvent::TestFileCreated { path: shown.clone() });
        }
        events(&PrepareEvent::DiskTarget {
            path: shown,
            kind: prepared.kind_name().into(),
            filesystem: prepared.filesystem().map(|f| f.name.clone()),
            size: prepared.size(),
        });
        for t in tests {
            check_test(&prepared, &t.test, t.wants_direct()).map_err(|e| disk_error(e, self.spelling))?;
        }
        let only_seq_writes = tests.iter().all(|t| t.test.rw == Rw::Write);
        let mut warnings = Vec::new();
        if prepared.needs_layout() && !only_seq_writes {
            let total = prepared.size();
            let mut progress = |done: u64, _| {
                if done.is_multiple_of(64 << 20) || done == total {
                    events(&PrepareEvent::Progress { what: "laying out".into(), done, total });
                }
            };
            let laid = match &prepared {
                Storage::Local(local) => local.layout(stop, progress),
                Storage::Share(share) => forward_stop(stop, &self.share_stop, || {
                    layout_share(share.as_ref(), stop, &mut progress).map(|()| Vec::new())
                }),
            };
            if stop.load(Ordering::Relaxed) {
                return Err(ProbeError::Stopped);
            }
            warnings = laid.map_err(|e| disk_error(e, self.spelling))?;
        }
        self.prepared = Some((target.clone(), prepared));
        Ok(warnings)
    }
}

/// Runs `f` while a helper thread copies the caller's `stop` into `shared`
/// every 20 ms: the protocol clients wait in their own loops (and threads)
/// and cannot borrow the caller's flag, yet Ctrl-C must end their waits at once.
fn forward_stop<R>(stop: &AtomicBool, shared: &Arc<AtomicBool>, f: impl FnOnce() -> R) -> R {
    /// Ends the helper also when `f` panics (the scope would wait for it for ever).
    struct Finished<'a>(&'a AtomicBool);
    impl Drop for Finished<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let finished = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !finished.load(Ordering::SeqCst) {
                if stop.load(Ordering::Relaxed) {
                    shared.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        let _finished = Finished(&finished);
        f()
    })
}

/// `e`'s line, its settings named as `spelling` spells them.
fn spelled(e: &DiskError, spelling: Option<fn(Setting) -> &'static str>) -> String {
    match spelling {
        Some(spell) => e.spelled(spell),
        None => e.to_string(),
    }
}

/// A disk error as the Runner sees it: the user's mistake, or the machine's;
/// its settings named as `spelling` spells them.
fn disk_error(e: DiskError, spelling: Option<fn(Setting) -> &'static str>) -> ProbeError {
    if let DiskError::Peer { fault, message } = e {
        return match fault {
            PeerFault::Unreachable | PeerFault::Refused => ProbeError::Unreachable(message),
            PeerFault::Lost => ProbeError::Lost(message),
            PeerFault::Protocol => ProbeError::Failed(message),
        };
    }
    let line = spelled(&e, spelling);
    if e.is_usage() {
        ProbeError::Usage(line)
    } else {
        ProbeError::Failed(line)
    }
}

impl ProbeEngine for DiskEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Disk
    }

    fn prepare(
        &mut self,
        requests: &[&ProbeRequest],
        stop: &AtomicBool,
        events: &mut dyn FnMut(&PrepareEvent),
    ) -> Result<Vec<Warning>, ProbeError> {
        let tests: Vec<DiskRequest> = requests.iter().map(|r| r.params()).collect::<Result<_, _>>()?;
        let Some(first) = tests.first() else { return Ok(Vec::new()) };
        let target = first.target.clone();
        let on_it: Vec<DiskRequest> = tests.into_iter().filter(|t| t.target == target).collect();
        self.prepare_target(&target, &on_it, stop, events)
    }

    fn run(
        &mut self,
        request: &ProbeRequest,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&LiveSample),
    ) -> Result<Measured, ProbeError> {
        let req: DiskRequest = request.params()?;
        if self.prepared.as_ref().is_none_or(|(t, _)| *t != req.target) {
            // A target the plan did not prepare first: this test alone.
            self.prepare_target(&req.target, std::slice::from_ref(&req), stop, &mut |_| {})?;
        }
        let (_, target) = self.prepared.as_ref().expect("prepared above");
        let started_unix = unix_now();
        let mut on_tick = |t: &Tick| {
            on_sample(&LiveSample {
                t_unix: started_unix + t.elapsed.as_secs_f64(),
                elapsed: t.elapsed,
                ramping: t.ramping,
                bytes_per_sec: t.bytes_per_sec,
                iops: Some(t.iops),
                ..LiveSample::default()
            })
        };
        let cpu_before = headroom_sys::CpuSnapshot::take();
        let outcome = match target {
            Storage::Share(_) => {
                forward_stop(stop, &self.share_stop, || run_test(target, &req.test, req.settings, stop, &mut on_tick))
            }
            Storage::Local(_) => run_test(target, &req.test, req.settings, stop, &mut on_tick),
        }
        .map_err(|e| disk_error(e, self.spelling))?;
        let cpu_load = cpu_before.and_then(|before| Some(headroom_sys::CpuSnapshot::take()?.load_since(&before)));
        let warnings = honesty_warnings(&outcome, target, req.bus.as_ref());
        let mut probe = to_probe(&outcome, target, req.settings, warnings);
        if let Some(limit) = target.local().and_then(|t| headroom_sys::io_limit(&t.path)) {
            probe.details.insert(details::IO_LIMIT.into(), serde_json::to_value(limit).expect("plain data"));
        }
        if let Some(load) = cpu_load {
            // This machine's cores over the test (its I/O threads have ended:
            // they count in the process total, not per thread).
            let load = serde_json::to_value(load).expect("a CPU load is plain data");
            probe.details.insert(headroom_result::details::cpu_load_key(headroom_result::Side::Local).into(), load);
        }
        Ok(Measured {
            probe,
            started_unix: started_unix + req.test.ramp.as_secs_f64(),
            error: outcome.error.map(|e| ProbeError::Failed(spelled(&e, self.spelling))),
        })
    }

    fn finish(&mut self) {
        self.prepared = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::test_def;
    use headroom_runner::{Plan, Runner, SampleLog, Sink};
    use std::time::Duration;

    fn request(dir: &std::path::Path, rw: Rw, bs: u64) -> ProbeRequest {
        let test = test_def(rw, bs, 4, 1, Duration::from_millis(400), Duration::from_millis(100));
        DiskRequest {
            target: DiskTarget {
                path: dir.to_path_buf(),
                size: Some(8 << 20),
                default_size: 8 << 20,
                destructive: false,
                force: false,
                keep: false,
            },
            settings: RunSettings::default(),
            test: TestDef { sample_interval: Duration::from_millis(100), ..test },
            bus: None,
        }
        .to_request()
    }

    fn test_files(dir: &std::path::Path) -> Vec<String> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn a_plan_runs_on_one_laid_out_test_file_that_finish_removes() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan::new(vec![request(dir.path(), Rw::Write, 1 << 20), request(dir.path(), Rw::RandRead, 4096)]);
        let stop = AtomicBool::new(false);
        let mut log = SampleLog::default();
        let mut runner = Runner::new().with(DiskEngine::new());
        let runs = runner.run_all(&plan, &stop, &mut [&mut log as &mut dyn Sink]);
        assert_eq!(runs.len(), 2);
        for run in &runs {
            let probe = run.probe().expect("measured");
            assert!(run.error().is_none(), "{:?}", run.error());
            assert!(probe.summary.bytes_per_sec > 0.0 && !probe.samples.is_empty(), "{}", probe.id);
        }
        assert_eq!(runs[1].probe().unwrap().id, "rnd4k-q4t1-read");
        // The file was announced before it was laid out (reads follow), and sinks saw the layout.
        assert!(matches!(&log.events[0], PrepareEvent::TestFileCreated { path } if path.ends_with(&test_file_name())));
        assert!(log.events.iter().any(|e| matches!(e, PrepareEvent::Progress { done, total, .. } if done == total)));
        assert!(log.samples.iter().any(|(i, s)| *i == 1 && !s.ramping && s.iops.unwrap_or(0.0) > 0.0));
        assert_eq!(test_files(dir.path()).len(), 1, "the test file stays for the whole plan");
        runner.finish();
        assert!(test_files(dir.path()).is_empty(), "finish removes it");
    }

    #[test]
    fn a_misaligned_test_fails_in_prepare_before_the_layout() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan::new(vec![request(dir.path(), Rw::Read, 1 << 20), request(dir.path(), Rw::RandRead, 1000)]);
        let mut log = SampleLog::default();
        // The block size spelled as the command line does.
        let engine = DiskEngine::new().spelling_settings(|s| if s == Setting::BlockSize { "--bs" } else { "--other" });
        let runs = Runner::new().with(engine).run_all(&plan, &AtomicBool::new(false), &mut [&mut log as &mut dyn Sink]);
        assert_eq!(runs.len(), 1);
        assert!(matches!(runs[0].error(), Some(ProbeError::Usage(m)) if m.contains("--bs 1000")), "{:?}", runs[0]);
        assert!(!log.events.iter().any(|e| matches!(e, PrepareEvent::Progress { .. })), "no layout");
        assert!(test_files(dir.path()).is_empty());
    }
}
