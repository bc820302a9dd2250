//! `headroom fleet --hosts ... disk PATH | net SERVER | run`: the same tests
//! on many agents (`headroom serve`) at one start, gathered into one
//! document. Checks the host list, the tests and the goals before anything
//! starts, hands the plan to headroom-fleet, holds the goals and prints the
//! document (crates/report/src/present/fleet.rs).

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_disk::{resolve, DiskRequest, DiskTarget};
use headroom_fleet::{FleetEvent, MAX_WORKERS};
use headroom_job::Preset;
use headroom_net::wire::TrafficDirection;
use headroom_net::{NetRequest, NetServer, NetTest, ProtocolChoice, ThroughputSpec};
use headroom_result::ResultDoc;
use headroom_runner::Plan;
use headroom_units::DurationArg;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long connecting to an agent and its silences before a test may take.
const AGENT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom fleet --hosts hv1,hv2,hv3,hv4 --token $TOKEN disk /mnt/nas
  headroom fleet --hosts hosts.txt disk /mnt/nas --rw read --bs 1M --qd 8 --time 30s --json > fleet.json
  headroom fleet --hosts hv1,hv2,hv3,hv4 --token $TOKEN net nas.lan --parallel 2 --time 20s
  headroom fleet --hosts hosts.txt run --server nas.lan --path /mnt/nas --goal read=400MB/s
  headroom fleet --hosts hosts.txt --host-goal read=100MB/s disk /mnt/nas --rw read

Goals (--goal against the fleet's sum, --host-goal against every host; the syntax of
run --goal): read=RATE, write=RATE, iops=COUNT, read-iops=, write-iops=,
latency-mean|-p50|-p99|-p999=DURATION, each held against the best test of its kind.

Every host runs `headroom serve --bind ADDR --token T` of this headroom version, with
--allow-path DIR (DIR covering PATH) for disk, --allow-net-to SERVER for net. The hosts file holds one host[:port] per line (default port 5201), # comments.
Exit codes: 0 every host measured (and every goal met); 1 a goal missed; 2 a bad host list
or test, or any host failed (the others' results are kept and printed).")]
pub struct FleetArgs {
    /// The agents: HOST[:PORT],HOST[:PORT]... or a file with one HOST[:PORT] per line
    #[arg(long, value_name = "FILE|HOST,...")]
    pub hosts: String,
    /// Token of the agents' `headroom serve --token` (also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Also write the document to FILE (as --json prints it), e.g. for `compare` or `report`
    #[arg(long, value_name = "FILE", global = true)]
    pub save: Option<std::path::PathBuf>,
    /// Thresholds the fleet's sum must reach, e.g. read=400MB/s,iops=80k; a missed goal exits 1
    #[arg(long, value_name = "LIST", global = true)]
    pub goal: Option<String>,
    /// Thresholds every host must reach on its own, e.g. read=100MB/s,latency-p99=2ms
    #[arg(long, value_name = "LIST", global = true)]
    pub host_goal: Option<String>,
    #[command(subcommand)]
    pub probe: FleetProbe,
}

#[derive(clap::Subcommand, Debug)]
pub enum FleetProbe {
    /// The same disk test on every agent's PATH at once
    Disk(FleetDiskArgs),
    /// Every agent runs a network test towards SERVER at once (agents need `serve --allow-net-to SERVER`)
    Net(FleetNetArgs),
    /// `headroom run`'s tests on every agent at once: the network towards --server, the disk
    /// at --path; a verdict per host
    Run(FleetRunArgs),
}

#[derive(clap::Args, Debug)]
#[command(after_help = "The agents need `serve --allow-net-to SERVER` for --server and
`serve --allow-path DIR` (DIR covering --path) for --path.")]
pub struct FleetRunArgs {
    /// The server every agent tests the network against: a `headroom serve` or a stock
    /// `iperf3 -s`, HOST[:PORT] (resolved here: the agents get its address)
    #[arg(long, value_name = "HOST[:PORT]", value_parser = check_server)]
    pub server: Option<String>,
    /// A directory on every agent (absolute), under its `serve --allow-path`: the disk tests
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// quick (one stream each way, 6 short disk tests), full (round trips, 1 and 4 streams,
    /// CrystalDiskMark's set) or seq (one stream each way, the 1 MiB sequential read and write),
    /// as `headroom run --preset`
    #[arg(long, default_value = "quick", value_parser = clap::builder::PossibleValuesParser::new(Preset::NAMES))]
    pub preset: String,
    /// Token of SERVER, when it is a `headroom serve --token` [default: --token]
    #[arg(long, value_name = "TOKEN", requires = "server")]
    pub server_token: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct FleetNetArgs {
    /// The server every agent tests against: a `headroom serve` or a stock `iperf3 -s`, HOST[:PORT]
    /// (resolved here: the agents get its address)
    #[arg(value_parser = check_server)]
    pub server: String,
    /// Measured time
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub time: DurationArg,
    /// Parallel TCP streams from each agent
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=128))]
    pub parallel: u32,
    /// The server sends, the agents receive (download)
    #[arg(long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once
    #[arg(long)]
    pub bidir: bool,
    /// Token of SERVER, when it is a `headroom serve --token` [default: --token]
    #[arg(long, value_name = "TOKEN")]
    pub server_token: Option<String>,
}

