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

#[test]
fn a_protocol_leaves_less_of_tcp_the_smaller_its_ios() {
    let big = link_json(&["10gbe", "--protocol", "smb", "--io-size", "1M"]);
    let small = link_json(&["10gbe", "--protocol", "smb", "--io-size", "4k"]);
    let tcp = tcp_mbps(&big);
    let read = |d: &serde_json::Value| d["protocol"]["read"]["goodput_bits_per_sec"].as_f64().unwrap() / 1e6;
    // SMB2 READ: NetBIOS 4 + header 64 + response 16 = 84 bytes per read.
    assert_eq!(big["protocol"]["read"]["header_bytes_per_io"], 84);
    assert!((read(&big) - tcp * 1048576.0 / 1048660.0).abs() < 0.01);
    assert!((read(&small) - tcp * 4096.0 / 4180.0).abs() < 0.01);
    // iSCSI with 8 KiB segments: a 1 MiB read is 128 Data-In PDUs and a response.
    let iscsi = link_json(&["1gbe", "--protocol", "iscsi"]);
    assert_eq!(iscsi["protocol"]["read"]["header_bytes_per_io"], 129 * 48);
    headroom()
        .args(["link", "1gbe", "--protocol", "nfs", "--io-size", "1M", "--max-request", "64k"])
        .assert()
        .success()
        .stdout(predicate::str::contains("2112 B in 16"));
}

#[test]
fn protocol_mistakes_exit_2_naming_the_flag() {
    for (args, says) in [
        (vec!["sata3", "--protocol", "nfs"], "--protocol needs an Ethernet link"),
        (vec!["1gbe", "--protocol", "ftp"], "ftp"),
        (vec!["1gbe", "--io-size", "1M"], "--protocol"),
        (vec!["1gbe", "--protocol", "nbd", "--io-size", "1"], "--io-size 1 is out of range"),
        (vec!["1gbe", "--protocol", "iscsi", "--max-request", "64k"], "--iscsi-segment"),
    ] {
        headroom().arg("link").args(&args).assert().code(2).stderr(predicate::str::contains(says));
    }
}

#[test]
fn a_switched_path_adds_a_frame_per_store_and_forward_hop_and_a_header_per_cut_through_one() {
    let doc = |args: &[&str]| link_json(args);
    // 1518 + 8 bytes at 10 Gb/s = 1.2208 us per link.
    let sf = doc(&["10gbe,10gbe,10gbe"]);
    assert_eq!(sf["schema"], "headroom.link-path/v1");
    assert!((sf["total_s"].as_f64().unwrap() - 3.0 * 1.2208e-6).abs() < 1e-12);
    let ct = doc(&["10gbe,10gbe,10gbe", "--hops", "cut-through"]);
    assert!((ct["total_s"].as_f64().unwrap() - (1.2208e-6 + 2.0 * 17.6e-9)).abs() < 1e-12);
    // A speed change forces store-and-forward, whatever was asked.
    let mixed = doc(&["10gbe,25gbe,10gbe", "--hops", "cut-through"]);
    assert_eq!(mixed["hops"][1]["switch"], "store-and-forward");
    assert_eq!(mixed["hops"][1]["speed_change"], true);
    headroom()
        .args(["link", "10gbe,25gbe,10gbe", "--hops", "cut-through"])
        .assert()
        .success()
        .stdout(predicate::str::contains("store-and-forward (speed change)"))
        .stdout(predicate::str::contains("total 2.930 us for 2 switch(es)"));
    let small = doc(&["10gbe", "--frame-size", "64"]);
    assert!((small["frame_serialization_s"].as_f64().unwrap() - 51.2e-9).abs() < 1e-15);
}

#[test]
fn each_switch_adds_its_datasheet_latency_once_and_the_total_says_how_much() {
    let ct = link_json(&["10gbe,10gbe,10gbe", "--hops", "cut-through", "--switch-latency", "600ns"]);
    // Two switches: the cut-through arithmetic above plus 2 x 600 ns.
    let expected = 1.2208e-6 + 2.0 * 17.6e-9 + 2.0 * 600e-9;
    assert!((ct["total_s"].as_f64().unwrap() - expected).abs() < 1e-12, "{ct}");
    assert_eq!(ct["switch_latency_s"].as_f64(), Some(600e-9));
    assert!(ct["hops"][0].get("switch_latency_s").is_none(), "the sender is no switch: {ct}");
    headroom()
        .args(["link", "10gbe,10gbe,10gbe", "--hops", "cut-through", "--switch-latency", "600ns"])
        .assert()
        .success()
        .stdout(predicate::str::contains("each adding 600.000 ns of its own"))
        .stdout(predicate::str::contains("1.200 us the switches' own latency"));
}

#[test]
fn path_mistakes_exit_2_naming_the_flag() {
    for (args, says) in [
        (vec!["10gbe", "--hops", "cut-through"], "--hops is for a path"),
        (vec!["10gbe,sata3"], "SATA III is sata"),
        (vec!["10gbe,10gbe", "--frame-size", "63"], "--frame-size 63 is out of range"),
        (vec!["10gbe,10gbe", "--protocol", "nfs"], "--protocol applies to one link"),
        (vec!["10gbe,warp9"], "warp9"),
        (vec!["10gbe", "--switch-latency", "600ns"], "--switch-latency is for a path"),
        (vec!["10gbe,10gbe", "--switch-latency", "5ms"], "did you mean us?"),
        (vec!["10gbe,10gbe", "--switch-latency", "fast"], "--switch-latency"),
    ] {
        headroom().arg("link").args(&args).assert().code(2).stderr(predicate::str::contains(says));
    }
}

#[test]
fn fcoe_goodput_is_listed_per_ethernet_speed_and_ip_flags_are_refused() {
    let doc = link_json(&["fcoe"]);
    assert_eq!(doc["schema"], "headroom.link-fcoe/v1");
    let links = doc["links"].as_array().unwrap();
    // 10 GbE and up only; 2112 of every 2200 wire bytes are FC data.
    assert!(links.iter().all(|l| l["usable_bits_per_sec"].as_f64().unwrap() >= 10e9));
    let ten = links.iter().find(|l| l["link"] == "10GbE").expect("10GbE listed");
    assert_eq!(ten["fcoe"]["goodput_bits_per_sec"].as_f64().unwrap(), 9.6e9);
    headroom().args(["link", "fcoe", "--mtu", "9000"]).assert().code(2).stderr(predicate::str::contains("--mtu"));
    // The same figure as a row under 25 GbE; none under gigabit.
    assert_eq!(link_json(&["25gbe"])["ceilings"]["fcoe"]["goodput_bits_per_sec"].as_f64().unwrap(), 24e9);
    assert!(link_json(&["1gbe"])["ceilings"]["fcoe"].is_null());
}
