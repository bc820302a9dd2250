//! `headroom disk` end to end on real files: bad input exits 2 naming the
//! flag, the JSON document, layout with real data, existing-file safety,
//! Ctrl-C cleanup, and the memory filesystems (tmpfs caveat, ramfs O_DIRECT
//! fallback). Probe durations are kept to fractions of a second.

use headroom_result::ProbeSpec;
use std::os::unix::fs::MetadataExt;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
mod support;
use support::{disk_leftovers as leftovers, doc, headroom_process as headroom, stderr};

fn disk(args: &[&str]) -> Output {
    headroom().arg("disk").args(args).output().expect("run headroom")
}

const SHORT: &[&str] = &["--time", "300ms", "--ramp", "100ms", "--size", "16M"];

#[test]
fn bad_input_exits_2_naming_the_flag() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path().to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&[d, "--qd", "0"], "--qd"),
        (&[d, "--jobs", "0"], "--jobs"),
        (&[d, "--rw", "randread", "--bs", "3000", "--size", "16M"], "--bs 3000"),
        (&[d, "--bs", "0"], "--bs"),
        (&[d, "--size", "100T"], "--size"),
        (&[d, "--size", "lots"], "--size"),
        (&["/nonexistent/headroom-test-dir"], "does not exist"),
        (&[d, "--rw", "randread", "--rwmix", "50"], "--rwmix"),
        (&[d, "--rwmix", "50"], "--rwmix"),
        (&[d, "--preset", "cdm", "--bs", "4k"], "--bs"),
        (&[d, "--preset", "fast"], "--preset"),
        (&[d, "--pattern", "ones"], "--pattern"),
        (&[d, "--pattern", "compressible=150"], "--pattern"),
        (&[d, "--time", "0s"], "--time"),
        (&[d, "--engine", "spdk"], "--engine"),
        (&[d, "--preset", "sync", "--sync", "fsync"], "--sync"),
    ];
    for (args, flag) in cases {
        let o = disk(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(flag), "{args:?}: message does not name {flag}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(leftovers(dir.path()).is_empty(), "{args:?} left a test file behind");
    }
}

#[test]
fn json_document_has_one_disk_probe_with_samples_and_fio_line() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path().to_str().unwrap();
    let o = disk(&[
        d, "--rw", "randread", "--bs", "4k", "--qd", "4", "--time", "1200ms", "--ramp", "200ms", "--size", "16M",
        "--json",
    ]);
    let doc = doc(&o);
    assert_eq!(doc.probes.len(), 1);
    let p = &doc.probes[0];
    assert_eq!(p.id, "rnd4k-q4t1-read");
    let ProbeSpec::Disk(spec) = &p.spec else { panic!("not a disk probe") };
    assert_eq!((spec.rw.as_str(), spec.block_size, spec.queue_depth), ("randread", 4096, 4));
    assert_eq!(spec.size, Some(16 << 20));
    assert!(spec.filesystem.is_some());
    let fio = spec.fio_equivalent.as_deref().unwrap();
    assert!(fio.starts_with("fio ") && fio.contains("--rw=randread") && fio.contains("--iodepth=4"), "{fio}");
    let ops = p.summary.ops.unwrap();
    assert!(ops > 0);
    // IOPS, bytes and duration agree with each other.
    let iops = p.summary.iops.unwrap();
    assert!((iops * p.summary.duration_s - ops as f64).abs() < 1.0);
    assert!((p.summary.bytes_per_sec - iops * 4096.0).abs() < 1.0);
    assert!(p.summary.duration_s > 1.1 && p.summary.duration_s < 1.5, "{}", p.summary.duration_s);
    assert!(!p.samples.is_empty());
    let lat = p.summary.latency_ns.as_ref().unwrap();
    assert!(lat.p50 <= lat.p99 && lat.p99 <= lat.p999 && lat.p999 <= lat.max);
    let hist = p.histogram.as_ref().unwrap();
    assert_eq!(hist.buckets.iter().map(|b| b.1).sum::<u64>(), ops, "histogram holds every measured I/O");
    assert!(leftovers(dir.path()).is_empty(), "test file not removed");
}

