//! The `host` object: inventory of the machine that ran the probes, as `headroom sys` reports it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What is in the box. Every field is optional so inventories from machines
/// where sysfs hides something still load.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Host {
    /// The machine's hostname (/proc/sys/kernel/hostname).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// A peer's inventory only: the server as the user named it (`--server
    /// nas.lan`), which sentences use when both ends share a hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached_as: Option<String>,
    /// e.g. "Debian GNU/Linux 12 (bookworm)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// Kernel release (/proc/sys/kernel/osrelease), e.g. `6.12.48-amd64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// The processor; absent when /proc/cpuinfo could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuInfo>,
    /// Installed memory (MemTotal), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Network interfaces, loopback and virtual ones included.
    #[serde(default)]
    pub nics: Vec<Nic>,
    /// Block devices from /sys/block.
    #[serde(default)]
    pub block_devices: Vec<BlockDevice>,
    /// Mounted filesystems from /proc/self/mounts.
    #[serde(default)]
    pub filesystems: Vec<Filesystem>,
}

/// The processor.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CpuInfo {
    /// Model name from /proc/cpuinfo, `unknown` when it gives none.
    pub model: String,
    /// Logical CPUs the OS schedules on.
    pub logical_cpus: u32,
    /// Distinct physical cores; absent when /proc/cpuinfo does not list core ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_cores: Option<u32>,
    /// Instruction-set features that matter for storage work (aes, avx2, avx512f, vaes, sha_ni, ...).
    #[serde(default)]
    pub features: Vec<String>,
}

/// A PCIe link as the device negotiated it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PciLink {
    /// Transfer rate per lane, GT/s (2.5, 5, 8, 16, 32, 64).
    pub gt_per_sec: f64,
    /// Lanes in use (x1, x4, x16...).
    pub width: u32,
    /// The device's capability, when lower than what it could do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gt_per_sec: Option<f64>,
    /// Lanes the device supports, when more than it got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_width: Option<u32>,
    /// Usable payload ceiling of the current link, bytes/s per direction.
    pub bytes_per_sec: f64,
}

/// What kind of interface a NIC is, as `sys` classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NicKind {
    /// A NIC on a bus (PCIe, platform): its link speed is real.
    #[default]
    Physical,
    /// Software (veth, bridge, tun, a VLAN): no wire of its own.
    Virtual,
    /// A USB adapter: its bus may be narrower than its link.
    Usb,
    /// The loopback interface.
    Loopback,
}

impl NicKind {
    /// The word the documents use.
    pub fn as_str(self) -> &'static str {
        match self {
            NicKind::Physical => "physical",
            NicKind::Virtual => "virtual",
            NicKind::Usb => "usb",
            NicKind::Loopback => "loopback",
        }
    }
}

impl std::str::FromStr for NicKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [NicKind::Physical, NicKind::Virtual, NicKind::Usb, NicKind::Loopback]
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("'{s}' is not a NIC kind (physical, virtual, usb, loopback)"))
    }
}

impl std::fmt::Display for NicKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A network interface.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Nic {
    /// Kernel interface name, e.g. `eth0`, `enp3s0`.
    pub name: String,
    /// Kernel driver bound to the device (e.g. `ixgbe`, `r8152`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// physical, virtual, usb or loopback.
    pub kind: NicKind,
    /// Reported link speed in Mb/s (sysfs `speed`), when the driver reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u64>,
    /// `full` or `half` as the driver reports it; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplex: Option<String>,
    /// MTU, bytes (0 when sysfs has none).
    pub mtu: u32,
    /// Whether the link is up (sysfs `carrier`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier: Option<bool>,
    /// How often the link went up or down since boot (sysfs `carrier_changes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier_changes: Option<u64>,
    /// Kernel operational state: `up`, `down`, `dormant`, `unknown`...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operstate: Option<String>,
    /// Addresses as `address/prefix`, IPv4 and IPv6; only on the live machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// The PCIe link of the NIC's device, when it sits on PCIe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_link: Option<PciLink>,
    /// TCP goodput ceiling at this speed and MTU, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_bytes_per_sec: Option<f64>,
    /// Context a user may want, one sentence each (why the ceiling is what it is);
    /// unlike `flags`, nothing to act on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Catalog name of the link at the reported speed, e.g. `10GbE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Hardware (MAC) address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Speed of the USB port a USB NIC sits on, Mb/s (480, 5000, 10000, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb_speed_mbps: Option<u64>,
    /// Payload ceiling of the bus the NIC hangs off (PCIe slot or USB port), bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_ceiling_bytes_per_sec: Option<f64>,
    /// Problems a user should look at, one sentence each
    /// (narrow slot, USB NIC, half duplex, carrier flaps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

impl Nic {
    /// The lower of the TCP ceiling at the port's speed and the bus it hangs off, bytes/s.
    pub fn effective_ceiling(&self) -> Option<f64> {
        match (self.ceiling_bytes_per_sec, self.bus_ceiling_bytes_per_sec) {
            (Some(tcp), Some(bus)) => Some(tcp.min(bus)),
            (tcp, None) => tcp,
            (None, Some(_)) => None,
        }
    }
}

/// A block device.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct BlockDevice {
    /// Kernel name, e.g. `nvme0n1`, `sda`.
    pub name: String,
    /// Model string from sysfs (`device/model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether the kernel treats it as spinning (`queue/rotational`); virtual disks may say true wrongly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// Active I/O scheduler (`none`, `mq-deadline`, `bfq`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    /// nvme, sata, sas, virtio, usb, loop, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// The PCIe link of the device (NVMe), when it sits on PCIe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_link: Option<PciLink>,
    /// Negotiated SATA link, Gb/s (1.5, 3, 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sata_link_gbps: Option<f64>,
    /// Bus ceiling for this device, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_bytes_per_sec: Option<f64>,
    /// Context a user may want, one sentence each (virtual disk, backing file, TLP overhead);
    /// unlike `flags`, nothing to act on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Highest SATA link the controller port supports, Gb/s (`hw_sata_spd_limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sata_max_link_gbps: Option<f64>,
    /// Speed of the USB port a USB disk sits on, Mb/s (480, 5000, 10000, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb_speed_mbps: Option<u64>,
    /// Catalog name of the bus that sets the ceiling, e.g. `PCIe 3.0 x4`, `SATA II`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    /// Problems a user should look at, one sentence each (slow link, narrow slot).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// A mounted filesystem.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Filesystem {
    /// Where it is mounted.
    pub mountpoint: String,
    /// Filesystem type, e.g. ext4, xfs, nfs4.
    pub fstype: String,
    /// What is mounted: a device path, `server:/export`, or a pseudo name like `tmpfs`.
    pub device: String,
    /// Mount options as /proc/self/mounts lists them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<String>,
}
