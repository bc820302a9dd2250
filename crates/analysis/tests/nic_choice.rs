//! The one NIC rule (ceilings::choose_nic) on the inventory of the fixture NAS
//! of headroom-sys (crates/sys/tests/fixtures/nas).

use headroom_analysis::choose_nic;
use headroom_sys::{inventory, SysRoot};

#[test]
fn fastest_interface_weighs_the_slot() {
    // The 10 GbE port is narrowed to 500 MB/s by its slot; the USB NIC to 53 MB/s.
    let h = inventory(&SysRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/../sys/tests/fixtures/nas")));
    assert_eq!(choose_nic(&h.nics, None).unwrap().name, "enp2s0");
}
