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
    // The machine is recorded, as `run` records it (`report` names it).
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(doc.host.hostname.as_deref(), Some(hostname.trim()));
    assert!(doc.host.cpu.as_ref().is_some_and(|c| c.logical_cpus > 0), "{:?}", doc.host.cpu);
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
    // Each second's p99 is read from the same records as the test's percentiles.
    for s in &p.samples {
        let p99 = s.latency_ns_p99.unwrap_or_else(|| panic!("a sample without its p99: {s:?}"));
        assert!(lat.min.unwrap() <= p99 && p99 <= lat.max, "sample p99 {p99} outside {lat:?}");
    }
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

/// Sets `file`'s access time three days back: old enough that relatime,
/// the usual mount option, updates it on the next read.
fn age_access_time(file: &std::path::Path) {
    let past = std::time::SystemTime::now() - Duration::from_secs(3 * 86_400);
    let f = std::fs::File::options().write(true).open(file).unwrap();
    f.set_times(std::fs::FileTimes::new().set_accessed(past)).unwrap();
}

fn access_time(file: &std::path::Path) -> i64 {
    std::fs::metadata(file).unwrap().atime()
}

#[test]
fn reading_a_file_leaves_its_access_time_alone() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (control, file) = (dir.path().join("control.img"), dir.path().join("data.img"));
    for f in [&control, &file] {
        std::fs::write(f, vec![1u8; 4 << 20]).unwrap();
        age_access_time(f);
    }
    let before = access_time(&control);
    std::fs::read(&control).unwrap();
    if access_time(&control) == before {
        eprintln!("SKIPPED {}: this filesystem does not update access times on read (noatime)", module_path!());
        return;
    }
    let before = access_time(&file);
    for engine in ["io_uring", "psync"] {
        let args = [file.to_str().unwrap(), "--rw", "randread", "--time", "200ms", "--ramp", "0s", "--engine", engine];
        let r = doc(&disk(&[&args[..], &["--json"]].concat()));
        assert!(r.probes[0].summary.ops.unwrap() > 0, "{engine}");
        assert_eq!(access_time(&file), before, "reading with {engine} changed the file's access time");
    }
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

#[test]
fn a_bad_share_url_is_one_line_and_exit_2() {
    let creds = tempfile::NamedTempFile::new().unwrap();
    let c = creds.path().to_str().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["ftp://nas/x"], &["unknown scheme 'ftp'", "nfs://"]),
        (&["smb://alice:hunter2@nas/share"], &["password", "HEADROOM_SMB_PASSWORD"]),
        (&["iscsi://nas/not-an-iqn/0"], &["'not-an-iqn' is not an iSCSI name"]),
        (&["nfs://nas"], &["no export"]),
        (&["nbd://nas:0"], &["port 0"]),
        (&["/tmp", "--credentials", c], &["--credentials is for nfs://"]),
        (&["nfs://nas/x", "--remote", "nas"], &["is a URL", "without --remote"]),
    ];
    for (args, needles) in cases {
        let out = disk(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        support::one_error_line(&out, needles);
        assert!(!stderr(&out).contains("hunter2"), "the password is never echoed");
    }
}

