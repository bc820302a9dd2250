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
    let (server, port) = Served::serve(&["--iperf3", "--max-clients", "2"]);
    let cases: &[&[&str]] =
        &[&[], &["-R"], &["--bidir"], &["-P", "4"], &["-u", "-b", "100M"], &["-u", "-b", "100M", "-R"], &["-Z", "-R"]];
    for (i, extra) in cases.iter().enumerate() {
        let out = run(Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"])
            .args(*extra));
        let doc = json(&out);
        assert!(doc.get("error").is_none(), "iperf3 {extra:?}: {}", doc["error"]);
        let lines = server.wait_lines(i + 1, Duration::from_secs(5));
        let line = lines.get(i).unwrap_or_else(|| panic!("no log line for {extra:?}: {lines:?}"));
        assert!(line.contains("status=ok"), "{line}");
        // -Z asks the sending server to send by reference too (`"zerocopy":1`).
        let by_reference = extra.contains(&"-Z").then(|| format!(" zerocopy={} ", cfg!(target_os = "linux")));
        assert!(by_reference.is_none_or(|words| line.contains(&words)), "{extra:?}: {line}");
        let logged = logged_bytes(line) as f64;
        let (server_count, client_received) = server_and_client_counts(&doc["end"], extra);
        assert!(client_received > 0.0, "{extra:?}: nothing moved");
        // The log line says what the server moved, as it reported it to the client.
        assert!(
            close(server_count, logged, 0.001),
            "{extra:?}: the server reported {server_count} B to iperf3, its log says {logged} B"
        );
        // And the far side saw that much, less at most what the sockets held when the
        // test ended (TCP) or what a starved receiver dropped (UDP, counted as lost).
        let lost_udp = lost_udp_bytes(&doc["end"]);
        println!("iperf3 {extra:?}: serve logged {logged} B, reported {server_count} B, iperf3 received {client_received} B, lost {lost_udp} B");
        let slack = 0.02 * logged + in_flight_allowance(extra);
        assert!(
            (logged - client_received - lost_udp).abs() <= slack,
            "{extra:?}: headroom serve logged {logged} B, iperf3 received {client_received} B \
             (+{lost_udp} B lost), more apart than {slack} B"
        );
    }
}

/// What the server moved by its own report (iperf3 copies it into its `end`
/// section: `sum_received` where the server received, `sum_sent` where it sent)
/// and what the receiving ends counted, summed over both directions.
fn server_and_client_counts(end: &serde_json::Value, extra: &[&str]) -> (f64, f64) {
    let bytes = |key: &str| end.get(key).map_or(0.0, |s| s["bytes"].as_f64().unwrap());
    if extra.contains(&"--bidir") {
        (
            bytes("sum_received") + bytes("sum_sent_bidir_reverse"),
            bytes("sum_received") + bytes("sum_received_bidir_reverse"),
        )
    } else if extra.contains(&"-R") {
        (bytes("sum_sent"), bytes("sum_received"))
    } else {
        (bytes("sum_received"), bytes("sum_received"))
    }
}

/// Bytes of UDP datagrams the receiver counted as lost.
fn lost_udp_bytes(end: &serde_json::Value) -> f64 {
    let Some(udp) = end["streams"][0].get("udp") else { return 0.0 };
    let (bytes, packets) = (udp["bytes"].as_f64().unwrap_or(0.0), udp["packets"].as_f64().unwrap_or(0.0));
    let lost = end["sum_received"]["lost_packets"].as_f64().unwrap_or(0.0);
    if packets > 0.0 {
        lost * bytes / packets
    } else {
        0.0
    }
}

/// Data a TCP test may leave in flight when it ends: per stream, at most the
/// sender's and the receiver's socket buffers (the kernel's autotuning maxima).
fn in_flight_allowance(extra: &[&str]) -> f64 {
    if extra.contains(&"-u") {
        return 0.0;
    }
    let max_of = |file: &str| {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.split_whitespace().nth(2).and_then(|v| v.parse::<f64>().ok()))
            .unwrap_or(6.0 * 1024.0 * 1024.0)
    };
    let streams = if extra.contains(&"-P") { 4.0 } else { 1.0 };
    streams * (max_of("/proc/sys/net/ipv4/tcp_wmem") + max_of("/proc/sys/net/ipv4/tcp_rmem"))
}

/// On a `--token --iperf3` server stock clients (which cannot do the challenge)
/// still run tests, but never take the last slot: a token holder is served
/// while the iperf3 clients fill all they may have.
#[test]
fn stock_iperf3_clients_on_a_token_server_leave_a_slot_for_token_holders() {
    headroom_lab::require_program!("iperf3");
    let _machine = headroom_lab::hold_machine();
    let (_server, port) = Served::serve(&["--iperf3", "--token", "s3cret", "--max-clients", "2"]);
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

/// Stock `iperf -c` (iperf 2) against `headroom serve`: the server says in
/// its log what connected and what to use, instead of dropping it silently.
#[test]
fn an_iperf2_client_is_named_in_serves_log() {
    headroom_lab::require_program!("iperf");
    let (server, port) = Served::serve(&["--iperf3"]);
    let _ = Command::new("iperf")
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    let lines = server.wait_lines(1, Duration::from_secs(5));
    let line = lines.first().unwrap_or_else(|| panic!("serve logged nothing for an iperf2 client"));
    assert!(line.contains("protocol=unknown refused: an iperf2 client's header (iperf -c)"), "{line}");
}
