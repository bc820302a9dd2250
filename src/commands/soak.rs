//! `headroom soak`: loops write, read, IOPS and network probes for hours into
//! a SQLite database, watches the links on the path, and at the end names
//! what it found (periodic dips, latency drift, link flaps, outages).
//!
//! This file checks the flags and turns the cycle into probe requests for the
//! Runner (disk and net engines); the loop, store, watcher and detectors live
//! in crates/soak and crates/analysis, the layout in
//! crates/report/src/present/soak.rs.

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_disk::test_def;
use headroom_disk::RunSettings;
use headroom_disk::{DirectMode, DiskEngine, DiskRequest, DiskTarget, EngineChoice, Pattern, Rw};
use headroom_net::TrafficDirection;
use headroom_net::{NetEngine, NetRequest, NetServer, NetTest, ProtocolChoice, ThroughputSpec};
use headroom_report::present;
use headroom_runner::{PrepareEvent, ProbeError, Runner, Sink};
use headroom_soak::{
    now_unix, rfc3339, run_cycles, LoopSettings, Metrics, ProbeFailure, SampleDetail, SoakConfig, SoakEvent, SoakInfo,
    Turn,
};
use headroom_units::{DurationArg, Size};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom soak --duration 3h --path /mnt/nas              write, read, iops for 3 hours
  headroom soak --duration 24h --path /mnt/nas --server nas.lan --metrics 0.0.0.0:9464
  headroom soak --cycle write --probe-time 60s --db cache.sqlite    write only, one-minute turns
  headroom soak --db nas.sqlite --resume                   continue an interrupted soak
  headroom soak --duration 10m --vmkernel-log vmkernel.log --json
  headroom report nas.sqlite --html nas.html               draw a soak

Every per-second sample is committed to the database as it arrives: a killed
soak loses at most the last second, and --resume continues it (the gap is
recorded). Detectors and their thresholds: docs/detectors.md.")]
pub struct SoakArgs {
    /// How long to soak in total (e.g. 30m, 3h, 2d); Ctrl-C stops earlier [default: 3h]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<DurationArg>,
    /// A `headroom serve` to include network probes (HOST or HOST:PORT)
    #[arg(long, value_name = "HOST")]
    pub server: Option<String>,
    /// Token of a `headroom serve` that requires one
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Directory for the disk probes' test file [default: .]
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// Probes of one cycle, in order: write, read, iops, net
    /// [default: write,read,iops, plus net with --server]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cycle: Option<Vec<String>>,
    /// Time each probe runs per cycle [default: 30s]
    #[arg(long, value_name = "DURATION")]
    pub probe_time: Option<DurationArg>,
    /// Size of the disk probes' test file [default: 1G]
    #[arg(long, value_name = "SIZE")]
    pub size: Option<Size>,
    /// The SQLite database to write [default: headroom-soak-TIME.sqlite]
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Continue the interrupted soak in --db (same cycle, path and server)
    #[arg(long, requires = "db")]
    pub resume: bool,
    /// Serve Prometheus metrics on ADDR:PORT (e.g. 127.0.0.1:9464)
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// An ESXi vmkernel.log to read for vusb uplink reconnects (link flaps)
    #[arg(long, value_name = "FILE")]
    pub vmkernel_log: Option<PathBuf>,
}

/// Probe names a cycle may hold.
const PROBES: [&str; 4] = ["write", "read", "iops", "net"];
const DEFAULT_SIZE: u64 = 1 << 30;

/// The validated schedule of a new soak.
struct SoakSchedule {
    cycle: Vec<String>,
    probe_time: Duration,
    duration: Duration,
}

