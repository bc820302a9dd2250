//! The keys of `Probe::details` that one crate writes and another reads: the
//! net engine writes the CPU of each end and its one-line diagnosis, analysis
//! reads them (cpu_limits, the verdict) and writes the CPU limit it found.
//! The names are declared here once, with typed readers, so the contract has
//! one owner; the JSON stays `details.<key>` as stored documents have it.

use crate::{CpuLoad, Probe, Side};

/// `details.why`: the net engine's one-line diagnosis of a stream.
pub const WHY: &str = "why";
/// A local disk probe's `IoLimit`: the cgroup's I/O limit on the tested device.
pub const IO_LIMIT: &str = "io_limit";
/// A cpu probe's `CgroupCpu`: the measuring process's CPU quota and what it throttled.
pub const CGROUP: &str = "cgroup";
/// A cpu probe's `RunnerUp`: the slower of two implementations timed for its kernel.
pub const RUNNER_UP: &str = "runner_up";
/// `details.cpu_limit`: the CPU limit analysis found (`side`, `kind`, `evidence`).
pub const CPU_LIMIT: &str = "cpu_limit";

/// `details.error`: why a net probe ended before its time (the figures
/// are what it measured until then).
pub const ERROR: &str = "error";
/// `details.stopped_early`: the disk test was stopped (Ctrl-C, a deadline)
/// before its time; its figures cover what ran.
pub const STOPPED_EARLY: &str = "stopped_early";
/// `details.dips` of a soak probe (and of a `periodic_dips` detection): the
/// dips found, each with `start_s` and `end_s` (and `probe` on a detection).
pub const DIPS: &str = "dips";

/// `details.sent`: echo requests a ping probe sent.
pub const SENT: &str = "sent";
/// `details.received`: echo replies a ping probe received.
pub const RECEIVED: &str = "received";
/// `details.loss_percent` of a ping probe (and inside `details.udp` of a UDP probe).
pub const LOSS_PERCENT: &str = "loss_percent";
/// `details.jitter_ms` of a ping probe (and inside `details.udp` of a UDP probe).
pub const JITTER_MS: &str = "jitter_ms";
/// `details.attempts`: connections a connect-time probe tried.
pub const ATTEMPTS: &str = "attempts";
/// `details.failures`: connections a connect-time probe could not make.
pub const FAILURES: &str = "failures";
/// `details.tcp_info`: the sending sockets' TCP state (retransmits, srtt, cwnd), merged.
pub const TCP_INFO: &str = "tcp_info";
/// `details.skip_rx_copy` of a TCP probe run with `--skip-rx-copy`: whether
/// each end's receivers (`local`, `remote`) dropped the bytes in the kernel
/// instead of copying them to user space (absent: that end received nothing
/// or did not say).
pub const SKIP_RX_COPY: &str = "skip_rx_copy";
/// `details.zerocopy` of a TCP probe run with `--zerocopy`: whether each
/// end's senders (`local`, `remote`) had the kernel send every byte by
/// reference, without copying it in (absent: that end sent nothing or did
/// not say).
pub const ZEROCOPY: &str = "zerocopy";
/// `details.udp_offload` of a UDP probe run with `--gsro`: per end
/// (`local`, `remote`), `gso` (that end sent bursts of datagrams in one
/// call) when it sent and `gro` (its kernel handed it coalesced datagrams,
/// split back on arrival) when it received.
pub const UDP_OFFLOAD: &str = "udp_offload";
/// `details.busy_poll` of a request/response probe run with `--busy-poll`:
/// per end (`local`, `remote`), `spin` (it read and wrote on a non-blocking
/// socket, spinning) and `so_busy_poll` (its kernel accepted SO_BUSY_POLL).
pub const BUSY_POLL: &str = "busy_poll";
/// `details.udp`: what the receiving end of a UDP probe counted (packets, lost,
/// loss_percent, out_of_order, jitter_ms).
pub const UDP: &str = "udp";

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

    /// The cgroup I/O limit a local disk probe recorded (`details.io_limit`).
    pub fn io_limit(&self) -> Option<crate::IoLimit> {
        serde_json::from_value(self.details.get(IO_LIMIT)?.clone()).ok()
    }

    /// Why the probe ended early (`details.error`), when it did.
    pub fn error(&self) -> Option<&str> {
        self.details.get(ERROR).and_then(|e| e.as_str())
    }

    /// Whether the test was stopped before its time (`details.stopped_early`).
    pub fn stopped_early(&self) -> bool {
        self.details.contains_key(STOPPED_EARLY)
    }

    /// The percent of one core one end was busy (`details.cpu_*_percent`).
    pub fn cpu_percent(&self, side: Side) -> Option<f64> {
        self.details.get(cpu_percent_key(side)).and_then(|v| v.as_f64())
    }
}

