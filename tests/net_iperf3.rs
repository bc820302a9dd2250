//! Interoperability with Debian's stock iperf3 (3.12), both ways, on loopback:
//! our client against `iperf3 -s`, stock `iperf3 -c` against `headroom serve --iperf3`.

mod net_support;
use net_support::*;
use std::process::Command;
use std::time::Duration;

fn probe<'a>(doc: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    doc["probes"].as_array().unwrap().iter().find(|p| p["id"] == id).unwrap_or_else(|| panic!("no probe {id} in {doc}"))
}

#[test]
fn headroom_client_against_stock_iperf3_server() {
    headroom_lab::require_program!("iperf3");
    let _machine = headroom_lab::hold_machine();
    let port = free_port();
    let mut server = Command::new("iperf3");
    server.args(["-s", "-J", "-p", &port.to_string(), "-B", "127.0.0.1"]);
    let iperf = Served::start(server, "127.0.0.1", port);
    let out = run(Command::new(bin()).args([
        "net",
        &format!("127.0.0.1:{port}"),
        "--tests",
        "up1,up,down1,bidir,udp",
        "--streams",
        "4",
        "--udp",
        "100M",
        "--time",
        "1s",
        "--json",
    ]));
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let doc = json(&out);
    for id in ["tcp-up-1", "tcp-up-4", "tcp-down-1", "tcp-bidir-4", "udp-up-1"] {
        let p = probe(&doc, id);
        assert_eq!(p["spec"]["protocol"], "iperf3", "auto-detection picked iperf3");
        assert!(p["summary"]["bytes_per_sec"].as_f64().unwrap() > 0.0, "{id}: {p}");
        assert!(p["details"].get("error").is_none(), "{id}: {}", p["details"]["error"]);
        assert!(p["details"]["cpu_remote_percent"].as_f64().is_some(), "{id}: server CPU from its results");
    }
    let bidir = probe(&doc, "tcp-bidir-4");
    assert!(
        bidir["details"]["upload_bytes"].as_u64().unwrap() > 0
            && bidir["details"]["download_bytes"].as_u64().unwrap() > 0
    );
    assert!(probe(&doc, "udp-up-1")["details"]["udp"]["packets"].as_u64().unwrap() > 1000);
    // The stock server's own JSON (one document per test) agrees within 2%.
    std::thread::sleep(Duration::from_millis(500));
    let text = iperf.lines.lock().unwrap().join("\n");
    // One document per test, each starting with a line "{"; the failed handshake of
    // auto-detection may add an error document without test figures.
    let docs: Vec<serde_json::Value> = text
        .split("\n{")
        .filter_map(|chunk| {
            serde_json::from_str::<serde_json::Value>(&format!("{{{}", chunk.trim_start_matches('{'))).ok()
        })
        .filter(|d| d["end"].get("sum_received").is_some() || d["end"].get("sum").is_some())
        .collect();
    assert!(docs.len() >= 4, "iperf3 -s -J printed {} documents", docs.len());
    let server_up1 = docs[0]["end"]["sum_received"]["bytes"].as_f64().unwrap();
    let ours = probe(&doc, "tcp-up-1")["details"]["upload_bytes"].as_f64().unwrap();
    assert!(close(server_up1, ours, 0.02), "iperf3 server received {server_up1} B, headroom says {ours} B");
}

#[test]
fn stock_iperf3_client_against_headroom_serve() {
    headroom_lab::require_program!("iperf3");
    let _machine = headroom_lab::hold_machine();
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--iperf3", "--port", &port.to_string(), "--max-clients", "2"]);
    let server = Served::start(cmd, "127.0.0.1", port);
    let cases: &[&[&str]] =
        &[&[], &["-R"], &["--bidir"], &["-P", "4"], &["-u", "-b", "100M"], &["-u", "-b", "100M", "-R"]];
    for (i, extra) in cases.iter().enumerate() {
        let out = run(Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"])
            .args(*extra));
        let doc = json(&out);
        assert!(doc.get("error").is_none(), "iperf3 {extra:?}: {}", doc["error"]);
        let lines = server.wait_lines(i + 1, Duration::from_secs(5));
        let line = lines.get(i).unwrap_or_else(|| panic!("no log line for {extra:?}: {lines:?}"));
        assert!(line.contains("status=ok"), "{line}");
        let logged = logged_bytes(line) as f64;
        let end = &doc["end"];
        let theirs = if extra.contains(&"-u") {
            end["sum"]["bytes"].as_f64().unwrap()
        } else {
            end["sum_received"]["bytes"].as_f64().unwrap()
                + end.get("sum_received_bidir_reverse").map_or(0.0, |s| s["bytes"].as_f64().unwrap())
        };
        assert!(theirs > 0.0, "{extra:?}: nothing moved");
        assert!(close(theirs, logged, 0.02), "{extra:?}: iperf3 says {theirs} B, headroom serve logged {logged} B");
    }
}

/// On a `--token --iperf3` server stock clients (which cannot do the challenge)
/// still run tests, but never take the last slot: a token holder is served
/// while the iperf3 clients fill all they may have.
#[test]
fn stock_iperf3_clients_on_a_token_server_leave_a_slot_for_token_holders() {
    headroom_lab::require_program!("iperf3");
    let _machine = headroom_lab::hold_machine();
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--iperf3", "--token", "s3cret", "--port", &port.to_string(), "--max-clients", "2"]);
    let _server = Served::start(cmd, "127.0.0.1", port);
    let iperf = |secs: &str| {
        let mut c = Command::new("iperf3");
        c.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", secs, "-b", "100M", "-J"]);
        c
    };
    let long = iperf("4").stdout(std::process::Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let second = json(&run(&mut iperf("1")));
    assert!(second["error"].as_str().is_some_and(|e| e.contains("busy")), "second iperf3 client: {second}");
    let net = run(Command::new(bin()).args([
        "net",
        &format!("127.0.0.1:{port}"),
        "--token",
        "s3cret",
        "--tests",
        "up1",
        "--time",
        "1s",
    ]));
    assert!(net.status.success(), "token holder: {}", String::from_utf8_lossy(&net.stderr));
    let first = long.wait_with_output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert!(doc.get("error").is_none(), "the first iperf3 client: {}", doc["error"]);
    assert!(doc["end"]["sum_received"]["bytes"].as_f64().unwrap() > 0.0);
}
