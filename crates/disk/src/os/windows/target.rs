//! The Windows stand-in for target.rs (lib.rs builds it in its place):
//! opening a local target is not written for Windows yet, so
//! [`PreparedTarget::prepare`] refuses with a message and no target ever
//! exists. What every platform shares (the kind of target, the options, the
//! test file's name) is storage.rs's; what a share leaves on a server is
//! still removed on a second Ctrl-C, as on Linux.

pub use crate::storage::{filesystem_caveat, test_file_name, FsInfo, RemoteRemoval, TargetKind, TargetOptions};
use crate::{DiskError, Result, SyncMode};
use headroom_result::Warning;
use std::convert::Infallible;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// An opened, sized target (never, on Windows yet).
#[derive(Debug)]
pub struct PreparedTarget {
    /// For display.
    pub path: PathBuf,
    /// Test file, block device or existing file.
    pub kind: TargetKind,
    /// Bytes of the file or device the tests use.
    pub size: u64,
    /// Filesystem holding the file.
    pub filesystem: Option<FsInfo>,
    /// Unbuffered I/O's offset and length alignment.
    pub dio_align: u64,
    /// Unbuffered I/O's buffer alignment.
    pub mem_align: usize,
    /// Where the alignment came from.
    pub dio_align_source: &'static str,
    /// The test file stays (`--keep`).
    pub keep: bool,
    never: Infallible,
}

impl PreparedTarget {
    /// Refuses: disk tests on a local path are not available on Windows yet.
    pub fn prepare(path: &Path, _opts: &TargetOptions) -> Result<PreparedTarget> {
        Err(DiskError::Usage(format!(
            "{}: disk tests on a local path are not available on Windows yet",
            path.display()
        )))
    }

    /// Where the target really is.
    pub fn resolved_path(&self) -> io::Result<PathBuf> {
        match self.never {}
    }

    /// Whether the test file must be written before tests run.
    pub fn needs_layout(&self) -> bool {
        match self.never {}
    }

    /// Fills the new test file.
    pub fn layout(&self, _stop: &AtomicBool, _progress: impl FnMut(u64, u64)) -> Result<Vec<Warning>> {
        match self.never {}
    }

    /// Opens the target for one test.
    pub fn open(&self, _write: bool, _direct: bool, _direct_required: bool, _sync: SyncMode) -> Result<(File, bool)> {
        match self.never {}
    }

    /// Removes the test file now.
    pub fn remove(&mut self) {
        match self.never {}
    }
}

/// Test files on servers (a share's): how each is removed, by id.
static REMOTE: Mutex<Vec<(u64, RemoteRemoval)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Registers how to remove a test file a share created on a server, for
/// [`remove_test_files_now`]; returns the id [`forget_remote_test_file`] takes.
pub fn register_remote_test_file(removal: RemoteRemoval) -> u64 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    REMOTE.lock().unwrap_or_else(|p| p.into_inner()).push((id, removal));
    id
}

/// The share removed (or kept) its test file itself: nothing left to do at exit.
pub fn forget_remote_test_file(id: u64) {
    REMOTE.lock().unwrap_or_else(|p| p.into_inner()).retain(|(i, _)| *i != id);
}

/// Removes every test file a share of this process left on a server (local
/// test files do not exist on Windows yet).
pub fn remove_test_files_now() {
    for (_, removal) in REMOTE.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
        removal();
    }
}

/// Empty: no headroom on Windows creates a local test file yet.
pub fn remove_stale_test_files(_dir: &Path) -> Vec<PathBuf> {
    Vec::new()
}

/// Total RAM in bytes, for the page-cache check.
pub fn ram_bytes() -> u64 {
    headroom_sys::memory_bytes(&headroom_sys::SysRoot::live()).unwrap_or(0)
}
