//! The flushcheck file format. Block 0 is the header: [`HEADER_MAGIC`], a
//! little-endian u32 length, the run as JSON ([`FlushRun`]) and an xxh3 of
//! that JSON. Every other block is a data block:
//!
//! ```text
//! 0..8    BLOCK_MAGIC
//! 8..24   run id
//! 24..32  sequence number (u64 LE, from 1)
//! 32..40  byte offset of the block in the file (u64 LE)
//! 40..48  xxh3-64 of the whole block with these 8 bytes zeroed
//! 48..    incompressible payload derived from run and sequence
//! ```
//!
//! A block that carries the run's id but whose checksum fails is torn: part
//! of it is one write, part another (or nothing).

use headroom_net::wire::{FlushRun, FLUSH_RUN_LEN};
use xxhash_rust::xxh3::xxh3_64;

/// First bytes of a flushcheck file: how `write` recognises a file of its own.
pub const HEADER_MAGIC: &[u8; 8] = b"HRFLUSH1";
/// First bytes of every data block.
pub const BLOCK_MAGIC: &[u8; 8] = b"HRFLBLK1";
const CHECKSUM: std::ops::Range<usize> = 40..48;

/// A run id: random bytes, fresh for every `write`.
pub type RunId = [u8; FLUSH_RUN_LEN];

/// The header block of `run`, `block_size` bytes.
pub fn header(run: &FlushRun) -> Vec<u8> {
    let json = serde_json::to_vec(run).expect("a run serialises");
    let mut b = vec![0u8; run.block_size as usize];
    b[..8].copy_from_slice(HEADER_MAGIC);
    b[8..12].copy_from_slice(&(json.len() as u32).to_le_bytes());
    b[12..12 + json.len()].copy_from_slice(&json);
    b[12 + json.len()..20 + json.len()].copy_from_slice(&xxh3_64(&json).to_le_bytes());
    b
}

/// Whether `bytes` start like a flushcheck file.
pub fn is_flushcheck(bytes: &[u8]) -> bool {
    bytes.starts_with(HEADER_MAGIC)
}

/// The run a header block declares; the error says what is wrong with it.
pub fn parse_header(bytes: &[u8]) -> Result<FlushRun, String> {
    if !is_flushcheck(bytes) {
        return Err("not a flushcheck file (no flushcheck header in its first block)".into());
    }
    let Some(len) = bytes.get(8..12) else { return Err("the flushcheck header is cut short".into()) };
    let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
    let Some(json) = bytes.get(12..12 + len) else { return Err("the flushcheck header is cut short".into()) };
    let Some(sum) = bytes.get(12 + len..20 + len) else { return Err("the flushcheck header is cut short".into()) };
    if xxh3_64(json).to_le_bytes() != sum {
        return Err("the flushcheck header is damaged (checksum mismatch)".into());
    }
    let run: FlushRun =
        serde_json::from_slice(json).map_err(|e| format!("the flushcheck header is unreadable: {e}"))?;
    run.validate()?;
    Ok(run)
}

/// Fills `buf` (one block) with block `seq` at `offset` of run `run`; returns its checksum.
pub fn fill(buf: &mut [u8], run: &RunId, seq: u64, offset: u64) -> u64 {
    let mut rng = fastrand::Rng::with_seed(seq ^ u64::from_le_bytes(run[..8].try_into().expect("8 bytes")));
    rng.fill(&mut buf[48..]);
    buf[..8].copy_from_slice(BLOCK_MAGIC);
    buf[8..24].copy_from_slice(run);
    buf[24..32].copy_from_slice(&seq.to_le_bytes());
    buf[32..40].copy_from_slice(&offset.to_le_bytes());
    buf[CHECKSUM].fill(0);
    let sum = xxh3_64(buf);
    buf[CHECKSUM].copy_from_slice(&sum.to_le_bytes());
    sum
}

/// Filler for a block never written yet: random bytes without the block magic.
pub fn filler(buf: &mut [u8], rng: &mut fastrand::Rng) {
    rng.fill(buf);
    buf[..8].copy_from_slice(b"HRFLFILL");
}

/// What a block read back holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A whole block of the run: its sequence number, offset field and checksum.
    Block {
        /// Sequence number.
        seq: u64,
        /// The offset it was written for.
        offset: u64,
        /// Its checksum (verified).
        checksum: u64,
    },
    /// The run's id with a checksum that fails: part of a write.
    Torn {
        /// The sequence number in its first bytes.
        seq: u64,
    },
    /// Not a block of this run (filler, zeros, another run's block).
    Foreign,
}

/// Reads what `bytes` (one block) hold for run `run`.
pub fn inspect(bytes: &[u8], run: &RunId) -> Found {
    if &bytes[..8] != BLOCK_MAGIC || &bytes[8..24] != run {
        return Found::Foreign;
    }
    let seq = u64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
    let offset = u64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes"));
    let stored = u64::from_le_bytes(bytes[CHECKSUM].try_into().expect("8 bytes"));
    let mut copy = bytes.to_vec();
    copy[CHECKSUM].fill(0);
    if xxh3_64(&copy) == stored {
        Found::Block { seq, offset, checksum: stored }
    } else {
        Found::Torn { seq }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> FlushRun {
        FlushRun {
            run: "00112233445566778899aabbccddeeff".into(),
            block_size: 4096,
            blocks: 10,
            sync: "fsync".into(),
            path: "/mnt/f".into(),
            host: "h".into(),
        }
    }

    #[test]
    fn a_header_round_trips_and_damage_is_named() {
        let h = header(&run());
        assert_eq!(parse_header(&h).unwrap(), run());
        let mut bad = h.clone();
        bad[20] ^= 1;
        assert!(parse_header(&bad).unwrap_err().contains("damaged"));
        let mut long = h.clone();
        long[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_header(&long).unwrap_err().contains("cut short"));
        assert!(parse_header(&[0u8; 4096]).unwrap_err().contains("not a flushcheck file"));
        assert!(parse_header(&h[..10]).unwrap_err().contains("cut short"));
    }

    #[test]
    fn blocks_are_recognised_and_a_torn_one_is_told_apart() {
        let id: RunId = [7; 16];
        let mut b = vec![0u8; 4096];
        let sum = fill(&mut b, &id, 42, 8192);
        assert_eq!(inspect(&b, &id), Found::Block { seq: 42, offset: 8192, checksum: sum });
        assert_eq!(inspect(&b, &[8; 16]), Found::Foreign);
        let mut newer = vec![0u8; 4096];
        fill(&mut newer, &id, 43, 8192);
        // The first sector of one write, the rest of the next.
        b[512..].copy_from_slice(&newer[512..]);
        assert_eq!(inspect(&b, &id), Found::Torn { seq: 42 });
        let mut f = vec![0u8; 4096];
        filler(&mut f, &mut fastrand::Rng::with_seed(1));
        assert_eq!(inspect(&f, &id), Found::Foreign);
    }
}
