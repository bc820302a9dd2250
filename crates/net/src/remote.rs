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
//!
//! Long (about 510 lines): the engine and the streaming of samples share one
//! exchange over the control connection and are kept side by side.

use crate::address::Endpoint;
use crate::client::Session;
use crate::error::NetError;
use crate::probe_engine::probe_error;
use crate::process_cpu::CpuMeter;
use crate::setting::{NetSetting, NetSpelling};
use crate::socket::POLL;
use crate::wire::{self, Reply, Request};
use headroom_result::details::cpu_load_key;
use headroom_result::{CpuLoad, Host, Side, Warning};
use headroom_runner::{
    unix_now, EngineKind, LiveSample, Measured, PrepareEvent, ProbeEngine, ProbeError, ProbeRequest,
};
use headroom_sys::ServingQuery;
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
    /// This machine's CPU since the running probe started.
    meter: Option<CpuMeter>,
    /// When the current phase (a preparation, a run) must be over, and how
    /// long it was given, if its caller set one ([`RemoteEngine::set_deadline`]).
    deadline: Option<(Instant, Duration)>,
    /// How an error of this side names a setting (a missing token).
    spelling: NetSpelling,
}

impl RemoteEngine {
    /// An engine for `kind` requests placed at `server` (its
    /// [`Endpoint::display`] is the requests' `at`).
    pub fn new(kind: EngineKind, server: Endpoint) -> Self {
        RemoteEngine {
            kind,
            place: server.display(),
            server,
            session: None,
            plan: Vec::new(),
            meter: None,
            deadline: None,
            spelling: NetSetting::name,
        }
    }

    /// Names a setting in an error of this side as `spell` does (the
    /// binary's flags); by default its own name.
    pub fn spelling_settings(mut self, spell: NetSpelling) -> Self {
        self.spelling = spell;
        self
    }

    fn session(&mut self) -> Result<&mut Session, ProbeError> {
        if self.session.is_none() {
            self.session = Some(open_for_probes(&self.server).map_err(|e| probe_error(e, self.spelling))?);
        }
        Ok(self.session.as_mut().expect("opened above"))
    }

    /// Gives the phases that follow (preparing, running) `limit` from now:
    /// past it, the wait for the server ends with [`ProbeError::Lost`] (a
    /// fleet gives each agent's phase a deadline, so a server that keeps
    /// sending without ever finishing cannot hold it). None: no deadline.
    pub fn set_deadline(&mut self, limit: Option<Duration>) {
        self.deadline = limit.map(|l| (Instant::now() + l, l));
    }

    /// Reads the server's next reply, giving up when `stop` is set and
    /// `on_stop` has had its chance (it sends `End` once).
    /// A server that sends no whole message for [`SERVER_SILENCE`] (frozen,
    /// behind a link that vanished without a reset, or trickling bytes that
    /// never make a message) is lost; after `End` it has the endpoint's
    /// timeout to answer.
    fn next_reply(&mut self, stop: &AtomicBool, ended: &mut Option<Instant>) -> Result<Reply, ProbeError> {
        let server = self.place.clone();
        let silence = self.server.timeout.max(SERVER_SILENCE);
        let deadline = self.deadline;
        let session = self.session()?;
        let since = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) && ended.is_none() {
                *ended = Some(Instant::now());
                wire::write_frame(&mut session.control, &Request::End).map_err(|e| lost(&server, e))?;
            }
            if ended.is_some_and(|at| at.elapsed() > session.answer_within) {
                return Err(ProbeError::Stopped);
            }
            if let Some(reply) = session.poll(wire::MAX_RESULT_FRAME, POLL).map_err(|e| lost(&server, e))? {
                return Ok(reply);
            }
            if since.elapsed() > silence {
                return Err(ProbeError::Lost(format!(
                    "lost {server}: it sent no whole message for {:.0} s during a remote probe",
                    silence.as_secs_f64()
                )));
            }
            if let Some(past) = past_deadline(&server, deadline) {
                return Err(past);
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
        let mut ended = None;
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
        self.start(request).map_err(RunFailure::BeforeStart)?;
        let mut ended = None;
        let mut answered = false;
        loop {
            let reply = self.next_reply(stop, &mut ended).map_err(|e| match answered {
                false => RunFailure::BeforeStart(e),
                true => RunFailure::Started(e),
            })?;
            answered = true;
            match self.run_step(reply).map_err(RunFailure::Started)? {
                RunStep::Sample(sample) => on_sample(&sample),
                RunStep::Done(measured) => return Ok(*measured),
            }
        }
    }

