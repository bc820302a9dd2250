//! A probe request: what one probe should measure, as plain data. The
//! envelope (engine, label, expected time) is the Runner's; `params` belongs
//! to the engine, which defines its type and reads it back.

use crate::engine::{EngineKind, ProbeError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long a probe is expected to run, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expected {
    /// About this long (warm-up included): a bar.
    About(Duration),
    /// Unknown (a fixed transfer, a series): a spinner.
    Unknown,
    /// Too short to show anything.
    Instant,
}

/// One probe to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRequest {
    pub engine: EngineKind,
    /// Human name while it runs, e.g. `SEQ1M Q8T1 read`, `TCP up x1`.
    pub label: String,
    pub expected: Expected,
    /// The engine's own parameters (e.g. headroom-disk's `DiskRequest`).
    pub params: serde_json::Value,
}

impl ProbeRequest {
    /// A request for `engine` carrying `params`.
    pub fn new(engine: EngineKind, label: impl Into<String>, expected: Expected, params: &impl Serialize) -> Self {
        ProbeRequest {
            engine,
            label: label.into(),
            expected,
            params: serde_json::to_value(params).expect("engine parameters are plain data"),
        }
    }

    /// The engine's parameters, read back as its own type.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, ProbeError> {
        serde_json::from_value(self.params.clone())
            .map_err(|e| ProbeError::Failed(format!("{} request '{}' is malformed: {e}", self.engine, self.label)))
    }
}
