//! The keys of `Probe::details` that one crate writes and another reads: the
//! net engine writes the CPU of each end and its one-line diagnosis, analysis
//! reads them (cpu_limits, the verdict) and writes the CPU limit it found.
//! The names are declared here once, with typed readers, so the contract has
//! one owner; the JSON stays `details.<key>` as stored documents have it.

use crate::{CpuLoad, Probe, Side};

/// `details.why`: the net engine's one-line diagnosis of a stream.
pub const WHY: &str = "why";
/// `details.cpu_limit`: the CPU limit analysis found (`side`, `kind`, `evidence`).
pub const CPU_LIMIT: &str = "cpu_limit";

/// `details.cpu_load_local` / `cpu_load_remote`: the CPU of one end over the probe.
pub fn cpu_load_key(side: Side) -> &'static str {
    match side {
        Side::Local => "cpu_load_local",
        Side::Remote => "cpu_load_remote",
    }
}

/// `details.cpu_local_percent` / `cpu_remote_percent`: the percent of one core
/// (stock iperf3 servers and older documents have only this).
pub fn cpu_percent_key(side: Side) -> &'static str {
    match side {
        Side::Local => "cpu_local_percent",
        Side::Remote => "cpu_remote_percent",
    }
}

impl Probe {
    /// The one-line diagnosis (`details.why`), when the engine made one.
    pub fn why(&self) -> Option<&str> {
        self.details.get(WHY).and_then(|w| w.as_str())
    }

    /// The CPU of one end over the probe (`details.cpu_load_*`). An entry
    /// that is not a [`CpuLoad`] (another tool's) reads as absent, and the
    /// caller falls back to [`Probe::cpu_percent`], as for older documents.
    pub fn cpu_load(&self, side: Side) -> Option<CpuLoad> {
        serde_json::from_value(self.details.get(cpu_load_key(side))?.clone()).ok()
    }

    /// The percent of one core one end was busy (`details.cpu_*_percent`).
    pub fn cpu_percent(&self, side: Side) -> Option<f64> {
        self.details.get(cpu_percent_key(side)).and_then(|v| v.as_f64())
    }
}
