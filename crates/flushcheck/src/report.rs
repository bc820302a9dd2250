//! The documents `flushcheck write` and `flushcheck verify` print with
//! `--json` (schema [`SCHEMA`]) and hand to the presenters.

use headroom_net::wire::FlushRun;
use serde::{Deserialize, Serialize};

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
