//! Network interfaces from /sys/class/net: driver, speed, duplex, MTU,
//! carrier, kind (physical, virtual, usb, loopback), the PCIe or USB link
//! under the NIC, the TCP ceiling at its speed and MTU, and flags for what
//! caps it.

use super::sysfs::{
    canonical, link_target_name, pci_link_above, read, read_i64, read_u64, uevent, usb_link, usb_speed_above,
};
use crate::pcie::pcie_name;
use crate::{trim_float, SysRoot};
use headroom_result::{Nic, NicKind};
use std::collections::BTreeMap;

/// Drivers of paravirtual or software NICs: their reported speed is not a
/// physical limit.
const VIRTUAL_DRIVERS: &[&str] = &[
    "virtio_net",
    "vmxnet3",
    "hv_netvsc",
    "xen-netfront",
    "veth",
    "bridge",
    "tun",
    "macvlan",
    "ipvlan",
    "vxlan",
    "dummy",
    "ifb",
    "bonding",
    "team",
    "wireguard",
    // Cloud paravirtual NICs (AWS ENA, Google gVNIC): the speed is the instance's nominal figure.
    "ena",
    "gve",
];

/// Drivers of USB network adapters (Realtek, ASIX, Aquantia-in-USB, CDC
/// class drivers, ...). A USB NIC is a known source of drops and link resets.
const USB_DRIVERS: &[&str] = &[
    "r8152",
    "r8153_ecm",
    "ax88179_178a",
    "asix",
    "cdc_ncm",
    "cdc_ether",
    "cdc_mbim",
    "aqc111",
    "lan78xx",
    "smsc95xx",
    "smsc75xx",
    "dm9601",
    "rndis_host",
    "ipheth",
    "qmi_wwan",
    "mcs7830",
    "sr9800",
];

/// `uevent` DEVTYPEs of software interfaces.
const VIRTUAL_DEVTYPES: &[&str] =
    &["bridge", "vlan", "bond", "team", "vxlan", "wireguard", "macvlan", "ipvlan", "veth", "tun", "geneve"];

/// carrier_changes counts both edges; a few are normal (boot, a cable swap).
const CARRIER_FLAP_THRESHOLD: u64 = 10;

/// ARPHRD_LOOPBACK in /sys/class/net/X/type.
const ARPHRD_LOOPBACK: u64 = 772;

/// Every interface in /sys/class/net, sorted by name.
pub fn nics(root: &SysRoot) -> Vec<Nic> {
    let class = root.sys().join("class/net");
    let Ok(entries) = std::fs::read_dir(&class) else { return Vec::new() };
    let mut names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let addresses = if root.is_live() { live_addresses() } else { BTreeMap::new() };
    names
        .iter()
        .map(|name| {
            let mut nic = nic(root, name);
            nic.addresses = addresses.get(name).cloned().unwrap_or_default();
            nic
        })
        .collect()
}

fn nic(root: &SysRoot, name: &str) -> Nic {
    let dir = root.sys().join("class/net").join(name);
    let devices_root = root.sys().join("devices");
    let devices_root = canonical(&devices_root).unwrap_or(devices_root);
    let device = canonical(dir.join("device"));
    let driver = link_target_name(dir.join("device/driver"))
        .or_else(|| uevent(&dir, "DEVTYPE"))
        .or_else(|| root.is_live().then(|| ethtool_driver(name)).flatten());
    let kind = classify(root, name, device.as_deref(), driver.as_deref());

    let mtu = read_u64(dir.join("mtu")).unwrap_or(0) as u32;
    let speed_mbps = read_i64(dir.join("speed")).filter(|s| *s > 0).map(|s| s as u64);
    let duplex = read(dir.join("duplex")).filter(|d| d != "unknown");
    let carrier = read_u64(dir.join("carrier")).map(|c| c == 1);
    let carrier_changes = read_u64(dir.join("carrier_changes"));
    let operstate = read(dir.join("operstate"));
    let mac = read(dir.join("address")).filter(|a| a != "00:00:00:00:00:00");

    let pci_link = device.as_deref().and_then(|d| pci_link_above(d, &devices_root));
    let usb_speed_mbps =
        if kind == NicKind::Usb { device.as_deref().and_then(|d| usb_speed_above(d, &devices_root)) } else { None };

    let (ceiling_bytes_per_sec, link) = crate::port_ceiling(speed_mbps, mtu);

    let mut nic = Nic {
        name: name.to_string(),
        driver,
        kind,
        speed_mbps,
        duplex,
        mtu,
        carrier,
        carrier_changes,
        operstate,
        addresses: Vec::new(),
        pci_link,
        ceiling_bytes_per_sec,
        notes: Vec::new(),
        link,
        mac,
        usb_speed_mbps,
        bus_ceiling_bytes_per_sec: None,
        flags: Vec::new(),
    };
    judge(&mut nic);
    nic
}

