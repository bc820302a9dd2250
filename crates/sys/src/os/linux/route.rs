//! Which interface carries traffic to an address: the net command puts the
//! measured figure next to that interface's ceiling (the interface is named to
//! `headroom_analysis::choose_nic`, the one NIC rule).
//!
//! Longest-prefix match over the main routing table as /proc/net/route and
//! /proc/net/ipv6_route show it; addresses of this machine and the loopback
//! range go over `lo`. On a live machine a connected UDP socket (no packet is
//! sent) settles the cases the table does not show, such as policy routing.

use crate::SysRoot;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

const RTF_UP: u32 = 0x0001;
const RTF_REJECT: u32 = 0x0200;
const RTF_LOCAL: u32 = 0x8000_0000;

/// The interface this machine would send packets to `addr` through.
pub fn route_interface(addr: IpAddr) -> Option<String> {
    route_interface_in(&SysRoot::live(), addr)
}

/// As [`route_interface`], reading the routing tables below `root`.
pub fn route_interface_in(root: &SysRoot, addr: IpAddr) -> Option<String> {
    if addr.is_loopback() || (root.is_live() && is_local_address(addr)) {
        return Some("lo".into());
    }
    let from_table = match addr {
        IpAddr::V4(v4) => route_v4(root, v4),
        IpAddr::V6(v6) => route_v6(root, v6),
    };
    from_table.or_else(|| if root.is_live() { route_by_socket(addr) } else { None })
}

/// Longest prefix, then lowest metric, over /proc/net/route.
fn route_v4(root: &SysRoot, addr: Ipv4Addr) -> Option<String> {
    let text = std::fs::read_to_string(root.proc().join("net/route")).ok()?;
    let target = u32::from(addr);
    let mut best: Option<(u32, u32, String)> = None;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        let (Some(dest), Some(flags), Some(metric), Some(mask)) = (hex(f[1]), hex(f[3]), f[6].parse().ok(), hex(f[7]))
        else {
            continue;
        };
        if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 {
            continue;
        }
        // The kernel prints addresses as host-order u32s of network-order bytes.
        let dest = u32::from(Ipv4Addr::from(dest.to_ne_bytes()));
        let mask = u32::from(Ipv4Addr::from(mask.to_ne_bytes()));
        if target & mask != dest & mask {
            continue;
        }
        let prefix = mask.count_ones();
        let better = match &best {
            None => true,
            Some((p, m, _)) => prefix > *p || (prefix == *p && metric < *m),
        };
        if better {
            best = Some((prefix, metric, f[0].to_string()));
        }
    }
    best.map(|(_, _, iface)| iface)
}

/// Longest prefix, then lowest metric, over /proc/net/ipv6_route (which also
/// lists the local table: a local route means the packet stays on `lo`).
fn route_v6(root: &SysRoot, addr: Ipv6Addr) -> Option<String> {
    let text = std::fs::read_to_string(root.proc().join("net/ipv6_route")).ok()?;
    let target = u128::from(addr);
    let mut best: Option<(u32, u32, String)> = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let (Ok(dest), Ok(prefix), Ok(metric), Ok(flags)) = (
            u128::from_str_radix(f[0], 16),
            u32::from_str_radix(f[1], 16),
            u32::from_str_radix(f[5], 16),
            u32::from_str_radix(f[8], 16),
        ) else {
            continue;
        };
        if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 || prefix > 128 {
            continue;
        }
        let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
        if target & mask != dest & mask {
            continue;
        }
        let iface = if flags & RTF_LOCAL != 0 { "lo".to_string() } else { f[9].to_string() };
        let better = match &best {
            None => true,
            Some((p, m, _)) => prefix > *p || (prefix == *p && metric < *m),
        };
        if better {
            best = Some((prefix, metric, iface));
        }
    }
    best.map(|(_, _, iface)| iface)
}

fn is_local_address(addr: IpAddr) -> bool {
    interface_with_address(addr).is_some()
}

/// The interface that owns `addr`, from getifaddrs.
pub fn interface_with_address(addr: IpAddr) -> Option<String> {
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    for ifa in addrs {
        let Some(a) = ifa.address else { continue };
        let ip = if let Some(v4) = a.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = a.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if ip == addr {
            return Some(ifa.interface_name);
        }
    }
    None
}

/// Lets the kernel pick the route: connect a UDP socket (sends nothing) and
/// find the interface owning the source address it chose.
fn route_by_socket(addr: IpAddr) -> Option<String> {
    let bind: SocketAddr = match addr {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect((addr, 9)).ok()?;
    let local = socket.local_addr().ok()?.ip();
    if local == addr {
        return Some("lo".into());
    }
    interface_with_address(local)
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_is_reached_through_the_loopback_nic() {
        assert_eq!(super::route_interface("127.0.0.1".parse().unwrap()).as_deref(), Some("lo"));
        let nics = crate::nics(&crate::SysRoot::live());
        let nic = nics.iter().find(|n| n.name == "lo").expect("lo in the inventory");
        assert_eq!(nic.kind, headroom_result::NicKind::Loopback);
        assert!(nic.mtu > 0);
    }
}
