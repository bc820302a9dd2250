//! Validation of documents from outside: every figure a presenter or
//! `compare` computes with must be a number a measurement can produce. A
//! figure that is not finite, negative where the quantity is physical, or
//! beyond any device or link that exists would print `inf Pb/s` or a
//! 300-digit ratio; the document is refused instead, naming the field by its
//! path in the JSON (`probes[3].summary.bytes_per_sec`).

use crate::{Fleet, Host, Latency, PciLink, Probe, ProbeSpec, ResultDoc, Sample, Soak};

/// The largest payload rate a document may hold: 10^15 B/s (8 Pb/s), far
/// beyond any link, bus or memory a probe can cross.
pub const MAX_BYTES_PER_SEC: f64 = 1e15;
/// The largest operation rate: 10^12 per second.
pub const MAX_OPS_PER_SEC: f64 = 1e12;
/// The longest latency: 10^15 ns (about 11.6 days).
pub const MAX_LATENCY_NS: f64 = 1e15;
/// The longest time span (durations, sample and event times): 10^9 s (31 years).
pub const MAX_SECONDS: f64 = 1e9;

/// The most cores a machine schedules on: Linux's largest NR_CPUS.
pub const MAX_CORES: f64 = 8192.0;

/// A field whose value no measurement can produce.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path} = {value}: {reason}")]
pub struct InvalidField {
    /// Where the field is in the JSON, e.g. `probes[3].summary.bytes_per_sec`.
    pub path: String,
    /// The value as read (`NaN`, `-1`, `1e308`).
    pub value: String,
    /// What a valid value looks like.
    pub reason: String,
}

/// Holds `value` to `0..=max`; `what` says the unit for the message.
fn check(path: impl FnOnce() -> String, value: f64, max: f64, what: &str) -> Result<(), InvalidField> {
    let reason = if !value.is_finite() {
        "not a finite number"
    } else if value < 0.0 {
        "negative, but it is a physical quantity"
    } else if value > max {
        "beyond anything a measurement can produce"
    } else {
        return Ok(());
    };
    Err(InvalidField { path: path(), value: format!("{value:e}"), reason: format!("{reason} ({what}: 0 to {max:e})") })
}

fn check_opt(path: impl FnOnce() -> String, value: Option<f64>, max: f64, what: &str) -> Result<(), InvalidField> {
    value.map_or(Ok(()), |v| check(path, v, max, what))
}

const RATE: &str = "bytes per second";
const OPS: &str = "operations per second";
const NS: &str = "nanoseconds";
const SECONDS: &str = "seconds";
const CORES: &str = "cores";
const SECONDS_EITHER_WAY: &str = "seconds before or after the start";

fn latency(at: &str, l: &Latency) -> Result<(), InvalidField> {
    for (name, v) in [("mean", l.mean), ("p50", l.p50), ("p99", l.p99), ("p999", l.p999), ("max", l.max)] {
        check(|| format!("{at}.{name}"), v, MAX_LATENCY_NS, NS)?;
    }
    check_opt(|| format!("{at}.min"), l.min, MAX_LATENCY_NS, NS)?;
    check_opt(|| format!("{at}.stddev"), l.stddev, MAX_LATENCY_NS, NS)
}

fn probe(at: &str, p: &Probe) -> Result<(), InvalidField> {
    let s = &p.summary;
    check(|| format!("{at}.summary.bytes_per_sec"), s.bytes_per_sec, MAX_BYTES_PER_SEC, RATE)?;
    check_opt(|| format!("{at}.summary.iops"), s.iops, MAX_OPS_PER_SEC, OPS)?;
    check(|| format!("{at}.summary.duration_s"), s.duration_s, MAX_SECONDS, SECONDS)?;
    check_opt(|| format!("{at}.summary.sample_interval_s"), s.sample_interval_s, MAX_SECONDS, SECONDS)?;
    if let Some(c) = &s.contention {
        check(|| format!("{at}.summary.contention.other_busy_cores"), c.other_busy_cores, MAX_CORES, CORES)?;
        check(|| format!("{at}.summary.contention.window_s"), c.window_s, MAX_SECONDS, SECONDS)?;
    }
    if let Some(l) = &s.latency_ns {
        latency(&format!("{at}.summary.latency_ns"), l)?;
    }
    for (j, x) in p.samples.iter().enumerate() {
        sample(&format!("{at}.samples[{j}]"), x)?;
    }
    match &p.spec {
        ProbeSpec::Net(n) => check_opt(
            || format!("{at}.spec.rate_bits_per_sec"),
            n.rate_bits_per_sec,
            MAX_BYTES_PER_SEC * 8.0,
            "bits per second",
        ),
        ProbeSpec::Ping(p) => check(|| format!("{at}.spec.interval_ms"), p.interval_ms, MAX_SECONDS * 1e3, "ms"),
        ProbeSpec::Disk(_) | ProbeSpec::Cpu(_) => Ok(()),
    }
}

fn sample(at: &str, x: &Sample) -> Result<(), InvalidField> {
    check(|| format!("{at}.t_s"), x.t_s, MAX_SECONDS, SECONDS)?;
    check(|| format!("{at}.bytes_per_sec"), x.bytes_per_sec, MAX_BYTES_PER_SEC, RATE)?;
    check_opt(|| format!("{at}.iops"), x.iops, MAX_OPS_PER_SEC, OPS)?;
    check_opt(|| format!("{at}.latency_ns_mean"), x.latency_ns_mean, MAX_LATENCY_NS, NS)?;
    check_opt(|| format!("{at}.latency_ns_p99"), x.latency_ns_p99, MAX_LATENCY_NS, NS)
}