fn classify(root: &SysRoot, name: &str, device: Option<&std::path::Path>, driver: Option<&str>) -> NicKind {
    let dir = root.sys().join("class/net").join(name);
    if read_u64(dir.join("type")) == Some(ARPHRD_LOOPBACK) || name == "lo" {
        return NicKind::Loopback;
    }
    let on_usb_bus = device.is_some_and(|d| d.components().any(|c| c.as_os_str().to_string_lossy().starts_with("usb")));
    if on_usb_bus || driver.is_some_and(|d| USB_DRIVERS.contains(&d)) {
        return NicKind::Usb;
    }
    let devtype = uevent(&dir, "DEVTYPE");
    let software = device.is_none()
        || canonical(&dir).is_some_and(|p| p.components().any(|c| c.as_os_str() == "virtual"))
        || devtype.as_deref().is_some_and(|t| VIRTUAL_DEVTYPES.contains(&t))
        || driver.is_some_and(|d| VIRTUAL_DRIVERS.contains(&d));
    if software {
        NicKind::Virtual
    } else {
        NicKind::Physical
    }
}

/// Fills in the bus ceiling, notes and flags: what a user must look at.
fn judge(nic: &mut Nic) {
    let port_bits = nic.speed_mbps.map(|s| s as f64 * 1e6);
    let port_name = nic.link.clone().unwrap_or_else(|| match nic.speed_mbps {
        Some(s) => format!("{s} Mb/s"),
        None => "NIC".into(),
    });

    if let Some(link) = &nic.pci_link {
        nic.bus_ceiling_bytes_per_sec = Some(link.bytes_per_sec);
        let slot = pcie_name(link.gt_per_sec, link.width);
        if port_bits.is_some_and(|p| link.bytes_per_sec * 8.0 < p) {
            nic.flags.push(format!(
                "{port_name} NIC on {slot}: the slot carries {} Gb/s",
                trim_float(link.bytes_per_sec * 8.0 / 1e9)
            ));
        }
        if let (Some(max_gt), Some(max_width)) = (link.max_gt_per_sec, link.max_width) {
            nic.notes.push(format!(
                "PCIe link runs at {slot}; the card can do {}",
                pcie_name(max_gt, max_width).trim_start_matches("PCIe ")
            ));
        }
    }

    if nic.kind == NicKind::Usb {
        let driver = nic.driver.clone().unwrap_or_else(|| "unknown driver".into());
        nic.flags.push(format!("USB NIC ({driver}): USB NICs are a known source of drops and link resets"));
        if let Some(usb) = nic.usb_speed_mbps.and_then(usb_link) {
            nic.bus_ceiling_bytes_per_sec = Some(usb.usable_bytes_per_sec());
            if port_bits.is_some_and(|p| usb.usable_bits_per_sec < p) {
                nic.flags.push(format!(
                    "{port_name} NIC on a {} port: the port carries {} Mb/s",
                    usb.name,
                    trim_float(usb.usable_bits_per_sec / 1e6)
                ));
            }
        }
    }

    if nic.duplex.as_deref() == Some("half") {
        nic.flags.push("half duplex: a duplex mismatch with the switch costs most of the throughput".into());
    }
    if let Some(changes) = nic.carrier_changes.filter(|c| *c > CARRIER_FLAP_THRESHOLD && nic.kind != NicKind::Virtual) {
        nic.flags.push(format!(
            "carrier changed {changes} times since boot: the link flaps (cable, switch port, USB power)"
        ));
    }
    if nic.kind == NicKind::Virtual {
        nic.notes.push(match nic.speed_mbps {
            Some(_) => "virtual NIC: the reported speed is a label, not a physical limit".into(),
            None => "virtual NIC: no physical speed; the host's NIC and CPU set the ceiling".into(),
        });
    }
    if nic.kind == NicKind::Physical && nic.speed_mbps.is_some() && nic.link.is_none() {
        nic.notes.push("speed not in the Ethernet catalog".into());
    }
}

