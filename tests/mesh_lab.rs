//! A switchless mesh of three machines (three namespaces, each pair on its
//! own veth): `run --server B` from A, and a `fleet run` whose agent A tests
//! towards B, must hold the path against A's NIC towards B, never the one
//! towards C (which has the larger MTU, so a choice by ceiling would take it).

use headroom_lab::netns::Mesh;
use headroom_result::{ResultDoc, Verdict};
use std::time::Duration;

const TOKEN: &str = "mesh-lab-token";

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_headroom")
}

fn lab_ready(what: &str) -> bool {
    if !headroom_lab::is_root() {
        eprintln!("SKIPPED {what}: needs root (namespaces)");
        return false;
    }
    if !headroom_lab::has_program("ip") {
        eprintln!("SKIPPED {what}: `ip` is not installed (run scripts/install-deps.sh)");
        return false;
    }
    true
}

/// Three meshed hosts; A's NIC towards C gets MTU 9000 (both ends).
fn mesh() -> Mesh {
    let m = Mesh::new(3).expect("mesh namespaces");
    let ac = m.link(0, 2);
    m.hosts[0].exec("ip", &["link", "set", &ac.dev_i, "mtu", "9000"]).expect("mtu");
    m.hosts[2].exec("ip", &["link", "set", &ac.dev_j, "mtu", "9000"]).expect("mtu");
    m
}

/// The NIC hops the verdict names.
fn nic_hops(v: &Verdict) -> Vec<String> {
    v.directions.iter().flat_map(|d| &d.hops).filter(|h| h.hop == "nic").map(|h| h.name.clone()).collect()
}

fn assert_towards_b(m: &Mesh, hops: &[String]) {
    let (ab, ac) = (&m.link(0, 1).dev_i, &m.link(0, 2).dev_i);
    eprintln!("nic hops: {hops:?} (A-B {ab}, A-C {ac})");
    assert!(!hops.is_empty(), "no NIC hop in the verdict");
    for name in hops {
        assert!(name.contains(ab.as_str()), "A's NIC towards B is {ab}, the verdict names {name}");
    }
}

#[test]
fn run_from_a_names_the_nic_towards_b() {
    if !lab_ready("mesh run") {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let m = mesh();
    let b_addr = m.link(0, 1).addr_j.to_string();
    let mut server = m.hosts[1].spawn(exe(), &["serve", "--bind", "0.0.0.0", "--no-auth", "--quiet"]).expect("serve");
    std::thread::sleep(Duration::from_millis(300));
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("run.json");
    let out = m.hosts[0]
        .command(exe())
        .args(["run", "--server", &b_addr, "--path", tmp.path().to_str().unwrap(), "--preset", "quick"])
        .args(["--save", save.to_str().unwrap(), "--quiet"])
        .env("NO_COLOR", "1")
        .output()
        .expect("headroom run");
    server.kill();
    assert!(out.status.success(), "run failed: {}", String::from_utf8_lossy(&out.stderr));
    let doc = ResultDoc::from_json(&std::fs::read_to_string(&save).unwrap()).unwrap();
    assert_towards_b(&m, &nic_hops(doc.verdict.as_ref().expect("verdict")));
}

#[test]
fn a_fleet_agent_is_held_against_its_nic_towards_the_server() {
    if !lab_ready("mesh fleet") {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let m = mesh();
    let b_addr = m.link(0, 1).addr_j.to_string();
    let a_from_c = m.link(0, 2).addr_i.to_string();
    let mut server =
        m.hosts[1].spawn(exe(), &["serve", "--bind", "0.0.0.0", "--token", TOKEN, "--quiet"]).expect("serve in B");
    let mut agent = m.hosts[0]
        .spawn(exe(), &["serve", "--bind", "0.0.0.0", "--token", TOKEN, "--allow-net-to", &b_addr, "--quiet"])
        .expect("agent in A");
    std::thread::sleep(Duration::from_millis(300));
    // The controller is C: it reaches the agent over C-A, the agent tests over A-B.
    let out = m.hosts[2]
        .command(exe())
        .args(["fleet", "--hosts", &a_from_c, "--token", TOKEN, "run", "--server", &b_addr, "--json"])
        .env("NO_COLOR", "1")
        .output()
        .expect("headroom fleet");
    server.kill();
    agent.kill();
    assert!(out.status.success(), "fleet failed: {}", String::from_utf8_lossy(&out.stderr));
    let doc = ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a result document");
    let host = &doc.fleet.as_ref().expect("fleet").hosts[0];
    assert_towards_b(&m, &nic_hops(host.verdict.as_ref().expect("the agent's verdict")));
}
