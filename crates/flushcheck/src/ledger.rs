//! The listener's ledger: flushcheck runs and their acknowledged blocks in
//! one SQLite file under `serve --flushcheck-dir`, each acknowledgement
//! committed with a full sync before the writer hears back, so the list
//! survives the listener's own crash or restart. Its size is bounded
//! ([`MAX_LEDGER_BYTES`], [`MAX_RUNS`]): a token holder cannot fill the
//! listener's disk.

use headroom_net::wire::{FlushAck, FlushRun};
use headroom_net::ServerSetting::FlushcheckDir;
use headroom_net::{FlushLedger, ServerSettingError};
use headroom_units::setting::Message;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The ledger's file name inside `--flushcheck-dir`.
pub const FILE_NAME: &str = "flushcheck.sqlite";
/// Most runs one ledger keeps.
pub const MAX_RUNS: i64 = 10_000;
/// Most bytes the ledger's records may take: 1 GiB, some 15 million blocks
/// (a run of the largest, 4 Mi blocks, takes about 300 MiB). Runs times
/// blocks per run would allow terabytes, so the bytes are bounded
/// themselves: past it, new runs and blocks at offsets not yet recorded are
/// refused, while blocks already recorded are still updated (a writer going
/// round its file keeps working).
pub const MAX_LEDGER_BYTES: u64 = 1 << 30;
/// The write-ahead log is cut back to this after each checkpoint.
const WAL_LIMIT_BYTES: i64 = 64 << 20;

/// Flushcheck runs in SQLite.
#[derive(Debug)]
pub struct SqliteLedger {
    db: Mutex<Connection>,
    path: PathBuf,
    max_bytes: u64,
}

fn err(e: rusqlite::Error) -> String {
    format!("the listener's flushcheck ledger failed: {e}")
}

impl SqliteLedger {
    /// Opens (or creates) the ledger in `dir`, bounded to [`MAX_LEDGER_BYTES`];
    /// the error names the directory.
    pub fn open(dir: &Path) -> Result<SqliteLedger, ServerSettingError> {
        Self::open_bounded(dir, MAX_LEDGER_BYTES)
    }

    /// [`SqliteLedger::open`] with records bounded to `max_bytes`.
    pub fn open_bounded(dir: &Path, max_bytes: u64) -> Result<SqliteLedger, ServerSettingError> {
        if !dir.is_dir() {
            return Err(ServerSettingError(
                Message::of(FlushcheckDir)
                    .then(format!(" {}: not a directory (example: ", dir.display()))
                    .and(FlushcheckDir)
                    .then(" /var/lib/headroom)"),
            ));
        }
        let path = dir.join(FILE_NAME);
        let fail = |e: rusqlite::Error| {
            ServerSettingError(Message::of(FlushcheckDir).then(format!(" {}: {e}", dir.display())))
        };
        let db = Connection::open(&path).map_err(fail)?;
        // WAL + FULL: every commit is synced to the WAL before it returns.
        db.pragma_update(None, "journal_mode", "WAL").map_err(fail)?;
        db.pragma_update(None, "synchronous", "FULL").map_err(fail)?;
        db.pragma_update(None, "journal_size_limit", WAL_LIMIT_BYTES).map_err(fail)?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS runs (
                run TEXT PRIMARY KEY, block_size INTEGER NOT NULL, blocks INTEGER NOT NULL,
                sync TEXT NOT NULL, path TEXT NOT NULL, host TEXT NOT NULL,
                begun_at INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS acks (
                run TEXT NOT NULL, offset INTEGER NOT NULL, seq INTEGER NOT NULL, checksum INTEGER NOT NULL,
                PRIMARY KEY (run, offset));",
        )
        .map_err(fail)?;
        Ok(SqliteLedger { db: Mutex::new(db), path, max_bytes })
    }

    /// The SQLite file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the records reached `max_bytes` (pages in use, the log's included).
    fn full(&self, db: &Connection) -> Result<bool, String> {
        let pages: i64 = db.query_row("PRAGMA page_count", [], |r| r.get(0)).map_err(err)?;
        let free: i64 = db.query_row("PRAGMA freelist_count", [], |r| r.get(0)).map_err(err)?;
        let page: i64 = db.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(err)?;
        Ok(((pages - free) * page) as u64 >= self.max_bytes)
    }

    fn full_error(&self) -> String {
        format!(
            "this listener's flushcheck ledger is full ({} MiB of records, its limit): its operator removes {} to start afresh",
            self.max_bytes >> 20,
            self.path.display()
        )
    }
}

