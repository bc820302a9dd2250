//! `headroom soak` end to end on real files: bad input exits 2 naming the
//! flag or file (and leaves foreign files untouched), SIGKILL loses at most
//! the last second and `--resume` continues with the gap recorded, live
//! Prometheus metrics, and vmkernel.log reconnects reported as flaps.
//!
//! Long (about 540 lines): 9 end-to-end tests sharing the soak runner and
//! its database readers.

use headroom_soak::Store;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
mod support;
use support::{doc, headroom_process as headroom, scrape, stderr};

fn soak(args: &[&str]) -> Output {
    headroom().arg("soak").args(args).output().expect("run headroom")
}

fn now_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

fn assert_usage_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "exit code; stderr: {}", stderr(o));
    let err = stderr(o);
    assert!(err.contains(needle), "stderr should name {needle:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_is_named_and_nothing_recorded_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let db = dir.path().join("x.sqlite");
    let db_s = db.to_str().unwrap();

    let o = soak(&["--duration", "soon", "--path", d, "--db", db_s]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--duration"), "{}", stderr(&o));
    assert_usage_error(&soak(&["--cycle", "write,fio", "--path", d, "--db", db_s]), "'fio' is not a probe");
    assert_usage_error(&soak(&["--cycle", "net", "--path", d, "--db", db_s]), "--server");
    assert_usage_error(&soak(&["--cycle", "write,write", "--path", d, "--db", db_s]), "twice");
    assert_usage_error(&soak(&["--metrics", "everywhere", "--path", d, "--db", db_s]), "--metrics 'everywhere'");
    assert_usage_error(&soak(&["--duration", "0s", "--path", d, "--db", db_s]), "--duration");
    assert_usage_error(
        &soak(&["--vmkernel-log", "/nonexistent/vmkernel.log", "--path", d, "--db", db_s]),
        "--vmkernel-log",
    );
    assert!(!db.exists(), "no database for a refused command");
    // A test file that cannot be made: the soak never started, so its database goes too.
    let o = soak(&["--duration", "2s", "--path", "/nonexistent/soak-dir", "--db", db_s]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent/soak-dir"), "{}", stderr(&o));
    assert!(!db.exists(), "no database for a soak that never started");
    let o = soak(&["--resume"]);
    assert_eq!(o.status.code(), Some(2), "--resume needs --db");

    // A database of another program: refused, byte for byte untouched.
    let foreign = dir.path().join("places.sqlite");
    let c = rusqlite::Connection::open(&foreign).unwrap();
    c.execute_batch("CREATE TABLE moz_places (id INTEGER, url TEXT); INSERT INTO moz_places VALUES (1, 'x');").unwrap();
    drop(c);
    let before = std::fs::read(&foreign).unwrap();
    let f = foreign.to_str().unwrap();
    assert_usage_error(&soak(&["--duration", "2s", "--path", d, "--db", f]), "another program");
    assert_usage_error(&soak(&["--db", f, "--resume"]), "another program");
    assert_eq!(std::fs::read(&foreign).unwrap(), before);

    // A text file named .sqlite.
    let text = dir.path().join("notes.sqlite");
    std::fs::write(&text, "shopping list: milk, eggs, a faster NAS, and some more words to fill").unwrap();
    assert_usage_error(&soak(&["--db", text.to_str().unwrap(), "--resume"]), "not a SQLite database");

    // A newer schema.
    let newer = dir.path().join("newer.sqlite");
    let o = soak(&[
        "--duration",
        "1s",
        "--probe-time",
        "1s",
        "--cycle",
        "write",
        "--size",
        "8M",
        "--path",
        d,
        "--db",
        newer.to_str().unwrap(),
        "--json",
    ]);
    doc(&o);
    let c = rusqlite::Connection::open(&newer).unwrap();
    c.execute("UPDATE headroom_soak_schema SET version = 7", []).unwrap();
    drop(c);
    assert_usage_error(&soak(&["--db", newer.to_str().unwrap(), "--resume"]), "newer than this headroom reads");
    // An existing soak is not overwritten by a new one.
    let again = soak(&["--duration", "1s", "--path", d, "--db", newer.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    // Resuming with settings that would change the soak.
    let first = dir.path().join("first.sqlite");
    doc(&soak(&[
        "--duration",
        "1s",
        "--probe-time",
        "1s",
        "--cycle",
        "write",
        "--size",
        "8M",
        "--path",
        d,
        "--db",
        first.to_str().unwrap(),
        "--json",
    ]));
    assert_usage_error(
        &soak(&["--db", first.to_str().unwrap(), "--resume", "--cycle", "read"]),
        "--cycle read cannot change a soak being resumed",
    );
}

/// headroom test files in `dir`.
fn test_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("headroom-disk-"))
        .collect()
}

fn short_soak(dir: &str, db: &Path) -> headroom_result::ResultDoc {
    doc(&soak(&[
        "--duration",
        "1s",
        "--probe-time",
        "1s",
        "--cycle",
        "write",
        "--size",
        "8M",
        "--path",
        dir,
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]))
}

/// The disk under the soak's directory is recorded at its start, and a
/// virtual one (virtio, Xen, an emulated disk) gives the document the
/// host-cache warning, as `disk` and `run` do. Which the temp directory's
/// disk is comes from sysfs here, independently of the soak.
#[test]
fn a_soak_names_its_disk_and_warns_of_a_virtual_ones_host_cache() {
    let dir = tempfile::tempdir().unwrap();
    let device = headroom_sys::block_device_holding(dir.path());
    let db = dir.path().join("v.sqlite");
    let d = short_soak(dir.path().to_str().unwrap(), &db);
    let info = Store::open(&db).unwrap().info().unwrap();
    assert_eq!(info.config.disk_device(), device.as_ref().map(|d| d.name.as_str()), "{:?}", info.config.extra);
    let host_cache = d.warnings.iter().filter(|w| w.message.contains("is a virtual disk")).count();
    let virtual_here = device.as_ref().is_some_and(headroom_analysis::is_virtual_disk);
    assert_eq!(host_cache, usize::from(virtual_here), "{:?}", d.warnings);
    if !virtual_here {
        println!("the temp directory's disk is not virtual here: only the absence was checked");
    }
}

#[test]
fn resume_checks_before_it_writes_and_accepts_the_same_settings() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();

    // A busy --metrics port is refused before the database exists.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let db = dir.path().join("metrics.sqlite");
    let o = soak(&[
        "--duration",
        "2s",
        "--path",
        d,
        "--db",
        db.to_str().unwrap(),
        "--metrics",
        &format!("127.0.0.1:{port}"),
    ]);
    assert_usage_error(&o, "--metrics 127.0.0.1");
    assert!(!db.exists(), "no database for a soak that never started");

    // A soak whose time is used up: refused, nothing written or laid out.
    let first = dir.path().join("first.sqlite");
    short_soak(d, &first);
    let f = first.to_str().unwrap();
    let before = std::fs::read(&first).unwrap();
    let o = soak(&["--db", f, "--resume"]);
    assert_usage_error(&o, "used up");
    assert!(stderr(&o).contains("--duration"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&first).unwrap(), before, "the used-up soak is not modified");
    assert!(test_files(dir.path()).is_empty(), "no test file laid out for nothing");

    // The same settings again are accepted; a change is refused.
    let o = soak(&[
        "--db",
        f,
        "--resume",
        "--duration",
        "4s",
        "--cycle",
        "write",
        "--path",
        d,
        "--probe-time",
        "1s",
        "--size",
        "8M",
        "--json",
    ]);
    let s = doc(&o).soak.unwrap();
    assert_eq!(s.sessions, 2);
    // Every stored sample has its own second's p99 latency (the drift view needs it).
    let store = Store::open(&first).unwrap();
    let mut lat = Vec::new();
    store.for_each_sample("write", |s| lat.push((s.lat_mean_ns, s.lat_p99_ns))).unwrap();
    drop(store);
    assert!(!lat.is_empty());
    for (mean, p99) in &lat {
        let (mean, p99) = (mean.expect("mean latency"), p99.expect("per-second p99 latency"));
        assert!(p99 >= 0.5 * mean && p99 > 0.0, "p99 {p99} vs mean {mean}: {lat:?}");
    }
    assert_usage_error(
        &soak(&["--db", f, "--resume", "--duration", "9s", "--size", "16M"]),
        "--size 16.00 MiB cannot change",
    );

    // A damaged database: refused, byte for byte untouched.
    let damaged = dir.path().join("damaged.sqlite");
    {
        let info = headroom_soak::SoakInfo {
            started_at: "2026-11-21T22:00:00Z".into(),
            started_unix: 1e9,
            planned_s: Some(3600.0),
            config: headroom_soak::SoakConfig {
                cycle: vec!["write".into()],
                probe_s: 30.0,
                path: Some(d.into()),
                server: None,
                vmkernel_log: None,
                extra: serde_json::json!({"size": 8 << 20}),
            },
            host: None,
        };
        let store = Store::create(&damaged, &info).unwrap();
        let session = store.begin_session(1e9).unwrap();
        let cycle = store.begin_cycle(session, 1, "write", 1e9).unwrap();
        for i in 0..5000 {
            let row = headroom_soak::SampleRow { t_unix: 1e9 + i as f64, bytes_per_sec: 1e8, ..Default::default() };
            store.add_sample(cycle, "write", &row).unwrap();
        }
    }
    let mut bytes = std::fs::read(&damaged).unwrap();
    assert!(bytes.len() > 40 * 4096, "{}", bytes.len());
    for b in &mut bytes[20 * 4096..21 * 4096] {
        *b = 0xa5;
    }
    std::fs::write(&damaged, &bytes).unwrap();
    let o = soak(&["--db", damaged.to_str().unwrap(), "--resume", "--duration", "2h"]);
    assert_usage_error(&o, "damaged");
    assert_eq!(std::fs::read(&damaged).unwrap(), bytes, "the damaged database is not modified");

    // report of an empty SQLite file says what is wrong, not "drop --resume".
    let empty = dir.path().join("empty.sqlite");
    let c = rusqlite::Connection::open(&empty).unwrap();
    c.pragma_update(None, "user_version", 1).unwrap();
    drop(c);
    let o = headroom().args(["report", empty.to_str().unwrap()]).output().unwrap();
    assert_usage_error(&o, "holds no headroom soak");
    assert!(!stderr(&o).contains("--resume"), "{}", stderr(&o));
    let o = soak(&["--db", empty.to_str().unwrap(), "--resume"]);
    assert_usage_error(&o, "no soak to resume");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `headroom soak ARGS --path DIR --db DB --metrics 127.0.0.1:PORT` started
/// in the background, quiet.
fn soak_with_metrics(args: &[&str], dir: &Path, db: &Path, port: u16) -> std::process::Child {
    headroom()
        .arg("soak")
        .args(args)
        .args(["--path", dir.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .args(["--metrics", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (at most 20 s) until the soak's database holds `n` samples.
fn wait_for_samples(db: &Path, n: u64) {
    let started = Instant::now();
    let count = || Store::open(db).ok().and_then(|s| s.sample_count(None).ok()).unwrap_or(0);
    while count() < n {
        assert!(started.elapsed() < Duration::from_secs(20), "fewer than {n} samples after 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sigkill_loses_at_most_the_last_second_and_resume_records_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("soak.sqlite");
    let port = free_port();
    let soak_args = ["--duration", "60s", "--probe-time", "30s", "--cycle", "write", "--size", "32M"];
    let mut child = soak_with_metrics(&soak_args, dir.path(), &db, port);

    // Wait for samples, scrape the metrics while it runs, then kill -9.
    wait_for_samples(&db, 2);
    let metrics = scrape(port).expect("metrics answer while the soak runs");
    // Every series also carries host= (this machine's hostname by default).
    for family in ["headroom_soak_bytes_total", "headroom_soak_operations_total", "headroom_soak_samples_total"] {
        let series = format!("{family}{{host=\"");
        assert!(
            metrics.lines().any(|l| l.starts_with(&series) && l.contains(",probe=\"write\"}")),
            "{family}: {metrics}"
        );
    }
    std::thread::sleep(Duration::from_millis(1700));
    child.kill().unwrap(); // SIGKILL
    let killed_at = now_unix();
    child.wait().unwrap();

    let store = Store::open(&db).expect("the database opens after SIGKILL");
    let mut times = Vec::new();
    store.for_each_sample("write", |s| times.push(s.t_unix)).unwrap();
    assert!(times.len() >= 3, "{times:?}");
    let last = *times.last().unwrap();
    assert!(last >= killed_at - 1.25, "newest sample {:.2} s before the kill", killed_at - last);
    for w in times.windows(2) {
        assert!(w[1] - w[0] <= 1.3, "a sample is missing between {} and {}", w[0], w[1]);
    }
    let stored = times.len() as u64;
    drop(store);
    let left = dir.path().join(format!("headroom-disk-{}.tmp", child.id()));
    assert!(left.exists(), "the killed soak left its test file (what --resume must clean up)");

    // Resume for a short total: the gap is recorded, old samples kept.
    std::thread::sleep(Duration::from_millis(500));
    let o = soak(&["--db", db.to_str().unwrap(), "--resume", "--duration", "6s", "--json"]);
    let d = doc(&o);
    let s = d.soak.expect("soak section");
    assert_eq!(s.sessions, 2);
    assert_eq!(s.gaps.len(), 1, "{:?}", s.gaps);
    let gap = &s.gaps[0];
    assert!(gap.reason.contains("interrupted"), "{}", gap.reason);
    assert!(gap.duration_s >= 0.4 && gap.duration_s < 15.0, "{gap:?}");
    assert!(s.samples > stored, "resume added samples ({} -> {})", stored, s.samples);
    assert!(s.events.iter().any(|e| e.kind.as_str() == "gap"));
    assert!(d.warnings.iter().any(|w| w.code == "soak_gap"));
    assert!(!left.exists(), "--resume removed the killed session's test file");
    assert_eq!(test_files(dir.path()), Vec::<String>::new(), "and its own");
    // The killed soak's samples are all still there.
    let store = Store::open(&db).unwrap();
    let mut kept = 0;
    store.for_each_sample("write", |s| kept += u64::from(s.t_unix <= last)).unwrap();
    assert_eq!(kept, stored);
}

#[test]
fn vmkernel_log_reconnects_are_flaps() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let db = dir.path().join("v.sqlite");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/analysis/tests/fixtures/vmkernel-vusb-three-reconnects.log");
    let o = soak(&[
        "--duration",
        "1s",
        "--probe-time",
        "1s",
        "--cycle",
        "write",
        "--size",
        "8M",
        "--path",
        d,
        "--db",
        db.to_str().unwrap(),
        "--vmkernel-log",
        fixture.to_str().unwrap(),
        "--json",
    ]);
    let d = doc(&o);
    let s = d.soak.unwrap();
    let flaps: Vec<_> = s.events.iter().filter(|e| e.kind.as_str() == "flap").collect();
    assert_eq!(flaps.len(), 3, "{flaps:#?}");
    assert!(flaps
        .iter()
        .all(|f| f.source == "vmkernel_log" && f.device.as_deref() == Some("vusb1") && f.end_s.is_some()));
    // The fixture's reconnects are days before this soak: said apart, not counted as its own.
    assert!(s.detections.iter().all(|x| x.kind.as_str() != "link_flaps"), "{:#?}", s.detections);
    let det =
        s.detections.iter().find(|x| x.kind.as_str() == "link_flaps_outside_soak").expect("the log's older flaps");
    assert!(
        det.message.starts_with(
            "3 link flap(s) in the imported log outside this soak (before it started; not counted as the soak's): \
             vusb1 down 6.8 s at 2026-11-18T03:12:44Z"
        ),
        "{}",
        det.message
    );
}

#[test]
fn unreachable_server_at_start_keeps_the_disk_probes_going() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let db = dir.path().join("o.sqlite");
    let port = free_port().to_string(); // nothing listens there
    let o = soak(&[
        "--duration",
        "5s",
        "--probe-time",
        "2s",
        "--cycle",
        "write,net",
        "--server",
        &format!("127.0.0.1:{port}"),
        "--size",
        "8M",
        "--path",
        d,
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]);
    let d = doc(&o);
    let s = d.soak.unwrap();
    let outages: Vec<_> = s.events.iter().filter(|e| e.kind.as_str() == "server_outage").collect();
    assert_eq!(outages.len(), 1, "{:#?}", s.events);
    assert!(outages[0].message.contains("connection refused"), "{}", outages[0].message);
    assert!(d.probes.iter().any(|p| p.id == "soak-write" && p.summary.bytes_per_sec > 0.0));
    assert!(!d.probes.iter().any(|p| p.id == "soak-net"), "no net figures without a server");
    assert!(s.detections.iter().any(|x| x.kind.as_str() == "server_outage"));
}

#[test]
fn server_lost_mid_soak_is_an_outage_and_the_disk_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let db = dir.path().join("m.sqlite");
    let port = free_port().to_string();
    let mut server =
        headroom().args(["serve", "--port", &port]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let child = headroom()
        .args(["soak", "--duration", "9s", "--probe-time", "2s", "--cycle", "net,write", "--server"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--size", "8M", "--path", d, "--db", db.to_str().unwrap(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the server during the first write turn (after the first net turn).
    std::thread::sleep(Duration::from_millis(3000));
    server.kill().unwrap();
    server.wait().unwrap();
    let killed_at = now_unix();
    let o = child.wait_with_output().unwrap();
    let d = doc(&o);
    let s = d.soak.unwrap();
    let net = d.probes.iter().find(|p| p.id == "soak-net").expect("net measured before the loss");
    assert!(net.summary.bytes_per_sec > 0.0);
    let outages: Vec<_> = s.events.iter().filter(|e| e.kind.as_str() == "server_outage").collect();
    assert_eq!(outages.len(), 1, "{:#?}", s.events);
    assert!(outages[0].end_s.is_none(), "the server never came back");
    // Disk samples after the loss.
    let store = Store::open(&db).unwrap();
    let mut after = 0;
    store.for_each_sample("write", |x| after += u32::from(x.t_unix > killed_at + 1.0)).unwrap();
    assert!(after >= 1, "the write probe went on after the server was lost");
}

/// Turns of one second deliver their only sample with the outcome, not live:
/// the metrics endpoint must count it all the same.
#[test]
fn one_second_turns_still_reach_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("short.sqlite");
    let port = free_port();
    let soak_args = ["--duration", "20s", "--probe-time", "1s", "--cycle", "write,read", "--size", "16M"];
    let mut child = soak_with_metrics(&soak_args, dir.path(), &db, port);
    wait_for_samples(&db, 3);
    let metrics = scrape(port).expect("metrics answer while the soak runs");
    child.kill().unwrap();
    child.wait().unwrap();
    for probe in ["write", "read"] {
        let samples = metrics
            .lines()
            .find(|l| l.starts_with("headroom_soak_samples_total{") && l.contains(&format!("probe=\"{probe}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        assert!(samples.is_some_and(|n| n >= 1.0), "{probe}: no samples counted\n{metrics}");
    }
}

/// The analysis of the soak so far (here: an imported vmkernel.log's flaps)
/// reaches the metrics endpoint while the soak runs, as gauges by kind; the
/// usual kinds are there at 0 from the start, for dashboards.
#[test]
fn findings_so_far_reach_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("f.sqlite");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/analysis/tests/fixtures/vmkernel-vusb-three-reconnects.log");
    let port = free_port();
    let soak_args = ["--duration", "20s", "--probe-time", "1s", "--cycle", "write", "--size", "8M"];
    let mut child = soak_with_metrics(
        &[&soak_args[..], &["--vmkernel-log", fixture.to_str().unwrap()]].concat(),
        dir.path(),
        &db,
        port,
    );
    let started = Instant::now();
    let finding = |metrics: &str, kind: &str| -> Option<f64> {
        metrics
            .lines()
            .find(|l| l.starts_with("headroom_soak_findings{") && l.contains(&format!("kind=\"{kind}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    let metrics = loop {
        let m = scrape(port).unwrap_or_default();
        if finding(&m, "link_flaps_outside_soak").is_some() {
            break m;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "no findings on the endpoint after 15 s:\n{m}");
        std::thread::sleep(Duration::from_millis(200));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(finding(&metrics, "link_flaps_outside_soak"), Some(1.0), "{metrics}");
    assert_eq!(finding(&metrics, "periodic_dips"), Some(0.0), "{metrics}");
    assert_eq!(finding(&metrics, "link_flaps"), Some(0.0), "{metrics}");
}
