//! The one trait every measuring engine implements, modelled on fio's
//! ioengine ops: prepare once for the plan's requests, run each, finish.

use crate::outcome::{LiveSample, Measured, PrepareEvent};
use crate::request::{EngineKind, ProbeError, ProbeRequest};
use headroom_result::Warning;
use std::sync::atomic::AtomicBool;

/// A measuring engine (disk, net, cpu). Engines know nothing of output:
/// they get requests and a stop flag, stream samples, return probes.
pub trait ProbeEngine {
    /// The requests this engine runs.
    fn kind(&self) -> EngineKind;

    /// Where its probes run: None on this machine, else the `HOST[:PORT]` of
    /// the server that runs them (a remote engine). The Runner hands an
    /// engine the requests of its kind whose [`ProbeRequest::at`] is this.
    fn place(&self) -> Option<&str> {
        None
    }

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