fn schedule(args: &SoakArgs) -> anyhow::Result<SoakSchedule> {
    let duration = args.duration.map_or(Duration::from_secs(3 * 3600), |d| d.0);
    if duration < Duration::from_secs(1) {
        bail!(
            "--duration {} is too short for a soak; use e.g. --duration 30m or --duration 3h",
            args.duration.unwrap_or(DurationArg(duration))
        );
    }
    let probe_time = args.probe_time.map_or(Duration::from_secs(30), |d| d.0);
    if probe_time < Duration::from_secs(1) {
        bail!(
            "--probe-time {} is shorter than one sample; use at least 1s, e.g. --probe-time 30s",
            args.probe_time.unwrap_or(DurationArg(probe_time))
        );
    }
    if probe_time > Duration::from_secs(86_400) {
        bail!(
            "--probe-time {} is too long: at most 24h per probe, e.g. --probe-time 30s",
            args.probe_time.unwrap_or(DurationArg(probe_time))
        );
    }
    let cycle: Vec<String> = match &args.cycle {
        Some(list) => list.iter().map(|p| p.trim().to_lowercase()).filter(|p| !p.is_empty()).collect(),
        None => {
            let mut c: Vec<String> = ["write", "read", "iops"].iter().map(|s| s.to_string()).collect();
            if args.server.is_some() {
                c.push("net".into());
            }
            c
        }
    };
    if cycle.is_empty() {
        bail!("--cycle is empty; name probes from write, read, iops, net (e.g. --cycle write,read)");
    }
    for p in &cycle {
        if !PROBES.contains(&p.as_str()) {
            bail!("--cycle: '{p}' is not a probe; use write, read, iops or net (e.g. --cycle write,read,net)");
        }
    }
    for (i, p) in cycle.iter().enumerate() {
        if cycle[..i].contains(p) {
            bail!("--cycle names '{p}' twice; name each probe once (e.g. --cycle write,read)");
        }
    }
    if let Some(server) = &args.server {
        headroom_net::split_host_port(server).map_err(|e| anyhow::anyhow!("--server {e}"))?;
    }
    if cycle.iter().any(|p| p == "net") && args.server.is_none() {
        bail!("--cycle net needs --server HOST (a `headroom serve`); e.g. --server nas.lan");
    }
    Ok(SoakSchedule { cycle, probe_time, duration })
}

fn parse_metrics_addr(spec: &str) -> anyhow::Result<SocketAddr> {
    spec.to_socket_addrs().ok().and_then(|mut a| a.next()).with_context(|| {
        format!("--metrics '{spec}' is not ADDR:PORT; use e.g. --metrics 127.0.0.1:9464 or --metrics 0.0.0.0:9464")
    })
}

