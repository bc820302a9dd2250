//! Post-processing of measured probes that every command applies the same
//! way, so `disk`, `cpu` and `run` hold a probe against the same rules.

use headroom_analysis::{annotate_write_cliff, cpu_probe_against_link, iscsi_data_out_warning, LinkTarget};
use headroom_cpu::Measurement;
use headroom_disk::Rw;
use headroom_result::{Probe, ProbeSpec};

/// A disk probe with the checks that hold only for writes added when it
/// writes: the write cliff, and an iSCSI target's small Data-Out segments.
pub fn with_write_checks(mut probe: Probe) -> Probe {
    let writes = match &probe.spec {
        ProbeSpec::Disk(d) => Rw::parse(&d.rw).is_some_and(Rw::writes),
        _ => false,
    };
    if writes {
        annotate_write_cliff(&mut probe);
        probe.warnings.extend(iscsi_data_out_warning(&probe));
    }
    probe
}

/// A CPU kernel's probe held against the link it feeds (whether one core
/// fills it, and its share).
pub fn cpu_probe_with_link(m: &Measurement, link: &LinkTarget) -> Probe {
    cpu_probe_against_link(m.to_probe(), &m.kernel.name(), link)
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::WarningCode;

    /// A 1 MiB probe through headroom's iSCSI client against a target that
    /// grants 8 KiB Data-Out segments (tgt's and LIO's default).
    fn iscsi_probe(rw: &str) -> Probe {
        serde_json::from_value(serde_json::json!({
            "id": "p", "name": "SEQ1M Q8T1", "kind": "disk",
            "spec": {"rw": rw, "block_size": 1 << 20, "queue_depth": 8, "jobs": 1, "direct": true, "sync": "none",
                     "engine": "iscsi", "path": "iscsi://nas/iqn.x/1",
                     "protocol": {"name": "iscsi", "server": "198.19.251.1:3260",
                                  "granted": {"MaxRecvDataSegmentLength_target": 8192}}},
            "summary": {"duration_s": 1.0, "bytes": 1, "ops": 1, "bytes_per_sec": 1.0, "iops": 1.0}
        }))
        .unwrap()
    }

    fn warned(rw: &str) -> bool {
        with_write_checks(iscsi_probe(rw)).warnings.iter().any(|w| w.code == WarningCode::IscsiSmallDataOut)
    }

    #[test]
    fn small_data_out_segments_are_warned_on_the_probes_that_write() {
        for rw in ["write", "randwrite", "randrw"] {
            assert!(warned(rw), "{rw} was not warned");
        }
        for rw in ["read", "randread"] {
            assert!(!warned(rw), "{rw} was warned: reads cross in the initiator's segments");
        }
    }
}
