//! headroom's storage engine: runs disk tests (sequential and random reads and
//! writes at a queue depth and job count) against a test file, a block device
//! or an existing file, and returns what it measured as `headroom.result/v1`
//! probes.
//!
//! What it owns:
//! - the engine trait (`engine::IoEngine`, modelled on fio's ioengine ops:
//!   queue, commit, getevents) and its engines: io_uring and psync on Linux,
//!   iocp and psync on Windows;
//! - the test target: creating and laying out the test file with real data,
//!   O_DIRECT alignment, removing the file again (`target.rs`);
//! - safety: refusing to write over filesystems and partition tables (`safety.rs`);
//! - honesty checks (`probe.rs`): page cache, filesystem caveats, and reads
//!   faster than the bus ceiling the caller found (headroom_sys reads sysfs;
//!   this crate does not);
//! - one HDR latency record per I/O, read as per-second p99s and the test's
//!   percentiles, and per-second samples (`run.rs`);
//! - the presets (quick, cdm, nvme, sizes, sweep, sync, sustained).
//!
//! What it must not do: print, draw progress bars or parse command lines.
//! Progress reaches the caller through a callback; Ctrl-C through a
//! `&AtomicBool` stop flag that every loop here polls.

#[cfg(target_os = "linux")]
mod blkid;
mod bounds;
mod data;
mod engine;
mod fio;
mod os;
mod preset;
mod probe;
mod probe_engine;
mod run;
mod safety;
mod share;
mod storage;
mod target_common;
// Opening a local target is Linux's system calls through and through
// (O_DIRECT, statx, /proc/self/fd): Windows builds its own from its os/
// directory (CreateFile flags, volume sector size; docs/platform.md).
#[cfg_attr(windows, path = "os/windows/target.rs")]
mod target;

pub use bounds::{
    buffer_bytes, check_test_def, Setting, BLOCK_SIZE_RANGE, JOBS_RANGE, MAX_RAMP, QUEUE_DEPTH_RANGE,
    SAMPLE_INTERVAL_RANGE, TIME_RANGE,
};
pub use data::FastRng;
pub use engine::{AlignedBuf, BufferPool, Completion, IoEngine, IoKind, IoUnit, PSYNC_MAX_THREADS};
pub use fio::fio_job_file;
pub use preset::{
    parse_test_spec, resolve, test_def, Preset, TestChoice, TestSelection, SWEEP_BLOCK_SIZES, SWEEP_QUEUE_DEPTHS,
};
pub use probe::{honesty_warnings, BusCeiling};
pub use probe_engine::{DiskEngine, DiskRequest, DiskTarget};
pub use run::{run_test, RunSettings, TestOutcome};
pub use safety::probe_signatures;
pub use safety::under_any;
pub use share::{layout_share, looks_like_url, one_io, prepare_share, Share, ShareIo, ShareKind, ShareOpener};
pub use storage::Storage;
pub use target::{
    forget_remote_test_file, register_remote_test_file, remove_stale_test_files, remove_test_files_now, test_file_name,
    PreparedTarget, RemoteRemoval, TargetOptions,
};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The access pattern of a test, named as fio names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    /// Sequential reads (`read`).
    Read,
    /// Sequential writes (`write`).
    Write,
    /// Random reads (`randread`).
    RandRead,
    /// Random writes (`randwrite`).
    RandWrite,
    /// Random mix of reads and writes, `rwmix_read` percent reads (`randrw`).
    RandRw,
}

impl Rw {
    /// Every pattern, in the order the fio names are listed.
    pub const ALL: [Rw; 5] = [Rw::Read, Rw::Write, Rw::RandRead, Rw::RandWrite, Rw::RandRw];

    /// The fio name: read, write, randread, randwrite, randrw.
    pub fn as_str(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::RandRw => "randrw",
        }
    }

    /// The pattern with this fio name; None for any other word.
    pub fn parse(s: &str) -> Option<Rw> {
        Rw::ALL.into_iter().find(|rw| rw.as_str() == s)
    }

    /// Whether offsets are random rather than sequential.
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }

    /// Whether the test writes at all (and so needs a writable target).
    pub fn writes(self) -> bool {
        matches!(self, Rw::Write | Rw::RandWrite | Rw::RandRw)
    }

    /// Whether the test reads at all.
    pub fn reads(self) -> bool {
        matches!(self, Rw::Read | Rw::RandRead | Rw::RandRw)
    }
}