/// Interfaces on the path to `server`: the one the kernel routes it through. None when the server does not resolve (the outage is recorded
/// by the net probe).
fn path_interfaces(server: Option<&str>) -> Vec<String> {
    let Some(server) = server else { return Vec::new() };
    let host = server
        .rsplit_once(':')
        .filter(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok())
        .map_or(server, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs = (host, 0).to_socket_addrs().map(|a| a.collect::<Vec<_>>()).unwrap_or_default();
    addrs.into_iter().find_map(|a| headroom_sys::route_interface(a.ip())).into_iter().collect()
}

fn default_db() -> PathBuf {
    let stamp = rfc3339(now_unix()).replace([':', '-'], "").replace('T', "-").trim_end_matches('Z').to_string();
    PathBuf::from(format!("headroom-soak-{stamp}.sqlite"))
}

/// The turn of a disk probe of the cycle over the shared test file; no
/// warm-up: in a soak every second counts, the first included.
fn disk_turn(name: &str, target: &DiskTarget) -> Option<Turn> {
    let (rw, block_size, queue_depth) = match name {
        "write" => (Rw::Write, 1 << 20, 8),
        "read" => (Rw::Read, 1 << 20, 8),
        "iops" => (Rw::RandRead, 4096, 32),
        _ => return None,
    };
    let target = target.clone();
    let settings = RunSettings {
        engine: EngineChoice::Auto,
        direct: DirectMode::Auto,
        pattern: Pattern::Random,
        fixedbufs: false,
    };
    Some(Turn {
        name: name.to_string(),
        uses_server: false,
        request: Box::new(move |time| {
            let test = test_def(rw, block_size, queue_depth, 1, time, Duration::ZERO);
            DiskRequest { target: target.clone(), settings, test, bus: None }.to_request()
        }),
    })
}

/// The network turn: one TCP upload stream to the server, on a session of
/// its own. Failing to connect, or losing the server mid-turn, is an outage
/// (the live samples up to then stay in the database), not an error.
fn net_turn(server: &str, token: Option<String>) -> anyhow::Result<Turn> {
    let (host, port) = headroom_net::split_host_port(server).map_err(|e| anyhow::anyhow!("--server {e}"))?;
    let server = NetServer {
        host,
        port: port.unwrap_or(headroom_net::DEFAULT_PORT),
        token,
        timeout: Duration::from_secs(3),
        protocol: ProtocolChoice::Headroom,
        session_per_test: true,
    };
    Ok(Turn {
        name: "net".into(),
        uses_server: true,
        request: Box::new(move |time| {
            let test = NetTest::Throughput(ThroughputSpec {
                direction: TrafficDirection::Upload,
                streams: 1,
                duration: time,
                bytes: None,
                len: headroom_net::DEFAULT_TCP_LEN,
                udp_rate: None,
                rtt_under_load: false,
            });
            NetRequest { server: server.clone(), test }.to_request()
        }),
    })
}

/// Records the test file the disk engine creates, before its layout, so a
/// `--resume` after a kill finds and removes it.
struct TestFileRecorder<'a> {
    store: &'a headroom_soak::Store,
    session: i64,
    recorded: Option<(i64, PathBuf)>,
    error: Option<headroom_soak::StoreError>,
}

impl Sink for TestFileRecorder<'_> {
    fn prepared(&mut self, event: &PrepareEvent) {
        if let PrepareEvent::TestFileCreated { path } = event {
            // Absolute: a resume may run from another directory.
            let path = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
            match self.store.add_test_file(self.session, &path, std::process::id()) {
                Ok(id) => self.recorded = Some((id, path)),
                Err(e) => self.error = Some(e),
            }
        }
    }
}

