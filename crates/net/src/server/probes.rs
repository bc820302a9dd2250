//! The far end's probes: a client's plan of disk and CPU requests run on
//! this machine by the engines the operator's [`ProbeHost`] supplies, with
//! samples streamed back as they are measured, and this machine's
//! inventory.
//!
//! Safety: every request passes [`ProbeHost::admit`] (engine allowed, path
//! under an `--allow-path`, duration within `--max-duration`) before
//! anything runs; one client's plan runs at a time on the whole server (from
//! its preparation to its end), so two clients never measure each other or
//! share a test file; a probe is stopped when its client sends
//! `End`, goes silent past the deadline or disappears, and the session's
//! engines (and their test files) are dropped when the connection ends.
//!
//! What it must not do: know any engine's parameters (the host does).

use super::registry::{SessionInfo, Shared};
use crate::socket::wait_readable;
use crate::wire::{self, Reply, Request};
use headroom_result::Host;
use headroom_runner::{LiveSample, Plan, PrepareEvent, ProbeError, ProbeRequest, ProbeRun, Runner, Sink};
use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most requests in one remote plan (a full disk sweep is about 30).
pub const MAX_PLAN: usize = 256;
/// How long past `--max-duration` a remote probe may run (its warm-up and
/// the engine's own wrap-up) before the server stops it.
const OVERRUN: Duration = Duration::from_secs(30);

/// What `headroom serve` runs for its clients besides network tests. The
/// binary supplies it: the engines live in crates the server must not import.
pub trait ProbeHost: Send + Sync {
    /// Fresh engines for one client session's plan.
    fn runner(&self) -> Runner<'static>;
    /// Checks a request against this server's rules before it runs: the
    /// engine, the path (under an allowed directory), the duration (within
    /// `max_duration`). The error is what the client prints.
    fn admit(&self, request: &ProbeRequest, max_duration: Duration) -> Result<(), ProbeError>;
    /// This machine's inventory.
    fn inventory(&self) -> Host;
    /// This machine's hostname, recorded in every probe it runs.
    fn hostname(&self) -> String;
}

/// A session's remote plan and the engines prepared for it.
#[derive(Default)]
pub(super) struct RemotePlan {
    runner: Option<Runner<'static>>,
    plan: Plan,
    turn: Option<Turn>,
    /// The CPU counters when the client asked to watch them.
    cpu_watch: Option<(headroom_sys::CpuSnapshot, headroom_sys::ServingWatch)>,
}

/// The server's one remote-plan slot, held from a plan's preparation to its end.
struct Turn(Arc<AtomicBool>);

