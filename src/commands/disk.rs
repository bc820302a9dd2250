//! `headroom disk PATH`: storage tests (presets or one custom test) on a
//! directory, block device or existing file. Parses and validates flags into
//! test definitions, runs them on headroom-disk with a progress bar, adds the
//! write-cliff check (headroom-analysis) and prints a table or a
//! `headroom.result/v1` document. The measuring is all in crates/disk.

use crate::output::{Outcome, Output};
use crate::progress::Progress;
use anyhow::bail;
use headroom_analysis::ceilings::bus_ceiling;
use headroom_analysis::cliff::detect_write_cliff;
use headroom_disk::preset::{test_def, Preset, SWEEP_BLOCK_SIZES, SWEEP_QUEUE_DEPTHS};
use headroom_disk::probe::{honesty_warnings, to_probe, BusCeiling};
use headroom_disk::run::{check_test, run_test, RunSettings, TestOutcome, Tick};
use headroom_disk::target::{Target, TargetKind, TargetOptions};
use headroom_disk::{DirectMode, DiskError, EngineChoice, Pattern, Rw, SyncMode, TestDef};
use headroom_result::{Ceiling, Probe, ResultDoc, Warning};
use headroom_units::{DurationArg, Size};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom disk /mnt/nas                     the quick preset (~30 s): SEQ1M Q8T1, RND4K Q32T1, RND4K Q1T1
  headroom disk . --preset cdm               CrystalDiskMark's default set
  headroom disk /data --preset sweep         queue depth x block size matrix
  headroom disk /mnt/nfs --preset sync       buffered vs O_DSYNC vs fsync writes
  headroom disk /mnt/ssd --preset sustained --time 5m     find the write cliff
  headroom disk /tmp --rw randread --bs 4k --qd 32 --time 10s --json
  headroom disk /dev/nvme0n1 --rw read --bs 1M --qd 8     read-only: no flag needed
  headroom disk /dev/sdx --rw write --destructive         overwrites /dev/sdx

Sizes use dd's convention: 4k = 4096, 1M = 1048576, 1MB = 1000000.
Every result records the equivalent fio command line (--json: spec.fio_equivalent).")]
pub struct DiskArgs {
    /// A directory (headroom creates, uses and removes its own test file there), or — for
    /// writes only with --destructive — a block device or an existing file
    pub path: PathBuf,
    /// Test set: quick, cdm, nvme, sizes, sweep, sync, sustained [default: quick]
    #[arg(long, value_parser = ["quick", "cdm", "nvme", "sizes", "sweep", "sync", "sustained"])]
    pub preset: Option<String>,
    /// One custom test instead of a preset: the access pattern
    #[arg(long, value_parser = ["read", "write", "randread", "randwrite", "randrw"])]
    pub rw: Option<String>,
    /// Block size per I/O (4k = 4096) [default: 1M for read/write, 4k for random]
    #[arg(long, value_name = "SIZE")]
    pub bs: Option<Size>,
    /// Queue depth: I/Os in flight per job [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub qd: Option<u32>,
    /// Parallel jobs (threads), each at --qd [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    /// Test file size (directory), region of a device or file, or bytes to write (sustained)
    /// [default: 1G]
    #[arg(long, value_name = "SIZE")]
    pub size: Option<Size>,
    /// Measured time per test, warm-up excluded [default: per preset, 3s for quick]
    #[arg(long, value_name = "DURATION")]
    pub time: Option<DurationArg>,
    /// Warm-up per test, excluded from every figure [default: 1s]
    #[arg(long, value_name = "DURATION")]
    pub ramp: Option<DurationArg>,
    /// Length of each per-interval sample (100ms to 10s) [default: 1s]; shorter gives
    /// `compare` more samples of a short test
    #[arg(long, value_name = "DURATION")]
    pub sample_interval: Option<DurationArg>,
    /// Percentage of reads in --rw randrw [default: 70]
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub rwmix: Option<u32>,
    /// O_DIRECT: auto (buffered with a warning where refused), on (or fail), off
    #[arg(long, default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub direct: String,
    /// I/O engine: auto (io_uring where available, else psync), io_uring, psync
    #[arg(long, default_value = "auto", value_parser = ["auto", "io_uring", "psync"])]
    pub engine: String,
    /// io_uring with registered buffers (fio's --fixedbufs): less CPU per I/O than the default
    /// ordinary buffers; recorded in the result and its fio equivalent
    #[arg(long)]
    pub fixedbufs: bool,
    /// Durable writes: none, fsync (after every write), dsync (O_DSYNC)
    #[arg(long, default_value = "none", value_parser = ["none", "fsync", "dsync"])]
    pub sync: String,
    /// Data written: random (incompressible, fresh per write), zero, compressible=PCT
    #[arg(long, default_value = "random", value_name = "PATTERN")]
    pub pattern: String,
    /// Keep the test file afterwards
    #[arg(long)]
    pub keep: bool,
    /// Allow writing to a block device or an existing file (destroys its contents)
    #[arg(long)]
    pub destructive: bool,
    /// With --destructive: write even over a filesystem or partition table signature
    #[arg(long, requires = "destructive")]
    pub force: bool,
}

