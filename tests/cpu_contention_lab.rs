//! `headroom cpu` beside another process that streams memory (issue 33,
//! item 8): its out-of-cache figure carries the cores the other process kept
//! busy (`summary.contention`) and is marked `memory_shared` in the document,
//! the table (`~`) and `report`; a run on a quiet machine is not marked.
//!
//! The load is real: `dd if=/dev/zero of=/dev/null bs=64M` has the kernel
//! clear a 64 MiB buffer, larger than the caches, over and over (one core of
//! memory writes, in dd's system time), while `cpu` measures XXH3 on one
//! core over a 64 MiB buffer: a figure bound by memory bandwidth. The test
//! prints, beside the figure's reading, one taken independently over the
//! whole run (/proc/stat less headroom's CPU time as GNU time reports it).

use headroom_result::{Probe, ProbeSpec, ResultDoc, WarningCode};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
mod support;
use support::{headroom_plain, stderr};

/// One kernel that streams memory, one core (the other is the loader's).
const CPU_ARGS: &[&str] = &["cpu", "--kernels", "xxh3-64", "--threads", "1", "--size", "64M", "--time", "500ms"];

/// Quiet runs tried before a machine busy with others' work is given up on.
const QUIET_TRIES: usize = 5;

/// A process streaming memory until dropped.
struct MemoryLoader(Child);