impl Turn {
    fn take(busy: &Arc<AtomicBool>) -> Option<Turn> {
        busy.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| Turn(busy.clone()))
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Drop for RemotePlan {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The connection went away (or broke the protocol) while a probe ran: the
/// session ends.
pub(super) struct Gone;

impl RemotePlan {
    /// Answers one probe request of the session; Err when the connection is gone.
    pub(super) fn answer(
        &mut self,
        conn: &mut TcpStream,
        req: Request,
        session: &SessionInfo,
        s: &Shared,
    ) -> Result<(), Gone> {
        let Some(host) = s.cfg.probes.clone() else {
            let reason = "this server runs no disk or CPU probes for clients (an in-process or older server)".into();
            return send(conn, &Reply::Refused { reason });
        };
        match req {
            Request::Inventory => send(conn, &Reply::Inventory(Box::new(host.inventory()))),
            Request::Plan { requests } => self.prepare(conn, requests, host.as_ref(), session, s),
            Request::Run { request } => self.run(conn, request, host.as_ref(), session, s),
            Request::Finish => {
                self.finish();
                send(conn, &Reply::Finished)
            }
            Request::CpuWatch { serving } => {
                let serving = serving.unwrap_or_default();
                if let Err(reason) = serving.check() {
                    return send(conn, &Reply::Refused { reason });
                }
                self.cpu_watch =
                    headroom_sys::CpuSnapshot::take().map(|s| (s, headroom_sys::ServingWatch::start(serving)));
                send(conn, &Reply::Watching)
            }
            Request::CpuWatchEnd => {
                let load = self.cpu_watch.take().and_then(|(then, serving)| {
                    let mut load = headroom_sys::CpuSnapshot::take()?.load_since(&then);
                    load.serving = serving.finish();
                    Some(load)
                });
                match load {
                    Some(load) => send(conn, &Reply::CpuLoad(Box::new(load))),
                    None => send(conn, &Reply::Refused { reason: "no CPU watch was started".into() }),
                }
            }
            _ => Ok(()),
        }
    }

    /// Whether a plan is prepared (its test file laid out) and waits for runs.
    pub(super) fn is_prepared(&self) -> bool {
        self.runner.is_some()
    }

    /// Removes the plan's test files and gives up the server's plan slot.
    pub(super) fn finish(&mut self) {
        if let Some(mut runner) = self.runner.take() {
            runner.finish();
        }
        self.plan = Plan::default();
        self.turn = None;
    }

    fn prepare(
        &mut self,
        conn: &mut TcpStream,
        mut requests: Vec<ProbeRequest>,
        host: &dyn ProbeHost,
        session: &SessionInfo,
        s: &Shared,
    ) -> Result<(), Gone> {
        self.finish();
        if requests.is_empty() || requests.len() > MAX_PLAN {
            let error =
                ProbeError::Usage(format!("a remote plan has 1 to {MAX_PLAN} requests, not {}", requests.len()));
            return send(conn, &Reply::Failed { error });
        }
        for r in &mut requests {
            // It runs here now: on this side the request is local.
            r.at = None;
            if let Err(error) = host.admit(r, s.cfg.max_duration) {
                (s.cfg.log)(&format!("peer={} remote plan refused: {error}", session_peer(conn)));
                return send(conn, &Reply::Failed { error });
            }
        }
        let Some(turn) = Turn::take(&s.remote_busy) else {
            let error = ProbeError::Refused(
                "another client's probes are running on this server; try again when they end".into(),
            );
            return send(conn, &Reply::Failed { error });
        };
        self.turn = Some(turn);
        let plan = Plan::new(requests);
        let mut runner = host.runner();
        let stop = AtomicBool::new(false);
        let mut wire_sink = WireSink::new(conn, &stop, session, s, None);
        let prepared = guarded(|| runner.prepare(&plan, &stop, &mut [&mut wire_sink]));
        let gone = wire_sink.gone;
        if gone {
            runner.finish();
            return Err(Gone);
        }
        let reply = match prepared {
            Ok(()) => Reply::Prepared { warnings: runner.warnings().to_vec() },
            Err(error) => Reply::Failed { error },
        };
        if matches!(reply, Reply::Prepared { .. }) {
            self.runner = Some(runner);
            self.plan = plan;
        } else {
            runner.finish();
            self.turn = None;
        }
        send(conn, &reply)
    }

    fn run(
        &mut self,
        conn: &mut TcpStream,
        mut request: ProbeRequest,
        host: &dyn ProbeHost,
        session: &SessionInfo,
        s: &Shared,
    ) -> Result<(), Gone> {
        request.at = None;
        let Some(index) = self.plan.requests.iter().position(|r| *r == request) else {
            let error = ProbeError::Usage("run a request only after sending it in a plan".into());
            return send(conn, &Reply::Failed { error });
        };
        let Some(runner) = self.runner.as_mut() else {
            let error = ProbeError::Usage("the plan is not prepared".into());
            return send(conn, &Reply::Failed { error });
        };
        let peer = session_peer(conn);
        (s.cfg.log)(&format!("peer={peer} remote probe started: {}", request.label));
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + s.cfg.max_duration + OVERRUN;
        let mut wire_sink = WireSink::new(conn, &stop, session, s, Some(deadline));
        let (run, panicked) =
            match guarded(|| Ok(runner.run_one(index, &request, &self.plan, &stop, &mut [&mut wire_sink]))) {
                Ok(run) => (run, false),
                Err(error) => (ProbeRun { request: request.clone(), result: Err(error), started: true }, true),
            };
        let gone = wire_sink.gone;
        if panicked {
            // Whatever the engine held is suspect: its test file goes, and the slot is free again.
            self.finish();
        }
        log_remote(s, &peer, &run, gone);
        if gone {
            // Its engines, and the test file, go with the session.
            self.finish();
            return Err(Gone);
        }
        let reply = match run.result {
            Ok(mut measured) => {
                measured.probe.host = Some(host.hostname());
                Reply::Measured(Box::new(measured))
            }
            Err(error) => Reply::Failed { error },
        };
        send(conn, &reply)
    }
}

/// Runs `f`, turning a panic into the failure the client is told about: a
/// bug met by one request must not take the server (or its plan slot and
/// test file, which the session's drop releases) with it.
fn guarded<T>(f: impl FnOnce() -> Result<T, ProbeError>) -> Result<T, ProbeError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        Err(ProbeError::Failed(format!("the server failed on this request (a headroom bug, please report it): {what}")))
    })
}

