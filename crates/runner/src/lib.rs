//! headroom-runner: the Runner of docs/design.md ("Data flow").
//!
//! What it owns:
//! - the probe request ([`ProbeRequest`]): plain serde data saying which
//!   engine runs it, how to show its progress, and the engine's own
//!   parameters as JSON (each engine crate defines and reads its own type);
//! - the one engine trait ([`ProbeEngine`]) the disk, net and cpu engines
//!   implement (each in its crate's `probe_engine.rs`);
//! - the [`Plan`] (requests in order) and the [`Runner`] that executes it,
//!   streaming [`LiveSample`]s and preparation events to [`Sink`]s and
//!   handing back [`ProbeRun`]s (requests with their probes or errors).
//!
//! Requests, samples and probes cross the engine boundary as data only, so
//! the place a probe runs can later be another machine (`headroom serve`
//! executing requests it receives).
//!
//! What it must not do: depend on an engine crate, print, draw progress or
//! know the command line.

mod engine;
mod outcome;
mod request;
mod runner;
mod sink;

pub use engine::ProbeEngine;
pub use outcome::{sample_interval_for, unix_now, LiveSample, Measured, PrepareEvent, ProbeRun};
pub use request::{EngineKind, Expected, ProbeError, ProbeRequest};
pub use runner::{Execution, Plan, Runner};
pub use sink::{SampleLog, Sink};
