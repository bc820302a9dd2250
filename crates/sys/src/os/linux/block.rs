//! Block devices from /sys/block: model, size, rotational, scheduler,
//! transport (nvme, sata, sas, usb, virtio, loop, ...), the NVMe PCIe link or
//! SATA link speed, and the bus ceiling with flags for a link running below
//! what the drive or port can do.

use super::sysfs::{canonical, parse_gbps, pci_link_above, read, read_u64, usb_link, usb_speed_above};
use crate::{trim_float, SysRoot};
use headroom_result::BlockDevice;
use std::path::Path;

/// Every whole disk in /sys/block (partitions are not listed there), sorted
/// by name; unused loop and RAM devices (size 0) are left out.
pub fn block_devices(root: &SysRoot) -> Vec<BlockDevice> {
    let Ok(entries) = std::fs::read_dir(root.sys().join("block")) else { return Vec::new() };
    let mut names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names.iter().filter_map(|name| block_device(root, name)).collect()
}

/// The whole disk that holds `path` (a file, a directory or a block device)
/// on this machine; for a loop device, the disk that holds its backing file.
pub fn block_device_holding(path: &Path) -> Option<BlockDevice> {
    let name = whole_disk_name(path)?;
    let root = SysRoot::live();
    let backing = read(root.sys().join("block").join(&name).join("loop/backing_file"));
    let name = match backing {
        Some(file) => whole_disk_name(Path::new(&file))?,
        None => name,
    };
    block_device(&root, &name)
}

/// /sys/block name of the whole disk (a partition's parent) holding `path`.
fn whole_disk_name(path: &Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).ok()?;
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let dir = canonical(format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev)))?;
    let disk = if dir.join("partition").exists() { dir.parent()?.to_path_buf() } else { dir };
    Some(disk.file_name()?.to_string_lossy().into_owned())
}

fn block_device(root: &SysRoot, name: &str) -> Option<BlockDevice> {
    let dir = root.sys().join("block").join(name);
    let devices_root = root.sys().join("devices");
    let devices_root = canonical(&devices_root).unwrap_or(devices_root);
    let real = canonical(&dir).unwrap_or_else(|| dir.clone());
    let size_bytes = read_u64(dir.join("size")).unwrap_or(0) * 512;
    let transport = transport(name, &real);
    if size_bytes == 0 && matches!(transport, "loop" | "ram" | "nbd") {
        return None;
    }
    let mut device = BlockDevice {
        name: name.to_string(),
        model: read(dir.join("device/model")),
        rotational: read_u64(dir.join("queue/rotational")).map(|r| r == 1),
        size_bytes,
        scheduler: read(dir.join("queue/scheduler")).map(|s| active_scheduler(&s)),
        transport: Some(transport.to_string()),
        ..BlockDevice::default()
    };
    match transport {
        "nvme" => nvme_link(&mut device, &real, &devices_root),
        "sata" => sata_link(&mut device, root, &real),
        "usb" => usb_port(&mut device, &real, &devices_root),
        "virtio" | "xen" => device.notes.push(
            "virtual disk: the hypervisor's storage sets the ceiling (its rotational flag may not mean anything)"
                .into(),
        ),
        "loop" => {
            if let Some(file) = read(dir.join("loop/backing_file")) {
                device.notes.push(format!("backed by {file}"));
            }
        }
        _ => {}
    }
    Some(device)
}

/// "none [mq-deadline] kyber bfq" -> "mq-deadline"; "none" -> "none".
fn active_scheduler(text: &str) -> String {
    text.split_whitespace()
        .find_map(|s| s.strip_prefix('[').and_then(|s| s.strip_suffix(']')))
        .unwrap_or(text)
        .to_string()
}

/// How the disk is attached, from its name and where it sits in /sys/devices.
fn transport(name: &str, real: &Path) -> &'static str {
    let path = real.to_string_lossy();
    let has = |needle: &str| path.split('/').any(|c| c.starts_with(needle));
    let by_name: &[(&str, &'static str)] = &[
        ("nvme", "nvme"),
        ("loop", "loop"),
        ("zram", "ram"),
        ("ram", "ram"),
        ("vd", "virtio"),
        ("xvd", "xen"),
        ("nbd", "nbd"),
        ("dm-", "dm"),
        ("md", "md"),
        ("mmcblk", "mmc"),
        ("rbd", "rbd"),
    ];
    if let Some((_, t)) = by_name.iter().find(|(prefix, _)| name.starts_with(prefix)) {
        return t;
    }
    if has("usb") {
        "usb"
    } else if has("ata") {
        "sata"
    } else if has("end_device-") || has("expander-") {
        "sas"
    } else if has("virtio") {
        "virtio"
    } else {
        "scsi"
    }
}

