//! The inventory of a fixture NAS (tests/fixtures/nas, made by make-nas.sh):
//! each part the sys command must judge, with its ceiling and flags.

use headroom_result::{BlockDevice, Host, Nic};
use headroom_sys::{effective_ceiling, inventory, route_interface_in, SysRoot};
use std::net::IpAddr;

fn nas() -> SysRoot {
    SysRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nas"))
}

fn host() -> Host {
    inventory(&nas())
}

fn nic<'a>(host: &'a Host, name: &str) -> &'a Nic {
    host.nics.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no NIC {name} in {:#?}", host.nics))
}

fn disk<'a>(host: &'a Host, name: &str) -> &'a BlockDevice {
    host.block_devices.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("no disk {name}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

#[test]
fn cpu_memory_and_names() {
    let h = host();
    let cpu = h.cpu.as_ref().unwrap();
    assert_eq!(cpu.model, "Intel(R) Pentium(R) Silver J5040 CPU @ 2.00GHz");
    assert_eq!(cpu.logical_cpus, 4);
    assert_eq!(cpu.physical_cores, Some(2));
    assert_eq!(cpu.features, ["aes", "pclmulqdq", "sse4_2", "sha_ni"]);
    assert_eq!(h.memory_bytes, Some(8_011_808 * 1024));
    assert_eq!(h.hostname.as_deref(), Some("nas"));
    assert_eq!(h.kernel.as_deref(), Some("6.1.0-27-amd64"));
    assert_eq!(h.os.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
}

#[test]
fn ten_gbe_nic_in_a_pcie2_x1_slot_is_flagged() {
    let h = host();
    let n = nic(&h, "enp2s0");
    assert_eq!(n.kind.as_str(), "physical");
    assert_eq!(n.driver.as_deref(), Some("ixgbe"));
    assert_eq!(n.link.as_deref(), Some("10GbE"));
    assert_eq!(n.mtu, 9000);
    let link = n.pci_link.as_ref().unwrap();
    assert_eq!((link.gt_per_sec, link.width), (5.0, 1));
    assert_eq!(link.max_width, Some(8));
    // PCIe 2.0: 5 GT/s x 8b/10b = 4 Gb/s = 500 MB/s per lane.
    assert!(close(link.bytes_per_sec, 500e6));
    // 10 GbE TCP at MTU 9000: 10e9 * 8948 / 9038 / 8.
    assert!(close(n.ceiling_bytes_per_sec.unwrap(), 10e9 * 8948.0 / 9038.0 / 8.0));
    assert!(close(effective_ceiling(n).unwrap(), 500e6));
    assert!(n.flags.contains(&"10GbE NIC on PCIe 2.0 x1: the slot carries 4 Gb/s".to_string()), "{:?}", n.flags);
}

#[test]
fn usb_nic_on_a_usb2_port_is_flagged_with_its_port_ceiling_and_flaps() {
    let h = host();
    let n = nic(&h, "enx00e04c680001");
    assert_eq!(n.kind.as_str(), "usb");
    assert_eq!(n.driver.as_deref(), Some("r8152"));
    assert_eq!(n.usb_speed_mbps, Some(480));
    assert!(close(n.ceiling_bytes_per_sec.unwrap(), 117_685_305.59), "1 GbE TCP at MTU 1500 is 117.69 MB/s");
    assert!(close(n.bus_ceiling_bytes_per_sec.unwrap(), 13.0 * 512.0 * 8000.0));
    assert!(n.flags.iter().any(|f| f.starts_with("USB NIC (r8152)")), "{:?}", n.flags);
    assert!(n.flags.iter().any(|f| f.contains("USB 2.0 port")), "{:?}", n.flags);
    assert!(n.flags.iter().any(|f| f.contains("carrier changed 37 times")), "{:?}", n.flags);
}

#[test]
fn software_interfaces_are_virtual_or_loopback_with_no_ceiling() {
    let h = host();
    let br = nic(&h, "br0");
    assert_eq!(br.kind.as_str(), "virtual");
    assert_eq!(br.ceiling_bytes_per_sec, None);
    assert!(br.flags.is_empty());
    let lo = nic(&h, "lo");
    assert_eq!(lo.kind.as_str(), "loopback");
    assert_eq!(lo.mtu, 65536);
}

#[test]
fn nvme_on_gen3_x4_has_its_link_ceiling() {
    let h = host();
    let d = disk(&h, "nvme0n1");
    assert_eq!(d.transport.as_deref(), Some("nvme"));
    assert_eq!(d.model.as_deref(), Some("Samsung SSD 970 EVO Plus 1TB"));
    assert_eq!(d.rotational, Some(false));
    assert_eq!(d.size_bytes, 1_953_525_168 * 512);
    assert_eq!(d.scheduler.as_deref(), Some("none"));
    assert_eq!(d.bus.as_deref(), Some("PCIe 3.0 x4"));
    let link = d.pci_link.as_ref().unwrap();
    assert_eq!((link.gt_per_sec, link.width, link.max_width), (8.0, 4, None));
    assert!(close(d.ceiling_bytes_per_sec.unwrap(), 4.0 * 8e9 * 128.0 / 130.0 / 8.0));
    assert!(d.flags.is_empty(), "{:?}", d.flags);
}

#[test]
fn nvme_trained_down_to_x2_is_flagged() {
    let h = host();
    let d = disk(&h, "nvme1n1");
    assert_eq!(d.bus.as_deref(), Some("PCIe 3.0 x2"));
    assert!(d.flags.iter().any(|f| f.contains("PCIe 3.0 x2, the drive can do 3.0 x4")), "{:?}", d.flags);
}

#[test]
fn sata_ssd_at_3_gbps_is_capped_and_flagged() {
    let h = host();
    let d = disk(&h, "sda");
    assert_eq!(d.transport.as_deref(), Some("sata"));
    assert_eq!(d.model.as_deref(), Some("Samsung SSD 860 EVO 500GB"));
    assert_eq!(d.sata_link_gbps, Some(3.0));
    assert_eq!(d.sata_max_link_gbps, Some(6.0));
    assert_eq!(d.scheduler.as_deref(), Some("mq-deadline"));
    assert!(close(d.ceiling_bytes_per_sec.unwrap(), 300e6));
    assert!(d.flags.iter().any(|f| f.contains("SSD on a 3 Gb/s SATA link: capped at 300 MB/s")), "{:?}", d.flags);
    let hdd = disk(&h, "sdb");
    assert_eq!(hdd.rotational, Some(true));
    assert_eq!(hdd.sata_link_gbps, Some(6.0));
    assert!(close(hdd.ceiling_bytes_per_sec.unwrap(), 600e6));
    assert!(hdd.flags.is_empty());
}

#[test]
fn unused_loop_devices_are_left_out_and_used_ones_name_their_file() {
    let h = host();
    assert!(!h.block_devices.iter().any(|d| d.name == "loop0"));
    let l = disk(&h, "loop1");
    assert_eq!(l.transport.as_deref(), Some("loop"));
    assert!(l.notes.iter().any(|n| n.contains("/srv/images/test.img")));
}

#[test]
fn filesystems_without_pseudo_mounts_and_unescaped() {
    let h = host();
    let points: Vec<&str> = h.filesystems.iter().map(|f| f.mountpoint.as_str()).collect();
    assert_eq!(points, ["/", "/srv/tank", "/run", "/mnt/nas 2"]);
    let cifs = &h.filesystems[3];
    assert_eq!((cifs.fstype.as_str(), cifs.device.as_str()), ("cifs", "//nas2/backup"));
}

#[test]
fn route_lookup_is_longest_prefix_then_metric() {
    let root = nas();
    let route = |a: &str| route_interface_in(&root, a.parse::<IpAddr>().unwrap());
    assert_eq!(route("192.168.1.20").as_deref(), Some("enp2s0"));
    assert_eq!(route("10.1.2.3").as_deref(), Some("enx00e04c680001"), "10/8 beats the default route");
    assert_eq!(route("8.8.8.8").as_deref(), Some("enp2s0"), "default route");
    assert_eq!(route("127.0.0.1").as_deref(), Some("lo"));
    assert_eq!(route("::1").as_deref(), Some("lo"));
    assert_eq!(route("fd00::7").as_deref(), Some("enp2s0"));
    assert_eq!(route("fd00::2").as_deref(), Some("lo"), "a local route stays on this machine");
    assert_eq!(route("2001:db8::1").as_deref(), Some("enp2s0"), "IPv6 default route");
}

#[test]
fn a_missing_tree_gives_an_empty_inventory_not_a_panic() {
    let h = inventory(&SysRoot::at("/nonexistent/headroom-fixture"));
    assert_eq!(h, Host::default());
}