impl fmt::Display for Rw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How writes are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum SyncMode {
    /// No sync: the device (or page cache) acknowledges when it likes.
    #[default]
    None,
    /// fsync(2) after every write; the write's latency includes the fsync.
    Fsync,
    /// The file is opened with O_DSYNC: every write is durable on return.
    Dsync,
}

impl SyncMode {
    /// The word the result document's `sync` field carries: none, fsync or dsync.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::None => "none",
            SyncMode::Fsync => "fsync",
            SyncMode::Dsync => "dsync",
        }
    }
}

impl std::str::FromStr for SyncMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(SyncMode::None),
            "fsync" => Ok(SyncMode::Fsync),
            "dsync" => Ok(SyncMode::Dsync),
            _ => Err(format!("'{s}' is not a sync mode; use none, fsync or dsync")),
        }
    }
}

/// What written blocks contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Pattern {
    /// Fresh pseudo-random bytes for every write: incompressible, non-dedupable.
    #[default]
    Random,
    /// All zeros (what naive tools write; compresses and dedupes to nothing).
    Zero,
    /// The first PCT percent of every block is zeros, the rest random.
    Compressible(u8),
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Random => f.write_str("random"),
            Pattern::Zero => f.write_str("zero"),
            Pattern::Compressible(p) => write!(f, "compressible={p}"),
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;
    /// `random`, `zero` or `compressible=PCT` (a trailing `%` allowed).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(Pattern::Random),
            "zero" => Ok(Pattern::Zero),
            _ => match s.strip_prefix("compressible=").and_then(|p| p.trim_end_matches('%').parse::<u8>().ok()) {
                Some(p) if p <= 100 => Ok(Pattern::Compressible(p)),
                _ => Err("not a pattern; use random, zero or compressible=PCT (e.g. compressible=50)".into()),
            },
        }
    }
}

/// Which engine to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum EngineChoice {
    /// io_uring where the kernel offers it, else psync.
    #[default]
    Auto,
    /// The asynchronous engine (io_uring on Linux, iocp on Windows) or fail.
    IoUring,
    /// pread/pwrite, one I/O in flight per thread (jobs x queue depth threads, capped).
    Psync,
}

/// The words `--engine` takes on this system: the asynchronous engine is
/// called by its own name (io_uring on Linux, iocp on Windows).
pub static ENGINE_WORDS: [&str; 3] = ["auto", crate::os::ASYNC_ENGINE, "psync"];

impl std::str::FromStr for EngineChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let asynchronous = crate::os::ASYNC_ENGINE;
        match s {
            "auto" => Ok(EngineChoice::Auto),
            "psync" => Ok(EngineChoice::Psync),
            _ if s == asynchronous => Ok(EngineChoice::IoUring),
            "io_uring" | "iocp" => {
                Err(format!("'{s}' is another system's engine; the asynchronous engine here is {asynchronous}"))
            }
            _ => Err(format!("'{s}' is not an engine; use auto, {asynchronous} or psync")),
        }
    }
}

/// The engine that actually ran a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// The asynchronous engine: io_uring on Linux, iocp on Windows (the
    /// document's word is `crate::os`'s `ASYNC_ENGINE`).
    IoUring,
    /// pread/pwrite (`psync` in the document).
    Psync,
    /// A protocol client of headroom's own; the document names the protocol.
    Share,
}

impl EngineKind {
    /// The word the result document's `engine` field carries.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::IoUring => crate::os::ASYNC_ENGINE,
            EngineKind::Psync => "psync",
            EngineKind::Share => "share",
        }
    }
}

/// Whether to use O_DIRECT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum DirectMode {
    /// O_DIRECT where the filesystem accepts it, buffered (with a warning) where not.
    #[default]
    Auto,
    /// O_DIRECT or fail.
    On,
    /// Buffered I/O through the page cache.
    Off,
}

impl std::str::FromStr for DirectMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DirectMode::Auto),
            "on" => Ok(DirectMode::On),
            "off" => Ok(DirectMode::Off),
            _ => Err(format!("'{s}' is not an O_DIRECT mode; use auto, on or off")),
        }
    }
}

