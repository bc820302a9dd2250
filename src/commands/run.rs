//! `headroom run`: the main job. Takes the inventory (`sys`), runs the
//! network probes against `--server` (or a loopback `headroom serve` it
//! starts itself) and the disk probes on `--path`, derives the ceilings of
//! every hop, and prints the verdict; `--goal` turns it into a pass/fail.
//!
//! The measurements are plans of probe requests run in this process by the
//! Runner on the same engines `headroom disk`/`net`/`cpu` drive, with the
//! same post-processing (write cliff, link share), so `run` measures exactly
//! what they do and shows their live progress bars. The loopback server of a
//! run without `--server` runs in this process too.
//!
//! With `--preset full` or `--cpu`, `headroom cpu` also measures the kernels
//! a storage path's CPU may have to run per byte (SMB3's AES-GCM, iSCSI's
//! CRC32C) on one core; its probes give the verdict its CPU hop.

use crate::output::{Outcome, Output};
use crate::progress::ProgressSink;
use anyhow::{bail, Context};
use headroom_analysis::{annotate, PathHints};
use headroom_analysis::{evaluate, parse_goals, Goal, GoalResult};
use headroom_analysis::{LinkSpec, LinkTarget};
use headroom_cpu::{BufferSpec, CpuEngine, CpuRequest};
use headroom_disk::TestChoice;
use headroom_disk::{DiskEngine, DiskTarget};
use headroom_net::{NetEngine, NetRequest, NetServer, NetTest, ProtocolChoice, ThroughputSpec, TrafficDirection};
use headroom_report::{presenter, Format, Report, ResultView, Style};
use headroom_result::{Host, Probe, ResultDoc, Warning};
use headroom_runner::{Plan, ProbeError, ProbeRun, Runner, Sink};
use headroom_units::{DurationArg, Size};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom run                                      this machine: its disk and a loopback server (< 60 s)
  headroom run --server nas.lan --path /mnt/nas     the path to a NAS share (run `headroom serve` on the NAS)
  headroom run --server nas.lan --link 10gbe        hold the network against a 10 GbE ceiling
  headroom run --goal read=223.4MB/s,write=150MB/s,iops=20k,latency-p99=2ms
  headroom run --label before-10gbe --save before.json
  headroom run --preset full --json > run.json
  headroom run --cpu                                the quick preset plus the CPU hop (AES-256-GCM, CRC32C on one core)

