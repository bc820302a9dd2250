//! `flushcheck verify`: fetches the run's acknowledged blocks from the
//! listener, reads each one back from the file past the page cache (or from
//! the export through its protocol client, which keeps no cache) and sorts
//! them into intact, lost and torn.

use crate::block::{self, Found, RunId};
use crate::io::{open_direct, AlignedBuf, ALIGN};
use crate::report::{BlockFinding, Finding, VerifyReport, SCHEMA};
use crate::storage::{LocalFile, ShareStorage, Storage};
use crate::{FlushError, SyncMode};
use headroom_disk::Share;
use headroom_net::wire::{self, FlushAck};
use headroom_net::{Endpoint, Session};
use std::path::Path;

/// Reads are this large (a whole number of blocks: blocks are at most 1 MiB).
const CHUNK: usize = 1 << 20;

/// What stands at an acknowledged block's place; None when it survived.
fn judge(ack: &FlushAck, bytes: Option<&[u8]>, run: &RunId) -> Option<BlockFinding> {
    let finding = |finding, found_seq| Some(BlockFinding { seq: ack.seq, offset: ack.offset, finding, found_seq });
    let Some(bytes) = bytes else { return finding(Finding::Missing, None) };
    match block::inspect(bytes, run) {
        Found::Block { seq, offset, checksum } if offset == ack.offset => {
            if seq > ack.seq || (seq == ack.seq && checksum == ack.checksum) {
                None
            } else if seq < ack.seq {
                finding(Finding::Stale, Some(seq))
            } else {
                finding(Finding::Torn, Some(seq))
            }
        }
        // A block of the run written for another offset: this one never landed.
        Found::Block { seq, .. } => finding(Finding::Missing, Some(seq)),
        Found::Torn { seq } => finding(Finding::Torn, Some(seq)),
        Found::Foreign => finding(Finding::Missing, None),
    }
}

/// Verifies the flushcheck file at `path` against the listener's list.
pub fn verify(path: &Path, listener: &Endpoint) -> Result<VerifyReport, FlushError> {
    let (file, direct) = open_direct(path).map_err(FlushError::io(path))?;
    verify_storage(&mut LocalFile(file), path, direct, listener)
}

/// Verifies the export `share` (opened read-only) against the listener's list.
pub fn verify_export(share: &dyn Share, listener: &Endpoint) -> Result<VerifyReport, FlushError> {
    let name = std::path::PathBuf::from(share.url());
    let mut store = ShareStorage::connect(share, None, CHUNK).map_err(FlushError::io(&name))?;
    verify_storage(&mut store, &name, true, listener)
}

/// `direct`: the reads bypass every cache of this machine.
fn verify_storage(
    store: &mut dyn Storage,
    path: &Path,
    direct: bool,
    listener: &Endpoint,
) -> Result<VerifyReport, FlushError> {
    let mut head = AlignedBuf::new(ALIGN);
    let n = store.read_at(head.bytes_mut(), 0).map_err(FlushError::io(path))?;
    let run = block::parse_header(&head.bytes()[..n])
        .map_err(|reason| FlushError::File { path: path.to_path_buf(), reason })?;
    let id: RunId = wire::from_hex(&run.run).expect("validated by parse_header");
    let mut session = Session::open(listener)?;
    let (declared, acks) = session.flush_list(&run.run)?;
    session.close();
    if declared.block_size != run.block_size || declared.blocks != run.blocks {
        return Err(FlushError::File {
            path: path.to_path_buf(),
            reason: format!("the listener recorded run {} with another layout than this file's header", run.run),
        });
    }
    if let Some(bad) = acks.iter().find_map(|a| declared.check_ack(a).err()) {
        return Err(FlushError::Net(headroom_net::NetError::Protocol(format!("the listener's list: {bad}"))));
    }
    let bs = run.block_size as usize;
    let mut chunk = AlignedBuf::new(CHUNK);
    let (mut at, mut valid) = (u64::MAX, 0usize);
    let mut findings = Vec::new();
    for ack in &acks {
        let start = ack.offset - ack.offset % CHUNK as u64;
        if start != at {
            valid = store.read_at(chunk.bytes_mut(), start).map_err(FlushError::io(path))?;
            at = start;
        }
        let within = (ack.offset - start) as usize;
        let bytes = chunk.bytes().get(within..within + bs).filter(|_| within + bs <= valid);
        findings.extend(judge(ack, bytes, &id));
    }
    let count = |f: Finding| findings.iter().filter(|x| x.finding == f).count() as u64;
    let torn = count(Finding::Torn);
    let lost = findings.len() as u64 - torn;
    Ok(VerifyReport {
        schema: SCHEMA.into(),
        mode: "verify".into(),
        path: path.display().to_string(),
        listener: listener.display(),
        direct,
        acknowledged: acks.len() as u64,
        intact: acks.len() as u64 - lost - torn,
        lost,
        torn,
        findings,
        durable: SyncMode::from_name(&run.sync).is_some_and(SyncMode::is_durable),
        run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_survivor_and_loss_is_judged() {
        let id: RunId = [3; 16];
        let ack = |seq| FlushAck { seq, offset: 8192, checksum: 0 };
        let mut b = vec![0u8; 4096];
        let sum = block::fill(&mut b, &id, 5, 8192);
        let exact = FlushAck { checksum: sum, ..ack(5) };
        assert_eq!(judge(&exact, Some(&b), &id), None);
        assert_eq!(judge(&ack(4), Some(&b), &id), None, "a later write of the run stands there");
        assert_eq!(judge(&ack(6), Some(&b), &id).unwrap().finding, Finding::Stale);
        assert_eq!(judge(&exact, None, &id).unwrap().finding, Finding::Missing);
        assert_eq!(judge(&exact, Some(&vec![0u8; 4096]), &id).unwrap().finding, Finding::Missing);
        let mut elsewhere = vec![0u8; 4096];
        block::fill(&mut elsewhere, &id, 9, 4096);
        assert_eq!(judge(&exact, Some(&elsewhere), &id).unwrap().finding, Finding::Missing);
        b[100] ^= 1;
        assert_eq!(judge(&exact, Some(&b), &id).unwrap().finding, Finding::Torn);
    }
}