fn nvme_link(device: &mut BlockDevice, real: &Path, devices_root: &Path) {
    if let Some(link) = pci_link_above(real, devices_root) {
        crate::pcie::record_nvme_link(device, link);
    }
}

/// The SATA link of the `ataN` port above the disk, from /sys/class/ata_link/linkN.
fn sata_link(device: &mut BlockDevice, root: &SysRoot, real: &Path) {
    let Some(port) = real.iter().filter_map(|c| c.to_str()).find_map(|c| c.strip_prefix("ata")?.parse::<u32>().ok())
    else {
        return;
    };
    let links = root.sys().join("class/ata_link");
    // Behind a port multiplier the links are named linkN.M; the port's own link is linkN.
    let link_dir = [links.join(format!("link{port}")), links.join(format!("link{port}.0"))]
        .into_iter()
        .find(|d| d.join("sata_spd").exists());
    let Some(link_dir) = link_dir else { return };
    let current = read(link_dir.join("sata_spd")).and_then(|t| parse_gbps(&t));
    let limit = read(link_dir.join("hw_sata_spd_limit")).and_then(|t| parse_gbps(&t));
    device.sata_link_gbps = current;
    device.sata_max_link_gbps = limit;
    let Some(gbps) = current else { return };
    let Some(link) = sata_catalog(gbps) else { return };
    device.ceiling_bytes_per_sec = Some(link.usable_bytes_per_sec());
    device.bus = Some(link.name.clone());
    if limit.is_some_and(|l| l > gbps + 0.01) {
        device.flags.push(format!(
            "SATA link at {} Gb/s, the port supports {} Gb/s: check the cable and the drive's port",
            trim_float(gbps),
            trim_float(limit.unwrap_or_default())
        ));
    }
    if device.rotational == Some(false) && gbps < 6.0 {
        device.flags.push(format!(
            "SSD on a {} Gb/s SATA link: capped at {} MB/s (a SATA SSD does ~550 MB/s on 6 Gb/s)",
            trim_float(gbps),
            trim_float(link.usable_bytes_per_sec() / 1e6)
        ));
    }
}

fn sata_catalog(gbps: f64) -> Option<&'static headroom_limits::Link> {
    let name = if gbps <= 1.5 {
        "sata1"
    } else if gbps <= 3.0 {
        "sata2"
    } else {
        "sata3"
    };
    headroom_limits::lookup(name).ok()
}

fn usb_port(device: &mut BlockDevice, real: &Path, devices_root: &Path) {
    let Some(speed) = usb_speed_above(real, devices_root) else { return };
    device.usb_speed_mbps = Some(speed);
    let Some(link) = usb_link(speed) else { return };
    device.ceiling_bytes_per_sec = Some(link.usable_bytes_per_sec());
    device.bus = Some(link.name.clone());
    if speed <= 480 {
        device.flags.push(format!(
            "on a USB 2.0 port: capped at {} MB/s; a USB 3 port would lift that",
            trim_float(link.usable_bytes_per_sec() / 1e6)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_holding_a_path_is_a_whole_disk_in_sys_block() {
        // /proc lives on no block device.
        assert_eq!(block_device_holding(Path::new("/proc/self")), None);
        // The root filesystem's disk, where it has one, is listed in /sys/block
        // (partitions are not), and a block device resolves to itself.
        if let Some(disk) = block_device_holding(Path::new("/")) {
            assert!(Path::new("/sys/block").join(&disk.name).exists(), "{disk:?}");
            let node = Path::new("/dev").join(&disk.name);
            if node.exists() {
                assert_eq!(block_device_holding(&node).map(|d| d.name), Some(disk.name));
            }
        } else {
            eprintln!("SKIPPED (partly): / is not on a block device here");
        }
    }

    #[test]
    fn active_scheduler_is_the_bracketed_one() {
        assert_eq!(active_scheduler("none [mq-deadline] kyber bfq"), "mq-deadline");
        assert_eq!(active_scheduler("[none] mq-deadline"), "none");
        assert_eq!(active_scheduler("none"), "none");
    }

    #[test]
    fn transport_from_path() {
        let sata = Path::new("/sys/devices/pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda");
        assert_eq!(transport("sda", sata), "sata");
        let usb =
            Path::new("/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host4/target4:0:0/4:0:0:0/block/sdb");
        assert_eq!(transport("sdb", usb), "usb");
        assert_eq!(transport("nvme0n1", Path::new("/x")), "nvme");
        assert_eq!(transport("vda", Path::new("/x")), "virtio");
        assert_eq!(
            transport(
                "sdc",
                Path::new("/sys/devices/pci0000:00/0000:00:05.0/virtio3/host0/target0:0:0/0:0:0:0/block/sdc")
            ),
            "virtio"
        );
    }
}