fn session_peer(conn: &TcpStream) -> String {
    conn.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into())
}

fn log_remote(s: &Shared, peer: &str, run: &ProbeRun, gone: bool) {
    let status = if gone {
        "aborted: the client is gone (test file removed)".to_string()
    } else {
        run.error().map_or("ok".into(), |e| format!("ended: {e}"))
    };
    (s.cfg.log)(&format!("peer={peer} remote probe {}: {status}", run.request.label));
}

fn send(conn: &mut TcpStream, reply: &Reply) -> Result<(), Gone> {
    wire::write_frame(conn, reply).map_err(|_| Gone)
}

/// Streams a running plan's events and samples to the client, and watches
/// the connection meanwhile: the client's `End`, its disappearance, the
/// deadline or the server's own stop set the probe's stop flag.
struct WireSink<'a> {
    conn: &'a mut TcpStream,
    stop: &'a AtomicBool,
    session: &'a SessionInfo,
    s: &'a Shared,
    deadline: Option<Instant>,
    gone: bool,
}

impl<'a> WireSink<'a> {
    fn new(
        conn: &'a mut TcpStream,
        stop: &'a AtomicBool,
        session: &'a SessionInfo,
        s: &'a Shared,
        deadline: Option<Instant>,
    ) -> Self {
        WireSink { conn, stop, session, s, deadline, gone: false }
    }

    fn forward(&mut self, reply: &Reply) {
        if self.gone {
            return;
        }
        if wire::write_frame(self.conn, reply).is_err() {
            self.lost();
            return;
        }
        self.session.touch(self.s);
        self.watch();
    }

    /// Reads what the client sent meanwhile, without waiting.
    fn watch(&mut self) {
        if self.s.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() > d) {
            self.stop.store(true, Ordering::Relaxed);
        }
        while wait_readable(&*self.conn, Duration::ZERO) {
            match read_during_probe(self.conn) {
                Ok(Request::End) => self.stop.store(true, Ordering::Relaxed),
                // Anything else mid-probe breaks the protocol; EOF or an error: gone.
                Ok(_) | Err(_) => {
                    self.lost();
                    return;
                }
            }
        }
    }

    fn lost(&mut self) {
        self.gone = true;
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn read_during_probe(conn: &mut TcpStream) -> io::Result<Request> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    wire::read_frame(conn, wire::MAX_FRAME)
}

impl Sink for WireSink<'_> {
    fn prepared(&mut self, event: &PrepareEvent) {
        self.forward(&Reply::Event { event: event.clone() });
    }

    fn sample(&mut self, _index: usize, _request: &ProbeRequest, sample: &LiveSample) {
        self.forward(&Reply::Sample(*sample));
    }
}
