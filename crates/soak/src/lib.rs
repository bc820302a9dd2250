//! headroom-soak: hours-long runs that show dips, drifting latency and
//! flapping links without losing a sample.
//!
//! What it owns:
//! - the SQLite store of a soak (`store.rs`): settings, sessions, cycles,
//!   per-second samples, events; committed once a second; `--resume`;
//! - the cycle loop (`run.rs`): turns are probe requests run on the
//!   `headroom_runner::Runner` the binary equips with the disk and net
//!   engines, with the store (and the metrics) as its sink;
//! - the link watcher (`watch.rs`): sysfs polls, /dev/kmsg, vmkernel.log;
//! - the test files killed sessions left, removed on `--resume` (`leftovers.rs`);
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
mod run;
mod store;
mod watch;

pub use doc::{load_result, result_from_store, SampleDetail};
pub use leftovers::{mark_removed, remove_left_test_files, LeftFile};
pub use metrics::Metrics;
pub use run::{run_cycles, LiveSample, LoopSettings, ProbeFailure, ProbeOutcome, SoakEvent, StopReason, Turn};
pub use store::{EventRow, SampleRow, SoakConfig, SoakInfo, Store, StoreError};
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

/// An opened soak, ready to run a session.
pub struct Opened {
    /// The database, open for writing.
    pub store: Store,
    /// This session's row id.
    pub session: i64,
    /// The soak row as stored: start, plan, settings.
    pub info: SoakInfo,
    /// Time left to soak (`None`: until stopped).
    pub remaining: Option<Duration>,
    /// For a resume: seconds between the last stored sample (or the end of
    /// the last session) and now.
    pub gap_s: Option<f64>,
}

/// Starts a new soak in `db`, or with `resume` continues the one there
/// ([`open_to_resume`] then [`resume`]).
pub fn open_soak(db: &Path, resume: bool, new: SoakInfo, planned: Option<Duration>) -> Result<Opened, StoreError> {
    if !resume {
        let now = now_unix();
        let store = Store::create(db, &new)?;
        let session = store.begin_session(now)?;
        return Ok(Opened { store, session, remaining: planned, gap_s: None, info: new });
    }
    self::resume(open_to_resume(db)?, planned)
}

/// Opens the soak in `db` to resume it, writing nothing yet (the caller can
/// compare its flags with the stored settings first).
pub fn open_to_resume(db: &Path) -> Result<Store, StoreError> {
    Store::open(db).map_err(|e| match e {
        StoreError::NoSoak { path } => StoreError::NothingToResume { path },
        e => e,
    })
}

/// Continues the soak in `store`. The stored settings are kept (the cycle,
/// path, server); a `planned` duration given again replaces the stored total.
/// A soak whose total is used up is refused before anything is written. The
/// gap since the last sample is recorded as a `gap` event.
pub fn resume(store: Store, planned: Option<Duration>) -> Result<Opened, StoreError> {
    let now = now_unix();
    let info = store.info()?;
    let elapsed = store.elapsed_s()?;
    let total = planned.map(|p| p.as_secs_f64()).or(info.planned_s);
    if let Some(total) = total {
        // Under a second left is no turn at all (the loop would start none).
        if total - elapsed < 1.0 {
            let span = |s: f64| headroom_units::format_duration(Duration::from_secs_f64(s.max(0.0).round()));
            return Err(StoreError::UsedUp {
                path: store.path().to_path_buf(),
                planned: span(total),
                elapsed: span(elapsed),
                example: span((elapsed * 2.0).max(elapsed + 3600.0).ceil()),
            });
        }
    }
    store.migrate()?;
    if let Some(p) = planned {
        store.set_planned(Some(p.as_secs_f64()))?;
    }
    let info = store.info()?;
    let last = store.sessions()?.last().map(|s| s.ended_unix.unwrap_or(s.started_unix));
    let last_sample = store.last_sample_unix()?;
    let since = last_sample.into_iter().chain(last).fold(f64::NEG_INFINITY, f64::max);
    let gap_s = since.is_finite().then(|| (now - since).max(0.0));
    if let Some(gap) = gap_s {
        store.add_event(&EventRow {
            id: 0,
            t_unix: since,
            end_unix: Some(now),
            kind: "gap".into(),
            source: "soak".into(),
            device: None,
            message: format!("no samples for {gap:.1} s: the soak was not running; resumed"),
            details: None,
        })?;
    }
    let session = store.begin_session(now)?;
    let remaining = info.planned_s.map(|p| Duration::from_secs_f64((p - elapsed).max(0.0)));
    Ok(Opened { store, session, info, remaining, gap_s })
}
