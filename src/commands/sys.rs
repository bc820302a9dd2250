//! `headroom sys`: what is in this box and what each part can carry — CPU,
//! memory, every NIC with its TCP ceiling and bus, every disk with its bus
//! ceiling, mounted filesystems — with the flags that cap a part highlighted.
//! `--json` prints the `host` object of the result document.

use crate::output::{Outcome, Output};
use headroom_result::{BlockDevice, Host, Nic};
use headroom_units::{format_rate, format_size};
use owo_colors::OwoColorize;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom sys                  CPU, memory, NICs, disks and filesystems with their ceilings
  headroom sys --json           the `host` object of the result document
  headroom sys --json | jq '.nics[] | select(.flags)'   only the NICs with a problem

Flags (marked !) name what caps a part: a 10 GbE NIC in a PCIe 2.0 x1 slot, a
USB NIC, an SSD on a 3 Gb/s SATA link, an NVMe drive trained down to fewer lanes,
a link that flaps. Read from /proc and /sys; needs no root.")]
pub struct SysArgs {}

pub fn run(_args: &SysArgs, out: &Output) -> anyhow::Result<Outcome> {
    let host = headroom_sys::inventory_live();
    if out.json {
        out.print_json(&host)?;
    } else {
        print!("{}", render(&host, out));
    }
    Ok(Outcome::Ok)
}

/// The whole inventory as terminal text.
pub fn render(host: &Host, out: &Output) -> String {
    let mut text = String::new();
    let title = host.hostname.clone().unwrap_or_else(|| "this machine".into());
    let mut about = Vec::new();
    if let Some(os) = &host.os {
        about.push(os.clone());
    }
    if let Some(k) = &host.kernel {
        about.push(format!("kernel {k}"));
    }
    text += &format!("{}  {}\n\n", out.bold(&title), about.join(", "));

    if let Some(cpu) = &host.cpu {
        let cores = cpu.physical_cores.map(|c| format!(", {c} cores")).unwrap_or_default();
        text += &format!("{:<9}{}: {} logical CPUs{cores}\n", out.bold("CPU"), cpu.model, cpu.logical_cpus);
        if !cpu.features.is_empty() {
            text += &format!("{:<9}{}\n", "", cpu.features.join(" "));
        }
    }
    if let Some(mem) = host.memory_bytes {
        text += &format!("{:<9}{}\n", out.bold("Memory"), format_size(mem));
    }

    text += &section(
        out,
        "Network interfaces",
        nic_line(["name", "kind", "driver", "link", "MTU", "carrier", "TCP ceiling", "bus"]),
        host.nics.iter().map(|nic| nic_row(nic, out)),
    );
    text += &section(
        out,
        "Block devices",
        disk_line(["name", "transport", "model", "size", "type", "scheduler", "bus", "bus ceiling"]),
        host.block_devices.iter().map(|disk| disk_row(disk, out)),
    );
    text += &section(
        out,
        "Filesystems",
        filesystem_line(["mountpoint", "type", "device"]),
        host.filesystems.iter().map(|fs| filesystem_line([&fs.mountpoint, &fs.fstype, &fs.device])),
    );
    text
}

/// A titled table: the bold title, the header line, then the rows.
fn section(out: &Output, title: &str, header: String, rows: impl Iterator<Item = String>) -> String {
    let mut text = format!("\n{}\n{header}", out.bold(title));
    text.extend(rows);
    text
}

// One line of each table: the header and the rows share the column widths.
fn nic_line(c: [&str; 8]) -> String {
    format!("  {:<16} {:<9} {:<13} {:<8} {:>6} {:<9} {:<28} {}\n", c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
}

fn disk_line(c: [&str; 8]) -> String {
    format!("  {:<10} {:<9} {:<30} {:>11} {:<4} {:<12} {:<14} {}\n", c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
}

fn filesystem_line(c: [&str; 3]) -> String {
    format!("  {:<28} {:<10} {}\n", c[0], c[1], c[2])
}

fn rate(bytes_per_sec: f64, out: &Output) -> String {
    format_rate(bytes_per_sec * 8.0, out.iec)
}

fn nic_row(nic: &Nic, out: &Output) -> String {
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
    let ceiling = nic.ceiling_bytes_per_sec.map(|c| rate(c, out)).unwrap_or_else(|| "-".into());
    let bus = match (&nic.pci_link, nic.usb_speed_mbps) {
        (Some(l), _) => headroom_limits::pcie_link(l.gt_per_sec, l.width)
            .map(|link| link.name)
            .unwrap_or_else(|| format!("PCIe {} GT/s x{}", trim(l.gt_per_sec), l.width)),
        (None, Some(usb)) => format!("USB {usb} Mb/s"),
        (None, None) => "-".into(),
    };
    let bus = match nic.bus_ceiling_bytes_per_sec {
        Some(b) => format!("{bus}: {}", rate(b, out)),
        None => bus,
    };
    let mut text = nic_line([
        &nic.name,
        &nic.kind,
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
    text += &annotations(&nic.flags, &nic.notes, out);
    text
}

fn disk_row(disk: &BlockDevice, out: &Output) -> String {
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
        (Some(b), Some(g)) => format!("{b} {} Gb/s", trim(g)),
        (Some(b), None) => b.clone(),
        (None, _) => "-".into(),
    };
    let mut text = disk_line([
        &disk.name,
        disk.transport.as_deref().unwrap_or("-"),
        &truncate(disk.model.as_deref().unwrap_or("-"), 30),
        &format_size(disk.size_bytes),
        kind,
        disk.scheduler.as_deref().unwrap_or("-"),
        &bus,
        &disk.ceiling_bytes_per_sec.map(|c| rate(c, out)).unwrap_or_else(|| "-".into()),
    ]);
    text += &annotations(&disk.flags, &disk.notes, out);
    text
}

/// Flags (highlighted, `!`) then notes (`-`), one per line under the row.
fn annotations(flags: &[String], notes: &[String], out: &Output) -> String {
    let mut text = String::new();
    for flag in flags {
        let line = format!("! {flag}");
        if out.color {
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

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Output {
        Output { json: false, iec: false, color: false, progress: false }
    }

    #[test]
    fn the_fixture_nas_shows_its_flags_and_ceilings() {
        let root = headroom_sys::SysRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/crates/sys/tests/fixtures/nas"));
        let text = render(&headroom_sys::inventory(&root), &plain());
        println!("{text}");
        assert!(text.contains("! 10GbE NIC on PCIe 2.0 x1: the slot carries 4 Gb/s"), "{text}");
        assert!(text.contains("! USB NIC (r8152)"), "{text}");
        assert!(text.contains("! SSD on a 3 Gb/s SATA link"), "{text}");
        // TCP ceiling of 10 GbE at MTU 9000 and the slot's 4 Gb/s, bits and bytes.
        assert!(text.contains("9.900 Gb/s (1.238 GB/s)"), "{text}");
        assert!(text.contains("PCIe 2.0 x1: 4.000 Gb/s (500.0 MB/s)"), "{text}");
        assert!(text.contains("PCIe 3.0 x4"), "{text}");
        assert!(text.contains("/mnt/nas 2"), "{text}");
    }
}
