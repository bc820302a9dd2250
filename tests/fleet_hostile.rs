//! `headroom fleet` with one hostile agent among honest ones: a real
//! `headroom serve` is the honest agent, and the hostile one is a fake on
//! loopback (written here, since the hostile behaviour is what is tested):
//! either a proxy in front of a second real `serve` that alters one kind of
//! answer (a clock of 1e300, a start in the year 30 million, a negative
//! rate), or a server that trickles its bytes. Each time the fleet must end
//! within its documented deadlines, name the hostile agent on one line, keep
//! (and save, in a document `report` reads) the honest agent's result, and
//! exit 2. Also: host lists that cannot be read whole or block.

mod net_support;
mod support;

use headroom_net::wire;
use net_support::{bin, Served};
use serde_json::Value;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::stderr;

const TOKEN: &str = "fleet-hostile-token";

fn serve(dir: &Path) -> (Served, u16) {
    Served::serve(&["--token", TOKEN, "--allow-path", dir.to_str().unwrap()])
}

/// What the hostile proxy does with one of the server's messages.
enum Deliver {
    /// Pass it on (perhaps altered).
    Now,
    /// Send it one byte every half second, for ever.
    Trickle,
}

type Tamper = Arc<dyn Fn(&mut Value) -> Deliver + Send + Sync>;

/// A proxy on loopback in front of the real agent at `real`: the client's
/// bytes pass unchanged, each of the server's messages goes through `tamper`.
fn lying_agent(real: u16, tamper: Tamper) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let tamper = tamper.clone();
            std::thread::spawn(move || relay(client, real, tamper));
        }
    });
    port
}

fn relay(client: TcpStream, real: u16, tamper: Tamper) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", real)) else { return };
    let (mut up_from, mut up_to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut up_from, &mut up_to);
        let _ = up_to.shutdown(std::net::Shutdown::Both);
    });
    let (mut from, mut to) = (server, client);
    while let Ok(mut msg) = wire::read_frame::<Value>(&mut from, wire::MAX_RESULT_FRAME) {
        match tamper(&mut msg) {
            Deliver::Now => {
                if wire::write_frame(&mut to, &msg).is_err() {
                    break;
                }
            }
            Deliver::Trickle => {
                let mut bytes = Vec::new();
                wire::write_frame(&mut bytes, &msg).unwrap();
                for b in bytes.iter().cycle() {
                    if to.write_all(&[*b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                break;
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// A fake agent that reads the greeting, then answers with one byte a
/// second for ever: each byte would restart a silence timer.
fn trickling_agent() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let _ = wire::read_opening(&mut conn);
                let _ = conn.write_all(&[0, 0, 1, 0]);
                while conn.write_all(b" ").is_ok() {
                    std::thread::sleep(Duration::from_secs(1));
                }
            });
        }
    });
    port
}