/// Whether io_uring reads into and writes from registered buffers (fio's
/// `--fixedbufs`): the kernel then skips pinning each buffer's pages per I/O,
/// which on a 4K QD32 read test is about a quarter of headroom's CPU per I/O.
/// The device sees the same I/Os either way; the result records which ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FixedBufs {
    /// Registered for blocks up to [`engine::REGISTER_AT_MOST`], where no
    /// bio is ever split; ordinary buffers above it, and where registering
    /// is refused (RLIMIT_MEMLOCK).
    #[default]
    Auto,
    /// Registered at every block size, or fail.
    On,
    /// Ordinary buffers, as fio's default.
    Off,
}

impl FixedBufs {
    /// Whether a test of `block_size` bytes asks for registered buffers.
    pub fn wanted(self, block_size: u64) -> bool {
        match self {
            FixedBufs::Auto => block_size <= engine::REGISTER_AT_MOST,
            FixedBufs::On => true,
            FixedBufs::Off => false,
        }
    }
}

impl std::str::FromStr for FixedBufs {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(FixedBufs::Auto),
            "on" => Ok(FixedBufs::On),
            "off" => Ok(FixedBufs::Off),
            _ => Err(format!("'{s}' is not a registered-buffer mode; use auto, on or off")),
        }
    }
}

/// Until session 24 the setting was a bool (true: registered, false:
/// ordinary buffers, then the default), and a far end (`headroom serve`)
/// may be older than its client: `auto` and `on` still go as that bool,
/// which an older far end reads as its nearest setting (ordinary buffers,
/// registered ones), and only `off` as a word. Read back, `false` is `auto`.
impl Serialize for FixedBufs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FixedBufs::Auto => s.serialize_bool(false),
            FixedBufs::On => s.serialize_bool(true),
            FixedBufs::Off => s.serialize_str("off"),
        }
    }
}

impl<'de> Deserialize<'de> for FixedBufs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Spelled {
            Before(bool),
            Now(String),
        }
        match Spelled::deserialize(d)? {
            Spelled::Before(true) => Ok(FixedBufs::On),
            Spelled::Before(false) => Ok(FixedBufs::Auto),
            Spelled::Now(word) => word.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// One test: what a row of the output table measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestDef {
    /// Unique id within a run, e.g. `seq1m-q8t1-read`.
    pub id: String,
    /// Human name, e.g. `SEQ1M Q8T1 read`.
    pub name: String,
    /// Access pattern.
    pub rw: Rw,
    /// Bytes per I/O.
    pub block_size: u64,
    /// I/Os in flight per job.
    pub queue_depth: u32,
    /// Workers issuing I/O at once, each with its own queue (fio's `numjobs`).
    pub jobs: u32,
    /// Percentage of reads for randrw.
    pub rwmix_read: Option<u32>,
    /// Overrides the run's direct setting (the `sync` preset's buffered column).
    pub direct: Option<DirectMode>,
    /// How writes are made durable.
    pub sync: SyncMode,
    /// Measured time, warm-up excluded.
    pub time: Duration,
    /// Warm-up, excluded from every figure.
    pub ramp: Duration,
    /// Stop after this many bytes (sustained --size), if set.
    pub max_bytes: Option<u64>,
    /// Length of each sample of the series (one second unless --sample-interval).
    pub sample_interval: Duration,
}

/// Errors of the disk engine. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The user asked for something impossible; the message says what and how to fix it.
    #[error("{0}")]
    Usage(String),
    /// A setting is out of range or does not fit another; the front end
    /// spells the settings the message names ([`Setting`]).
    #[error("{0}")]
    Invalid(headroom_units::setting::Message<Setting>),
    /// The target filled up (ENOSPC); the test file has been removed.
    #[error("{}", disk_full(context))]
    DiskFull {
        /// What headroom was doing, e.g. `laying out /mnt/x/headroom.tmp`.
        context: String,
    },
    /// An I/O call failed; `context` says what headroom was doing.
    #[error("{context}: {source}")]
    Io {
        /// What headroom was doing, e.g. `opening /dev/sdb`.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The server or the network failed, not the user: a share's name that
    /// resolves to nothing, nobody listening, a server lost or speaking
    /// outside its protocol.
    #[error("{message}")]
    Peer {
        /// Whose fault, as the runner reports it.
        fault: PeerFault,
        /// The one line the user sees, naming the target.
        message: String,
    },
    /// A safety check refused to write to the target (it holds data headroom did not create).
    #[error("refusing to write to {path}: {reason}")]
    Refused {
        /// The target refused.
        path: String,
        /// What was found there, e.g. an ext4 superblock, and the setting
        /// that would allow the write.
        reason: headroom_units::setting::Message<Setting>,
    },
}

