//! `headroom net HOST[:PORT]`: latency at idle and under load, handshake
//! time, throughput up/down/bidirectional with 1 and N streams, against a
//! headroom server or a stock iperf3 server, each figure next to the link
//! ceiling and with the sender's TCP_INFO explaining a short single stream.
//! The tests are a plan the Runner runs on the net engine.

use crate::output::{Outcome, Output};
use crate::progress::ProgressSink;
use anyhow::bail;
use headroom_analysis::ceilings::{choose_nic, LinkCeiling, LinkSpec};
use headroom_analysis::cpu_limits;
use headroom_analysis::verdict::AT_CEILING;
use headroom_net::{NetEngine, NetRequest, NetServer, NetTest, ProtocolChoice, ThroughputSpec, TrafficDirection};
use headroom_result::CpuLoad;
use headroom_result::{Probe, ResultDoc, Warning};
use headroom_runner::{Plan, PrepareEvent, ProbeError, Runner, Sink};
use headroom_units::{format_rate, DurationArg, Rate, Size};
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom net nas.lan                          the default suite (about 30 s)
  headroom net nas.lan --token s3cret --json    against `headroom serve --token s3cret`
  headroom net esxi.lan --protocol iperf3       against a stock `iperf3 -s`
  headroom net nas.lan --tests up1,down1 --time 10s
  headroom net nas.lan --bytes 12GB             time a fixed 12 GB transfer (a VM's worth)
  headroom net nas.lan --udp 500M --tests udp   UDP at 500 Mb/s: loss and jitter
  headroom net nas.lan --link 10gbe             compare against a 10 GbE ceiling

Tests (--tests, comma-separated): rtt (TCP request/response round trips; also
measured under load during the throughput tests), echo (UDP echo RTT, jitter,
loss), connect (TCP handshake time), up1, down1 (one stream), up, down, bidir
(--streams streams), udp (needs --udp RATE). rtt, echo and connect need a
headroom server. Sizes: 12GB = 12e9 bytes, 12GiB = 12*2^30; rates in bits/s
(500M = 500 Mb/s).")]
pub struct NetArgs {
    /// The server: HOST or HOST:PORT (default port 5201)
    pub host: String,
    /// Length of each throughput and latency test
    #[arg(long, default_value = "4s")]
    pub time: DurationArg,
    /// Parallel streams for the up, down and bidir tests (1-128)
    #[arg(long, default_value_t = 4)]
    pub streams: u32,
    /// Which tests to run, comma-separated (see below)
    #[arg(long, value_delimiter = ',')]
    pub tests: Option<Vec<String>>,
    /// Transfer this many bytes per direction instead of running for --time
    #[arg(long)]
    pub bytes: Option<Size>,
    /// Run a UDP test at this rate (bits/s as iperf3 -b reads it: 100M, 1G; or 1Gb/s, 125MB/s)
    #[arg(long, value_parser = parse_bit_rate)]
    pub udp: Option<Rate>,
    /// The link to compare against: a name (1gbe, 10gbe) or a rate (940Mb/s); default: the local interface that routes to HOST
    #[arg(long, value_name = "SPEC", value_parser = LinkSpec::parse_network)]
    pub link: Option<LinkSpec>,
    /// Wire protocol: auto detects a headroom server and falls back to iperf3
    #[arg(long, value_enum, default_value = "auto")]
    pub protocol: ProtocolArg,
    /// Token of a `headroom serve --token` server (also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Connect timeout, and how long a stalled test is tolerated
    #[arg(long, default_value = "5s")]
    pub timeout: DurationArg,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolArg {
    Auto,
    Headroom,
    Iperf3,
}

const ALL_TESTS: &[&str] = &["rtt", "echo", "connect", "up1", "down1", "up", "down", "bidir", "udp"];

/// The tests to run, validated.
fn selected_tests(args: &NetArgs) -> anyhow::Result<Vec<String>> {
    let tests: Vec<String> = match &args.tests {
        Some(t) => t.iter().map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect(),
        None if args.bytes.is_some() => vec!["up1".into()],
        None => {
            let mut t: Vec<String> =
                ["rtt", "echo", "connect", "up1", "down1", "up", "down", "bidir"].map(String::from).to_vec();
            if args.udp.is_some() {
                t.push("udp".into());
            }
            t
        }
    };
    for t in &tests {
        if !ALL_TESTS.contains(&t.as_str()) {
            bail!("--tests: unknown test '{t}'; known: {} (example: --tests rtt,up1,down1)", ALL_TESTS.join(","));
        }
    }
    if tests.is_empty() {
        bail!("--tests is empty (example: --tests rtt,up1,down1)");
    }
    if tests.iter().any(|t| t == "udp") && args.udp.is_none() {
        bail!("--tests udp needs --udp RATE (example: --udp 100M)");
    }
    Ok(tests)
}

/// iperf3's `-b` spelling (100M = 100 Mb/s) as well as headroom's rate syntax.
fn parse_bit_rate(text: &str) -> Result<Rate, String> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if "kKmMgGtT".contains(c) => (
            &t[..i],
            match c.to_ascii_lowercase() {
                'k' => 1e3,
                'm' => 1e6,
                'g' => 1e9,
                _ => 1e12,
            },
        ),
        _ => (t, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(Rate(v * mult)),
        _ => t.parse::<Rate>().map_err(|e| e.to_string()),
    }
}

fn validate(args: &NetArgs) -> anyhow::Result<()> {
    if !(1..=128).contains(&args.streams) {
        bail!("--streams {} is out of range: 1 to 128 (example: --streams 4)", args.streams);
    }
    if args.time.0 < Duration::from_millis(200) || args.time.0 > Duration::from_secs(86_400) {
        bail!("--time {} is out of range: 200ms to 24h (example: --time 10s)", args.time);
    }
    if let Some(b) = args.bytes {
        if b.0 == 0 {
            bail!("--bytes must be above zero (example: --bytes 12GB)");
        }
    }
    if let Some(r) = args.udp {
        if !(r.0 >= 1000.0 && r.0 <= 400e9) {
            bail!(
                "--udp {} is out of range: 1k to 400G bits/s (example: --udp 100M)",
                args.udp.map(|r| r.0).unwrap_or(0.0)
            );
        }
    }
    if args.timeout.0 > Duration::from_secs(3600) {
        bail!("--timeout {} is too long: at most 1h (example: --timeout 5s)", args.timeout);
    }
    if args.timeout.0 < Duration::from_millis(100) {
        bail!("--timeout {} is too short: at least 100ms (example: --timeout 5s)", args.timeout);
    }
    Ok(())
}

/// The peer as the net engine found it: the heading's protocol and version.
#[derive(Default)]
struct PeerSeen(Option<(String, Option<String>)>);

impl Sink for PeerSeen {
    fn prepared(&mut self, event: &PrepareEvent) {
        if let PrepareEvent::PeerReady { protocol, server_version, .. } = event {
            self.0 = Some((protocol.clone(), server_version.clone()));
        }
    }
}

pub fn run(args: &NetArgs, out: &Output) -> anyhow::Result<Outcome> {
    validate(args)?;
    let tests = selected_tests(args)?;
    let (host, port) = headroom_net::split_host_port(&args.host).map_err(|e| anyhow::anyhow!("HOST {e}"))?;
    let server = NetServer {
        host: host.clone(),
        port: port.unwrap_or(headroom_net::DEFAULT_PORT),
        token: args.token.clone(),
        timeout: args.timeout.0,
        protocol: match args.protocol {
            ProtocolArg::Auto => ProtocolChoice::Auto,
            ProtocolArg::Headroom => ProtocolChoice::Headroom,
            ProtocolArg::Iperf3 => ProtocolChoice::Iperf3,
        },
        session_per_test: false,
    };
    let want_rr_load = tests.iter().any(|t| t == "rtt");
    let plan = Plan::new(
        tests
            .iter()
            .map(|t| NetRequest { server: server.clone(), test: net_test(t, args, want_rr_load) }.to_request())
            .collect(),
    );
    let started_at = crate::commands::ping::rfc3339_now();
    let stop = crate::signals::stop_flag();
    let mut runner = Runner::new().with(NetEngine::new());
    // Detect the protocol (and fail early on DNS, refused port, wrong token).
    let mut peer = PeerSeen::default();
    runner.prepare(&plan, stop, &mut [&mut peer]).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (protocol, server_version) = peer.0.unwrap_or_else(|| ("iperf3".into(), None));
    let ceiling = ceiling_for(&host, server.port, args.link.as_ref());
    if !out.json {
        println!(
            "{} {} ({} protocol{})",
            out.bold("headroom net"),
            server.display(),
            protocol,
            server_version.map(|v| format!(", server {v}")).unwrap_or_default()
        );
        println!("link: {}", describe(&ceiling, out.iec));
    }
    let mut probes: Vec<Probe> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut bars = ProgressSink::new(out.progress, out.iec, &plan);
    for (t, run) in tests.iter().zip(runner.execute(&plan, stop, &mut [&mut bars])) {
        match run.result {
            Ok(measured) => {
                let p = against_link(measured.probe, &ceiling);
                if let Some(e) = p.details.get("error").and_then(|v| v.as_str()) {
                    failures.push(format!("{}: {e}", p.name));
                }
                if !out.json {
                    print_probe(&p, &ceiling, out);
                }
                probes.push(p);
            }
            Err(ProbeError::Unsupported(why)) => {
                if args.tests.is_some() {
                    failures.push(why);
                }
            }
            Err(ProbeError::Abandoned) => break,
            Err(e @ (ProbeError::Unreachable(_) | ProbeError::Refused(_))) if probes.is_empty() => bail!(e),
            Err(e) => {
                let line = format!("{t}: {e}");
                if !out.json {
                    println!("  {line}");
                }
                failures.push(line);
            }
        }
    }
    runner.finish();
    drop(bars);
    let mut doc = ResultDoc::new(started_at);
    doc.probes = probes;
    if let Some(c) = ceiling.to_ceiling() {
        doc.ceilings.push(c);
    }
    for f in &failures {
        doc.warnings.push(Warning::new(headroom_result::WarningCode::TestFailed, f.clone()));
    }
    if out.json {
        out.print_json(&doc)?;
    }
    if failures.is_empty() {
        Ok(Outcome::Ok)
    } else {
        for f in &failures {
            eprintln!("headroom: error: {}", headroom_report::terminal_safe(f, false));
        }
        Ok(Outcome::Error)
    }
}

/// The net engine's test for a `--tests` name.
fn net_test(t: &str, args: &NetArgs, rr: bool) -> NetTest {
    let (direction, streams) = match t {
        "rtt" => return NetTest::Rtt { time: args.time.0 },
        "echo" => return NetTest::Echo,
        "connect" => return NetTest::Connect,
        "up1" => (TrafficDirection::Upload, 1),
        "down1" => (TrafficDirection::Download, 1),
        "up" => (TrafficDirection::Upload, args.streams),
        "down" => (TrafficDirection::Download, args.streams),
        "bidir" => (TrafficDirection::Bidir, args.streams),
        _ => (TrafficDirection::Upload, 1), // udp
    };
    let udp = t == "udp";
    NetTest::Throughput(ThroughputSpec {
        direction,
        streams,
        duration: args.time.0,
        bytes: args.bytes.map(|b| b.0),
        len: if udp { headroom_net::DEFAULT_UDP_LEN } else { headroom_net::DEFAULT_TCP_LEN },
        udp_rate: if udp { args.udp.map(|r| r.0) } else { None },
        rtt_under_load: rr && !udp,
    })
}

/// A probe as `net` reports it: throughput probes held against the link,
/// round trips and handshakes as measured.
pub(crate) fn against_link(p: Probe, ceiling: &LinkCeiling) -> Probe {
    let throughput = matches!(&p.spec, headroom_result::ProbeSpec::Net(s) if s.test != "rr" && s.test != "connect");
    if throughput {
        throughput_probe(p, ceiling)
    } else {
        p
    }
}

/// A throughput probe held against the link: its share of the ceiling,
/// what the CPU diagnosis settles to, and `faster_than_ceiling`.
pub(crate) fn throughput_probe(mut p: Probe, ceiling: &LinkCeiling) -> Probe {
    let test = match &p.spec {
        headroom_result::ProbeSpec::Net(s) => s.test.clone(),
        _ => String::new(),
    };
    let directions = if test == "tcp_bidir" { 2.0 } else { 1.0 };
    // A virtual NIC's nominal speed is no ceiling a stream could be at.
    let share =
        ceiling.tcp_bytes_per_sec.filter(|_| !ceiling.is_virtual).map(|c| p.summary.bytes_per_sec / (c * directions));
    if test != "udp" {
        cpu_limits::settle_diagnosis(&mut p, share.is_some_and(|s| s >= AT_CEILING));
    }
    if let Some(c) = ceiling.tcp_bytes_per_sec {
        let share = p.summary.bytes_per_sec / (c * directions);
        p.details.insert("ceiling_share".into(), serde_json::json!(share));
        if share > 1.02 {
            p.warnings.push(Warning::new(
                headroom_result::WarningCode::FasterThanCeiling,
                format!(
                    "measured {} is above the {} ceiling: {}",
                    format_rate(p.summary.bytes_per_sec * 8.0, false),
                    ceiling.name,
                    if ceiling.is_virtual {
                        "the interface is virtual and its reported speed is nominal, not a limit"
                    } else {
                        "the reported link speed is not the real one (check the peer's route)"
                    }
                ),
            ));
        }
    }
    p
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} us", ns / 1e3)
    }
}

