//! `headroom link` end to end: the examples, the catalog listing and bad input.

use predicates::prelude::*;
mod support;
use support::headroom;

fn link_json(args: &[&str]) -> serde_json::Value {
    let out = headroom().arg("link").args(args).arg("--json").assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).unwrap()
}

fn tcp_mbps(doc: &serde_json::Value) -> f64 {
    doc["ceilings"]["tcp"]["goodput_bits_per_sec"].as_f64().unwrap() / 1e6
}

#[test]
fn gigabit_table_shows_all_three_units() {
    headroom()
        .args(["link", "1gbe"])
        .assert()
        .success()
        .stdout(predicate::str::contains("941.48 Mb/s"))
        .stdout(predicate::str::contains("117.69 MB/s"))
        .stdout(predicate::str::contains("112.23 MiB/s"))
        .stdout(predicate::str::contains("957.09 Mb/s"))
        .stdout(predicate::str::contains("936.00 Mb/s"));
}

#[test]
fn json_examples_hold() {
    let doc = link_json(&["1gbe"]);
    assert_eq!(doc["schema"], "headroom.link/v1");
    assert_eq!(doc["link"]["family"], "ethernet");
    assert_eq!(doc["ceilings"]["tcp"]["payload_bytes_per_frame"], 1448);
    assert_eq!(doc["ceilings"]["tcp"]["wire_bytes_per_frame"], 1538);
    assert!((tcp_mbps(&doc) - 941.48).abs() < 0.01);
    assert!((tcp_mbps(&link_json(&["1gbe", "--tcp-timestamps", "off"])) - 949.28).abs() < 0.01);
    assert!((tcp_mbps(&link_json(&["1gbe", "--mtu", "9000"])) - 990.04).abs() < 0.01);
    let udp = doc["ceilings"]["udp"]["goodput_bits_per_sec"].as_f64().unwrap() / 1e6;
    assert!((udp - 957.09).abs() < 0.01);
    let iscsi = doc["ceilings"]["iscsi"]["goodput_bits_per_sec"].as_f64().unwrap() / 1e6;
    assert!((iscsi - 936.0).abs() < 0.05);
}

#[test]
fn non_ethernet_links_have_no_frame_ceilings() {
    let sata = link_json(&["sata3"]);
    assert_eq!(sata["link"]["family"], "sata");
    assert!(sata.get("ceilings").is_none());
    assert!((sata["usable_bytes_per_sec"].as_f64().unwrap() - 600e6).abs() < 1.0);
    let fc = link_json(&["8gfc"]);
    assert!((fc["usable_bytes_per_sec"].as_f64().unwrap() - 850e6).abs() < 1.0);
    assert_eq!(fc["link"]["nominal_bytes_per_sec"], 800e6);
    let ib = link_json(&["ib-fdr"]);
    assert!((ib["link"]["usable_bits_per_sec"].as_f64().unwrap() / 1e9 - 54.55).abs() < 0.01);
    headroom().args(["link", "8gfc"]).assert().success().stdout(predicate::str::contains("800 MB/s as marketed"));
}

#[test]
fn unknown_spec_suggests_and_exits_2() {
    headroom()
        .args(["link", "10gbx"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean 10gbe"))
        .stderr(predicate::str::contains("headroom link --list"));
}

#[test]
fn bad_framing_exits_2_naming_the_flag() {
    for (flag, value) in [("--mtu", "100"), ("--mtu", "10000"), ("--vlan-tags", "3"), ("--iscsi-segment", "100")] {
        headroom().args(["link", "1gbe", flag, value]).assert().code(2).stderr(predicate::str::contains(flag));
    }
    headroom().args(["link", "1gbe", "--mtu", "abc"]).assert().code(2).stderr(predicate::str::contains("--mtu"));
    headroom()
        .args(["link", "1gbe", "--iscsi-segment", "8x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("4k = 4096"));
    headroom()
        .args(["link", "sata3", "--mtu", "9000"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Ethernet links only"));
    headroom().arg("link").assert().code(2);
}

#[test]
fn list_shows_every_catalog_entry() {
    let out = headroom().args(["link", "--list"]).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    for link in headroom_limits::catalog() {
        assert!(text.contains(&link.name), "{} missing from --list", link.name);
    }
}
