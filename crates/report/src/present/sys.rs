//! `headroom sys` on a terminal: the machine, CPU and memory, then tables
//! of NICs (TCP ceiling, bus), block devices (bus ceiling) and filesystems,
//! with the flags the inventory raised (what caps a part) highlighted under
//! their row.

use crate::sections::rate;
use crate::table::truncate;
use crate::Style;
use headroom_result::{BlockDevice, Host, Nic};
use headroom_units::{format_size, format_trimmed};
use owo_colors::OwoColorize;

/// The whole inventory as terminal text.
pub fn render(host: &Host, style: Style) -> String {
    let mut text = String::new();
    let title = host.hostname.clone().unwrap_or_else(|| "this machine".into());
    let mut about = Vec::new();
    if let Some(os) = &host.os {
        about.push(os.clone());
    }
    if let Some(k) = &host.kernel {
        about.push(format!("kernel {k}"));
    }
    text += &format!("{}  {}\n\n", style.bold(&title), about.join(", "));

    if let Some(cpu) = &host.cpu {
        let cores = cpu.physical_cores.map(|c| format!(", {c} cores")).unwrap_or_default();
        text += &format!("{:<9}{}: {} logical CPUs{cores}\n", style.bold("CPU"), cpu.model, cpu.logical_cpus);
        if !cpu.features.is_empty() {
            text += &format!("{:<9}{}\n", "", cpu.features.join(" "));
        }
    }
    if let Some(mem) = host.memory_bytes {
        text += &format!("{:<9}{}\n", style.bold("Memory"), format_size(mem));
    }

    text += &section(
        style,
        "Network interfaces",
        nic_line(["name", "kind", "driver", "link", "MTU", "carrier", "TCP ceiling", "bus"]),
        host.nics.iter().map(|nic| nic_row(nic, style)),
    );
    let width = name_width(&host.block_devices);
    text += &section(
        style,
        "Block devices",
        disk_line(width, ["name", "transport", "model", "size", "type", "scheduler", "bus", "bus ceiling"]),
        host.block_devices.iter().map(|disk| disk_row(disk, width, style)),
    );
    text += &section(
        style,
        "Filesystems",
        filesystem_line(["mountpoint", "type", "device"]),
        host.filesystems.iter().map(|fs| filesystem_line([&fs.mountpoint, &fs.fstype, &fs.device])),
    );
    text
}

/// A titled table: the bold title, the header line, then the rows.
fn section(style: Style, title: &str, header: String, rows: impl Iterator<Item = String>) -> String {
    let mut text = format!("\n{}\n{header}", style.bold(title));
    text.extend(rows);
    text
}

