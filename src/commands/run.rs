//! `headroom run`: the main job. Takes the inventory (`sys`), runs the
//! network probes against `--server` (or a loopback `headroom serve` it
//! starts itself) and the disk probes on `--path`, derives the ceilings of
//! every hop, and prints the verdict; `--goal` turns it into a pass/fail.
//!
//! The measurements are the engines' own subcommands, run as child processes
//! of this same binary that hand back result documents (`sys --json`,
//! `disk --json`, `net --json`): the result document is the only contract
//! between the measuring commands and this one, so `run` measures exactly what
//! `headroom disk`/`net` do and shows their live progress bars. The loopback
//! server of a run without `--server` runs in this process.
//!
//! With `--preset full` or `--cpu`, `headroom cpu` also measures the kernels
//! a storage path's CPU may have to run per byte (SMB3's AES-GCM, iSCSI's
//! CRC32C) on one core; its probes give the verdict its CPU hop.

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_analysis::ceilings::LinkSpec;
use headroom_analysis::goals::{evaluate, parse_goals, Goal, GoalResult};
use headroom_analysis::{annotate, PathHints};
use headroom_report::{presenter, Format, Report, ResultView, Style};
use headroom_result::{Host, Probe, ProbeSpec, ResultDoc, Warning};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
struct Plan {
    server: Option<String>,
    path: PathBuf,
    hints: PathHints,
    goals: Vec<Goal>,
    full: bool,
    cpu: bool,
}

fn plan(args: &RunArgs) -> anyhow::Result<Plan> {
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
        crate::cli::check_output_file("--save", save, "run.json")?;
    }
    if let Some(label) = &args.label {
        if label.trim().is_empty() {
            bail!("--label must not be empty (example: --label before-10gbe)");
        }
    }
    Ok(Plan {
        server: args.server.clone(),
        path,
        hints: PathHints { link: args.link.clone(), nic: None },
        goals,
        full: args.preset == "full",
        cpu: args.cpu || args.preset == "full",
    })
}

/// Runs `headroom ARGS --json` and returns its stdout; its stderr (progress
/// bars, warnings) goes to the user's terminal.
fn child_json(exe: &Path, args: &[String], quiet: bool, what: &str) -> anyhow::Result<String> {
    let mut cmd = Command::new(exe);
    cmd.args(args).arg("--json").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    if quiet {
        cmd.arg("--quiet");
    }
    let out = cmd.output().with_context(|| format!("{what}: cannot start {}", exe.display()))?;
    if !out.status.success() {
        bail!("{what} failed ({}); its error is above: `headroom {}` shows it alone", out.status, args.join(" "));
    }
    String::from_utf8(out.stdout).with_context(|| format!("{what}: output is not UTF-8"))
}

