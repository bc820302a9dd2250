//! `headroom disk PATH`: storage tests (presets or one custom test) on a
//! directory, block device or existing file. Turns the flags into the disk
//! job's settings, hands them to `headroom_job::disk` with a progress bar,
//! and prints its `headroom.result/v1` document: as JSON, or through the
//! presenter (crates/report/src/present/disk.rs). The measuring is all in
//! crates/disk, the job around it in crates/job.

use crate::output::{Outcome, Output};
use crate::progress::ProgressSink;
use anyhow::{bail, Context};
use headroom_disk::{
    resolve, DirectMode, EngineChoice, FixedBufs, Pattern, Preset, SyncMode, TestChoice, SWEEP_BLOCK_SIZES,
    SWEEP_QUEUE_DEPTHS,
};
use headroom_disk::{DiskError, DiskTarget, ShareOpener};
use headroom_job::disk::{self, DiskJobError, DiskReport};
use headroom_job::disk_spec;
use headroom_proto::{Credentials, DiskPath, IscsiKeys, Opener, ShareUrl};
use headroom_report::present::{self, disk::Layout, disk::TargetSummary};
use headroom_result::Probe;
use headroom_runner::{PrepareEvent, Sink};
use headroom_units::{DurationArg, Size};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

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
  headroom disk /tank/bench --remote nas.lan --token $TOKEN   on the NAS's own disk, printed here
  headroom disk nfs://nas.lan/export/bench   over NFS, by headroom's own client: no mount, no root
  headroom disk smb://alice@nas.lan/media    over SMB (password: HEADROOM_SMB_PASSWORD or --credentials)
  headroom disk iscsi://nas.lan/iqn.2005-10.org.freenas.ctl:vm/0 --rw read   a LUN, read-only
  headroom disk iscsi://nas.lan/iqn.2005-10.org.freenas.ctl:vm/0 --rw read --iscsi MaxOutstandingR2T=1,InitialR2T=Yes
  headroom disk nbd://nas.lan/disk --destructive             an NBD export, writes destroy its data

Sizes use dd's convention: 4k = 4096, 1M = 1048576, 1MB = 1000000.
Every result records the equivalent fio command line (--json: spec.fio_equivalent; --show-fio
prints them under the table; --fio-job FILE writes them as a fio job file).")]
pub struct DiskArgs {
    /// A directory (headroom creates, uses and removes its own test file there), or — for
    /// writes only with --destructive — a block device or an existing file; or a URL:
    /// nfs://HOST/EXPORT[/DIR], smb://[USER@]HOST/SHARE[/DIR] (a test file there),
    /// iscsi://HOST/IQN/LUN, nbd://HOST[/EXPORT] (the whole export)
    pub path: PathBuf,
    /// KEY=VALUE file (mode 600) with HEADROOM_SMB_USER, HEADROOM_SMB_PASSWORD,
    /// HEADROOM_SMB_DOMAIN, HEADROOM_ISCSI_USER, HEADROOM_ISCSI_PASSWORD; the same keys are
    /// read from the environment. Never put a password in the URL
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// With a URL: every connection to the server leaves from this address of this machine
    /// (NFS: through the interface holding it), to compare the NICs of one host. A list
    /// A,B,... spreads the jobs: job N's connection leaves from entry N mod the list's length
    #[arg(long, value_name = "ADDR", value_delimiter = ',')]
    pub bind: Vec<std::net::IpAddr>,
    /// With a URL: every connection leaves through this interface whatever the routing table
    /// says (SO_BINDTODEVICE: needs root). A list a,b,... spreads the jobs round robin as
    /// --bind's does
    #[arg(long, value_name = "NIC", value_delimiter = ',')]
    pub interface: Vec<String>,
    /// With an iscsi:// URL: login keys to offer instead of headroom's own, KEY=VALUE,...
    /// (InitialR2T, ImmediateData, MaxBurstLength, FirstBurstLength, MaxOutstandingR2T,
    /// MaxRecvDataSegmentLength); repeatable. The result records what was asked
    /// (`NAME_asked`) beside what the target granted
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = |text: &str| text.parse::<IscsiKeys>().map_err(|e| crate::flags::line(&e)))]
    pub iscsi: Vec<IscsiKeys>,
    #[command(flatten)]
    pub test: DiskTestArgs,
    /// Keep the test file afterwards
    #[arg(long)]
    pub keep: bool,
    /// Allow writing to a block device or an existing file (destroys its contents)
    #[arg(long)]
    pub destructive: bool,
    /// With --destructive: write even over a filesystem or partition table signature
    #[arg(long, requires = "destructive")]
    pub force: bool,
    /// Thresholds to pass, held against the best test of each kind (read=RATE against
    /// sequential reads, write=RATE, iops=COUNT, latency-p99=DURATION...); a missed goal exits 1.
    /// E.g. --rw read --bs 512k --qd 4 --goal read=223.4MB/s
    #[arg(long, value_name = "LIST")]
    pub goal: Option<String>,
    /// Print each test's equivalent fio command line under the table
    #[arg(long)]
    pub show_fio: bool,
    /// Also write the tests that ran as a fio job file (one job after another), to compare
    /// with fio on the same target: `fio FILE`
    #[arg(long, value_name = "FILE")]
    pub fio_job: Option<PathBuf>,
    #[command(flatten)]
    pub remote: crate::commands::remote::RemoteArgs,
}