pub fn run(args: &SoakArgs, out: &Output) -> anyhow::Result<Outcome> {
    let stop = crate::signals::stop_flag();
    let metrics_addr = args.metrics.as_deref().map(parse_metrics_addr).transpose()?;
    if let Some(log) = &args.vmkernel_log {
        std::fs::File::open(log).with_context(|| format!("--vmkernel-log {}: cannot read it", log.display()))?;
    }
    let db = args.db.clone().unwrap_or_else(default_db);
    let fresh_plan = if args.resume { None } else { Some(schedule(args)?) };
    // Everything that can be checked is, before the database is created or
    // touched: a busy --metrics port must not leave a half-started soak.
    let metrics = Metrics::new();
    if let Some(addr) = metrics_addr {
        let bound = metrics.serve(addr).with_context(|| format!("--metrics {addr}: cannot listen there"))?;
        if !out.json {
            eprintln!("headroom: Prometheus metrics on http://{bound}/metrics");
        }
    }

    let opened = match &fresh_plan {
        None => {
            let store = headroom_soak::open_to_resume(&db)?;
            check_resume_flags(args, &store.info()?.config, &db)?;
            headroom_soak::resume(store, args.duration.map(|d| d.0))?
        }
        Some(p) => {
            let now = now_unix();
            let info = SoakInfo {
                started_at: rfc3339(now),
                started_unix: now,
                planned_s: Some(p.duration.as_secs_f64()),
                config: SoakConfig {
                    cycle: p.cycle.clone(),
                    probe_s: p.probe_time.as_secs_f64(),
                    path: Some(args.path.clone().unwrap_or_else(|| PathBuf::from(".")).display().to_string()),
                    server: args.server.clone(),
                    vmkernel_log: args.vmkernel_log.as_ref().map(|p| p.display().to_string()),
                    extra: serde_json::json!({"size": args.size.map_or(DEFAULT_SIZE, |s| s.0)}),
                },
                host: None,
            };
            headroom_soak::open_soak(&db, false, info, Some(p.duration))?
        }
    };
    let mut store = opened.store;
    let config = opened.info.config.clone();
    if let Some(gap) = opened.gap_s {
        if !out.json {
            eprintln!("headroom: resuming {} after a gap of {:.1} s", db.display(), gap);
        }
    }
    if fresh_plan.is_none() {
        remove_left_test_files(&store, out)?;
    }

    let vmkernel_log = args.vmkernel_log.clone().or_else(|| config.vmkernel_log.as_ref().map(PathBuf::from));
    if let Some(log) = &vmkernel_log {
        headroom_soak::import_vmkernel_log(&store, log).with_context(|| format!("--vmkernel-log {}", log.display()))?;
    }

    // The disk turns share one test file, created and laid out once here.
    let dir = PathBuf::from(config.path.clone().unwrap_or_else(|| ".".into()));
    let target = DiskTarget {
        path: dir,
        size: Some(config.extra.get("size").and_then(|s| s.as_u64()).unwrap_or(DEFAULT_SIZE)),
        default_size: DEFAULT_SIZE,
        destructive: false,
        force: false,
        keep: false,
    };
    let mut turns: Vec<Turn> = Vec::new();
    for name in &config.cycle {
        if name == "net" {
            turns.push(net_turn(config.server.as_deref().unwrap_or_default(), args.token.clone())?);
        } else {
            turns.extend(disk_turn(name, &target));
        }
    }
    let mut runner = Runner::new().with(DiskEngine::new()).with(NetEngine::new());
    let cycle_plan = Turn::cycle_plan(&turns, Duration::from_secs_f64(config.probe_s.max(1.0)));
    let mut recorder = TestFileRecorder { store: &store, session: opened.session, recorded: None, error: None };
    let mut bars = crate::progress::ProgressSink::new(out.progress && !out.json, out.iec, &cycle_plan);
    let prepared = runner.prepare(&cycle_plan, stop, &mut [&mut recorder, &mut bars]);
    drop(bars);
    let test_file = recorder.recorded.take();
    if let Some(e) = recorder.error.take() {
        return Err(e.into());
    }
    match prepared {
        Ok(()) => {}
        Err(ProbeError::Stopped) => {
            mark_removed(&store, test_file.as_ref())?;
            store.end_session(opened.session, now_unix(), "interrupted")?;
            return Ok(Outcome::Error);
        }
        Err(e) => {
            let _ = mark_removed(&store, test_file.as_ref());
            bail!(e);
        }
    }

    let watcher = headroom_soak::Watcher::start(
        store.reopen()?,
        path_interfaces(config.server.as_deref()),
        Some(metrics.clone()),
    );
    let loop_settings = LoopSettings {
        probe_time: Duration::from_secs_f64(config.probe_s.max(1.0)),
        remaining: opened.remaining,
        min_turn: Duration::from_secs(1),
    };
    let show = !out.json;
    let result =
        run_cycles(&mut store, opened.session, &mut runner, &turns, loop_settings, stop, Some(&metrics), &mut |p| {
            if !show {
                return;
            }
            if let SoakEvent::TurnEnded { cycle, probe, outcome } = p {
                let turn = match outcome {
                    Ok(o) => present::soak::Turn::Measured(&o.probe),
                    Err(ProbeFailure::Unreachable(why)) => present::soak::Turn::Unreachable(why),
                    Err(ProbeFailure::Failed(why)) => present::soak::Turn::Failed(why),
                };
                eprint!("{}", headroom_report::terminal_safe(&present::soak::turn_line(cycle, probe, turn), false));
            }
        });
    drop(watcher);
    runner.finish(); // removes the test file
    mark_removed(&store, test_file.as_ref())?;
    let reason = result?;
    store.end_session(opened.session, now_unix(), reason.as_str())?;
    if let Some(log) = &vmkernel_log {
        // The log may have grown while the soak ran.
        headroom_soak::import_vmkernel_log(&store, log).with_context(|| format!("--vmkernel-log {}", log.display()))?;
    }

    let doc = headroom_soak::result_from_store(&store, SampleDetail::None)?;
    if out.json {
        out.print_json(&doc)?;
    } else {
        out.print(&present::soak::summary(&doc, &db.display().to_string(), out.style()));
    }
    Ok(Outcome::Ok)
}

