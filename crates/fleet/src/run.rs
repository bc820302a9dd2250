//! Running one plan on every agent at once. A bounded pool of workers
//! ([`MAX_WORKERS`] threads at most, each driving its share of the hosts)
//! opens a session per host, compares its clock with ours, checks its
//! version and prepares the plan there (test files laid out). Then, test
//! by test, the workers meet at a barrier and send every host its `Run` at
//! once: the agents are released together rather than given an absolute
//! start time, so an agent whose clock is off still starts with the others
//! (the clock offsets are measured anyway, to put every host's samples on
//! one time axis and to report the start skew). A host that fails (down,
//! wrong token, another version, refused, lost mid-run, silent, late, or
//! lying: a figure no measurement can produce, a time outside the test) is
//! dropped from the rest of the run with its reason; the others go on.
//!
//! Every phase of an agent has a deadline, counted in whole messages, never
//! restarted by a byte: connecting and authenticating, the clock and the
//! inventory within the endpoint's timeout each, the preparation within
//! [`PREPARE_LIMIT`], each test within its planned length and [`RUN_GRACE`]
//! (untimed tests [`UNTIMED_RUN_LIMIT`]), at most [`SILENCE`] without a whole
//! message while a test runs, and after Ctrl-C the endpoint's timeout to send
//! what it measured. So a slow or trickling agent holds the others for a
//! bounded time, then is reported as failed.

use crate::{HostsError, Setting};
use headroom_job::Spelling;
use headroom_net::{ClockReading, Endpoint, RemoteEngine, RunStep, ServerSetting};
use headroom_result::{Host, Sample, Warning};
use headroom_runner::{unix_now, EngineKind, Expected, LiveSample, Measured, Plan, ProbeEngine, ProbeRequest};
use headroom_units::setting::Message;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Most threads a fleet run uses, however many hosts: beyond it a worker
/// drives several hosts, polling their connections in turn.
pub const MAX_WORKERS: usize = 64;
/// Clock exchanges per host; the one with the smallest round trip counts.
const CLOCK_ROUNDS: u32 = 5;
/// A running agent that sends no whole message (sample, result) this long is given up.
pub const SILENCE: Duration = Duration::from_secs(15);
/// Longest an agent may take to prepare the plan (lay out its test files).
pub const PREPARE_LIMIT: Duration = Duration::from_secs(600);
/// What a timed test may take beyond its planned length (warm-up included)
/// before its agent is given up: starting, stopping, sending the result.
pub const RUN_GRACE: Duration = Duration::from_secs(30);
/// Longest a test without a planned length (a fixed transfer) may take.
pub const UNTIMED_RUN_LIMIT: Duration = Duration::from_secs(600);
/// How far an agent's times may stray outside the span this machine saw a
/// test in, beyond the clock reading's round trip: its clock is read once,
/// before the run, and drifts a little.
const TIME_SLACK_S: f64 = 5.0;

/// Files this process keeps open besides the agents' control connections
/// (standard streams, the resolver, a saved document) and the connections
/// the workers may have half-open at once.
const OWN_FILES: u64 = 64 + MAX_WORKERS as u64;

/// Makes sure this process may hold a control connection to each of
/// `hosts` agents at once (every prepared agent keeps its own until the
/// end, so all can be released together): raises the soft open-file limit
/// up to the hard one, or says, before anything starts, what to raise.
pub fn ensure_file_limit(hosts: usize) -> Result<(), HostsError> {
    let needed = hosts as u64 + OWN_FILES;
    crate::os::raise_open_file_limit(needed).map_err(|hard| {
        HostsError(Message::of(Setting::Hosts).then(format!(
            " names {hosts} agents and the fleet holds a connection to each, but this process may open only {} files (ulimit -n): raise the limit to {needed} or more (e.g. `ulimit -n {}`, LimitNOFILE= in a systemd unit) or split the host list; nothing was started",
            hard,
            needed.next_power_of_two()
        )))
    })
}

