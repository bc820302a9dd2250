//! The Plan (requests in order) and the Runner that executes it: each
//! engine is prepared once, just before its first request, with all of its
//! requests; each request runs on its engine with the samples fanned out to
//! every sink.

use crate::engine::ProbeEngine;
use crate::outcome::{Measured, ProbeRun};
use crate::request::{EngineKind, ProbeError, ProbeRequest};
use crate::sink::Sink;
use headroom_result::Warning;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// What to run, in order: plain data, so it can be sent elsewhere.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    /// The requests, run in this order.
    pub requests: Vec<ProbeRequest>,
}

impl Plan {
    /// A plan of these requests.
    pub fn new(requests: Vec<ProbeRequest>) -> Self {
        Plan { requests }
    }

    /// Appends a request at the end.
    pub fn push(&mut self, request: ProbeRequest) {
        self.requests.push(request);
    }

    /// Appends every request of `other`, in its order.
    pub fn extend(&mut self, other: Plan) {
        self.requests.extend(other.requests);
    }

    /// The same plan, every request run by the `headroom serve` at `server`.
    pub fn placed_at(self, server: &str) -> Plan {
        Plan { requests: self.requests.into_iter().map(|r| r.placed_at(server)).collect() }
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// True when there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    fn of_engine(&self, key: &EngineKey) -> Vec<&ProbeRequest> {
        self.requests.iter().filter(|r| EngineKey::of(r) == *key).collect()
    }
}

/// An engine's identity in a runner: its kind and where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EngineKey {
    kind: EngineKind,
    at: Option<String>,
}

impl EngineKey {
    fn of(request: &ProbeRequest) -> Self {
        EngineKey { kind: request.engine, at: request.at.clone() }
    }

    fn of_engine(engine: &dyn ProbeEngine) -> Self {
        EngineKey { kind: engine.kind(), at: engine.place().map(str::to_string) }
    }
}

/// Runs plans on the engines it was given.
#[derive(Default)]
pub struct Runner<'e> {
    engines: Vec<Box<dyn ProbeEngine + 'e>>,
    prepared: HashMap<EngineKey, Result<(), ProbeError>>,
    warnings: Vec<Warning>,
}

impl<'e> Runner<'e> {
    /// A runner with no engines yet (add them with [`Runner::with`]).
    pub fn new() -> Self {
        Runner { engines: Vec::new(), prepared: HashMap::new(), warnings: Vec::new() }
    }

    /// Adds an engine (the last one added for a kind and place wins).
    pub fn with(mut self, engine: impl ProbeEngine + 'e) -> Self {
        let key = EngineKey::of_engine(&engine);
        self.engines.retain(|e| EngineKey::of_engine(e.as_ref()) != key);
        self.engines.push(Box::new(engine));
        self
    }

    /// Warnings the engines gave while preparing (e.g. the test file's layout).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Prepares every engine `plan` needs now rather than before its first
    /// request (a soak lays out its test file before the first turn).
    pub fn prepare(&mut self, plan: &Plan, stop: &AtomicBool, sinks: &mut [&mut dyn Sink]) -> Result<(), ProbeError> {
        let mut keys: Vec<EngineKey> = plan.requests.iter().map(EngineKey::of).collect();
        keys.dedup();
        for key in keys {
            self.prepare_engine(&key, plan, stop, sinks)?;
        }
        Ok(())
    }

    fn prepare_engine(
        &mut self,
        key: &EngineKey,
        plan: &Plan,
        stop: &AtomicBool,
        sinks: &mut [&mut dyn Sink],
    ) -> Result<(), ProbeError> {
        if let Some(done) = self.prepared.get(key) {
            return done.clone();
        }
        let engine = self.engine(key)?;
        let outcome = engine.prepare(&plan.of_engine(key), stop, &mut |event| {
            for sink in sinks.iter_mut() {
                sink.prepared(event);
            }
        });
        let done = outcome.map(|warnings| self.warnings.extend(warnings));
        self.prepared.insert(key.clone(), done.clone());
        done
    }

    fn engine(&mut self, key: &EngineKey) -> Result<&mut Box<dyn ProbeEngine + 'e>, ProbeError> {
        let found = self.engines.iter_mut().find(|e| EngineKey::of_engine(e.as_ref()) == *key);
        found.ok_or_else(|| match &key.at {
            None => ProbeError::Failed(format!("no {} engine in this runner", key.kind)),
            Some(at) => ProbeError::Failed(format!("no {} engine for {at} in this runner", key.kind)),
        })
    }

    /// Runs one request now (its engine prepared first with `plan`, if it was not yet).
    pub fn run_one(
        &mut self,
        index: usize,
        request: &ProbeRequest,
        plan: &Plan,
        stop: &AtomicBool,
        sinks: &mut [&mut dyn Sink],
    ) -> ProbeRun {
        let key = EngineKey::of(request);
        let prepared = self.prepare_engine(&key, plan, stop, sinks);
        let result = match prepared {
            Ok(()) => self.measure(index, request, stop, sinks),
            Err(e) => Err(e),
        };
        let run =
            ProbeRun { request: request.clone(), started: self.prepared.get(&key).is_some_and(Result::is_ok), result };
        for sink in sinks.iter_mut() {
            sink.probe_finished(index, &run);
        }
        run
    }

    fn measure(
        &mut self,
        index: usize,
        request: &ProbeRequest,
        stop: &AtomicBool,
        sinks: &mut [&mut dyn Sink],
    ) -> Result<Measured, ProbeError> {
        for sink in sinks.iter_mut() {
            sink.probe_started(index, request);
        }
        let engine = self.engine(&EngineKey::of(request))?;
        engine.run(request, stop, &mut |sample| {
            for sink in sinks.iter_mut() {
                sink.sample(index, request, sample);
            }
        })
    }

    /// Runs `plan` one request at a time as the caller iterates: the caller
    /// sees each probe as it ends and decides whether to go on.
    pub fn execute<'a, 's>(
        &'a mut self,
        plan: &'a Plan,
        stop: &'a AtomicBool,
        sinks: &'a mut [&'s mut dyn Sink],
    ) -> Execution<'a, 'e, 's> {
        Execution { runner: self, plan, stop, sinks, next: 0 }
    }

    /// Runs all of `plan`, stopping after the first request that fails or
    /// when `stop` is set; returns what ran.
    pub fn run_all(&mut self, plan: &Plan, stop: &AtomicBool, sinks: &mut [&mut dyn Sink]) -> Vec<ProbeRun> {
        let mut runs = Vec::new();
        for run in self.execute(plan, stop, sinks) {
            let failed = run.error().is_some();
            runs.push(run);
            if failed {
                break;
            }
        }
        runs
    }

    /// Lets every engine release what it prepared (test files, sessions).
    pub fn finish(&mut self) {
        for engine in &mut self.engines {
            engine.finish();
        }
    }
}

/// A plan being run, one request per `next()`; ends when the plan is done
/// or `stop` is set.
pub struct Execution<'a, 'e, 's> {
    runner: &'a mut Runner<'e>,
    plan: &'a Plan,
    stop: &'a AtomicBool,
    sinks: &'a mut [&'s mut dyn Sink],
    next: usize,
}

impl Iterator for Execution<'_, '_, '_> {
    type Item = ProbeRun;

    fn next(&mut self) -> Option<ProbeRun> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let index = self.next;
        let request = self.plan.requests.get(index)?;
        self.next += 1;
        Some(self.runner.run_one(index, request, self.plan, self.stop, self.sinks))
    }
}
