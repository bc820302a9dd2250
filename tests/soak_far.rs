//! `headroom soak --server HOST --remote-path DIR` against a real `headroom
//! serve --allow-path` on loopback: the server's own disk probes soak next to
//! the client's under their own names (store, `--json`, `report`), `--resume`
//! keeps the remote path, a server killed mid-soak is an outage the soak
//! outlives, bad flags are one line with exit code 2, and no test file is
//! left on either side.

mod net_support;
mod support;
use headroom_soak::Store;
use net_support::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::{disk_leftovers, one_error_line, scrape};

fn serve_allowing(dir: &Path, extra: &[&str]) -> (Served, u16) {
    Served::serve(&[&["--allow-path", dir.to_str().unwrap()], extra].concat())
}

fn soak(args: &[&str]) -> Output {
    run(Command::new(bin()).arg("soak").args(args).env("NO_COLOR", "1").env_remove("HEADROOM_TOKEN"))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string()
}

fn probe<'a>(doc: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    let probes = doc["probes"].as_array().expect("probes");
    probes.iter().find(|p| p["id"] == id).unwrap_or_else(|| panic!("no {id} in {probes:?}"))
}

#[test]
fn the_servers_disk_soaks_next_to_the_clients_and_resume_keeps_it() {
    let (srv, cli) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_server, port) = serve_allowing(srv.path(), &["--token", "s3cret"]);
    let at = format!("127.0.0.1:{port}");
    let (s, c) = (srv.path().to_str().unwrap(), cli.path().to_str().unwrap());
    let db = cli.path().join("far.sqlite");
    let db_s = db.to_str().unwrap();
    let common = ["--server", &at, "--token", "s3cret", "--db", db_s];
    let first = [&common[..], &["--remote-path", s, "--path", c, "--duration", "7s", "--probe-time", "1s"]].concat();
    let first = [&first[..], &["--size", "8M", "--json"]].concat();
    let doc = json(&soak(&first));

    // The document: the server's probes under their own names, with its host.
    let me = hostname();
    for name in ["remote-write", "remote-read", "remote-iops"] {
        let p = probe(&doc, &format!("soak-{name}"));
        assert_eq!(p["host"], me.as_str(), "{p}");
        assert!(p["summary"]["bytes_per_sec"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["spec"]["path"].as_str().unwrap().starts_with(s), "the server's test file: {p}");
    }
    for name in ["write", "read", "iops"] {
        let p = probe(&doc, &format!("soak-{name}"));
        assert!(p["host"].is_null(), "measured here: {p}");
        assert!(p["spec"]["path"].as_str().unwrap().starts_with(c), "{p}");
    }
    // The server's inventory, recorded by the session that reached it, and
    // with it the warning of a virtual disk under the remote path.
    let peers = doc["peers"].as_array().expect("the server's inventory in peers");
    assert_eq!((peers.len(), peers[0]["hostname"].as_str()), (1, Some(me.as_str())), "{peers:?}");
    assert_eq!(peers[0]["reached_as"], "127.0.0.1");
    let virtual_there =
        headroom_sys::block_device_holding(srv.path()).is_some_and(|d| headroom_analysis::is_virtual_disk(&d));
    let warned = doc["warnings"].as_array().into_iter().flatten().filter(|w| w["code"] == "page_cache_possible");
    let named = warned.filter(|w| w["message"].as_str().unwrap().starts_with("127.0.0.1's ")).count();
    assert_eq!(named, usize::from(virtual_there), "{}", doc["warnings"]);
    if !virtual_there {
        println!("the temp directory's disk is not virtual here: only the absence was checked");
    }
    // The store: the remote probes' samples, every turn measured.
    let store = Store::open(&db).unwrap();
    for name in ["remote-write", "remote-read", "remote-iops"] {
        assert!(store.sample_count(Some(name)).unwrap() >= 1, "{name}");
    }
    let cycles = store.cycles().unwrap();
    assert!(cycles.iter().all(|c| c.error.is_none()), "{cycles:?}");
    assert!(store
        .events()
        .unwrap()
        .iter()
        .all(|e| e.kind.as_str() != "probe_error" && e.kind.as_str() != "server_outage"));
    drop(store);
    assert!(disk_leftovers(srv.path()).is_empty() && disk_leftovers(cli.path()).is_empty(), "test files left");

    // `report` of the database names them too.
    let report = run(Command::new(bin()).args(["report", db_s]).env("NO_COLOR", "1"));
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("soak-remote-write") && text.contains("soak-remote-iops"), "{text}");

    // A resume refuses another remote path, and keeps the stored one.
    let other = [&common[..], &["--resume", "--remote-path", "/srv/elsewhere"]].concat();
    one_error_line(&soak(&other), &["--remote-path /srv/elsewhere cannot change a soak being resumed", s]);
    let again = [&common[..], &["--resume", "--duration", "20s"]].concat();
    let out = soak(&again);
    let (text, turns) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{turns}");
    // The summary and the turn lines name the server's probes.
    assert!(text.lines().any(|l| l.trim_start().starts_with("remote-read ") && l.contains("IOPS")), "{text}");
    assert!(turns.lines().any(|l| l.contains(" remote-iops ") && l.contains("IOPS")), "{turns}");
    let store = Store::open(&db).unwrap();
    let second = store.sessions().unwrap().last().unwrap().id;
    let cycles = store.cycles().unwrap();
    let resumed: Vec<&str> = cycles.iter().filter(|c| c.session == second).map(|c| c.probe.as_str()).collect();
    assert!(resumed.contains(&"remote-write") && resumed.contains(&"remote-iops"), "{resumed:?}");
    assert!(cycles.iter().all(|c| c.error.is_none()), "{cycles:?}");
    assert!(disk_leftovers(srv.path()).is_empty() && disk_leftovers(cli.path()).is_empty(), "test files left");
}