fn print_probe(p: &Probe, ceiling: &LinkCeiling, out: &Output) {
    let d = &p.details;
    let num = |k: &str| d.get(k).and_then(|v| v.as_f64());
    match p.spec {
        headroom_result::ProbeSpec::Net(ref s) if s.test == "rr" || s.test == "connect" => {
            if let Some(l) = &p.summary.latency_ns {
                println!(
                    "  {:<24} min {}  mean {}  p50 {}  p99 {}  max {}  stddev {}",
                    p.name,
                    fmt_ns(l.min.unwrap_or(0.0)),
                    fmt_ns(l.mean),
                    fmt_ns(l.p50),
                    fmt_ns(l.p99),
                    fmt_ns(l.max),
                    fmt_ns(l.stddev.unwrap_or(0.0))
                );
            }
        }
        headroom_result::ProbeSpec::Ping(_) => {
            if let Some(l) = &p.summary.latency_ns {
                println!(
                    "  {:<24} min {}  mean {}  p99 {}  max {}  jitter {:.3} ms  loss {:.1}%",
                    p.name,
                    fmt_ns(l.min.unwrap_or(0.0)),
                    fmt_ns(l.mean),
                    fmt_ns(l.p99),
                    fmt_ns(l.max),
                    num("jitter_ms").unwrap_or(0.0),
                    num("loss_percent").unwrap_or(0.0)
                );
            }
        }
        _ => {
            let mut line = format!("  {:<24} {}", p.name, format_rate(p.summary.bytes_per_sec * 8.0, out.iec));
            if let Some(share) = num("ceiling_share") {
                if share <= 1.02 {
                    line += &format!("  {:.1}% of {}", share * 100.0, ceiling.name);
                } else {
                    line += &format!("  above the {} ceiling (virtual NIC?)", ceiling.name);
                }
            }
            if let Some(b) = p.summary.bytes.filter(|_| p.spec_bytes().is_some()) {
                line += &format!("  {} in {:.2} s", headroom_units::format_size(b), p.summary.duration_s);
            }
            if let Some(t) = d.get("tcp_info") {
                line += &format!(
                    "  retr {}  srtt {:.2} ms  cwnd {} KiB",
                    t["retransmits"],
                    t["srtt_us"].as_f64().unwrap_or(0.0) / 1e3,
                    t["cwnd_bytes"].as_u64().unwrap_or(0) / 1024
                );
            }
            if let Some(u) = d.get("udp") {
                line += &format!(
                    "  loss {:.2}%  jitter {:.3} ms",
                    u["loss_percent"].as_f64().unwrap_or(0.0),
                    u["jitter_ms"].as_f64().unwrap_or(0.0)
                );
            }
            line += &format!("  cpu {:.0}% here", num("cpu_local_percent").unwrap_or(0.0));
            if let Some(c) = num("cpu_remote_percent") {
                line += &format!(" / {c:.0}% server");
            }
            println!("{line}");
            for (key, whose) in [("cpu_load_local", "cpu here"), ("cpu_load_remote", "cpu server")] {
                if let Some(load) = d.get(key).and_then(|v| serde_json::from_value::<CpuLoad>(v.clone()).ok()) {
                    println!("  {:<24} {whose}: {}", "", cpu_line(&load));
                }
            }
            if let Some(l) = d.get("rtt_under_load_ns") {
                println!(
                    "  {:<24} RTT under load: mean {}  p99 {}",
                    "",
                    fmt_ns(l["mean"].as_f64().unwrap_or(0.0)),
                    fmt_ns(l["p99"].as_f64().unwrap_or(0.0))
                );
            }
            for w in &p.warnings {
                println!("  {:<24} note: {}", "", w.message);
            }
        }
    }
}

