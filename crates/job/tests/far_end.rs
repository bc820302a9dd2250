//! The far end over a real socket: a `headroom serve` (in process) running
//! disk and CPU probes for a client's Runner through `RemoteEngine`, with the
//! operator's `--allow-path`, duration limit and one-probe-at-a-time rule.

use headroom_disk::{test_def, DiskRequest, DiskTarget, RunSettings, Rw};
use headroom_job::{ServeSetting, ServedProbes};
use headroom_net::wire::TrafficDirection;
use headroom_net::{
    Endpoint, NetRequest, NetServer, NetTest, ProtocolChoice, RemoteEngine, Server, ServerConfig, ServerHandle,
    ThroughputSpec,
};
use headroom_result::details::cpu_load_key;
use headroom_result::Side;
use headroom_runner::{EngineKind, LiveSample, Plan, PrepareEvent, ProbeError, ProbeRequest, ProbeRun, Runner, Sink};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

fn serve(allowed: &[PathBuf], max_duration: Duration) -> ServerHandle {
    let probes = ServedProbes::new(allowed)
        .expect("allowed directories")
        .spelling_disk_settings(flag)
        .spelling_serve_settings(serve_flag)
        .spelling_cpu_settings(cpu_flag);
    let cfg = ServerConfig { probes: Some(Arc::new(probes)), max_duration, ..ServerConfig::loopback(0) };
    Server::bind(cfg).expect("bind").spawn()
}

/// The command line's spelling of the settings these tests see refused (the
/// binary's `serve` passes its own table).
fn flag(setting: headroom_disk::Setting) -> &'static str {
    use headroom_disk::Setting::*;
    match setting {
        QueueDepth => "--qd",
        BlockSize => "--bs",
        Jobs => "--jobs",
        Ramp => "--ramp",
        Time => "--time",
        SampleInterval => "--sample-interval",
        _ => "another flag",
    }
}

/// `headroom cpu`'s spelling of the settings a CPU probe is refused for.
fn cpu_flag(setting: headroom_cpu::Setting) -> &'static str {
    match setting {
        headroom_cpu::Setting::Time => "--time",
        _ => "another flag",
    }
}

/// `headroom serve`'s spelling of its own settings (the binary's table).
fn serve_flag(setting: ServeSetting) -> &'static str {
    match setting {
        ServeSetting::AllowPath => "--allow-path",
        ServeSetting::AllowNetTo => "--allow-net-to",
        ServeSetting::MaxJobs => "--max-jobs",
        ServeSetting::MaxBufferMemory => "--max-buffer-memory",
        ServeSetting::MaxDuration => "--max-duration",
    }
}

fn endpoint(server: &ServerHandle) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port: server.addr.port(),
        token: None,
        timeout: Duration::from_secs(5),
        source: Default::default(),
    }
}

fn read_test(dir: &Path, time: Duration) -> ProbeRequest {
    let test = test_def(Rw::Read, 1 << 20, 4, 1, time, Duration::from_millis(200));
    let target = DiskTarget {
        path: dir.to_path_buf(),
        size: Some(16 << 20),
        default_size: 16 << 20,
        destructive: false,
        force: false,
        keep: false,
    };
    DiskRequest {
        target,
        settings: RunSettings::default(),
        test: headroom_disk::TestDef { sample_interval: Duration::from_millis(200), ..test },
        bus: None,
    }
    .to_request()
}

/// Runs `request` on the server at `at`, with `sink` seeing what streams back.
fn run_remote(at: &Endpoint, request: ProbeRequest, sink: &mut dyn Sink) -> ProbeRun {
    let plan = Plan::new(vec![request]).placed_at(&at.display());
    let mut runner = Runner::new().with(RemoteEngine::new(EngineKind::Disk, at.clone()));
    let stop = AtomicBool::new(false);
    let mut runs = runner.run_all(&plan, &stop, &mut [sink]);
    runner.finish();
    runs.remove(0)
}

/// Keeps when each sample arrived and the events, and tells a channel about the first sample.
#[derive(Default)]
struct Arrivals {
    samples: Vec<Instant>,
    events: Vec<PrepareEvent>,
    first: Option<mpsc::Sender<()>>,
}

