//! The `host` object: inventory of the machine that ran the probes, as `headroom sys` reports it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What is in the box. Every field is optional so inventories from machines
/// where sysfs hides something still load.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Host {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// e.g. "Debian GNU/Linux 12 (bookworm)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(default)]
    pub nics: Vec<Nic>,
    #[serde(default)]
    pub block_devices: Vec<BlockDevice>,
    #[serde(default)]
    pub filesystems: Vec<Filesystem>,
}

/// The processor.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CpuInfo {
    pub model: String,
    /// Logical CPUs the OS schedules on.
    pub logical_cpus: u32,
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
    pub width: u32,
    /// The device's capability, when lower than what it could do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gt_per_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_width: Option<u32>,
    /// Usable payload ceiling of the current link, bytes/s per direction.
    pub bytes_per_sec: f64,
}

/// A network interface.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Nic {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// physical, virtual, usb or loopback.
    pub kind: String,
    /// Reported link speed in Mb/s (sysfs `speed`), when the driver reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplex: Option<String>,
    pub mtu: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier_changes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operstate: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_link: Option<PciLink>,
    /// TCP goodput ceiling at this speed and MTU, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_bytes_per_sec: Option<f64>,
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
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    pub size_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    /// nvme, sata, sas, virtio, usb, loop, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_link: Option<PciLink>,
    /// Negotiated SATA link, Gb/s (1.5, 3, 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sata_link_gbps: Option<f64>,
    /// Bus ceiling for this device, bytes/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_bytes_per_sec: Option<f64>,
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
    pub mountpoint: String,
    pub fstype: String,
    pub device: String,
    /// Mount options as /proc/self/mounts lists them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<String>,
}
