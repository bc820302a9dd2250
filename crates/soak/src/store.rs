//! The soak database: one SQLite file (WAL mode) holding the soak's settings,
//! its sessions (the first run and each `--resume`), the cycles, every
//! per-second sample and the events (flaps, outages, gaps, errors).
//!
//! Durability: every sample is its own transaction, committed as it arrives
//! (once a second per running probe), with `synchronous=NORMAL`, which in WAL
//! mode survives a killed process (only a power cut may lose the last
//! commits). So SIGKILL loses at most the sample being measured.
//!
//! Nothing here keeps samples in memory: they go straight to the file, and
//! readers ([`Store::for_each_sample`]) stream them back row by row.
//!
//! Identity: `PRAGMA application_id` is 'HDRS' and the table
//! `headroom_soak_schema` holds the schema version. A file without them was
//! written by another program; a newer version by a newer headroom. Both are
//! refused with a message saying so, and the file is never modified then.
//!
//! Long (about 690 lines of code, then its tests): the SQL schema, its
//! migrations and every query of the store stay together so a schema change
//! is made in one file.

use crate::setup::Setting;
use headroom_result::SoakEventKind;
use headroom_units::setting::Message;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `PRAGMA application_id` of a headroom soak database: "HDRS".
pub const APPLICATION_ID: i32 = 0x4844_5253;
/// Schema version this build writes and reads. 2 added `test_files`; a
/// version 1 file is migrated when a soak in it is resumed ([`Store::migrate`]).
pub const SCHEMA_VERSION: i64 = 2;

/// Tables added in version 2 (each `IF NOT EXISTS`, so migrating is idempotent).
const SCHEMA_V2: &str = "
CREATE TABLE IF NOT EXISTS test_files (
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL REFERENCES sessions(id),
    path TEXT NOT NULL,
    pid INTEGER NOT NULL,
    removed_unix REAL
);
";

const SCHEMA: &str = "
CREATE TABLE headroom_soak_schema (version INTEGER NOT NULL, written_by TEXT NOT NULL);
CREATE TABLE soak (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    started_at TEXT NOT NULL,
    started_unix REAL NOT NULL,
    planned_s REAL,
    config TEXT NOT NULL,
    host TEXT
);
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    started_unix REAL NOT NULL,
    ended_unix REAL,
    stop_reason TEXT
);
CREATE TABLE cycles (
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL REFERENCES sessions(id),
    n INTEGER NOT NULL,
    probe TEXT NOT NULL,
    started_unix REAL NOT NULL,
    ended_unix REAL,
    result TEXT,
    error TEXT
);
CREATE TABLE samples (
    cycle INTEGER NOT NULL REFERENCES cycles(id),
    probe TEXT NOT NULL,
    t_unix REAL NOT NULL,
    bytes_per_sec REAL NOT NULL,
    iops REAL,
    lat_mean_ns REAL,
    lat_p99_ns REAL
);
CREATE INDEX samples_by_probe_time ON samples(probe, t_unix);
CREATE INDEX samples_by_cycle ON samples(cycle);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    t_unix REAL NOT NULL,
    end_unix REAL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    device TEXT,
    message TEXT NOT NULL,
    details TEXT
);
";

/// Why a database could not be used. Its line names the settings to change
/// ([`StoreError::message`]) for the front end to spell.
#[derive(Debug)]
pub enum StoreError {
    /// The file is not SQLite.
    NotSqlite {
        /// The database file.
        path: PathBuf,
    },
    /// SQLite, but not a headroom soak database (no application id or schema table).
    ForeignDatabase {
        /// The database file.
        path: PathBuf,
    },
    /// Written by a newer headroom (schema version above `SCHEMA_VERSION`).
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The file's schema version.
        found: i64,
    },
    /// A new soak asked for a file that already holds one.
    AlreadyStarted {
        /// The database file.
        path: PathBuf,
    },
    /// `--resume` of a file that is missing or empty.
    NothingToResume {
        /// The database file.
        path: PathBuf,
    },
    /// Opening for reading a file that is missing or empty.
    NoSoak {
        /// The database file.
        path: PathBuf,
    },
    /// SQLite reports the file damaged; it is left untouched.
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// SQLite's description of the damage.
        detail: String,
    },
    /// `--resume` with no planned time left.
    UsedUp {
        /// The database file.
        path: PathBuf,
        /// The planned total, formatted (e.g. `3h`).
        planned: String,
        /// Time already soaked, formatted.
        elapsed: String,
        /// A `--duration` that would leave time to run, formatted.
        example: String,
    },
    /// Any other SQLite error.
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
}