fn check_server(spec: &str) -> Result<String, String> {
    headroom_net::split_host_port(spec).map(|_| spec.to_string())
}

#[derive(clap::Args, Debug)]
pub struct FleetDiskArgs {
    /// A directory on every agent (absolute), under its `serve --allow-path`
    pub path: PathBuf,
    #[command(flatten)]
    pub test: crate::commands::disk::DiskTestArgs,
}

const DEFAULT_SIZE: u64 = 1 << 30;

pub fn run(args: &FleetArgs, out: &Output) -> anyhow::Result<Outcome> {
    let sum_goals = crate::output::parse_goal_flag(args.goal.as_deref())?;
    // Same syntax, another flag: the message names the one the user typed
    // (a goal list's error names no other setting).
    let host_goals = match args.host_goal.as_deref() {
        Some(list) => {
            headroom_analysis::parse_goals(list).map_err(|e| anyhow::anyhow!(e.message().spelled(|_| "--host-goal")))?
        }
        None => Vec::new(),
    };
    let plan = match &args.probe {
        FleetProbe::Disk(disk) => disk_plan(disk)?,
        FleetProbe::Net(net) => net_plan(net, args.token.as_deref())?,
        FleetProbe::Run(run) => run_plan(run, args.token.as_deref())?,
    };
    if let Some(save) = &args.save {
        crate::output::check_output_file("--save", save, "fleet.json")?;
    }
    let hosts = headroom_fleet::parse_hosts(&args.hosts, args.token.clone(), AGENT_TIMEOUT)?;
    headroom_fleet::resolve_all(&hosts, MAX_WORKERS)?;
    headroom_fleet::ensure_file_limit(hosts.len())?;
    let stop = crate::signals::stop_flag();
    let chatty = out.progress && !out.json;
    let on_event = |event: &FleetEvent| match event {
        FleetEvent::HostFailed { error, .. } => eprintln!("headroom: fleet: {error}"),
        FleetEvent::Starting { label, ready, .. } if chatty => {
            eprintln!("headroom: fleet: {label} on {ready} host{}", if *ready == 1 { "" } else { "s" })
        }
        FleetEvent::Starting { .. } => {}
    };
    let started_at = headroom_result::now_rfc3339();
    let outcomes = headroom_fleet::run_fleet(&hosts, &plan, stop, &on_event, crate::flags::SPELLING);
    let (probes, fleet) = headroom_fleet::gather(&plan, &outcomes);
    let failed: Vec<String> = fleet.hosts.iter().filter(|h| h.error.is_some()).map(|h| h.name.clone()).collect();
    let failed_line = format!(
        "{} of {} host{} failed ({}); {}",
        failed.len(),
        fleet.hosts.len(),
        if fleet.hosts.len() == 1 { "" } else { "s" },
        named_at_most(&failed, NAMED_FAILURES),
        if probes.is_empty() { "nothing was measured" } else { "the sums cover the others" }
    );
    if probes.is_empty() {
        bail!(failed_line);
    }
    let mut doc = ResultDoc::new(started_at);
    doc.probes = probes;
    doc.warnings = outcomes.iter().find(|o| o.error.is_none()).map(|o| o.warnings.clone()).unwrap_or_default();
    doc.fleet = Some(fleet);
    if matches!(args.probe, FleetProbe::Run(_)) {
        headroom_fleet::judge::judge_hosts(&mut doc);
    }
    // Every agent's figures were checked as they came; the document is held
    // to what `report` accepts before it is printed or saved.
    doc.validate().map_err(|e| anyhow::anyhow!("the fleet's document has an impossible figure: {e}"))?;
    let goal_results = headroom_fleet::judge::hold_goals(&mut doc, &sum_goals, &host_goals)?;
    if let Some(path) = &args.save {
        std::fs::write(path, doc.to_json() + "\n")
            .with_context(|| format!("--save {}: cannot write", path.display()))?;
    }
    if out.json {
        out.print_json(&doc)?;
    } else {
        out.print(&headroom_report::present::fleet::render(&doc, out.style()));
    }
    if stop.load(Ordering::Relaxed) {
        eprintln!("headroom: stopped by a signal; the figures above cover what was measured");
        return Ok(Outcome::Error);
    }
    // A failed host outweighs a missed goal: the sums lack its share.
    let goals = crate::output::goal_outcome(&goal_results, out);
    if !failed.is_empty() {
        bail!(failed_line);
    }
    Ok(goals)
}