/// Waits up to `limit` for `f`.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn a_server_killed_mid_soak_is_an_outage_and_the_soak_goes_on() {
    let (srv, cli) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (server, port) = serve_allowing(srv.path(), &[]);
    let db = cli.path().join("far.sqlite");
    let metrics_port = free_port();
    let client = Command::new(bin())
        .args(["soak", "--server", &format!("127.0.0.1:{port}"), "--remote-path", srv.path().to_str().unwrap()])
        .args(["--path", cli.path().to_str().unwrap(), "--cycle", "remote-write,write"])
        .args(["--duration", "16s", "--probe-time", "2s", "--size", "8M", "--json", "--db", db.to_str().unwrap()])
        .args(["--metrics", &format!("127.0.0.1:{metrics_port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Kill the server (SIGKILL: no cleanup) during the first remote turn.
    let started = || server.lines.lock().unwrap().iter().any(|l| l.contains("remote probe started"));
    assert!(wait_for(Duration::from_secs(20), started), "no remote turn: {:?}", server.lines.lock().unwrap());
    std::thread::sleep(Duration::from_millis(1200));
    drop(server);
    assert_eq!(disk_leftovers(srv.path()).len(), 1, "a killed server leaves its test file");
    // Back after a write turn and a remote turn that finds nobody; it removes
    // its old test file as it starts.
    std::thread::sleep(Duration::from_secs(3));
    let _again = Served::serve_again(port, &["--allow-path", srv.path().to_str().unwrap()]);
    // The metrics, while it runs: the server's probe under its name, the outage counted.
    let mut seen = String::new();
    let both = || {
        seen = scrape(metrics_port).unwrap_or_default();
        // Each series also carries host= (first, the constant label).
        seen.lines()
            .any(|l| l.starts_with("headroom_soak_samples_total{host=") && l.contains(",probe=\"remote-write\"}"))
            && seen.lines().any(|l| {
                l.starts_with("headroom_soak_detections_total{host=") && l.ends_with(",kind=\"server_outage\"} 1")
            })
    };
    assert!(wait_for(Duration::from_secs(8), both), "{seen}");

    let out = client.wait_with_output().unwrap();
    let doc = json(&out);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let store = Store::open(&db).unwrap();
    let events = store.events().unwrap();
    let outages: Vec<_> = events.iter().filter(|e| e.kind.as_str() == "server_outage").collect();
    assert_eq!(outages.len(), 1, "{events:?}");
    let (down, up) = (outages[0].t_unix, outages[0].end_unix.expect("closed when the server came back"));
    assert!(events.iter().all(|e| e.kind.as_str() != "probe_error"), "outages are not errors: {events:?}");

    let cycles = store.cycles().unwrap();
    let remote: Vec<_> = cycles.iter().filter(|c| c.probe == "remote-write").collect();
    assert!(remote.iter().any(|c| c.error.is_some()), "{remote:?}");
    assert!(remote.iter().any(|c| c.result.is_some() && c.started_unix >= down), "measured again: {remote:?}");
    let writes = cycles.iter().filter(|c| c.probe == "write" && c.result.is_some());
    assert!(writes.clone().any(|c| c.started_unix > down && c.started_unix < up), "the client's disk went on");
    // What the remote turn measured before the kill stays.
    let mut before = 0;
    store.for_each_sample("remote-write", |s| before += usize::from(s.t_unix < down)).unwrap();
    assert!(before >= 1, "samples before the kill");
    let detections = doc["soak"]["detections"].as_array().unwrap();
    assert!(detections.iter().any(|d| d["kind"] == "server_outage" && d["probe"] == "remote-write"), "{detections:?}");
    assert_eq!(probe(&doc, "soak-remote-write")["host"], hostname().as_str());
    assert!(disk_leftovers(srv.path()).is_empty() && disk_leftovers(cli.path()).is_empty(), "test files left");
}

#[test]
fn bad_remote_flags_are_one_line_and_an_unreachable_server_an_outage() {
    let (srv, cli) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (s, c) = (srv.path().to_str().unwrap(), cli.path().to_str().unwrap());
    let db = cli.path().join("x.sqlite");
    let db_s = db.to_str().unwrap();
    let quick = ["--duration", "3s", "--probe-time", "1s", "--size", "8M", "--path", c, "--db", db_s];
    fn with<'a>(quick: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
        [quick, more].concat()
    }

    one_error_line(&soak(&with(&quick, &["--remote-path", s])), &["--remote-path needs --server"]);
    one_error_line(
        &soak(&with(&quick, &["--server", "127.0.0.1:9", "--remote-path", "bench"])),
        &["--remote-path bench"],
    );
    one_error_line(
        &soak(&with(&quick, &["--server", "127.0.0.1:9", "--cycle", "write,remote-iops"])),
        &["--cycle remote-iops needs --remote-path"],
    );
    assert!(!db.exists(), "no database for a refused command");

    // What the server refuses: one line each, nothing left on either side.
    {
        let (_server, port) = serve_allowing(srv.path(), &["--token", "s3cret"]);
        let at = format!("127.0.0.1:{port}");
        let db2 = cli.path().join("outside.sqlite");
        let args = [&quick[..8], &["--server", &at, "--token", "s3cret", "--remote-path", c, "--db"]].concat();
        one_error_line(&soak(&[&args[..], &[db2.to_str().unwrap()]].concat()), &["outside every --allow-path"]);
        let db3 = cli.path().join("token.sqlite");
        let args = [&quick[..8], &["--server", &at, "--token", "nope", "--remote-path", s, "--db"]].concat();
        one_error_line(&soak(&[&args[..], &[db3.to_str().unwrap()]].concat()), &["token"]);
        // A soak that never started leaves no database: the corrected command may use the same --db.
        assert!(!db2.exists() && !db3.exists());
    }
    {
        let (_server, port) = Served::serve(&[]);
        let at = format!("127.0.0.1:{port}");
        let db4 = cli.path().join("nodisk.sqlite");
        let args = [&quick[..8], &["--server", &at, "--remote-path", s, "--db", db4.to_str().unwrap()]].concat();
        one_error_line(&soak(&args), &["does not allow disk probes", "--allow-path"]);
        assert!(!db4.exists());
    }
    assert!(disk_leftovers(srv.path()).is_empty() && disk_leftovers(cli.path()).is_empty(), "test files left");

    // Nobody there at all: the server's turns are outages, the client's disk goes on.
    let at = format!("127.0.0.1:{}", free_port());
    let args = [&quick[..8], &["--server", &at, "--remote-path", s, "--cycle", "remote-write,write"]].concat();
    let doc = json(&soak(&[&args[..], &["--db", db_s, "--json"]].concat()));
    let kinds: Vec<&str> =
        doc["soak"]["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"server_outage") && !kinds.contains(&"probe_error"), "{kinds:?}");
    assert!(probe(&doc, "soak-write")["summary"]["bytes_per_sec"].as_f64().unwrap() > 0.0);
    assert!(disk_leftovers(cli.path()).is_empty(), "test files left");
}
