//! The near end of remote probes: a Runner engine whose probes run on a
//! `headroom serve` (`disk --remote`, `cpu --remote`, `run --remote-path`).
//! It sends the plan's requests as data over an authenticated control
//! connection, hands the samples and preparation events the server streams
//! back to the Runner's sinks, and returns the server's probe with the CPU
//! figures put on the right side: the server's own CPU is the document's
//! `cpu_load_remote`, this machine's (measured here meanwhile) its
//! `cpu_load_local`.
//!
//! What it must not do: know the parameters of the requests it forwards.

use crate::address::Endpoint;
use crate::client::Session;
use crate::error::NetError;
use crate::probe_engine::probe_error;
use crate::process_cpu::CpuMeter;
use crate::socket::{wait_readable, POLL};
use crate::wire::{self, Reply, Request};
use headroom_result::details::cpu_load_key;
use headroom_result::{CpuLoad, Host, Side, Warning};
use headroom_runner::{EngineKind, LiveSample, Measured, PrepareEvent, ProbeEngine, ProbeError, ProbeRequest};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A Runner engine of `kind` whose probes the server at `server` runs.
pub struct RemoteEngine {
    kind: EngineKind,
    place: String,
    server: Endpoint,
    session: Option<Session>,
    /// The prepared plan, sent again on a new session when the server
    /// dropped the old one between runs (a soak's turns elsewhere).
    plan: Vec<ProbeRequest>,
}

impl RemoteEngine {
    /// An engine for `kind` requests placed at `server` (its
    /// [`Endpoint::display`] is the requests' `at`).
    pub fn new(kind: EngineKind, server: Endpoint) -> Self {
        RemoteEngine { kind, place: server.display(), server, session: None, plan: Vec::new() }
    }

    fn session(&mut self) -> Result<&mut Session, ProbeError> {
        if self.session.is_none() {
            self.session = Some(open_for_probes(&self.server).map_err(probe_error)?);
        }
        Ok(self.session.as_mut().expect("opened above"))
    }

    /// Reads the server's next reply, giving up when `stop` is set and
    /// `on_stop` has had its chance (it sends `End` once).
    /// A server silent for [`SERVER_SILENCE`] (frozen, or behind a link that
    /// vanished without a reset) is lost.
    fn next_reply(&mut self, stop: &AtomicBool, ended: &mut bool) -> Result<Reply, ProbeError> {
        let server = self.place.clone();
        let silence = self.server.timeout.max(SERVER_SILENCE);
        let session = self.session()?;
        let since = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) && !*ended {
                *ended = true;
                wire::write_frame(&mut session.control, &Request::End).map_err(|e| lost(&server, e))?;
            }
            if wait_readable(&session.control, POLL) {
                return wire::read_frame(&mut session.control, wire::MAX_RESULT_FRAME).map_err(|e| lost(&server, e));
            }
            if since.elapsed() > silence {
                return Err(ProbeError::Lost(format!(
                    "lost {server}: it sent nothing for {:.0} s during a remote probe",
                    silence.as_secs_f64()
                )));
            }
        }
    }

    fn send(&mut self, request: &Request) -> Result<(), ProbeError> {
        let server = self.place.clone();
        let session = self.session()?;
        wire::write_frame(&mut session.control, request).map_err(|e| lost(&server, e))
    }

    fn send_plan(
        &mut self,
        stop: &AtomicBool,
        events: &mut dyn FnMut(&PrepareEvent),
    ) -> Result<Vec<Warning>, ProbeError> {
        self.send(&Request::Plan { requests: self.plan.clone() })?;
        let mut ended = false;
        loop {
            match self.next_reply(stop, &mut ended)? {
                Reply::Event { event } => events(&event),
                Reply::Prepared { warnings } => return Ok(warnings),
                Reply::Failed { error } => return Err(error),
                Reply::Refused { reason } => return Err(refused(&self.place, reason)),
                other => return Err(unexpected(&self.place, &other)),
            }
        }
    }

    fn run_once(
        &mut self,
        request: &ProbeRequest,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&LiveSample),
    ) -> Result<Measured, RunFailure> {
        self.send(&Request::Run { request: request.clone() }).map_err(RunFailure::BeforeStart)?;
        let here = CpuMeter::start();
        let mut ended = false;
        let mut answered = false;
        loop {
            let reply = self.next_reply(stop, &mut ended).map_err(|e| match answered {
                false => RunFailure::BeforeStart(e),
                true => RunFailure::Started(e),
            })?;
            answered = true;
            match reply {
                Reply::Sample(sample) => on_sample(&sample),
                Reply::Measured(measured) => return Ok(with_both_ends(*measured, &here)),
                Reply::Failed { error } => return Err(RunFailure::Started(error)),
                Reply::Refused { reason } => return Err(RunFailure::Started(refused(&self.place, reason))),
                other => return Err(RunFailure::Started(unexpected(&self.place, &other))),
            }
        }
    }
}

/// How long a server may send nothing while it prepares or runs a probe
/// (its layout reports every 64 MiB, its probes every sample interval).
const SERVER_SILENCE: Duration = Duration::from_secs(60);

fn lost(server: &str, e: std::io::Error) -> ProbeError {
    ProbeError::Lost(format!("lost {server} during a remote probe: {e}"))
}

