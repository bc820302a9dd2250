//! The engine of the server's own disk turns (`remote-write`, `remote-read`,
//! `remote-iops`): a `headroom_net::RemoteEngine` that a soak may lose and
//! get back. It owns the soak's policy for the far end: a server that cannot
//! be reached, at the start or later, is an outage the turns record, never
//! a reason to stop the soak; once the server answers again, the next turn
//! opens a new session and the server lays out its test file again.
//!
//! Why a wrapper rather than the RemoteEngine alone: the Runner remembers an
//! engine's failed preparation for good, so a server down at the start would
//! fail every later turn; this engine's preparation never fails for an
//! outage, and a fresh RemoteEngine per outage prepares the plan again.

use headroom_net::{Endpoint, NetSpelling, RemoteEngine};
use headroom_result::Warning;
use headroom_runner::{EngineKind, LiveSample, Measured, PrepareEvent, ProbeEngine, ProbeError, ProbeRequest};
use std::sync::atomic::AtomicBool;

/// Runs the soak's requests placed at `server` there, reconnecting after an outage.
pub(crate) struct FarEnd {
    server: Endpoint,
    place: String,
    /// The requests the Runner prepared this engine with (sent again after an outage).
    plan: Vec<ProbeRequest>,
    /// The engine of the current session; None while the server is away.
    engine: Option<RemoteEngine>,
    /// How an error of this side names a network setting (a missing token).
    spelling: NetSpelling,
}

impl FarEnd {
    /// Disk requests placed at `server` (its [`Endpoint::display`]).
    pub(crate) fn new(server: Endpoint, spelling: NetSpelling) -> Self {
        FarEnd { place: server.display(), server, plan: Vec::new(), engine: None, spelling }
    }

    /// A new session with the plan prepared on it (the server lays out its test file).
    fn connect(
        &mut self,
        stop: &AtomicBool,
        events: &mut dyn FnMut(&PrepareEvent),
    ) -> Result<Vec<Warning>, ProbeError> {
        let mut engine = RemoteEngine::new(EngineKind::Disk, self.server.clone()).spelling_settings(self.spelling);
        let plan: Vec<&ProbeRequest> = self.plan.iter().collect();
        let warnings = engine.prepare(&plan, stop, &mut |event| {
            // The server's test file is the server's to remove (with the
            // session, or when it starts again after a kill); recorded here
            // it would pass for one of this machine's.
            if !matches!(event, PrepareEvent::TestFileCreated { .. }) {
                events(event);
            }
        })?;
        self.engine = Some(engine);
        Ok(warnings)
    }
}

/// The server is away (or went away): an outage, not an error.
fn is_outage(e: &ProbeError) -> bool {
    matches!(e, ProbeError::Unreachable(_) | ProbeError::Lost(_))
}

impl ProbeEngine for FarEnd {
    fn kind(&self) -> EngineKind {
        EngineKind::Disk
    }

    fn place(&self) -> Option<&str> {
        Some(&self.place)
    }

    fn prepare(
        &mut self,
        requests: &[&ProbeRequest],
        stop: &AtomicBool,
        events: &mut dyn FnMut(&PrepareEvent),
    ) -> Result<Vec<Warning>, ProbeError> {
        self.plan = requests.iter().map(|r| (*r).clone()).collect();
        match self.connect(stop, events) {
            // The first remote turn finds the server away again and records the outage.
            Err(e) if is_outage(&e) => Ok(Vec::new()),
            other => other,
        }
    }

    fn run(
        &mut self,
        request: &ProbeRequest,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&LiveSample),
    ) -> Result<Measured, ProbeError> {
        if self.engine.is_none() {
            self.connect(stop, &mut |_| {})?;
        }
        let engine = self.engine.as_mut().expect("connected above");
        let result = engine.run(request, stop, on_sample);
        if result.as_ref().is_err_and(is_outage) {
            // Dropping it ends what is left of the session; the next turn starts afresh.
            self.engine = None;
        }
        result
    }

    fn finish(&mut self) {
        if let Some(mut engine) = self.engine.take() {
            engine.finish();
        }
    }
}