// -- pres-disk --

/// `details.write_cliff` of a disk write probe, and the details of soak's
/// `write_cliff` detection: one cliff, stored under two sets of names.
pub const WRITE_CLIFF: &str = "write_cliff";

/// A write cliff as stored. The probe's details say `bytes_per_sec_before`
/// / `_after` (and `bytes_before`); soak's detection says
/// `rate_before_bytes_per_sec` / `rate_after_bytes_per_sec` (no bytes). Both
/// load into this; each writer keeps its own names so documents stay as
/// they were.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WriteCliffDetails {
    /// Seconds into the measured phase when the rate fell.
    pub at_s: f64,
    /// Bytes written before the cliff (disk probes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_before: Option<f64>,
    /// The write rate before the cliff, bytes per second (soak writes it as
    /// `rate_before_bytes_per_sec`).
    #[serde(alias = "rate_before_bytes_per_sec")]
    pub bytes_per_sec_before: f64,
    /// The write rate after the cliff, bytes per second (soak: `rate_after_bytes_per_sec`).
    #[serde(alias = "rate_after_bytes_per_sec")]
    pub bytes_per_sec_after: f64,
}

impl WriteCliffDetails {
    /// The JSON of `probe.details.write_cliff` (disk's names).
    pub fn probe_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain numbers serialise")
    }

    /// The JSON of a soak `write_cliff` detection's details (soak's names).
    pub fn detection_json(&self) -> serde_json::Value {
        serde_json::json!({
            "at_s": self.at_s,
            "rate_before_bytes_per_sec": self.bytes_per_sec_before,
            "rate_after_bytes_per_sec": self.bytes_per_sec_after,
        })
    }
}

impl Probe {
    /// The write cliff found in this probe (`details.write_cliff`).
    pub fn write_cliff(&self) -> Option<WriteCliffDetails> {
        serde_json::from_value(self.details.get(WRITE_CLIFF)?.clone()).ok()
    }
}

impl crate::Detection {
    /// The cliff of a `write_cliff` detection.
    pub fn write_cliff(&self) -> Option<WriteCliffDetails> {
        (self.kind == crate::DetectionKind::WriteCliff)
            .then(|| serde_json::from_value(self.details.clone()).ok())
            .flatten()
    }
}

#[cfg(test)]
mod write_cliff_tests {
    use super::*;

    #[test]
    fn both_spellings_of_a_cliff_load_and_each_writes_its_own() {
        let disk = serde_json::json!({"at_s": 3.0, "bytes_before": 8e8, "bytes_per_sec_after": 3e7, "bytes_per_sec_before": 2.7e8});
        let soak =
            serde_json::json!({"at_s": 3.0, "rate_before_bytes_per_sec": 2.7e8, "rate_after_bytes_per_sec": 3e7});
        let from_disk: WriteCliffDetails = serde_json::from_value(disk.clone()).unwrap();
        let from_soak: WriteCliffDetails = serde_json::from_value(soak.clone()).unwrap();
        assert_eq!(from_disk.probe_json(), disk);
        assert_eq!(from_soak.detection_json(), soak);
        assert_eq!(WriteCliffDetails { bytes_before: None, ..from_disk }, from_soak);
    }
}
