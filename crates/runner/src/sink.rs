//! Where a running plan reports: samples as they arrive, preparation
//! events, each probe's end. Progress bars, the soak store and the metrics
//! endpoint are sinks; they live with what they draw or store.

use crate::engine::PrepareEvent;
use crate::request::ProbeRequest;
use crate::runner::ProbeRun;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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

/// Receives what a running plan reports. Every method has a default that
/// ignores the report, so a sink implements only what it uses.
pub trait Sink {
    fn prepared(&mut self, event: &PrepareEvent) {
        let _ = event;
    }
    fn probe_started(&mut self, index: usize, request: &ProbeRequest) {
        let _ = (index, request);
    }
    fn sample(&mut self, index: usize, request: &ProbeRequest, sample: &LiveSample) {
        let _ = (index, request, sample);
    }
    fn probe_finished(&mut self, index: usize, run: &ProbeRun) {
        let _ = (index, run);
    }
}

/// A sink that keeps every sample and event (tests, and callers that want
/// the live series after the fact).
#[derive(Debug, Default)]
pub struct SampleLog {
    pub samples: Vec<(usize, LiveSample)>,
    pub events: Vec<PrepareEvent>,
    pub finished: usize,
}

impl Sink for SampleLog {
    fn prepared(&mut self, event: &PrepareEvent) {
        self.events.push(event.clone());
    }
    fn sample(&mut self, index: usize, _request: &ProbeRequest, sample: &LiveSample) {
        self.samples.push((index, *sample));
    }
    fn probe_finished(&mut self, _index: usize, _run: &ProbeRun) {
        self.finished += 1;
    }
}