impl Sink for Arrivals {
    fn prepared(&mut self, event: &PrepareEvent) {
        self.events.push(event.clone());
    }
    fn sample(&mut self, _: usize, _: &ProbeRequest, _: &LiveSample) {
        self.samples.push(Instant::now());
        if let Some(tx) = self.first.take() {
            let _ = tx.send(());
        }
    }
}

fn test_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("headroom-disk-"))
        .collect()
}

fn refusal(run: &ProbeRun) -> String {
    match run.error() {
        Some(e) => e.to_string(),
        None => panic!("the server ran what it should have refused"),
    }
}

#[test]
fn a_remote_disk_probe_streams_its_samples_and_leaves_no_test_file() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&[dir.path().to_path_buf()], Duration::from_secs(60));
    let mut arrivals = Arrivals::default();
    let run = run_remote(&endpoint(&server), read_test(dir.path(), Duration::from_millis(1500)), &mut arrivals);
    let probe = run.probe().unwrap_or_else(|| panic!("{:?}", run.error()));
    assert!(run.error().is_none(), "{:?}", run.error());
    // Where it ran, and its id kept apart from the same test run here.
    let host = probe.host.clone().expect("a remote probe names its host");
    assert!(probe.id.ends_with(&format!("@{host}")), "{}", probe.id);
    assert!(probe.summary.bytes_per_sec > 0.0);
    // The server's CPU is the document's remote side; the client's own the local one.
    assert!(probe.details.contains_key(cpu_load_key(Side::Remote)), "{:?}", probe.details.keys());
    assert!(probe.details.contains_key(cpu_load_key(Side::Local)), "{:?}", probe.details.keys());
    // Samples arrived as they were measured, not all at the end.
    assert!(arrivals.samples.len() >= 4, "{} samples", arrivals.samples.len());
    let spread = *arrivals.samples.last().unwrap() - arrivals.samples[0];
    assert!(spread >= Duration::from_millis(800), "samples arrived within {spread:?}");
    assert!(arrivals.events.iter().any(|e| matches!(e, PrepareEvent::TestFileCreated { .. })));
    assert!(arrivals.events.iter().any(|e| matches!(e, PrepareEvent::DiskTarget { .. })));
    assert!(test_files(dir.path()).is_empty(), "left behind: {:?}", test_files(dir.path()));
}

#[test]
fn paths_outside_the_allowed_directories_are_refused() {
    let allowed = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let server = serve(&[allowed.path().to_path_buf()], Duration::from_secs(60));
    let at = endpoint(&server);

    let outside = run_remote(&at, read_test(elsewhere.path(), Duration::from_millis(300)), &mut Arrivals::default());
    assert!(refusal(&outside).contains("outside every --allow-path"), "{}", refusal(&outside));

    // A symlink inside the allowed directory that leads out of it.
    let link = allowed.path().join("out");
    std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
    let via_link = run_remote(&at, read_test(&link, Duration::from_millis(300)), &mut Arrivals::default());
    let said = refusal(&via_link);
    assert!(said.contains("outside every --allow-path") && said.contains("leads to"), "{said}");

    // A name of the allowed directory that climbs out of it.
    let climbing = allowed.path().join("..");
    let dotdot = run_remote(&at, read_test(&climbing, Duration::from_millis(300)), &mut Arrivals::default());
    assert!(refusal(&dotdot).contains("outside every --allow-path"), "{}", refusal(&dotdot));

    // A file, even inside: remote probes only create their own test files.
    let file = allowed.path().join("data.bin");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let on_file = run_remote(&at, read_test(&file, Duration::from_millis(300)), &mut Arrivals::default());
    assert!(refusal(&on_file).contains("not a directory"), "{}", refusal(&on_file));
    assert_eq!(std::fs::read(&file).unwrap(), vec![7u8; 1 << 20]);

    for dir in [allowed.path(), elsewhere.path()] {
        assert!(test_files(dir).is_empty(), "left behind in {}: {:?}", dir.display(), test_files(dir));
    }
}