/// Loads a child's result document, naming the step when it is not one.
fn child_doc(text: &str, what: &str) -> anyhow::Result<ResultDoc> {
    ResultDoc::from_json(text).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// The arguments of each step for a preset.
fn disk_args(path: &Path, full: bool) -> Vec<String> {
    let mut a = vec!["disk".to_string(), path.display().to_string()];
    if full {
        a.extend(["--preset", "cdm"].map(String::from));
    } else {
        // 6 tests x (2 s + 0.5 s warm-up): the no-argument run stays under a minute.
        // 250 ms samples give each test 8, enough for `compare` to tell a
        // difference from noise (2 one-second samples never can).
        a.extend(
            ["--preset", "quick", "--time", "2s", "--ramp", "500ms", "--size", "256MiB", "--sample-interval", "250ms"]
                .map(String::from),
        );
    }
    a
}

/// `--link` is not passed on: `run` holds the figures against it itself.
fn net_args(server: &str, full: bool, token: Option<&str>) -> Vec<String> {
    let tests = if full { "rtt,up1,down1,up,down" } else { "up1,down1" };
    let time = if full { "5s" } else { "3s" };
    let mut a =
        vec!["net".to_string(), server.to_string(), "--tests".into(), tests.into(), "--time".into(), time.into()];
    if let Some(t) = token {
        a.extend(["--token".to_string(), t.to_string()]);
    }
    a
}

/// The `headroom cpu` kernels of the CPU hop: what a network storage path's
/// CPU may run on every byte of one stream: SMB3 encryption (AES-256-GCM, the
/// slower of its two ciphers) and iSCSI header/data digests (CRC32C). Not
/// SHA-256 or compression: they cost only where the filesystem is set up for
/// them (ZFS checksum=sha256, compression), and the slowest kernel in the
/// document becomes the CPU ceiling.
const CPU_HOP_KERNELS: &str = "aes-256-gcm,crc32c";

/// One thread (one stream is served by one core) and the out-of-cache buffer
/// (a stream's data comes from RAM); 250 ms per figure keeps the step to ~2 s.
/// `--link` goes on only when it is a catalog name (`cpu` takes no rates).
fn cpu_args(link: Option<&str>) -> Vec<String> {
    let mut a = ["cpu", "--kernels", CPU_HOP_KERNELS, "--threads", "1", "--time", "250ms"].map(String::from).to_vec();
    if let Some(spec) = link.filter(|s| headroom_limits::lookup(s).is_ok()) {
        a.extend(["--link".to_string(), spec.to_string()]);
    }
    a
}

/// The CPU hop's probes of a `headroom cpu` document: one thread, out of cache.
fn cpu_hop_probes(doc: ResultDoc) -> Vec<Probe> {
    doc.probes
        .into_iter()
        .filter(|p| matches!(&p.spec, ProbeSpec::Cpu(c) if c.threads == 1 && c.cache_resident != Some(true)))
        .collect()
}

pub fn run(args: &RunArgs, out: &Output) -> anyhow::Result<Outcome> {
    let plan = plan(args)?;
    let exe = std::env::current_exe().context("cannot find the headroom binary to run its probes")?;
    let quiet = !out.progress;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();

    let mut warnings: Vec<Warning> = Vec::new();
    let host: Host = match child_json(&exe, &["sys".into()], quiet, "inventory (headroom sys)") {
        Ok(text) => serde_json::from_str(&text).context("inventory (headroom sys): not a host object")?,
        Err(e) => {
            warnings.push(Warning::new(
                headroom_result::WarningCode::NoInventory,
                format!("{e:#}; ceilings of the bus, NIC and link are unknown"),
            ));
            Host::default()
        }
    };

    let mut probes: Vec<Probe> = Vec::new();
    if plan.cpu {
        // Its document-level warnings are about the link it compared with,
        // which `run` derives itself; the probes carry their own.
        let what = "CPU probes (headroom cpu)";
        let text = child_json(&exe, &cpu_args(args.link.as_ref().map(|l| l.input.as_str())), quiet, what)?;
        probes.extend(cpu_hop_probes(child_doc(&text, what)?));
    }
    {
        // With no --server, an in-process headroom server on a free loopback
        // port; it stops when `loopback` drops at the end of this block.
        let loopback = match &plan.server {
            Some(_) => None,
            None => Some(
                headroom_net::Server::bind(headroom_net::ServerConfig::loopback(0))
                    .map_err(|e| anyhow::anyhow!("starting the loopback server: {e}"))?
                    .spawn(),
            ),
        };
        let server = plan.server.clone().unwrap_or_else(|| loopback.as_ref().expect("started above").addr.to_string());
        let text = child_json(
            &exe,
            &net_args(&server, plan.full, args.token.as_deref()),
            quiet,
            "network probes (headroom net)",
        )?;
        let doc = child_doc(&text, "network probes (headroom net)")?;
        probes.extend(doc.probes);
        warnings.extend(doc.warnings);
    }
    let text = child_json(&exe, &disk_args(&plan.path, plan.full), quiet, "disk probes (headroom disk)")?;
    let doc = child_doc(&text, "disk probes (headroom disk)")?;
    probes.extend(doc.probes);
    warnings.extend(doc.warnings);

    let mut doc = ResultDoc::new(started_at);
    doc.label = args.label.clone();
    doc.host = host;
    doc.probes = probes;
    doc.warnings = warnings;
    finish(doc, &plan.hints, &plan.goals, args.save.as_deref(), out)
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
    use headroom_result::{CpuSpec, Summary};

    #[test]
    fn the_cpu_step_passes_catalog_links_only() {
        let with = cpu_args(Some("10gbe"));
        assert_eq!(with[with.len() - 2..], ["--link", "10gbe"]);
        assert!(!cpu_args(Some("940Mb/s")).contains(&"--link".to_string()), "cpu takes no rates");
        assert!(cpu_args(None).windows(2).any(|w| w == ["--threads", "1"]));
    }

    #[test]
    fn the_cpu_hop_keeps_one_thread_out_of_cache() {
        let probe = |id: &str, threads: u32, cache_resident: bool| Probe {
            id: id.into(),
            name: String::new(),
            spec: ProbeSpec::Cpu(CpuSpec {
                kernel: "aes-256-gcm".into(),
                threads,
                buffer_size: 64 << 20,
                data: None,
                cache_resident: Some(cache_resident),
            }),
            summary: Summary { bytes_per_sec: 1e9, ..Summary::default() },
            samples: Vec::new(),
            histogram: None,
            warnings: Vec::new(),
            details: Default::default(),
        };
        let mut doc = ResultDoc::new("2026-11-21T00:00:00Z");
        doc.probes = vec![probe("memory-1", 1, false), probe("cache-1", 1, true), probe("memory-2", 2, false)];
        let kept: Vec<String> = cpu_hop_probes(doc).into_iter().map(|p| p.id).collect();
        assert_eq!(kept, ["memory-1"]);
    }
}
