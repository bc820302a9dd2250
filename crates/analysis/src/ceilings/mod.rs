//! What each hop can carry: the one owner of ceilings. Every command asks
//! here rather than computing: `run` and `report` through [`derive`] (the
//! ceilings of a whole document), `net` through [`LinkCeiling`], `cpu`
//! through [`LinkTarget`], `disk` through [`bus_ceiling`].
//!
//! - [`link`](LinkSpec): `--link` (one type, parsed once by clap) and the TCP
//!   or usable rate of a link at the path's MTU;
//! - `nic`: which interface a path leaves through ([`choose_nic`], one rule)
//!   and what its PCIe slot carries;
//! - `bus`: the PCIe/SATA/USB link under a block device;
//! - here: which device and interface a document's probes ran through, the
//!   storage protocol over the link, the CPU kernels' ceilings, and the far
//!   end ([`FarEnd`]: the server's own disk and its bus, from `doc.peers`).
//!
//! Pure arithmetic over the document and the limits model, no I/O. Measured
//! figures are not ceilings and are left to [`crate::verdict`], except CPU
//! kernels, whose throughput is a ceiling for the work they stand for.

mod bus;
mod link;
mod nic;

pub use bus::{bus_ceiling, is_virtual_disk, virtual_disk_warning};
pub use link::{BadLinkSpec, LinkCeiling, LinkSpec, LinkTarget};
pub use nic::choose_nic;

mod protocol;

use headroom_limits::Framing;
use headroom_result::{BlockDevice, Ceiling, Hop, Host, Nic, Probe, ProbeSpec, ResultDoc};
use nic::{framing_of, slot_ceiling};

/// What the user told us about the path that the inventory cannot show.
#[derive(Debug, Clone, Default)]
pub struct PathHints {
    /// `--link SPEC`, the narrowest link between client and server.
    pub link: Option<LinkSpec>,
    /// The interface the network probes leave through, when known.
    pub nic: Option<String>,
}

/// Filesystem types whose data crosses the network: a disk probe on one of
/// them measures the whole path, as a client sees it.
pub const NETWORK_FILESYSTEMS: &[&str] =
    &["nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "ceph", "glusterfs", "fuse.glusterfs"];

/// The network path of a document: the interface, the link and its framing.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkPath {
    /// True when every network probe targets loopback: no NIC, no wire.
    pub loopback: bool,
    /// The interface the probes leave through (`--nic`, else [`choose_nic`]
    /// over the document's `host.nics`); None for loopback or when the
    /// document lists no usable interface.
    pub nic: Option<Nic>,
    /// The link's name and TCP goodput ceiling, bytes/s.
    pub link: Option<(String, f64)>,
    /// Ethernet/IP/TCP framing at the NIC's MTU (1500 when unknown or outside
    /// 576..=9216); sets TCP goodput and the iSCSI protocol ceiling.
    pub framing: Framing,
    /// Where the link figure came from.
    pub link_source: Option<String>,
}

/// Everything the ceilings of one document are derived from.
#[derive(Debug, Clone, PartialEq)]
pub struct PathModel {
    /// Every ceiling found, in no particular order and possibly several per
    /// hop (bus, nic slot, link, protocol, one per CPU probe); [`derive`]
    /// writes it, [`crate::verdict::annotate`] copies it to `doc.ceilings`,
    /// and [`PathModel::ceiling`] picks the lowest of a hop.
    pub ceilings: Vec<Ceiling>,
    /// The network side of the path; None when the document has no network
    /// probe, no network storage protocol and no `--link` was given.
    pub network: Option<NetworkPath>,
    /// The storage protocol in the path when disk probes ran over the network
    /// (nfs, cifs, iscsi, ...), from the filesystem type or device transport.
    pub storage_protocol: Option<String>,
    /// The block device under the disk probes' path, when it could be found.
    pub block_device: Option<BlockDevice>,
    /// The mountpoint under this machine's disk probes (`/mnt/nas`), when known.
    pub mountpoint: Option<String>,
    /// The server that measured its own disk for this document, when one did.
    pub far_end: Option<FarEnd>,
}

