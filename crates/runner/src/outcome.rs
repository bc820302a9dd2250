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

/// The length of each sample of a probe that measures for `time`: about 20
/// samples, never shorter than 100 ms (each sample must hold enough
/// operations to mean something, and a progress sink gets one per sample)
/// nor longer than a second (every probe records per-second samples at
/// least; docs/design.md). A 2 s test gets 100 ms samples, a 5 s one 250 ms, a
/// minute-long one 1 s.
pub fn sample_interval_for(time: Duration) -> Duration {
    (time / 20).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

#[cfg(test)]
#[test]
fn short_tests_get_twenty_samples_and_long_ones_one_a_second() {
    assert_eq!(sample_interval_for(Duration::from_secs(2)), Duration::from_millis(100));
    assert_eq!(sample_interval_for(Duration::from_secs(5)), Duration::from_millis(250));
    assert_eq!(sample_interval_for(Duration::from_millis(500)), Duration::from_millis(100));
    assert_eq!(sample_interval_for(Duration::from_secs(3600)), Duration::from_secs(1));
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
    /// Payload bytes per second over the interval.
    pub bytes_per_sec: f64,
    /// Operations per second over the interval; None when the engine counts no operations.
    pub iops: Option<f64>,
    /// Mean latency per operation over the interval, ns; None when not timed.
    pub latency_ns_mean: Option<f64>,
    /// 99th-percentile latency over the interval, ns; None when not timed.
    pub latency_ns_p99: Option<f64>,
}

/// What an engine tells sinks while it prepares (before any probe runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepareEvent {
    /// A test file was created at `path` (before its layout), so a store can
    /// record it and a later run can remove it if this one is killed.
    TestFileCreated {
        /// The test file's path.
        path: String,
    },
    /// Preparation progress, e.g. the layout of a test file.
    Progress {
        /// What is being prepared, e.g. `laying out`.
        what: String,
        /// Units done so far (bytes for a layout).
        done: u64,
        /// Units in all, in the unit of `done`.
        total: u64,
    },
    /// The disk target the probes run on.
    DiskTarget {
        /// The path tested (a test file or a device).
        path: String,
        /// `test_file`, `block_device` or `existing_file`.
        kind: String,
        /// Filesystem type under the path (statfs); None for a raw device.
        filesystem: Option<String>,
        /// Bytes of the test file or region.
        size: u64,
    },
    /// The network peer answered: which protocol it speaks.
    PeerReady {
        /// HOST:PORT of the server.
        peer: String,
        /// `headroom` or `iperf3`.
        protocol: String,
        /// The server's version, when its protocol tells it (headroom does, iperf3 does not).
        server_version: Option<String>,
    },
}

/// A probe an engine measured. `error` is set when the probe ended early
/// (its figures up to then are kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The measured probe, as it goes into the result document.
    pub probe: Probe,
    /// Unix time at which the probe's samples' `t_s` count from.
    pub started_unix: f64,
    /// Why the probe stopped early; None when it ran to the end.
    pub error: Option<ProbeError>,
}

/// One request and what came of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRun {
    /// The request as planned.
    pub request: ProbeRequest,
    /// The measured probe, or why there is none.
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