const DEFAULT_SIZE: u64 = 1 << 30;

/// The flags that say which disk tests run: `headroom disk`'s, and the
/// tests `headroom fleet disk` hands every agent.
#[derive(clap::Args, Debug)]
pub struct DiskTestArgs {
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
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(*headroom_disk::QUEUE_DEPTH_RANGE.end())))]
    pub qd: Option<u32>,
    /// Parallel jobs (threads), each at --qd [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(*headroom_disk::JOBS_RANGE.end())))]
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
    /// Length of each per-interval sample (100ms to 10s) [default: the test's time / 20,
    /// 100ms to 1s]
    #[arg(long, value_name = "DURATION")]
    pub sample_interval: Option<DurationArg>,
    /// Percentage of reads in --rw randrw [default: 70]
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub rwmix: Option<u32>,
    /// O_DIRECT: auto (buffered with a warning where refused), on (or fail), off
    #[arg(long, default_value = "auto", value_parser = words::<DirectMode>(&["auto", "on", "off"]))]
    pub direct: DirectMode,
    /// I/O engine: auto (the asynchronous engine where available, else psync), io_uring (iocp
    /// on Windows), psync
    #[arg(long, default_value = "auto", value_parser = words::<EngineChoice>(&headroom_disk::ENGINE_WORDS))]
    pub engine: EngineChoice,
    /// io_uring's registered buffers (fio's --fixedbufs), less CPU per I/O: auto (up to
    /// 128 KiB blocks, where no device splits them), on (every block size; --fixedbufs
    /// alone), off (ordinary buffers, fio's default); the result and its fio equivalent
    /// record what ran
    #[arg(long, value_name = "WHEN", default_value = "auto", num_args = 0..=1, require_equals = true,
          default_missing_value = "on", value_parser = words::<FixedBufs>(&["auto", "on", "off"]))]
    pub fixedbufs: FixedBufs,
    /// Durable writes: none, fsync (after every write), dsync (O_DSYNC)
    #[arg(long, default_value = "none", value_parser = words::<SyncMode>(&["none", "fsync", "dsync"]))]
    pub sync: SyncMode,
    /// Data written: random (incompressible, fresh per write), zero, compressible=PCT
    #[arg(long, default_value = "random", value_name = "PATTERN")]
    pub pattern: Pattern,
}

/// A flag that takes one of a few words: clap lists and checks the words (its
/// error and `--help` name them), and hands over the type they parse into.
/// Written here because clap's `map` over a `PossibleValuesParser` drops the
/// list from `--help`.
#[derive(Clone)]
struct Words<T> {
    accepted: clap::builder::PossibleValuesParser,
    parsed: std::marker::PhantomData<fn() -> T>,
}

fn words<T>(accepted: &'static [&'static str]) -> Words<T> {
    Words { accepted: clap::builder::PossibleValuesParser::new(accepted), parsed: std::marker::PhantomData }
}

