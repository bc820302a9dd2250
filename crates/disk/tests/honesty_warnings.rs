//! Warnings from real runs. `faster_than_ceiling`: a real 1M read from
//! memory judged against the bus ceilings headroom_sys finds for the fixture
//! NAS's disks (NVMe on PCIe 3.0 x4, SATA at 3 Gb/s; its own tests check those
//! figures). This machine has no NVMe or SATA disk, so the tree stands in for
//! one; the read and the warning logic are the real ones.
//! `queue_depth_capped`: a psync Q32T16 run starts 128 threads, not 512.
//! Both hold the lab machine: the first asserts a speed, the second loads
//! the CPUs with 128 threads (and once made the first flake beside it).

use headroom_disk::{
    honesty_warnings, run_test, test_def, BusCeiling, DirectMode, EngineChoice, Pattern, PreparedTarget, RunSettings,
    Rw, Storage, TargetOptions, PSYNC_MAX_THREADS,
};
use headroom_sys::{block_devices, SysRoot};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The bus ceiling of a disk of the fixture NAS, as `headroom disk` builds it.
fn fixture_ceiling(disk: &str) -> BusCeiling {
    let root = SysRoot::at(concat!(env!("CARGO_MANIFEST_DIR"), "/../sys/tests/fixtures/nas"));
    let d = block_devices(&root).into_iter().find(|d| d.name == disk).expect("fixture disk");
    BusCeiling {
        name: d.bus.expect("fixture disk bus"),
        bytes_per_sec: d.ceiling_bytes_per_sec.expect("fixture disk ceiling"),
        source: format!("/sys/block/{disk}"),
    }
}

/// A laid-out 64 MiB test file in tmpfs (memory), or None (with the reason
/// printed) where there is no /dev/shm.
fn memory_target() -> Option<(tempfile::TempDir, Storage)> {
    if !Path::new("/dev/shm").is_dir() {
        eprintln!("SKIPPED: no /dev/shm (tmpfs) to read from memory");
        return None;
    }
    let dir = tempfile::tempdir_in("/dev/shm").expect("directory in /dev/shm");
    let opts = TargetOptions { size: Some(64 << 20), default_size: 64 << 20, writes: false, ..Default::default() };
    let target = PreparedTarget::prepare(dir.path(), &opts).expect("test file in /dev/shm");
    target.layout(&AtomicBool::new(false), |_, _| {}).expect("layout");
    Some((dir, Storage::Local(target)))
}

fn run(target: &Storage, engine: EngineChoice, def: &headroom_disk::TestDef) -> headroom_disk::TestOutcome {
    let settings = RunSettings {
        engine,
        direct: DirectMode::Auto,
        pattern: Pattern::Random,
        fixedbufs: headroom_disk::FixedBufs::Off,
    };
    run_test(target, def, settings, &AtomicBool::new(false), &mut |_| {}).expect("test run")
}

#[test]
fn a_read_faster_than_the_bus_is_flagged_and_one_below_it_is_not() {
    let _machine = headroom_lab::hold_machine();
    let Some((_dir, target)) = memory_target() else { return };
    let def = test_def(Rw::Read, 1 << 20, 4, 1, Duration::from_millis(700), Duration::from_millis(100));
    let outcome = run(&target, EngineChoice::Auto, &def);
    let read = outcome.summary.bytes_per_sec;
    // tmpfs is memory: 1M reads from it run at GB/s, far above a 3 Gb/s SATA link.
    assert!(read > 300e6, "reading from tmpfs gave only {read} B/s");

    let flagged = |bus: &BusCeiling| {
        honesty_warnings(&outcome, &target, Some(bus)).iter().any(|w| w.code == "faster_than_ceiling")
    };
    let sata_3g = fixture_ceiling("sda");
    assert!(flagged(&sata_3g), "{read} B/s over a {} B/s bus was not flagged", sata_3g.bytes_per_sec);
    let warning = honesty_warnings(&outcome, &target, Some(&sata_3g));
    let text = &warning.iter().find(|w| w.code == "faster_than_ceiling").unwrap().message;
    assert!(text.contains("SATA") && text.contains("cache"), "{text}");

    // A bus faster than what was read: no warning.
    let wide = BusCeiling { bytes_per_sec: read * 2.0, ..fixture_ceiling("nvme0n1") };
    assert!(!flagged(&wide), "{read} B/s under a {} B/s bus was flagged", wide.bytes_per_sec);
}

#[test]
fn psync_caps_its_threads_and_says_so() {
    let _machine = headroom_lab::hold_machine();
    let Some((_dir, target)) = memory_target() else { return };
    let def = test_def(Rw::RandRead, 4096, 32, 16, Duration::from_millis(300), Duration::ZERO);
    let outcome = run(&target, EngineChoice::Psync, &def);
    assert_eq!(outcome.threads, PSYNC_MAX_THREADS);
    assert!(outcome.summary.ops.unwrap_or(0) > 0, "{:?}", outcome.summary);
    let warnings = honesty_warnings(&outcome, &target, None);
    let capped = warnings.iter().find(|w| w.code == "queue_depth_capped").expect("queue_depth_capped warning");
    assert!(capped.message.contains("512") && capped.message.contains("128"), "{}", capped.message);

    // Within the cap: as many threads as jobs x QD, and no warning.
    let def = test_def(Rw::RandRead, 4096, 8, 2, Duration::from_millis(200), Duration::ZERO);
    let outcome = run(&target, EngineChoice::Psync, &def);
    assert_eq!(outcome.threads, 16);
    assert!(honesty_warnings(&outcome, &target, None).iter().all(|w| w.code != "queue_depth_capped"));
}
