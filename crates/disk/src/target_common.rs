//! What every platform's local target shares, so that opening one (target.rs
//! on Linux, its stand-in under os/ elsewhere) holds only system calls: the
//! kind of target, the user's options (which a share takes too), the
//! filesystem's name and its caveat, the test file's name, the free-space
//! refusal, filling a new test file with data, and finding the test files a
//! killed headroom left.
//!
//! What it must not touch: a file descriptor or handle (the platform's
//! target owns those), or a share (share.rs).

use crate::data::FastRng;
use crate::{DiskError, Result, Setting};
use headroom_result::Warning;
use headroom_units::setting::Message;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What PATH turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// A file headroom created in the directory the user named.
    TestFile,
    /// A block device the user named (writes need `--destructive`).
    BlockDevice,
    /// An existing regular file the user named (writes need `--destructive`).
    ExistingFile,
}

/// What the user asked for PATH.
#[derive(Debug, Clone, Default)]
pub struct TargetOptions {
    /// Size of the test file / region; None: the default for a test file, the
    /// whole device or file otherwise.
    pub size: Option<u64>,
    /// Default test-file size when `size` is None.
    pub default_size: u64,
    /// Some test of the run writes.
    pub writes: bool,
    /// `--destructive`: writing to a block device or existing file is allowed.
    pub destructive: bool,
    /// `--force`: write even where a superblock or partition table was found.
    pub force: bool,
    /// `--keep`: leave the test file in place after the run.
    pub keep: bool,
    /// The URL of a file share (NFS, SMB) names the file itself, not the
    /// directory for headroom's test file (`flushcheck`): it is created
    /// exclusively when absent, opened as it is when present (the caller
    /// judges its content), opened only when `writes` is false, and never
    /// removed. Ignored for exports and local paths.
    pub named_file: bool,
    /// Set on Ctrl-C: a protocol client (headroom-proto) gives up whatever
    /// it waits for (login, a request) at once. Shared, not borrowed, since
    /// its connections live in the run's worker threads.
    pub stop: std::sync::Arc<AtomicBool>,
}

/// A filesystem as statfs names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsInfo {
    /// e.g. ext4, xfs, btrfs, tmpfs, nfs, zfs, fuse; `0x...` when unknown.
    pub name: String,
    /// Filesystem magic number (statfs `f_type`).
    pub magic: i64,
}

/// Removes one test file on a server (over a fresh connection, with a short timeout).
pub type RemoteRemoval = Box<dyn FnOnce() + Send>;

/// The name of the test file headroom creates in a directory (unique per process).
pub fn test_file_name() -> String {
    format!("headroom-disk-{}.tmp", std::process::id())
}

/// What users must know about results on this filesystem (code `filesystem_caveat`).
pub fn filesystem_caveat(fs: &FsInfo) -> Option<Warning> {
    let message = match fs.name.as_str() {
        "zfs" => "ZFS before 2.3 ignores O_DIRECT: the ARC (RAM) may answer reads and absorb writes",
        "nfs" => "NFS: an export with the async option acknowledges writes before they are stable; use the sync preset for durable figures",
        "btrfs" => "btrfs may compress data (compress mount option); headroom writes incompressible data, but figures from other tools may differ",
        "tmpfs" | "ramfs" => "this filesystem is memory: the figures are RAM speeds, not a disk's",
        "fuse" => "FUSE filesystem: caching and write acknowledgement depend on the daemon (sshfs, rclone, ...)",
        "cifs" | "smb2" => "SMB: the client and server caches may answer; use the sync preset for durable figures",
        "overlay" => "overlayfs: the figures are those of the upper layer's filesystem",
        _ => return None,
    };
    Some(Warning::new(headroom_result::WarningCode::FilesystemCaveat, format!("{}: {message}", fs.name)))
}

/// The process id in a test file's name, when `name` is one.
pub fn test_file_owner(name: &str) -> Option<u32> {
    let pid = name.strip_prefix("headroom-disk-")?.strip_suffix(".tmp")?;
    pid.bytes().all(|b| b.is_ascii_digit()).then(|| pid.parse().ok()).flatten()
}

