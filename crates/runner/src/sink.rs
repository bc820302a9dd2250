//! Where a running plan reports: samples as they arrive, preparation
//! events, each probe's end. Progress bars, the soak store and the metrics
//! endpoint are sinks; they live with what they draw or store.

use crate::outcome::{LiveSample, PrepareEvent, ProbeRun};
use crate::request::ProbeRequest;

/// Receives what a running plan reports. Every method has a default that
/// ignores the report, so a sink implements only what it uses.
pub trait Sink {
    /// An engine's preparation event (test file created, layout progress, target, peer).
    fn prepared(&mut self, event: &PrepareEvent) {
        let _ = event;
    }
    /// Request `index` of the plan is starting.
    fn probe_started(&mut self, index: usize, request: &ProbeRequest) {
        let _ = (index, request);
    }
    /// One live sample of request `index`, warm-up samples included (`ramping`).
    fn sample(&mut self, index: usize, request: &ProbeRequest, sample: &LiveSample) {
        let _ = (index, request, sample);
    }
    /// Request `index` ended, measured or failed.
    fn probe_finished(&mut self, index: usize, run: &ProbeRun) {
        let _ = (index, run);
    }
}

/// A sink that keeps every sample and event (tests, and callers that want
/// the live series after the fact).
#[derive(Debug, Default)]
pub struct SampleLog {
    /// Every sample, with the index of its request, in arrival order.
    pub samples: Vec<(usize, LiveSample)>,
    /// Every preparation event, in arrival order.
    pub events: Vec<PrepareEvent>,
    /// Number of probes that finished (measured or failed).
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