const DEFAULT_SIZE: u64 = 1 << 30;

/// What to run, resolved from the flags.
struct Plan {
    preset: Option<Preset>,
    tests: Vec<TestDef>,
    settings: RunSettings,
}

fn parse_pattern(s: &str) -> anyhow::Result<Pattern> {
    match s {
        "random" => Ok(Pattern::Random),
        "zero" => Ok(Pattern::Zero),
        _ => {
            let pct = s.strip_prefix("compressible=").and_then(|p| p.trim_end_matches('%').parse::<u8>().ok());
            match pct {
                Some(p) if p <= 100 => Ok(Pattern::Compressible(p)),
                _ => bail!(
                    "--pattern '{s}' is not a pattern; use random, zero or compressible=PCT (e.g. compressible=50)"
                ),
            }
        }
    }
}

fn plan(args: &DiskArgs) -> anyhow::Result<Plan> {
    let settings = RunSettings {
        engine: match args.engine.as_str() {
            "io_uring" => EngineChoice::IoUring,
            "psync" => EngineChoice::Psync,
            _ => EngineChoice::Auto,
        },
        direct: match args.direct.as_str() {
            "on" => DirectMode::On,
            "off" => DirectMode::Off,
            _ => DirectMode::Auto,
        },
        pattern: parse_pattern(&args.pattern)?,
        fixedbufs: args.fixedbufs,
    };
    if args.fixedbufs && settings.engine == EngineChoice::Psync {
        bail!("--fixedbufs registers io_uring buffers and does not apply to --engine psync; drop one of them (e.g. --engine io_uring --fixedbufs)");
    }
    let sync = match args.sync.as_str() {
        "fsync" => SyncMode::Fsync,
        "dsync" => SyncMode::Dsync,
        _ => SyncMode::None,
    };
    if let Some(t) = args.time {
        if t.0 < Duration::from_millis(100) {
            bail!("--time {} is too short to measure; use at least 100ms, e.g. --time 5s", t);
        }
        if t.0 > Duration::from_secs(86_400) {
            bail!("--time {} is too long: at most 24h per test, e.g. --time 5m", t);
        }
    }
    if let Some(r) = args.ramp.filter(|r| r.0 > Duration::from_secs(3600)) {
        bail!("--ramp {} is too long: at most 1h of warm-up, e.g. --ramp 2s", r);
    }
    if args.bs.is_some_and(|b| b.0 == 0) {
        bail!("--bs 0 is not a block size; use e.g. --bs 4k or --bs 1M");
    }
    if args.bs.is_some_and(|b| b.0 > 64 << 20) {
        bail!("--bs {} is larger than the 64M headroom supports; use e.g. --bs 1M", args.bs.unwrap_or(Size(0)).0);
    }
    if args.size.is_some_and(|s| s.0 == 0) {
        bail!("--size 0 leaves nothing to test; use e.g. --size 1G");
    }
    let custom = args.rw.is_some() || args.bs.is_some() || args.qd.is_some() || args.jobs.is_some();
    let preset = match (&args.preset, custom) {
        (Some(p), _) => Some(Preset::parse(p).expect("clap checked the preset name")),
        (None, true) => None,
        (None, false) => Some(Preset::Quick),
    };
    if let Some(p) = preset {
        if p != Preset::Sustained {
            for (flag, given) in [
                ("--rw", args.rw.is_some()),
                ("--bs", args.bs.is_some()),
                ("--qd", args.qd.is_some()),
                ("--jobs", args.jobs.is_some()),
            ] {
                if given {
                    bail!(
                        "{flag} defines a custom test and cannot be combined with --preset {}; drop one of them \
                         (e.g. `headroom disk PATH --rw randread --bs 4k --qd 32`)",
                        p.as_str()
                    );
                }
            }
        } else if args.rw.as_deref().is_some_and(|rw| rw != "write") {
            bail!(
                "--rw {} does not fit --preset sustained, which writes sequentially; drop --rw",
                args.rw.as_deref().unwrap_or("")
            );
        }
    }
    let rw = args.rw.as_deref().map(|s| Rw::parse(s).expect("clap checked --rw"));
    if args.rwmix.is_some() && rw != Some(Rw::RandRw) {
        bail!("--rwmix sets the read share of a mixed test and needs --rw randrw (e.g. --rw randrw --rwmix 70)");
    }
    let ramp_of = |p: Option<Preset>| {
        args.ramp.map(|r| r.0).unwrap_or_else(|| p.map_or(Duration::from_secs(1), Preset::default_ramp))
    };
    let mut tests = match preset {
        Some(p) => {
            let time = args.time.map_or(p.default_time(), |t| t.0);
            let mut tests = p.tests(time, ramp_of(preset));
            if p == Preset::Sustained {
                for t in &mut tests {
                    if let Some(bs) = args.bs {
                        *t = test_def(Rw::Write, bs.0, args.qd.unwrap_or(t.queue_depth), 1, t.time, t.ramp);
                    } else if let Some(qd) = args.qd {
                        *t = test_def(Rw::Write, t.block_size, qd, 1, t.time, t.ramp);
                    }
                    if let Some(size) = args.size {
                        t.max_bytes = Some(size.0);
                        // --size bounds the run; --time (if given) still caps it.
                        t.time = args.time.map_or(Duration::from_secs(3600), |d| d.0);
                    }
                }
            }
            tests
        }
        None => {
            let rw = rw.unwrap_or(Rw::RandRead);
            let bs = args.bs.map_or(if rw.is_random() { 4096 } else { 1 << 20 }, |b| b.0);
            let time = args.time.map_or(Duration::from_secs(5), |t| t.0);
            let mut t = test_def(rw, bs, args.qd.unwrap_or(1), args.jobs.unwrap_or(1), time, ramp_of(None));
            if rw == Rw::RandRw {
                t.rwmix_read = Some(args.rwmix.unwrap_or(70));
            }
            vec![t]
        }
    };
    if let Some(i) = args.sample_interval {
        if i.0 < Duration::from_millis(100) || i.0 > Duration::from_secs(10) {
            bail!("--sample-interval {i} is out of range: 100ms to 10s (example: --sample-interval 250ms)");
        }
        tests.iter_mut().for_each(|t| t.sample_interval = i.0);
    }
    if sync != SyncMode::None {
        if preset == Some(Preset::Sync) {
            bail!("--sync {} cannot be combined with --preset sync, which runs every sync mode", args.sync);
        }
        for t in &mut tests {
            if t.rw.writes() {
                t.sync = sync;
            }
        }
    }
    Ok(Plan { preset, tests, settings })
}