/// The lower of the TCP ceiling at the port's speed and the bus it hangs off,
/// bytes/s ([`Nic::effective_ceiling`]). Which NIC a path uses is chosen in
/// `headroom_analysis::choose_nic`, the one rule for every command.
pub fn effective_ceiling(nic: &Nic) -> Option<f64> {
    nic.effective_ceiling()
}

/// Interface name -> "address/prefix" for every address the kernel knows.
fn live_addresses() -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return map };
    for ifa in addrs {
        let Some(address) = ifa.address else { continue };
        let prefix = |mask: Option<nix::sys::socket::SockaddrStorage>, v6: bool| -> Option<u32> {
            let mask = mask?;
            if v6 {
                Some(mask.as_sockaddr_in6()?.ip().to_bits().count_ones())
            } else {
                Some(mask.as_sockaddr_in()?.ip().to_bits().count_ones())
            }
        };
        let text = if let Some(v4) = address.as_sockaddr_in() {
            let ip = v4.ip();
            match prefix(ifa.netmask, false) {
                Some(p) => format!("{ip}/{p}"),
                None => ip.to_string(),
            }
        } else if let Some(v6) = address.as_sockaddr_in6() {
            let ip = v6.ip();
            match prefix(ifa.netmask, true) {
                Some(p) => format!("{ip}/{p}"),
                None => ip.to_string(),
            }
        } else {
            continue;
        };
        map.entry(ifa.interface_name).or_default().push(text);
    }
    map
}

/// The driver the kernel names for `name` (ETHTOOL_GDRVINFO, what `ethtool -i`
/// prints): the only place a virtual interface (veth, bridge, tun, bonding)
/// names its driver, since it has no `device/driver` link in sysfs.
fn ethtool_driver(name: &str) -> Option<String> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // struct ethtool_drvinfo (linux/ethtool.h): cmd, then 32-byte driver,
    // version, fw_version, bus_info, erom_version, 12 reserved bytes and five
    // u32 counts. Written by hand: libc has the ioctl number, not the struct.
    #[repr(C)]
    struct DrvInfo {
        cmd: u32,
        driver: [u8; 32],
        rest: [u8; 32 * 4 + 12 + 5 * 4],
    }
    const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
    let mut info = DrvInfo { cmd: ETHTOOL_GDRVINFO, driver: [0; 32], rest: [0; 32 * 4 + 12 + 5 * 4] };
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() {
        return None;
    }
    for (dst, src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (&mut info as *mut DrvInfo).cast();
    // SAFETY: a datagram socket only to carry the ioctl; closed on drop.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // SAFETY: req points at a live ifreq whose data pointer points at `info`, both outliving the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    if rc != 0 {
        return None;
    }
    let end = info.driver.iter().position(|&b| b == 0).unwrap_or(info.driver.len());
    std::str::from_utf8(&info.driver[..end]).ok().filter(|d| !d.is_empty()).map(str::to_string)
}