impl StoreError {
    /// The error's line, naming the settings that would mend it.
    pub fn message(&self) -> Message<Setting> {
        use Setting::{Db, Duration, Resume};
        let at = |path: &PathBuf, text: String| Message::text(format!("{}: {text}", path.display()));
        match self {
            StoreError::NotSqlite { path } => {
                at(path, "not a SQLite database (was it written by another program?)".into())
            }
            StoreError::ForeignDatabase { path } => {
                at(path, "a SQLite database of another program (no headroom soak tables); choose another ".into())
                    .and(Db)
                    .then(" file")
            }
            StoreError::NewerSchema { path, found } => at(
                path,
                format!(
                    "soak database schema version {found} is newer than this headroom reads ({SCHEMA_VERSION}); \
                     upgrade headroom"
                ),
            ),
            StoreError::AlreadyStarted { path } => at(path, "already holds a soak; add ".into())
                .and(Resume)
                .then(" to continue it, or choose another ")
                .and(Db)
                .then(" file"),
            StoreError::NothingToResume { path } => {
                at(path, "no soak to resume here (the file does not exist or is empty); drop ".into())
                    .and(Resume)
                    .then(" to start one")
            }
            StoreError::NoSoak { path } => at(
                path,
                "holds no headroom soak (the file does not exist or is empty); give a database `headroom soak ".into(),
            )
            .and(Db)
            .then("` wrote"),
            StoreError::Corrupt { path, detail } => at(
                path,
                format!(
                    "the soak database is damaged ({detail}); it was left as it is. Salvage it with `sqlite3 {} \
                     .recover`, or start a new soak with another ",
                    path.display()
                ),
            )
            .and(Db),
            StoreError::UsedUp { path, planned, elapsed, example } => at(
                path,
                format!("nothing left to run: the planned {planned} are used up ({elapsed} soaked); give a longer total, e.g. "),
            )
            .and(Resume)
            .then(" ")
            .and(Duration)
            .then(format!(" {example}")),
            StoreError::Sqlite { path, source } => at(path, source.to_string()),
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.message().fmt(f)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Sqlite { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What the user asked for, stored so `--resume` runs the same soak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakConfig {
    /// Probes of one cycle, in order: write, read, iops, net, remote-write, remote-read, remote-iops.
    pub cycle: Vec<String>,
    /// Seconds each probe runs per cycle.
    pub probe_s: f64,
    /// The disk path the disk probes run on (`--path`); None for a network-only soak.
    #[serde(default)]
    pub path: Option<String>,
    /// The server the net probes reach (`--server`, `HOST[:PORT]`); None for a disk-only soak.
    #[serde(default)]
    pub server: Option<String>,
    /// An ESXi vmkernel.log watched for link events (`--vmkernel-log`).
    #[serde(default)]
    pub vmkernel_log: Option<String>,
    /// Extra settings of the command, for the record.
    #[serde(default)]
    pub extra: serde_json::Value,
}

/// The soak row.
#[derive(Debug, Clone, PartialEq)]
pub struct SoakInfo {
    /// RFC 3339 UTC time the soak started (the document's `started_at`).
    pub started_at: String,
    /// The same instant, Unix seconds: the origin of every `t_s` in the document.
    pub started_unix: f64,
    /// Total asked for (`--duration`), seconds; None: until stopped.
    pub planned_s: Option<f64>,
    /// The settings the soak runs with.
    pub config: SoakConfig,
    /// The `host` inventory of the machine, as JSON, when it was recorded.
    pub host: Option<serde_json::Value>,
}

/// One stored sample.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SampleRow {
    /// Unix seconds at the end of the sample's interval.
    pub t_unix: f64,
    /// Payload bytes per second over the interval.
    pub bytes_per_sec: f64,
    /// Operations per second over the interval; None for throughput-only probes.
    pub iops: Option<f64>,
    /// Mean latency over the interval, ns.
    pub lat_mean_ns: Option<f64>,
    /// 99th-percentile latency over the interval, ns.
    pub lat_p99_ns: Option<f64>,
}

/// One stored event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// Row id; events sort by time, then id.
    pub id: i64,
    /// When it happened (or began), Unix seconds.
    pub t_unix: f64,
    /// When it ended, Unix seconds; None while open or for an instant.
    pub end_unix: Option<f64>,
    /// flap, server_outage, gap, probe_error.
    pub kind: SoakEventKind,
    /// sysfs, kernel_log, vmkernel_log, soak.
    pub source: String,
    /// The interface or disk concerned, when the event names one.
    pub device: Option<String>,
    /// One sentence for the user.
    pub message: String,
    /// The event's figures as JSON (e.g. a flap's carrier counts), when it has any.
    pub details: Option<serde_json::Value>,
}

/// One session: the first run or a `--resume`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// Row id; cycles reference it.
    pub id: i64,
    /// When the session started, Unix seconds.
    pub started_unix: f64,
    /// When it stopped cleanly, else the time of its last sample or cycle.
    pub ended_unix: Option<f64>,
    /// duration or interrupted; `None` when it never stopped cleanly (killed).
    pub stop_reason: Option<String>,
}

/// One stored cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleRow {
    /// Row id; samples reference it.
    pub id: i64,
    /// The session ([`SessionRow::id`]) it ran in.
    pub session: i64,
    /// Cycle number, counting on across sessions.
    pub n: i64,
    /// The probe it ran: write, read, iops, net, remote-write, remote-read or remote-iops.
    pub probe: String,
    /// When it started, Unix seconds.
    pub started_unix: f64,
    /// When it ended, Unix seconds; None when the soak was killed during it.
    pub ended_unix: Option<f64>,
    /// The probe's result (a `headroom_result::Probe` without samples).
    pub result: Option<serde_json::Value>,
    /// Why the probe failed (the outage or error message); None when it measured.
    pub error: Option<String>,
}

