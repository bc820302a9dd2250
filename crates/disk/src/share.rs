//! Targets reached through headroom's own protocol clients (NFS, iSCSI, NBD,
//! SMB, implemented in headroom-proto): the seam between the test runner and a
//! protocol. A [`Share`] is one prepared target on a server; it hands each
//! worker an [`IoEngine`] of its own (its own connection, with the worker's
//! queue depth as the protocol's pipelining), so the runner, presets,
//! histograms and samples are the same as for a local path.
//!
//! What this module owns, for every protocol alike: laying out a new test
//! file with incompressible data through the protocol, and refusing to write
//! over an export (a LUN, an NBD export) without `--destructive`, or over one
//! that holds a signature libblkid knows without `--force`.
//!
//! What it must not do: speak any protocol, or know which ones exist.

use crate::engine::{Completion, IoEngine, IoKind, IoUnit};
use crate::target_common::TargetOptions;
use crate::{DiskError, FastRng, Result, Setting, SyncMode};
use headroom_result::ProtocolInfo;
use headroom_units::setting::Message;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a share's target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    /// A test file headroom created in the share's directory (NFS, SMB); the
    /// share removes it when dropped, unless `--keep`.
    TestFile,
    /// A whole export (an iSCSI LUN, an NBD export): written only with
    /// `--destructive`, after the signature checks.
    Export,
}

/// How a worker's connection will be used.
#[derive(Debug, Clone, Copy)]
pub struct ShareIo {
    /// Some I/O writes.
    pub write: bool,
    /// fsync: the test flushes (NFS COMMIT, SCSI SYNCHRONIZE CACHE, NBD FLUSH,
    /// SMB FLUSH); dsync: every write is stable on its own (NFS FILE_SYNC, FUA,
    /// SMB write-through).
    pub sync: SyncMode,
    /// I/Os in flight at most on this connection; also the number of buffers.
    pub depth: usize,
    /// Bytes per buffer (the block size).
    pub buf_size: usize,
    /// The job (worker, 0-based) the connection serves: a share with several
    /// sources picks job's turn of them (round robin). One-off connections
    /// (layout, signature check, the flush after a test) are job 0's.
    pub job: usize,
}

/// One prepared target on a server, reached through a protocol client.
///
/// Dropping it removes the test file it created (unless `--keep`); where the
/// protocol cannot (the server is gone), the implementation says so on stderr
/// with the file's name.
pub trait Share: Send + Sync + fmt::Debug {
    /// The target as shown and recorded, e.g. `nfs://nas/export/headroom-disk-123.tmp`.
    fn url(&self) -> String;
    /// Test file or export.
    fn kind(&self) -> ShareKind;
    /// Bytes of the test region, from offset 0.
    fn size(&self) -> u64;
    /// Bytes of the whole target, whatever `--size` says: the export's (the
    /// LUN's) full size, where signatures at its end live (md 0.90 and 1.0,
    /// GPT's backup, ZFS's last labels); the test file's size for a test file.
    fn capacity(&self) -> u64;
    /// Offsets and lengths must be multiples of this (a LUN's logical block; 1 for files).
    fn block_size(&self) -> u64;
    /// A new connection for one worker.
    fn connect(&self, io: ShareIo) -> io::Result<Box<dyn IoEngine + Send>>;
    /// The protocol and what the server granted so far (the connections made
    /// update it: queue depth granted, sizes negotiated).
    fn info(&self) -> ProtocolInfo;
    /// A file named by the URL ([`TargetOptions::named_file`]) that existed
    /// before it was opened: its content is someone's until proven otherwise.
    fn existed(&self) -> bool {
        false
    }
}

/// Opens URLs of the schemes it knows (headroom-proto's opener).
pub trait ShareOpener: Send + Sync {
    /// Whether `target` is a URL this opener handles (e.g. starts with `nfs://`).
    fn handles(&self, target: &str) -> bool;
    /// Connects to the server and prepares the target: creates the test file
    /// (NFS, SMB) or opens the export (iSCSI, NBD) and finds its size. Only
    /// the protocol's own errors are checked here; [`prepare_share`] does the
    /// layout and the safety checks.
    fn open(&self, target: &str, opts: &TargetOptions) -> Result<Box<dyn Share>>;
}

/// Whether `target` looks like a URL (`scheme://...`) rather than a path.
pub fn looks_like_url(target: &str) -> bool {
    target
        .split_once("://")
        .is_some_and(|(scheme, _)| !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '+'))
}

/// Opens `target` with `opener` and makes it safe to test: an export is
/// written only with `--destructive`, and not over a signature unless
/// `--force`. Dropping the result removes a test file it created.
pub fn prepare_share(opener: &dyn ShareOpener, target: &str, opts: &TargetOptions) -> Result<Box<dyn Share>> {
    let share = opener.open(target, opts)?;
    if share.kind() == ShareKind::Export && opts.writes {
        if !opts.destructive {
            return Err(DiskError::Invalid(
                Message::text(format!("{} is a whole export and this run writes to it: add ", share.url()))
                    .and(Setting::Destructive)
                    .then(" if its data may be destroyed, or run read-only tests"),
            ));
        }
        if !opts.force {
            let found = export_signatures(share.as_ref())?;
            if !found.is_empty() {
                return Err(DiskError::Refused {
                    path: share.url(),
                    reason: Message::text(format!("it holds {found}; add "))
                        .and(Setting::Force)
                        .then(" to write over it"),
                });
            }
        }
    }
    Ok(share)
}