    /// Sends `request` (of the prepared plan) to run, without waiting for
    /// it: a fleet starts every agent's probe, then reads them all
    /// ([`RemoteEngine::poll_run`]).
    pub fn start(&mut self, request: &ProbeRequest) -> Result<(), ProbeError> {
        self.send(&Request::Run { request: request.clone() })?;
        self.meter = Some(CpuMeter::start());
        Ok(())
    }

    /// The next step of the run [`RemoteEngine::start`]ed, if the server sent
    /// one within `wait`.
    /// Never waits longer than `wait`, however the server spaces its bytes
    /// (a message arrives over as many calls as it takes); past the
    /// deadline ([`RemoteEngine::set_deadline`]) the run is lost.
    pub fn poll_run(&mut self, wait: Duration) -> Result<Option<RunStep>, ProbeError> {
        let server = self.place.clone();
        if let Some(past) = past_deadline(&server, self.deadline) {
            return Err(past);
        }
        let session = self.session()?;
        match session.poll(wire::MAX_RESULT_FRAME, wait).map_err(|e| lost(&server, e))? {
            Some(reply) => self.run_step(reply).map(Some),
            None => Ok(None),
        }
    }

    /// Asks the server to stop the running probe now; it answers with what it measured.
    pub fn end(&mut self) -> Result<(), ProbeError> {
        self.send(&Request::End)
    }

    fn run_step(&mut self, reply: Reply) -> Result<RunStep, ProbeError> {
        match reply {
            Reply::Sample(sample) => Ok(RunStep::Sample(sample)),
            Reply::Measured(measured) => {
                let here = self.meter.take().unwrap_or_else(CpuMeter::start);
                Ok(RunStep::Done(Box::new(with_both_ends(*measured, &here))))
            }
            Reply::Failed { error } => Err(error),
            Reply::Refused { reason } => Err(refused(&self.place, reason)),
            other => Err(unexpected(&self.place, &other)),
        }
    }

    /// The inventory of the machine the server runs on, over this engine's
    /// own session (a fleet asks each agent once, beside its probes).
    pub fn inventory(&mut self) -> Result<Host, ProbeError> {
        let (place, spell) = (self.place.clone(), self.spelling);
        let session = self.session()?;
        match exchange(session, &Request::Inventory).map_err(|e| probe_error(e, spell))? {
            Reply::Inventory(host) => Ok(*host),
            other => Err(unexpected(&place, &other)),
        }
    }

    /// Compares the server's clock with this machine's over the control
    /// connection, NTP-style: of `rounds` exchanges, the one with the
    /// smallest round trip gives the offset (its error is at most half that
    /// round trip). Also opens the session, so a refusal (token, version)
    /// shows here. Every round is over within the endpoint's timeout, and
    /// `stop` (Ctrl-C) ends the wait at once. A clock more than
    /// [`MAX_CLOCK_OFFSET_S`] away from ours is not a clock.
    pub fn clock(&mut self, rounds: u32, stop: &AtomicBool) -> Result<ClockReading, ProbeError> {
        let server = self.place.clone();
        let session = self.session()?;
        let server_version = session.server_version.clone();
        let deadline = Instant::now() + session.answer_within;
        let mut best: Option<(f64, f64)> = None;
        for _ in 0..rounds.max(1) {
            let sent = unix_now();
            wire::write_frame(&mut session.control, &Request::Clock).map_err(|e| lost(&server, e))?;
            let reply: Reply = session.read_by(wire::MAX_FRAME, deadline, Some(stop)).map_err(|e| lost(&server, e))?;
            let back = unix_now();
            let Reply::Clock { unix } = reply else { return Err(unexpected(&server, &reply)) };
            if !unix.is_finite() || (unix - back).abs() > MAX_CLOCK_OFFSET_S {
                return Err(ProbeError::Failed(format!(
                    "protocol error: {server} answered the clock request with {unix:e} s, not a time within {MAX_CLOCK_OFFSET_S:e} s of this machine's {back:.0}"
                )));
            }
            let rtt = back - sent;
            if best.is_none_or(|(_, best_rtt)| rtt < best_rtt) {
                best = Some((unix - (sent + back) / 2.0, rtt));
            }
        }
        let (offset_s, rtt_s) = best.expect("at least one round");
        Ok(ClockReading { offset_s, rtt_s, server_version })
    }
}

/// One step of a run started with [`RemoteEngine::start`].
#[derive(Debug)]
pub enum RunStep {
    /// A live sample, on the server's clock.
    Sample(LiveSample),
    /// The probe, measured (its id carries `@HOSTNAME` of the server).
    Done(Box<Measured>),
}

