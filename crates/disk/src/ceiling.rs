//! The bus a target's device sits on, from sysfs: the PCIe link of an NVMe
//! (or any PCIe) controller, or the SATA link speed. Reads faster than this
//! ceiling were answered by a cache, not the device (`faster_than_ceiling`).
//!
//! Reads sysfs only; knows nothing of tests.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The most a bus can carry towards the host, bytes per second.
#[derive(Debug, Clone, PartialEq)]
pub struct BusCeiling {
    /// e.g. `PCIe 8.0 GT/s x4`, `SATA 6.0 Gb/s`.
    pub name: String,
    pub bytes_per_sec: f64,
    /// The sysfs file the figure came from.
    pub source: String,
}

/// The bus ceiling of the device holding `path` (a file, directory or block device).
pub fn bus_ceiling(path: &Path) -> Option<BusCeiling> {
    let meta = std::fs::metadata(path).ok()?;
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let mut sysdev = block_sysfs_dir(dev)?;
    // A loop device: follow its backing file to the disk that holds it.
    if let Ok(backing) = std::fs::read_to_string(sysdev.join("loop/backing_file")) {
        sysdev = block_sysfs_dir(std::fs::metadata(backing.trim()).ok()?.dev())?;
    }
    ceiling_of_device_dir(&sysdev, Path::new("/sys/devices"))
}

/// /sys/devices/... of the whole disk with device number `dev` (a partition's parent).
fn block_sysfs_dir(dev: u64) -> Option<PathBuf> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let dir = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    if dir.join("partition").exists() {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir)
    }
}

/// The bus of the block device whose sysfs directory is `dir`: the first
/// PCIe link or SATA port among its ancestors, up to `devices_root` (the
/// `/sys/devices` of the tree, a fixture's in tests).
pub fn ceiling_of_device_dir(dir: &Path, devices_root: &Path) -> Option<BusCeiling> {
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if let Some(c) = pcie_ceiling(d).or_else(|| sata_ceiling(d)) {
            return Some(c);
        }
        cur = d.parent().filter(|p| p.starts_with(devices_root) && *p != devices_root);
    }
    None
}

fn pcie_ceiling(dir: &Path) -> Option<BusCeiling> {
    let speed = std::fs::read_to_string(dir.join("current_link_speed")).ok()?;
    let width: u32 = std::fs::read_to_string(dir.join("current_link_width")).ok()?.trim().parse().ok()?;
    let gt = parse_pcie_speed(&speed)?;
    if width == 0 {
        return None;
    }
    let link = headroom_limits::pcie_link(gt, width)?;
    Some(BusCeiling {
        name: link.name.clone(),
        bytes_per_sec: link.usable_bytes_per_sec(),
        source: dir.join("current_link_speed").display().to_string(),
    })
}

/// "8.0 GT/s PCIe" -> 8.0
pub fn parse_pcie_speed(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok().filter(|v: &f64| *v > 0.0)
}

/// A SATA disk: an `ataN` ancestor whose link reports `sata_spd` ("6.0 Gbps").
fn sata_ceiling(dir: &Path) -> Option<BusCeiling> {
    let name = dir.file_name()?.to_str()?;
    if !(name.starts_with("ata") && name[3..].chars().all(|c| c.is_ascii_digit()) && name.len() > 3) {
        return None;
    }
    for link in std::fs::read_dir(dir).ok()?.flatten() {
        let lname = link.file_name();
        if !lname.to_string_lossy().starts_with("link") {
            continue;
        }
        let spd = link.path().join("ata_link").join(&lname).join("sata_spd");
        if let Ok(text) = std::fs::read_to_string(&spd) {
            if let Some(link) = sata_link(&text) {
                return Some(BusCeiling {
                    name: link.name.clone(),
                    bytes_per_sec: link.usable_bytes_per_sec(),
                    source: spd.display().to_string(),
                });
            }
        }
    }
    None
}

/// The SATA generation of a `sata_spd` text ("6.0 Gbps").
fn sata_link(sata_spd: &str) -> Option<&'static headroom_limits::Link> {
    let gbps: f64 = sata_spd.split_whitespace().next()?.parse().ok()?;
    let name = if gbps >= 6.0 {
        "sata3"
    } else if gbps >= 3.0 {
        "sata2"
    } else {
        "sata1"
    };
    headroom_limits::lookup(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_texts_parse_into_bus_ceilings() {
        let sata = sata_link("6.0 Gbps\n").unwrap();
        assert!((sata.usable_bytes_per_sec() - 600e6).abs() < 1e6, "{}", sata.usable_bytes_per_sec());
        assert!(sata_link("3.0 Gbps").unwrap().usable_bytes_per_sec() < 301e6);
        assert_eq!(sata_link("<unknown>"), None);
        assert_eq!(parse_pcie_speed("8.0 GT/s PCIe\n"), Some(8.0));
        assert_eq!(parse_pcie_speed("Unknown"), None);
    }

    #[test]
    fn bus_ceiling_of_an_ordinary_path_does_not_panic() {
        let _ = bus_ceiling(Path::new("/"));
        let _ = bus_ceiling(Path::new("/nonexistent"));
    }
}
