//! headroom-soak: hours-long runs that show dips, drifting latency and
//! flapping links without losing a sample.
//!
//! What it owns:
//! - the SQLite store of a soak (`store.rs`): settings, sessions, cycles,
//!   per-second samples, events; committed once a second; `--resume`;
//! - starting a session (`setup.rs`): the flags of `headroom soak` checked
//!   into a new soak's schedule or against the stored settings of a resumed
//!   one, the default database name, opening a fresh or resumed soak;
//! - the turns of a cycle (`turns.rs`): disk and net probe requests (and the
//!   server's own disk probes, `--remote-path`), the `headroom_runner::Runner`
//!   with those engines, the interfaces on the path to the server;
//! - the engine of the server's disk turns (`remote.rs`): a remote engine a
//!   soak may lose and get back (an outage, not an error);
//! - one session from open to its result document (`session.rs`), the
//!   steps `headroom soak` calls;
//! - the cycle loop (`run.rs`): turns run on that Runner, with the store
//!   (and the metrics) as its sink;
//! - the link watcher (`watch.rs`): sysfs polls, /dev/kmsg, vmkernel.log;
//! - the test files: recorded as the disk engine creates them, and the ones
//!   killed sessions left removed on `--resume` (`leftovers.rs`);
//! - Prometheus metrics (`metrics.rs`);
//! - turning a soak database into a result document (`doc.rs`) with the
//!   detectors of `headroom_analysis::detect`.
//!
//! What it must not do: print, draw progress, parse command lines, or hold
//! samples in memory while running.

// The modules are private: what callers use is named below (the crate's
// curated face), so the files can be reorganised without touching them.
mod doc;
mod leftovers;
mod metrics;
mod os;
mod remote;
mod run;
mod session;
mod setup;
mod store;
mod turns;
mod watch;

pub use doc::{load_result, result_from_store, SampleDetail};
pub use leftovers::{mark_removed, prepare, remove_left_test_files, LeftFile, Prepared, TestFile};
pub use metrics::{parse_labels, LabelError, Metrics, DEFAULT_PORT};
pub use run::{run_cycles, LiveSample, LoopSettings, ProbeFailure, ProbeOutcome, SoakEvent, StopReason, Turn};
pub use session::{Finished, Ready, Session};
pub use setup::{
    default_db, discard_new, open, FlagError, Opened, Schedule, Setting, SetupError, SoakFlags, DEFAULT_SIZE,
};
pub use store::{EventRow, SampleRow, SoakConfig, SoakInfo, Store, StoreError};
pub use turns::{path_interfaces, runner, turns, Spelling};
pub use watch::{import_vmkernel_log, Watcher};

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// Seconds since the Unix epoch, the clock of every time in the store.
pub fn now_unix() -> f64 {
    headroom_runner::unix_now()
}

/// RFC 3339 UTC, seconds precision: "2026-11-21T22:00:00Z".
pub fn rfc3339(unix: f64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs_f64(unix.max(0.0))).to_string()
}

/// Whether `path` is a SQLite file (by its 16-byte header), so `report` can
/// tell a soak database from a result document.
pub fn is_sqlite_file(path: &Path) -> bool {
    let mut head = [0u8; 16];
    std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)).is_ok()
        && &head == b"SQLite format 3\0"
}
