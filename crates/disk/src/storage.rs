//! What a test runs on: a local target (test file, device, existing file) or a
//! share reached through a protocol client. The runner, the checks and the
//! probe ask this type, so they stay the same for both.
//!
//! Also what every platform's target shares, so that opening one (target.rs
//! on Linux, its stand-in under os/ elsewhere) holds only system calls: the
//! kind of target, the user's options, the filesystem's name and its caveat,
//! and the test file's name.

use crate::share::{Share, ShareKind};
use crate::target::PreparedTarget;
use headroom_result::Warning;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A prepared target, local or through a protocol.
#[derive(Debug)]
pub enum Storage {
    /// A path on this machine.
    Local(PreparedTarget),
    /// A URL headroom's own protocol client reaches.
    Share(Arc<dyn Share>),
}

impl Storage {
    /// The target as shown and recorded (path or URL).
    pub fn display(&self) -> String {
        match self {
            Storage::Local(t) => t.path.display().to_string(),
            Storage::Share(s) => s.url(),
        }
    }

    /// Bytes of the test region.
    pub fn size(&self) -> u64 {
        match self {
            Storage::Local(t) => t.size,
            Storage::Share(s) => s.size(),
        }
    }

    /// Offsets and block sizes must be multiples of this (with O_DIRECT, for a local target).
    pub fn align(&self, direct: bool) -> (u64, &'static str) {
        match self {
            Storage::Local(t) if direct => (t.dio_align, t.dio_align_source),
            Storage::Local(_) => (1, "buffered I/O"),
            Storage::Share(s) => (s.block_size().max(1), "the export's block size"),
        }
    }

    /// Filesystem under a local target.
    pub fn filesystem(&self) -> Option<&FsInfo> {
        match self {
            Storage::Local(t) => t.filesystem.as_ref(),
            Storage::Share(_) => None,
        }
    }

    /// Test file, device, existing file or export, as the prepare event names it.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Storage::Local(t) => match t.kind {
                TargetKind::TestFile => "test_file",
                TargetKind::BlockDevice => "block_device",
                TargetKind::ExistingFile => "existing_file",
            },
            Storage::Share(s) => match s.kind() {
                ShareKind::TestFile => "test_file",
                ShareKind::Export => "export",
            },
        }
    }

    /// Whether a new test file must be written before reads.
    pub fn needs_layout(&self) -> bool {
        match self {
            Storage::Local(t) => t.needs_layout(),
            Storage::Share(s) => s.kind() == ShareKind::TestFile,
        }
    }

    /// The local target, when it is one.
    pub fn local(&self) -> Option<&PreparedTarget> {
        match self {
            Storage::Local(t) => Some(t),
            Storage::Share(_) => None,
        }
    }
}

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