/// A soak database connection. Each thread opens its own ([`Store::reopen`]);
/// WAL lets them write one after the other without blocking readers.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| match source {
        rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::NotADatabase => {
            StoreError::NotSqlite { path: path.to_path_buf() }
        }
        source => StoreError::Sqlite { path: path.to_path_buf(), source },
    }
}

impl Store {
    fn connect(path: &Path) -> Result<Connection, StoreError> {
        let conn = Connection::open(path).map_err(sqlite(path))?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(sqlite(path))?;
        Ok(conn)
    }

    /// Whether the file holds any table at all (a new, empty file does not).
    fn is_empty(conn: &Connection, path: &Path) -> Result<bool, StoreError> {
        let tables: i64 =
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(sqlite(path))?;
        Ok(tables == 0)
    }

    /// Checks that `conn` is a soak database this build can read.
    fn check(conn: &Connection, path: &Path) -> Result<(), StoreError> {
        let has_schema_table: bool = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='headroom_soak_schema'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(sqlite(path))?
            > 0;
        if !has_schema_table {
            return Err(StoreError::ForeignDatabase { path: path.to_path_buf() });
        }
        let version: Option<i64> =
            conn.query_row("SELECT max(version) FROM headroom_soak_schema", [], |r| r.get(0)).map_err(sqlite(path))?;
        match version {
            None => Err(StoreError::ForeignDatabase { path: path.to_path_buf() }),
            Some(v) if v > SCHEMA_VERSION => Err(StoreError::NewerSchema { path: path.to_path_buf(), found: v }),
            Some(_) => Ok(()),
        }
    }

    fn tune(conn: &Connection, path: &Path) -> Result<(), StoreError> {
        conn.pragma_update(None, "journal_mode", "WAL").map_err(sqlite(path))?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(sqlite(path))?;
        Ok(())
    }

