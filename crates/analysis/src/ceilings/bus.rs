//! The bus under a block device: its PCIe link (NVMe), else its SATA link,
//! else the ceiling the inventory (`headroom sys`) found for it (USB, ...).
//! The one bus lookup: `headroom disk` and the verdict both ask it.

use super::nic::pcie_name;
use headroom_limits::pcie_link;
use headroom_result::{BlockDevice, Ceiling, Hop};

/// The bus ceiling of a block device.
pub fn bus_ceiling(dev: &BlockDevice) -> Option<Ceiling> {
    if let Some(pci) = &dev.pci_link {
        let bytes = if pci.bytes_per_sec > 0.0 {
            pci.bytes_per_sec
        } else {
            pcie_link(pci.gt_per_sec, pci.width)?.usable_bytes_per_sec()
        };
        return Some(Ceiling {
            hop: Hop::Bus,
            name: format!("{} of {}", pcie_name(pci.gt_per_sec, pci.width), dev.name),
            bytes_per_sec: bytes,
            source: Some(format!("/sys/block/{}/device", dev.name)),
        });
    }
    if let Some(gbps) = dev.sata_link_gbps {
        // SATA signals with 8b/10b: 6 Gb/s carries 600 MB/s.
        return Some(Ceiling {
            hop: Hop::Bus,
            name: format!("SATA {gbps} Gb/s link of {}", dev.name),
            bytes_per_sec: gbps * 1e9 * 0.8 / 8.0,
            source: Some(format!("/sys/class/ata_link (device {})", dev.name)),
        });
    }
    dev.ceiling_bytes_per_sec.map(|bytes| Ceiling {
        hop: Hop::Bus,
        name: match &dev.bus {
            Some(bus) => format!("{bus} of {}", dev.name),
            None => format!("bus of {}", dev.name),
        },
        bytes_per_sec: bytes,
        source: Some("headroom sys".into()),
    })
}
