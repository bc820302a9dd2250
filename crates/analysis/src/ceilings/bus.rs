//! The bus under a block device: its PCIe link (NVMe), else its SATA link,
//! else the ceiling the inventory (`headroom sys`) found for it (USB, ...).
//! The one bus lookup: `headroom disk` and the verdict both ask it.

use super::nic::pcie_name;
use headroom_limits::pcie_link;
use headroom_result::{BlockDevice, Ceiling, Hop, Warning, WarningCode};

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

/// Model names hypervisors give the disks they present (sysfs `device/model`;
/// on Windows "vendor product"), matched case-blind at the start of the
/// model or of what follows its first word (Windows' vendor: a QEMU
/// virtio-scsi disk is "QEMU QEMU HARDDISK" there). "Red Hat VirtIO" is the
/// KVM virtio block driver's disk on Windows, where no transport says virtio.
const EMULATED_DISK_MODELS: [&str; 6] =
    ["QEMU HARDDISK", "VBOX HARDDISK", "VMware Virtual", "Msft Virtual Disk", "Virtual disk", "Red Hat VirtIO"];

/// The emulated-disk name `model` starts with, itself or after its vendor word.
fn emulated_disk_model(model: &str) -> Option<&str> {
    let after_vendor = model.split_once(' ').map(|(_, rest)| rest.trim_start());
    let starts_with = |m: &str| {
        EMULATED_DISK_MODELS.iter().any(|e| m.get(..e.len()).is_some_and(|head| head.eq_ignore_ascii_case(e)))
    };
    [Some(model), after_vendor].into_iter().flatten().find(|m| starts_with(m)).map(|_| model)
}

/// What names this disk as one a hypervisor presents: its transport
/// (virtio, xen) or its model (an emulated disk); None for any other disk.
fn virtual_disk_kind(dev: &BlockDevice) -> Option<&str> {
    let paravirtual = dev.transport.as_deref().filter(|t| matches!(*t, "virtio" | "xen"));
    let emulated = dev.model.as_deref().and_then(emulated_disk_model);
    paravirtual.or(emulated)
}

/// Whether a hypervisor presents this disk (virtio, Xen, or an emulated
/// disk named by its model): what reaches it may be answered from the host's
/// memory, which O_DIRECT in the guest does not bypass.
pub fn is_virtual_disk(dev: &BlockDevice) -> bool {
    virtual_disk_kind(dev).is_some()
}

/// The warning a disk run on a virtual disk carries (`page_cache_possible`):
/// the hypervisor may cache the disk in the host's memory (QEMU and
/// Proxmox `cache=writeback` or `unsafe`, a VirtualBox host cache), so
/// reads may come from there and writes be held there, whatever the guest
/// asked; None for any other disk.
pub fn virtual_disk_warning(dev: &BlockDevice) -> Option<Warning> {
    virtual_disk_kind(dev).map(|kind| {
        let what = format!("{} is a virtual disk ({kind})", dev.name);
        Warning::new(
            WarningCode::PageCachePossible,
            format!(
                "{what}: the hypervisor may serve it from the host's memory (a host page cache, e.g. QEMU or \
                 Proxmox cache=writeback or unsafe), which O_DIRECT here does not bypass, so reads may come from \
                 there and writes be held there. For the storage under it: a --size over twice the host's RAM, \
                 and --sync fsync (or `headroom flushcheck`) for writes that reach it"
            ),
        )
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

    #[test]
    fn virtual_disks_carry_the_host_cache_warning_and_others_do_not() {
        let disk = |name: &str, transport: &str, model: Option<&str>| BlockDevice {
            name: name.into(),
            transport: Some(transport.into()),
            model: model.map(Into::into),
            ..BlockDevice::default()
        };
        let warned = |d: &BlockDevice| virtual_disk_warning(d).map(|w| (w.code, w.message));
        let (code, message) = warned(&disk("vda", "virtio", None)).expect("virtio is virtual");
        assert_eq!(code, WarningCode::PageCachePossible);
        assert!(message.starts_with("vda is a virtual disk (virtio): the hypervisor may serve it"), "{message}");
        assert!(message.contains("--sync fsync") && message.contains("twice the host's RAM"), "{message}");
        assert!(warned(&disk("xvda", "xen", None)).is_some());
        let emulated = warned(&disk("sda", "sata", Some("QEMU HARDDISK"))).expect("QEMU's emulated SATA disk");
        assert!(emulated.1.starts_with("sda is a virtual disk (QEMU HARDDISK)"), "{}", emulated.1);
        assert!(warned(&disk("sdb", "scsi", Some("msft virtual disk"))).is_some());
        // Windows names vendor and product: QEMU's virtio-scsi disk, KVM's virtio block disk.
        for model in ["QEMU QEMU HARDDISK", "Red Hat VirtIO", "VMware Virtual disk"] {
            assert!(warned(&disk("PhysicalDrive0", "scsi", Some(model))).is_some(), "{model}");
        }
        for (name, transport, model) in [
            ("nvme0n1", "nvme", Some("Samsung SSD 980")),
            ("sda", "sata", Some("ST4000VN008")),
            ("loop0", "loop", None),
            ("PhysicalDrive1", "sata", Some("ATA Samsung SSD 870")),
            ("PhysicalDrive2", "spaces", Some("Microsoft Storage Space Device")),
        ] {
            assert!(warned(&disk(name, transport, model)).is_none(), "{name}");
        }
        // A model shorter than the names, or not ASCII, is simply not one of them.
        assert!(warned(&disk("sdc", "usb", Some("Ä"))).is_none());
    }
}
