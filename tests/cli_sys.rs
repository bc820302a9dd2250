//! `headroom sys` on this machine: the table and the `host` JSON object.

use predicates::prelude::*;
mod support;
use support::headroom;

#[test]
fn sys_json_is_the_host_object_of_the_result_document() {
    let output = headroom().args(["sys", "--json"]).output().unwrap();
    assert!(output.status.success());
    let host: headroom_result::Host = serde_json::from_slice(&output.stdout).expect("stdout is one Host document");
    assert!(host.cpu.is_some_and(|c| c.logical_cpus >= 1));
    assert!(host.nics.iter().any(|n| n.name == "lo" && n.kind == headroom_result::NicKind::Loopback));
    assert!(host.filesystems.iter().any(|f| f.mountpoint == "/"));
}

#[test]
fn sys_table_has_every_section() {
    headroom()
        .arg("sys")
        .assert()
        .success()
        .stdout(predicate::str::contains("Network interfaces"))
        .stdout(predicate::str::contains("Block devices"))
        .stdout(predicate::str::contains("Filesystems"))
        .stdout(predicate::str::contains("lo "));
}

#[test]
fn sys_help_has_examples_and_rejects_arguments() {
    headroom().args(["sys", "--help"]).assert().success().stdout(predicate::str::contains("Examples:"));
    headroom().args(["sys", "extra"]).assert().code(2);
}

#[test]
fn a_veth_names_its_driver() {
    headroom_lab::require_root!();
    let hosts = headroom_lab::netns::TwoHosts::new(1500).expect("two namespaces joined by a veth pair");
    let out = hosts.a.command(env!("CARGO_BIN_EXE_headroom")).args(["sys", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nic = doc["nics"].as_array().unwrap().iter().find(|n| n["name"] == hosts.dev_a.as_str()).expect("the veth end");
    // A virtual interface has no device/driver link in sysfs; the kernel still names it (ethtool -i).
    assert_eq!(nic["driver"], "veth", "{nic}");
    assert_eq!(nic["kind"], "virtual", "{nic}");
}