/// A server's clock against this machine's ([`RemoteEngine::clock`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ClockReading {
    /// The server's clock minus this machine's, seconds.
    pub offset_s: f64,
    /// Round trip of the exchange the offset came from, seconds.
    pub rtt_s: f64,
    /// The server's headroom version.
    pub server_version: String,
}

/// How long a server may send no whole message while it prepares or runs a
/// probe (its layout reports every 64 MiB, its probes every sample interval).
const SERVER_SILENCE: Duration = Duration::from_secs(60);

/// The farthest a server's clock may be from this machine's: 10^9 s (31
/// years, as far as a result document's times go). Beyond it an answer is no
/// clock reading, and moving samples by it would put them nowhere.
pub const MAX_CLOCK_OFFSET_S: f64 = 1e9;

/// The error of a phase past its deadline ([`RemoteEngine::set_deadline`]), if it is.
fn past_deadline(server: &str, deadline: Option<(Instant, Duration)>) -> Option<ProbeError> {
    let (_, limit) = deadline.filter(|(at, _)| Instant::now() > *at)?;
    Some(ProbeError::Lost(format!("lost {server}: it did not finish within {:.0} s", limit.as_secs_f64())))
}

fn lost(server: &str, e: std::io::Error) -> ProbeError {
    let why = match e.kind() {
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
            "the connection was closed (was headroom serve stopped or killed there?)".to_string()
        }
        std::io::ErrorKind::Interrupted => return ProbeError::Stopped,
        _ => e.to_string(),
    };
    ProbeError::Lost(format!("lost {server} during a remote probe: {why}"))
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

/// The server's inventory for a document's `peers`: [`remote_inventory`]
/// with `reached_as`, the name the user gave the server.
pub fn peer_inventory(server: &Endpoint) -> Result<Host, NetError> {
    let mut inventory = remote_inventory(server)?;
    inventory.reached_as = Some(server.host.clone());
    Ok(inventory)
}

/// The far end's CPU watched while something here loads it (a disk probe on
/// its share): [`FarCpuWatch::start`] before, [`FarCpuWatch::end`] after.
pub struct FarCpuWatch {
    session: Session,
}

impl FarCpuWatch {
    /// Starts watching the CPU of the machine `server` runs on, and of the
    /// processes there that `serving` finds serving the share.
    pub fn start(server: &Endpoint, serving: Option<ServingQuery>) -> Result<FarCpuWatch, NetError> {
        let mut session = open_for_probes(server)?;
        match exchange(&mut session, &Request::CpuWatch { serving })? {
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

/// One request and its reply, the reply allowed to be as large as a result
/// and whole within the session's answer time.
fn exchange(session: &mut Session, request: &Request) -> Result<Reply, NetError> {
    wire::write_frame(&mut session.control, request)?;
    let deadline = Instant::now() + session.answer_within;
    let reply = session
        .read_by(wire::MAX_RESULT_FRAME, deadline, None)
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
            // A server that died there (killed, rebooting) does not answer
            // the new session either: the error says both.
            Err(RunFailure::BeforeStart(ProbeError::Lost(why))) if !self.plan.is_empty() => {
                self.session = None;
                self.send_plan(stop, &mut |_| {}).map_err(|again| match again {
                    ProbeError::Unreachable(e) => ProbeError::Lost(format!("{why}; connecting again: {e}")),
                    other => other,
                })?;
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
                let deadline = Instant::now() + session.answer_within;
                let _: Result<Reply, _> = session.read_by(wire::MAX_FRAME, deadline, None);
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

/// Whether `path` names a directory from the root of the far end's
/// filesystems, whichever system it runs: `/tank/bench` (Linux) or
/// `C:\bench`, `\\?\C:\bench`, `\\nas\share` (Windows). The client cannot
/// know the far end's system, and the far end resolves the path itself
/// (its `--allow-path` decides), so either form is sent.
pub fn is_absolute_on_far_end(path: &std::path::Path) -> bool {
    let text = path.to_string_lossy();
    let b = text.as_bytes();
    let drive = b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/');
    path.is_absolute() || text.starts_with('/') || drive || text.starts_with(r"\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_systems_absolute_path_names_a_far_end_directory() {
        use std::path::Path;
        for p in ["/tank/bench", r"C:\bench", "c:/bench", r"\\?\C:\bench", r"\\nas\share\bench"] {
            assert!(is_absolute_on_far_end(Path::new(p)), "{p}");
        }
        for p in ["bench", r"C:bench", r"bench\sub", "./bench", ""] {
            assert!(!is_absolute_on_far_end(Path::new(p)), "{p}");
        }
    }
}
