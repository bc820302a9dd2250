//! headroom-flushcheck: does storage keep what it acknowledged?
//!
//! In the spirit of diskchecker: a writer on the machine under test writes
//! numbered, checksummed blocks into a file of its own (local, or on an SMB
//! or NFS share) or a whole NBD or iSCSI export ([`block`], [`storage`]), makes
//! each one durable as asked (fsync, O_DSYNC or nothing) and, once the
//! storage acknowledged it, reports it to a `headroom serve` on another
//! machine ([`writer`]), which keeps the list on its own disk ([`ledger`]).
//! After a power cut and a reboot, [`verify`] reads every block back past the
//! page cache and lists each acknowledged write that was lost or torn.
//!
//! It owns the file format, the ledger and both procedures; it prints
//! nothing (the documents in [`report`] go to the presenters).

pub mod block;
pub mod ledger;
pub mod report;
pub mod storage;
pub mod verify;
pub mod writer;

mod error;
mod io;
mod os;

pub use error::{FlushError, Setting, Spelling};
pub use ledger::SqliteLedger;
pub use report::{BlockFinding, Finding, VerifyReport, WriteReport, SCHEMA};
pub use verify::{verify, verify_export};
pub use writer::{write, write_export, WriteOptions};

/// How each block is made durable before it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// write(), then fsync(): what databases and VM images rely on.
    Fsync,
    /// The file is opened with O_DSYNC: each write returns once durable.
    Dsync,
    /// write() only: the data may sit in the page cache. Expected to be lost at a power cut.
    None,
}

impl SyncMode {
    /// The name on the command line and on the wire.
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Fsync => "fsync",
            SyncMode::Dsync => "dsync",
            SyncMode::None => "none",
        }
    }

    /// The mode named `name`, as the wire carries it.
    pub fn from_name(name: &str) -> Option<SyncMode> {
        match name {
            "fsync" => Some(SyncMode::Fsync),
            "dsync" => Some(SyncMode::Dsync),
            "none" => Some(SyncMode::None),
            _ => None,
        }
    }

    /// Whether an acknowledged write of this mode must survive a power cut.
    pub fn is_durable(self) -> bool {
        self != SyncMode::None
    }
}
