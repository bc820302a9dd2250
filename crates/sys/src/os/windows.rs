//! The Windows implementation of headroom-sys's platform seam (see
//! `os/mod.rs`): the processor, memory and the machine's names from Win32
//! calls and the registry. Windows has no /proc or sysfs tree, so a
//! [`SysRoot`] other than the live one (a Linux fixture tree) yields nothing
//! here, and what is not written for Windows yet is absent (`None`, an
//! empty list), never a made-up figure (docs/platform.md lists which).
//!
//! Owns Win32 calls and nothing else: no limits model, no output, no writes.

use crate::SysRoot;

/// A value of HKEY_LOCAL_MACHINE\\`key` of the type `flags` allows, as
/// its bytes; None when absent.
fn registry_value(key: &str, value: &str, flags: u32) -> Option<Vec<u8>> {
    use windows_sys::Win32::System::Registry::{RegGetValueW, HKEY_LOCAL_MACHINE};
    let wide = |s: &str| s.encode_utf16().chain(Some(0)).collect::<Vec<u16>>();
    let (key, value) = (wide(key), wide(value));
    let mut buf = vec![0u8; 1024];
    let mut bytes = buf.len() as u32;
    // SAFETY: both names are NUL-terminated; the call writes at most `bytes` into `buf`.
    let rc = unsafe {
        RegGetValueW(
            HKEY_LOCAL_MACHINE,
            key.as_ptr(),
            value.as_ptr(),
            flags,
            std::ptr::null_mut(),
            buf.as_mut_ptr().cast(),
            &mut bytes,
        )
    };
    (rc == 0).then(|| {
        buf.truncate(bytes as usize);
        buf
    })
}

/// A text value (REG_SZ) of HKEY_LOCAL_MACHINE\\`key`, trimmed; None when absent or empty.
fn registry_text(key: &str, value: &str) -> Option<String> {
    let bytes = registry_value(key, value, windows_sys::Win32::System::Registry::RRF_RT_REG_SZ)?;
    let wide: Vec<u16> =
        bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).take_while(|c| *c != 0).collect();
    let text = String::from_utf16_lossy(&wide).trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// A number (REG_DWORD) of HKEY_LOCAL_MACHINE\\`key`.
fn registry_number(key: &str, value: &str) -> Option<u32> {
    let bytes = registry_value(key, value, windows_sys::Win32::System::Registry::RRF_RT_REG_DWORD)?;
    Some(u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?))
}

/// The processor, memory and the machine's names.
pub mod cpu {
    use super::{registry_number, registry_text, SysRoot};
    use headroom_result::CpuInfo;

    const PROCESSOR_KEY: &str = r"HARDWARE\DESCRIPTION\System\CentralProcessor\0";
    const VERSION_KEY: &str = r"SOFTWARE\Microsoft\Windows NT\CurrentVersion";

