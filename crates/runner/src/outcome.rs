//! What comes back across the engine boundary, as plain data: live samples,
//! preparation events, measured probes, and each request's outcome.

use crate::request::{ProbeError, ProbeRequest};
use headroom_result::Probe;
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch: the clock of [`LiveSample::t_unix`] and
/// [`Measured::started_unix`].
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// One interval of a running probe, on the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LiveSample {
    /// Unix time at the end of the interval.
    pub t_unix: f64,
    /// Since the probe started, warm-up included.
    pub elapsed: Duration,
    /// Still in the warm-up (the figure is not part of the result).
    pub ramping: bool,
    pub bytes_per_sec: f64,
    pub iops: Option<f64>,
    pub latency_ns_mean: Option<f64>,
    pub latency_ns_p99: Option<f64>,
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

/// One request and what came of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRun {
    pub request: ProbeRequest,
    pub result: Result<Measured, ProbeError>,
    /// Whether the probe started: false when its engine's preparation failed
    /// (a refused target, a test checked before any ran, an unreachable server).
    pub started: bool,
}

impl ProbeRun {
    /// The probe, when one was measured (also when it ended early).
    pub fn probe(&self) -> Option<&Probe> {
        self.result.as_ref().ok().map(|m| &m.probe)
    }

    /// The error that ended the request, before or during its measurement.
    pub fn error(&self) -> Option<&ProbeError> {
        match &self.result {
            Ok(m) => m.error.as_ref(),
            Err(e) => Some(e),
        }
    }
}