/// One end's CPU over a test: the process against one core and the machine,
/// its busiest thread and core, softirq, steal and the cgroup quota.
fn cpu_line(load: &CpuLoad) -> String {
    let mut parts = vec![format!("process {:.0}% of one core ({} cores)", load.process_percent, load.cores)];
    if let Some(t) = load.busiest_thread() {
        parts.push(format!("busiest thread {} {:.0}%", t.name, t.percent));
    }
    if let Some(c) = load.busiest_core() {
        parts.push(format!("busiest core cpu{} {:.0}% (softirq {:.0}%)", c.cpu, c.busy_percent, c.softirq_percent));
    }
    if load.steal_percent >= 1.0 {
        parts.push(format!("steal {:.0}%", load.steal_percent));
    }
    if let Some(cg) = &load.cgroup {
        parts.push(format!(
            "cgroup {} quota {:.0}% of a core, throttled in {} of {} periods",
            cg.path,
            cg.quota_cores() * 100.0,
            cg.throttled_periods,
            cg.periods
        ));
    }
    parts.join(", ")
}

trait SpecBytes {
    fn spec_bytes(&self) -> Option<u64>;
}
impl SpecBytes for Probe {
    fn spec_bytes(&self) -> Option<u64> {
        match &self.spec {
            headroom_result::ProbeSpec::Net(s) => s.bytes,
            _ => None,
        }
    }
}

/// The `link:` line: the ceiling, where it came from, and why it may not hold.
fn describe(c: &LinkCeiling, iec: bool) -> String {
    let mut s = match c.tcp_bytes_per_sec {
        Some(b) => format!("{} ({}): TCP ceiling {}", c.name, c.source, format_rate(b * 8.0, iec)),
        None => format!("{} ({})", c.name, c.source),
    };
    if let Some(n) = &c.note {
        s += &format!("; {n}");
    }
    s
}

/// The link ceiling of `--link`, else of the interface the route to HOST
/// leaves through ([`choose_nic`] with that interface named).
pub(crate) fn ceiling_for(host: &str, port: u16, link: Option<&LinkSpec>) -> LinkCeiling {
    let route = headroom_net::resolve(host, port)
        .ok()
        .and_then(|a| a.first().copied())
        .and_then(|peer| headroom_sys::route_interface(peer.ip()));
    let nics = if route.is_some() { headroom_sys::nics(&headroom_sys::SysRoot::live()) } else { Vec::new() };
    LinkCeiling::of_path(link, route.as_deref().and_then(|name| choose_nic(&nics, Some(name))))
}
