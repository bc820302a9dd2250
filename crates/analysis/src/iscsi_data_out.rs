//! iSCSI writes cut small by the target: how many Data-Out PDUs and R2T
//! requests each write of a probe needed under the keys its target granted,
//! and the warning when the target's MaxRecvDataSegmentLength (8 KiB by
//! default in LIO and tgt) splits every large write into many PDUs, which
//! the target handles one by one. Reads only the probe's `spec.protocol`;
//! the figures are left as measured.

use headroom_result::{Probe, ProbeSpec, ProtocolInfo, Warning, WarningCode};
use headroom_units::format_size_compact;

/// Data-Out segments below this size are a target's default rather than a
/// choice (LIO and tgt grant 8192; open-iscsi, libiscsi and Windows' initiator
/// offer 262144 for their own receiving side), and split a 1 MiB write into
/// 16 PDUs or more.
pub const SMALL_DATA_OUT: u64 = 64 * 1024;

/// What one write of `block_size` bytes costs under the granted keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteShape {
    /// The most data one Data-Out PDU (or the command's immediate data) carries.
    pub segment: u64,
    /// PDUs carrying the write's data (immediate data counted as one).
    pub data_pdus: u64,
    /// R2T requests the initiator waits for before sending the rest.
    pub r2ts: u64,
}

/// The shape of a write of `block_size` bytes under `info`'s granted keys;
/// `None` when the target's segment was not recorded.
pub fn write_shape(block_size: u64, info: &ProtocolInfo) -> Option<WriteShape> {
    let key = |k: &str| info.granted.get(k).copied();
    let segment = key("MaxRecvDataSegmentLength_target").filter(|&s| s > 0)?;
    let first_burst = key("FirstBurstLength").unwrap_or(65_536);
    let max_burst = key("MaxBurstLength").filter(|&b| b > 0).unwrap_or(262_144);
    // RFC 7143 defaults: InitialR2T=Yes, ImmediateData=Yes.
    let (initial_r2t, immediate) = (key("InitialR2T").unwrap_or(1) == 1, key("ImmediateData").unwrap_or(1) == 1);
    let unsolicited = match (initial_r2t, immediate) {
        (false, _) => first_burst,
        (true, true) => first_burst.min(segment),
        (true, false) => 0,
    }
    .min(block_size);
    let solicited = block_size - unsolicited;
    // Each R2T asks for a burst of up to MaxBurstLength, sent in segments.
    let (full_bursts, last_burst) = (solicited / max_burst, solicited % max_burst);
    let solicited_pdus = full_bursts * max_burst.div_ceil(segment) + last_burst.div_ceil(segment);
    Some(WriteShape {
        segment,
        data_pdus: unsolicited.div_ceil(segment) + solicited_pdus,
        r2ts: solicited.div_ceil(max_burst),
    })
}

