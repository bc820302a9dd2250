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
//! what is written. Windows has no libblkid: there a share's export, a raw
//! drive or volume and an existing file are written only when the parts of
//! them a probe would read ([`edge_reads`]) are all zeros (`probe_copy` in
//! os/windows), or with --force.
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

/// The largest read [`edge_reads`] asks for: 1 MiB.
pub const EDGE_READ: usize = 1 << 20;

/// The reads that cover the first and last 4 MiB of a device, export or file
/// of `size` bytes, where every signature libblkid looks for lies
/// (superblocks, partition tables and their backups, RAID members at the
/// end): (offset, length) of at most [`EDGE_READ`] bytes, each length a
/// multiple of `align` (a device's sector; 0 or 1 for none), never
/// overlapping. Both the share check and Windows' local one read these.
pub fn edge_reads(size: u64, align: u64) -> Vec<(u64, u32)> {
    let chunk = EDGE_READ as u64;
    let window = 4 * chunk;
    let mut offsets: Vec<u64> = (0..window.min(size)).step_by(EDGE_READ).collect();
    let tail = size.saturating_sub(window).max(window.min(size));
    offsets.extend((tail..size).step_by(EDGE_READ));
    offsets
        .into_iter()
        .map(|offset| {
            let len = chunk.min(size - offset);
            (offset, (len - len % align.max(1)) as u32)
        })
        .filter(|&(_, len)| len > 0)
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_reads_cover_both_ends_once_and_aligned() {
        let mib = 1u64 << 20;
        let reads = edge_reads(64 * mib, 4096);
        let offsets: Vec<u64> = reads.iter().map(|r| r.0).collect();
        assert_eq!(offsets, [0, 1, 2, 3, 60, 61, 62, 63].map(|m| m * mib));
        assert!(reads.iter().all(|&(_, len)| u64::from(len) == mib));
        // Smaller than both windows: each byte once, the odd tail cut to the sector.
        let reads = edge_reads(5 * mib + 1000, 512);
        let covered: u64 = reads.iter().map(|&(_, len)| u64::from(len)).sum();
        assert_eq!(covered, 5 * mib + 512, "{reads:?}");
        assert_eq!(edge_reads(100, 512), vec![]);
        assert_eq!(edge_reads(100, 0), vec![(0, 100)]);
    }
}