/// The far end of the path: a `headroom serve` that ran disk probes on its
/// own disk (`Probe.host`), with what its inventory (`doc.peers`) says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct FarEnd {
    /// The server's name in sentences and the chain: its hostname, as its
    /// probes and inventory carry it, unless this machine has the same
    /// hostname (cloned VMs, two boxes called `truenas`): then the name the
    /// user reached it by (`--server nas.lan`).
    pub host: String,
    /// The block device under the server's probes' path, from its inventory.
    pub block_device: Option<BlockDevice>,
    /// The bus under that device: the same lookup as for this machine's
    /// disks ([`bus_ceiling`]). Kept here, not in `PathModel::ceilings`
    /// (whose ceilings are this machine's and the wire's).
    pub bus: Option<Ceiling>,
    /// The server's memory (its page cache's bound), from its inventory.
    pub memory_bytes: Option<u64>,
}

impl PathModel {
    /// The lowest ceiling recorded for `hop`.
    pub fn ceiling(&self, hop: Hop) -> Option<&Ceiling> {
        self.ceilings.iter().filter(|c| c.hop == hop).min_by(|a, b| a.bytes_per_sec.total_cmp(&b.bytes_per_sec))
    }
}

/// Derives the ceilings of every hop the document's probes crossed.
pub fn derive(doc: &ResultDoc, hints: &PathHints) -> Result<PathModel, BadLinkSpec> {
    let link_spec = hints.link.as_ref();
    if let Some(spec) = link_spec.filter(|s| !s.carries_tcp()) {
        return Err(BadLinkSpec { input: spec.input.clone(), reason: format!("{} is not a network link", spec.name) });
    }
    let mut ceilings = Vec::new();

    // This machine's disk probes; those a server ran on its own disk are the far end's.
    let disk_path = doc.probes.iter().filter(|p| !p.ran_remotely()).find_map(|p| match &p.spec {
        ProbeSpec::Disk(d) => Some(d),
        _ => None,
    });
    // A probe through headroom's own protocol client names its protocol; the
    // largest block size sets the protocol hop's ceiling.
    let share_spec = doc
        .probes
        .iter()
        .filter_map(|p| match &p.spec {
            ProbeSpec::Disk(d) if d.protocol.is_some() && !p.ran_remotely() => Some(d),
            _ => None,
        })
        .max_by_key(|d| d.block_size);
    let disk_path = share_spec.or(disk_path);
    let block_device = disk_path.filter(|d| d.protocol.is_none()).and_then(|d| device_for_path(&doc.host, &d.path));
    let mount = disk_path.filter(|d| d.protocol.is_none()).and_then(|d| mount_for_path(&doc.host, &d.path));
    let fs_type = disk_path.and_then(|d| d.filesystem.clone().or_else(|| mount.as_ref().map(|m| m.1.clone())));
    let storage_protocol = match (&fs_type, &block_device) {
        _ if share_spec.is_some() => share_spec.and_then(|d| d.protocol.as_ref()).map(|p| p.name.clone()),
        (Some(fs), _) if NETWORK_FILESYSTEMS.contains(&fs.as_str()) => Some(fs.clone()),
        (_, Some(dev)) if dev.transport.as_deref() == Some("iscsi") => Some("iscsi".to_string()),
        _ => None,
    };

    if let Some(dev) = block_device.as_ref().filter(|_| storage_protocol.is_none()) {
        if let Some(c) = bus_ceiling(dev) {
            ceilings.push(c);
        }
    }

    let has_network_probe = doc.probes.iter().any(|p| matches!(p.spec, ProbeSpec::Net(_)));
    let network = if has_network_probe || storage_protocol.is_some() || link_spec.is_some() {
        Some(network_path(doc, hints, link_spec, share_spec.and_then(|d| d.protocol.as_ref())))
    } else {
        None
    };
    if let Some(net) = &network {
        ceilings.extend(net.nic.as_ref().and_then(slot_ceiling));
        if let Some((name, bytes)) = &net.link {
            ceilings.push(Ceiling {
                hop: Hop::Link,
                name: name.clone(),
                bytes_per_sec: *bytes,
                source: net.link_source.clone(),
            });
            if let Some(proto) = &storage_protocol {
                ceilings.push(protocol::protocol_ceiling(proto, share_spec, name, *bytes, &net.framing));
            }
        }
    }

    for probe in &doc.probes {
        if let ProbeSpec::Cpu(cpu) = &probe.spec {
            if probe.summary.bytes_per_sec > 0.0 {
                ceilings.push(Ceiling {
                    hop: Hop::Cpu,
                    name: format!("{} on {} thread(s)", cpu.kernel, cpu.threads),
                    bytes_per_sec: probe.summary.bytes_per_sec,
                    source: Some(format!("cpu probe {}", probe.id)),
                });
            }
        }
    }

    let mountpoint = mount.map(|m| m.0);
    Ok(PathModel { ceilings, network, storage_protocol, block_device, mountpoint, far_end: far_end(doc) })
}