Goals (--goal, comma-separated): read=RATE, write=RATE (e.g. 223.4MB/s, 1Gb/s),
iops=COUNT, read-iops=COUNT, write-iops=COUNT (e.g. 20k), latency-mean|-p50|-p99|-p999=DURATION
(e.g. 2ms). A missed goal exits 1. The verdict's rules: docs/verdict.md.")]
pub struct RunArgs {
    /// A `headroom serve` (or stock iperf3 -s) to measure the network against: HOST or HOST:PORT
    #[arg(long, value_name = "HOST[:PORT]")]
    pub server: Option<String>,
    /// Directory whose filesystem the disk probes test (default: the current directory)
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// The narrowest link between client and server: a name (1gbe, 10gbe, 2.5gbe) or a rate (940Mb/s)
    #[arg(long, value_name = "SPEC", value_parser = LinkSpec::parse_network)]
    pub link: Option<LinkSpec>,
    /// quick (about 45 s) or full (several minutes: more disk tests, 4-stream network tests, the CPU hop)
    #[arg(long, default_value = "quick", value_parser = ["quick", "full"])]
    pub preset: String,
    /// Also measure the CPU hop (AES-256-GCM and CRC32C on one core, ~2 s); always on with --preset full
    #[arg(long)]
    pub cpu: bool,
    /// Thresholds to pass, e.g. read=223.4MB/s,write=150MB/s,iops=20k,latency-p99=2ms
    #[arg(long, value_name = "LIST")]
    pub goal: Option<String>,
    /// A name for this run, used as its column by `compare`
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Also write the whole result document to FILE
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Token of a `headroom serve --token` server (also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// What `run` will do, resolved and validated before anything runs.
#[derive(Debug)]
struct RunSetup {
    server: Option<String>,
    path: PathBuf,
    hints: PathHints,
    goals: Vec<Goal>,
    full: bool,
    cpu: bool,
}

fn setup(args: &RunArgs) -> anyhow::Result<RunSetup> {
    let goals = match &args.goal {
        Some(list) => parse_goals(list)?,
        None => Vec::new(),
    };
    if let Some(s) = &args.server {
        if s.trim().is_empty() || s.contains(char::is_whitespace) || s.contains('/') {
            bail!("--server '{s}' is not HOST or HOST:PORT (example: --server nas.lan or --server 192.168.1.10:5201)");
        }
    }
    let path = match &args.path {
        Some(p) => p.clone(),
        None => std::env::current_dir().context("--path: cannot read the current directory")?,
    };
    let meta = std::fs::metadata(&path)
        .with_context(|| format!("--path {}: cannot use it (example: --path /mnt/nas)", path.display()))?;
    if !meta.is_dir() {
        bail!(
            "--path {} is not a directory; run tests a directory's filesystem (example: --path /mnt/nas)",
            path.display()
        );
    }
    if let Some(save) = &args.save {
        crate::output::check_output_file("--save", save, "run.json")?;
    }
    if let Some(label) = &args.label {
        if label.trim().is_empty() {
            bail!("--label must not be empty (example: --label before-10gbe)");
        }
    }
    Ok(RunSetup {
        server: args.server.clone(),
        path,
        hints: PathHints { link: args.link.clone(), nic: None },
        goals,
        full: args.preset == "full",
        cpu: args.cpu || args.preset == "full",
    })
}

/// The disk tests of a preset: quick is 6 tests x (2 s + 0.5 s warm-up) on a
/// 256 MiB file, so the no-argument run stays under a minute; its 250 ms
/// samples give each test 8, enough for `compare` to tell a difference from
/// noise (2 one-second samples never can). full is CrystalDiskMark's set.
fn disk_step(path: &Path, full: bool) -> anyhow::Result<Plan> {
    let choice = if full {
        TestChoice { preset: Some("cdm".into()), ..TestChoice::default() }
    } else {
        TestChoice {
            preset: Some("quick".into()),
            time: Some(DurationArg(Duration::from_secs(2))),
            ramp: Some(DurationArg(Duration::from_millis(500))),
            size: Some(Size(256 << 20)),
            sample_interval: Some(DurationArg(Duration::from_millis(250))),
            ..TestChoice::default()
        }
    };
    let selection = headroom_disk::resolve(&choice).map_err(|e| anyhow::anyhow!("{e}"))?;
    let target = DiskTarget {
        path: path.to_path_buf(),
        size: choice.size.map(|s| s.0),
        default_size: 1 << 30,
        destructive: false,
        force: false,
        keep: false,
    };
    Ok(crate::commands::disk::disk_plan(&target, &selection, crate::commands::disk::bus_of(path).as_ref()).0)
}

/// The network tests of a preset against `server`: one stream each way
/// (quick, 3 s), or the round trips and 1 and 4 streams each way (full, 5 s,
/// round trips measured under load too).
fn net_step(server: &NetServer, full: bool) -> Plan {
    let time = Duration::from_secs(if full { 5 } else { 3 });
    let throughput = |direction, streams| {
        NetTest::Throughput(ThroughputSpec {
            direction,
            streams,
            duration: time,
            bytes: None,
            len: headroom_net::DEFAULT_TCP_LEN,
            udp_rate: None,
            rtt_under_load: full,
        })
    };
    let mut tests = Vec::new();
    if full {
        tests.push(NetTest::Rtt { time });
    }
    tests.extend([throughput(TrafficDirection::Upload, 1), throughput(TrafficDirection::Download, 1)]);
    if full {
        tests.extend([throughput(TrafficDirection::Upload, 4), throughput(TrafficDirection::Download, 4)]);
    }
    Plan::new(tests.into_iter().map(|test| NetRequest { server: server.clone(), test }.to_request()).collect())
}

/// The kernels of the CPU hop: what a network storage path's CPU may run on
/// every byte of one stream: SMB3 encryption (AES-256-GCM, the slower of its
/// two ciphers) and iSCSI header/data digests (CRC32C). Not SHA-256 or
/// compression: they cost only where the filesystem is set up for them (ZFS
/// checksum=sha256, compression), and the slowest kernel in the document
/// becomes the CPU ceiling. One thread (one stream is served by one core),
/// the out-of-cache buffer (a stream's data comes from RAM), 250 ms each.
const CPU_HOP_KERNELS: [&str; 2] = ["aes-256-gcm", "crc32c"];

fn cpu_step(host: &Host) -> anyhow::Result<Plan> {
    let kernels = crate::commands::cpu::select_kernels(&CPU_HOP_KERNELS.map(String::from))?;
    let default = headroom_cpu::default_memory_buffer();
    let bytes = host.memory_bytes.map_or(default, |ram| default.min(ram / 2));
    let buffer = BufferSpec { bytes, cache_resident: false };
    let time = Duration::from_millis(250);
    let warmup = Duration::from_millis(50);
    Ok(Plan::new(kernels.into_iter().map(|k| CpuRequest::new(k, 1, buffer, time, warmup).to_request()).collect()))
}

/// The CPU hop's probes, held against the link `--link` names when it is a
/// catalog name (a rate is held against by the verdict itself).
fn cpu_probes(runs: Vec<ProbeRun>, link: Option<&LinkSpec>, host: &Host) -> anyhow::Result<Vec<Probe>> {
    let link = LinkTarget::choose(link.filter(|spec| spec.family.is_some()), &host.nics);
    let mut probes = Vec::new();
    for run in runs {
        if let Some(e) = run.error() {
            bail!("CPU probes: {e}");
        }
        let probe = run.probe().and_then(headroom_cpu::measurement_of).expect("a measured cpu probe");
        probes.push(crate::commands::cpu::probe_with_link(&probe, &link));
    }
    Ok(probes)
}

/// The network probes, each held against the link towards the server; any
/// failure fails the run (after the failures are printed).
fn net_probes(runs: Vec<ProbeRun>, server: &NetServer) -> anyhow::Result<Vec<Probe>> {
    let ceiling = crate::commands::net::ceiling_for(&server.host, server.port, None);
    let mut probes = Vec::new();
    let mut failures = Vec::new();
    for run in runs {
        match (run.result, run.started) {
            (Err(e @ (ProbeError::Unreachable(_) | ProbeError::Refused(_))), _) if probes.is_empty() => {
                bail!("network probes: {e}")
            }
            (Err(ProbeError::Abandoned), _) => break,
            (Err(e), _) => failures.push(format!("{}: {e}", run.request.label)),
            (Ok(m), _) => {
                let p = headroom_analysis::net_probe_against_link(m.probe, &ceiling);
                if let Some(e) = p.details.get("error").and_then(|v| v.as_str()) {
                    failures.push(format!("{}: {e}", p.name));
                }
                probes.push(p);
            }
        }
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("headroom: error: {}", headroom_report::terminal_safe(f, false));
        }
        bail!("network probes failed: {}", failures.join("; "));
    }
    Ok(probes)
}

/// Runs `plan` on `runner` with progress bars, stopping at its first error
/// when `stop_on_error`.
fn run_step(runner: &mut Runner, plan: &Plan, out: &Output, stop_on_error: bool) -> Vec<ProbeRun> {
    let stop = crate::signals::stop_flag();
    let mut bars = ProgressSink::new(out.progress, out.iec, plan);
    let mut sinks: [&mut dyn Sink; 1] = [&mut bars];
    if stop_on_error {
        return runner.run_all(plan, stop, &mut sinks);
    }
    runner.execute(plan, stop, &mut sinks).collect()
}

/// Ctrl-C ends the run: what was measured is not a whole run, so nothing is
/// analysed or saved (exit 130).
fn check_interrupted() -> anyhow::Result<()> {
    if crate::signals::interrupted() {
        bail!("stopped by Ctrl-C before the run finished; nothing was saved");
    }
    Ok(())
}

pub fn run(args: &RunArgs, out: &Output) -> anyhow::Result<Outcome> {
    let setup = setup(args)?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let host = headroom_sys::inventory_live();
    let mut runner = Runner::new().with(CpuEngine::new()).with(NetEngine::new()).with(DiskEngine::new());

    let mut probes: Vec<Probe> = Vec::new();
    if setup.cpu {
        let runs = run_step(&mut runner, &cpu_step(&host)?, out, true);
        check_interrupted()?;
        probes.extend(cpu_probes(runs, args.link.as_ref(), &host)?);
    }
    {
        // With no --server, an in-process headroom server on a free loopback
        // port; it stops when `loopback` drops at the end of this block.
        let loopback = match &setup.server {
            Some(_) => None,
            None => Some(
                headroom_net::Server::bind(headroom_net::ServerConfig::loopback(0))
                    .map_err(|e| anyhow::anyhow!("starting the loopback server: {e}"))?
                    .spawn(),
            ),
        };
        let server = setup.server.clone().unwrap_or_else(|| loopback.as_ref().expect("started above").addr.to_string());
        let (host, port) = headroom_net::split_host_port(&server).map_err(|e| anyhow::anyhow!("--server {e}"))?;
        let server = NetServer {
            host,
            port: port.unwrap_or(headroom_net::DEFAULT_PORT),
            token: args.token.clone(),
            timeout: Duration::from_secs(5),
            protocol: ProtocolChoice::Auto,
            session_per_test: false,
        };
        let runs = run_step(&mut runner, &net_step(&server, setup.full), out, false);
        runner.finish();
        check_interrupted()?;
        probes.extend(net_probes(runs, &server)?);
    }
    let runs = run_step(&mut runner, &disk_step(&setup.path, setup.full)?, out, true);
    let warnings: Vec<Warning> = runner.warnings().to_vec();
    runner.finish(); // removes the test file
    check_interrupted()?;
    for run in &runs {
        if let Some(e) = run.error() {
            bail!("disk probes: {e}");
        }
        probes.extend(run.probe().cloned().map(crate::commands::disk::with_write_cliff));
    }

    let mut doc = ResultDoc::new(started_at);
    doc.label = args.label.clone();
    doc.host = host;
    doc.probes = probes;
    doc.warnings = warnings;
    finish(doc, &setup.hints, &setup.goals, args.save.as_deref(), out)
}

/// Analyses a measured document, holds the goals against it, prints and saves
/// it; a missed goal is exit 1.
fn finish(
    mut doc: ResultDoc,
    hints: &PathHints,
    goals: &[Goal],
    save: Option<&Path>,
    out: &Output,
) -> anyhow::Result<Outcome> {
    let analysis = annotate(&mut doc, hints)?;
    let results: Vec<GoalResult> = evaluate(goals, &doc, Some(&analysis));
    for g in results.iter().filter(|g| !g.met) {
        doc.warnings.push(Warning::new(headroom_result::WarningCode::GoalMissed, format!("goal {} missed", g.goal)));
    }
    if let Some(path) = save {
        std::fs::write(path, doc.to_json() + "\n")
            .with_context(|| format!("--save {}: cannot write", path.display()))?;
    }
    if out.json {
        println!("{}", doc.to_json());
    } else {
        let name = doc.label.clone().unwrap_or_else(|| "this run".into());
        let mut view = ResultView::new(doc, &name);
        view.goals = results.clone();
        let style = Style { color: out.color, iec: out.iec };
        out.print(&presenter(Format::Table).render(&Report::single(view), style));
        if let Some(path) = save {
            println!("saved {}", path.display());
        }
    }
    let missed: Vec<&str> = results.iter().filter(|g| !g.met).map(|g| g.goal.as_str()).collect();
    if missed.is_empty() {
        Ok(Outcome::Ok)
    } else {
        eprintln!("headroom: goal missed: {}", missed.join(", "));
        Ok(Outcome::GoalMissed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_hop_is_one_thread_out_of_cache_on_its_two_kernels() {
        let plan = cpu_step(&Host::default()).unwrap();
        let kernels: Vec<CpuRequest> = plan.requests.iter().map(|r| r.params().unwrap()).collect();
        assert_eq!(kernels.iter().map(|k| k.kernel.as_str()).collect::<Vec<_>>(), ["crc32c", "aes-256-gcm"]);
        assert!(kernels.iter().all(|k| k.threads == 1 && !k.cache_resident));
    }

    #[test]
    fn the_quick_net_step_is_one_stream_each_way_and_full_adds_round_trips() {
        let server = NetServer {
            host: "nas.lan".into(),
            port: 5201,
            token: None,
            timeout: Duration::from_secs(5),
            protocol: ProtocolChoice::Auto,
            session_per_test: false,
        };
        let labels = |full| net_step(&server, full).requests.into_iter().map(|r| r.label).collect::<Vec<_>>();
        assert_eq!(labels(false), ["TCP up x1", "TCP down x1"]);
        assert_eq!(labels(true), ["TCP RR idle", "TCP up x1", "TCP down x1", "TCP up x4", "TCP down x4"]);
    }
}