    /// The storage-relevant features the processor reports (CPUID, as std
    /// reads it), named as /proc/cpuinfo names them on Linux.
    fn features() -> Vec<String> {
        let mut found = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            macro_rules! feature {
                ($($linux:literal = $std:tt),*) => {
                    $(if std::arch::is_x86_feature_detected!($std) { found.push($linux.to_string()); })*
                };
            }
            feature!(
                "aes" = "aes",
                "vaes" = "vaes",
                "pclmulqdq" = "pclmulqdq",
                "vpclmulqdq" = "vpclmulqdq",
                "sse4_2" = "sse4.2",
                "avx" = "avx",
                "avx2" = "avx2",
                "avx512f" = "avx512f",
                "avx512bw" = "avx512bw",
                "avx512vl" = "avx512vl",
                "gfni" = "gfni",
                "sha_ni" = "sha",
                "bmi2" = "bmi2"
            );
        }
        found
    }

    /// Model (the registry's ProcessorNameString), logical CPUs and features;
    /// physical cores are not read on Windows yet (absent).
    pub fn cpu(root: &SysRoot) -> Option<CpuInfo> {
        if !root.is_live() {
            return None;
        }
        let logical = std::thread::available_parallelism().ok()?.get() as u32;
        Some(CpuInfo {
            model: registry_text(PROCESSOR_KEY, "ProcessorNameString").unwrap_or_else(|| "unknown".into()),
            logical_cpus: logical,
            physical_cores: None,
            features: features(),
        })
    }

    /// Physical memory (GlobalMemoryStatusEx's ullTotalPhys), bytes.
    pub fn memory_bytes(root: &SysRoot) -> Option<u64> {
        use windows_sys::Win32::System::SystemInformation::{GlobalMemoryStatusEx, MEMORYSTATUSEX};
        if !root.is_live() {
            return None;
        }
        // SAFETY: MEMORYSTATUSEX is plain data; dwLength is set as the call requires.
        let mut status: MEMORYSTATUSEX = unsafe { std::mem::zeroed() };
        status.dwLength = std::mem::size_of::<MEMORYSTATUSEX>() as u32;
        // SAFETY: `status` is valid for the call.
        (unsafe { GlobalMemoryStatusEx(&mut status) } != 0).then_some(status.ullTotalPhys)
    }

    /// The computer's name (COMPUTERNAME, which Windows sets for every process).
    pub fn hostname(root: &SysRoot) -> Option<String> {
        root.is_live().then(|| std::env::var("COMPUTERNAME").ok()).flatten().filter(|n| !n.is_empty())
    }

    /// The Windows version and build, e.g. `10.0.19045`.
    pub fn kernel(root: &SysRoot) -> Option<String> {
        if !root.is_live() {
            return None;
        }
        let build = registry_text(VERSION_KEY, "CurrentBuildNumber")?;
        // Windows 10 and later keep "6.3" in CurrentVersion for old programs
        // and their real number in CurrentMajor/MinorVersionNumber.
        let version = match (
            registry_number(VERSION_KEY, "CurrentMajorVersionNumber"),
            registry_number(VERSION_KEY, "CurrentMinorVersionNumber"),
        ) {
            (Some(major), Some(minor)) => format!("{major}.{minor}"),
            _ => registry_text(VERSION_KEY, "CurrentVersion")?,
        };
        Some(format!("{version}.{build}"))
    }

    /// The product name, e.g. "Windows 10 Pro".
    pub fn os(root: &SysRoot) -> Option<String> {
        root.is_live().then(|| registry_text(VERSION_KEY, "ProductName")).flatten()
    }
}

pub mod cpu_load;

/// Block I/O limits: Windows has no cgroup; none is known.
pub mod io_limit {
    use headroom_result::IoLimit;
    use std::path::Path;

    /// None: no limit on `path` is read on Windows.
    pub fn io_limit(_path: &Path) -> Option<IoLimit> {
        None
    }
}

pub mod block;
pub mod mounts;

/// The adapters as GetAdaptersAddresses lists them.
mod adapters {
    use std::net::IpAddr;
    use windows_sys::Win32::NetworkManagement::IpHelper::{
        GetAdaptersAddresses, GAA_FLAG_SKIP_ANYCAST, GAA_FLAG_SKIP_DNS_SERVER, GAA_FLAG_SKIP_MULTICAST,
        IP_ADAPTER_ADDRESSES_LH,
    };
    use windows_sys::Win32::Networking::WinSock::{AF_INET, AF_INET6, AF_UNSPEC, SOCKADDR, SOCKADDR_IN, SOCKADDR_IN6};

    /// winerror.h's ERROR_BUFFER_OVERFLOW: the list needs a larger buffer.
    const ERROR_BUFFER_OVERFLOW: u32 = 111;

    /// One adapter, as far as headroom reads it.
    pub(crate) struct Adapter {
        pub index: u32,
        pub ipv6_index: u32,
        pub name: String,
        pub description: String,
        pub if_type: u32,
        pub oper_status: i32,
        pub mtu: u32,
        /// bits/s; None when Windows does not know it.
        pub speed: Option<u64>,
        pub mac: Option<String>,
        /// (address, on-link prefix length).
        pub addresses: Vec<(IpAddr, u8)>,
    }