/// The server whose own disk the document measured: the host of its first
/// remote disk probe, its block device and bus looked up in its inventory
/// (the peer of the same hostname) as [`device_for_path`] and
/// [`bus_ceiling`] do for this machine's.
fn far_end(doc: &ResultDoc) -> Option<FarEnd> {
    let (host, path) = doc.probes.iter().find_map(|p| match (&p.spec, &p.host) {
        (ProbeSpec::Disk(d), Some(h)) => Some((h.clone(), d.path.clone())),
        _ => None,
    })?;
    let inventory = doc.peers.iter().find(|peer| peer.hostname.as_deref() == Some(host.as_str()));
    let host = match (doc.host.hostname.as_deref(), inventory.and_then(|i| i.reached_as.as_deref())) {
        (Some(here), Some(typed)) if here == host => typed.to_string(),
        (Some(here), None) if here == host => format!("{host} (the server)"),
        _ => host,
    };
    let block_device = inventory.and_then(|i| device_for_path(i, &path));
    let bus = block_device.as_ref().and_then(bus_ceiling);
    Some(FarEnd { host, block_device, bus, memory_bytes: inventory.and_then(|i| i.memory_bytes) })
}

/// The mount (mountpoint, fstype, device) holding `path`: the longest mountpoint prefix.
fn mount_for_path(host: &Host, path: &str) -> Option<(String, String, String)> {
    host.filesystems
        .iter()
        .filter(|f| path_is_under(path, &f.mountpoint))
        .max_by_key(|f| f.mountpoint.len())
        .map(|f| (f.mountpoint.clone(), f.fstype.clone(), f.device.clone()))
}

fn path_is_under(path: &str, mountpoint: &str) -> bool {
    mountpoint == "/" || path == mountpoint || path.strip_prefix(mountpoint).is_some_and(|rest| rest.starts_with('/'))
}

/// The block device holding `path` on the machine `inventory` describes (a
/// server's, as it sent it), named as that machine's ("nas's vda") so that a
/// line about it cannot be taken for this machine's disk.
pub fn peer_device_for_path(inventory: &Host, path: &str) -> Option<BlockDevice> {
    let mut device = device_for_path(inventory, path)?;
    if let Some(host) = inventory.reached_as.as_ref().or(inventory.hostname.as_ref()) {
        device.name = format!("{host}'s {}", device.name);
    }
    Some(device)
}

/// The block device a disk probe's path lives on: the device itself when the
/// probe ran on one, else the device of the filesystem holding the path; a
/// partition maps to its disk (nvme0n1p2 -> nvme0n1, sda1 -> sda).
pub fn device_for_path(host: &Host, path: &str) -> Option<BlockDevice> {
    let device = if path.starts_with("/dev/") { path.to_string() } else { mount_for_path(host, path)?.2 };
    let name = device.rsplit('/').next()?.to_string();
    let devices = &host.block_devices;
    if let Some(d) = devices.iter().find(|d| d.name == name) {
        return Some(d.clone());
    }
    devices
        .iter()
        .filter(|d| name.starts_with(&d.name) && partition_suffix(&name[d.name.len()..]))
        .max_by_key(|d| d.name.len())
        .cloned()
}