/// What happened on one host.
#[derive(Debug, Clone, Default)]
pub struct HostOutcome {
    /// `host:port` as the fleet names it.
    pub name: String,
    /// The agent's clock against ours, when it answered.
    pub clock: Option<ClockReading>,
    /// Why the host failed; None when it ran everything.
    pub error: Option<String>,
    /// Per test of the plan: its probe, when it measured one.
    pub measured: Vec<Option<Measured>>,
    /// Per test: the samples it streamed after its warm-up, on its own clock
    /// (a host lost mid-test keeps what it sent).
    pub live: Vec<Vec<LiveSample>>,
    /// Per test: when this machine sent the host its `Run` and when the
    /// host's probe (or failure) came, Unix seconds on this machine's
    /// clock. Everything the host reports of the test lies within it.
    pub spans: Vec<Option<(f64, f64)>>,
    /// Warnings of its plan's preparation (e.g. the test file's layout).
    pub warnings: Vec<Warning>,
    /// The agent machine's inventory, when it answered.
    pub inventory: Option<Host>,
}

/// What the run tells the caller as it goes (for a progress line).
#[derive(Debug, Clone)]
pub enum FleetEvent {
    /// Every host is prepared or has failed; test `index` starts on `ready` hosts.
    Starting {
        /// The test's index in the plan.
        index: usize,
        /// Its label.
        label: String,
        /// Hosts it starts on.
        ready: usize,
    },
    /// A host failed, with its reason.
    HostFailed {
        /// The host.
        name: String,
        /// Why.
        error: String,
    },
}

struct Agent {
    engine: RemoteEngine,
    out: HostOutcome,
    /// Still in the run.
    alive: bool,
}

impl Agent {
    fn fail(&mut self, error: String, on_event: &(dyn Fn(&FleetEvent) + Sync)) {
        let error = describe(&self.out.name, &error);
        on_event(&FleetEvent::HostFailed { name: self.out.name.clone(), error: error.clone() });
        self.out.error.get_or_insert(error);
        self.alive = false;
        self.engine.finish();
    }
}

