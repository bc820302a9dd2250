//! The main job, `headroom run`: which probes each preset runs, running them
//! on one Runner (CPU hop, network, disk, in that order) and assembling the
//! measured document; then holding it against the analysis and the goals.
//!
//! The steps use the same engines and the same post-processing as the single
//! commands (`disk`, `net`, `cpu`), so `run` measures exactly what they do.
//!
//! Long (about 530 lines): the preset plans and the steps of the one job are kept together so that
//! what `run` measures reads top to bottom.

use crate::disk::DiskFailure;
use crate::path::{disk_under, link_towards};
use crate::post::cpu_probe_with_link;
use crate::steps::{hold_goals, warn_missed, StepSinks};
use crate::Spelling;
use headroom_analysis::{annotate, evaluate, BadLinkSpec, Goal, GoalResult, LinkSpec, LinkTarget, PathHints};
use headroom_cpu::{BufferSpec, CpuEngine, CpuRequest};
use headroom_disk::{BusCeiling, DiskEngine, DiskRequest, DiskTarget, TestChoice, TestDef};
use headroom_net::{
    Endpoint, FarCpuWatch, NetEngine, NetRequest, NetServer, NetTest, ProtocolChoice, RemoteEngine, ThroughputSpec,
    TrafficDirection,
};
use headroom_proto::{Credentials, IscsiKeys, Opener, ShareTarget, ShareUrl, FILE_SERVER_DAEMONS};
use headroom_result::details::cpu_load_key;
use headroom_result::{CpuLoad, Side};
use headroom_result::{Host, NetProtocol, Probe, ProbeSpec, ResultDoc, Warning};
use headroom_runner::{EngineKind, Plan, ProbeError, ProbeRequest, ProbeRun, Runner, Sink};
use headroom_sys::ServingQuery;
use headroom_units::{DurationArg, Size};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How much `run` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// About 45 s: 6 short disk tests, one stream each way.
    Quick,
    /// Several minutes: CrystalDiskMark's disk set, round trips, 1 and 4
    /// streams each way, the CPU hop.
    Full,
    /// About 20 s: quick's 1 MiB sequential read and write only (the
    /// figures the verdict weighs) and one stream each way; no random test,
    /// so no IOPS or latency figure of the disk.
    Seq,
}

impl Preset {
    /// The names `--preset` takes, in the order the help lists them.
    pub const NAMES: [&'static str; 3] = ["quick", "full", "seq"];

    /// The preset `--preset NAME` names, if any.
    pub fn from_name(name: &str) -> Option<Preset> {
        match name {
            "quick" => Some(Preset::Quick),
            "full" => Some(Preset::Full),
            "seq" => Some(Preset::Seq),
            _ => None,
        }
    }

    /// Whether its disk tests include random ones, which the IOPS and
    /// latency goals are held against.
    pub fn has_random_tests(self) -> bool {
        self != Preset::Seq
    }
}

/// What the main job measures, validated by the caller.
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// Where this machine's connections leave from (`--bind`, `--interface`):
    /// to the server and to the share.
    pub source: headroom_net::Source,
    /// A `headroom serve` or iperf3 server with its token, reached from
    /// `source` within `run`'s connect timeout ([`RUN_CONNECT_TIMEOUT`]);
    /// None: a loopback headroom server in this process.
    pub server: Option<Endpoint>,
    /// Directory whose filesystem the disk probes test here (a mounted share
    /// for the client's view); None: no disk probes here.
    pub path: Option<PathBuf>,
    /// Directory on the server (`--server`) whose disk the server itself
    /// measures (`headroom serve --allow-path` must cover it).
    pub remote_path: Option<PathBuf>,
    /// An `nfs://`, `smb://`, `iscsi://` or `nbd://` URL the disk probes test
    /// through headroom's own protocol client (instead of `path`).
    pub share: Option<ShareTarget>,
    /// The user names and secrets for the share, loaded by the caller.
    pub credentials: Credentials,
    /// iSCSI login keys to offer instead of headroom's own (`--iscsi`).
    pub iscsi_keys: IscsiKeys,
    /// `--test RW:BS[:qN][:tN]`: one more disk test on the path or share, the
    /// one the goals are held against (e.g. IOMeter's 512K sequential read).
    pub custom_test: Option<TestDef>,
    /// What the verdict holds the path against: the narrowest link between
    /// client and server (`--link`, which the CPU hop is held against too)
    /// and the NIC towards the server. Carried once, to the CPU step and to
    /// [`judge`].
    pub hints: PathHints,
    /// Quick, full or seq.
    pub preset: Preset,
    /// Each disk and network test's measured time (`--time`); None: the
    /// preset's (quick: 2 s per disk test, 3 s per network test).
    pub time: Option<Duration>,
    /// Measure the CPU hop too (always with the full preset).
    pub cpu: bool,
    /// The run's name in `compare`.
    pub label: Option<String>,
    /// How errors and warnings name a setting (the binary's flags); the
    /// loopback server (no `server`) names its limits with it too.
    pub spelling: Spelling,
}

