//! The one trait every measuring engine implements, modelled on fio's
//! ioengine ops: prepare once for the plan's requests, run each, finish.

use crate::request::ProbeRequest;
use crate::sink::LiveSample;
use headroom_result::{Probe, Warning};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::AtomicBool;

/// Which engine runs a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Disk,
    Net,
    Cpu,
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Disk => "disk",
            EngineKind::Net => "net",
            EngineKind::Cpu => "cpu",
        })
    }
}

/// Why a request produced no probe (or ended one early).
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum ProbeError {
    /// The user's request cannot work (bad block size, refused target): exit 2.
    #[error("{0}")]
    Usage(String),
    /// The far end could not be reached (name, route, nobody listening): an
    /// outage to a soak.
    #[error("{0}")]
    Unreachable(String),
    /// The far end answered but said no (wrong token, busy, limits).
    #[error("{0}")]
    Refused(String),
    /// The far end was lost while a probe ran: an outage to a soak.
    #[error("{0}")]
    Lost(String),
    /// The engine cannot run this request against this peer (e.g. a headroom-only
    /// test against a stock iperf3 server).
    #[error("{0}")]
    Unsupported(String),
    /// Anything else that went wrong while measuring.
    #[error("{0}")]
    Failed(String),
    /// Ctrl-C arrived before there was anything to measure.
    #[error("stopped before anything was measured")]
    Stopped,
    /// An earlier request lost the far end for good: the engine gives up on
    /// the rest of the plan.
    #[error("the rest of the plan was abandoned: the far end is gone")]
    Abandoned,
}

/// What an engine tells sinks while it prepares (before any probe runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepareEvent {
    /// A test file was created at `path` (before its layout), so a store can
    /// record it and a later run can remove it if this one is killed.
    TestFileCreated { path: String },
    /// Preparation progress, e.g. the layout of a test file.
    Progress { what: String, done: u64, total: u64 },
    /// The disk target the probes run on.
    DiskTarget { path: String, kind: String, filesystem: Option<String>, size: u64 },
    /// The network peer answered: which protocol it speaks.
    PeerReady { peer: String, protocol: String, server_version: Option<String> },
}

/// A probe an engine measured. `error` is set when the probe ended early
/// (its figures up to then are kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub probe: Probe,
    /// Unix time at which the probe's samples' `t_s` count from.
    pub started_unix: f64,
    pub error: Option<ProbeError>,
}

/// A measuring engine (disk, net, cpu). Engines know nothing of output:
/// they get requests and a stop flag, stream samples, return probes.
pub trait ProbeEngine {
    /// The requests this engine runs.
    fn kind(&self) -> EngineKind;

    /// Called once before the first of `requests` (all of this engine's
    /// requests in the plan) runs: create and lay out files, connect to
    /// servers, check every request so mistakes cost no time. Returns
    /// warnings about the whole run.
    fn prepare(
        &mut self,
        requests: &[&ProbeRequest],
        stop: &AtomicBool,
        events: &mut dyn FnMut(&PrepareEvent),
    ) -> Result<Vec<Warning>, ProbeError> {
        let _ = (requests, stop, events);
        Ok(Vec::new())
    }

    /// Runs one request, calling `on_sample` per interval, returning early
    /// (with what it measured) when `stop` is set.
    fn run(
        &mut self,
        request: &ProbeRequest,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&LiveSample),
    ) -> Result<Measured, ProbeError>;

    /// Releases what `prepare` made (removes test files, closes sessions).
    /// Engines also do it on drop; this lets a caller do it at a chosen point.
    fn finish(&mut self) {}
}