#[test]
fn show_fio_prints_each_tests_command_and_fio_job_writes_a_file_fio_accepts() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let job = dir.path().join("run.fio");
    let d = dir.path().to_str().unwrap();
    let mut args = vec![d, "--rw", "randread", "--bs", "4k", "--qd", "4", "--show-fio", "--fio-job"];
    args.push(job.to_str().unwrap());
    args.extend_from_slice(SHORT);
    let out = disk(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("fio equivalents:\n  RND4K Q4T1 read: fio --name=rnd4k-q4t1-read"), "{stdout}");
    let text = std::fs::read_to_string(&job).unwrap();
    assert!(text.contains("[rnd4k-q4t1-read]\nstonewall\n") && text.contains("\niodepth=4\n"), "{text}");
    if headroom_lab::has_program("fio") {
        let parsed = std::process::Command::new("fio").arg("--parse-only").arg(&job).output().unwrap();
        assert!(parsed.status.success(), "fio refused the job file: {}", String::from_utf8_lossy(&parsed.stderr));
    } else {
        eprintln!("SKIPPED part of {}: fio is not installed (scripts/install-deps.sh)", module_path!());
    }
    // An unwritable --fio-job fails before anything runs.
    let bad = disk(&[d, "--fio-job", "/nonexistent/dir/x.fio"]);
    support::one_error_line(&bad, &["--fio-job"]);
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_goal_on_the_test_that_matters_exits_1_when_missed() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path().to_str().unwrap();
    // IOMeter's 512K sequential read, as the seed held a NAS against 223.4 MB/s.
    let seq = |goal: &str| {
        let mut args = vec![d, "--rw", "read", "--bs", "512k", "--qd", "4", "--json", "--goal", goal];
        args.extend_from_slice(SHORT);
        disk(&args)
    };
    let met = seq("read=1MB/s");
    assert_eq!(met.status.code(), Some(0), "{}", stderr(&met));
    let missed = seq("read=1000TB/s,latency-p99=1ns");
    assert_eq!(missed.status.code(), Some(1), "{}", stderr(&missed));
    let found: serde_json::Value = serde_json::from_slice(&missed.stdout).unwrap();
    let codes: Vec<&str> = found["warnings"].as_array().unwrap().iter().filter_map(|w| w["code"].as_str()).collect();
    assert_eq!(codes.iter().filter(|c| **c == "goal_missed").count(), 2, "{codes:?}");
    assert!(stderr(&missed).contains("goal missed: read=1000TB/s, latency-p99=1ns"));
    support::one_error_line(&disk(&[d, "--goal", "speed=3"]), &["--goal 'speed=3'", "unknown metric"]);
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_server_refusing_the_block_size_is_one_line_and_no_empty_table() {
    headroom_lab::require_program!("nbdkit");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut nbdkit = std::process::Command::new("nbdkit")
        .args(["--foreground", "--ip-addr", "127.0.0.1", "--port", &port.to_string()])
        .args(["--filter=blocksize-policy", "memory", "16M", "blocksize-maximum=65536"])
        .args(["blocksize-minimum=512", "blocksize-preferred=4096", "blocksize-error-policy=error"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("nbd://127.0.0.1:{port}");
    let out = disk(&[&url, "--rw", "read", "--bs", "1M", "--time", "300ms", "--ramp", "0s"]);
    let _ = nbdkit.kill();
    let _ = nbdkit.wait();
    support::one_error_line(&out, &["at most 65536 bytes per request", &url]);
    assert!(out.stdout.is_empty(), "nothing measured, nothing printed: {}", String::from_utf8_lossy(&out.stdout));
}

/// A run on a disk a hypervisor presents (virtio, Xen, an emulated disk)
/// carries the host-cache warning once, on the document; a RAM loop device
/// (a disk of this machine's) does not. Which the temp directory's disk is
/// comes from sysfs here, independently of the run.
#[test]
fn a_virtual_disk_carries_the_host_cache_warning_and_a_loop_device_does_not() {
    let host_cache = |d: &headroom_result::ResultDoc| {
        d.warnings.iter().filter(|w| w.code == "page_cache_possible" && w.message.contains("is a virtual disk")).count()
    };
    let tmp = tempfile::tempdir().unwrap();
    let virtual_here =
        headroom_sys::block_device_holding(tmp.path()).is_some_and(|d| headroom_analysis::is_virtual_disk(&d));
    let args: Vec<&str> =
        [tmp.path().to_str().unwrap(), "--rw", "read", "--json"].iter().chain(SHORT).copied().collect();
    let d = doc(&disk(&args));
    assert_eq!(host_cache(&d), usize::from(virtual_here), "{:?}", d.warnings);
    if !virtual_here {
        println!("the temp directory's disk is not virtual here: only the absence was checked");
    }
    if !headroom_lab::is_root() {
        println!("SKIPPED the loop device half: needs root (losetup)");
        return;
    }
    let device = headroom_lab::blockdev::LoopDevice::new_in(std::path::Path::new("/dev/shm"), 64 << 20).unwrap();
    let args: Vec<&str> =
        [device.path.to_str().unwrap(), "--rw", "read", "--json"].iter().chain(SHORT).copied().collect();
    let d = doc(&disk(&args));
    assert_eq!(host_cache(&d), 0, "{:?}", d.warnings);
}
