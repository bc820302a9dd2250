//! Post-processing of measured probes that every command applies the same
//! way, so `disk`, `cpu` and `run` hold a probe against the same rules.

use headroom_analysis::{annotate_write_cliff, cpu_probe_against_link, LinkTarget};
use headroom_cpu::Measurement;
use headroom_disk::Rw;
use headroom_result::{Probe, ProbeSpec};

/// A disk probe with the write-cliff check added when it writes.
pub fn with_write_cliff(mut probe: Probe) -> Probe {
    let writes = match &probe.spec {
        ProbeSpec::Disk(d) => Rw::parse(&d.rw).is_some_and(Rw::writes),
        _ => false,
    };
    if writes {
        annotate_write_cliff(&mut probe);
    }
    probe
}

/// A CPU kernel's probe held against the link it feeds (whether one core
/// fills it, and its share).
pub fn cpu_probe_with_link(m: &Measurement, link: &LinkTarget) -> Probe {
    cpu_probe_against_link(m.to_probe(), &m.kernel.name(), link)
}
