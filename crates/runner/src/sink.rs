//! Where a running plan reports: samples as they arrive, preparation
//! events, each probe's end. Progress bars, the soak store and the metrics
//! endpoint are sinks; they live with what they draw or store.

use crate::outcome::{LiveSample, PrepareEvent, ProbeRun};
use crate::request::ProbeRequest;

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
