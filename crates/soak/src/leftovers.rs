//! The test files a soak records in its store (a Runner sink that records the
//! one the disk engine creates), and removing the ones killed sessions left
//! behind (`--resume`). Removes only files the store recorded,
//! named as headroom names them, and not in use by a headroom still running;
//! says what it did and leaves the wording to the caller.

use crate::{now_unix, SetupError, Store, StoreError};
use headroom_runner::{Plan, PrepareEvent, ProbeError, Runner, Sink};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

/// A test file recorded in the store: removed at the end of its session, or
/// by the `--resume` after a kill.
#[derive(Debug, Clone, PartialEq)]
pub struct TestFile {
    id: i64,
    path: PathBuf,
}

/// How preparing a session's cycle ended.
#[derive(Debug)]
pub enum Prepared {
    /// Ready for the first turn; the test file, if the cycle has disk turns.
    Ready(Option<TestFile>),
    /// Stopped (Ctrl-C) while laying out: the session is ended as interrupted.
    Stopped,
}

/// Prepares `runner` for the cycle `plan` (the disk engine creates and lays
/// out the shared test file once; the server, its own), recording the test file in the store as
/// it is created, before its layout. A layout stopped or failed leaves the
/// file marked removed once the engine has removed it.
pub fn prepare(
    runner: &mut Runner,
    plan: &Plan,
    store: &Store,
    session: i64,
    stop: &AtomicBool,
    progress: &mut dyn Sink,
) -> Result<Prepared, SetupError> {
    let mut recorder = TestFileRecorder { store, session, recorded: None, error: None };
    // The server's engines first: its refusal (a path it does not allow)
    // should not wait for a layout here.
    let (there, here): (Vec<_>, Vec<_>) = plan.requests.iter().cloned().partition(|r| r.at.is_some());
    let plan = Plan::new(there.into_iter().chain(here).collect());
    let prepared = runner.prepare(&plan, stop, &mut [&mut recorder, progress]);
    if let Some(e) = recorder.error {
        return Err(e.into());
    }
    let file = recorder.recorded;
    match prepared {
        Ok(()) => Ok(Prepared::Ready(file)),
        Err(ProbeError::Stopped) => {
            mark_removed(store, file.as_ref())?;
            store.end_session(session, now_unix(), "interrupted")?;
            Ok(Prepared::Stopped)
        }
        Err(e) => {
            // The layout's error is the one to report.
            let _ = mark_removed(store, file.as_ref());
            Err(e.into())
        }
    }
}

/// Records the test file the disk engine creates (see [`prepare`]).
struct TestFileRecorder<'a> {
    store: &'a Store,
    session: i64,
    recorded: Option<TestFile>,
    error: Option<StoreError>,
}

impl Sink for TestFileRecorder<'_> {
    fn prepared(&mut self, event: &PrepareEvent) {
        if let PrepareEvent::TestFileCreated { path } = event {
            // Absolute: a resume may run from another directory.
            let path = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
            match self.store.add_test_file(self.session, &path, std::process::id()) {
                Ok(id) => self.recorded = Some(TestFile { id, path }),
                Err(e) => self.error = Some(e),
            }
        }
    }
}

/// What became of one test file a killed session left.
#[derive(Debug)]
pub enum LeftFile {
    /// Removed now.
    Removed(PathBuf),
    /// Kept: a running headroom (this pid) still uses it.
    InUse(PathBuf, u32),
    /// Could not be removed (the reason); the store still lists it.
    Failed(PathBuf, std::io::Error),
}

/// Removes the test files that killed sessions of this soak left behind and
/// marks them removed in the store.
pub fn remove_left_test_files(store: &Store) -> Result<Vec<LeftFile>, StoreError> {
    let mut done = Vec::new();
    for (id, path, pid) in store.test_files_left()? {
        let ours = path.file_name().is_some_and(|n| n.to_string_lossy() == format!("headroom-disk-{pid}.tmp"));
        if !ours {
            continue;
        }
        if headroom_running(pid) {
            done.push(LeftFile::InUse(path, pid));
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => done.push(LeftFile::Removed(path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                done.push(LeftFile::Failed(path, e));
                continue;
            }
        }
        store.test_file_removed(id, now_unix())?;
    }
    Ok(done)
}

/// Marks a recorded test file removed once it is gone from the disk (the
/// Runner removes it when it finishes).
pub fn mark_removed(store: &Store, file: Option<&TestFile>) -> Result<(), StoreError> {
    match file {
        Some(f) if !f.path.exists() => store.test_file_removed(f.id, now_unix()),
        _ => Ok(()),
    }
}

/// Whether `pid` is a running headroom other than this one.
fn headroom_running(pid: u32) -> bool {
    pid != std::process::id() && headroom_sys::process_name(pid).is_some_and(|name| name == "headroom")
}