/// Runs `plan` on every host, released together test by test; returns each
/// host's outcome in the order of `hosts`. The plan may mix engines (`fleet
/// run`: network and disk tests): an agent's server prepares each engine's
/// requests of one plan. `stop` (Ctrl-C) ends the running tests early (the
/// agents send what they measured) and starts no more.
pub fn run_fleet(
    hosts: &[Endpoint],
    plan: &Plan,
    stop: &AtomicBool,
    on_event: &(dyn Fn(&FleetEvent) + Sync),
    spelling: Spelling,
) -> Vec<HostOutcome> {
    let workers = hosts.len().clamp(1, MAX_WORKERS);
    let barrier = Barrier::new(workers);
    let go = AtomicBool::new(false);
    let ready = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, HostOutcome)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (barrier, go, ready) = (&barrier, &go, &ready);
                scope.spawn(move || {
                    let mine: Vec<(usize, &Endpoint)> = hosts.iter().enumerate().skip(w).step_by(workers).collect();
                    let mut agents: Vec<Agent> =
                        mine.iter().map(|(_, h)| prepare(h, plan, hosts.len(), stop, on_event, spelling)).collect();
                    for (index, request) in plan.requests.iter().enumerate() {
                        ready.fetch_add(agents.iter().filter(|a| a.alive).count(), Ordering::SeqCst);
                        if barrier.wait().is_leader() {
                            let n = ready.swap(0, Ordering::SeqCst);
                            let going = !stop.load(Ordering::SeqCst) && n > 0;
                            go.store(going, Ordering::SeqCst);
                            if going {
                                on_event(&FleetEvent::Starting { index, label: request.label.clone(), ready: n });
                            }
                        }
                        barrier.wait();
                        if !go.load(Ordering::SeqCst) {
                            break;
                        }
                        run_test(&mut agents, index, request, stop, on_event);
                    }
                    agents
                        .into_iter()
                        .zip(mine)
                        .map(|(mut a, (i, _))| {
                            a.engine.finish();
                            (i, a.out)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a fleet worker panicked")).collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, o)| o).collect()
}

/// Opens the host's session, compares clocks, checks the version, asks for
/// its inventory and prepares the plan there.
fn prepare(
    host: &Endpoint,
    plan: &Plan,
    fleet_size: usize,
    stop: &AtomicBool,
    on_event: &(dyn Fn(&FleetEvent) + Sync),
    spelling: Spelling,
) -> Agent {
    let name = host.display();
    let n = plan.len();
    let out = HostOutcome {
        name: name.clone(),
        measured: vec![None; n],
        live: vec![Vec::new(); n],
        spans: vec![None; n],
        ..Default::default()
    };
    // The engine's kind only routes requests inside a Runner; the fleet
    // drives the engine itself, whatever engines the plan's requests name.
    let kind = plan.requests.first().map_or(EngineKind::Disk, |r| r.engine);
    let engine = RemoteEngine::new(kind, host.clone()).spelling_settings(spelling.net);
    let mut agent = Agent { engine, out, alive: true };
    if stop.load(Ordering::Relaxed) {
        agent.fail("stopped by Ctrl-C before it was prepared".into(), on_event);
        return agent;
    }
    let clock = match agent.engine.clock(CLOCK_ROUNDS, stop) {
        Ok(c) => c,
        Err(e) => {
            agent.fail(e.to_string(), on_event);
            return agent;
        }
    };
    let ours = env!("CARGO_PKG_VERSION");
    let version = clock.server_version.clone();
    agent.out.clock = Some(clock);
    if version != ours {
        agent.fail(
            format!(
                "{name} runs headroom {version} and this client {ours}: install headroom {ours} there (a fleet's agents all run the client's version, so they measure alike)"
            ),
            on_event,
        );
        return agent;
    }
    match agent.engine.inventory() {
        Ok(inventory) => match inventory.validate("its inventory") {
            Ok(()) => agent.out.inventory = Some(inventory),
            Err(e) => {
                agent.fail(format!("{name} sent an impossible inventory: {e}"), on_event);
                return agent;
            }
        },
        Err(e) => {
            agent.fail(e.to_string(), on_event);
            return agent;
        }
    }
    let requests: Vec<&ProbeRequest> = plan.requests.iter().collect();
    agent.engine.set_deadline(Some(PREPARE_LIMIT));
    let prepared = agent.engine.prepare(&requests, stop, &mut |_| {});
    agent.engine.set_deadline(None);
    match prepared {
        Ok(warnings) => agent.out.warnings = warnings,
        // Every agent holds one of the server's slots for the whole run.
        Err(e) if e.to_string().contains("server busy") => agent.fail(
            format!(
                "{e}: {fleet_size} agents testing one server need `headroom serve {} {fleet_size}` there",
                (spelling.serve)(ServerSetting::MaxClients)
            ),
            on_event,
        ),
        Err(e) => agent.fail(e.to_string(), on_event),
    }
    agent
}

/// How long test `request` may run on an agent before it is given up.
pub fn run_limit(request: &ProbeRequest) -> Duration {
    match request.expected {
        Expected::About(planned) => planned + RUN_GRACE,
        Expected::Unknown | Expected::Instant => UNTIMED_RUN_LIMIT,
    }
}

/// Starts test `index` on every live agent of this worker, then reads them
/// all until each has sent its probe or failed (late, silent or lying).
fn run_test(
    agents: &mut [Agent],
    index: usize,
    request: &ProbeRequest,
    stop: &AtomicBool,
    on_event: &(dyn Fn(&FleetEvent) + Sync),
) {
    let mut running: Vec<usize> = Vec::new();
    for (i, a) in agents.iter_mut().enumerate() {
        if !a.alive {
            continue;
        }
        a.out.spans[index] = Some((unix_now(), f64::NAN));
        match a.engine.start(request) {
            Ok(()) => running.push(i),
            Err(e) => a.fail(e.to_string(), on_event),
        }
    }
    let started = Instant::now();
    let limit = run_limit(request);
    let mut heard: Vec<Instant> = vec![Instant::now(); agents.len()];
    let mut ended: Option<Instant> = None;
    while !running.is_empty() {
        if stop.load(Ordering::Relaxed) && ended.is_none() {
            ended = Some(Instant::now());
            for &i in &running {
                let _ = agents[i].engine.end();
            }
        }
        // One host: wait on it; several: look at each in turn, then rest a moment.
        let wait = if running.len() == 1 { Duration::from_millis(100) } else { Duration::ZERO };
        let mut any = false;
        running.retain(|&i| {
            let a = &mut agents[i];
            let late = if started.elapsed() > limit {
                Some(format!(
                    "{} did not finish {} within {} s (its planned length and {} s)",
                    a.out.name,
                    request.label,
                    limit.as_secs(),
                    RUN_GRACE.as_secs()
                ))
            } else {
                ended
                    .filter(|at| at.elapsed() > AFTER_STOP)
                    .map(|_| format!("{} sent no result within {} s of Ctrl-C", a.out.name, AFTER_STOP.as_secs()))
            };
            if let Some(error) = late {
                a.fail(error, on_event);
                return false;
            }
            let step = a.engine.poll_run(wait);
            let span = a.out.spans[index].as_mut().expect("set when started");
            span.1 = unix_now();
            let (span, offset) = (*span, a.out.clock.as_ref().map_or((0.0, 0.0), |c| (c.offset_s, c.rtt_s)));
            match step {
                Ok(None) if heard[i].elapsed() > SILENCE => {
                    let error =
                        format!("{} sent no whole message for {} s during a test", a.out.name, SILENCE.as_secs());
                    a.fail(error, on_event);
                    false
                }
                Ok(None) => true,
                Ok(Some(RunStep::Sample(s))) => {
                    any = true;
                    heard[i] = Instant::now();
                    if let Err(e) = check_live(&s, span, offset) {
                        a.fail(format!("{} sent an impossible sample: {e}", a.out.name), on_event);
                        return false;
                    }
                    if !s.ramping {
                        a.out.live[index].push(s);
                    }
                    true
                }
                Ok(Some(RunStep::Done(m))) => {
                    any = true;
                    if let Err(e) = check_measured(&m, span, offset) {
                        a.fail(format!("{} sent an impossible result: {e}", a.out.name), on_event);
                        return false;
                    }
                    let early = m.error.clone();
                    a.out.measured[index] = Some(*m);
                    if let Some(e) = early.filter(|_| !stop.load(Ordering::Relaxed)) {
                        a.fail(format!("{}: the test ended early: {e}", a.out.name), on_event);
                    }
                    false
                }
                Err(e) => {
                    any = true;
                    a.fail(e.to_string(), on_event);
                    false
                }
            }
        });
        if !any && running.len() > 1 {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// How long an agent has to send what it measured after Ctrl-C.
const AFTER_STOP: Duration = Duration::from_secs(10);

/// Whether a time the agent reported (Unix seconds on its clock) falls in
/// `span` (on ours), give or take the clock reading's error and drift.
fn within(t_agent: f64, span: (f64, f64), (offset, rtt): (f64, f64)) -> bool {
    let t = t_agent - offset;
    let slack = TIME_SLACK_S + rtt;
    t.is_finite() && t >= span.0 - slack && t <= span.1 + slack
}

/// A live sample's figures as a result document holds them, checked alike.
fn check_live(s: &LiveSample, span: (f64, f64), clock: (f64, f64)) -> Result<(), String> {
    let as_sample = Sample {
        t_s: 0.0,
        bytes_per_sec: s.bytes_per_sec,
        iops: s.iops,
        latency_ns_mean: s.latency_ns_mean,
        latency_ns_p99: s.latency_ns_p99,
    };
    as_sample.validate("sample").map_err(|e| e.to_string())?;
    if !within(s.t_unix, span, clock) {
        return Err(format!("sample.t_unix = {:e}: outside the test as this machine saw it", s.t_unix));
    }
    Ok(())
}

/// An agent's probe, checked as `report` checks a document, and its times
/// held to the span this machine saw the test in: its start, and the end
/// of every sample.
fn check_measured(m: &Measured, span: (f64, f64), clock: (f64, f64)) -> Result<(), String> {
    m.probe.validate("probe").map_err(|e| e.to_string())?;
    if !within(m.started_unix, span, clock) {
        return Err(format!("started_unix = {:e}: outside the test as this machine saw it", m.started_unix));
    }
    if let Some(late) = m.probe.samples.iter().find(|x| !within(m.started_unix + x.t_s, span, clock)) {
        return Err(format!("a sample at t_s = {:e}: after the test as this machine saw it", late.t_s));
    }
    Ok(())
}

/// A failure as one line that names the host.
fn describe(name: &str, text: &str) -> String {
    if text.contains(name) {
        text.to_string()
    } else {
        format!("{name}: {text}")
    }
}