/// The `iscsi_small_data_out` warning of a probe through headroom's iSCSI
/// client whose target granted Data-Out segments under [`SMALL_DATA_OUT`]
/// and smaller than the probe's blocks. Only for probes that write: the
/// caller decides that from the probe's access pattern (reads cross in the
/// initiator's segments, which this does not look at).
pub fn iscsi_data_out_warning(probe: &Probe) -> Option<Warning> {
    let ProbeSpec::Disk(d) = &probe.spec else { return None };
    let info = d.protocol.as_ref().filter(|p| p.name == "iscsi")?;
    let shape = write_shape(d.block_size, info).filter(|s| s.segment < SMALL_DATA_OUT && d.block_size > s.segment)?;
    let r2ts = match shape.r2ts {
        0 => String::new(),
        n => format!(" after {n} R2T request{} from the target", if n == 1 { "" } else { "s" }),
    };
    let message = format!(
        "{}: the target accepts at most {} of data per PDU (its MaxRecvDataSegmentLength), so each {} write crossed as {} PDUs{r2ts}; the target handles every PDU, so its CPU rather than the link may hold these writes. Raise it on the target to 262144 (LIO: `targetcli /iscsi/IQN/tpg1 set parameter MaxRecvDataSegmentLength=262144`; tgt: `tgtadm --lld iscsi --op update --mode target --tid N --name MaxRecvDataSegmentLength --value 262144`) and log in again: in headroom's lab, 1M writes at QD8 against tgt ran 1.6x faster",
        probe.name,
        format_size_compact(shape.segment),
        format_size_compact(d.block_size),
        shape.data_pdus,
    );
    Some(Warning::new(WarningCode::IscsiSmallDataOut, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(keys: &[(&str, u64)]) -> ProtocolInfo {
        ProtocolInfo {
            name: "iscsi".into(),
            server: "198.19.251.1:3260".into(),
            granted: keys.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        }
    }

    /// tgt's and LIO's defaults, as tgt 1.0.85 granted them in the lab.
    const TGT: &[(&str, u64)] = &[
        ("FirstBurstLength", 65_536),
        ("ImmediateData", 1),
        ("InitialR2T", 1),
        ("MaxBurstLength", 262_144),
        ("MaxOutstandingR2T", 1),
        ("MaxRecvDataSegmentLength_target", 8192),
    ];

    #[test]
    fn a_1m_write_under_tgts_defaults_is_128_pdus_after_4_r2ts() {
        // 8 KiB immediate, then 4 bursts (256, 256, 256, 248 KiB) of 8 KiB PDUs.
        assert_eq!(write_shape(1 << 20, &granted(TGT)), Some(WriteShape { segment: 8192, data_pdus: 128, r2ts: 4 }));
        // A write that fits the immediate data needs no R2T.
        assert_eq!(write_shape(4096, &granted(TGT)), Some(WriteShape { segment: 8192, data_pdus: 1, r2ts: 0 }));
        let tuned = [("InitialR2T", 0), ("FirstBurstLength", 262_144), ("MaxRecvDataSegmentLength_target", 262_144)];
        let mut keys = TGT.to_vec();
        keys.extend(tuned);
        // 256 KiB unsolicited (immediate + none more), then 3 bursts of one PDU each.
        assert_eq!(write_shape(1 << 20, &granted(&keys)), Some(WriteShape { segment: 262_144, data_pdus: 4, r2ts: 3 }));
        assert_eq!(write_shape(1 << 20, &granted(&[])), None, "no target segment recorded");
    }

    fn probe(rw: &str, bs: u64, keys: &[(&str, u64)]) -> Probe {
        let mut p: Probe = serde_json::from_value(serde_json::json!({
            "id": "w", "name": "SEQ1M Q8T1 write", "kind": "disk",
            "spec": {"rw": rw, "block_size": bs, "queue_depth": 8, "jobs": 1, "direct": true, "sync": "none",
                     "engine": "iscsi", "path": "iscsi://nas/iqn.x/1"},
            "summary": {"duration_s": 1.0, "bytes": 1, "ops": 1, "bytes_per_sec": 1.0, "iops": 1.0}
        }))
        .unwrap();
        let ProbeSpec::Disk(d) = &mut p.spec else { unreachable!() };
        d.protocol = Some(granted(keys));
        p
    }

    #[test]
    fn only_blocks_larger_than_a_small_target_segment_are_warned() {
        let w = iscsi_data_out_warning(&probe("write", 1 << 20, TGT)).expect("1M writes in 8 KiB PDUs");
        assert_eq!(w.code, WarningCode::IscsiSmallDataOut);
        assert!(w.message.contains("at most 8 KiB of data per PDU"), "{}", w.message);
        assert!(w.message.contains("each 1 MiB write crossed as 128 PDUs after 4 R2T requests"), "{}", w.message);
        assert!(iscsi_data_out_warning(&probe("write", 4096, TGT)).is_none(), "4K writes fit one PDU");
        let mut big = TGT.to_vec();
        big.push(("MaxRecvDataSegmentLength_target", 262_144));
        assert!(iscsi_data_out_warning(&probe("write", 1 << 20, &big)).is_none(), "a raised segment is not warned");
        let mut nfs = probe("write", 1 << 20, TGT);
        let ProbeSpec::Disk(d) = &mut nfs.spec else { unreachable!() };
        d.protocol.as_mut().unwrap().name = "nfs".into();
        assert!(iscsi_data_out_warning(&nfs).is_none());
    }
}