#[test]
fn test_file_is_laid_out_with_real_data_and_kept_on_request() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path().to_str().unwrap();
    let o = disk(&[d, "--rw", "read", "--keep", "--time", "200ms", "--ramp", "0s", "--size", "8M", "--json"]);
    doc(&o);
    let kept = leftovers(dir.path());
    assert_eq!(kept.len(), 1, "--keep keeps exactly the test file");
    let path = dir.path().join(&kept[0]);
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 8 << 20);
    assert!(meta.blocks() * 512 >= 8 << 20, "sparse test file: {} blocks", meta.blocks());
    let data = std::fs::read(&path).unwrap();
    let zeros = data.iter().filter(|&&b| b == 0).count();
    assert!(zeros < data.len() / 100, "test file is not random data ({zeros} zero bytes)");
}

#[test]
fn existing_files_need_destructive_for_writes_only() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("precious.img");
    std::fs::write(&file, vec![1u8; 4 << 20]).unwrap();
    let f = file.to_str().unwrap();
    let o = disk(&[f, "--rw", "randwrite", "--time", "200ms"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--destructive"), "{}", stderr(&o));
    assert!(std::fs::read(&file).unwrap().iter().all(|&b| b == 1), "refused, yet written");
    // Reads need no flag and leave the file alone.
    let r = doc(&disk(&[f, "--rw", "randread", "--time", "200ms", "--ramp", "0s", "--json"]));
    assert!(r.probes[0].summary.ops.unwrap() > 0);
    assert!(file.exists());
    // With --destructive, writes go ahead; the user's file is not removed.
    let w = doc(&disk(&[f, "--rw", "randwrite", "--time", "200ms", "--ramp", "0s", "--destructive", "--json"]));
    assert!(w.probes[0].summary.ops.unwrap() > 0);
    assert!(std::fs::read(&file).unwrap().iter().any(|&b| b != 1), "--destructive wrote nothing");
}

#[test]
fn an_existing_file_holding_a_filesystem_needs_force_too() {
    headroom_lab::require_program!("mkfs.ext4");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("ext4.img");
    std::fs::File::create(&file).unwrap().set_len(4 << 20).unwrap();
    let f = file.to_str().unwrap();
    headroom_lab::sh("mkfs.ext4", &["-q", "-F", f]).unwrap();
    let o = disk(&[f, "--rw", "write", "--time", "200ms", "--destructive"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("ext4") && stderr(&o).contains("--force"), "{}", stderr(&o));
    let o = disk(&[f, "--rw", "write", "--time", "200ms", "--ramp", "0s", "--destructive", "--force", "--json"]);
    assert!(doc(&o).probes[0].summary.ops.unwrap() > 0);
}

#[test]
fn ctrl_c_stops_within_a_second_and_removes_the_test_file() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut child = headroom()
        .args([
            "disk",
            dir.path().to_str().unwrap(),
            "--rw",
            "randread",
            "--time",
            "60s",
            "--ramp",
            "0s",
            "--size",
            "16M",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the test runs (file laid out), then measure a little.
    let start = Instant::now();
    while leftovers(dir.path()).is_empty() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!leftovers(dir.path()).is_empty(), "test file never appeared");
    std::thread::sleep(Duration::from_millis(1500));
    let sent = Instant::now();
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc_kill(child.id() as i32, 2) }, 0);
    while child.try_wait().unwrap().is_none() {
        assert!(sent.elapsed() < Duration::from_secs(5), "headroom did not stop after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sent.elapsed() < Duration::from_millis(1500), "stopping took {:?}", sent.elapsed());
    let out = child.wait_with_output().unwrap();
    assert!(leftovers(dir.path()).is_empty(), "test file left behind after Ctrl-C");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("RND4K Q1T1 read"), "what was measured is printed: {stdout}");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn tmpfs_results_carry_the_memory_caveat() {
    headroom_lab::require_root!();
    let m = headroom_lab::blockdev::Mount::tmpfs(64 << 20).unwrap();
    let o = disk(
        &[m.path().to_str().unwrap(), "--rw", "randread", "--json"].iter().chain(SHORT).copied().collect::<Vec<_>>(),
    );
    let d = doc(&o);
    let p = &d.probes[0];
    let ProbeSpec::Disk(spec) = &p.spec else { panic!() };
    assert_eq!(spec.filesystem.as_deref(), Some("tmpfs"));
    let codes: Vec<_> = p.warnings.iter().map(|w| w.code.as_str()).collect();
    assert!(codes.contains(&"filesystem_caveat") && codes.contains(&"page_cache_possible"), "{codes:?}");
    assert!(leftovers(m.path()).is_empty());
}

#[test]
fn ramfs_refuses_o_direct_so_headroom_falls_back_with_a_warning() {
    headroom_lab::require_root!();
    let m = headroom_lab::blockdev::Mount::ramfs().unwrap();
    let dir = m.path().to_str().unwrap();
    let args: Vec<&str> = [dir, "--rw", "randwrite", "--json"].iter().chain(SHORT).copied().collect();
    let o = disk(&args);
    let d = doc(&o);
    let p = &d.probes[0];
    let ProbeSpec::Disk(spec) = &p.spec else { panic!() };
    assert!(!spec.direct, "ramfs cannot do O_DIRECT");
    assert!(p.warnings.iter().any(|w| w.code == "page_cache_possible"));
    assert!(p.summary.ops.unwrap() > 0);
    // Without --json the fallback is announced on stderr.
    let args: Vec<&str> = [dir, "--rw", "randread"].iter().chain(SHORT).copied().collect();
    let o = disk(&args);
    assert!(stderr(&o).contains("O_DIRECT"), "{}", stderr(&o));
    // --direct on refuses instead of falling back.
    let args: Vec<&str> = [dir, "--rw", "randread", "--direct", "on"].iter().chain(SHORT).copied().collect();
    let o = disk(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--direct"), "{}", stderr(&o));
    assert!(leftovers(m.path()).is_empty());
}

#[test]
fn a_read_only_filesystem_is_refused_naming_the_path() {
    headroom_lab::require_root!();
    let m = headroom_lab::blockdev::Mount::new("tmpfs", "tmpfs", Some("ro,size=1m")).unwrap();
    let o = disk(&[m.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not writable"), "{}", stderr(&o));
}

#[test]
fn the_quick_preset_runs_its_six_tests_in_order() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = doc(&disk(&[dir.path().to_str().unwrap(), "--time", "500ms", "--ramp", "0s", "--size", "16M", "--json"]));
    let ids: Vec<_> = d.probes.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "seq1m-q8t1-read",
            "seq1m-q8t1-write",
            "rnd4k-q32t1-read",
            "rnd4k-q32t1-write",
            "rnd4k-q1t1-read",
            "rnd4k-q1t1-write"
        ]
    );
    assert!(d.probes.iter().all(|p| p.summary.ops.unwrap_or(0) > 0));
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn psync_runs_one_thread_per_queued_io_and_says_so() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = doc(&disk(
        &[dir.path().to_str().unwrap(), "--rw", "randread", "--qd", "4", "--engine", "psync", "--json"]
            .iter()
            .chain(SHORT)
            .copied()
            .collect::<Vec<_>>(),
    ));
    let p = &d.probes[0];
    let ProbeSpec::Disk(spec) = &p.spec else { panic!() };
    assert_eq!(spec.engine, "psync");
    assert_eq!(p.details["threads"], 4);
    let fio = spec.fio_equivalent.as_deref().unwrap();
    assert!(fio.contains("--ioengine=psync") && fio.contains("--numjobs=4"), "{fio}");
}

#[test]
fn the_pattern_flag_decides_what_lands_on_disk() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let zero_share = |pattern: &str| {
        let sub = tempfile::tempdir_in(dir.path()).unwrap();
        let args =
            [sub.path().to_str().unwrap(), "--rw", "write", "--bs", "64k", "--pattern", pattern, "--keep", "--json"];
        let args: Vec<&str> =
            args.iter().chain(&["--time", "400ms", "--ramp", "0s", "--size", "4M"]).copied().collect();
        doc(&disk(&args));
        let kept = leftovers(sub.path());
        let data = std::fs::read(sub.path().join(&kept[0])).unwrap();
        data.iter().filter(|&&b| b == 0).count() as f64 / data.len() as f64
    };
    let random = zero_share("random");
    let zero = zero_share("zero");
    let half = zero_share("compressible=50");
    assert!(random < 0.01, "random data has {random} zero bytes");
    assert!(zero > 0.99, "zero pattern has {zero} zero bytes");
    assert!((0.45..0.6).contains(&half), "compressible=50 has {half} zero bytes");
}
