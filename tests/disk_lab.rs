//! `headroom disk` on loop devices the tests create: refusal of devices that
//! carry a filesystem or partition table; devices of known speed (cgroup v1
//! blkio throttles) measured within 3 % by every engine setting at 4K-4M,
//! reads and writes, and by the fio command headroom records; tests that
//! complete no I/O; a disk filling up mid-test. Needs root; skips with a reason otherwise.

use headroom_lab::blockdev::{BlkioThrottle, LoopDevice, Mount};
use headroom_result::ResultDoc;
use std::path::Path;
use std::process::{Command, Output};
mod support;
use support::{doc, headroom_bin, stderr};

fn disk(args: &[&str]) -> Output {
    Command::new(headroom_bin()).arg("disk").args(args).output().expect("run headroom")
}

const WRITE: &[&str] = &["--rw", "randwrite", "--time", "300ms", "--ramp", "0s", "--size", "8M", "--json"];

fn with(dev: &LoopDevice, extra: &[&str]) -> Vec<String> {
    let mut v = vec![dev.path.to_string_lossy().to_string()];
    v.extend(WRITE.iter().map(|s| s.to_string()));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run(args: &[String]) -> Output {
    disk(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn a_blank_block_device_needs_destructive_to_be_written() {
    headroom_lab::require_root!();
    let _machine = headroom_lab::hold_machine();
    let dev = LoopDevice::new(32 << 20).unwrap();
    let o = run(&with(&dev, &[]));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("block device") && stderr(&o).contains("--destructive"), "{}", stderr(&o));
    let d = doc(&run(&with(&dev, &["--destructive"])));
    assert!(d.probes[0].summary.ops.unwrap() > 0);
    // Reads need no flag at all.
    let p = dev.path.to_string_lossy().to_string();
    let d = doc(&disk(&[&p, "--rw", "randread", "--time", "300ms", "--ramp", "0s", "--json"]));
    assert!(d.probes[0].summary.ops.unwrap() > 0);
}

#[test]
fn a_device_with_ext4_or_gpt_is_refused_even_with_destructive() {
    headroom_lab::require_root!();
    for kind in ["ext4", "gpt", "xfs"] {
        let dev = LoopDevice::new(300 << 20).unwrap();
        match kind {
            "gpt" => {
                if !headroom_lab::has_program("sfdisk") {
                    eprintln!("SKIPPED gpt case: sfdisk is not installed (run scripts/install-deps.sh)");
                    continue;
                }
                dev.write_gpt().unwrap()
            }
            fs => {
                if !headroom_lab::has_program(&format!("mkfs.{fs}")) {
                    eprintln!("SKIPPED {fs} case: mkfs.{fs} is not installed (run scripts/install-deps.sh)");
                    continue;
                }
                dev.mkfs(fs).unwrap()
            }
        }
        let o = run(&with(&dev, &["--destructive"]));
        assert_eq!(o.status.code(), Some(2), "{kind}: {}", stderr(&o));
        let err = stderr(&o);
        let named = match kind {
            "ext4" => "ext4",
            "gpt" => "gpt",
            _ => "xfs",
        };
        assert!(err.contains(named) && err.contains("--force"), "{kind}: {err}");
        // The signature is still there: nothing was written.
        let backing = std::fs::File::open(&dev.backing).unwrap();
        assert!(!headroom_disk::probe_signatures(&backing).unwrap().is_empty(), "{kind} damaged");
        // --force overrides (the test owns this device).
        let d = doc(&run(&with(&dev, &["--destructive", "--force"])));
        assert!(d.probes[0].summary.ops.unwrap() > 0, "{kind}");
    }
}

/// The throttle for one case and what it makes certain. 4K: an IOPS throttle
/// (2000/s) and the IOPS headroom reports, because a bandwidth throttle at 4K
/// (12,800 IOPS at 50 MiB/s) may be out of the engine's reach on a busy
/// 2-core VM, so a shortfall would be the CPU and not the measurement.
/// Larger blocks: a bandwidth throttle and bytes/s, at a rate that completes
/// at least 100 I/Os per second of the window, so one I/O more or less at
/// either edge of the window is under 1 %. Queue depth 32 keeps tens of
/// milliseconds of work queued at the throttle: at QD4 a worker descheduled
/// for a few ms on a loaded machine (load 11 on 2 cores) left the throttle
/// idle and 4K/64K measured 3 % under it, the engine starved rather than the
/// measurement wrong.
struct Case {
    rw: &'static str,
    bs: &'static str,
    bytes: u64,
}

const CASES: [Case; 10] = {
    const fn c(rw: &'static str, bs: &'static str, bytes: u64) -> Case {
        Case { rw, bs, bytes }
    }
    [
        c("read", "4k", 4096),
        c("write", "4k", 4096),
        c("read", "64k", 64 << 10),
        c("write", "64k", 64 << 10),
        c("read", "512k", 512 << 10),
        c("write", "512k", 512 << 10),
        c("read", "1M", 1 << 20),
        c("write", "1M", 1 << 20),
        c("read", "4M", 4 << 20),
        c("write", "4M", 4 << 20),
    ]
};

const IOPS_4K: u64 = 2000;

impl Case {
    /// (throttle file, limit): the ground truth this case is measured against.
    fn limit(&self) -> (&'static str, u64) {
        let file = |kind| match (self.rw, kind) {
            ("read", "iops") => "blkio.throttle.read_iops_device",
            ("read", _) => "blkio.throttle.read_bps_device",
            (_, "iops") => "blkio.throttle.write_iops_device",
            _ => "blkio.throttle.write_bps_device",
        };
        if self.bytes == 4096 {
            (file("iops"), IOPS_4K)
        } else {
            (file("bps"), (50u64 << 20).max(100 * self.bytes))
        }
    }
}

/// Attempts per case. The machine is shared (load averages of 10-25 on 2
/// cores were seen while these ran): a worker descheduled for long enough
/// leaves the throttle idle, and a loaded host can starve the loop device's
/// own thread, so a single run missed by up to 16 % with one sample showing
/// the dip. A measurement error repeats (the double charge halved every run);
/// starvation does not, so a case passes if one of three runs is within 3 %.
const ATTEMPTS: usize = 3;

/// A loop device over memory, so the device is always faster than its
/// throttle and the throttle alone sets the rate (a loop device over the
/// host's virtio disk fell below 400 MiB/s while other work ran).
fn memory_loop_device(size: u64) -> Option<LoopDevice> {
    if !Path::new("/dev/shm").is_dir() {
        eprintln!("SKIPPED: no /dev/shm to back a loop device of memory speed");
        return None;
    }
    Some(LoopDevice::new_in(Path::new("/dev/shm"), size).unwrap())
}

/// Runs every case with `engine_args` on a throttled loop device and checks
/// headroom measures each throttle within 3 %; reports every miss at once.
fn measures_every_throttle(engine_args: &[&str]) {
    headroom_lab::require_blkio!();
    let _machine = headroom_lab::hold_machine();
    let Some(dev) = memory_loop_device(256 << 20) else { return };
    let p = dev.path.to_string_lossy().to_string();
    let mut misses = Vec::new();
    for case in &CASES {
        let (file, limit) = case.limit();
        let mut tries = Vec::new();
        let mut starved = 0;
        for _ in 0..ATTEMPTS {
            match measure_case(&dev, &p, case, engine_args) {
                Ok(()) => {
                    tries.clear();
                    break;
                }
                Err(Miss { text, starved: was_starved }) => {
                    starved += usize::from(was_starved);
                    tries.push(text);
                }
            }
        }
        if !tries.is_empty() && starved == tries.len() {
            eprintln!(
                "SKIPPED {} {} {engine_args:?}: every attempt ran on a starved machine (the premise, a device \
                 faster than its throttle, did not hold): {}",
                case.rw,
                case.bs,
                tries.join("; ")
            );
        } else if !tries.is_empty() {
            misses.push(format!("{} {} ({file} {limit}): {}", case.rw, case.bs, tries.join("; ")));
        }
    }
    assert!(misses.is_empty(), "{engine_args:?}:\n{}", misses.join("\n"));
}

/// A run that missed its throttle by more than 3 %.
struct Miss {
    text: String,
    /// Other tasks waited for a CPU during at least [`STARVED_PRESSURE`] of the run.
    starved: bool,
}

/// CPU pressure (some task waiting for a CPU) above which a run counts as
/// starved. Processes outside the suite (a build, another user) are not
/// kept out by the machine lock; at load 10 on 2 cores the pressure was 98 %
/// and the loop device's thread could not keep 4M reads at 400 MiB/s (the
/// first second of each run at 292 MB/s). A run alone on the machine keeps
/// it far lower: this test's threads mostly wait for the throttle.
const STARVED_PRESSURE: f64 = 0.25;

/// One run of `case`; Err describes a miss.
fn measure_case(dev: &LoopDevice, p: &str, case: &Case, engine_args: &[&str]) -> Result<(), Miss> {
    let (file, limit) = case.limit();
    let throttle = BlkioThrottle::new(&dev.major_minor(), None, None, None, None).unwrap();
    throttle.set(file, &dev.major_minor(), limit).unwrap();
    let mut args = vec!["disk", p, "--rw", case.rw, "--bs", case.bs, "--qd", "32", "--time", "2s", "--ramp", "500ms"];
    args.extend(["--destructive", "--json"]);
    args.extend(engine_args);
    let pressure = headroom_lab::CpuPressure::start();
    let d = doc(&throttle.command(headroom_bin(), &args).output().unwrap());
    let stalled = pressure.map_or(0.0, |p| p.stalled_fraction());
    let probe = &d.probes[0];
    let measured = if case.bytes == 4096 { probe.summary.iops.unwrap_or(0.0) } else { probe.summary.bytes_per_sec };
    let error = (measured - limit as f64) / limit as f64;
    eprintln!("{engine_args:?} {} {}: {measured:.1} against {limit} ({:+.2} %)", case.rw, case.bs, error * 100.0);
    if error.abs() > 0.03 {
        let samples: Vec<f64> = probe.samples.iter().map(|s| s.bytes_per_sec).collect();
        return Err(Miss {
            text: format!(
                "measured {measured:.1}, {:+.1} %, samples {samples:.0?}, cpu pressure {:.0} %",
                error * 100.0,
                stalled * 100.0
            ),
            starved: stalled >= STARVED_PRESSURE,
        });
    }
    Ok(())
}

#[test]
fn a_throttled_device_is_measured_at_its_true_rate_with_io_uring() {
    measures_every_throttle(&["--engine", "io_uring"]);
}

#[test]
fn a_throttled_device_is_measured_at_its_true_rate_with_registered_buffers() {
    measures_every_throttle(&["--engine", "io_uring", "--fixedbufs"]);
}

#[test]
fn a_throttled_device_is_measured_at_its_true_rate_with_psync() {
    measures_every_throttle(&["--engine", "psync"]);
}

/// The fio command headroom records, run on the same throttled device, gives
/// the same figure: 1M reads (the size blk-throttle used to charge twice) in
/// the default mode, 4M writes with registered buffers.
#[test]
fn the_recorded_fio_command_measures_what_headroom_measured() {
    headroom_lab::require_blkio!();
    headroom_lab::require_program!("fio");
    let _machine = headroom_lab::hold_machine();
    let Some(dev) = memory_loop_device(256 << 20) else { return };
    let p = dev.path.to_string_lossy().to_string();
    for (rw, bs, extra, file) in [
        ("read", "1M", None, "blkio.throttle.read_bps_device"),
        ("write", "4M", Some("--fixedbufs"), "blkio.throttle.write_bps_device"),
    ] {
        let limit = 100u64 << 20;
        let throttle = BlkioThrottle::new(&dev.major_minor(), None, None, None, None).unwrap();
        throttle.set(file, &dev.major_minor(), limit).unwrap();
        let mut args = vec![
            "disk",
            &p,
            "--rw",
            rw,
            "--bs",
            bs,
            "--qd",
            "4",
            "--engine",
            "io_uring",
            "--time",
            "3s",
            "--ramp",
            "1s",
            "--destructive",
            "--json",
        ];
        args.extend(extra);
        let pressure = headroom_lab::CpuPressure::start();
        let d = doc(&throttle.command(headroom_bin(), &args).output().unwrap());
        let ours = d.probes[0].summary.bytes_per_sec;
        let headroom_result::ProbeSpec::Disk(spec) = &d.probes[0].spec else { panic!("not a disk probe") };
        assert_eq!(spec.fixedbufs, extra.is_some());
        let fio_line = spec.fio_equivalent.clone().expect("fio_equivalent recorded");
        assert!(fio_line.contains("--force_async=1"), "{bs} I/O is issued async: {fio_line}");
        let out =
            throttle.command(Path::new("sh"), &["-c", &format!("{fio_line} --output-format=json")]).output().unwrap();
        assert!(out.status.success(), "{fio_line}: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("fio's JSON");
        let fio = report["jobs"][0][rw]["bw_bytes"].as_f64().expect("bw_bytes");
        let ratio = ours / fio;
        let stalled = pressure.map_or(0.0, |p| p.stalled_fraction());
        eprintln!(
            "{rw} {bs} {extra:?}: headroom {ours:.0} B/s, fio {fio:.0} B/s, throttle {limit}: ratio {ratio:.3}, \
             cpu pressure {:.0} %",
            stalled * 100.0
        );
        let missed = (ratio - 1.0).abs() > 0.03 || (fio - limit as f64).abs() / limit as f64 > 0.03;
        if missed && stalled >= STARVED_PRESSURE {
            eprintln!(
                "SKIPPED {rw} {bs}: the machine was starved (see STARVED_PRESSURE), the figures above prove nothing"
            );
            continue;
        }
        assert!((ratio - 1.0).abs() <= 0.03, "{rw} {bs}: headroom {ours:.0} B/s, `{fio_line}` {fio:.0} B/s");
        assert!((fio - limit as f64).abs() / limit as f64 <= 0.03, "fio {fio:.0} B/s against a throttle of {limit}");
    }
}

/// A test during which no I/O completes is not a result: the probe carries
/// `no_io_completed` and the table says so instead of printing zeros.
#[test]
fn a_test_that_completes_no_io_says_so_instead_of_printing_zeros() {
    headroom_lab::require_blkio!();
    let _machine = headroom_lab::hold_machine();
    let dev = LoopDevice::new(64 << 20).unwrap();
    // 1 MiB/s: the first 1 MiB read completes after ~1 s, the test measures 300 ms.
    let throttle = BlkioThrottle::new(&dev.major_minor(), Some(1 << 20), None, None, None).unwrap();
    let p = dev.path.to_string_lossy().to_string();
    let args = ["disk", &p, "--rw", "read", "--bs", "1M", "--time", "300ms", "--ramp", "0s"];
    let d = doc(&throttle.command(headroom_bin(), &[&args[..], &["--json"]].concat()).output().unwrap());
    assert_eq!(d.probes[0].summary.ops, Some(0), "the throttle let an I/O through: {:?}", d.probes[0].summary);
    let w = d.probes[0].warnings.iter().find(|w| w.code == "no_io_completed").expect("no_io_completed warning");
    assert!(w.message.contains("--time"), "{}", w.message);
    let out = throttle.command(headroom_bin(), &args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().find(|l| l.starts_with("SEQ1M Q1T1 read")).expect("a row for the test");
    assert!(row.contains("no I/O completed") && !row.contains("0.0"), "{row}");
    assert!(text.contains("warning [no_io_completed]"), "{text}");
}

#[test]
fn a_throttled_device_is_measured_at_its_true_iops() {
    headroom_lab::require_blkio!();
    let _machine = headroom_lab::hold_machine();
    let dev = LoopDevice::new(64 << 20).unwrap();
    let iops = 500u64;
    let throttle = BlkioThrottle::new(&dev.major_minor(), None, None, None, Some(iops)).unwrap();
    let p = dev.path.to_string_lossy().to_string();
    let out = throttle
        .command(
            headroom_bin(),
            &[
                "disk",
                &p,
                "--rw",
                "randwrite",
                "--qd",
                "8",
                "--time",
                "2s",
                "--ramp",
                "500ms",
                "--destructive",
                "--json",
            ],
        )
        .output()
        .unwrap();
    let d = doc(&out);
    let measured = d.probes[0].summary.iops.unwrap();
    assert!((measured - iops as f64).abs() / iops as f64 <= 0.05, "measured {measured:.1} IOPS, throttled to {iops}");
}

#[test]
fn a_disk_filling_up_mid_test_ends_with_a_clear_error_and_no_test_file() {
    headroom_lab::require_blkio!();
    let _machine = headroom_lab::hold_machine();
    // A small ext4 whose writes are throttled to 4 MB/s: headroom's sequential
    // writes fill a 32 MiB test file for 8 s, while a filler takes the free space.
    let dev = LoopDevice::new(128 << 20).unwrap();
    dev.mkfs("ext4").unwrap();
    let m = Mount::device(&dev.path, "ext4").unwrap();
    let throttle = BlkioThrottle::new(&dev.major_minor(), None, Some(4 << 20), None, None).unwrap();
    let dir = m.path().to_string_lossy().to_string();
    let child = throttle
        .command(
            headroom_bin(),
            &["disk", &dir, "--rw", "write", "--size", "32M", "--time", "20s", "--ramp", "0s", "--json"],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let filler = m.path().join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0x5au8; 1 << 20];
        while f.write_all(&chunk).is_ok() {}
    }
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("disk is full"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The figures measured until then are kept.
    let d = ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("results so far");
    assert!(d.probes[0].summary.bytes.unwrap() > 0);
    assert!(d.probes[0].warnings.iter().any(|w| w.code == "io_error"));
    let left: Vec<_> = std::fs::read_dir(m.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("headroom-disk-"))
        .collect();
    assert!(left.is_empty(), "test file left behind");
}

/// Writes far faster than reads held by a read throttle are the throttle's
/// doing, not a write-back cache's: the reads record the limit they ran at,
/// and no write is called a cache's (the rule itself: headroom-analysis's
/// write_cache tests, and the verdict's).
#[test]
fn writes_past_a_read_throttle_are_not_called_a_caches() {
    headroom_lab::require_blkio!();
    let _machine = headroom_lab::hold_machine();
    let Some(dev) = memory_loop_device(64 << 20) else { return };
    let throttle = BlkioThrottle::new(&dev.major_minor(), None, None, None, None).unwrap();
    throttle.set("blkio.throttle.read_bps_device", &dev.major_minor(), 40_000_000).unwrap();
    let p = dev.path.to_string_lossy().to_string();
    let args = ["disk", &p, "--preset", "quick", "--time", "1s", "--size", "32M", "--destructive", "--json"];
    let d = doc(&throttle.command(headroom_bin(), &args).output().unwrap());
    let rate = |name: &str| d.probes.iter().find(|p| p.name == name).expect(name).summary.bytes_per_sec;
    let (reads, writes) = (rate("SEQ1M Q8T1 read"), rate("SEQ1M Q8T1 write"));
    assert!(writes > 3.0 * reads, "ground truth: only the reads are throttled ({reads} against {writes})");
    assert!(d.probes.iter().any(|p| p.details.contains_key("io_limit")), "the reads record their limit");
    let called = d.probes.iter().flat_map(|p| &p.warnings).filter(|w| w.code == "writes_outran_reads");
    assert_eq!(called.count(), 0, "{:?}", d.probes.iter().map(|p| &p.warnings).collect::<Vec<_>>());
}

#[test]
fn sustained_writes_report_the_cliff_when_the_device_slows_down() {
    headroom_lab::require_blkio!();
    let _machine = headroom_lab::hold_machine();
    // A fast device that turns slow after 3 s, like an SLC cache running full,
    // written with the preset's own 1M blocks (once reported at half the rate).
    let dev = LoopDevice::new(512 << 20).unwrap();
    let throttle = BlkioThrottle::new(&dev.major_minor(), None, None, None, None).unwrap();
    let p = dev.path.to_string_lossy().to_string();
    let child = throttle
        .command(headroom_bin(), &["disk", &p, "--preset", "sustained", "--time", "8s", "--destructive", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3200));
    let slow = 20u64 << 20;
    throttle.set("blkio.throttle.write_bps_device", &dev.major_minor(), slow).unwrap();
    let out = child.wait_with_output().unwrap();
    let d = doc(&out);
    let probe = &d.probes[0];
    assert_eq!(probe.name, "SEQ1M Q8T1 write");
    let cliff = probe.warnings.iter().find(|w| w.code == "write_cliff");
    assert!(cliff.is_some(), "no write_cliff warning; samples: {:?}", probe.samples);
    let details = &probe.details["write_cliff"];
    let at = details["at_s"].as_f64().unwrap();
    assert!((2.0..=5.0).contains(&at), "cliff at {at} s, throttled at ~3 s");
    // The median of one-second samples after the cliff: 20 I/Os of 1 MiB per
    // second, so one I/O more or less in a second is 5 %.
    let after = details["bytes_per_sec_after"].as_f64().unwrap();
    let error = (after - slow as f64) / slow as f64;
    assert!(error.abs() <= 0.05, "rate after the cliff {after:.0} B/s, throttled to {slow} ({:+.1} %)", error * 100.0);
}

#[test]
fn space_freed_a_moment_after_the_start_is_waited_for() {
    headroom_lab::require_root!();
    // A run right after another: the last test file's blocks are still being
    // released when the next run checks the free space (ext4 and XFS free
    // them a moment after the unlink). Here a filler file stands for them
    // and goes 300 ms after headroom starts.
    let m = Mount::tmpfs(96 << 20).unwrap();
    let filler = m.path().join("still-being-freed");
    std::fs::write(&filler, vec![1u8; 64 << 20]).unwrap();
    let child = Command::new(headroom_bin())
        .args(["disk", m.path().to_str().unwrap(), "--rw", "read", "--size", "40M", "--time", "200ms"])
        .args(["--ramp", "0s", "--direct", "auto", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::remove_file(&filler).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "refused for space freed a moment later: {}", stderr(&out));
}

/// Registered buffers count against the locked-memory limit for a process
/// without CAP_IPC_LOCK. With a limit below what a 4K QD32 test registers
/// (128 KiB), the default `--fixedbufs auto` runs on ordinary buffers and
/// records that; `--fixedbufs` (on) fails and says which limit to raise.
#[test]
fn registered_buffers_the_memlock_limit_refuses_fall_back_under_auto_and_are_explained_under_on() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("setpriv");
    let Some(dev) = memory_loop_device(64 << 20) else { return };
    let p = dev.path.to_string_lossy().to_string();
    let capped = |fixedbufs: &str| {
        let test = format!(
            "ulimit -l 96 && exec {} disk {p} --rw randread --bs 4k --qd 32 --time 300ms --ramp 0s --direct on \
             --engine io_uring --fixedbufs={fixedbufs} --json",
            headroom_bin().display()
        );
        Command::new("setpriv")
            .args(["--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock", "sh", "-c", &test])
            .output()
            .expect("run setpriv")
    };
    let d = doc(&capped("auto"));
    let headroom_result::ProbeSpec::Disk(spec) = &d.probes[0].spec else { panic!("not a disk probe") };
    assert!(!spec.fixedbufs, "auto kept registered buffers the limit refuses");
    assert!(d.probes[0].summary.ops.unwrap_or(0) > 0, "{:?}", d.probes[0].summary);
    let fio = spec.fio_equivalent.as_deref().expect("fio_equivalent");
    assert!(!fio.contains("fixedbufs"), "{fio}");

    let refused = capped("on");
    assert!(!refused.status.success(), "registering 128 KiB under a 96 KiB limit succeeded");
    assert!(stderr(&refused).contains("ulimit -l"), "{}", stderr(&refused));

    // Without the limit, auto registers a 4K test's buffers.
    let out = disk(&[&p, "--rw", "randread", "--bs", "4k", "--qd", "32", "--time", "300ms", "--ramp", "0s", "--json"]);
    let d = doc(&out);
    let headroom_result::ProbeSpec::Disk(spec) = &d.probes[0].spec else { panic!("not a disk probe") };
    assert!(spec.fixedbufs, "a 4K test ran on ordinary buffers by default");
    assert!(spec.fio_equivalent.as_deref().unwrap_or("").contains("--fixedbufs=1"));
}