impl<T> clap::builder::TypedValueParser for Words<T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Debug,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let word = self.accepted.parse_ref(cmd, arg, value)?;
        Ok(word.parse::<T>().expect("clap accepted only the listed words, each of which parses"))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        self.accepted.possible_values()
    }
}

impl DiskTestArgs {
    /// The flags as the disk engine's preset resolution takes them.
    pub fn choice(&self) -> TestChoice {
        TestChoice {
            preset: self.preset.clone(),
            rw: self.rw.clone(),
            bs: self.bs,
            qd: self.qd,
            jobs: self.jobs,
            size: self.size,
            time: self.time,
            ramp: self.ramp,
            sample_interval: self.sample_interval,
            rwmix: self.rwmix,
            direct: self.direct,
            engine: self.engine,
            fixedbufs: self.fixedbufs,
            sync: self.sync,
            pattern: self.pattern,
        }
    }
}

/// For a URL PATH: checks it (exit 2 before anything connects) and loads the
/// credentials; None for a local path.
fn share_opener(args: &DiskArgs, remote: bool) -> anyhow::Result<Option<Arc<dyn ShareOpener>>> {
    let text = args.path.to_string_lossy();
    let path = DiskPath::parse(&args.path).map_err(|e| user_error(DiskError::Usage(e.to_string())))?;
    let Some(share) = path.share() else {
        let flag = if !args.iscsi.is_empty() {
            Some("--iscsi")
        } else if args.credentials.is_some() {
            Some("--credentials")
        } else if !args.bind.is_empty() {
            Some("--bind")
        } else {
            args.interface.first().map(|_| "--interface")
        };
        if let Some(flag) = flag {
            bail!("{flag} is for nfs://, smb://, iscsi:// and nbd:// targets, and PATH {text} is a path");
        }
        return Ok(None);
    };
    let iscsi_keys = iscsi_keys(&args.iscsi, share.url())?;
    if remote {
        bail!("PATH {text} is a URL: headroom's protocol clients run here, without --remote (the server's own disk is /its/path --remote HOST)");
    }
    let credentials =
        Credentials::load(args.credentials.as_deref()).map_err(|e| anyhow::anyhow!(crate::flags::line(&e)))?;
    let sources = sources(&args.bind, &args.interface)?;
    let opener = Opener::new(credentials).from_sources(sources).with_iscsi_keys(iscsi_keys).for_share(share.clone());
    Ok(Some(Arc::new(opener)))
}

/// `--bind A,B,...` and `--interface a,b,...` as the sources jobs take round
/// robin, each checked as a single one is: one value applies to every
/// entry of the other list; two lists of several pair up, so their lengths
/// must match.
fn sources(bind: &[std::net::IpAddr], interface: &[String]) -> anyhow::Result<Vec<headroom_net::Source>> {
    if bind.len() > 1 && interface.len() > 1 && bind.len() != interface.len() {
        bail!(
            "--bind names {} sources and --interface {}: give one of them a single value, or lists of the same \
             length (entry N of each pairs up)",
            bind.len(),
            interface.len()
        );
    }
    let pick = |n: usize, i: usize| (n > 0).then_some(i % n.max(1));
    (0..bind.len().max(interface.len()))
        .map(|i| {
            let args = crate::commands::net::SourceArgs {
                bind: pick(bind.len(), i).map(|k| bind[k]),
                interface: pick(interface.len(), i).map(|k| interface[k].clone()),
            };
            args.source()
        })
        .collect()
}

/// `--iscsi`, repeated, as one set of keys; refused for a URL that is not iscsi://.
pub fn iscsi_keys(given: &[IscsiKeys], url: &ShareUrl) -> anyhow::Result<IscsiKeys> {
    let keys = given.iter().cloned().fold(IscsiKeys::default(), IscsiKeys::merged);
    if !keys.is_empty() && !matches!(url, ShareUrl::Iscsi(_)) {
        bail!("--iscsi {keys} sets iSCSI login keys, and the target is not an iscsi:// URL");
    }
    Ok(keys)
}

/// Says the O_DIRECT fallback on stderr, beside the table (not with --json).
struct Notices {
    json: bool,
}

