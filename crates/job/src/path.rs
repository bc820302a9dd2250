//! Live lookups that join this machine's inventory (`headroom-sys`) to the
//! ceilings of `headroom-analysis`: the bus under a path, the link towards a
//! server. The rules themselves (which NIC, which bus figure) live in
//! `headroom_analysis::ceilings`; this file only reads the machine for them.

use headroom_analysis::{bus_ceiling, choose_nic, peer_device_for_path, virtual_disk_warning, LinkCeiling, LinkSpec};
use headroom_disk::BusCeiling;
use headroom_result::{BlockDevice, Host};
use std::path::Path;

/// What the disk holding `path` brings to a run there, from one inventory
/// look-up: its bus ceiling (`bus_ceiling`) and, when a hypervisor presents
/// it, the warning that says so (`virtual_disk_warning`).
#[derive(Debug, Default)]
pub struct DiskUnder {
    /// The bus ceiling; None when the disk or its bus is unknown.
    pub bus: Option<BusCeiling>,
    /// The virtual disk's warning; None for any other disk.
    pub warning: Option<headroom_result::Warning>,
}

/// The disk holding `path` on this machine ([`DiskUnder`]); empty when no
/// block device holds it (tmpfs, a network filesystem).
pub fn disk_under(path: &Path) -> DiskUnder {
    headroom_sys::block_device_holding(path).map(|device| DiskUnder::of(&device)).unwrap_or_default()
}

/// The disk holding `path` on the machine `inventory` describes (a server's,
/// as it sent it), named as that machine's ("nas's vda"); empty when its
/// inventory names no block device there.
pub fn disk_under_on(inventory: &Host, path: &Path) -> DiskUnder {
    peer_device_for_path(inventory, &path.to_string_lossy()).map(|device| DiskUnder::of(&device)).unwrap_or_default()
}

impl DiskUnder {
    fn of(device: &BlockDevice) -> DiskUnder {
        let bus = bus_ceiling(device).map(|ceiling| BusCeiling {
            name: ceiling.name,
            bytes_per_sec: ceiling.bytes_per_sec,
            source: ceiling.source.unwrap_or_default(),
        });
        DiskUnder { bus, warning: virtual_disk_warning(device) }
    }
}

/// The link ceiling of `link` (`--link`) when given, else of the interface
/// the route to HOST leaves through (`choose_nic` with that interface named).
pub fn link_towards(host: &str, port: u16, link: Option<&LinkSpec>) -> LinkCeiling {
    link_towards_from(host, port, link, &headroom_net::Source::default())
}

/// As [`link_towards`], from a chosen source: the interface of `--interface`,
/// or the one owning the `--bind` address, rather than the routing table's.
pub fn link_towards_from(host: &str, port: u16, link: Option<&LinkSpec>, source: &headroom_net::Source) -> LinkCeiling {
    let route = interface_towards(host, port, source);
    let nics = if route.is_some() { headroom_sys::nics(&headroom_sys::SysRoot::live()) } else { Vec::new() };
    LinkCeiling::of_path(link, route.as_deref().and_then(|name| choose_nic(&nics, Some(name))))
}

/// The interface a path to HOST leaves through, by the one rule every
/// command follows: the NIC named with `--interface`, else the one owning the
/// `--bind` address, else the one the routing table sends HOST's first
/// address through. None when HOST does not resolve or no route is known.
pub fn interface_towards(host: &str, port: u16, source: &headroom_net::Source) -> Option<String> {
    match headroom_net::resolve(host, port).ok().and_then(|a| a.first().copied()) {
        Some(peer) => source.interface_towards(peer.ip()),
        None => source.chosen_interface(),
    }
}