#[test]
fn a_server_without_allow_path_says_how_to_allow_disk_probes() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&[], Duration::from_secs(60));
    let run =
        run_remote(&endpoint(&server), read_test(dir.path(), Duration::from_millis(300)), &mut Arrivals::default());
    assert!(matches!(run.error(), Some(ProbeError::Refused(_))), "{:?}", run.error());
    let said = refusal(&run);
    assert!(said.contains("does not allow disk probes") && said.contains("--allow-path"), "{said}");
    assert!(test_files(dir.path()).is_empty());
}

#[test]
fn probes_longer_than_the_servers_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&[dir.path().to_path_buf()], Duration::from_secs(1));
    let run = run_remote(&endpoint(&server), read_test(dir.path(), Duration::from_secs(5)), &mut Arrivals::default());
    assert!(refusal(&run).contains("--max-duration"), "{}", refusal(&run));
}

/// A network test from the server towards `target` (127.0.0.1:PORT or a name).
fn net_test(host: &str, port: u16) -> ProbeRequest {
    let spec = ThroughputSpec {
        direction: TrafficDirection::Upload,
        streams: 1,
        duration: Duration::from_millis(500),
        bytes: None,
        len: headroom_net::DEFAULT_TCP_LEN,
        udp_rate: None,
        rtt_under_load: false,
        window: None,
        skip_rx_copy: false,
        zerocopy: false,
        udp_offload: false,
        sample_interval: None,
    };
    let server = NetServer {
        host: host.into(),
        port,
        token: None,
        timeout: Duration::from_secs(5),
        source: Default::default(),
        protocol: ProtocolChoice::Headroom,
        session_per_test: false,
    };
    NetRequest { server, test: NetTest::Throughput(spec) }.to_request()
}

fn run_net(at: &Endpoint, request: ProbeRequest) -> ProbeRun {
    let plan = Plan::new(vec![request]).placed_at(&at.display());
    let mut runner = Runner::new().with(RemoteEngine::new(EngineKind::Net, at.clone()));
    runner.run_all(&plan, &AtomicBool::new(false), &mut []).remove(0)
}

#[test]
fn network_probes_need_allow_net_to_and_go_only_there() {
    let dir = tempfile::tempdir().unwrap();
    let target = Server::bind(ServerConfig::loopback(0)).expect("bind").spawn();
    let port = target.addr.port();
    // Without --allow-net-to: refused, saying how to allow it.
    let server = serve(&[dir.path().to_path_buf()], Duration::from_secs(60));
    let run = run_net(&endpoint(&server), net_test("127.0.0.1", port));
    assert!(matches!(run.error(), Some(ProbeError::Refused(_))), "{:?}", run.error());
    assert!(refusal(&run).contains("--allow-net-to ADDR|CIDR"), "{}", refusal(&run));
    // Allowed elsewhere only: refused, naming the allowed networks.
    let allow = |nets: &[&str]| {
        let nets = nets.iter().map(|n| headroom_job::parse_allowed_net(n).unwrap()).collect();
        let probes = ServedProbes::new(&[]).unwrap().allowing_net_to(nets).spelling_serve_settings(serve_flag);
        let cfg = ServerConfig { probes: Some(Arc::new(probes)), ..ServerConfig::loopback(0) };
        Server::bind(cfg).expect("bind").spawn()
    };
    let elsewhere = allow(&["192.0.2.0/24"]);
    let run = run_net(&endpoint(&elsewhere), net_test("127.0.0.1", port));
    assert!(refusal(&run).contains("outside every --allow-net-to") && refusal(&run).contains("192.0.2.0/24"));
    // Allowed: the agent measures towards the target and the probe comes back from it.
    let agent = allow(&["127.0.0.1"]);
    let run = run_net(&endpoint(&agent), net_test("127.0.0.1", port));
    let probe = run.probe().unwrap_or_else(|| panic!("{:?}", run.error()));
    assert!(probe.ran_remotely() && probe.summary.bytes_per_sec > 0.0, "{probe:?}");
    // A name is not checked against addresses: the client resolves it first.
    let run = run_net(&endpoint(&agent), net_test("localhost", port));
    assert!(refusal(&run).contains("by address"), "{}", refusal(&run));
}

