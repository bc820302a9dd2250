//! The inventory of the machine the tests run on: checks what every Linux
//! machine has, without assuming this machine's hardware.

use headroom_sys::{inventory_live, route_interface};
use std::net::IpAddr;

#[test]
fn this_machine_has_a_cpu_memory_loopback_and_a_root_filesystem() {
    let h = inventory_live();
    let cpu = h.cpu.as_ref().expect("/proc/cpuinfo is readable");
    assert!(cpu.logical_cpus >= 1);
    assert!(!cpu.model.is_empty());
    // The scheduler may confine us to fewer CPUs than the machine has, never more.
    let usable = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    assert!(cpu.logical_cpus as usize >= usable, "{} logical < {usable} usable", cpu.logical_cpus);
    assert!(h.memory_bytes.unwrap() > 64 << 20);
    let lo = h.nics.iter().find(|n| n.name == "lo").expect("lo exists");
    assert_eq!(lo.kind, headroom_result::NicKind::Loopback);
    assert!(lo.addresses.iter().any(|a| a.starts_with("127.0.0.1/")), "{:?}", lo.addresses);
    assert!(h.filesystems.iter().any(|f| f.mountpoint == "/"), "{:?}", h.filesystems);
    assert!(!h.filesystems.iter().any(|f| f.fstype == "proc"));
    assert!(h.kernel.is_some());
}

#[test]
fn every_block_device_has_a_transport_and_every_nic_a_kind() {
    let h = inventory_live();
    for d in &h.block_devices {
        assert!(d.transport.is_some(), "{d:?}");
    }
    for n in &h.nics {
        assert!(["physical", "virtual", "usb", "loopback"].contains(&n.kind.as_str()), "{n:?}");
    }
}

#[test]
fn loopback_and_own_addresses_route_over_lo() {
    assert_eq!(route_interface("127.0.0.1".parse().unwrap()).as_deref(), Some("lo"));
    assert_eq!(route_interface("127.3.4.5".parse().unwrap()).as_deref(), Some("lo"));
    let h = inventory_live();
    let own: Option<IpAddr> = h
        .nics
        .iter()
        .filter(|n| n.kind != headroom_result::NicKind::Loopback)
        .flat_map(|n| n.addresses.iter())
        .find_map(|a| a.split('/').next()?.parse().ok());
    if let Some(addr) = own {
        assert_eq!(route_interface(addr).as_deref(), Some("lo"), "{addr} is this machine's own address");
    } else {
        println!("skipped the own-address case: no non-loopback address on this machine");
    }
}