/// What the platform's probe finds in the whole export's first and last
/// 4 MiB (superblocks, partition tables and their backups, RAID members),
/// read through the protocol (libblkid on Linux; `crate::os::probe_copy`).
/// The whole export, not the tested region: a write to the first 8 MiB
/// destroys an md 1.0 member whose superblock sits at the export's end.
fn export_signatures(share: &dyn Share) -> Result<String> {
    let size = share.capacity();
    let reads = crate::safety::edge_reads(size, share.block_size());
    let mut engine = share
        .connect(ShareIo { write: false, sync: SyncMode::None, depth: 1, buf_size: crate::safety::EDGE_READ, job: 0 })
        .map_err(|e| DiskError::io(format!("reading {} for signatures", share.url()), e))?;
    let mut parts = Vec::with_capacity(reads.len());
    for (offset, len) in reads {
        one_io(engine.as_mut(), IoUnit { kind: IoKind::Read, offset, len, buf_index: 0, tag: 0 })
            .map_err(|e| DiskError::io(format!("reading {} at {offset} for signatures", share.url()), e))?;
        parts.push((offset, engine.buffer_mut(0)[..len as usize].to_vec()));
    }
    let signatures = crate::os::probe_copy(size, &parts).map_err(|e| crate::safety::probe_failed(&share.url(), e))?;
    Ok(if signatures.is_empty() { String::new() } else { crate::safety::describe(&signatures) })
}

/// Runs one I/O to completion on `engine`; a short read or write is an error.
pub fn one_io(engine: &mut dyn IoEngine, io: IoUnit) -> io::Result<()> {
    engine.queue(io)?;
    engine.commit()?;
    let mut out: Vec<Completion> = Vec::with_capacity(1);
    while out.is_empty() {
        engine.getevents(1, &mut out)?;
    }
    match out[0].result {
        r if r < 0 => Err(io::Error::from_raw_os_error(-r as i32)),
        r if r as u64 != u64::from(io.len) && io.kind != IoKind::Fsync => {
            Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("short transfer: {r} of {} bytes", io.len)))
        }
        _ => Ok(()),
    }
}

/// Fills a new test file with incompressible data through the protocol (never
/// holes: reads must read what was really written), four 1 MiB writes in
/// flight, then flushes it. `progress(done, total)` is called per MiB.
pub fn layout_share(share: &dyn Share, stop: &AtomicBool, progress: &mut dyn FnMut(u64, u64)) -> Result<()> {
    let size = share.size();
    let chunk = 1usize << 20;
    let depth = 4usize;
    let context = || format!("laying out {}", share.url());
    let mut engine = share
        .connect(ShareIo { write: true, sync: SyncMode::None, depth, buf_size: chunk, job: 0 })
        .map_err(|e| DiskError::io(context(), e))?;
    let mut rng = FastRng::new(FastRng::seed_from_time(0x5a));
    let (mut next, mut done, mut inflight) = (0u64, 0u64, 0usize);
    let mut free: Vec<u16> = (0..depth as u16).collect();
    let mut out = Vec::with_capacity(depth);
    while done < size {
        if stop.load(Ordering::Relaxed) {
            return Err(DiskError::Usage("stopped while laying out the test file".into()));
        }
        while next < size {
            let Some(slot) = free.pop() else { break };
            let len = (chunk as u64).min(size - next) as u32;
            rng.fill(&mut engine.buffer_mut(slot)[..len as usize]);
            engine
                .queue(IoUnit { kind: IoKind::Write, offset: next, len, buf_index: slot, tag: u64::from(slot) })
                .map_err(|e| DiskError::io(context(), e))?;
            next += u64::from(len);
            inflight += 1;
        }
        engine.commit().map_err(|e| DiskError::io(context(), e))?;
        out.clear();
        engine.getevents(1, &mut out).map_err(|e| DiskError::io(context(), e))?;
        for c in &out {
            if c.result < 0 {
                return Err(DiskError::io(context(), io::Error::from_raw_os_error(-c.result as i32)));
            }
            done += c.result as u64;
            inflight -= 1;
            free.push(c.tag as u16);
            progress(done.min(size), size);
        }
        if inflight == 0 && next >= size {
            break;
        }
    }
    one_io(engine.as_mut(), IoUnit { kind: IoKind::Fsync, offset: 0, len: 0, buf_index: 0, tag: 0 })
        .map_err(|e| DiskError::io(format!("flushing {}", share.url()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        for url in ["nfs://nas/export", "iscsi://h/iqn.2001-04.com.example:x/0", "nbd://h", "smb://u@h/share"] {
            assert!(looks_like_url(url), "{url}");
        }
        for path in ["/mnt/nas", "relative/dir", "./a://b", "", "://x"] {
            assert!(!looks_like_url(path), "{path}");
        }
    }
}
