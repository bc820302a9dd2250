//! The PCIe link under a device as the inventory records it ([`PciLink`]),
//! from what each platform reads: Linux's sysfs text (`8.0 GT/s PCIe`, `4`)
//! and Windows' PCI device properties (DEVPKEY_PciDevice_CurrentLinkSpeed
//! and friends, pciprop.h: the Link Status register's codes, `3`, `4`). The
//! sums, and what a disk on such a link is told, are the same on every
//! platform, so they are here once; reading the values is `os/`'s.
//!
//! A link that is not known stays absent (`None`), never a guess.

use crate::trim_float;
use headroom_result::{BlockDevice, PciLink};

/// The link at `gt_per_sec` x `width`, with the device's capability kept
/// only when the link runs below it; None for a rate or width the catalog
/// does not know (a width of 0, an unknown rate).
pub(crate) fn pci_link(gt_per_sec: f64, width: u32, max_gt: Option<f64>, max_width: Option<u32>) -> Option<PciLink> {
    if width == 0 {
        return None;
    }
    let link = headroom_limits::pcie_link(gt_per_sec, width)?;
    let max_width = max_width.filter(|w| *w > 0);
    let below_capability = max_gt.is_some_and(|m| m > gt_per_sec + 0.01) || max_width.is_some_and(|m| m > width);
    Some(PciLink {
        gt_per_sec,
        width,
        max_gt_per_sec: if below_capability { max_gt } else { None },
        max_width: if below_capability { max_width } else { None },
        bytes_per_sec: link.usable_bytes_per_sec(),
    })
}

/// The catalog name of a PCIe link, e.g. "PCIe 2.0 x1".
pub(crate) fn pcie_name(gt_per_sec: f64, width: u32) -> String {
    headroom_limits::pcie_link(gt_per_sec, width)
        .map(|l| l.name)
        .unwrap_or_else(|| format!("PCIe {gt_per_sec} GT/s x{width}"))
}

/// The transfer rate of a Link Status / Link Capabilities speed code, GT/s:
/// the PCIe base specification's encoding (an index into the Supported Link
/// Speeds vector), which Windows' DEVPKEY_PciDevice_CurrentLinkSpeed and
/// MaxLinkSpeed report as they read it. pciprop.h names only 1 (2.5 Gbps)
/// and 2 (5 Gbps); the later generations follow the specification. 0 and
/// codes past 64 GT/s: None.
pub(crate) fn gt_per_sec_of_speed_code(code: u32) -> Option<f64> {
    Some(match code {
        1 => 2.5,
        2 => 5.0,
        3 => 8.0,
        4 => 16.0,
        5 => 32.0,
        6 => 64.0,
        _ => return None,
    })
}

/// The link Windows' four PCI device properties describe (each None where
/// the device has no such property): the current speed code and width
/// (DEVPKEY_PciDevice_CurrentLinkSpeed, CurrentLinkWidth; the width is the
/// lane count, DevProp_PciExpressDevice_LinkWidth_By_4 is 4) and the
/// maximum ones (MaxLinkSpeed, MaxLinkWidth). None without a known current
/// speed and width: a conventional PCI device, or a device the PCI driver
/// did not describe.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn pci_link_of_codes(
    speed: Option<u32>,
    width: Option<u32>,
    max_speed: Option<u32>,
    max_width: Option<u32>,
) -> Option<PciLink> {
    let gt_per_sec = gt_per_sec_of_speed_code(speed?)?;
    pci_link(gt_per_sec, width?, max_speed.and_then(gt_per_sec_of_speed_code), max_width)
}