impl DiskReport for Notices {
    fn direct_refused(&mut self, path: &str) {
        if !self.json {
            eprintln!("headroom: warning: {path} refuses O_DIRECT; testing buffered I/O (the page cache may answer)");
        }
    }
}

pub fn run(args: &DiskArgs, out: &Output) -> anyhow::Result<Outcome> {
    let selection = resolve(&args.test.choice()).map_err(user_error)?;
    let goals = crate::output::parse_goal_flag(args.goal.as_deref())?;
    let stop = crate::signals::stop_flag();
    let target = DiskTarget {
        path: args.path.clone(),
        size: args.test.size.map(|s| s.0),
        default_size: DEFAULT_SIZE,
        destructive: args.destructive,
        force: args.force,
        keep: args.keep,
    };
    let server = args.remote.endpoint();
    let share = share_opener(args, server.is_some())?;
    if let Some(file) = &args.fio_job {
        crate::output::check_output_file("--fio-job", file, "cdm.fio")?;
    }
    if server.is_some() && !super::remote::is_absolute_on_far_end(&args.path) {
        bail!(
            "PATH {} must be absolute with --remote: it names a directory on the server (example: headroom disk /tank/bench --remote nas.lan)",
            args.path.display()
        );
    }
    let layout = match selection.preset {
        Some(Preset::Sweep) => Layout::Sweep { block_sizes: &SWEEP_BLOCK_SIZES, queue_depths: &SWEEP_QUEUE_DEPTHS },
        Some(Preset::Sync) => Layout::Sync,
        _ => Layout::Table,
    };
    let job = disk::DiskJob { target, selection, server, share, goals, spelling: crate::flags::SPELLING };
    let (progress, iec) = (out.progress && !out.json, out.iec);
    let mut bars = |plan: &headroom_runner::Plan| -> Box<dyn Sink> { Box::new(ProgressSink::new(progress, iec, plan)) };
    let done = match disk::run(job, stop, &mut bars, &mut Notices { json: out.json }) {
        Ok(done) => done,
        Err(e @ DiskJobError::StoppedInLayout) => {
            eprintln!("headroom: {e}");
            return Ok(Outcome::Error);
        }
        Err(e) => bail!(e),
    };
    let doc = done.doc;
    if out.json {
        out.print_json(&doc)?;
    } else {
        let Some(PrepareEvent::DiskTarget { path, kind, filesystem, size }) = &done.target else {
            bail!("the disk engine did not report its target");
        };
        let target = TargetSummary { path, kind, filesystem: filesystem.as_deref(), size: *size };
        out.print(&present::disk::render(&doc, &target, layout, out.style()));
        if args.show_fio {
            out.print(&fio_lines(&doc.probes));
        }
    }
    if let Some(file) = &args.fio_job {
        write_fio_job(file, &doc.probes)?;
    }
    if let Some(e) = done.failure {
        bail!(e);
    }
    if stop.load(Ordering::Relaxed) {
        eprintln!("headroom: stopped by a signal; the figures above cover what was measured");
        return Ok(Outcome::Error);
    }
    Ok(crate::output::goal_outcome(&done.goals, out))
}

/// Each test's fio equivalent, for `--show-fio`.
fn fio_lines(probes: &[Probe]) -> String {
    let mut text = String::from("fio equivalents:\n");
    for p in probes {
        let line =
            disk_spec(p).and_then(|d| d.fio_equivalent.as_deref()).unwrap_or("(fio has no engine for this protocol)");
        text += &format!("  {}: {line}\n", p.name);
    }
    text
}

/// `--fio-job FILE`: the tests that ran, as one fio job file.
fn write_fio_job(file: &std::path::Path, probes: &[Probe]) -> anyhow::Result<()> {
    let commands: Vec<(&str, Option<&str>)> =
        probes.iter().map(|p| (p.name.as_str(), disk_spec(p).and_then(|d| d.fio_equivalent.as_deref()))).collect();
    let job = headroom_disk::fio_job_file(&commands).map_err(anyhow::Error::msg)?;
    std::fs::write(file, job).with_context(|| format!("--fio-job {}: cannot write", file.display()))
}

fn user_error(e: DiskError) -> anyhow::Error {
    anyhow::anyhow!(crate::flags::line(&e))
}