/// The disk test every agent runs, checked before anything starts.
fn disk_plan(disk: &FleetDiskArgs) -> anyhow::Result<Plan> {
    let mut choice = disk.test.choice();
    // The fleet's sums add the hosts' samples second by second.
    let one_second = std::time::Duration::from_secs(1);
    match choice.sample_interval {
        Some(DurationArg(d)) if d != one_second => bail!(
            "--sample-interval {}: a fleet adds its hosts' samples second by second, so it samples every 1s \
             (drop --sample-interval)",
            headroom_units::format_duration(d)
        ),
        _ => choice.sample_interval = Some(DurationArg(one_second)),
    }
    let selection = resolve(&choice).map_err(|e| anyhow::anyhow!(crate::flags::line(&e)))?;
    check_agent_path("PATH", &disk.path, "disk /mnt/nas")?;
    let target = DiskTarget {
        path: disk.path.clone(),
        size: disk.test.size.map(|s| s.0),
        default_size: DEFAULT_SIZE,
        destructive: false,
        force: false,
        keep: false,
    };
    Ok(DiskRequest::plan(&target, &selection, None).0)
}

/// Failed hosts the last line names; each has its own line above it, and
/// a line of thousands of names says nothing more.
const NAMED_FAILURES: usize = 8;

/// `names` joined, the first `most` of them and how many more.
fn named_at_most(names: &[String], most: usize) -> String {
    match names.len().checked_sub(most) {
        Some(more) if more > 0 => format!("{}, and {more} more", names[..most].join(", ")),
        _ => names.join(", "),
    }
}

/// A directory named for every agent: absolute, since it is a path there.
fn check_agent_path(flag: &str, path: &std::path::Path, example: &str) -> anyhow::Result<()> {
    if !super::remote::is_absolute_on_far_end(path) {
        bail!(
            "{flag} {} must be absolute: it names a directory on every agent (example: headroom fleet --hosts hv1,hv2 {example})",
            path.display()
        );
    }
    Ok(())
}

/// The server every agent tests towards, resolved here: each agent checks
/// the address against its `--allow-net-to` (a name could resolve elsewhere there).
fn net_server(flag: &str, spec: &str, server_token: Option<&str>, token: Option<&str>) -> anyhow::Result<NetServer> {
    let (host, port) = headroom_net::split_host_port(spec).map_err(anyhow::Error::msg)?;
    let port = port.unwrap_or(headroom_net::DEFAULT_PORT);
    let addr = headroom_net::resolve(&host, port)
        .map_err(|e| anyhow::anyhow!("{flag} {spec}: {e} (example: headroom fleet --hosts hv1,hv2 net nas.lan)"))?[0];
    Ok(NetServer {
        host: addr.ip().to_string(),
        port,
        token: server_token.or(token).map(String::from),
        timeout: AGENT_TIMEOUT,
        source: Default::default(),
        protocol: ProtocolChoice::Auto,
        session_per_test: false,
    })
}

/// `headroom run`'s tests of the preset for every agent: the network towards
/// --server first (as `run` orders them), then the disk at --path.
fn run_plan(run: &FleetRunArgs, token: Option<&str>) -> anyhow::Result<Plan> {
    if run.server.is_none() && run.path.is_none() {
        bail!("fleet run needs --server HOST (the network), --path DIR (the disk) or both (example: headroom fleet --hosts hv1,hv2 run --server nas.lan --path /mnt/nas)");
    }
    let preset = Preset::from_name(&run.preset).expect("clap admits only the preset names");
    let mut requests = Vec::new();
    if let Some(spec) = &run.server {
        let server = net_server("--server", spec, run.server_token.as_deref(), token)?;
        requests.extend(headroom_job::net_plan_of_preset(&server, preset, None).requests);
    }
    if let Some(path) = &run.path {
        check_agent_path("--path", path, "run --path /mnt/nas")?;
        requests.extend(headroom_job::disk_plan_of_preset(path, preset, None, None)?.requests);
    }
    Ok(Plan::new(requests))
}

/// The network test every agent runs towards SERVER.
fn net_plan(net: &FleetNetArgs, token: Option<&str>) -> anyhow::Result<Plan> {
    let server = net_server("SERVER", &net.server, net.server_token.as_deref(), token)?;
    let direction = match (net.reverse, net.bidir) {
        (true, _) => TrafficDirection::Download,
        (_, true) => TrafficDirection::Bidir,
        _ => TrafficDirection::Upload,
    };
    let request = NetRequest {
        server,
        test: NetTest::Throughput(ThroughputSpec {
            direction,
            streams: net.parallel,
            duration: net.time.0,
            bytes: None,
            len: headroom_net::DEFAULT_TCP_LEN,
            udp_rate: None,
            rtt_under_load: false,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
            sample_interval: None,
        }),
    };
    Ok(Plan::new(vec![request.to_request()]))
}
