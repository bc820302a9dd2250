//! The test files a soak records in its store, and removing the ones killed
//! sessions left behind (`--resume`). Removes only files the store recorded,
//! named as headroom names them, and not in use by a headroom still running;
//! says what it did and leaves the wording to the caller.

use crate::{now_unix, Store, StoreError};
use std::path::{Path, PathBuf};

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

/// Marks a recorded test file removed once it is gone from the disk.
pub fn mark_removed(store: &Store, id: i64, path: &Path) -> Result<(), StoreError> {
    if !path.exists() {
        store.test_file_removed(id, now_unix())?;
    }
    Ok(())
}

/// Whether `pid` is a running headroom other than this one.
fn headroom_running(pid: u32) -> bool {
    pid != std::process::id()
        && std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "headroom")
}
