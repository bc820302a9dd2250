//! `headroom run`: validation before anything runs, and the whole job on this
//! machine (disk on a temporary directory, network over loopback).

use predicates::prelude::*;
mod support;
use support::headroom_plain as headroom;

/// Whether this build has the measuring subcommands `run` drives.
fn has_engines() -> bool {
    ["sys", "disk", "net", "serve"].iter().all(|cmd| {
        std::process::Command::new(env!("CARGO_BIN_EXE_headroom"))
            .args([cmd, "--help"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn bad_goal_link_path_and_preset_exit_2_before_measuring() {
    headroom()
        .args(["run", "--goal", "speed=1MB/s"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown metric 'speed'"))
        .stderr(predicate::str::contains("latency-p999=DURATION"));
    headroom()
        .args(["run", "--goal", "read=12parsecs"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown unit"))
        .stderr(predicate::str::contains("accepted: read=RATE"));
    headroom().args(["run", "--link", "fast"]).assert().code(2).stderr(predicate::str::contains("--link 'fast'"));
    headroom().args(["run", "--path", "/nonexistent/dir"]).assert().code(2).stderr(predicate::str::contains("--path"));
    headroom()
        .args(["run", "--path", "/etc/hostname"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a directory"));
    headroom().args(["run", "--preset", "slow"]).assert().code(2);
    headroom()
        .args(["run", "--preset", "seq", "--goal", "read=1MB/s,latency-p99=2ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--goal latency-p99: the seq preset runs no random disk test"))
        .stderr(predicate::str::contains("--test randread:4k:q32"));
    headroom().args(["run", "--server", "nas lan"]).assert().code(2).stderr(predicate::str::contains("--server"));
    headroom()
        .args(["run", "--share", "cifs://nas/media"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--share 'cifs://nas/media': unknown scheme 'cifs' (did you mean smb://?)"));
    headroom()
        .args(["run", "--share", "nfs://nas/x", "--path", "/tmp"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--path"));
    headroom()
        .args(["run", "--test", "fast:4k"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--test 'fast:4k'"))
        .stderr(predicate::str::contains("RW:BS[:qN][:tN]"));
    headroom()
        .args(["run", "--share", "nbd://nas/disk", "--test", "write:1m"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("never writes to a whole export"));
    headroom().args(["run", "--help"]).assert().success().stdout(predicate::str::contains("Examples:"));
}

#[test]
fn run_with_no_server_tests_this_machine_and_a_missed_goal_exits_1() {
    if !has_engines() {
        eprintln!("SKIPPED run end to end: this build lacks the sys/disk/net/serve commands `run` drives");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("run.json");
    let out = headroom()
        .args(["run", "--path", dir.path().to_str().unwrap(), "--label", "e2e", "--save", save.to_str().unwrap()])
        .args(["--goal", "read=900TB/s", "--bars"])
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a 900 TB/s read goal is missed\nstdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains("goal missed: read=900TB/s"), "{stderr}");
    assert!(stdout.contains("READ: ") && stdout.contains("WRITE: "), "{stdout}");
    assert!(stdout.contains("loopback"), "the network part ran over loopback: {stdout}");
    // --bars: the hop chain as bars under the verdict, before the tables.
    let bars = stdout
        .lines()
        .find(|l| l.starts_with("read: ") && l.contains(", the path delivers "))
        .and_then(|l| stdout.find(l))
        .unwrap_or_else(|| panic!("bars under the verdict: {stdout}"));
    assert!(stdout.find("WRITE: ").unwrap() < bars && bars < stdout.find("probes").unwrap(), "{stdout}");
    assert!(stdout[bars..].lines().nth(1).unwrap().contains('█'), "{stdout}");
    let doc = headroom_result::ResultDoc::from_json(&std::fs::read_to_string(&save).unwrap()).unwrap();
    // The quick preset's timing, which keeps the no-argument run under a minute.
    assert_measured_times(&doc, 2.0, 3.0);
    assert_eq!(doc.label.as_deref(), Some("e2e"));
    assert!(doc.probes.iter().any(|p| p.kind() == headroom_result::ProbeKind::Disk));
    assert!(doc.probes.iter().any(|p| p.kind() == headroom_result::ProbeKind::Net));
    assert!(
        !doc.probes.iter().any(|p| p.kind() == headroom_result::ProbeKind::Cpu),
        "the quick preset measures the CPU hop only with --cpu"
    );
    // Both ends' CPU rides along with every network probe (the loopback server is headroom's own).
    for p in doc.probes.iter().filter(|p| p.kind() == headroom_result::ProbeKind::Net) {
        for key in ["cpu_load_local", "cpu_load_remote"] {
            let load: headroom_result::CpuLoad = serde_json::from_value(p.details[key].clone()).unwrap();
            // Threads are listed from the end-of-test snapshot, so a stream thread that has
            // already exited may be missing; the process total always counts it.
            assert!(load.cores >= 1 && !load.per_core.is_empty() && load.process_percent > 0.0, "{}: {key}", p.id);
        }
    }
    // Enough samples per disk test for compare to tell a difference from noise.
    for p in doc.probes.iter().filter(|p| p.kind() == headroom_result::ProbeKind::Disk) {
        assert!(p.samples.len() >= 6, "{}: {} samples", p.id, p.samples.len());
    }
    let cmp = headroom().args(["compare", "--json"]).arg(&save).arg(&save).output().unwrap();
    let cmp: serde_json::Value = serde_json::from_slice(&cmp.stdout).unwrap();
    for row in cmp["rows"].as_array().unwrap() {
        let result = &row["cells"][1]["significance"]["result"];
        let disk =
            row["probe"].as_str().unwrap().starts_with("seq") || row["probe"].as_str().unwrap().starts_with("rnd");
        // Disk samples carry throughput and IOPS (not a per-interval p99).
        if disk && (row["figure"] == "throughput" || row["figure"] == "iops") {
            assert_eq!(result, "within_noise", "{row}");
        }
    }
    let verdict = doc.verdict.expect("verdict saved");
    assert_eq!(verdict.directions.len(), 2);
    assert!(doc.warnings.iter().any(|w| w.code == "goal_missed"));
}

/// Every disk probe of `doc` measured about `disk_s` seconds and every
/// throughput probe about `net_s` (the runner stops within a sample of the end).
fn assert_measured_times(doc: &headroom_result::ResultDoc, disk_s: f64, net_s: f64) {
    use headroom_result::ProbeKind;
    let throughput = |p: &&headroom_result::Probe| p.kind() == ProbeKind::Net && p.summary.bytes.is_some_and(|b| b > 0);
    let disk: Vec<_> = doc.probes.iter().filter(|p| p.kind() == ProbeKind::Disk).collect();
    let net: Vec<_> = doc.probes.iter().filter(throughput).collect();
    assert!(!disk.is_empty() && !net.is_empty(), "disk and network probes in the document");
    for (probes, want) in [(disk, disk_s), (net, net_s)] {
        for p in probes {
            let got = p.summary.duration_s;
            assert!(
                got >= want * 0.9 && got <= want * 1.25 + 0.1,
                "{}: measured {got} s, expected about {want} s",
                p.id
            );
        }
    }
}

#[test]
fn run_time_sets_each_disk_and_network_tests_measured_time() {
    headroom()
        .args(["run", "--time", "100ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--time 100ms is out of range: 500ms to 10m"));
    if !has_engines() {
        eprintln!("SKIPPED run --time end to end: this build lacks the sys/disk/net/serve commands `run` drives");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let dir = tempfile::tempdir().unwrap();
    let out =
        headroom().args(["run", "--path", dir.path().to_str().unwrap(), "--time", "700ms", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = headroom_result::ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_measured_times(&doc, 0.7, 0.7);
}

#[test]
fn run_with_cpu_puts_the_cpu_hop_into_the_document_and_the_verdict() {
    if !has_engines() {
        eprintln!("SKIPPED run --cpu: this build lacks the sys/disk/net/serve commands `run` drives");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = headroom()
        // The shortest measured time `run` takes: what is checked is which probes and hops there are.
        .args(["run", "--preset", "quick", "--cpu", "--json", "--time", "500ms"])
        .args(["--path", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
    let doc = headroom_result::ResultDoc::from_json(&stdout).expect("--json prints one result document");

    // One thread, out of cache, the kernels a storage stream's CPU runs.
    let mut kernels: Vec<&str> = doc
        .probes
        .iter()
        .filter_map(|p| match &p.spec {
            headroom_result::ProbeSpec::Cpu(c) => {
                assert_eq!(c.threads, 1, "{}", p.id);
                assert_eq!(c.cache_resident, Some(false), "{}", p.id);
                assert!(p.summary.bytes_per_sec > 0.0, "{}", p.id);
                Some(c.kernel.as_str())
            }
            _ => None,
        })
        .collect();
    kernels.sort_unstable();
    assert_eq!(kernels, ["aes-256-gcm", "crc32c"]);
    assert!(doc.probes.iter().any(|p| p.kind() == headroom_result::ProbeKind::Disk));
    assert!(doc.probes.iter().any(|p| p.kind() == headroom_result::ProbeKind::Net));

    // The slower kernel is the CPU ceiling, and both directions show the hop.
    let slowest = doc
        .probes
        .iter()
        .filter(|p| p.kind() == headroom_result::ProbeKind::Cpu)
        .map(|p| p.summary.bytes_per_sec)
        .fold(f64::INFINITY, f64::min);
    assert!(doc.ceilings.iter().any(|c| c.hop == "cpu" && c.bytes_per_sec == slowest), "{:?}", doc.ceilings);
    let verdict = doc.verdict.expect("a verdict");
    assert_eq!(verdict.directions.len(), 2);
    for direction in &verdict.directions {
        let cpu_hop =
            direction.hops.iter().find(|h| h.hop == "cpu").unwrap_or_else(|| panic!("no cpu hop in {direction:?}"));
        assert_eq!(cpu_hop.ceiling_bytes_per_sec, Some(slowest), "{cpu_hop:?}");
    }
}

#[test]
fn a_goal_is_held_against_the_test_run_was_given() {
    if !has_engines() {
        eprintln!("SKIPPED run --test: this build lacks the sys/disk/net/serve commands `run` drives");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = headroom()
        .args(["run", "--path", dir.path().to_str().unwrap(), "--test", "read:512k:q4", "--json", "--time", "500ms"])
        .args(["--goal", "read=1MB/s,latency-p99=1ns"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = headroom_result::ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert!(doc.probes.iter().any(|p| p.id == "seq512k-q4t1-read"), "the custom test ran beside the preset");
    // The read goal is met by that test and the latency goal missed, both judged on it alone.
    let missed: Vec<&str> =
        doc.warnings.iter().filter(|w| w.code == "goal_missed").map(|w| w.message.as_str()).collect();
    assert_eq!(missed, ["goal latency-p99=1ns missed"], "{missed:?}");
}

#[test]
fn a_missing_credentials_file_is_refused_before_anything_is_measured() {
    // Port 1 on loopback: were the file read only at the share step, the run
    // would first measure this machine's CPU and network.
    headroom()
        .args(["run", "--share", "smb://127.0.0.1:1/share", "--credentials", "/nonexistent/creds"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--credentials /nonexistent/creds: No such file"))
        .stdout(predicate::str::is_empty());
}