/// Removes the test files a killed headroom left in `dir`: regular files
/// named as headroom names its test files whose process `alive` says is
/// gone. Nothing else is touched. Returns the paths removed.
pub fn remove_stale_test_files_in(dir: &Path, alive: impl Fn(u32) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(test_file_owner) else { continue };
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if !alive(pid) && regular && std::fs::remove_file(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    removed
}

/// Free space kept spare beside a test file: 64 MiB, or an eighth on small filesystems.
pub fn space_margin(free: u64) -> u64 {
    const FREE_SPACE_MARGIN: u64 = 64 << 20;
    FREE_SPACE_MARGIN.min(free / 8)
}

/// Refuses a test file of `size` bytes in `dir` when it does not fit in
/// `free` bytes with `margin` kept spare.
pub fn check_space(size: u64, dir: &Path, free: u64, margin: u64) -> Result<()> {
    if size.saturating_add(margin) <= free {
        return Ok(());
    }
    let suggestion = (free.saturating_sub(margin) / 2).max(1 << 20);
    Err(DiskError::Invalid(
        Message::of(Setting::Size)
            .then(format!(
                " {} is larger than the free space on {} ({} free, {} kept spare); try ",
                headroom_units::format_size(size),
                dir.display(),
                headroom_units::format_size(free),
                headroom_units::format_size(margin),
            ))
            .and(Setting::Size)
            .then(format!(" {}", short_size(suggestion))),
    ))
}

fn short_size(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{}G", bytes >> 30)
    } else {
        format!("{}M", (bytes >> 20).max(1))
    }
}

/// Writes `size` bytes of incompressible data (never holes: reads must read
/// what was really written) through `write_at(chunk, offset)`, 1 MiB at a
/// time, calling `progress(done, total)` after each; stops on `stop`.
pub fn fill_test_file(
    path: &Path,
    size: u64,
    stop: &AtomicBool,
    mut progress: impl FnMut(u64, u64),
    mut write_at: impl FnMut(&[u8], u64) -> io::Result<()>,
) -> Result<()> {
    let chunk = 1usize << 20;
    let mut buf = vec![0u8; chunk];
    let mut rng = FastRng::new(FastRng::seed_from_time(0x1a));
    let mut done = 0u64;
    while done < size {
        if stop.load(Ordering::Relaxed) {
            return Err(DiskError::Usage("stopped while laying out the test file".into()));
        }
        let n = chunk.min((size - done) as usize);
        rng.fill(&mut buf[..n]);
        write_at(&buf[..n], done)
            .map_err(|e| DiskError::io(format!("laying out the test file {}", path.display()), e))?;
        done += n as u64;
        progress(done, size);
    }
    Ok(())
}

/// A test file this process created, as its platform's target removes it
/// (only while its name still is that file).
pub trait CreatedTestFile {
    /// Its id in the [`Registry`].
    fn id(&self) -> u64;
    /// Removes it, if its name still is the file headroom created.
    fn remove(&self);
}

/// Test files alive in this process, local (`F`, the platform's) and on
/// servers. Each platform's target keeps one in a static Mutex and holds the
/// lock from the exclusive create to the registration, so a second Ctrl-C
/// never misses one.
pub struct Registry<F> {
    /// Local test files headroom will remove.
    pub files: Vec<F>,
    /// Test files on servers (a share's): how each is removed, by id.
    remote: Vec<(u64, RemoteRemoval)>,
    /// Set by [`Registry::remove_all_now`]: the process is about to exit.
    pub closed: bool,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl<F: CreatedTestFile> Registry<F> {
    /// Empty.
    pub const fn new() -> Self {
        Registry { files: Vec::new(), remote: Vec::new(), closed: false }
    }

    /// A new id for a test file, local or remote.
    pub fn next_id() -> u64 {
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers how to remove a test file a share created on a server; returns its id.
    pub fn register_remote(&mut self, removal: RemoteRemoval) -> u64 {
        let id = Self::next_id();
        self.remote.push((id, removal));
        id
    }

    /// The share removed (or kept) its test file itself.
    pub fn forget_remote(&mut self, id: u64) {
        self.remote.retain(|(i, _)| *i != id);
    }

    /// Removes the local test file `id` now.
    pub fn remove(&mut self, id: u64) {
        if let Some(i) = self.files.iter().position(|f| f.id() == id) {
            self.files.swap_remove(i).remove();
        }
    }

    /// Removes every test file, local and remote, and refuses new ones.
    pub fn remove_all_now(&mut self) {
        self.closed = true;
        for f in self.files.drain(..) {
            f.remove();
        }
        for (_, removal) in self.remote.drain(..) {
            removal();
        }
    }
}