/// Records the PCIe link under an NVMe drive: the bus, its ceiling, and a
/// flag when the link runs below what the drive can do.
pub(crate) fn record_nvme_link(device: &mut BlockDevice, link: PciLink) {
    let name = pcie_name(link.gt_per_sec, link.width);
    device.ceiling_bytes_per_sec = Some(link.bytes_per_sec);
    device.bus = Some(name.clone());
    if let (Some(max_gt), Some(max_width)) = (link.max_gt_per_sec, link.max_width) {
        let capable = headroom_limits::pcie_link(max_gt, max_width);
        device.flags.push(format!(
            "NVMe runs at {name}, the drive can do {}: the link carries {} GB/s of {} GB/s",
            pcie_name(max_gt, max_width).trim_start_matches("PCIe "),
            trim_float(link.bytes_per_sec / 1e9),
            capable.map(|l| trim_float(l.usable_bytes_per_sec() / 1e9)).unwrap_or_else(|| "?".into()),
        ));
    }
    device.pci_link = Some(link);
    device.notes.push("PCIe TLP headers cost another ~10%: a drive reaches ~90% of the link".into());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_codes_are_the_generations_rates() {
        let rates: Vec<Option<f64>> = (0..=7).map(gt_per_sec_of_speed_code).collect();
        assert_eq!(rates, [None, Some(2.5), Some(5.0), Some(8.0), Some(16.0), Some(32.0), Some(64.0), None]);
        // Each code is the generation the catalog names: code 3 is PCIe 3.0.
        for (code, generation) in [(1, "1.0"), (2, "2.0"), (3, "3.0"), (4, "4.0"), (5, "5.0"), (6, "6.0")] {
            let gt = gt_per_sec_of_speed_code(code).unwrap();
            assert_eq!(pcie_name(gt, 4), format!("PCIe {generation} x4"), "code {code}");
        }
    }

    #[test]
    fn windows_properties_give_the_link_linux_records() {
        // A Gen3 x4 NVMe drive at full speed, as Windows and as sysfs say it
        // ("8.0 GT/s PCIe", "4"; max the same): one and the same record.
        let windows = pci_link_of_codes(Some(3), Some(4), Some(3), Some(4)).unwrap();
        let linux = pci_link(8.0, 4, Some(8.0), Some(4)).unwrap();
        assert_eq!(windows, linux);
        assert_eq!((windows.gt_per_sec, windows.width), (8.0, 4));
        assert_eq!((windows.max_gt_per_sec, windows.max_width), (None, None), "at capability: no max kept");
        assert!((windows.bytes_per_sec - 4.0 * 8e9 * 128.0 / 130.0 / 8.0).abs() < 1.0, "{windows:?}");
    }

    #[test]
    fn a_link_below_the_drives_capability_keeps_the_capability() {
        // A Gen4 x4 drive in a Gen3 x2 slot.
        let link = pci_link_of_codes(Some(3), Some(2), Some(4), Some(4)).unwrap();
        assert_eq!((link.gt_per_sec, link.width), (8.0, 2));
        assert_eq!((link.max_gt_per_sec, link.max_width), (Some(16.0), Some(4)));
        // Only the width short: both kept, as Linux keeps them.
        let narrow = pci_link_of_codes(Some(4), Some(2), Some(4), Some(4)).unwrap();
        assert_eq!((narrow.max_gt_per_sec, narrow.max_width), (Some(16.0), Some(4)));
    }

    #[test]
    fn what_windows_does_not_say_stays_absent() {
        assert_eq!(pci_link_of_codes(None, Some(4), Some(3), Some(4)), None, "no current speed");
        assert_eq!(pci_link_of_codes(Some(3), None, Some(3), Some(4)), None, "no current width");
        assert_eq!(pci_link_of_codes(Some(0), Some(4), None, None), None, "speed code 0");
        assert_eq!(pci_link_of_codes(Some(9), Some(4), None, None), None, "a code past the specification");
        assert_eq!(pci_link_of_codes(Some(3), Some(0), None, None), None, "width 0");
        // No maximum: the current link alone, nothing said of capability.
        let link = pci_link_of_codes(Some(2), Some(1), None, None).unwrap();
        assert_eq!((link.gt_per_sec, link.width, link.max_gt_per_sec, link.max_width), (5.0, 1, None, None));
        // An unknown maximum code is no maximum, not a slower one.
        let link = pci_link_of_codes(Some(3), Some(4), Some(0), Some(4)).unwrap();
        assert_eq!((link.max_gt_per_sec, link.max_width), (None, None));
    }

    #[test]
    fn an_nvme_drive_records_its_link_as_its_bus() {
        let mut slow = BlockDevice { name: "PhysicalDrive1".into(), ..BlockDevice::default() };
        record_nvme_link(&mut slow, pci_link_of_codes(Some(3), Some(2), Some(4), Some(4)).unwrap());
        assert_eq!(slow.bus.as_deref(), Some("PCIe 3.0 x2"));
        assert_eq!(slow.ceiling_bytes_per_sec, slow.pci_link.as_ref().map(|l| l.bytes_per_sec));
        assert_eq!(slow.flags.len(), 1, "{:?}", slow.flags);
        assert!(slow.flags[0].starts_with("NVMe runs at PCIe 3.0 x2, the drive can do 4.0 x4"), "{:?}", slow.flags);
        let mut full = BlockDevice::default();
        record_nvme_link(&mut full, pci_link_of_codes(Some(4), Some(4), Some(4), Some(4)).unwrap());
        assert!(full.flags.is_empty(), "{:?}", full.flags);
        assert_eq!(full.bus.as_deref(), Some("PCIe 4.0 x4"));
    }
}