    /// Creates a new soak in `path` (a new or empty file). Refuses a file that
    /// already holds a soak or anything else.
    pub fn create(path: &Path, info: &SoakInfo) -> Result<Store, StoreError> {
        let conn = Self::connect(path)?;
        if !Self::is_empty(&conn, path)? {
            Self::check(&conn, path)?;
            return Err(StoreError::AlreadyStarted { path: path.to_path_buf() });
        }
        Self::tune(&conn, path)?;
        let err = sqlite(path);
        conn.pragma_update(None, "application_id", APPLICATION_ID).map_err(&err)?;
        conn.execute_batch(&format!("BEGIN; {SCHEMA} {SCHEMA_V2} COMMIT;")).map_err(&err)?;
        conn.execute(
            "INSERT INTO headroom_soak_schema (version, written_by) VALUES (?1, ?2)",
            params![SCHEMA_VERSION, format!("headroom {}", env!("CARGO_PKG_VERSION"))],
        )
        .map_err(&err)?;
        conn.execute(
            "INSERT INTO soak (id, started_at, started_unix, planned_s, config, host) VALUES (1, ?1, ?2, ?3, ?4, ?5)",
            params![
                info.started_at,
                info.started_unix,
                info.planned_s,
                serde_json::to_string(&info.config).expect("config serialises"),
                info.host.as_ref().map(|h| h.to_string()),
            ],
        )
        .map_err(&err)?;
        Ok(Store { conn, path: path.to_path_buf() })
    }