impl FlushLedger for SqliteLedger {
    fn begin(&self, run: &FlushRun) -> Result<(), String> {
        if let Some(known) = self.run(&run.run)? {
            return if &known == run {
                Ok(())
            } else {
                Err(format!("flushcheck run {} is recorded here with other parameters", run.run))
            };
        }
        let db = self.db();
        if self.full(&db)? {
            return Err(self.full_error());
        }
        let count: i64 = db.query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0)).map_err(err)?;
        if count >= MAX_RUNS {
            return Err(format!(
                "this listener keeps {MAX_RUNS} flushcheck runs already: its operator removes {} to start afresh",
                self.path.display()
            ));
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        db.execute(
            "INSERT INTO runs (run, block_size, blocks, sync, path, host, begun_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![run.run, run.block_size, run.blocks as i64, run.sync, run.path, run.host, now as i64],
        )
        .map_err(err)?;
        Ok(())
    }

    fn run(&self, run: &str) -> Result<Option<FlushRun>, String> {
        self.db()
            .query_row("SELECT block_size, blocks, sync, path, host FROM runs WHERE run = ?1", [run], |r| {
                Ok(FlushRun {
                    run: run.to_string(),
                    block_size: r.get(0)?,
                    blocks: r.get::<_, i64>(1)? as u64,
                    sync: r.get(2)?,
                    path: r.get(3)?,
                    host: r.get(4)?,
                })
            })
            .optional()
            .map_err(err)
    }

    fn record(&self, run: &str, ack: &FlushAck) -> Result<(), String> {
        // Sequence numbers are below 2^63 for centuries of writes; SQLite stores i64.
        let seq = i64::try_from(ack.seq).map_err(|_| "flushcheck sequence number out of range".to_string())?;
        let db = self.db();
        if self.full(&db)? {
            let recorded = db
                .query_row("SELECT 1 FROM acks WHERE run = ?1 AND offset = ?2", params![run, ack.offset as i64], |_| {
                    Ok(())
                })
                .optional()
                .map_err(err)?;
            if recorded.is_none() {
                return Err(self.full_error());
            }
        }
        db.execute(
            "INSERT INTO acks (run, offset, seq, checksum) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (run, offset) DO UPDATE SET seq = excluded.seq, checksum = excluded.checksum
                 WHERE excluded.seq > acks.seq",
            params![run, ack.offset as i64, seq, ack.checksum as i64],
        )
        .map_err(err)?;
        Ok(())
    }

    fn page(&self, run: &str, after: u64, max: usize) -> Result<Vec<FlushAck>, String> {
        let db = self.db();
        let mut q = db
            .prepare("SELECT offset, seq, checksum FROM acks WHERE run = ?1 AND offset > ?2 ORDER BY offset LIMIT ?3")
            .map_err(err)?;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = q
            .query_map(params![run, after, max as i64], |r| {
                Ok(FlushAck {
                    offset: r.get::<_, i64>(0)? as u64,
                    seq: r.get::<_, i64>(1)? as u64,
                    checksum: r.get::<_, i64>(2)? as u64,
                })
            })
            .map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_survives_reopening_and_keeps_the_latest_block_per_offset() {
        let dir = tempfile::tempdir().unwrap();
        let run = FlushRun {
            run: "00112233445566778899aabbccddeeff".into(),
            block_size: 4096,
            blocks: 4,
            sync: "fsync".into(),
            path: "/f".into(),
            host: "h".into(),
        };
        {
            let l = SqliteLedger::open(dir.path()).unwrap();
            l.begin(&run).unwrap();
            l.begin(&run).unwrap();
            assert!(l.begin(&FlushRun { blocks: 5, ..run.clone() }).unwrap_err().contains("other parameters"));
            for (seq, offset) in [(1, 4096), (2, 8192), (5, 4096), (3, 4096)] {
                l.record(&run.run, &FlushAck { seq, offset, checksum: u64::MAX - seq }).unwrap();
            }
        }
        let l = SqliteLedger::open(dir.path()).unwrap();
        assert_eq!(l.run(&run.run).unwrap(), Some(run.clone()));
        let acks = l.page(&run.run, 0, 10).unwrap();
        assert_eq!(
            acks,
            vec![
                FlushAck { seq: 5, offset: 4096, checksum: u64::MAX - 5 },
                FlushAck { seq: 2, offset: 8192, checksum: u64::MAX - 2 }
            ]
        );
        assert_eq!(l.page(&run.run, 4096, 10).unwrap().len(), 1);
        let refused = SqliteLedger::open(&dir.path().join("nope")).unwrap_err();
        assert_eq!(refused.0.settings().next(), Some(FlushcheckDir), "{refused}");
    }

    #[test]
    fn one_writer_cannot_grow_the_ledger_past_its_bound() {
        // In memory where there is a tmpfs: every record is synced.
        let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
        let limit = 128 << 10;
        let l = SqliteLedger::open_bounded(dir.path(), limit).unwrap();
        let run = FlushRun {
            run: "00112233445566778899aabbccddeeff".into(),
            block_size: 4096,
            blocks: 1 << 22,
            sync: "none".into(),
            path: "/f".into(),
            host: "h".into(),
        };
        l.begin(&run).unwrap();
        // Every block at a new offset, as a hostile writer sends them.
        let refused = (1..=1u64 << 22)
            .map(|i| (i, l.record(&run.run, &FlushAck { seq: i, offset: i * 4096, checksum: i })))
            .find_map(|(i, r)| r.err().map(|e| (i, e)));
        let (at, e) = refused.expect("the ledger refused new blocks at its bound");
        assert!(e.contains("full") && e.contains("flushcheck.sqlite"), "{e}");
        let size = std::fs::metadata(l.path()).unwrap().len();
        assert!(size <= 2 * limit, "{size} bytes on disk for a bound of {limit}");
        // A block already recorded is still updated; another run is refused.
        l.record(&run.run, &FlushAck { seq: at + 1, offset: 4096, checksum: 9 }).unwrap();
        assert_eq!(l.page(&run.run, 0, 1).unwrap()[0].seq, at + 1);
        let other = FlushRun { run: "ffeeddccbbaa99887766554433221100".into(), ..run };
        assert!(l.begin(&other).unwrap_err().contains("full"));
    }
}
