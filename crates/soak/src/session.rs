//! One soak session from start to end (`Session`): open the database, plan
//! and prepare the turns, run the cycle loop with the link watcher beside it,
//! end the session and read the result back, so `headroom soak` only builds
//! settings, calls these steps and prints between them.
//!
//! What it must not touch: printing, progress drawing or flag parsing (the
//! caller passes a sink and a callback); the pieces themselves live in
//! setup.rs, turns.rs, leftovers.rs, run.rs and watch.rs.

use crate::leftovers::{mark_removed, prepare, remove_left_test_files, LeftFile, Prepared, TestFile};
use crate::run::{run_cycles, LoopSettings, SoakEvent, StopReason, Turn};
use crate::setup::{discard_new, open, Schedule, SetupError, SoakFlags};
use crate::store::{SoakConfig, Store, StoreError};
use crate::turns::{path_interfaces, runner, server_inventory, turns, Spelling};
use crate::{doc, now_unix, Metrics, Watcher};
use headroom_result::ResultDoc;
use headroom_runner::{Plan, Runner, Sink};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A soak session: opened, then prepared, then run, then read back.
pub struct Session {
    store: Store,
    id: i64,
    config: SoakConfig,
    remaining: Option<Duration>,
    gap_s: Option<f64>,
    // A database this session created is removed again when nothing was measured.
    created: bool,
    /// How an error or warning of the turns names a setting.
    spelling: Spelling,
}

/// A prepared session: the turns, their Runner and the laid-out test file.
pub struct Ready {
    session: Session,
    turns: Vec<Turn>,
    runner: Runner<'static>,
    test_file: Option<TestFile>,
}

impl Session {
    /// Opens `db`: a new soak with `schedule`, or (None) the one to resume,
    /// checked against `flags`.
    pub fn open(db: &Path, flags: &SoakFlags, schedule: Option<&Schedule>) -> Result<Session, SetupError> {
        let created = schedule.is_some() && !db.exists();
        let opened = open(db, flags, schedule)?;
        Ok(Session {
            store: opened.store,
            id: opened.session,
            config: opened.info.config,
            remaining: opened.remaining,
            gap_s: opened.gap_s,
            created,
            spelling: Spelling::default(),
        })
    }

    /// Names a setting in an error or warning of the turns as the front
    /// end spells it (the binary's flags); without it, by its own name.
    pub fn spelling_settings(
        mut self,
        disk: fn(headroom_disk::Setting) -> &'static str,
        net: headroom_net::NetSpelling,
    ) -> Self {
        self.spelling = Spelling { disk: Some(disk), net };
        self
    }

    /// The gap since the resumed soak's last sample, seconds; None for a new soak.
    pub fn gap_s(&self) -> Option<f64> {
        self.gap_s
    }

    /// The soak's settings as stored.
    pub fn config(&self) -> &SoakConfig {
        &self.config
    }

    /// The database.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Removes the test files killed sessions of this soak left behind.
    pub fn remove_left_test_files(&self) -> Result<Vec<LeftFile>, StoreError> {
        remove_left_test_files(&self.store)
    }

    /// Builds the turns and their Runner, then lays out the test file with
    /// `progress` (made from the cycle's plan, dropped before this returns).
    /// None when stopped while laying out. A failed layout removes a database
    /// this session created, so the corrected command may use the same path.
    pub fn prepare<S: Sink>(
        mut self,
        token: Option<String>,
        stop: &AtomicBool,
        progress: impl FnOnce(&Plan) -> S,
    ) -> Result<Option<Ready>, SetupError> {
        self.record_server_inventory(token.clone())?;
        let turns = turns(&self.config, token.clone())?;
        let mut runner = runner(&self.config, token, &self.spelling)?;
        let plan = Turn::cycle_plan(&turns, self.config.probe_time());
        let mut sink = progress(&plan);
        let prepared = prepare(&mut runner, &plan, &self.store, self.id, stop, &mut sink);
        drop(sink);
        match prepared {
            Ok(Prepared::Ready(test_file)) => Ok(Some(Ready { session: self, turns, runner, test_file })),
            Ok(Prepared::Stopped) => Ok(None),
            Err(e) => {
                if self.created {
                    runner.finish();
                    discard_new(self.store);
                }
                Err(e)
            }
        }
    }

    /// The first session to reach the soak's server records its inventory,
    /// so that a report read later knows the disk under `--remote-path` (a
    /// virtual one is warned of) and the far end's bus. Kept once: it
    /// describes the machine the soak started on.
    fn record_server_inventory(&mut self, token: Option<String>) -> Result<(), StoreError> {
        if self.config.server_inventory().is_some() {
            return Ok(());
        }
        let Some(inventory) = server_inventory(&self.config, token) else { return Ok(()) };
        self.config.set_server_inventory(&inventory);
        self.store.set_config(&self.config)
    }
}

impl Ready {
    /// Runs cycles until the soak's time is up or `stop`, with the link
    /// watcher on the path to the server, then removes the test file and
    /// ends the session. `on_event` sees every turn as it ends.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        metrics: &Metrics,
        on_event: &mut dyn FnMut(SoakEvent),
    ) -> Result<Finished, StoreError> {
        let s = &mut self.session;
        let interfaces = path_interfaces(s.config.server.as_deref());
        let watcher = Watcher::start(s.store.reopen()?, interfaces, Some(metrics.clone()));
        let settings = LoopSettings {
            probe_time: s.config.probe_time(),
            remaining: s.remaining,
            min_turn: Duration::from_secs(1),
        };
        let result =
            run_cycles(&mut s.store, s.id, &mut self.runner, &self.turns, settings, stop, Some(metrics), on_event);
        drop(watcher);
        self.runner.finish(); // removes the test file
        mark_removed(&s.store, self.test_file.as_ref())?;
        let reason = result?;
        s.store.end_session(s.id, now_unix(), reason.as_str())?;
        Ok(Finished { store: self.session.store, reason })
    }
}

/// An ended session.
pub struct Finished {
    store: Store,
    reason: StopReason,
}

impl Finished {
    /// The database.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Why the session ended.
    pub fn reason(&self) -> &StopReason {
        &self.reason
    }

    /// The whole soak (every session) as a result document.
    pub fn finish(&self) -> Result<ResultDoc, StoreError> {
        doc::result_from_store(&self.store, doc::SampleDetail::None)
    }
}