    /// A NUL-terminated UTF-16 string Windows handed over.
    fn text(p: *const u16) -> String {
        if p.is_null() {
            return String::new();
        }
        // SAFETY: Windows terminates these strings; the walk stops at the NUL.
        let len = (0..).take_while(|i| unsafe { *p.add(*i) } != 0).count();
        // SAFETY: `len` u16s before the NUL are readable.
        String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(p, len) })
    }

    /// The address a SOCKADDR holds, IPv4 or IPv6.
    fn address(sa: *const SOCKADDR) -> Option<IpAddr> {
        if sa.is_null() {
            return None;
        }
        // SAFETY: every SOCKADDR starts with its family; the family says which struct it is.
        unsafe {
            match (*sa).sa_family {
                AF_INET => Some(IpAddr::from((*(sa as *const SOCKADDR_IN)).sin_addr.S_un.S_addr.to_ne_bytes())),
                AF_INET6 => Some(IpAddr::from((*(sa as *const SOCKADDR_IN6)).sin6_addr.u.Byte)),
                _ => None,
            }
        }
    }

    /// Every adapter, in Windows' order; empty when the call fails.
    pub(crate) fn list() -> Vec<Adapter> {
        let flags = GAA_FLAG_SKIP_ANYCAST | GAA_FLAG_SKIP_MULTICAST | GAA_FLAG_SKIP_DNS_SERVER;
        // u64s: the list's structs need 8-byte alignment.
        let mut buf: Vec<u64> = vec![0; 16 * 1024 / 8];
        let mut rc = ERROR_BUFFER_OVERFLOW;
        for _ in 0..3 {
            let mut bytes = (buf.len() * 8) as u32;
            // SAFETY: `buf` holds `bytes` writable, aligned bytes.
            rc = unsafe {
                GetAdaptersAddresses(u32::from(AF_UNSPEC), flags, std::ptr::null(), buf.as_mut_ptr().cast(), &mut bytes)
            };
            if rc != ERROR_BUFFER_OVERFLOW {
                break;
            }
            buf = vec![0; (bytes as usize).div_ceil(8)];
        }
        if rc != 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut p = buf.as_ptr() as *const IP_ADAPTER_ADDRESSES_LH;
        while !p.is_null() {
            // SAFETY: a node of the list Windows wrote into `buf`, alive while `buf` is.
            let a = unsafe { &*p };
            let mut addresses = Vec::new();
            let mut u = a.FirstUnicastAddress;
            while !u.is_null() {
                // SAFETY: as above, a node of the unicast list.
                let ua = unsafe { &*u };
                if let Some(ip) = address(ua.Address.lpSockaddr) {
                    addresses.push((ip, ua.OnLinkPrefixLength));
                }
                u = ua.Next;
            }
            let mac = &a.PhysicalAddress[..(a.PhysicalAddressLength as usize).min(a.PhysicalAddress.len())];
            out.push(Adapter {
                // SAFETY: IfIndex is the member of the union Windows fills.
                index: unsafe { a.Anonymous1.Anonymous.IfIndex },
                ipv6_index: a.Ipv6IfIndex,
                name: text(a.FriendlyName),
                description: text(a.Description),
                if_type: a.IfType,
                oper_status: a.OperStatus,
                mtu: a.Mtu,
                speed: Some(a.TransmitLinkSpeed).filter(|s| *s > 0 && *s != u64::MAX),
                mac: mac
                    .iter()
                    .any(|b| *b != 0)
                    .then(|| mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")),
                addresses,
            });
            p = a.Next;
        }
        out
    }
}

/// Network interfaces (GetAdaptersAddresses): name, description, kind,
/// speed, MTU, state and addresses, with the TCP ceiling at the speed and
/// MTU. The bus under a NIC (PCIe, USB) is not read on Windows yet.
pub mod nic {
    use super::adapters;
    use crate::SysRoot;
    use headroom_result::{Nic, NicKind};
    use windows_sys::Win32::NetworkManagement::IpHelper::{
        IF_TYPE_PROP_VIRTUAL, IF_TYPE_SOFTWARE_LOOPBACK, IF_TYPE_TUNNEL,
    };