/// Runs the fleet on `hosts`, saving to `save`; fails the test rather than
/// hanging when the fleet is still running after `limit`.
fn fleet(hosts: &[u16], dir: &Path, save: &Path, limit: Duration) -> Output {
    let hosts: Vec<String> = hosts.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut child = Command::new(bin())
        .args(["fleet", "--hosts", &hosts.join(","), "--token", TOKEN, "--save", save.to_str().unwrap(), "disk"])
        .arg(dir)
        .args(["--rw", "read", "--bs", "1M", "--size", "8M", "--time", "2s", "--json"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("headroom fleet");
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("fleet still running after {limit:?}; stderr: {}", stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// The fleet failed the hostile host `bad` on one line holding `says`, kept
/// the honest host `good`'s probe in the printed and the saved document, and
/// `report` reads the saved one.
fn honest_kept(out: &Output, good: u16, bad: u16, says: &str, save: &Path) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {err}");
    let bad_name = format!("127.0.0.1:{bad}");
    let line = err.lines().find(|l| l.contains(&bad_name) && l.contains(says));
    assert!(line.is_some(), "no line naming {bad_name} and '{says}': {err}");
    eprintln!("the hostile agent's line: {}", line.unwrap_or_default());
    let doc = headroom_result::ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a valid document");
    let good_name = format!("127.0.0.1:{good}");
    assert_eq!(doc.probes.len(), 1, "{:?}", doc.probes.iter().map(|p| &p.id).collect::<Vec<_>>());
    assert_eq!(doc.probes[0].host.as_deref(), Some(good_name.as_str()));
    assert!(doc.probes[0].summary.bytes_per_sec > 0.0);
    let fleet = doc.fleet.as_ref().unwrap();
    let failed: Vec<&str> = fleet.hosts.iter().filter(|h| h.status == "failed").map(|h| h.name.as_str()).collect();
    assert_eq!(failed, [bad_name.as_str()]);
    let report = Command::new(bin()).args(["report", save.to_str().unwrap()]).env("NO_COLOR", "1").output().unwrap();
    assert!(report.status.success(), "report refused the saved document: {}", stderr(&report));
}

/// One honest agent and one behind a proxy that alters answers with `tamper`.
fn with_a_liar(tamper: Tamper, says: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (_honest, good) = serve(dir.path());
    let (_behind, real) = serve(dir.path());
    let bad = lying_agent(real, tamper);
    let save = dir.path().join("fleet.json");
    let out = fleet(&[good, bad], dir.path(), &save, Duration::from_secs(120));
    honest_kept(&out, good, bad, says, &save);
    // The liar's server removes its test file once its session is gone.
    let t0 = Instant::now();
    while !support::disk_leftovers(dir.path()).is_empty() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(support::disk_leftovers(dir.path()).is_empty(), "{:?}", support::disk_leftovers(dir.path()));
}

fn is(msg: &Value, kind: &str) -> bool {
    msg["msg"] == kind
}

#[test]
fn a_clock_of_1e300_fails_that_agent_only() {
    with_a_liar(
        Arc::new(|m: &mut Value| {
            if is(m, "clock") {
                m["unix"] = 1e300.into();
            }
            Deliver::Now
        }),
        "clock",
    );
}

#[test]
fn a_start_in_the_year_30_million_fails_that_agent_only() {
    with_a_liar(
        Arc::new(|m: &mut Value| {
            if is(m, "measured") {
                m["started_unix"] = 1e15.into();
            }
            Deliver::Now
        }),
        "started_unix",
    );
}

#[test]
fn a_negative_rate_fails_that_agent_only() {
    with_a_liar(
        Arc::new(|m: &mut Value| {
            if is(m, "measured") {
                m["probe"]["summary"]["bytes_per_sec"] = (-1e308).into();
            }
            Deliver::Now
        }),
        "bytes_per_sec",
    );
}

#[test]
fn a_result_trickled_byte_by_byte_fails_that_agent_only() {
    with_a_liar(
        Arc::new(|m: &mut Value| if is(m, "measured") { Deliver::Trickle } else { Deliver::Now }),
        "no whole message for 15 s",
    );
}

#[test]
fn an_agent_trickling_its_greeting_answer_does_not_hold_the_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let (_honest, good) = serve(dir.path());
    let bad = trickling_agent();
    let save = dir.path().join("fleet.json");
    let out = fleet(&[bad, good], dir.path(), &save, Duration::from_secs(120));
    honest_kept(&out, good, bad, "never ended within 10 s", &save);
}

#[test]
fn host_lists_that_never_end_or_block_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("x.json");
    let hosts = |spec: &str| {
        let mut child = Command::new(bin())
            .args(["fleet", "--hosts", spec, "--save", save.to_str().unwrap(), "disk", "/tmp"])
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("fleet --hosts {spec} still running after a minute");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().unwrap()
    };
    let out = hosts("/dev/zero");
    support::one_error_line(&out, &["--hosts /dev/zero", "64 MiB"]);
    let fifo = dir.path().join("hosts.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = hosts(fifo.to_str().unwrap());
    support::one_error_line(&out, &["names no hosts"]);
    assert!(!save.exists());
}
