//! `headroom run`: the main job. Takes the inventory (`sys`), runs the
//! network probes against `--server` (or a loopback `headroom serve` it
//! starts itself) and the disk probes on `--path`, derives the ceilings of
//! every hop, and prints the verdict (with the hop chain as bars on a wide
//! terminal); `--goal` turns it into a pass/fail.
//!
//! What each preset measures, and running it, is `headroom_job::main_job`
//! (crates/job); this file checks the flags, hands the job a progress bar
//! per step, and prints or saves the judged document.

use crate::output::{Outcome, Output};
use crate::progress::ProgressSink;
use anyhow::{bail, Context};
use headroom_analysis::{parse_goals, Goal, LinkSpec, Metric, PathHints};
use headroom_job::{JobError, JobSettings, Preset};
use headroom_proto::{Credentials, IscsiKeys, ShareTarget};
use headroom_report::{presenter, Format, Report, ResultView, Style};
use headroom_result::ResultDoc;
use headroom_units::DurationArg;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom run                                      this machine: its disk and a loopback server (< 60 s)
  headroom run --server nas.lan --path /mnt/nas     the path to a NAS share (run `headroom serve` on the NAS)
  headroom run --server nas.lan --link 10gbe        hold the network against a 10 GbE ceiling
  headroom run --server nas.lan --remote-path /tank/bench --path /mnt/nas
                                                    both ends: the NAS's own disk (measured by the NAS),
                                                    the network, the share as mounted here, both CPUs
  headroom run --server nas.lan --remote-path /export --share nfs://nas.lan/export
                                                    the NAS's disk, NFS over the wire (headroom's own
                                                    client, no mount) and the network, in one verdict
  headroom run --goal read=223.4MB/s,write=150MB/s,iops=20k,latency-p99=2ms
  headroom run --path /mnt/nas --test read:512k:q4 --goal read=223.4MB/s
                                                    the goal held against IOMeter's 512K read at QD4
  headroom run --label before-10gbe --save before.json
  headroom run --preset full --json > run.json
  headroom run --server nas.lan --preset seq        the shortest verdict: 1M sequential reads and
                                                    writes, one stream each way (about 20 s)
  headroom run --cpu                                the quick preset plus the CPU hop (AES-256-GCM, CRC32C on one core)