/// Marks this session's test file removed once it is gone.
fn mark_removed(store: &headroom_soak::Store, file: Option<&(i64, PathBuf)>) -> anyhow::Result<()> {
    if let Some((id, path)) = file {
        headroom_soak::mark_removed(store, *id, path)?;
    }
    Ok(())
}

/// Removes what killed sessions of this soak left and says so on stderr.
fn remove_left_test_files(store: &headroom_soak::Store, out: &Output) -> anyhow::Result<()> {
    use headroom_soak::LeftFile;
    for left in headroom_soak::remove_left_test_files(store)? {
        match left {
            LeftFile::Removed(path) if !out.json => {
                eprintln!("headroom: removed {}, the test file of an interrupted session", path.display())
            }
            LeftFile::Removed(_) => {}
            LeftFile::InUse(path, pid) => {
                eprintln!("headroom: {} is in use by a running headroom (pid {pid}); left in place", path.display())
            }
            LeftFile::Failed(path, e) => {
                eprintln!("headroom: cannot remove {}, the test file of an interrupted session: {e}", path.display())
            }
        }
    }
    Ok(())
}

/// `--resume` keeps the stored settings: a flag given again must say the
/// same (it is then accepted); only a real change is refused.
fn check_resume_flags(args: &SoakArgs, stored: &SoakConfig, db: &Path) -> anyhow::Result<()> {
    let refuse = |flag: &str, given: String, kept: String| -> anyhow::Result<()> {
        bail!(
            "{flag} {given} cannot change a soak being resumed: it runs {kept} (stored in {}); drop {flag} or give the same value",
            db.display()
        )
    };
    if let Some(list) = &args.cycle {
        let given: Vec<String> = list.iter().map(|p| p.trim().to_lowercase()).filter(|p| !p.is_empty()).collect();
        if given != stored.cycle {
            refuse("--cycle", given.join(","), stored.cycle.join(","))?;
        }
    }
    if let Some(path) = &args.path {
        let kept = PathBuf::from(stored.path.clone().unwrap_or_else(|| ".".into()));
        let same = match (path.canonicalize(), kept.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => *path == kept,
        };
        if !same {
            refuse("--path", path.display().to_string(), kept.display().to_string())?;
        }
    }
    if let Some(server) = &args.server {
        if Some(server) != stored.server.as_ref() {
            refuse("--server", server.clone(), stored.server.clone().unwrap_or_else(|| "no server".into()))?;
        }
    }
    if let Some(t) = args.probe_time {
        if (t.0.as_secs_f64() - stored.probe_s).abs() > 1e-3 {
            refuse("--probe-time", t.to_string(), format!("{} s turns", stored.probe_s))?;
        }
    }
    if let Some(size) = args.size {
        let kept = stored.extra.get("size").and_then(|s| s.as_u64()).unwrap_or(DEFAULT_SIZE);
        if size.0 != kept {
            refuse(
                "--size",
                headroom_units::format_size(size.0),
                format!("a {} file", headroom_units::format_size(kept)),
            )?;
        }
    }
    Ok(())
}
