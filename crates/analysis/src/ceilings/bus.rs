//! The bus under a block device: its PCIe link (NVMe), else its SATA link,
//! else the ceiling the inventory (`headroom sys`) found for it (USB, ...).
//! The one bus lookup: `headroom disk` and the verdict both ask it.

use super::nic::pcie_name;
use headroom_limits::pcie_link;
use headroom_result::{BlockDevice, Ceiling, Hop};

/// Where the inventory read a disk's PCIe link: the PCI device's properties
/// on Windows (whose disks, and only those, are named `PhysicalDriveN`),
/// sysfs on Linux.
fn pci_link_source(disk: &str) -> String {
    if disk.starts_with("PhysicalDrive") {
        format!(r"DEVPKEY_PciDevice_CurrentLinkSpeed of the PCI device above \\.\{disk}")
    } else {
        format!("/sys/block/{disk}/device")
    }
}

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
            source: Some(pci_link_source(&dev.name)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::PciLink;

    fn nvme(name: &str) -> BlockDevice {
        let link = PciLink { gt_per_sec: 8.0, width: 4, bytes_per_sec: 3.94e9, ..PciLink::default() };
        BlockDevice { name: name.into(), pci_link: Some(link), ..BlockDevice::default() }
    }

    #[test]
    fn a_pcie_links_source_is_where_each_platform_read_it() {
        let linux = bus_ceiling(&nvme("nvme0n1")).unwrap();
        assert_eq!(linux.source.as_deref(), Some("/sys/block/nvme0n1/device"));
        assert_eq!(linux.name, "PCIe 3.0 x4 of nvme0n1");
        let windows = bus_ceiling(&nvme("PhysicalDrive1")).unwrap();
        assert_eq!(
            windows.source.as_deref(),
            Some(r"DEVPKEY_PciDevice_CurrentLinkSpeed of the PCI device above \\.\PhysicalDrive1")
        );
        assert_eq!((windows.name.as_str(), windows.bytes_per_sec), ("PCIe 3.0 x4 of PhysicalDrive1", 3.94e9));
    }
}
