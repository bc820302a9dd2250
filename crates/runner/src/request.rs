//! A probe request: what one probe should measure, as plain data. The
//! envelope (engine, label, expected time) is the Runner's; `params` belongs
//! to the engine, which defines its type and reads it back. Also the
//! engines' names and the errors a request can end in.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Which engine runs a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// headroom-disk's engine (`"disk"`).
    Disk,
    /// headroom-net's engine (`"net"`).
    Net,
    /// headroom-cpu's engine (`"cpu"`).
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
    /// The engine that runs it.
    pub engine: EngineKind,
    /// Human name while it runs, e.g. `SEQ1M Q8T1 read`, `TCP up x1`.
    pub label: String,
    /// How long it should take, which decides how progress shows it.
    pub expected: Expected,
    /// The engine's own parameters (e.g. headroom-disk's `DiskRequest`).
    pub params: serde_json::Value,
    /// Where it runs: None here, else the `HOST[:PORT]` of the `headroom
    /// serve` that runs it (the engine placed there, see
    /// [`crate::ProbeEngine::place`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

impl ProbeRequest {
    /// A request for `engine` carrying `params`.
    pub fn new(engine: EngineKind, label: impl Into<String>, expected: Expected, params: &impl Serialize) -> Self {
        ProbeRequest {
            engine,
            label: label.into(),
            expected,
            params: serde_json::to_value(params).expect("engine parameters are plain data"),
            at: None,
        }
    }

    /// The same request, run by the `headroom serve` at `server` (`HOST[:PORT]`).
    pub fn placed_at(mut self, server: impl Into<String>) -> Self {
        self.at = Some(server.into());
        self
    }

    /// The engine's parameters, read back as its own type.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, ProbeError> {
        serde_json::from_value(self.params.clone())
            .map_err(|e| ProbeError::Failed(format!("{} request '{}' is malformed: {e}", self.engine, self.label)))
    }
}