    /// Opens an existing soak (for `--resume`, `report`, or another thread).
    ///
    /// Everything is checked before anything could write: the identity, the
    /// schema version, `PRAGMA quick_check` (a damaged file is refused
    /// untouched) and the soak row.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if std::fs::metadata(path).map(|m| m.len() == 0).unwrap_or(true) {
            return Err(StoreError::NoSoak { path: path.to_path_buf() });
        }
        let conn = Self::connect(path)?;
        let corrupt = |e: StoreError| match e {
            StoreError::Sqlite { source: rusqlite::Error::SqliteFailure(f, msg), .. }
                if f.code == rusqlite::ErrorCode::DatabaseCorrupt =>
            {
                StoreError::Corrupt { path: path.to_path_buf(), detail: msg.unwrap_or_else(|| f.to_string()) }
            }
            e => e,
        };
        if Self::is_empty(&conn, path).map_err(corrupt)? {
            return Err(StoreError::NoSoak { path: path.to_path_buf() });
        }
        Self::check(&conn, path).map_err(corrupt)?;
        let problems: Vec<String> = conn
            .prepare("PRAGMA quick_check(3)")
            .and_then(|mut st| st.query_map([], |r| r.get::<_, String>(0))?.collect())
            .map_err(sqlite(path))
            .map_err(corrupt)?;
        if problems.iter().any(|p| p != "ok") {
            // quick_check answers in lines ("*** in database main ***", "Page 21: ..."): one line for the error.
            let mut detail: String = problems
                .iter()
                .flat_map(|p| p.lines())
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("***"))
                .collect::<Vec<_>>()
                .join("; ");
            if detail.len() > 160 {
                detail = format!("{}...", detail.chars().take(160).collect::<String>());
            }
            return Err(StoreError::Corrupt { path: path.to_path_buf(), detail });
        }
        let store = Store { conn, path: path.to_path_buf() };
        store.info().map_err(corrupt).map_err(|e| match e {
            StoreError::Sqlite { source, .. } => StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("the soak row cannot be read: {source}"),
            },
            e => e,
        })?;
        Self::tune(&store.conn, path)?;
        Ok(store)
    }

    /// Brings a file of an older schema up to this one (resume only, so
    /// `report` never writes to a soak it reads).
    pub fn migrate(&self) -> Result<(), StoreError> {
        let version: i64 = self
            .conn
            .query_row("SELECT max(version) FROM headroom_soak_schema", [], |r| r.get(0))
            .map_err(self.err())?;
        if version < SCHEMA_VERSION {
            self.conn.execute_batch(&format!("BEGIN; {SCHEMA_V2} COMMIT;")).map_err(self.err())?;
            self.conn
                .execute(
                    "INSERT INTO headroom_soak_schema (version, written_by) VALUES (?1, ?2)",
                    params![SCHEMA_VERSION, format!("headroom {} (migrated)", env!("CARGO_PKG_VERSION"))],
                )
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// Records the test file a session created (before it is laid out, so a
    /// kill during the layout still leaves a record); returns its id.
    pub fn add_test_file(&self, session: i64, path: &Path, pid: u32) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO test_files (session, path, pid) VALUES (?1, ?2, ?3)",
                params![session, path.display().to_string(), pid],
            )
            .map_err(self.err())?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Marks a test file removed.
    pub fn test_file_removed(&self, id: i64, now_unix: f64) -> Result<(), StoreError> {
        self.conn
            .execute("UPDATE test_files SET removed_unix = ?1 WHERE id = ?2", params![now_unix, id])
            .map_err(self.err())?;
        Ok(())
    }

    /// Test files of sessions that never removed them (killed): (id, path, pid).
    pub fn test_files_left(&self) -> Result<Vec<(i64, PathBuf, u32)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, path, pid FROM test_files WHERE removed_unix IS NULL ORDER BY id")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, PathBuf::from(r.get::<_, String>(1)?), r.get(2)?)))
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// A second connection to the same database, for another thread.
    pub fn reopen(&self) -> Result<Store, StoreError> {
        let conn = Self::connect(&self.path)?;
        Self::tune(&conn, &self.path)?;
        Ok(Store { conn, path: self.path.clone() })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        sqlite(&self.path)
    }

    /// The soak row: start, plan, settings and host.
    pub fn info(&self) -> Result<SoakInfo, StoreError> {
        self.conn
            .query_row("SELECT started_at, started_unix, planned_s, config, host FROM soak WHERE id = 1", [], |r| {
                let config: String = r.get(3)?;
                let host: Option<String> = r.get(4)?;
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, config, host))
            })
            .map_err(self.err())
            .and_then(|(started_at, started_unix, planned_s, config, host)| {
                let config = serde_json::from_str(&config).map_err(|e| StoreError::Sqlite {
                    path: self.path.clone(),
                    source: rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(e)),
                })?;
                Ok(SoakInfo {
                    started_at,
                    started_unix,
                    planned_s,
                    config,
                    host: host.and_then(|h| serde_json::from_str(&h).ok()),
                })
            })
    }

    /// Sets the planned total duration (a `--resume` with a new `--duration`).
    pub fn set_planned(&self, planned_s: Option<f64>) -> Result<(), StoreError> {
        self.conn.execute("UPDATE soak SET planned_s = ?1 WHERE id = 1", params![planned_s]).map_err(self.err())?;
        Ok(())
    }

    /// Replaces the stored settings (a fact learnt after the start, such as
    /// the server's inventory, kept in their `extra`).
    pub fn set_config(&self, config: &SoakConfig) -> Result<(), StoreError> {
        let text = serde_json::to_string(config).expect("config serialises");
        self.conn.execute("UPDATE soak SET config = ?1 WHERE id = 1", params![text]).map_err(self.err())?;
        Ok(())
    }

    /// Starts a session (the first run or a resume); returns its id.
    pub fn begin_session(&self, now_unix: f64) -> Result<i64, StoreError> {
        self.conn.execute("INSERT INTO sessions (started_unix) VALUES (?1)", params![now_unix]).map_err(self.err())?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records the end of `session` at `now_unix` with its reason (`duration` or `interrupted`).
    pub fn end_session(&self, session: i64, now_unix: f64, reason: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE sessions SET ended_unix = ?1, stop_reason = ?2 WHERE id = ?3",
                params![now_unix, reason, session],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// The sessions in order.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT s.id, s.started_unix,
                        coalesce(s.ended_unix,
                                 (SELECT max(x.t_unix) FROM samples x JOIN cycles c ON x.cycle = c.id WHERE c.session = s.id),
                                 (SELECT max(c.ended_unix) FROM cycles c WHERE c.session = s.id)),
                        s.stop_reason
                 FROM sessions s ORDER BY s.id",
            )
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SessionRow { id: r.get(0)?, started_unix: r.get(1)?, ended_unix: r.get(2)?, stop_reason: r.get(3)? })
            })
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// Seconds of soak already run, summed over sessions.
    pub fn elapsed_s(&self) -> Result<f64, StoreError> {
        Ok(self.sessions()?.iter().map(|s| s.ended_unix.map_or(0.0, |e| (e - s.started_unix).max(0.0))).sum())
    }

    /// Time of the newest sample, if any.
    pub fn last_sample_unix(&self) -> Result<Option<f64>, StoreError> {
        self.conn.query_row("SELECT max(t_unix) FROM samples", [], |r| r.get(0)).map_err(self.err())
    }

    /// The next cycle number (cycles are numbered across sessions).
    pub fn next_cycle_number(&self) -> Result<i64, StoreError> {
        let n: Option<i64> = self.conn.query_row("SELECT max(n) FROM cycles", [], |r| r.get(0)).map_err(self.err())?;
        Ok(n.map_or(1, |n| n + 1))
    }

    /// Records the start of one probe's turn in a cycle; returns the cycle row id.
    pub fn begin_cycle(&self, session: i64, n: i64, probe: &str, now_unix: f64) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO cycles (session, n, probe, started_unix) VALUES (?1, ?2, ?3, ?4)",
                params![session, n, probe, now_unix],
            )
            .map_err(self.err())?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records how a probe's turn ended: its result (without samples) or error.
    pub fn end_cycle(
        &self,
        cycle: i64,
        now_unix: f64,
        result: Option<&serde_json::Value>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE cycles SET ended_unix = ?1, result = ?2, error = ?3 WHERE id = ?4",
                params![now_unix, result.map(|r| r.to_string()), error, cycle],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// Appends one sample, committed at once (see the module doc).
    pub fn add_sample(&self, cycle: i64, probe: &str, s: &SampleRow) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO samples (cycle, probe, t_unix, bytes_per_sec, iops, lat_mean_ns, lat_p99_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut st| {
                st.execute(params![cycle, probe, s.t_unix, s.bytes_per_sec, s.iops, s.lat_mean_ns, s.lat_p99_ns])
            })
            .map_err(self.err())?;
        Ok(())
    }

    /// Replaces a cycle's live samples by the engine's final ones (which carry
    /// latency), in one transaction: a kill in between keeps the live ones.
    pub fn replace_samples(&mut self, cycle: i64, probe: &str, samples: &[SampleRow]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let err = sqlite(&path);
        let tx = self.conn.transaction().map_err(&err)?;
        tx.execute("DELETE FROM samples WHERE cycle = ?1", params![cycle]).map_err(&err)?;
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO samples (cycle, probe, t_unix, bytes_per_sec, iops, lat_mean_ns, lat_p99_ns)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(&err)?;
            for s in samples {
                st.execute(params![cycle, probe, s.t_unix, s.bytes_per_sec, s.iops, s.lat_mean_ns, s.lat_p99_ns])
                    .map_err(&err)?;
            }
        }
        tx.commit().map_err(&err)?;
        Ok(())
    }

    /// Records an event; returns its id (to close it later with [`Store::end_event`]).
    pub fn add_event(&self, e: &EventRow) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO events (t_unix, end_unix, kind, source, device, message, details)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    e.t_unix,
                    e.end_unix,
                    e.kind.as_str(),
                    e.source,
                    e.device,
                    e.message,
                    e.details.as_ref().map(|d| d.to_string())
                ],
            )
            .map_err(self.err())?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Sets the end time (and optionally a new message) of an open event.
    pub fn end_event(&self, id: i64, end_unix: f64, message: Option<&str>) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE events SET end_unix = ?1, message = coalesce(?2, message) WHERE id = ?3",
                params![end_unix, message, id],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// Removes the events of one source (re-reading a vmkernel.log on resume).
    pub fn delete_events_from(&self, source: &str) -> Result<(), StoreError> {
        self.conn.execute("DELETE FROM events WHERE source = ?1", params![source]).map_err(self.err())?;
        Ok(())
    }

    /// Every event, by time.
    pub fn events(&self) -> Result<Vec<EventRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, t_unix, end_unix, kind, source, device, message, details FROM events ORDER BY t_unix, id",
            )
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                let details: Option<String> = r.get(7)?;
                Ok(EventRow {
                    id: r.get(0)?,
                    t_unix: r.get(1)?,
                    end_unix: r.get(2)?,
                    kind: r.get::<_, String>(3)?.parse().map_err(|e: String| {
                        rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, e.into())
                    })?,
                    source: r.get(4)?,
                    device: r.get(5)?,
                    message: r.get(6)?,
                    details: details.and_then(|d| serde_json::from_str(&d).ok()),
                })
            })
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// Every cycle, in the order they began.
    pub fn cycles(&self) -> Result<Vec<CycleRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, session, n, probe, started_unix, ended_unix, result, error FROM cycles ORDER BY id")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                let result: Option<String> = r.get(6)?;
                Ok(CycleRow {
                    id: r.get(0)?,
                    session: r.get(1)?,
                    n: r.get(2)?,
                    probe: r.get(3)?,
                    started_unix: r.get(4)?,
                    ended_unix: r.get(5)?,
                    result: result.and_then(|d| serde_json::from_str(&d).ok()),
                    error: r.get(7)?,
                })
            })
            .map_err(self.err())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())?;
        Ok(rows)
    }

    /// Probe names that have samples, in order of first appearance.
    pub fn sampled_probes(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt =
            self.conn.prepare("SELECT probe FROM samples GROUP BY probe ORDER BY min(rowid)").map_err(self.err())?;
        let rows =
            stmt.query_map([], |r| r.get(0)).map_err(self.err())?.collect::<Result<Vec<_>, _>>().map_err(self.err())?;
        Ok(rows)
    }

    /// Number of samples of a probe (all probes with `None`).
    pub fn sample_count(&self, probe: Option<&str>) -> Result<u64, StoreError> {
        let n: i64 = match probe {
            Some(p) => self.conn.query_row("SELECT count(*) FROM samples WHERE probe = ?1", [p], |r| r.get(0)),
            None => self.conn.query_row("SELECT count(*) FROM samples", [], |r| r.get(0)),
        }
        .map_err(self.err())?;
        Ok(n as u64)
    }

    /// Streams the samples of one probe in time order, one row at a time.
    pub fn for_each_sample(&self, probe: &str, mut f: impl FnMut(&SampleRow)) -> Result<(), StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT t_unix, bytes_per_sec, iops, lat_mean_ns, lat_p99_ns FROM samples
                 WHERE probe = ?1 ORDER BY t_unix",
            )
            .map_err(self.err())?;
        let mut rows = stmt.query([probe]).map_err(self.err())?;
        while let Some(r) = rows.next().map_err(self.err())? {
            f(&SampleRow {
                t_unix: r.get(0).map_err(self.err())?,
                bytes_per_sec: r.get(1).map_err(self.err())?,
                iops: r.get(2).map_err(self.err())?,
                lat_mean_ns: r.get(3).map_err(self.err())?,
                lat_p99_ns: r.get(4).map_err(self.err())?,
            });
        }
        Ok(())
    }

    /// The open (unfinished) event of a kind and device, if any.
    pub fn open_event(&self, kind: SoakEventKind, device: Option<&str>) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT id FROM events WHERE kind = ?1 AND end_unix IS NULL AND device IS ?2 ORDER BY id DESC LIMIT 1",
                params![kind.as_str(), device],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> SoakInfo {
        SoakInfo {
            started_at: "2026-11-21T22:00:00Z".into(),
            started_unix: 1000.0,
            planned_s: Some(60.0),
            config: SoakConfig {
                cycle: vec!["write".into(), "read".into()],
                probe_s: 10.0,
                path: Some("/tmp".into()),
                server: None,
                vmkernel_log: None,
                extra: serde_json::Value::Null,
            },
            host: None,
        }
    }

    #[test]
    fn create_write_reopen_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("soak.sqlite");
        let mut store = Store::create(&path, &info()).unwrap();
        let session = store.begin_session(1000.0).unwrap();
        let cycle = store.begin_cycle(session, 1, "write", 1000.0).unwrap();
        for i in 1..=5 {
            let s = SampleRow { t_unix: 1000.0 + i as f64, bytes_per_sec: 1e6 * i as f64, ..Default::default() };
            store.add_sample(cycle, "write", &s).unwrap();
        }
        let finals: Vec<SampleRow> = (1..=4)
            .map(|i| SampleRow {
                t_unix: 1000.0 + i as f64,
                bytes_per_sec: 2e6,
                lat_mean_ns: Some(5e4),
                ..Default::default()
            })
            .collect();
        store.replace_samples(cycle, "write", &finals).unwrap();
        store.end_cycle(cycle, 1005.0, Some(&serde_json::json!({"ok": true})), None).unwrap();
        let ev = store
            .add_event(&EventRow {
                id: 0,
                t_unix: 1002.0,
                end_unix: None,
                kind: SoakEventKind::Flap,
                source: "sysfs".into(),
                device: Some("eth0".into()),
                message: "eth0 down".into(),
                details: None,
            })
            .unwrap();
        assert_eq!(store.open_event(SoakEventKind::Flap, Some("eth0")).unwrap(), Some(ev));
        store.end_event(ev, 1003.5, None).unwrap();
        assert_eq!(store.open_event(SoakEventKind::Flap, Some("eth0")).unwrap(), None);
        store.end_session(session, 1005.0, "duration").unwrap();
        drop(store);

        let store = Store::open(&path).unwrap();
        assert_eq!(store.info().unwrap(), info());
        assert_eq!(store.sample_count(Some("write")).unwrap(), 4);
        let mut seen = Vec::new();
        store.for_each_sample("write", |s| seen.push(*s)).unwrap();
        assert_eq!(seen, finals);
        assert_eq!(store.events().unwrap()[0].end_unix, Some(1003.5));
        assert_eq!(store.elapsed_s().unwrap(), 5.0);
        assert_eq!(store.next_cycle_number().unwrap(), 2);
        assert_eq!(store.cycles().unwrap()[0].result, Some(serde_json::json!({"ok": true})));
        let mode: String = store.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn refuses_foreign_newer_and_garbage_files() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = dir.path().join("foreign.sqlite");
        let c = Connection::open(&foreign).unwrap();
        c.execute_batch("CREATE TABLE moz_places (id INTEGER); INSERT INTO moz_places VALUES (1);").unwrap();
        drop(c);
        assert!(matches!(Store::open(&foreign), Err(StoreError::ForeignDatabase { .. })));
        assert!(matches!(Store::create(&foreign, &info()), Err(StoreError::ForeignDatabase { .. })));

        let newer = dir.path().join("newer.sqlite");
        drop(Store::create(&newer, &info()).unwrap());
        let c = Connection::open(&newer).unwrap();
        c.execute("UPDATE headroom_soak_schema SET version = 99", []).unwrap();
        drop(c);
        let e = Store::open(&newer).err().unwrap();
        assert!(matches!(e, StoreError::NewerSchema { found: 99, .. }));
        assert!(e.to_string().contains("upgrade headroom"), "{e}");

        let text = dir.path().join("notes.sqlite");
        std::fs::write(&text, "this is not a database at all, just some text that is long enough").unwrap();
        let e = Store::open(&text).err().unwrap();
        assert!(matches!(e, StoreError::NotSqlite { .. }), "{e:?}");
        // Nothing was written to the refused files.
        assert_eq!(
            std::fs::read_to_string(&text).unwrap(),
            "this is not a database at all, just some text that is long enough"
        );

        let existing = dir.path().join("existing.sqlite");
        drop(Store::create(&existing, &info()).unwrap());
        assert!(matches!(Store::create(&existing, &info()), Err(StoreError::AlreadyStarted { .. })));
        assert!(matches!(Store::open(&dir.path().join("missing.sqlite")), Err(StoreError::NoSoak { .. })));
    }
}
