//! The flushcheck documents: the run a writer declares (in its file's
//! header and to the listener), each block the storage acknowledged, and what
//! `flushcheck write` and `flushcheck verify` print with `--json` (schema
//! [`SCHEMA`]). Here so presenters read them without depending on the engine
//! that wrote them; the wire protocol and the flushcheck engine re-export them.

use serde::{Deserialize, Serialize};

/// Length of a flushcheck run id, bytes (sent as hex).
pub const FLUSH_RUN_LEN: usize = 16;
/// Most blocks one flushcheck run may have: bounds what one run costs the
/// listener's disk (a row per block).
pub const FLUSH_MAX_BLOCKS: u64 = 1 << 22;
/// Smallest and largest flushcheck block (O_DIRECT reads need 4 KiB alignment).
pub const FLUSH_BLOCK_RANGE: std::ops::RangeInclusive<u32> = 4096..=(1 << 20);
/// Longest path or host name a flushcheck run records.
pub const FLUSH_MAX_TEXT: usize = 1024;

/// A flushcheck run: one file written by one `headroom flushcheck write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushRun {
    /// Run id, hex ([`FLUSH_RUN_LEN`] random bytes).
    pub run: String,
    /// Block size, bytes.
    pub block_size: u32,
    /// Data blocks in the file (the header block not counted).
    pub blocks: u64,
    /// How each write was made durable: `fsync`, `dsync` or `none`.
    pub sync: String,
    /// The file, as the writer named it.
    pub path: String,
    /// The writer's host name.
    pub host: String,
}

impl FlushRun {
    /// Refuses what no writer of this build sends, with the reason the peer reads.
    pub fn validate(&self) -> Result<(), String> {
        if from_hex::<FLUSH_RUN_LEN>(&self.run).is_none() {
            return Err(format!("a flushcheck run id is {} hex digits", FLUSH_RUN_LEN * 2));
        }
        if !FLUSH_BLOCK_RANGE.contains(&self.block_size) || !self.block_size.is_power_of_two() {
            return Err(format!("flushcheck block size {} is not a power of two from 4 KiB to 1 MiB", self.block_size));
        }
        if !(1..=FLUSH_MAX_BLOCKS).contains(&self.blocks) {
            return Err(format!("a flushcheck run has 1 to {FLUSH_MAX_BLOCKS} blocks, not {}", self.blocks));
        }
        if !matches!(self.sync.as_str(), "fsync" | "dsync" | "none") {
            return Err("flushcheck sync is fsync, dsync or none".into());
        }
        if self.path.len() > FLUSH_MAX_TEXT || self.host.len() > FLUSH_MAX_TEXT {
            return Err(format!("flushcheck path and host are at most {FLUSH_MAX_TEXT} bytes"));
        }
        Ok(())
    }

    /// Refuses an acknowledgement that cannot belong to this run.
    pub fn check_ack(&self, ack: &FlushAck) -> Result<(), String> {
        let bs = u64::from(self.block_size);
        let index = ack.offset / bs;
        if ack.seq == 0 || !ack.offset.is_multiple_of(bs) || index == 0 || index > self.blocks {
            return Err(format!(
                "block seq {} at offset {} is outside run {} ({} blocks of {bs} bytes after the header)",
                ack.seq, ack.offset, self.run, self.blocks
            ));
        }
        Ok(())
    }
}

/// One block the storage acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushAck {
    /// Sequence number (from 1; the file wraps around, so later blocks reuse offsets).
    pub seq: u64,
    /// Byte offset of the block in the file.
    pub offset: u64,
    /// Checksum of the block's content, as written.
    pub checksum: u64,
}

/// Exactly `N` bytes from hex, or None (a run id here; the wire protocol's
/// nonces and keys use the same reading, re-exported as `wire::from_hex`).
pub fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

/// Schema of both flushcheck documents.
pub const SCHEMA: &str = "headroom.flushcheck/v1";

/// What a writer did before it stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// `write`.
    pub mode: String,
    /// The run, as recorded in the file's header and on the listener.
    pub run: FlushRun,
    /// The listener, `host:port`.
    pub listener: String,
    /// Blocks written (the last one may not have been acknowledged).
    pub written: u64,
    /// Blocks the storage acknowledged and the listener recorded.
    pub acknowledged: u64,
    /// How long the writer ran, seconds.
    pub duration_s: f64,
    /// Acknowledged blocks per second.
    pub acks_per_sec: f64,
    /// Why it stopped: `interrupted` (Ctrl-C) or `duration`.
    pub stopped_by: String,
}

/// What a verify found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// `verify`.
    pub mode: String,
    /// The run, as the file's header declares it.
    pub run: FlushRun,
    /// The file read back.
    pub path: String,
    /// The listener, `host:port`.
    pub listener: String,
    /// Blocks were read with O_DIRECT (false: the filesystem refused it and
    /// the page cache may have answered).
    pub direct: bool,
    /// Acknowledged blocks the listener holds (the latest at each offset).
    pub acknowledged: u64,
    /// Acknowledged blocks found whole (or overwritten by a later write of the run).
    pub intact: u64,
    /// Acknowledged blocks not found: missing or an older version in their place.
    pub lost: u64,
    /// Acknowledged blocks found torn (part of a write).
    pub torn: u64,
    /// Every lost or torn block, in offset order.
    pub findings: Vec<BlockFinding>,
    /// Whether the run's sync mode promised durability (fsync, dsync): only
    /// then is a loss the storage's fault.
    pub durable: bool,
}

impl VerifyReport {
    /// The storage lied: a durable acknowledged write is gone or torn.
    pub fn storage_lied(&self) -> bool {
        self.durable && self.lost + self.torn > 0
    }
}

/// One acknowledged block that did not survive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockFinding {
    /// The acknowledged block's sequence number.
    pub seq: u64,
    /// Its offset in the file.
    pub offset: u64,
    /// What was there instead.
    pub finding: Finding,
    /// The sequence number of what was there, when it was a block of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_seq: Option<u64>,
}

/// What stood where an acknowledged block should have been.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// Nothing of the run: the write never reached the medium.
    Missing,
    /// An earlier block of the run at that offset: the write never reached the medium.
    Stale,
    /// Part of the block: the write was cut.
    Torn,
}