/// Why the main job stopped without a document.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Ctrl-C: what was measured is not a whole run, so nothing is analysed.
    #[error("stopped (Ctrl-C, SIGTERM or SIGHUP) before the run finished; nothing was saved")]
    Stopped,
    /// One or more network probes failed (each `label: reason`).
    #[error("network probes failed: {}", .0.join("; "))]
    NetFailures(Vec<String>),
    /// A step could not run (the message says which and why).
    #[error("{0}")]
    Failed(String),
    /// A disk setting out of range, named for the front end to spell.
    #[error("{0}")]
    Invalid(headroom_units::setting::Message<headroom_disk::Setting>),
}

fn failed(what: &str, e: impl std::fmt::Display) -> JobError {
    JobError::Failed(format!("{what}: {e}"))
}

/// The disk tests of a preset: quick is 6 tests x (2 s + 0.5 s warm-up) on a
/// 256 MiB file, so the no-argument run stays under a minute; its 250 ms
/// samples give each test 8, enough for `compare` to tell a difference from
/// noise (2 one-second samples never can). full is CrystalDiskMark's set.
/// `bus` is the ceiling of the bus under `path`, when it is known.
/// `time`, when given, replaces each test's measured time (`run --time`).
pub fn disk_plan_of_preset(
    path: &Path,
    preset: Preset,
    time: Option<Duration>,
    bus: Option<&BusCeiling>,
) -> Result<Plan, JobError> {
    Ok(disk_plan(path, preset, time, bus, false, None)?.0)
}

/// The disk tests of a preset and `custom` (timed like the preset's), only
/// the reads when `reads_only` (a whole iSCSI LUN or NBD export, which `run`
/// never writes).
fn disk_plan(
    path: &Path,
    preset: Preset,
    time: Option<Duration>,
    bus: Option<&BusCeiling>,
    reads_only: bool,
    custom: Option<&TestDef>,
) -> Result<(Plan, Vec<DiskRequest>), JobError> {
    let choice = match preset {
        Preset::Full => TestChoice { preset: Some("cdm".into()), time: time.map(DurationArg), ..TestChoice::default() },
        Preset::Quick | Preset::Seq => TestChoice {
            preset: Some("quick".into()),
            time: Some(DurationArg(time.unwrap_or(Duration::from_secs(2)))),
            ramp: Some(DurationArg(Duration::from_millis(500))),
            size: Some(Size(256 << 20)),
            // The disk engine's default: about 20 samples of each 2 s test.
            sample_interval: None,
            ..TestChoice::default()
        },
    };
    let mut selection = headroom_disk::resolve(&choice).map_err(|e| match e {
        headroom_disk::DiskError::Invalid(m) => JobError::Invalid(m),
        e => JobError::Failed(e.to_string()),
    })?;
    if let (Some(custom), Some(first)) = (custom, selection.tests.first().cloned()) {
        if !selection.tests.iter().any(|t| t.id == custom.id) {
            let timed = TestDef {
                time: first.time,
                ramp: first.ramp,
                sample_interval: first.sample_interval,
                ..custom.clone()
            };
            selection.tests.push(timed);
        }
    }
    if reads_only {
        selection.tests.retain(|t| !t.rw.writes());
    }
    if preset == Preset::Seq {
        selection.tests.retain(|t| !t.rw.is_random() || custom.is_some_and(|c| c.id == t.id));
    }
    let target = DiskTarget {
        path: path.to_path_buf(),
        size: choice.size.map(|s| s.0),
        default_size: 1 << 30,
        destructive: false,
        force: false,
        keep: false,
    };
    Ok(DiskRequest::plan(&target, &selection, bus))
}