/// [`DiskError::DiskFull`]'s line, naming the setting to lower.
fn disk_full(context: &str) -> headroom_units::setting::Message<Setting> {
    headroom_units::setting::Message::text(format!(
        "the disk is full ({context}); the test file was removed. Use a smaller "
    ))
    .and(Setting::Size)
    .then(" or free some space")
}

/// How the far end of a network target failed ([`DiskError::Peer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerFault {
    /// No address, no route, or no answer to the connect.
    Unreachable,
    /// Nobody listens on the port.
    Refused,
    /// The connection was lost after it was made.
    Lost,
    /// The server broke its protocol.
    Protocol,
}

impl DiskError {
    /// [`DiskError::Io`] for `source`, or [`DiskError::DiskFull`] when it is
    /// ENOSPC (std's `StorageFull`: ERROR_DISK_FULL on Windows).
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::StorageFull {
            DiskError::DiskFull { context: context.into() }
        } else {
            DiskError::Io { context: context.into(), source }
        }
    }

    /// The error's line with each setting it names written as `spell`
    /// spells it (the front end's flags); `Display` names them plainly.
    pub fn spelled<N: AsRef<str>>(&self, spell: impl Fn(Setting) -> N) -> String {
        match self {
            DiskError::Invalid(m) => m.spelled(spell),
            DiskError::DiskFull { context } => disk_full(context).spelled(spell),
            DiskError::Refused { path, reason } => format!("refusing to write to {path}: {}", reason.spelled(spell)),
            // A worker's connect answers in io::Error; a share that refuses a
            // setting there carries the typed error inside it.
            DiskError::Io { context, source } => match source.get_ref().and_then(|e| e.downcast_ref::<DiskError>()) {
                Some(inner) => format!("{context}: {}", inner.spelled(spell)),
                None => self.to_string(),
            },
            other => other.to_string(),
        }
    }

    /// Whether this is the user's mistake (exit 2 with the usage message) rather than the machine's.
    pub fn is_usage(&self) -> bool {
        matches!(self, DiskError::Usage(_) | DiskError::Invalid(_) | DiskError::Refused { .. })
    }
}

/// Results of the disk engine.
pub type Result<T, E = DiskError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::FixedBufs;

    #[test]
    fn auto_registers_buffers_only_for_blocks_no_device_splits() {
        assert!(FixedBufs::Auto.wanted(4096));
        assert!(FixedBufs::Auto.wanted(crate::engine::REGISTER_AT_MOST));
        assert!(!FixedBufs::Auto.wanted(crate::engine::REGISTER_AT_MOST + 4096));
        assert!(!FixedBufs::Auto.wanted(1 << 20));
        assert!(FixedBufs::On.wanted(4 << 20));
        assert!(!FixedBufs::Off.wanted(4096));
    }

    #[test]
    fn the_setting_reads_its_words_and_the_bool_it_was_before() {
        let read = |json: &str| serde_json::from_str::<FixedBufs>(json);
        assert_eq!(read("true").unwrap(), FixedBufs::On);
        assert_eq!(read("false").unwrap(), FixedBufs::Auto);
        assert_eq!(read("\"off\"").unwrap(), FixedBufs::Off);
        for setting in [FixedBufs::Auto, FixedBufs::On, FixedBufs::Off] {
            assert_eq!(read(&serde_json::to_string(&setting).unwrap()).unwrap(), setting);
        }
        // What a far end older than session 24 reads: a bool for auto and on.
        assert_eq!(serde_json::to_string(&FixedBufs::Auto).unwrap(), "false");
        assert_eq!(serde_json::to_string(&FixedBufs::On).unwrap(), "true");
        assert!(read("\"sometimes\"").unwrap_err().to_string().contains("auto, on or off"));
    }
}
