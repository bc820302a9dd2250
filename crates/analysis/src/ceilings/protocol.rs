//! The protocol hop: which storage protocol a document's disk probes crossed
//! (headroom's own client, or a kernel mount's filesystem type) and the
//! ceiling its headers leave of the link's TCP goodput, from the limits
//! model (`headroom_limits::protocol`) at the probes' I/O size and what the
//! server granted.

use headroom_limits::protocol::{efficiency, DataDirection, Negotiated, StorageProtocol};
use headroom_limits::Framing;
use headroom_result::{Ceiling, DiskSpec, Hop, ProtocolInfo};

/// Bytes of headers per request for a network filesystem the model does not
/// know (sshfs, 9p, ceph, gluster), approximately (docs/reference/links.md: 150-250).
const OTHER_PROTOCOL_HEADER_BYTES: f64 = 200.0;

/// The storage protocol as the model names it: headroom's own client's
/// (`spec.protocol`), or a kernel mount's filesystem type.
pub fn model_protocol(name: &str, info: Option<&ProtocolInfo>) -> Option<StorageProtocol> {
    let nfs4 = info.and_then(|i| i.version.as_deref()).is_some_and(|v| v.starts_with('4'));
    match name {
        "nfs" if nfs4 => Some(StorageProtocol::Nfs4),
        "nfs4" => Some(StorageProtocol::Nfs4),
        other => StorageProtocol::parse(other),
    }
}

/// The first granted value among `keys` (protocols name them differently).
fn granted(info: Option<&ProtocolInfo>, keys: &[&str]) -> Option<u64> {
    let info = info?;
    keys.iter().find_map(|k| info.granted.get(*k).copied()).filter(|&v| v > 0)
}

/// What the session negotiated, from the probe's `granted` where present.
fn negotiated(protocol: StorageProtocol, info: Option<&ProtocolInfo>, framing: &Framing) -> Negotiated {
    let mut n = Negotiated::defaults(protocol);
    n.segment = u64::from(framing.iscsi_segment);
    match protocol {
        StorageProtocol::Nfs3 | StorageProtocol::Nfs4 => {
            n.max_request = granted(info, &["rsize", "readmax"]).unwrap_or(n.max_request);
        }
        StorageProtocol::Smb => {
            n.max_request = granted(info, &["MaxReadSize", "max_read_size"]).unwrap_or(n.max_request);
        }
        StorageProtocol::Iscsi => {
            // Data-In PDUs carry at most what the initiator said it receives
            // (headroom's client records it under this name).
            n.segment = granted(info, &["MaxRecvDataSegmentLength_initiator"]).unwrap_or(n.segment);
        }
        StorageProtocol::Nbd => {
            n.max_request = granted(info, &["block_size_maximum", "maximum_block_size"]).unwrap_or(n.max_request);
        }
    }
    n
}

/// The protocol hop's ceiling over `link_name`, whose TCP goodput is
/// `link_bytes` per second, for reads of `spec`'s block size (1 MiB for a
/// kernel mount, whose requests are the client's rsize).
pub fn protocol_ceiling(
    name: &str,
    spec: Option<&DiskSpec>,
    link_name: &str,
    link_bytes: f64,
    framing: &Framing,
) -> Ceiling {
    let info = spec.and_then(|s| s.protocol.as_ref());
    let io_size = spec.filter(|s| s.protocol.is_some()).map_or(1 << 20, |s| s.block_size);
    let (bytes, source) = match model_protocol(name, info) {
        Some(protocol) => {
            let n = negotiated(protocol, info, framing);
            let eff = efficiency(protocol, DataDirection::Read, io_size, &n);
            let headers = headroom_limits::protocol::headers_per_io(protocol, DataDirection::Read, io_size, &n);
            (
                link_bytes * eff,
                format!(
                    "{} headers: {headers} B per {} read ({:.2}% of TCP; headroom_limits::protocol)",
                    protocol.name(),
                    headroom_units::format_size(io_size),
                    eff * 100.0
                ),
            )
        }
        None => (
            link_bytes * 1_048_576.0 / (1_048_576.0 + OTHER_PROTOCOL_HEADER_BYTES),
            "~200 bytes of RPC headers per 1 MiB request (approximate)".into(),
        ),
    };
    Ceiling { hop: Hop::Protocol, name: format!("{name} over {link_name}"), bytes_per_sec: bytes, source: Some(source) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_follows_the_io_size_and_what_was_granted() {
        let spec = |bs: u64, granted: &[(&str, u64)]| spec_of("nfs", bs, granted);
        let f = Framing::default();
        let big = protocol_ceiling("nfs", Some(&spec(1 << 20, &[])), "1GbE", 117e6, &f);
        assert!((big.bytes_per_sec - 117e6 * 1048576.0 / 1048708.0).abs() < 1.0, "{big:?}");
        let small_rsize = protocol_ceiling("nfs", Some(&spec(1 << 20, &[("rsize", 65536)])), "1GbE", 117e6, &f);
        assert!(small_rsize.bytes_per_sec < big.bytes_per_sec);
        let mount = protocol_ceiling("fuse.sshfs", None, "1GbE", 117e6, &f);
        assert!(mount.source.unwrap().contains("approximate"));
        assert_eq!(model_protocol("cifs", None), Some(StorageProtocol::Smb));
    }

    #[test]
    fn an_iscsi_read_ceiling_counts_the_data_in_pdus_the_initiator_was_granted() {
        let f = Framing::default();
        let granted = spec_of("iscsi", 1 << 20, &[("MaxRecvDataSegmentLength_initiator", 262_144)]);
        let ceiling = protocol_ceiling("iscsi", Some(&granted), "1GbE", 1e8, &f);
        // Four 256 KiB Data-In PDUs and a SCSI Response: 5 x 48 header bytes.
        assert!((ceiling.bytes_per_sec - 1e8 * 1048576.0 / (1048576.0 + 240.0)).abs() < 1.0, "{ceiling:?}");
        let ungranted = protocol_ceiling("iscsi", Some(&spec_of("iscsi", 1 << 20, &[])), "1GbE", 1e8, &f);
        assert!(ungranted.bytes_per_sec < ceiling.bytes_per_sec, "the framing's 8 KiB PDUs: {ungranted:?}");
    }

    fn spec_of(protocol: &str, bs: u64, granted: &[(&str, u64)]) -> DiskSpec {
        DiskSpec {
            rw: "read".into(),
            block_size: bs,
            queue_depth: 8,
            jobs: 1,
            direct: true,
            direct_flag: headroom_result::DirectFlag::default(),
            sync: "none".into(),
            engine: protocol.into(),
            path: format!("{protocol}://nas/x"),
            rwmix_read: None,
            size: None,
            filesystem: None,
            fio_equivalent: None,
            fixedbufs: false,
            force_async: false,
            protocol: Some(ProtocolInfo {
                name: protocol.into(),
                version: (protocol == "nfs").then(|| "3".into()),
                server: "nas:2049".into(),
                queue_depth_granted: None,
                granted: granted.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                ..Default::default()
            }),
        }
    }
}