Goals (--goal, comma-separated): read=RATE, write=RATE (e.g. 223.4MB/s, 1Gb/s),
iops=COUNT, read-iops=COUNT, write-iops=COUNT (e.g. 20k), latency-mean|-p50|-p99|-p999=DURATION
(e.g. 2ms). A missed goal exits 1. The verdict's rules: docs/verdict.md.")]
pub struct RunArgs {
    /// A `headroom serve` (or stock iperf3 -s) to measure the network against: HOST or HOST:PORT
    #[arg(long, value_name = "HOST[:PORT]")]
    pub server: Option<String>,
    /// Directory whose filesystem the disk probes test (default: the current directory, or
    /// none with --remote-path)
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// Directory on the server whose disk the server measures itself (its `headroom serve`
    /// needs --allow-path covering it)
    #[arg(long, value_name = "DIR", requires = "server")]
    pub remote_path: Option<PathBuf>,
    /// Test the disk path through headroom's own protocol client instead of a mounted
    /// --path: nfs://HOST/EXPORT[/DIR], smb://[USER@]HOST/SHARE[/DIR], iscsi://HOST/IQN/LUN
    /// (read tests only), nbd://HOST[/EXPORT] (read tests only)
    #[arg(long, value_name = "URL", conflicts_with = "path")]
    pub share: Option<String>,
    /// With --share: KEY=VALUE credentials file (mode 600), e.g. HEADROOM_SMB_PASSWORD=...
    #[arg(long, value_name = "FILE", requires = "share")]
    pub credentials: Option<PathBuf>,
    /// With an iscsi:// --share: login keys to offer instead of headroom's own, KEY=VALUE,...
    /// (InitialR2T, ImmediateData, MaxBurstLength, FirstBurstLength, MaxOutstandingR2T,
    /// MaxRecvDataSegmentLength); repeatable. The result records what was asked
    /// (`NAME_asked`) beside what the target granted
    #[arg(long, value_name = "KEY=VALUE,...", requires = "share", value_parser = |text: &str| text.parse::<IscsiKeys>().map_err(|e| crate::flags::line(&e)))]
    pub iscsi: Vec<IscsiKeys>,
    /// The narrowest link between client and server: a name (1gbe, 10gbe, 2.5gbe) or a rate (940Mb/s)
    #[arg(long, value_name = "SPEC", value_parser = |text: &str| LinkSpec::parse_network(text).map_err(|e| crate::flags::line(&e)))]
    pub link: Option<LinkSpec>,
    /// quick (about 45 s), full (several minutes: more disk tests, 4-stream network tests, the CPU hop)
    /// or seq (about 20 s: only the 1 MiB sequential read and write the verdict weighs, one stream
    /// each way; no IOPS or latency figure)
    #[arg(long, default_value = "quick", value_parser = clap::builder::PossibleValuesParser::new(Preset::NAMES))]
    pub preset: String,
    /// Also measure the CPU hop (AES-256-GCM and CRC32C on one core, ~2 s); always on with --preset full
    #[arg(long)]
    pub cpu: bool,
    /// Measured time of each disk and network test, 500ms to 10m (e.g. 1s for a shorter
    /// check, 30s to see past a cache) [default: the preset's: quick 2s per disk test and
    /// 3s per network test, full 5s]
    #[arg(long, value_name = "DURATION")]
    pub time: Option<DurationArg>,
    /// One more disk test, RW:BS[:qN][:tN] (e.g. read:512k:q4, randread:4k:q32:t4): the one
    /// --goal is held against, instead of the verdict's figures
    #[arg(long, value_name = "SPEC")]
    pub test: Option<String>,
    /// Thresholds to pass, e.g. read=223.4MB/s,write=150MB/s,iops=20k,latency-p99=2ms
    #[arg(long, value_name = "LIST")]
    pub goal: Option<String>,
    /// A name for this run, used as its column by `compare`
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Where this machine's connections (to --server and to --share) leave from: a NIC
    /// named here is the one the verdict holds the path against
    #[command(flatten)]
    pub source: crate::commands::net::SourceArgs,
    /// Also write the whole result document to FILE
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Draw the hop chain as bars under the verdict even when stdout is not a terminal
    /// (width: $COLUMNS, else 100); on a terminal of 80 columns or more they are always drawn
    #[arg(long)]
    pub bars: bool,
    /// Token of a `headroom serve --token` server (also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// `--time`'s range: shorter than half a second a TCP stream or a disk's
/// queue has not settled; longer than ten minutes per test is `soak`'s job.
const RUN_TIME_RANGE: std::ops::RangeInclusive<Duration> = Duration::from_millis(500)..=Duration::from_secs(600);

/// What `run` will do, resolved and validated before anything runs.
#[derive(Debug)]
struct RunSetup {
    job: JobSettings,
    goals: Vec<Goal>,
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
    let share: Option<ShareTarget> =
        args.share.as_deref().map(str::parse).transpose().map_err(|e| anyhow::anyhow!("--share {e}"))?;
    // Read before anything is measured: a missing or unreadable file is the
    // user's to fix, not a failure halfway through the run.
    let credentials = match &share {
        Some(_) => {
            Credentials::load(args.credentials.as_deref()).map_err(|e| anyhow::anyhow!(crate::flags::line(&e)))?
        }
        None => Credentials::default(),
    };
    let iscsi_keys = match &share {
        Some(s) => crate::commands::disk::iscsi_keys(&args.iscsi, s.url())?,
        None => IscsiKeys::default(),
    };
    let path = match (&args.path, &args.remote_path) {
        (Some(p), _) => Some(p.clone()),
        (None, _) if args.share.is_some() => None,
        (None, Some(_)) => None,
        (None, None) => Some(std::env::current_dir().context("--path: cannot read the current directory")?),
    };
    if let Some(path) = &path {
        let meta = std::fs::metadata(path)
            .with_context(|| format!("--path {}: cannot use it (example: --path /mnt/nas)", path.display()))?;
        if !meta.is_dir() {
            bail!(
                "--path {} is not a directory; run tests a directory's filesystem (example: --path /mnt/nas)",
                path.display()
            );
        }
    }
    if let Some(remote) = &args.remote_path {
        if !super::remote::is_absolute_on_far_end(remote) {
            bail!("--remote-path {} must be absolute: it names a directory on the server (example: --remote-path /tank/bench)", remote.display());
        }
    }
    if let Some(save) = &args.save {
        crate::output::check_output_file("--save", save, "run.json")?;
    }
    if let Some(label) = &args.label {
        if label.trim().is_empty() {
            bail!("--label must not be empty (example: --label before-10gbe)");
        }
    }
    let preset = Preset::from_name(&args.preset).expect("clap admits only the preset names");
    let time = args.time.map(|t| t.0);
    if let Some(t) = time.filter(|t| !RUN_TIME_RANGE.contains(t)) {
        bail!("--time {} is out of range: 500ms to 10m per test (example: --time 1s)", DurationArg(t));
    }
    let custom_test = match &args.test {
        Some(spec) => {
            // Timed like the preset's tests by the job; these are placeholders.
            let t = headroom_disk::parse_test_spec(spec, Duration::from_secs(2), Duration::ZERO)?;
            let export = share.as_ref().is_some_and(|s| s.url().is_whole_export());
            if export && t.rw.writes() {
                bail!(
                    "--test {spec} writes, and run never writes to a whole export (iscsi://, nbd://); use a read test"
                );
            }
            if path.is_none() && args.share.is_none() {
                bail!("--test needs a disk to run on: --path DIR or --share URL");
            }
            Some(t)
        }
        None => None,
    };
    if !preset.has_random_tests() && custom_test.is_none() {
        if let Some(g) = goals.iter().find(|g| !matches!(g.metric, Metric::Read | Metric::Write)) {
            bail!(
                "--goal {}: the seq preset runs no random disk test to hold it against; \
                 use --preset quick, or add the test it means (example: --test randread:4k:q32)",
                g.metric.as_str()
            );
        }
    }
    let source = args.source.source()?;
    if source != headroom_net::Source::default() && args.server.is_none() && args.share.is_none() {
        anyhow::bail!(
            "--bind and --interface choose where connections to --server or --share leave from; \
             give one of them (a loopback run has no NIC to choose)"
        );
    }
    let server = match &args.server {
        Some(s) => {
            let mut endpoint = headroom_net::Endpoint::parse(s, args.token.clone(), headroom_job::RUN_CONNECT_TIMEOUT)
                .map_err(|e| anyhow::anyhow!("--server: {e}"))?;
            endpoint.source = source.clone();
            Some(endpoint)
        }
        None => None,
    };
    let towards = server
        .as_ref()
        .map(|e| (e.host.clone(), e.port))
        .or_else(|| share.as_ref().map(|s| (s.url().server().host.clone(), s.url().server().port)));
    // The NIC the verdict holds the path against: the one the route to the
    // server (or the share's host) leaves through, as `net` and `ping` choose it.
    let nic = towards.and_then(|(host, port)| headroom_job::interface_towards(&host, port, &source));
    let job = JobSettings {
        server,
        path,
        remote_path: args.remote_path.clone(),
        share,
        credentials,
        iscsi_keys,
        custom_test,
        hints: PathHints { link: args.link.clone(), nic },
        preset,
        time,
        cpu: args.cpu,
        label: args.label.clone(),
        source: source.clone(),
        spelling: crate::flags::SPELLING,
    };
    Ok(RunSetup { job, goals })
}

pub fn run(args: &RunArgs, out: &Output) -> anyhow::Result<Outcome> {
    let setup = setup(args)?;
    let stop = crate::signals::stop_flag();
    let (progress, iec) = (out.progress, out.iec);
    let mut bars = |plan: &headroom_runner::Plan| -> Box<dyn headroom_runner::Sink> {
        Box::new(ProgressSink::new(progress, iec, plan))
    };
    let doc = match headroom_job::main_job(&setup.job, stop, &mut bars) {
        Ok(doc) => doc,
        Err(JobError::NetFailures(failures)) => {
            for f in &failures {
                eprintln!("headroom: error: {}", headroom_report::terminal_safe(f, false));
            }
            bail!(JobError::NetFailures(failures));
        }
        Err(e) => bail!(e),
    };
    let focus = setup.job.custom_test.as_ref().map(|t| t.id.as_str());
    finish(doc, &setup.job.hints, &setup.goals, focus, args.save.as_deref(), args.bars, out)
}

/// Judges a measured document (verdict, goals), prints and saves it; a
/// missed goal is exit 1.
fn finish(
    mut doc: ResultDoc,
    hints: &PathHints,
    goals: &[Goal],
    focus: Option<&str>,
    save: Option<&Path>,
    force_bars: bool,
    out: &Output,
) -> anyhow::Result<Outcome> {
    let results = headroom_job::judge(&mut doc, hints, goals, focus)?;
    if let Some(path) = save {
        std::fs::write(path, doc.to_json() + "\n")
            .with_context(|| format!("--save {}: cannot write", path.display()))?;
    }
    if out.json {
        crate::output::write_stdout(&(doc.to_json() + "\n"));
    } else {
        let name = doc.label.clone().unwrap_or_else(|| "this run".into());
        let mut view = ResultView::new(doc, &name);
        view.goals = results.clone();
        let style = Style { color: out.color, iec: out.iec };
        let report = Report::single(view).with_bars(crate::commands::report::bar_width(force_bars));
        out.print(&presenter(Format::Table).render(&report, style));
        if let Some(path) = save {
            crate::output::write_stdout(&format!("saved {}\n", path.display()));
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