fn partition_suffix(rest: &str) -> bool {
    let digits = rest.strip_prefix('p').unwrap_or(rest);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// HOST of a network probe's `HOST:PORT` peer (`[V6]:PORT` too).
pub(crate) fn peer_host(peer: &str) -> &str {
    peer.rsplit_once(':').map(|(h, _)| h).unwrap_or(peer).trim_matches(['[', ']'])
}

fn is_loopback_peer(peer: &str) -> bool {
    let host = peer_host(peer);
    host == "localhost"
        || host == "::1"
        || host.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
        || host.parse::<std::net::Ipv6Addr>().is_ok_and(|a| a.is_loopback())
}

/// Chooses the interface and link of the network probes.
fn network_path(
    doc: &ResultDoc,
    hints: &PathHints,
    link_spec: Option<&LinkSpec>,
    share: Option<&headroom_result::ProtocolInfo>,
) -> NetworkPath {
    let peers: Vec<&str> = doc
        .probes
        .iter()
        .filter_map(|p: &Probe| match &p.spec {
            ProbeSpec::Net(n) => Some(n.peer.as_str()),
            ProbeSpec::Ping(n) => Some(n.peer.as_str()),
            _ => None,
        })
        .chain(share.map(|s| s.server.as_str()))
        .collect();
    let loopback = !peers.is_empty() && peers.iter().all(|p| is_loopback_peer(p)) && link_spec.is_none();
    // A share's connection and a network test record the NIC they left
    // through (--interface or --bind, else the route's, on the machine that
    // ran them: a fleet's agent too): the NIC to hold them against when the
    // caller named none.
    let net_recorded = doc.probes.iter().find_map(|p| match &p.spec {
        ProbeSpec::Net(n) if !p.ran_remotely() => n.interface.as_deref(),
        _ => None,
    });
    let named = hints.nic.as_deref().or(share.and_then(|s| s.interface.as_deref())).or(net_recorded);
    let nic = if loopback { None } else { choose_nic(&doc.host.nics, named).cloned() };
    let framing = framing_of(nic.as_ref());
    let (link, link_source) = match link::path_link(link_spec, nic.as_ref()) {
        Some((name, bytes, source)) => (Some((name, bytes)), Some(source)),
        None => (None, None),
    };
    NetworkPath { loopback, nic, link, framing, link_source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::{DiskSpec, Filesystem, PciLink, Summary};

    fn disk_probe(path: &str) -> Probe {
        Probe {
            id: "d".into(),
            name: String::new(),
            spec: ProbeSpec::Disk(DiskSpec {
                rw: "read".into(),
                block_size: 1 << 20,
                queue_depth: 8,
                jobs: 1,
                direct: true,
                direct_flag: headroom_result::DirectFlag::default(),
                sync: "none".into(),
                engine: "io_uring".into(),
                path: path.into(),
                rwmix_read: None,
                size: None,
                filesystem: None,
                fio_equivalent: None,
                fixedbufs: false,
                force_async: false,
                protocol: None,
            }),
            summary: Summary { bytes_per_sec: 1.0, duration_s: 1.0, ..Summary::default() },
            samples: vec![],
            histogram: None,
            warnings: vec![],
            details: Default::default(),
            host: None,
        }
    }

    #[test]
    fn partition_maps_to_its_disk_and_sata_link_gives_the_bus_ceiling() {
        let mut doc = ResultDoc::new("2026-11-21T00:00:00Z");
        doc.host.filesystems.push(Filesystem {
            mountpoint: "/".into(),
            fstype: "ext4".into(),
            device: "/dev/sda2".into(),
            ..Default::default()
        });
        doc.host.filesystems.push(Filesystem {
            mountpoint: "/data".into(),
            fstype: "xfs".into(),
            device: "/dev/nvme0n1p1".into(),
            ..Default::default()
        });
        doc.host.block_devices.push(BlockDevice {
            name: "sda".into(),
            sata_link_gbps: Some(6.0),
            ..Default::default()
        });
        doc.host.block_devices.push(BlockDevice {
            name: "nvme0n1".into(),
            pci_link: Some(PciLink { gt_per_sec: 8.0, width: 4, bytes_per_sec: 0.0, ..Default::default() }),
            ..Default::default()
        });
        doc.probes.push(disk_probe("/home/me"));
        let m = derive(&doc, &PathHints::default()).unwrap();
        assert_eq!(m.ceiling(Hop::Bus).unwrap().bytes_per_sec, 600e6);
        doc.probes[0] = disk_probe("/data/x");
        let m = derive(&doc, &PathHints::default()).unwrap();
        let bus = m.ceiling(Hop::Bus).unwrap();
        assert!(bus.name.starts_with("PCIe 3.0 x4"), "{}", bus.name);
        assert!((bus.bytes_per_sec - 8e9 * 4.0 * 128.0 / 130.0 / 8.0).abs() < 1.0);
    }

    #[test]
    fn nic_speed_and_mtu_give_the_tcp_link_ceiling_but_a_veth_speed_does_not() {
        let mut doc = ResultDoc::new("2026-11-21T00:00:00Z");
        doc.host.nics.push(Nic {
            name: "eth0".into(),
            kind: headroom_result::NicKind::Physical,
            speed_mbps: Some(1000),
            mtu: 1500,
            ..Default::default()
        });
        let m = derive(&doc, &PathHints { link: Some("1gbe".parse().unwrap()), nic: None }).unwrap();
        assert!((m.ceiling(Hop::Link).unwrap().bytes_per_sec - 117.685e6).abs() < 0.01e6);
        doc.host.nics[0].kind = headroom_result::NicKind::Virtual;
        doc.probes.push(disk_probe("/"));
        doc.probes[0].spec = ProbeSpec::Net(headroom_result::NetSpec {
            test: "tcp".into(),
            streams: 1,
            protocol: "headroom".into(),
            peer: "10.9.0.2:5201".into(),
            rate_bits_per_sec: None,
            bytes: None,
            ..Default::default()
        });
        let m = derive(&doc, &PathHints::default()).unwrap();
        assert!(m.ceiling(Hop::Link).is_none(), "a virtual NIC's reported speed is no ceiling");
    }

    #[test]
    fn a_share_is_held_against_the_nic_its_connection_left_through() {
        let mut doc = ResultDoc::new("2026-11-26T00:00:00Z");
        for (name, speed, mtu) in [("eth0", 1000, 1500), ("eth1", 10_000, 9000)] {
            doc.host.nics.push(Nic {
                name: name.into(),
                kind: headroom_result::NicKind::Physical,
                speed_mbps: Some(speed),
                mtu,
                ..Default::default()
            });
        }
        let mut probe = disk_probe("nbd://192.0.2.2:10809/disk");
        let ProbeSpec::Disk(spec) = &mut probe.spec else { unreachable!() };
        spec.protocol = Some(headroom_result::ProtocolInfo {
            name: "nbd".into(),
            server: "192.0.2.2:10809".into(),
            source_address: Some("192.0.2.1".into()),
            interface: Some("eth0".into()),
            ..Default::default()
        });
        doc.probes.push(probe);
        let m = derive(&doc, &PathHints::default()).unwrap();
        // Not the fastest NIC (eth1, which choose_nic ranks first): the one recorded.
        assert_eq!(m.network.as_ref().and_then(|n| n.nic.as_ref()).map(|n| n.name.as_str()), Some("eth0"));
        // A NIC the caller named still wins.
        let m = derive(&doc, &PathHints { link: None, nic: Some("eth1".into()) }).unwrap();
        assert_eq!(m.network.as_ref().and_then(|n| n.nic.as_ref()).map(|n| n.name.as_str()), Some("eth1"));
        // A network test records its NIC the same way (a fleet agent's own).
        doc.probes[0].spec = ProbeSpec::Net(headroom_result::NetSpec {
            test: "tcp".into(),
            streams: 1,
            peer: "192.0.2.2:5201".into(),
            interface: Some("eth0".into()),
            ..Default::default()
        });
        let m = derive(&doc, &PathHints::default()).unwrap();
        assert_eq!(m.network.as_ref().and_then(|n| n.nic.as_ref()).map(|n| n.name.as_str()), Some("eth0"));
    }
}