/// The network tests of a preset against `server`: one stream each way
/// (quick, 3 s), or the round trips and 1 and 4 streams each way (full, 5 s,
/// round trips measured under load too); each test `time` long instead
/// when it is given (`run --time`).
pub fn net_plan_of_preset(server: &NetServer, preset: Preset, time: Option<Duration>) -> Plan {
    let full = preset == Preset::Full;
    let time = time.unwrap_or(Duration::from_secs(if full { 5 } else { 3 }));
    let throughput = |direction, streams| {
        NetTest::Throughput(ThroughputSpec {
            direction,
            streams,
            duration: time,
            bytes: None,
            len: headroom_net::DEFAULT_TCP_LEN,
            udp_rate: None,
            rtt_under_load: full,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
            sample_interval: Some(headroom_runner::sample_interval_for(time)),
        })
    };
    let mut tests = Vec::new();
    if full {
        tests.push(NetTest::Rtt { time, busy_poll: false });
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

/// The CPU hop's plan on a machine with `host`'s memory.
pub fn cpu_hop_plan(host: &Host) -> Result<Plan, JobError> {
    let kernels = headroom_cpu::select_kernels(&CPU_HOP_KERNELS.map(String::from)).map_err(|e| failed("cpu", e))?;
    let default = headroom_cpu::default_memory_buffer();
    let bytes = host.memory_bytes.map_or(default, |ram| default.min(ram / 2));
    let buffer = BufferSpec { bytes, cache_resident: false };
    let time = Duration::from_millis(250);
    let warmup = Duration::from_millis(50);
    Ok(Plan::new(kernels.into_iter().map(|k| CpuRequest::new(k, 1, buffer, time, warmup).to_request()).collect()))
}

/// The CPU hop's probes, held against the link `--link` names when it is a
/// catalog name (a rate is held against by the verdict itself).
fn cpu_probes(runs: Vec<ProbeRun>, link: Option<&LinkSpec>, host: &Host) -> Result<Vec<Probe>, JobError> {
    let link = LinkTarget::choose(link.filter(|spec| spec.family.is_some()), &host.nics);
    let mut probes = Vec::new();
    for run in runs {
        if let Some(e) = run.error() {
            return Err(failed("CPU probes", e));
        }
        let probe = run.probe().and_then(headroom_cpu::measurement_of).expect("a measured cpu probe");
        probes.push(cpu_probe_with_link(&probe, &link));
    }
    Ok(probes)
}

/// The network probes, each held against the link towards the server; any
/// failure fails the run.
fn net_probes(runs: Vec<ProbeRun>, server: &NetServer) -> Result<Vec<Probe>, JobError> {
    let ceiling = link_towards(&server.host, server.port, None);
    let mut probes = Vec::new();
    let mut failures = Vec::new();
    for run in runs {
        match run.result {
            Err(e @ (ProbeError::Unreachable(_) | ProbeError::Refused(_))) if probes.is_empty() => {
                return Err(failed("network probes", e))
            }
            Err(ProbeError::Abandoned) => break,
            Err(e) => failures.push(format!("{}: {e}", run.request.label)),
            Ok(m) => {
                let p = headroom_analysis::net_probe_against_link(m.probe, &ceiling);
                if let Some(e) = p.error() {
                    failures.push(format!("{}: {e}", p.name));
                }
                probes.push(p);
            }
        }
    }
    if failures.is_empty() {
        Ok(probes)
    } else {
        Err(JobError::NetFailures(failures))
    }
}

/// Runs `plan` on `runner`, stopping at its first error when `stop_on_error`.
fn run_step(
    runner: &mut Runner,
    plan: &Plan,
    stop: &AtomicBool,
    sinks: &mut StepSinks<'_>,
    stop_on_error: bool,
) -> Vec<ProbeRun> {
    run_step_watched(runner, plan, stop, sinks, stop_on_error, None)
}

/// [`run_step`] with one more sink beside the caller's (a far-end CPU watch).
fn run_step_watched(
    runner: &mut Runner,
    plan: &Plan,
    stop: &AtomicBool,
    sinks: &mut StepSinks<'_>,
    stop_on_error: bool,
    extra: Option<&mut dyn Sink>,
) -> Vec<ProbeRun> {
    let mut sink = sinks(plan);
    let mut go = |all: &mut [&mut dyn Sink]| {
        if stop_on_error {
            runner.run_all(plan, stop, all)
        } else {
            runner.execute(plan, stop, all).collect()
        }
    };
    match extra {
        Some(extra) => go(&mut [sink.as_mut(), extra]),
        None => go(&mut [sink.as_mut()]),
    }
}

/// Watches the far end's CPU around each probe of a step here (a disk probe
/// on the server's share loads the server's cores), keeping what it saw by
/// request index. A server that cannot be watched (an older one, iperf3)
/// leaves the probes without the far end's CPU.
struct FarCpuSink {
    server: Endpoint,
    serving: ServingQuery,
    watching: Option<FarCpuWatch>,
    loads: HashMap<usize, CpuLoad>,
}

impl Sink for FarCpuSink {
    fn probe_started(&mut self, _index: usize, _request: &ProbeRequest) {
        self.watching = FarCpuWatch::start(&self.server, Some(self.serving.clone())).ok();
    }

    fn probe_finished(&mut self, index: usize, _run: &ProbeRun) {
        if let Some(load) = self.watching.take().and_then(|w| w.end().ok()) {
            self.loads.insert(index, load);
        }
    }
}

fn check_stopped(stop: &AtomicBool) -> Result<(), JobError> {
    if stop.load(Ordering::SeqCst) {
        return Err(JobError::Stopped);
    }
    Ok(())
}

/// The network step: against `settings.server`, or an in-process loopback
/// headroom server that stops when the step ends.
fn network_step(
    runner: &mut Runner,
    settings: &JobSettings,
    stop: &AtomicBool,
    sinks: &mut StepSinks<'_>,
) -> Result<Vec<Probe>, JobError> {
    let loopback = match &settings.server {
        Some(_) => None,
        None => Some(
            headroom_net::Server::bind(headroom_net::ServerConfig {
                spelling: settings.spelling.serve,
                ..headroom_net::ServerConfig::loopback(0)
            })
            .map_err(|e| failed("starting the loopback server", e))?
            .spawn(),
        ),
    };
    let server = match (&settings.server, &loopback) {
        (Some(server), _) => server.clone(),
        (None, loopback) => {
            let addr = loopback.as_ref().expect("started above").addr;
            Endpoint {
                host: addr.ip().to_string(),
                port: addr.port(),
                token: None,
                timeout: RUN_CONNECT_TIMEOUT,
                source: settings.source.clone(),
            }
        }
    };
    let Endpoint { host, port, token, timeout, source } = server;
    let server =
        NetServer { host, port, token, timeout, source, protocol: ProtocolChoice::Auto, session_per_test: false };
    let runs = run_step(runner, &net_plan_of_preset(&server, settings.preset, settings.time), stop, sinks, false);
    runner.finish();
    check_stopped(stop)?;
    net_probes(runs, &server)
}

/// How long `run` waits for the server to answer a connection.
pub const RUN_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A disk step: `plan` on `runner` through the disk job's loop (the same
/// as `headroom disk`'s), the test files removed after it; the probes with
/// their write-cliff check, and the step's warnings. Any failure fails the
/// step: a run is judged whole. With `far_end`, each probe also records the
/// CPU of the server there (`details.cpu_load_remote`).
fn disk_step(
    runner: &mut Runner,
    (plan, requests): &(Plan, Vec<DiskRequest>),
    what: &str,
    stop: &AtomicBool,
    sinks: &mut StepSinks<'_>,
    far_end: Option<(Endpoint, ServingQuery)>,
) -> Result<(Vec<Probe>, Vec<Warning>), JobError> {
    let mut watch =
        far_end.map(|(server, serving)| FarCpuSink { server, serving, watching: None, loads: HashMap::new() });
    let extra = watch.as_mut().map(|w| w as &mut dyn Sink);
    let measured = crate::disk::measure(runner, plan, requests, stop, sinks, extra, &mut crate::disk::Quiet);
    check_stopped(stop)?;
    match measured.failure {
        None => {}
        Some(DiskFailure::StoppedInLayout) => return Err(failed(what, ProbeError::Stopped)),
        Some(DiskFailure::Refused(e) | DiskFailure::Failed(e)) => return Err(failed(what, e)),
    }
    let mut far_loads = watch.map(|w| w.loads).unwrap_or_default();
    let mut probes = measured.probes;
    for (index, probe) in probes.iter_mut().enumerate() {
        if let Some(load) = far_loads.remove(&index) {
            let load = serde_json::to_value(load).expect("a CPU load is plain data");
            probe.details.insert(cpu_load_key(Side::Remote).into(), load);
        }
    }
    Ok((probes, measured.warnings))
}

/// The far end's own disk at `remote_path`, measured by the server, and the
/// server's inventory for the document's `peers`.
fn far_end_step(
    settings: &JobSettings,
    remote_path: &Path,
    stop: &AtomicBool,
    sinks: &mut StepSinks<'_>,
) -> Result<(Vec<Probe>, Host), JobError> {
    let server = settings.server.clone().ok_or_else(|| failed("the server's disk", "needs a server"))?;
    let peer = headroom_net::peer_inventory(&server).map_err(|e| failed("the server's inventory", e))?;
    let (plan, requests) = disk_plan(remote_path, settings.preset, settings.time, None, false, None)?;
    let plan = (plan.placed_at(&server.display()), requests);
    let remote = RemoteEngine::new(EngineKind::Disk, server).spelling_settings(settings.spelling.net);
    let mut runner = Runner::new().with(remote);
    let (probes, _) = disk_step(&mut runner, &plan, "the server's disk probes", stop, sinks, None)?;
    Ok((probes, peer))
}

/// Over a share of the server: the server whose CPU to watch while this
/// machine reads and writes there, and how it finds the processes serving
/// the share: the URL's port and its protocol's daemons, or any file
/// server's daemons for a mounted share. Watched when the server measures
/// its own disk too (`--remote-path`: it is a headroom serve, and the path
/// here is its share), or when the share's URL names the server and the
/// server answered the network step as a headroom serve (`serve_speaks`); a
/// mounted path without `--remote-path` may be this machine's own disk, and
/// an iperf3 server has no CPU to report.
fn far_end_cpu(
    settings: &JobSettings,
    share: Option<&ShareUrl>,
    serve_speaks: bool,
) -> Result<Option<(Endpoint, ServingQuery)>, JobError> {
    let Some(server) = &settings.server else { return Ok(None) };
    let share_on_the_server = share.is_some_and(|url| url.server().host == server.host);
    if settings.remote_path.is_none() && !(serve_speaks && share_on_the_server) {
        return Ok(None);
    }
    let serving = match share {
        Some(url) => ServingQuery {
            port: Some(url.server().port),
            names: url.server_daemons().iter().map(|n| n.to_string()).collect(),
        },
        None => ServingQuery { port: None, names: FILE_SERVER_DAEMONS.iter().map(|n| n.to_string()).collect() },
    };
    Ok(Some((server.clone(), serving)))
}

/// Runs the main job: the CPU hop (when asked), the network, the server's
/// own disk (with `remote_path`), the disk here (with `path`); each step's
/// progress goes to the sink `sinks` makes for its plan. Returns the
/// measured document, not yet analysed ([`judge`] does that).
pub fn main_job(settings: &JobSettings, stop: &AtomicBool, sinks: &mut StepSinks<'_>) -> Result<ResultDoc, JobError> {
    let started_at = headroom_result::now_rfc3339();
    let host = headroom_sys::inventory_live();
    let disk = DiskEngine::new().spelling_settings(settings.spelling.disk);
    let net = NetEngine::new().spelling_settings(settings.spelling.net);
    let mut runner = Runner::new().with(CpuEngine::new()).with(net).with(disk);

    let mut probes: Vec<Probe> = Vec::new();
    let mut warnings: Vec<Warning> = Vec::new();
    let mut peers = Vec::new();
    if settings.cpu || settings.preset == Preset::Full {
        let runs = run_step(&mut runner, &cpu_hop_plan(&host)?, stop, sinks, true);
        check_stopped(stop)?;
        probes.extend(cpu_probes(runs, settings.hints.link.as_ref(), &host)?);
    }
    probes.extend(network_step(&mut runner, settings, stop, sinks)?);
    let serve_speaks =
        probes.iter().any(|p| matches!(&p.spec, ProbeSpec::Net(n) if n.protocol == NetProtocol::Headroom));
    if let Some(remote_path) = &settings.remote_path {
        let (far, peer) = far_end_step(settings, remote_path, stop, sinks)?;
        probes.extend(far);
        peers.push(peer);
    }
    if let Some(share) = &settings.share {
        let opener = Opener::new(settings.credentials.clone())
            .from_source(settings.source.clone())
            .with_iscsi_keys(settings.iscsi_keys.clone())
            .for_share(share.clone());
        let disk = DiskEngine::new().spelling_settings(settings.spelling.disk).with_shares(Arc::new(opener));
        let mut runner = Runner::new().with(disk);
        // A whole export holds someone's data: run reads only there.
        let export = share.url().is_whole_export();
        let plan = disk_plan(
            Path::new(share.as_str()),
            settings.preset,
            settings.time,
            None,
            export,
            settings.custom_test.as_ref(),
        )?;
        let far_end = far_end_cpu(settings, Some(share.url()), serve_speaks)?;
        let (here, step_warnings) = disk_step(&mut runner, &plan, share.as_str(), stop, sinks, far_end)?;
        probes.extend(here);
        warnings.extend(step_warnings);
    }
    if let Some(path) = &settings.path {
        let under = disk_under(path);
        let bus = under.bus;
        let plan = disk_plan(path, settings.preset, settings.time, bus.as_ref(), false, settings.custom_test.as_ref())?;
        let far_end = far_end_cpu(settings, None, serve_speaks)?;
        let (here, step_warnings) = disk_step(&mut runner, &plan, "disk probes", stop, sinks, far_end)?;
        probes.extend(here);
        warnings.extend(step_warnings);
        warnings.extend(under.warning);
    }

    let mut doc = ResultDoc::new(started_at);
    doc.label = settings.label.clone();
    doc.host = host;
    doc.probes = probes;
    doc.warnings = warnings;
    doc.peers = peers;
    Ok(doc)
}

/// Analyses a measured document (ceilings, verdict) and holds the goals
/// against it (against the probe of id `focus` alone when given: `run
/// --test`); every missed goal also becomes a warning in the document.
pub fn judge(
    doc: &mut ResultDoc,
    hints: &PathHints,
    goals: &[Goal],
    focus: Option<&str>,
) -> Result<Vec<GoalResult>, BadLinkSpec> {
    let analysis = annotate(doc, hints)?;
    let Some(id) = focus else { return Ok(hold_goals(doc, goals, Some(&analysis))) };
    let mut only = ResultDoc::new(doc.started_at.clone());
    only.probes = doc.probes.iter().filter(|p| p.id == id).cloned().collect();
    let results = evaluate(goals, &only, None);
    warn_missed(doc, &results);
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_hop_is_one_thread_out_of_cache_on_its_two_kernels() {
        let plan = cpu_hop_plan(&Host::default()).unwrap();
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
            source: Default::default(),
            protocol: ProtocolChoice::Auto,
            session_per_test: false,
        };
        let labels = |preset| {
            net_plan_of_preset(&server, preset, None).requests.into_iter().map(|r| r.label).collect::<Vec<_>>()
        };
        assert_eq!(labels(Preset::Quick), ["TCP up x1", "TCP down x1"]);
        assert_eq!(labels(Preset::Full), ["TCP RR idle", "TCP up x1", "TCP down x1", "TCP up x4", "TCP down x4"]);
    }

    #[test]
    fn the_seq_preset_keeps_quicks_sequential_tests_and_a_custom_random_one() {
        let ids = |preset, custom: Option<&TestDef>| {
            let (_, requests) = disk_plan(Path::new("/tmp"), preset, None, None, false, custom).unwrap();
            requests.iter().map(|r| r.test.id.clone()).collect::<Vec<_>>()
        };
        assert_eq!(ids(Preset::Seq, None), ["seq1m-q8t1-read", "seq1m-q8t1-write"]);
        assert_eq!(ids(Preset::Quick, None).len(), 6);
        let custom = headroom_disk::parse_test_spec("randread:4k:q4", Duration::from_secs(2), Duration::ZERO).unwrap();
        assert_eq!(ids(Preset::Seq, Some(&custom)), ["seq1m-q8t1-read", "seq1m-q8t1-write", custom.id.as_str()]);
        for name in Preset::NAMES {
            assert_eq!(Preset::from_name(name).map(|p| p.has_random_tests()), Some(name != "seq"));
        }
    }
}
