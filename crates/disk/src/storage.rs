//! What a test runs on: a local target (test file, device, existing file) or a
//! share reached through a protocol client. The runner, the checks and the
//! probe ask this type, so they stay the same for both.
//!
//! It only dispatches: what a local target is lives in target.rs (and
//! target_common.rs), what a share is in share.rs.

use crate::share::{Share, ShareKind};
use crate::target::PreparedTarget;
use crate::target_common::{FsInfo, TargetKind};
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