impl MemoryLoader {
    fn start() -> MemoryLoader {
        let child = Command::new("dd")
            .args(["if=/dev/zero", "of=/dev/null", "bs=64M"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dd (coreutils) runs");
        // Past its 64 MiB allocation and first page faults.
        std::thread::sleep(Duration::from_millis(300));
        MemoryLoader(child)
    }
}

impl Drop for MemoryLoader {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cpu_json() -> ResultDoc {
    cpu_json_with_others().0
}

/// The document, and for the record an independent reading of the cores
/// others kept busy over the whole run: the machine's busy time from
/// /proc/stat less headroom's own CPU time as GNU time reports it.
fn cpu_json_with_others() -> (ResultDoc, Option<f64>) {
    let times = tempfile::NamedTempFile::new().unwrap();
    let before = machine_busy_and_total();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%U %S %e", "-o"])
        .arg(times.path())
        .arg(support::headroom_bin())
        .args(CPU_ARGS)
        .args(["--link", "10gbe", "--json"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let after = machine_busy_and_total();
    assert!(out.status.success(), "headroom cpu failed: {}", stderr(&out));
    let doc = ResultDoc::from_json(&String::from_utf8(out.stdout).unwrap()).expect("a result document");
    let own: Vec<f64> = std::fs::read_to_string(times.path())
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let others = match (before, after, own.as_slice()) {
        (Some((b0, t0)), Some((b1, t1)), [user, sys, wall]) if t1 > t0 && *wall > 0.0 => {
            let cores = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
            Some((b1 - b0) / (t1 - t0) * cores - (user + sys) / wall)
        }
        _ => None,
    };
    (doc, others)
}

/// Busy and total ticks of the machine (the `cpu` line of /proc/stat; idle and iowait are not busy, steal is left out).
fn machine_busy_and_total() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<f64> =
        stat.lines().next()?.split_whitespace().skip(1).take(8).filter_map(|x| x.parse().ok()).collect();
    let total: f64 = ticks.iter().sum();
    Some((total - ticks.get(3)? - ticks.get(4)? - ticks.get(7)?, total))
}

/// The out-of-cache figure and the cache-resident one.
fn figures(doc: &ResultDoc) -> (&Probe, &Probe) {
    let resident = |p: &&Probe| matches!(&p.spec, ProbeSpec::Cpu(c) if c.cache_resident == Some(true));
    let cache = doc.probes.iter().find(resident).expect("a cache-resident figure");
    let memory = doc.probes.iter().find(|p| !resident(p)).expect("an out-of-cache figure");
    (memory, cache)
}

fn shared(p: &Probe) -> bool {
    p.warnings.iter().any(|w| w.code == WarningCode::MemoryShared)
}

#[test]
fn a_memory_stream_beside_the_figure_marks_it_with_the_cores_it_kept_busy() {
    let _machine = headroom_lab::hold_machine();
    let loader = MemoryLoader::start();
    let dd = loader.0.id();
    let (doc, whole_run) = cpu_json_with_others();
    let (memory, cache) = figures(&doc);
    let c = memory.summary.contention.as_ref().expect("the memory figure records its contention");
    assert!(c.other_busy_cores > 0.5, "dd streamed all along: {c:?}");
    // On a machine shared with other builds dd may not be among the three
    // busiest others, but someone busy must be named.
    assert!(c.busiest.first().is_some_and(|p| p.percent > 0.0), "the busiest others named: {c:?}");
    let dd_named = c.busiest.iter().find(|p| p.pid == dd && p.name == "dd");
    let w = memory.warnings.iter().find(|w| w.code == WarningCode::MemoryShared).expect("memory_shared warning");
    assert!(
        w.message.starts_with(&format!("measured while other processes kept {:.1} cores busy", c.other_busy_cores))
            && w.message.ends_with("memory bandwidth is shared; rerun on a quiet machine"),
        "{}",
        w.message
    );
    assert!(cache.summary.contention.is_none() && !shared(cache), "a cache-resident figure is not marked");

    // The table marks the figure and says why; `report` of the document too.
    let table = headroom_plain().args(CPU_ARGS).args(["--link", "10gbe"]).output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success(), "{}", stderr(&table));
    let row = text.lines().find(|l| l.trim_start().starts_with("XXH3-64")).expect("the XXH3 row");
    // `~`, or `*` when other processes also took the worker's own CPU.
    assert!(row.contains("Gb/s~") || row.contains("Gb/s*"), "{text}");
    assert!(text.contains("~ 1 of 2 figures were measured while other processes kept"), "{text}");
    drop(loader);

    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("cpu.json");
    std::fs::write(&saved, doc.to_json()).unwrap();
    let report = headroom_plain().arg("report").arg(&saved).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(report.status.success(), "{}", stderr(&report));
    assert!(text.contains(&format!("~ {}: measured while other processes kept", memory.id)), "{text}");
    let loaded = memory.summary.bytes_per_sec;

    // For the record: what the stream cost the figure (printed, not asserted).
    let quiet = cpu_json();
    let alone = figures(&quiet).0.summary.bytes_per_sec;
    let quiet_others = figures(&quiet).0.summary.contention.as_ref().map_or(f64::NAN, |c| c.other_busy_cores);
    println!(
        "xxh3-64 on 64 MiB, one core: {:.0} MB/s beside dd ({:.2} other cores busy, {:.2} by /proc/stat and \
         GNU time over the whole run; dd {}), {:.0} MB/s without ({quiet_others:.2} other cores busy): {:.2}x",
        loaded / 1e6,
        c.other_busy_cores,
        whole_run.unwrap_or(f64::NAN),
        dd_named.map_or("not among the busiest".to_string(), |p| format!("{:.0}% of a core", p.percent)),
        alone / 1e6,
        loaded / alone
    );
}

#[test]
fn a_quiet_machine_leaves_the_figure_unmarked() {
    let _machine = headroom_lab::hold_machine();
    let mut busy = Vec::new();
    for _ in 0..QUIET_TRIES {
        let doc = cpu_json();
        let (memory, _) = figures(&doc);
        let c = memory.summary.contention.clone().expect("recorded on Linux whatever its value");
        assert_eq!(shared(memory), c.other_busy_cores > 0.5, "the mark follows the figure: {c:?}");
        if !shared(memory) {
            println!("quiet: {:.2} other cores busy over {:.2} s", c.other_busy_cores, c.window_s);
            return;
        }
        // Builds of other checkouts share this machine; a mark must name
        // who was busy, or it is the detector's own error.
        let Some(named) = c.busiest.first().filter(|p| p.percent >= 10.0) else {
            panic!("marked, yet no other process was busy: {c:?}");
        };
        busy.push(format!("{:.1} cores ({} {:.0}%)", c.other_busy_cores, named.name, named.percent));
        std::thread::sleep(Duration::from_secs(2));
    }
    println!("SKIPPED the machine was never quiet: other processes kept {}", busy.join(", "));
}
