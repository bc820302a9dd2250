//! Small readers for sysfs attributes: trimmed text, numbers, symlink targets,
//! walking a device's ancestors, and the PCIe/USB link of a device.

use headroom_result::PciLink;
use std::path::{Path, PathBuf};

/// The attribute's text, trimmed; `None` when missing, unreadable (sysfs
/// returns EINVAL for `speed` on a downed link) or empty.
pub fn read(path: impl AsRef<Path>) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

pub fn read_u64(path: impl AsRef<Path>) -> Option<u64> {
    read(path)?.parse().ok()
}

pub fn read_i64(path: impl AsRef<Path>) -> Option<i64> {
    read(path)?.parse().ok()
}

/// The last component of a symlink's target: the driver name of `device/driver`.
pub fn link_target_name(path: impl AsRef<Path>) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// The real directory behind a sysfs class symlink.
pub fn canonical(path: impl AsRef<Path>) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// The nearest directory from `start` upwards (itself included) that
/// satisfies `found`, not climbing above `stop`.
pub fn find_ancestor(start: &Path, stop: &Path, found: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if !d.starts_with(stop) || d == stop {
            return None;
        }
        if found(d) {
            return Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    None
}

/// "8.0 GT/s PCIe", "2.5 GT/s" -> 8.0, 2.5; "Unknown" -> None.
pub fn parse_gt_per_sec(text: &str) -> Option<f64> {
    let number = text.split_whitespace().next()?;
    let value: f64 = number.parse().ok()?;
    (value > 0.0).then_some(value)
}

/// "6.0 Gb/s" -> 6.0; "<unknown>" -> None.
pub fn parse_gbps(text: &str) -> Option<f64> {
    let number = text.split_whitespace().next()?;
    let value: f64 = number.parse().ok()?;
    (value > 0.0).then_some(value)
}

/// The PCIe link of the nearest PCI device at or above `device_dir`.
pub fn pci_link_above(device_dir: &Path, devices_root: &Path) -> Option<PciLink> {
    let dir = find_ancestor(device_dir, devices_root, |d| d.join("current_link_speed").exists())?;
    pci_link(&dir)
}

/// The negotiated and maximum PCIe link of one PCI device directory.
pub fn pci_link(dir: &Path) -> Option<PciLink> {
    let gt = parse_gt_per_sec(&read(dir.join("current_link_speed"))?)?;
    let width = read_u64(dir.join("current_link_width"))? as u32;
    let max_gt = read(dir.join("max_link_speed")).and_then(|t| parse_gt_per_sec(&t));
    let max_width = read_u64(dir.join("max_link_width")).map(|w| w as u32);
    crate::pcie::pci_link(gt, width, max_gt, max_width)
}

/// The USB port speed (Mb/s) of the nearest USB device at or above `device_dir`
/// (the directory with `idVendor` and `speed`).
pub fn usb_speed_above(device_dir: &Path, devices_root: &Path) -> Option<u64> {
    let dir = find_ancestor(device_dir, devices_root, |d| d.join("idVendor").exists() && d.join("speed").exists())?;
    // `speed` is "480", "5000", "10000", "20000" (and "1.5"/"12" for old devices).
    let text = read(dir.join("speed"))?;
    text.parse::<f64>().ok().map(|v| v as u64)
}

/// The catalog link for a USB port speed in Mb/s.
pub fn usb_link(speed_mbps: u64) -> Option<&'static headroom_limits::Link> {
    let name = match speed_mbps {
        0..=12 => return None,
        13..=480 => "usb2",
        481..=5000 => "usb3gen1",
        5001..=10000 => "usb3gen2",
        _ => "usb3.2gen2x2",
    };
    headroom_limits::lookup(name).ok()
}

/// The `KEY=value` lines of a `uevent` file.
pub fn uevent(dir: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("uevent")).ok()?;
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
}
