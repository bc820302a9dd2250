//! The soak section of a result document: what `headroom soak` found over
//! hours — gaps, events (link flaps, server outages) and detections (periodic
//! dips, latency drift, write cliffs). Times are seconds since the soak
//! started (`ResultDoc.started_at`), the same clock as `Sample.t_s` of the
//! soak's probes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A soak's course and findings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Soak {
    /// The soak database the document was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// Duration asked for (`--duration`), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_s: Option<f64>,
    /// Time actually soaked, summed over sessions, seconds.
    pub elapsed_s: f64,
    /// Probe turns completed (a cycle of write,read is two).
    pub cycles: u64,
    /// Runs that made up the soak: the first and one per `--resume`.
    pub sessions: u32,
    /// Per-second samples stored in the database.
    pub samples: u64,
    /// Time with no samples because the soak was not running (killed, resumed later).
    #[serde(default)]
    pub gaps: Vec<SoakGap>,
    /// Link flaps, server outages, probe errors, in time order.
    #[serde(default)]
    pub events: Vec<SoakEvent>,
    /// What the detectors found over the whole soak (dips, drift, flaps, a write cliff).
    #[serde(default)]
    pub detections: Vec<Detection>,
}

/// A stretch without samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SoakGap {
    /// Start of the gap, seconds since the soak started.
    pub from_s: f64,
    /// End of the gap (the soak running again), seconds since the soak started.
    pub to_s: f64,
    /// `to_s - from_s`, seconds.
    pub duration_s: f64,
    /// e.g. "interrupted (no clean stop recorded), resumed".
    pub reason: String,
}

words_enum! {
    /// What kind of event a soak recorded.
    SoakEventKind {
        /// A link went down (and up again).
        Flap = "flap",
        /// The far end stopped answering (and came back).
        ServerOutage = "server_outage",
        /// A probe failed.
        ProbeError = "probe_error",
        /// The soak did not run for a while (interrupted, resumed).
        Gap = "gap",
    }
}

words_enum! {
    /// What a soak detector found.
    DetectionKind {
        /// Throughput dips that come back at a steady period.
        PeriodicDips = "periodic_dips",
        /// Latency that grew over the soak.
        LatencyDrift = "latency_drift",
        /// Link flaps during the soak.
        LinkFlaps = "link_flaps",
        /// Link flaps the kernel counted before the soak began.
        LinkFlapsOutsideSoak = "link_flaps_outside_soak",
        /// The far end stopped answering.
        ServerOutage = "server_outage",
        /// Writes fell to a lower rate after a while (a cache filled).
        WriteCliff = "write_cliff",
        /// Writes slowed steadily over the soak.
        WriteDecline = "write_decline",
    }
}

/// Something that happened during a soak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SoakEvent {
    /// When it happened (or began), seconds since the soak started.
    pub t_s: f64,
    /// End of an event with a duration (a flap's "up again"); none while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_s: Option<f64>,
    /// flap, server_outage, probe_error, gap.
    pub kind: SoakEventKind,
    /// sysfs, kernel_log, vmkernel_log or soak.
    pub source: String,
    /// The interface or disk concerned, e.g. `eth0`, when the event names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// One sentence for the user, e.g. "eth0 down".
    pub message: String,
}

/// A detector's finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Detection {
    /// periodic_dips, latency_drift, link_flaps, write_cliff, ...
    pub kind: DetectionKind,
    /// The probe (soak probe name, e.g. write) the finding is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// One sentence, e.g. "12 dips, every 35 min +/- 1 min, each ~40 s long, down to 120 MB/s".
    pub message: String,
    /// The detector's full output (dips, buckets, flaps with times).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}