#[test]
fn one_clients_probes_run_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&[dir.path().to_path_buf()], Duration::from_secs(60));
    let at = endpoint(&server);
    let (tx, rx) = mpsc::channel();
    let (first_at, first_dir) = (at.clone(), dir.path().to_path_buf());
    let first = std::thread::spawn(move || {
        let mut arrivals = Arrivals { first: Some(tx), ..Arrivals::default() };
        run_remote(&first_at, read_test(&first_dir, Duration::from_secs(3)), &mut arrivals)
    });
    // Once the first probe is measuring, a second client is told to wait.
    rx.recv_timeout(Duration::from_secs(60)).expect("the first probe's first sample");
    let second = run_remote(&at, read_test(dir.path(), Duration::from_millis(300)), &mut Arrivals::default());
    assert!(refusal(&second).contains("another client's probes are running"), "{}", refusal(&second));
    let first = first.join().unwrap();
    assert!(first.error().is_none(), "{:?}", first.error());
}

#[test]
fn a_session_the_server_dropped_between_probes_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let probes = ServedProbes::new(&[dir.path().to_path_buf()]).unwrap();
    // A prepared plan may idle up to --max-duration (here 2 s) between its probes.
    let cfg = ServerConfig {
        probes: Some(Arc::new(probes)),
        max_duration: Duration::from_secs(2),
        idle_timeout: Duration::from_millis(300),
        ..ServerConfig::loopback(0)
    };
    let server = Server::bind(cfg).unwrap().spawn();
    let at = endpoint(&server);
    let first = read_test(dir.path(), Duration::from_millis(400));
    let second = ProbeRequest { label: "again".into(), ..first.clone() };
    let plan = Plan::new(vec![first, second]).placed_at(&at.display());
    let mut runner = Runner::new().with(RemoteEngine::new(EngineKind::Disk, at));
    let stop = AtomicBool::new(false);
    let mut sinks: [&mut dyn Sink; 0] = [];
    let mut execution = runner.execute(&plan, &stop, &mut sinks);
    let run = execution.next().unwrap();
    assert!(run.error().is_none(), "{:?}", run.error());
    // Silent longer than the server allows: it drops the session and the test file.
    std::thread::sleep(Duration::from_secs(4));
    assert!(test_files(dir.path()).is_empty(), "the dropped session's test file: {:?}", test_files(dir.path()));
    let run = execution.next().unwrap();
    assert!(run.error().is_none(), "{:?}", run.error());
    assert!(run.probe().unwrap().summary.bytes_per_sec > 0.0);
    runner.finish();
    assert!(test_files(dir.path()).is_empty());
}

#[test]
fn after_losing_the_server_the_next_probe_opens_a_new_session_with_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let serve_on = |port: u16| {
        let probes = ServedProbes::new(&[dir.path().to_path_buf()]).unwrap();
        Server::bind(ServerConfig { probes: Some(Arc::new(probes)), ..ServerConfig::loopback(port) }).unwrap().spawn()
    };
    let server = serve_on(0);
    let at = endpoint(&server);
    let port = server.addr.port();
    let request =
        |label: &str| ProbeRequest { label: label.into(), ..read_test(dir.path(), Duration::from_millis(300)) };
    let plan = Plan::new(vec![request("one"), request("two"), request("three")]).placed_at(&at.display());
    let mut runner = Runner::new().with(RemoteEngine::new(EngineKind::Disk, at));
    let stop = AtomicBool::new(false);
    let mut sinks: [&mut dyn Sink; 0] = [];
    let mut execution = runner.execute(&plan, &stop, &mut sinks);
    assert!(execution.next().unwrap().error().is_none());
    server.stop();
    // Its session threads notice the stop within a poll (200 ms) and hang up.
    std::thread::sleep(Duration::from_millis(600));
    let gone = execution.next().unwrap();
    assert!(matches!(gone.error(), Some(ProbeError::Lost(_) | ProbeError::Unreachable(_))), "{:?}", gone.error());
    let _again = serve_on(port);
    let back = execution.next().unwrap();
    assert!(back.error().is_none(), "{:?}", back.error());
    runner.finish();
    assert!(test_files(dir.path()).is_empty());
}