// One line of each table: the header and the rows share the column widths.
fn nic_line(c: [&str; 8]) -> String {
    format!("  {:<16} {:<9} {:<13} {:<8} {:>6} {:<9} {:<28} {}\n", c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
}

/// The name column: 10 wide (Linux's `nvme0n1`, `sda`), wider for longer
/// names (Windows' `PhysicalDrive0`).
fn name_width(disks: &[BlockDevice]) -> usize {
    disks.iter().map(|d| d.name.chars().count()).max().unwrap_or(0).max(10)
}

fn disk_line(name_width: usize, c: [&str; 8]) -> String {
    format!(
        "  {:<name_width$} {:<9} {:<30} {:>11} {:<4} {:<12} {:<14} {}\n",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
    )
}

fn filesystem_line(c: [&str; 3]) -> String {
    format!("  {:<28} {:<10} {}\n", c[0], c[1], c[2])
}

fn nic_row(nic: &Nic, style: Style) -> String {
    let link = nic.link.clone().or_else(|| nic.speed_mbps.map(|s| format!("{s}M"))).unwrap_or_else(|| "-".into());
    let link = match nic.duplex.as_deref() {
        Some("half") => format!("{link} half"),
        _ => link,
    };
    let carrier = match (nic.carrier, nic.carrier_changes) {
        (Some(true), Some(c)) => format!("up ({c})"),
        (Some(true), None) => "up".into(),
        (Some(false), _) => "no".into(),
        (None, _) => nic.operstate.clone().unwrap_or_else(|| "-".into()),
    };
    let ceiling = nic.ceiling_bytes_per_sec.map(|c| rate(c, style)).unwrap_or_else(|| "-".into());
    let bus = match (&nic.pci_link, nic.usb_speed_mbps) {
        (Some(l), _) => headroom_limits::pcie_link(l.gt_per_sec, l.width)
            .map(|link| link.name)
            .unwrap_or_else(|| format!("PCIe {} GT/s x{}", format_trimmed(l.gt_per_sec, 2), l.width)),
        (None, Some(usb)) => format!("USB {usb} Mb/s"),
        (None, None) => "-".into(),
    };
    let bus = match nic.bus_ceiling_bytes_per_sec {
        Some(b) => format!("{bus}: {}", rate(b, style)),
        None => bus,
    };
    let mut text = nic_line([
        &nic.name,
        nic.kind.as_str(),
        nic.driver.as_deref().unwrap_or("-"),
        &link,
        &nic.mtu.to_string(),
        &carrier,
        &ceiling,
        &bus,
    ]);
    if !nic.addresses.is_empty() {
        text += &format!("    {}\n", nic.addresses.join("  "));
    }
    text += &annotations(&nic.flags, &nic.notes, style);
    text
}

fn disk_row(disk: &BlockDevice, name_width: usize, style: Style) -> String {
    let kind = match disk.rotational {
        Some(true) => "hdd",
        Some(false) => "ssd",
        None => "-",
    };
    let kind = if matches!(disk.transport.as_deref(), Some("loop" | "ram" | "virtio" | "xen" | "dm" | "md" | "nbd")) {
        "-"
    } else {
        kind
    };
    let bus = match (&disk.bus, disk.sata_link_gbps) {
        (Some(b), Some(g)) => format!("{b} {} Gb/s", format_trimmed(g, 2)),
        (Some(b), None) => b.clone(),
        (None, _) => "-".into(),
    };
    let mut text = disk_line(
        name_width,
        [
            &disk.name,
            disk.transport.as_deref().unwrap_or("-"),
            &truncate(disk.model.as_deref().unwrap_or("-"), 30),
            &format_size(disk.size_bytes),
            kind,
            disk.scheduler.as_deref().unwrap_or("-"),
            &bus,
            &disk.ceiling_bytes_per_sec.map(|c| rate(c, style)).unwrap_or_else(|| "-".into()),
        ],
    );
    text += &annotations(&disk.flags, &disk.notes, style);
    text
}

/// Flags (highlighted, `!`) then notes (`-`), one per line under the row.
fn annotations(flags: &[String], notes: &[String], style: Style) -> String {
    let mut text = String::new();
    for flag in flags {
        let line = format!("! {flag}");
        if style.color {
            text += &format!("    {}\n", line.yellow().bold());
        } else {
            text += &format!("    {line}\n");
        }
    }
    for note in notes {
        text += &format!("    - {note}\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_nas_shows_its_flags_and_ceilings() {
        let root = headroom_sys::SysRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/../sys/tests/fixtures/nas"));
        let text = render(&headroom_sys::inventory(&root), Style::default());
        assert!(text.contains("! 10GbE NIC on PCIe 2.0 x1: the slot carries 4 Gb/s"), "{text}");
        assert!(text.contains("! USB NIC (r8152)"), "{text}");
        assert!(text.contains("! SSD on a 3 Gb/s SATA link"), "{text}");
        // TCP ceiling of 10 GbE at MTU 9000 and the slot's 4 Gb/s, bits and bytes.
        assert!(text.contains("9.900 Gb/s (1.238 GB/s)"), "{text}");
        assert!(text.contains("PCIe 2.0 x1: 4.000 Gb/s (500.0 MB/s)"), "{text}");
        assert!(text.contains("PCIe 3.0 x4"), "{text}");
        assert!(text.contains("/mnt/nas 2"), "{text}");
        let iec = render(&headroom_sys::inventory(&root), Style { color: false, iec: true });
        assert!(iec.contains("PCIe 2.0 x1: 4.000 Gb/s (500.0 MB/s, 476.8 MiB/s)"), "{iec}");
        let colour = render(&headroom_sys::inventory(&root), Style { color: true, iec: false });
        assert!(colour.contains("\x1b[1mNetwork interfaces\x1b[0m"), "{colour}");
    }

    #[test]
    fn a_long_disk_name_widens_its_column_for_every_row() {
        let disk = |name: &str| BlockDevice { name: name.into(), size_bytes: 1 << 30, ..BlockDevice::default() };
        let lines = |disks: &[BlockDevice]| {
            let header =
                disk_line(name_width(disks), ["name", "transport", "model", "size", "type", "scheduler", "bus", "x"]);
            let rows: String = disks.iter().map(|d| disk_row(d, name_width(disks), Style::default())).collect();
            header + &rows
        };
        let windows = lines(&[disk("PhysicalDrive0"), disk("PhysicalDrive12")]);
        let starts: Vec<usize> =
            windows.lines().map(|l| l.find(" - ").or_else(|| l.find(" transport")).unwrap()).collect();
        assert!(starts.iter().all(|s| *s == starts[0]) && starts[0] == 2 + 15, "{windows}");
        assert!(lines(&[disk("sda")]).starts_with("  name       transport"), "Linux's width stays 10");
    }
}
