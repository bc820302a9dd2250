//! Which local interface carries traffic to a peer, and what sysfs says
//! about it (speed, MTU, driver): the default link ceiling of `headroom net`.
//!
//! The route is found by connecting a UDP socket (no packet is sent) and
//! matching its local address against getifaddrs.

use std::net::{IpAddr, SocketAddr, UdpSocket};

/// A local network interface.
#[derive(Debug, Clone, PartialEq)]
pub struct Interface {
    pub name: String,
    pub local_ip: IpAddr,
    /// Reported speed, Mb/s (None when the driver reports none, e.g. loopback, veth).
    pub speed_mbps: Option<u64>,
    pub mtu: Option<u32>,
    /// Kernel driver, e.g. igb, virtio_net, vmxnet3, veth.
    pub driver: Option<String>,
}

/// Drivers whose reported speed is nominal, not a limit.
const VIRTUAL_DRIVERS: &[&str] =
    &["virtio_net", "vmxnet3", "veth", "hv_netvsc", "xen-netfront", "ena", "gve", "tun", "bridge", "e1000"];

impl Interface {
    pub fn is_loopback(&self) -> bool {
        self.local_ip.is_loopback() || self.name == "lo"
    }

    /// Whether the NIC is virtual (its speed can be exceeded).
    pub fn is_virtual(&self) -> bool {
        match &self.driver {
            Some(d) => VIRTUAL_DRIVERS.contains(&d.as_str()),
            None => true,
        }
    }
}

/// The interface that routes to `peer`.
pub fn interface_to(peer: SocketAddr) -> Option<Interface> {
    let any: SocketAddr = if peer.is_ipv4() { "0.0.0.0:0".parse().ok()? } else { "[::]:0".parse().ok()? };
    let sock = UdpSocket::bind(any).ok()?;
    sock.connect(peer).ok()?;
    let local_ip = sock.local_addr().ok()?.ip();
    let name = interface_with_address(local_ip)?;
    let sys =
        |f: &str| std::fs::read_to_string(format!("/sys/class/net/{name}/{f}")).ok().map(|s| s.trim().to_string());
    let speed_mbps = sys("speed").and_then(|s| s.parse::<i64>().ok()).filter(|&s| s > 0).map(|s| s as u64);
    let mtu = sys("mtu").and_then(|s| s.parse().ok());
    let driver = std::fs::read_link(format!("/sys/class/net/{name}/device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .or_else(|| sys("uevent").and_then(|u| u.lines().find_map(|l| l.strip_prefix("DEVTYPE=").map(String::from))));
    Some(Interface { name, local_ip, speed_mbps, mtu, driver })
}

fn interface_with_address(ip: IpAddr) -> Option<String> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk read-only and free with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a valid node of the list until freeifaddrs.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr of the family it declares.
            let addr = unsafe {
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        Some(IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes()))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                    }
                    _ => None,
                }
            };
            if addr == Some(ip) {
                // SAFETY: ifa_name is a NUL-terminated string owned by the list.
                found = Some(unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned());
                break;
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    found
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_routes_via_lo() {
        let i = super::interface_to("127.0.0.1:5201".parse().unwrap()).unwrap();
        assert!(i.is_loopback());
        assert_eq!(i.name, "lo");
        assert!(i.mtu.unwrap_or(0) > 0);
    }
}
