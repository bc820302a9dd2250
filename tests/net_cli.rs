//! `headroom net`, `ping` and `serve` from the command line: results on
//! loopback, and one clear line with exit code 2 for every way to fail.

mod net_support;
use net_support::*;
use std::process::Command;
use std::time::Duration;

fn serve(extra: &[&str]) -> (Served, u16) {
    Served::serve(extra)
}

fn one_error_line(out: &std::process::Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    assert!(lines[0].contains(needle), "'{needle}' not in: {err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn default_suite_on_loopback_json() {
    let (server, port) = serve(&[]);
    let out = run(Command::new(bin()).args([
        "net",
        &format!("127.0.0.1:{port}"),
        "--time",
        "1s",
        "--streams",
        "2",
        "--json",
    ]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json(&out);
    assert_eq!(doc["schema"], "headroom.result/v1");
    let ids: Vec<&str> = doc["probes"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["rr-idle", "udp-echo", "tcp-connect", "tcp-up-1", "tcp-down-1", "tcp-up-2", "tcp-down-2", "tcp-bidir-2"]
    );
    for p in doc["probes"].as_array().unwrap() {
        assert!(["net", "ping"].contains(&p["kind"].as_str().unwrap()));
        if p["id"].as_str().unwrap().starts_with("tcp-") && p["id"] != "tcp-connect" {
            assert!(!p["samples"].as_array().unwrap().is_empty(), "per-second samples in {}", p["id"]);
            assert!(p["details"]["tcp_info"]["srtt_us"].as_u64().is_some());
            assert!(p["details"]["rtt_under_load_ns"]["mean"].as_f64().unwrap() > 0.0);
            assert!(p["details"]["cpu_remote_percent"].as_f64().is_some());
        }
    }
    let rr = &doc["probes"][0]["summary"]["latency_ns"];
    assert!(rr["min"].as_f64().unwrap() > 0.0 && rr["p99"].as_f64().unwrap() >= rr["p50"].as_f64().unwrap());
    assert_eq!(server.wait_lines(5, Duration::from_secs(3)).iter().filter(|l| l.contains("test=")).count(), 5);
}

#[test]
fn fixed_transfer_and_udp_rate() {
    let (_server, port) = serve(&[]);
    let out = run(Command::new(bin()).args(["net", &format!("127.0.0.1:{port}"), "--bytes", "200MB", "--json"]));
    let doc = json(&out);
    let p = &doc["probes"][0];
    assert_eq!(p["spec"]["bytes"], 200_000_000u64);
    assert_eq!(p["details"]["upload_bytes"], 200_000_000u64);
    let out = run(Command::new(bin()).args([
        "net",
        &format!("127.0.0.1:{port}"),
        "--udp",
        "20M",
        "--tests",
        "udp",
        "--time",
        "1s",
        "--json",
    ]));
    let doc = json(&out);
    let rate = doc["probes"][0]["summary"]["bytes_per_sec"].as_f64().unwrap() * 8.0;
    assert!(close(rate, 20e6, 0.1), "UDP at {rate} b/s, asked 20 Mb/s");
    assert!(doc["probes"][0]["details"]["udp"]["jitter_ms"].as_f64().is_some());
}

/// A fixed UDP transfer has no end of stream: it ends at its byte count (or
/// when the datagrams stop), the server reports at once, and the next test
/// runs in the same session. It used to wait out the server's idle timeout,
/// so the client gave up after 5 s and the next test read the late report.
#[test]
fn fixed_udp_transfer_ends_and_the_next_test_runs() {
    let (server, port) = serve(&[]);
    let out = run(Command::new(bin()).args([
        "net",
        &format!("127.0.0.1:{port}"),
        "--bytes",
        "4MB",
        "--udp",
        "50M",
        "--tests",
        "udp,down1",
        "--json",
    ]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json(&out);
    let ids: Vec<&str> = doc["probes"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["udp-up-1", "tcp-down-1"]);
    let udp = &doc["probes"][0];
    assert!(udp["details"]["error"].is_null(), "the UDP transfer ended early: {}", udp["details"]["error"]);
    assert!(udp["details"]["udp"]["lost"].as_u64().is_some(), "the server's loss report: {}", udp["details"]);
    assert_eq!(doc["probes"][1]["details"]["download_bytes"], 4_000_000u64);
    let lines = server.wait_lines(2, Duration::from_secs(3));
    let udp_line = lines.iter().find(|l| l.contains("test=udp")).expect("the server logged the UDP test");
    assert!(udp_line.contains("status=ok"), "{udp_line}");
}

#[test]
fn ping_tcp_and_udp() {
    let (_server, port) = serve(&[]);
    let out = run(Command::new(bin()).args([
        "ping",
        &format!("127.0.0.1:{port}"),
        "--count",
        "5",
        "--interval",
        "10ms",
        "--json",
    ]));
    assert!(out.status.success());
    let doc = json(&out);
    assert_eq!(doc["probes"][0]["kind"], "ping");
    assert_eq!(doc["probes"][0]["spec"]["method"], "tcp_connect");
    assert_eq!(doc["probes"][0]["summary"]["ops"], 5);
    // Paced at 10 ms or more, each handshake is closed gracefully (FIN): this side
    // keeps it in TIME_WAIT. Paced faster, each is reset: none is left.
    let time_wait = || {
        let ss = Command::new("ss").args(["-tan", "state", "time-wait"]).output().unwrap().stdout;
        let towards = format!("127.0.0.1:{port}");
        String::from_utf8_lossy(&ss).lines().filter(|l| l.split_whitespace().nth(3) == Some(&towards)).count()
    };
    // (The wait for the server to listen closed one more.)
    let graceful = time_wait();
    assert!(graceful >= 5, "five handshakes closed gracefully, {graceful} in TIME_WAIT");
    let fast =
        run(Command::new(bin()).args(["ping", &format!("127.0.0.1:{port}"), "--count", "5", "--interval", "1ms"]));
    assert!(fast.status.success());
    assert_eq!(time_wait(), graceful, "handshakes paced under 10 ms are reset, leaving no TIME_WAIT");
    let text =
        run(Command::new(bin()).args(["ping", &format!("127.0.0.1:{port}"), "--count", "3", "--interval", "10ms"]));
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(s.contains("rtt min/avg/max/stddev/p99"), "{s}");
    // Without a port in TARGET: UDP echo against the headroom server.
    let out = run(Command::new(bin()).args([
        "ping",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--count",
        "5",
        "--interval",
        "10ms",
        "--json",
    ]));
    let doc = json(&out);
    assert_eq!(doc["probes"][0]["spec"]["method"], "udp_echo");
    assert_eq!(doc["probes"][0]["details"]["received"], 5);
}

#[test]
fn failures_are_one_line_and_exit_2() {
    let closed = free_port();
    one_error_line(
        &run(Command::new(bin()).args(["net", &format!("127.0.0.1:{closed}"), "--time", "1s"])),
        "connection refused",
    );
    one_error_line(
        &run(Command::new(bin()).args(["ping", &format!("127.0.0.1:{closed}"), "--count", "2"])),
        "connection refused",
    );
    let (_server, port) = serve(&["--token", "right"]);
    one_error_line(&run(Command::new(bin()).args(["net", &format!("127.0.0.1:{port}"), "--token", "wrong"])), "token");
    one_error_line(&run(Command::new(bin()).args(["net", "127.0.0.1", "--streams", "0"])), "--streams");
    one_error_line(&run(Command::new(bin()).args(["net", "127.0.0.1", "--tests", "bogus"])), "unknown test");
    one_error_line(&run(Command::new(bin()).args(["net", "127.0.0.1:http"])), "port");
    one_error_line(&run(Command::new(bin()).args(["serve", "--bind", "0.0.0.0", "--port", "0"])), "--token");
    // A connection's own error names the flag as the command line spells it.
    one_error_line(
        &run(Command::new(bin()).args(["net", "::1", "--bind", "127.0.0.1", "--time", "1s"])),
        "--bind 127.0.0.1 and the server's address ::1 are of different IP families",
    );
}

#[test]
fn unreachable_host_and_dns_failure_are_one_line() {
    headroom_lab::require_root!();
    // A namespace with only loopback: no route anywhere, no DNS server reachable.
    let ns = headroom_lab::netns::Netns::new("u").unwrap();
    let out = run(ns.command(bin()).args(["net", "198.18.0.1", "--timeout", "1s"]));
    one_error_line(&out, "198.18.0.1");
    let out = run(ns.command(bin()).args(["ping", "198.18.0.1:22", "--count", "1"]));
    one_error_line(&out, "unreachable");
    let out = run(ns.command(bin()).args(["net", "no-such-host.invalid", "--timeout", "1s"]));
    one_error_line(&out, "no-such-host.invalid");
}

#[test]
fn a_goal_on_net_exits_1_when_missed_and_0_when_met() {
    let (_server, port) = serve(&[]);
    let host = format!("127.0.0.1:{port}");
    let net = |goal: &str| {
        run(Command::new(bin()).args(["net", &host, "--tests", "down1", "--time", "1s", "--goal", goal, "--json"]))
    };
    // Loopback carries far more than 1 Mb/s, and far less than 1 Pb/s.
    let met = net("read=1Mb/s");
    assert_eq!(met.status.code(), Some(0), "{}", String::from_utf8_lossy(&met.stderr));
    let missed = net("read=1000000Gb/s");
    assert_eq!(missed.status.code(), Some(1), "{}", String::from_utf8_lossy(&missed.stderr));
    let doc = json(&missed);
    assert!(doc["warnings"].as_array().unwrap().iter().any(|w| w["code"] == "goal_missed"), "{doc}");
    assert!(String::from_utf8_lossy(&missed.stderr).contains("goal missed: read=1000000Gb/s"));
    one_error_line(&run(Command::new(bin()).args(["net", &host, "--goal", "read=fast"])), "--goal");
}