/// Opens a session with a server that runs probes, or says what to change.
fn open_for_probes(server: &Endpoint) -> Result<Session, NetError> {
    let session = Session::open(server).map_err(|e| match e {
        NetError::IsIperf3 => NetError::Refused(format!(
            "{} is a stock iperf3 server; remote probes need `headroom serve` there",
            server.display()
        )),
        other => other,
    })?;
    if !session.runs_probes {
        return Err(NetError::Refused(format!(
            "{} runs headroom {}, which runs no probes for clients: install this version ({}) there",
            server.display(),
            session.server_version,
            env!("CARGO_PKG_VERSION")
        )));
    }
    Ok(session)
}

/// The inventory of the machine `server` runs on (`headroom sys --remote`).
pub fn remote_inventory(server: &Endpoint) -> Result<Host, NetError> {
    let mut session = open_for_probes(server)?;
    let reply = exchange(&mut session, &Request::Inventory);
    session.close();
    match reply? {
        Reply::Inventory(host) => Ok(*host),
        other => Err(NetError::Protocol(format!("unexpected {other:?}"))),
    }
}

/// The far end's CPU watched while something here loads it (a disk probe on
/// its share): [`FarCpuWatch::start`] before, [`FarCpuWatch::end`] after.
pub struct FarCpuWatch {
    session: Session,
}

impl FarCpuWatch {
    /// Starts watching the CPU of the machine `server` runs on.
    pub fn start(server: &Endpoint) -> Result<FarCpuWatch, NetError> {
        let mut session = open_for_probes(server)?;
        match exchange(&mut session, &Request::CpuWatch)? {
            Reply::Watching => Ok(FarCpuWatch { session }),
            other => Err(NetError::Protocol(format!("unexpected {other:?}"))),
        }
    }

    /// The far end's CPU since [`FarCpuWatch::start`].
    pub fn end(mut self) -> Result<CpuLoad, NetError> {
        let reply = exchange(&mut self.session, &Request::CpuWatchEnd);
        self.session.close();
        match reply? {
            Reply::CpuLoad(load) => Ok(*load),
            other => Err(NetError::Protocol(format!("unexpected {other:?}"))),
        }
    }
}

/// One request and its reply, the reply allowed to be as large as a result.
fn exchange(session: &mut Session, request: &Request) -> Result<Reply, NetError> {
    wire::write_frame(&mut session.control, request)?;
    let reply = wire::read_frame(&mut session.control, wire::MAX_RESULT_FRAME)
        .map_err(|e| NetError::Broken(format!("{}: {e}", session.target.display())))?;
    match reply {
        Reply::Refused { reason } => Err(NetError::Refused(format!("{}: {reason}", session.target.display()))),
        other => Ok(other),
    }
}

/// A reply that cannot come at this point of the exchange.
fn unexpected(server: &str, reply: &Reply) -> ProbeError {
    ProbeError::Failed(format!("protocol error: {server} sent {reply:?} out of turn"))
}

fn refused(server: &str, reason: String) -> ProbeError {
    ProbeError::Refused(format!("{server}: {reason}"))
}

impl ProbeEngine for RemoteEngine {
    fn kind(&self) -> EngineKind {
        self.kind
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
        self.send_plan(stop, events)
    }

    fn run(
        &mut self,
        request: &ProbeRequest,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&LiveSample),
    ) -> Result<Measured, ProbeError> {
        // The last session was lost: a new one needs the plan (its test file) first.
        if self.session.is_none() && !self.plan.is_empty() {
            self.send_plan(stop, &mut |_| {}).inspect_err(|_| self.session = None)?;
        }
        let result = match self.run_once(request, stop, on_sample) {
            // Lost before it started: the server dropped an idle session (and
            // its test file). A new session, the plan again, then the run.
            Err(RunFailure::BeforeStart(ProbeError::Lost(_))) if !self.plan.is_empty() => {
                self.session = None;
                self.send_plan(stop, &mut |_| {})?;
                self.run_once(request, stop, on_sample).map_err(RunFailure::into_error)
            }
            other => other.map_err(RunFailure::into_error),
        };
        if let Err(ProbeError::Lost(_) | ProbeError::Unreachable(_)) = &result {
            self.session = None; // the next run opens a new one
        }
        result
    }

    fn finish(&mut self) {
        self.plan.clear();
        if let Some(mut session) = self.session.take() {
            if wire::write_frame(&mut session.control, &Request::Finish).is_ok() {
                let _: Result<Reply, _> = wire::read_frame(&mut session.control, wire::MAX_FRAME);
            }
            session.close();
        }
    }
}

/// Why a run ended without a probe: before the server answered anything, or after.
enum RunFailure {
    BeforeStart(ProbeError),
    Started(ProbeError),
}

impl RunFailure {
    fn into_error(self) -> ProbeError {
        match self {
            RunFailure::BeforeStart(e) | RunFailure::Started(e) => e,
        }
    }
}

impl Drop for RemoteEngine {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The server measured its own CPU as "local"; in this document that end is
/// the remote one, and this machine's CPU over the probe is the local one.
/// Its id gets `@HOST`, so it stays unique beside the same test run here.
fn with_both_ends(mut measured: Measured, here: &CpuMeter) -> Measured {
    if let Some(host) = &measured.probe.host {
        measured.probe.id = format!("{}@{host}", measured.probe.id);
    }
    let details = &mut measured.probe.details;
    if let Some(theirs) = details.remove(cpu_load_key(Side::Local)) {
        details.insert(cpu_load_key(Side::Remote).into(), theirs);
    }
    if let Some(ours) = here.load() {
        let ours = serde_json::to_value(ours).expect("a CPU load is plain data");
        details.insert(cpu_load_key(Side::Local).into(), ours);
    }
    measured
}