pub fn run(args: &DiskArgs, out: &Output) -> anyhow::Result<Outcome> {
    let plan = plan(args)?;
    let stop = crate::signals::stop_flag();
    let writes = plan.tests.iter().any(|t| t.rw.writes());
    let target = Target::prepare(
        &args.path,
        &TargetOptions {
            size: args.size.map(|s| s.0),
            default_size: DEFAULT_SIZE,
            writes,
            destructive: args.destructive,
            force: args.force,
            keep: args.keep,
        },
    )
    .map_err(user_error)?;
    // Misaligned O_DIRECT block sizes fail before minutes of layout, naming the flag.
    for t in &plan.tests {
        let direct = t.direct.unwrap_or(plan.settings.direct) != DirectMode::Off;
        check_test(&target, t, direct).map_err(user_error)?;
    }

    let mut run_warnings: Vec<Warning> = Vec::new();
    // Sequential-write-only runs (sustained) write the file as they go; everything
    // else reads, so the file is laid out with real data first.
    let only_seq_writes = plan.tests.iter().all(|t| t.rw == Rw::Write);
    if target.needs_layout() && !only_seq_writes {
        let bar = Progress::new(out.progress && !out.json, "laying out", None);
        let size = target.size;
        let laid = target.layout(stop, |done, total| {
            if done % (64 << 20) == 0 || done == total {
                bar.update(
                    Duration::ZERO,
                    &format!("{} of {}", headroom_units::format_size(done), headroom_units::format_size(size)),
                );
            }
        });
        bar.finish();
        if stop.load(Ordering::Relaxed) {
            eprintln!("headroom: stopped while laying out the test file; nothing was measured");
            return Ok(Outcome::Error);
        }
        run_warnings.extend(laid.map_err(user_error)?);
    }
    let bus = bus_of(&target.path);
    let mut outcomes: Vec<TestOutcome> = Vec::new();
    let mut failure: Option<String> = None;
    let mut fallback_warned = false;
    for def in &plan.tests {
        let bar = Progress::new(out.progress && !out.json, &def.name, Some(def.ramp + def.time));
        let mut on_tick = |t: &Tick| {
            let phase = if t.ramping { " (warm-up)" } else { "" };
            bar.update(t.elapsed, &format!("{:.1} MB/s  {:.0} IOPS{phase}", t.bytes_per_sec / 1e6, t.iops));
        };
        let result = run_test(&target, def, plan.settings, stop, &mut on_tick);
        bar.finish();
        match result {
            Ok(outcome) => {
                let want_direct = def.direct.unwrap_or(plan.settings.direct) != DirectMode::Off;
                if want_direct && !outcome.direct && !fallback_warned && !out.json {
                    eprintln!(
                        "headroom: warning: {} refuses O_DIRECT; testing buffered I/O (the page cache may answer)",
                        target.path.display()
                    );
                    fallback_warned = true;
                }
                let stopped = outcome.stopped;
                // Keep the figures measured so far; report the error after them.
                let errored = outcome.error.is_some();
                if let Some(e) = &outcome.error {
                    failure = Some(e.to_string());
                }
                outcomes.push(outcome);
                if stopped || errored {
                    break;
                }
            }
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    let probes: Vec<Probe> = outcomes.iter().map(|o| probe_for(o, &target, plan.settings, bus.as_ref())).collect();
    let path_shown = target.path.display().to_string();
    let target_kind = target.kind;
    let fs_name = target.filesystem.as_ref().map(|f| f.name.clone());
    let size = target.size;
    drop(target); // removes the test file before anything is printed

    if out.json {
        let mut doc = ResultDoc::new(humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string());
        doc.probes = probes;
        doc.warnings = run_warnings;
        if let Some(b) = &bus {
            doc.ceilings.push(Ceiling {
                hop: headroom_result::Hop::Bus,
                name: b.name.clone(),
                bytes_per_sec: b.bytes_per_sec,
                source: Some(b.source.clone()),
            });
        }
        out.print_json(&doc)?;
    } else {
        let what = match target_kind {
            TargetKind::TestFile => format!("test file {}", headroom_units::format_size(size)),
            TargetKind::BlockDevice => format!("block device, {} tested", headroom_units::format_size(size)),
            TargetKind::ExistingFile => format!("existing file, {} tested", headroom_units::format_size(size)),
        };
        let fs = fs_name.map(|f| format!("{f}, ")).unwrap_or_default();
        let engine_direct = outcomes
            .first()
            .map(|o| format!(", {}, {}", o.engine.as_str(), if o.direct { "O_DIRECT" } else { "buffered" }))
            .unwrap_or_default();
        println!("{}", out.bold(&format!("headroom disk {path_shown} ({fs}{what}{engine_direct})")));
        if let Some(b) = &bus {
            println!("bus: {} = {}", b.name, headroom_units::format_bytes_per_sec(b.bytes_per_sec));
        }
        match plan.preset {
            Some(Preset::Sweep) => print!("{}", render_sweep(&probes)),
            Some(Preset::Sync) => {
                print!("{}", render_table(&probes, out));
                print!("{}", render_sync(&probes));
            }
            _ => print!("{}", render_table(&probes, out)),
        }
        let mut seen = std::collections::BTreeSet::new();
        for w in run_warnings.iter().chain(probes.iter().flat_map(|p| p.warnings.iter())) {
            if w.code != "io_error" && seen.insert((w.code.clone(), w.message.clone())) {
                println!("warning [{}]: {}", w.code, w.message);
            }
        }
    }
    if let Some(e) = failure {
        bail!(e);
    }
    if stop.load(Ordering::Relaxed) {
        eprintln!("headroom: stopped by Ctrl-C; the figures above cover what was measured");
        return Ok(Outcome::Error);
    }
    Ok(Outcome::Ok)
}

fn user_error(e: DiskError) -> anyhow::Error {
    anyhow::anyhow!(e.to_string())
}

/// The probe with every warning: honesty checks plus the write cliff.
fn probe_for(o: &TestOutcome, target: &Target, settings: RunSettings, bus: Option<&BusCeiling>) -> Probe {
    let mut warnings = honesty_warnings(o, target, bus);
    let mut cliff_details = None;
    if o.def.rw.writes() {
        if let Some(c) = detect_write_cliff(&o.samples) {
            warnings.push(Warning::new(
                headroom_result::WarningCode::WriteCliff,
                format!(
                    "{}: the write rate fell after {:.0} s and {} written, from {} to {} (a cache filled up)",
                    o.def.name,
                    c.at_s,
                    headroom_units::format_size(c.bytes_before as u64),
                    headroom_units::format_bytes_per_sec(c.rate_before),
                    headroom_units::format_bytes_per_sec(c.rate_after)
                ),
            ));
            cliff_details = Some(serde_json::json!({
                "at_s": c.at_s,
                "bytes_before": c.bytes_before,
                "bytes_per_sec_before": c.rate_before,
                "bytes_per_sec_after": c.rate_after,
            }));
        }
    }
    let mut probe = to_probe(o, target, settings, warnings);
    if let Some(d) = cliff_details {
        probe.details.insert("write_cliff".into(), d);
    }
    probe
}

/// "70.2 us", "1.23 ms", "950 ns".
fn latency(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn render_table(probes: &[Probe], out: &Output) -> String {
    let iec_head = if out.iec { format!(" {:>10}", "MiB/s") } else { String::new() };
    let mut s = format!(
        "{:<28} {:>10}{iec_head} {:>10} {:>10} {:>10} {:>10}\n",
        out.bold("test"),
        "MB/s",
        "IOPS",
        "lat mean",
        "p99",
        "p99.9"
    );
    for p in probes {
        if p.summary.ops == Some(0) {
            // A row of zeros would read as a measurement; the warning says why.
            s += &format!("{:<28} {:>10}\n", p.name, "no I/O completed (see the no_io_completed warning)");
            continue;
        }
        let l = p.summary.latency_ns.clone().unwrap_or_default();
        let iec = if out.iec { format!(" {:>10.1}", p.summary.bytes_per_sec / 1048576.0) } else { String::new() };
        s += &format!(
            "{:<28} {:>10.1}{iec} {:>10.0} {:>10} {:>10} {:>10}\n",
            p.name,
            p.summary.bytes_per_sec / 1e6,
            p.summary.iops.unwrap_or(0.0),
            latency(l.mean),
            latency(l.p99),
            latency(l.p999)
        );
    }
    s
}

fn disk_spec(p: &Probe) -> Option<&headroom_result::DiskSpec> {
    match &p.spec {
        headroom_result::ProbeSpec::Disk(d) => Some(d),
        _ => None,
    }
}

/// The sweep as a matrix: one block per direction, a row per block size,
/// a column per queue depth, each cell MB/s, IOPS and mean latency.
fn render_sweep(probes: &[Probe]) -> String {
    let mut s = String::new();
    for rw in ["randread", "randwrite"] {
        s += &format!("\n{rw}: MB/s | IOPS | mean latency\n{:<6}", "bs");
        for qd in SWEEP_QUEUE_DEPTHS {
            s += &format!(" {:>12}", format!("QD{qd}"));
        }
        s += "\n";
        for bs in SWEEP_BLOCK_SIZES {
            let cells: Vec<Option<&Probe>> = SWEEP_QUEUE_DEPTHS
                .iter()
                .map(|&qd| {
                    probes
                        .iter()
                        .find(|p| disk_spec(p).is_some_and(|d| d.rw == rw && d.block_size == bs && d.queue_depth == qd))
                })
                .collect();
            let label = headroom_disk::preset::size_label(bs);
            let row = |name: &str, f: &dyn Fn(&Probe) -> String| {
                let mut line = format!("{name:<6}");
                for c in &cells {
                    let cell =
                        c.map_or("-".to_string(), |p| if p.summary.ops == Some(0) { "no I/O".into() } else { f(p) });
                    line += &format!(" {cell:>12}");
                }
                line + "\n"
            };
            s += &row(&label, &|p| format!("{:.1}", p.summary.bytes_per_sec / 1e6));
            s += &row("", &|p| format!("{:.0}", p.summary.iops.unwrap_or(0.0)));
            s += &row("", &|p| latency(p.summary.latency_ns.as_ref().map_or(0.0, |l| l.mean)));
        }
    }
    s
}

/// The sync preset side by side: MB/s of buffered, O_DSYNC and fsync writes per block size.
fn render_sync(probes: &[Probe]) -> String {
    let mut s =
        format!("\n{:<6} {:>14} {:>14} {:>14}   (write MB/s, mean latency)\n", "bs", "buffered", "dsync", "fsync");
    for bs in [4096u64, 64 << 10, 1 << 20] {
        s += &format!("{:<6}", headroom_disk::preset::size_label(bs));
        for mode in ["buffered", "dsync", "fsync"] {
            let p = probes.iter().find(|p| p.id.ends_with(mode) && disk_spec(p).is_some_and(|d| d.block_size == bs));
            let cell = p.map_or("-".into(), |p| {
                if p.summary.ops == Some(0) {
                    return "no I/O".to_string();
                }
                format!(
                    "{:.1} {}",
                    p.summary.bytes_per_sec / 1e6,
                    latency(p.summary.latency_ns.as_ref().map_or(0.0, |l| l.mean))
                )
            });
            s += &format!(" {cell:>14}");
        }
        s += "\n";
    }
    s
}

/// The bus ceiling of the disk holding `path` ([`bus_ceiling`] of its inventory entry).
fn bus_of(path: &std::path::Path) -> Option<BusCeiling> {
    let ceiling = bus_ceiling(&headroom_sys::block_device_holding(path)?)?;
    Some(BusCeiling {
        name: ceiling.name,
        bytes_per_sec: ceiling.bytes_per_sec,
        source: ceiling.source.unwrap_or_default(),
    })
}