fn pci(at: &str, l: &PciLink) -> Result<(), InvalidField> {
    check(|| format!("{at}.gt_per_sec"), l.gt_per_sec, 1e6, "GT/s")?;
    check_opt(|| format!("{at}.max_gt_per_sec"), l.max_gt_per_sec, 1e6, "GT/s")?;
    check(|| format!("{at}.bytes_per_sec"), l.bytes_per_sec, MAX_BYTES_PER_SEC, RATE)
}

fn host(at_host: &str, h: &Host) -> Result<(), InvalidField> {
    for (i, n) in h.nics.iter().enumerate() {
        let at = format!("{at_host}.nics[{i}]");
        check_opt(|| format!("{at}.ceiling_bytes_per_sec"), n.ceiling_bytes_per_sec, MAX_BYTES_PER_SEC, RATE)?;
        check_opt(|| format!("{at}.bus_ceiling_bytes_per_sec"), n.bus_ceiling_bytes_per_sec, MAX_BYTES_PER_SEC, RATE)?;
        if let Some(l) = &n.pci_link {
            pci(&format!("{at}.pci_link"), l)?;
        }
    }
    for (i, d) in h.block_devices.iter().enumerate() {
        let at = format!("{at_host}.block_devices[{i}]");
        check_opt(|| format!("{at}.ceiling_bytes_per_sec"), d.ceiling_bytes_per_sec, MAX_BYTES_PER_SEC, RATE)?;
        check_opt(|| format!("{at}.sata_link_gbps"), d.sata_link_gbps, 1e6, "Gb/s")?;
        check_opt(|| format!("{at}.sata_max_link_gbps"), d.sata_max_link_gbps, 1e6, "Gb/s")?;
        if let Some(l) = &d.pci_link {
            pci(&format!("{at}.pci_link"), l)?;
        }
    }
    Ok(())
}

fn soak(s: &Soak) -> Result<(), InvalidField> {
    check_opt(|| "soak.planned_s".into(), s.planned_s, MAX_SECONDS, SECONDS)?;
    check(|| "soak.elapsed_s".into(), s.elapsed_s, MAX_SECONDS, SECONDS)?;
    for (i, g) in s.gaps.iter().enumerate() {
        check(|| format!("soak.gaps[{i}].from_s"), g.from_s, MAX_SECONDS, SECONDS)?;
        check(|| format!("soak.gaps[{i}].to_s"), g.to_s, MAX_SECONDS, SECONDS)?;
        check(|| format!("soak.gaps[{i}].duration_s"), g.duration_s, MAX_SECONDS, SECONDS)?;
    }
    // Events may precede the soak: a vmkernel.log holds the link's history.
    for (i, e) in s.events.iter().enumerate() {
        check(|| format!("soak.events[{i}].t_s"), e.t_s.abs(), MAX_SECONDS, SECONDS_EITHER_WAY)?;
        check_opt(|| format!("soak.events[{i}].end_s"), e.end_s.map(f64::abs), MAX_SECONDS, SECONDS_EITHER_WAY)?;
    }
    Ok(())
}

fn fleet(f: &Fleet) -> Result<(), InvalidField> {
    for (i, h) in f.hosts.iter().enumerate() {
        let at = format!("fleet.hosts[{i}]");
        check_opt(|| format!("{at}.clock_offset_s"), h.clock_offset_s.map(f64::abs), MAX_SECONDS, SECONDS_EITHER_WAY)?;
        check_opt(|| format!("{at}.clock_rtt_s"), h.clock_rtt_s, MAX_SECONDS, SECONDS)?;
        check_opt(|| format!("{at}.start_skew_s"), h.start_skew_s, MAX_SECONDS, SECONDS)?;
        if let Some(inventory) = &h.inventory {
            host(&format!("{at}.inventory"), inventory)?;
        }
    }
    for (i, s) in f.sums.iter().enumerate() {
        probe(&format!("fleet.sums[{i}].probe"), &s.probe)?;
        for (j, r) in s.rows.iter().enumerate() {
            check(|| format!("fleet.sums[{i}].rows[{j}].bytes_per_sec"), r.bytes_per_sec, MAX_BYTES_PER_SEC, RATE)?;
            check_opt(|| format!("fleet.sums[{i}].rows[{j}].iops"), r.iops, MAX_OPS_PER_SEC, OPS)?;
        }
    }
    Ok(())
}

impl Probe {
    /// Checks every figure of this probe as [`ResultDoc::validate`] does
    /// (e.g. one a peer sent), the error naming the field under `at`.
    pub fn validate(&self, at: &str) -> Result<(), InvalidField> {
        probe(at, self)
    }
}

impl Sample {
    /// Checks every figure of this sample as [`ResultDoc::validate`] does, the error naming the field under `at`.
    pub fn validate(&self, at: &str) -> Result<(), InvalidField> {
        sample(at, self)
    }
}

impl Host {
    /// Checks every figure of this inventory as [`ResultDoc::validate`]
    /// does (e.g. one a peer sent), the error naming the field under `at`.
    pub fn validate(&self, at: &str) -> Result<(), InvalidField> {
        host(at, self)
    }
}

impl ResultDoc {
    /// Checks every figure of the document (see the module docs); the error
    /// names the first field that fails.
    pub fn validate(&self) -> Result<(), InvalidField> {
        for (i, p) in self.probes.iter().enumerate() {
            probe(&format!("probes[{i}]"), p)?;
        }
        for (i, c) in self.ceilings.iter().enumerate() {
            check(|| format!("ceilings[{i}].bytes_per_sec"), c.bytes_per_sec, MAX_BYTES_PER_SEC, RATE)?;
        }
        host("host", &self.host)?;
        if let Some(f) = &self.fleet {
            fleet(f)?;
        }
        self.soak.as_ref().map_or(Ok(()), soak)
    }
}
