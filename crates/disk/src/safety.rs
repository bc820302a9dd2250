//! Refusing to destroy data: what a block device or existing file holds
//! (every filesystem, RAID or volume-manager member, encryption header and
//! partition table libblkid knows), and whether the kernel holds it (mounted,
//! an md/dm member, swap, a loop device's backing file).
//!
//! Signatures come from libblkid, the probe blkid, wipefs, udev and mkfs use
//! (loaded at run time, crate::blkid): a hand-kept list of magic numbers
//! missed LUKS and md, and every list will miss the next format. Without
//! libblkid the probe fails, so the write is refused. The probe reads through
//! the descriptor the caller already holds, so what is checked is exactly
//! what is written. Windows has no libblkid: there a share's export is
//! written only when the parts of it a probe would read are all zeros
//! (`probe_copy` in os/windows), and a local device or existing file not at all.
//!
//! The probe and what the kernel holds are system calls and paths: they live
//! in `crate::os` (os/linux/safety.rs); this file keeps what a signature
//! means and how a refusal is worded.

use headroom_units::setting::Message;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Every signature on the device or file open as `file`, as `wipefs` would
/// list them (this platform's probe, `crate::os`).
pub use crate::os::probe_signatures;

/// Whether `path` (canonical) is one of `roots` (canonical) or below one.
/// Compared by components, so `/tank/bench2` is not under `/tank/bench`.
pub fn under_any(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// One signature libblkid found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// libblkid's name: `TYPE` of a superblock (ext4, crypto_LUKS,
    /// linux_raid_member, LVM2_member, zfs_member, swap...) or `PTTYPE` of a
    /// partition table (gpt, dos).
    pub kind: String,
    /// filesystem, raid, crypto, other; `partition table` for a PTTYPE.
    pub usage: Option<String>,
    /// The signature's version, when blkid reports one (e.g. `1.2` for md).
    pub version: Option<String>,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        match (&self.usage, &self.version) {
            (Some(u), Some(v)) => write!(f, " ({u}, version {v})"),
            (Some(u), None) => write!(f, " ({u})"),
            (None, Some(v)) => write!(f, " (version {v})"),
            (None, None) => Ok(()),
        }
    }
}

/// What a failed [`probe_signatures`] of `shown` means: libblkid missing
/// refuses the write (its message names the package), never lets it through;
/// a read error is the machine's.
pub fn probe_failed(shown: &str, e: io::Error) -> crate::DiskError {
    if e.kind() == io::ErrorKind::NotFound {
        crate::DiskError::Refused {
            path: shown.to_string(),
            reason: Message::text(format!("it cannot be checked for signatures: {e}")),
        }
    } else {
        crate::DiskError::io(format!("cannot read {shown} to check for signatures"), e)
    }
}

/// The refusal to write over `what` ("a block device", "an existing file")
/// without leave to destroy it (both platforms' targets word it alike).
pub fn writes_destroy(what: &str) -> Message<crate::Setting> {
    use crate::Setting::*;
    Message::text(format!("it is {what} and the tests write, which destroys its contents. Add "))
        .and(Destructive)
        .then(" if that is what you want, run read tests only (")
        .and(Rw)
        .then(" read or randread), or give a directory instead")
}

/// The refusal to write over `found` signatures without leave.
pub fn holds_signatures(found: &[Signature]) -> Message<crate::Setting> {
    use crate::Setting::*;
    Message::text(format!("it holds {}. Writing would destroy it; add ", describe(found)))
        .and(Force)
        .then(" as well as ")
        .and(Destructive)
        .then(" only if you are sure")
}

/// The end of a refusal to write to something in use: no leave overrides it.
/// (Windows refuses every raw device before asking whether it is in use.)
#[cfg_attr(windows, allow(dead_code))]
pub fn never_in_use() -> Message<crate::Setting> {
    Message::text("headroom never writes to something in use, even with ").and(crate::Setting::Force)
}

/// Direct I/O asked for (`on`) and refused by the target: `why`, and what
/// to ask instead.
pub fn direct_refused(why: String) -> crate::DiskError {
    use crate::Setting::Direct;
    crate::DiskError::Invalid(Message::of(Direct).then(format!(" on: {why}; use ")).and(Direct).then(" auto or off"))
}

/// "a crypto_LUKS (crypto, version 2) signature", or a list for several.
pub fn describe(signatures: &[Signature]) -> String {
    let names: Vec<String> = signatures.iter().map(Signature::to_string).collect();
    match names.len() {
        1 => format!("a {} signature", names[0]),
        _ => format!("signatures of {}", names.join(", ")),
    }
}