/// `request` with the JSON value at `pointer` (in its params) replaced.
fn with_param(mut request: ProbeRequest, pointer: &str, value: serde_json::Value) -> ProbeRequest {
    let shown = request.params.to_string();
    *request.params.pointer_mut(pointer).unwrap_or_else(|| panic!("no {pointer} in {shown}")) = value;
    request
}

/// A token holder's specs that the command line refuses: each must be
/// refused with one line before anything runs (on today's main, qd 0 hung a
/// worker with the plan slot taken, bs 0 panicked, jobs 2^32-1 aborted the
/// server on an allocation, a duration near u64::MAX panicked on overflow,
/// sample_interval 0 busy-looped), and an honest probe runs right after.
#[test]
fn remote_specs_the_command_line_refuses_are_refused_and_the_server_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&[dir.path().to_path_buf()], Duration::from_secs(60));
    let at = endpoint(&server);
    let honest = || read_test(dir.path(), Duration::from_millis(300));
    let huge = serde_json::json!({"secs": u64::MAX, "nanos": 999_999_999});
    let zero = serde_json::json!({"secs": 0, "nanos": 0});
    let cases = [
        ("/test/queue_depth", serde_json::json!(0), "--qd"),
        ("/test/queue_depth", serde_json::json!(32768), "--qd"),
        ("/test/jobs", serde_json::json!(u32::MAX), "--jobs"),
        ("/test/jobs", serde_json::json!(20000), "--jobs"),
        ("/test/jobs", serde_json::json!(200), "--max-jobs"),
        ("/test/block_size", serde_json::json!(0), "--bs"),
        ("/test/block_size", serde_json::json!(16u64 << 20), "--max-buffer-memory"),
        ("/test/ramp", huge.clone(), "--ramp"),
        ("/test/time", huge, "--time"),
        ("/test/sample_interval", zero, "--sample-interval"),
    ];
    for (pointer, value, says) in cases {
        let mut request = with_param(honest(), pointer, value.clone());
        if says == "--max-buffer-memory" {
            // 16M x qd 4096 x 1 job: within the CLI's ranges, beyond the server's 1 GiB default.
            request = with_param(request, "/test/queue_depth", serde_json::json!(4096));
        }
        let t0 = Instant::now();
        let run = run_remote(&at, request, &mut Arrivals::default());
        let said = refusal(&run);
        assert!(said.contains(says) && !said.contains('\n'), "{pointer}={value}: {said}");
        assert!(t0.elapsed() < Duration::from_secs(10), "{pointer}={value}: refused only after {:?}", t0.elapsed());
        assert!(test_files(dir.path()).is_empty(), "{pointer}: left {:?}", test_files(dir.path()));
    }
    let cpu = headroom_cpu::CpuRequest::new(
        headroom_cpu::all_kernels()[0],
        1,
        headroom_cpu::BufferSpec { bytes: 1 << 20, cache_resident: false },
        Duration::from_millis(100),
        Duration::from_millis(10),
    )
    .to_request();
    for (pointer, value, says) in [
        ("/time", serde_json::json!({"secs": u64::MAX, "nanos": 0}), "--time"),
        ("/threads", serde_json::json!(0), "threads"),
        ("/threads", serde_json::json!(100_000), "--max-jobs"),
        ("/buffer_bytes", serde_json::json!(1u64 << 40), "--max-buffer-memory"),
        ("/kernel", serde_json::json!("md5"), "unknown cpu kernel"),
    ] {
        let plan = Plan::new(vec![with_param(cpu.clone(), pointer, value.clone())]).placed_at(&at.display());
        let mut runner = Runner::new().with(RemoteEngine::new(EngineKind::Cpu, at.clone()));
        let runs = runner.run_all(&plan, &AtomicBool::new(false), &mut []);
        runner.finish();
        assert!(refusal(&runs[0]).contains(says), "{pointer}={value}: {}", refusal(&runs[0]));
    }
    let run = run_remote(&at, honest(), &mut Arrivals::default());
    assert!(run.error().is_none(), "the next honest probe: {:?}", run.error());
    assert!(test_files(dir.path()).is_empty(), "left behind: {:?}", test_files(dir.path()));
}