    /// ifdef.h's IF_OPER_STATUS values, named as Linux's operstate names them.
    fn operstate(status: i32) -> &'static str {
        match status {
            1 => "up",
            2 => "down",
            3 => "testing",
            5 => "dormant",
            6 => "notpresent",
            7 => "lowerlayerdown",
            _ => "unknown",
        }
    }

    /// Every adapter Windows lists, in its order.
    pub fn nics(root: &SysRoot) -> Vec<Nic> {
        if !root.is_live() {
            return Vec::new();
        }
        adapters::list()
            .into_iter()
            .map(|a| {
                let kind = match a.if_type {
                    IF_TYPE_SOFTWARE_LOOPBACK => NicKind::Loopback,
                    IF_TYPE_TUNNEL | IF_TYPE_PROP_VIRTUAL => NicKind::Virtual,
                    _ => NicKind::Physical,
                };
                let speed_mbps = a.speed.map(|bits| bits / 1_000_000).filter(|m| *m > 0);
                let (ceiling_bytes_per_sec, link) = crate::port_ceiling(speed_mbps, a.mtu);
                Nic {
                    name: a.name,
                    driver: (!a.description.is_empty()).then_some(a.description),
                    kind,
                    speed_mbps,
                    mtu: a.mtu,
                    carrier: Some(a.oper_status == 1),
                    operstate: Some(operstate(a.oper_status).to_string()),
                    addresses: a.addresses.iter().map(|(ip, prefix)| format!("{ip}/{prefix}")).collect(),
                    ceiling_bytes_per_sec,
                    link,
                    mac: a.mac,
                    ..Nic::default()
                }
            })
            .collect()
    }

    /// The lower of the TCP ceiling at the port's speed and the bus it hangs
    /// off, bytes/s ([`Nic::effective_ceiling`]).
    pub fn effective_ceiling(nic: &Nic) -> Option<f64> {
        nic.effective_ceiling()
    }
}

/// Which adapter reaches an address (GetBestInterfaceEx) and which holds one.
pub mod route {
    use super::adapters;
    use crate::SysRoot;
    use std::net::IpAddr;
    use windows_sys::Win32::NetworkManagement::IpHelper::GetBestInterfaceEx;
    use windows_sys::Win32::Networking::WinSock::{AF_INET, AF_INET6, SOCKADDR, SOCKADDR_IN, SOCKADDR_IN6};

    /// The adapter Windows would send a packet to `addr` through.
    pub fn route_interface(addr: IpAddr) -> Option<String> {
        let mut index = 0u32;
        let rc = match addr {
            IpAddr::V4(ip) => {
                let mut sa = SOCKADDR_IN { sin_family: AF_INET, ..Default::default() };
                sa.sin_addr.S_un.S_addr = u32::from_ne_bytes(ip.octets());
                // SAFETY: a valid SOCKADDR_IN for the call.
                unsafe { GetBestInterfaceEx(&sa as *const SOCKADDR_IN as *const SOCKADDR, &mut index) }
            }
            IpAddr::V6(ip) => {
                let mut sa = SOCKADDR_IN6 { sin6_family: AF_INET6, ..Default::default() };
                sa.sin6_addr.u.Byte = ip.octets();
                // SAFETY: a valid SOCKADDR_IN6 for the call.
                unsafe { GetBestInterfaceEx(&sa as *const SOCKADDR_IN6 as *const SOCKADDR, &mut index) }
            }
        };
        if rc != 0 {
            return None;
        }
        adapters::list()
            .into_iter()
            .find(|a| if addr.is_ipv4() { a.index == index } else { a.ipv6_index == index })
            .map(|a| a.name)
    }

    /// None: a fixture tree is a Linux one.
    pub fn route_interface_in(_root: &SysRoot, _addr: IpAddr) -> Option<String> {
        None
    }

    /// The adapter that holds `addr`.
    pub fn interface_with_address(addr: IpAddr) -> Option<String> {
        adapters::list().into_iter().find(|a| a.addresses.iter().any(|(ip, _)| *ip == addr)).map(|a| a.name)
    }
}

mod job;
pub mod secret_file;
pub mod serving;
