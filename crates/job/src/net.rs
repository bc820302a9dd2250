//! The network job, `headroom net`: the tests against one server, each
//! probe held against the link towards it, the failures kept as warnings,
//! the goals held; up to the finished document.
//!
//! What it must not do: print, parse flags or draw progress; progress goes
//! to the sinks the caller hands in, the heading's facts and each probe as
//! it finishes to its [`NetReport`].

use crate::path::link_towards_from;
use crate::steps::{hold_goals, StepSinks};
use headroom_analysis::{net_probe_against_link, Goal, GoalResult, LinkCeiling, LinkSpec};
use headroom_net::{NetEngine, NetRequest, NetServer, NetTest};
use headroom_result::{Probe, ResultDoc, Warning, WarningCode};
use headroom_runner::{Plan, PrepareEvent, ProbeError, Runner, Sink};
use std::sync::atomic::AtomicBool;

/// What `headroom net` measures, checked by the caller.
pub struct NetJob {
    /// The server and how to reach it.
    pub server: NetServer,
    /// The tests in the order they run, each with the name a failure line
    /// gives it (`up1: ...`).
    pub tests: Vec<(String, NetTest)>,
    /// Whether the tests were named by the user: then a test the server
    /// cannot run is a failure, not a silent skip.
    pub tests_named: bool,
    /// `--link`: the ceiling to hold the probes against instead of the NIC's.
    pub link: Option<LinkSpec>,
    /// Thresholds held against the best test of each kind.
    pub goals: Vec<Goal>,
    /// How errors and warnings name a setting (the binary's flags).
    pub spelling: crate::Spelling,
}

/// What the network job tells its caller while it runs, beside progress.
pub trait NetReport {
    /// The server answered: its protocol and version, and the link ceiling
    /// the probes are held against (before the first test).
    fn ready(&mut self, _protocol: &str, _server_version: Option<&str>, _ceiling: &LinkCeiling) {}
    /// A test finished with this probe.
    fn probe(&mut self, _probe: &Probe, _ceiling: &LinkCeiling) {}
    /// A test failed without a probe (`name: reason`).
    fn failure(&mut self, _line: &str) {}
}

/// Why the network job ended without a document: the server could not be
/// reached or refused before any test measured.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NetJobError(pub String);

/// The finished network job.
pub struct NetDone {
    /// The measured document: probes, the link ceiling, a warning per failure.
    pub doc: ResultDoc,
    /// Each goal against the document.
    pub goals: Vec<GoalResult>,
    /// The failed tests (`name: reason`), in the order they ran.
    pub failures: Vec<String>,
}

/// The peer as the net engine found it: the heading's protocol and version.
#[derive(Default)]
struct PeerSeen(Option<(String, Option<String>)>);

impl Sink for PeerSeen {
    fn prepared(&mut self, event: &PrepareEvent) {
        if let PrepareEvent::PeerReady { protocol, server_version, .. } = event {
            self.0 = Some((protocol.clone(), server_version.clone()));
        }
    }
}

/// Runs `headroom net`'s job.
pub fn run(
    job: NetJob,
    stop: &AtomicBool,
    sinks: &mut StepSinks<'_>,
    report: &mut dyn NetReport,
) -> Result<NetDone, NetJobError> {
    let server = &job.server;
    let plan = Plan::new(
        job.tests
            .iter()
            .map(|(_, test)| NetRequest { server: server.clone(), test: test.clone() }.to_request())
            .collect(),
    );
    let started_at = headroom_result::now_rfc3339();
    let mut runner = Runner::new().with(NetEngine::new().spelling_settings(job.spelling.net));
    // Detect the protocol (and fail early on DNS, refused port, wrong token).
    let mut peer = PeerSeen::default();
    runner.prepare(&plan, stop, &mut [&mut peer]).map_err(|e| NetJobError(e.to_string()))?;
    let (protocol, server_version) = peer.0.unwrap_or_else(|| ("iperf3".into(), None));
    let ceiling = link_towards_from(&server.host, server.port, job.link.as_ref(), &server.source);
    report.ready(&protocol, server_version.as_deref(), &ceiling);
    let mut probes: Vec<Probe> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut bars = sinks(&plan);
    for ((name, _), run) in job.tests.iter().zip(runner.execute(&plan, stop, &mut [bars.as_mut()])) {
        match run.result {
            Ok(measured) => {
                let p = net_probe_against_link(measured.probe, &ceiling);
                if let Some(e) = p.error() {
                    failures.push(format!("{}: {e}", p.name));
                }
                report.probe(&p, &ceiling);
                probes.push(p);
            }
            Err(ProbeError::Unsupported(why)) => {
                if job.tests_named {
                    failures.push(why);
                }
            }
            Err(ProbeError::Abandoned) => break,
            Err(e @ (ProbeError::Unreachable(_) | ProbeError::Refused(_))) if probes.is_empty() => {
                return Err(NetJobError(e.to_string()))
            }
            Err(e) => {
                let line = format!("{name}: {e}");
                report.failure(&line);
                failures.push(line);
            }
        }
    }
    runner.finish();
    drop(bars);
    let mut doc = ResultDoc::new(started_at);
    doc.probes = probes;
    if let Some(c) = ceiling.to_ceiling() {
        doc.ceilings.push(c);
    }
    for f in &failures {
        doc.warnings.push(Warning::new(WarningCode::TestFailed, f.clone()));
    }
    let goals = hold_goals(&mut doc, &job.goals, None);
    Ok(NetDone { doc, goals, failures })
}
