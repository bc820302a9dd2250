//! `--remote` and `run --remote-path` from the command line against a real
//! `headroom serve --allow-path` on loopback: what runs there prints here,
//! every way to fail is one line with exit code 2, and no test file outlives
//! a killed client or a killed server.

mod net_support;
mod support;
use net_support::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{disk_leftovers, one_error_line};

fn serve_allowing(dir: &Path, extra: &[&str]) -> (Served, u16) {
    Served::serve(&[&["--allow-path", dir.to_str().unwrap()], extra].concat())
}

fn headroom(args: &[&str]) -> std::process::Output {
    run(Command::new(bin()).args(args).env("NO_COLOR", "1").env_remove("HEADROOM_TOKEN"))
}

/// Waits up to `limit` for `dir`'s test files to be `wanted` (some or none).
fn wait_for_test_file(dir: &Path, wanted: bool, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if disk_leftovers(dir).is_empty() != wanted {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn disk_cpu_and_sys_run_on_the_server_and_print_here() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = serve_allowing(dir.path(), &["--token", "s3cret"]);
    let at = format!("127.0.0.1:{port}");
    let d = dir.path().to_str().unwrap();
    let out = headroom(&[
        "disk", d, "--remote", &at, "--token", "s3cret", "--rw", "read", "--time", "1s", "--size", "16M", "--json",
    ]);
    let doc = json(&out);
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let probe = &doc["probes"][0];
    assert_eq!(probe["host"], hostname.as_str(), "{probe}");
    assert!(probe["summary"]["bytes_per_sec"].as_f64().unwrap() > 0.0);
    assert!(probe["details"]["cpu_load_remote"].is_object(), "the server's CPU over the probe");
    assert!(disk_leftovers(dir.path()).is_empty());
    // The server's inventory comes along (as `run`'s far end has it), and
    // with it the warning of a virtual disk under the path on the server.
    let peers = doc["peers"].as_array().expect("the server's inventory in peers");
    assert_eq!((peers.len(), peers[0]["hostname"].as_str()), (1, Some(hostname.as_str())), "{peers:?}");
    let device = headroom_sys::block_device_holding(dir.path());
    let virtual_there = device.as_ref().is_some_and(headroom_analysis::is_virtual_disk);
    let warned = doc["warnings"].as_array().into_iter().flatten().filter(|w| w["code"] == "page_cache_possible");
    let named = warned.filter(|w| w["message"].as_str().unwrap().starts_with("127.0.0.1's ")).count();
    assert_eq!(named, usize::from(virtual_there), "{}", doc["warnings"]);
    if !virtual_there {
        println!("the temp directory's disk is not virtual here: only the absence was checked");
    }

    let out =
        headroom(&["cpu", "--remote", &at, "--token", "s3cret", "--kernels", "crc32c", "--threads", "1", "--json"]);
    let doc = json(&out);
    let probes = doc["probes"].as_array().unwrap();
    assert!(!probes.is_empty() && probes.iter().all(|p| p["host"] == hostname.as_str()), "{probes:?}");

    let out = headroom(&["sys", "--remote", &at, "--token", "s3cret", "--json"]);
    assert_eq!(json(&out)["hostname"], hostname.as_str());

    // And on a terminal: the same table as a local run.
    let out =
        headroom(&["disk", d, "--remote", &at, "--token", "s3cret", "--rw", "read", "--time", "1s", "--size", "16M"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SEQ1M Q1T1 read") && text.contains("test file"), "{text}");
    assert!(text.starts_with(&format!("headroom disk {hostname}:{d}/headroom-disk-")), "{text}");
}

#[test]
fn every_way_to_fail_is_one_line_and_exit_2() {
    let allowed = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let (_server, port) = serve_allowing(allowed.path(), &["--token", "s3cret"]);
    let at = format!("127.0.0.1:{port}");
    let quick = ["--rw", "read", "--time", "1s", "--size", "16M"];
    let disk = |path: &str, remote: &str, token: &str| {
        let mut args = vec!["disk", path, "--remote", remote, "--token", token];
        args.extend(quick);
        headroom(&args)
    };
    let e = elsewhere.path().to_str().unwrap();
    one_error_line(&disk(e, &at, "s3cret"), &["outside every --allow-path"]);
    one_error_line(&disk(allowed.path().to_str().unwrap(), &at, "wrong"), &["wrong token"]);
    one_error_line(&disk("relative/dir", &at, "s3cret"), &["must be absolute", "--remote"]);
    one_error_line(&disk(e, &format!("127.0.0.1:{}", free_port()), "s3cret"), &["cannot connect"]);
    one_error_line(&disk(e, "no-such-host.invalid", "s3cret"), &["cannot resolve"]);
    one_error_line(&headroom(&["sys", "--remote", "nas:notaport"]), &["port"]);
    for dir in [allowed.path(), elsewhere.path()] {
        assert!(disk_leftovers(dir).is_empty());
    }

    // A server that allows no disk probes says how to allow them.
    let (_bare, port) = Served::serve(&[]);
    let out = disk(e, &format!("127.0.0.1:{port}"), "unused");
    one_error_line(&out, &["does not allow disk probes", "headroom serve --allow-path"]);

    // serve refuses an --allow-path that is not a directory.
    let out = headroom(&["serve", "--port", &free_port().to_string(), "--allow-path", "/no/such/dir"]);
    one_error_line(&out, &["--allow-path /no/such/dir"]);
}

#[test]
fn a_killed_client_leaves_no_test_file_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = serve_allowing(dir.path(), &[]);
    let mut client = Command::new(bin())
        .args(["disk", dir.path().to_str().unwrap(), "--remote", &format!("127.0.0.1:{port}")])
        .args(["--rw", "read", "--time", "30s", "--size", "32M"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for_test_file(dir.path(), true, Duration::from_secs(30)),
        "the test file never appeared; server log: {:?}",
        server.lines.lock().unwrap()
    );
    std::thread::sleep(Duration::from_millis(1500)); // into the measurement
    client.kill().unwrap();
    client.wait().unwrap();
    // The server notices at its next sample (once a second) and removes it.
    assert!(
        wait_for_test_file(dir.path(), false, Duration::from_secs(15)),
        "left behind: {:?}\nserver log: {:?}",
        disk_leftovers(dir.path()),
        server.lines.lock().unwrap()
    );
    let log = server.wait_lines(2, Duration::from_secs(5));
    assert!(log.iter().any(|l| l.contains("client is gone")), "{log:?}");
}

#[test]
fn a_killed_server_removes_its_test_file_when_it_starts_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, port) = serve_allowing(dir.path(), &[]);
    let client = Command::new(bin())
        .args(["disk", dir.path().to_str().unwrap(), "--remote", &format!("127.0.0.1:{port}")])
        .args(["--rw", "read", "--time", "30s", "--size", "32M"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_for_test_file(dir.path(), true, Duration::from_secs(30)),
        "the test file never appeared; server log: {:?}",
        server.lines.lock().unwrap()
    );
    server.child.kill().unwrap(); // SIGKILL: no cleanup at all
    server.child.wait().unwrap();
    let left = disk_leftovers(dir.path());
    assert_eq!(left.len(), 1, "a killed server leaves its test file: {left:?}");
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "the client reports the lost server");
    assert!(String::from_utf8_lossy(&out.stderr).contains("lost"), "{}", String::from_utf8_lossy(&out.stderr));

    // Someone else's file with a similar name stays.
    std::fs::write(dir.path().join("headroom-disk-notes.txt"), b"mine").unwrap();
    let (again, _) = serve_allowing(dir.path(), &[]);
    assert!(disk_leftovers(dir.path()) == ["headroom-disk-notes.txt"], "{:?}", disk_leftovers(dir.path()));
    let log = again.wait_lines(1, Duration::from_secs(5));
    assert!(log.iter().any(|l| l.contains("removed") && l.contains(&left[0])), "{log:?}");
}

#[test]
fn run_measures_the_far_ends_disk_with_remote_path() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = serve_allowing(dir.path(), &[]);
    let out = headroom(&[
        "run",
        "--server",
        &format!("127.0.0.1:{port}"),
        "--remote-path",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    let doc = json(&out);
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let probes = doc["probes"].as_array().unwrap();
    let remote_disk: Vec<_> = probes.iter().filter(|p| p["kind"] == "disk").collect();
    assert!(!remote_disk.is_empty(), "{probes:?}");
    // Without --path every disk probe is the server's.
    assert!(remote_disk.iter().all(|p| p["host"] == hostname.as_str()), "{remote_disk:?}");
    assert!(probes.iter().any(|p| p["kind"] == "net"));
    assert_eq!(doc["peers"][0]["hostname"], hostname.as_str());
    assert!(doc["verdict"].is_object());
    assert!(disk_leftovers(dir.path()).is_empty());
}

#[test]
fn the_clients_disk_probes_record_the_servers_cpu_meanwhile() {
    let far = tempfile::tempdir().unwrap();
    let here = tempfile::tempdir().unwrap();
    let (_server, port) = serve_allowing(far.path(), &[]);
    let out = headroom(&[
        "run",
        "--server",
        &format!("127.0.0.1:{port}"),
        "--remote-path",
        far.path().to_str().unwrap(),
        "--path",
        here.path().to_str().unwrap(),
        "--json",
    ]);
    let doc = json(&out);
    let disk: Vec<_> = doc["probes"].as_array().unwrap().iter().filter(|p| p["kind"] == "disk").collect();
    let (remote, local): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) =
        disk.iter().copied().partition(|p| p["host"].is_string());
    assert!(!remote.is_empty() && !local.is_empty(), "{disk:?}");
    for p in local {
        // The server's CPU while this machine measured (a share of it, in real use).
        let far_cpu = &p["details"]["cpu_load_remote"];
        assert!(far_cpu["per_core"].is_array() && far_cpu["processes"].is_array(), "{}: {far_cpu}", p["id"]);
        assert!(p["details"]["cpu_load_local"].is_object(), "{}", p["id"]);
    }
    for dir in [far.path(), here.path()] {
        assert!(disk_leftovers(dir).is_empty());
    }
}

/// Issue 27.4: the docs' own example token (`s3cret`) was taken without a
/// word; a short or repetitive token is now warned about at start-up.
#[test]
fn serve_warns_at_start_up_when_the_token_is_easy_to_guess() {
    let stderr_of = |token: &str| {
        let port = free_port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(bin())
            .args(["serve", "--port", &port.to_string(), "--token", token])
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while std::fs::read_to_string(log.path()).unwrap().is_empty() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(200));
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::read_to_string(log.path()).unwrap()
    };
    let short = stderr_of("s3cret");
    assert!(short.contains("warning: the token is only 6 characters") && short.contains("openssl rand"), "{short}");
    let repetitive = stderr_of("aaaaaaaaaaaaaaaaaaaa");
    assert!(repetitive.contains("warning: the token uses only 1 different"), "{repetitive}");
    let good = stderr_of("9f2c4e1a7b3d8f60c5e2a9b4d7f1c3e8");
    assert!(!good.contains("warning"), "{good}");
}
