//! `headroom net HOST[:PORT]`: latency at idle and under load, handshake
//! time, throughput up/down/bidirectional with 1 and N streams, against a
//! headroom server or a stock iperf3 server, each figure next to the link
//! ceiling and with the sender's TCP_INFO explaining a short single stream.
//! The flags become `headroom_job::net`'s settings; the job runs them and
//! reports each probe, held against the link, as it finishes, which
//! `headroom_report::present::net` shows.

use crate::output::{Outcome, Output};
use crate::progress::ProgressSink;
use anyhow::bail;
use headroom_analysis::{LinkCeiling, LinkSpec};
use headroom_job::net::{self, NetReport};
use headroom_net::{NetServer, NetTest, ProtocolChoice, Source, ThroughputSpec, TrafficDirection};
use headroom_report::present;
use headroom_result::Probe;
use headroom_runner::Sink;
use headroom_units::{DurationArg, Rate, Size};
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom net nas.lan                          the default suite (about 30 s)
  headroom net nas.lan --token $TOKEN --json    against `headroom serve --token $TOKEN`
  headroom net esxi.lan --protocol iperf3       against a stock `iperf3 -s`
  headroom net nas.lan --protocol iperf2 --tests up,down    against a stock `iperf -s` (port 5001)
  headroom net nas.lan --tests up1,down1 --time 10s
  headroom net nas.lan --bytes 12GB             time a fixed 12 GB transfer (a VM's worth)
  headroom net nas.lan --udp 500M --tests udp   UDP at 500 Mb/s: loss and jitter
  headroom net nas.lan --link 10gbe             compare against a 10 GbE ceiling
  headroom net nas.lan --tests down1 --goal read=900Mb/s    exit 1 below 900 Mb/s server->client
  headroom net nas.lan --tests up1 --window 4M  one stream with 4 MiB socket buffers at both ends
  headroom net nas.lan --interface enx0c37 --tests up1,down1    through the USB NIC, not the routed one

Tests (--tests, comma-separated): rtt (TCP request/response round trips; also
measured under load during the throughput tests), echo (UDP echo RTT, jitter,
loss), connect (TCP handshake time), up1, down1 (one stream), up, down, bidir
(--streams streams), udp (needs --udp RATE). rtt, echo and connect need a
headroom server. Sizes: 12GB = 12e9 bytes, 12GiB = 12*2^30; rates in bits/s
(500M = 500 Mb/s).")]
pub struct NetArgs {
    /// The server: HOST or HOST:PORT (default port 5201; 5001 with --protocol iperf2)
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
    #[arg(long, value_parser = Rate::parse_iperf_style)]
    pub udp: Option<Rate>,
    /// The link to compare against: a name (1gbe, 10gbe) or a rate (940Mb/s); default: the local interface that routes to HOST
    #[arg(long, value_name = "SPEC", value_parser = |text: &str| LinkSpec::parse_network(text).map_err(|e| crate::flags::line(&e)))]
    pub link: Option<LinkSpec>,
    /// Wire protocol: auto detects a headroom server and falls back to iperf3; iperf2 (a
    /// stock `iperf -s`, port 5001 by default) runs TCP up and down tests and the udp test
    /// (against `iperf -s -u`)
    #[arg(long, value_enum, default_value = "auto")]
    pub protocol: ProtocolArg,
    /// Token of a `headroom serve --token` server (also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Connect timeout, and how long a stalled test is tolerated
    #[arg(long, default_value = "5s")]
    pub timeout: DurationArg,
    /// Thresholds to pass: read=RATE (server to client, the down tests), write=RATE (up),
    /// latency-p99=DURATION (round trips); a missed goal exits 1
    #[arg(long, value_name = "LIST")]
    pub goal: Option<String>,
    /// Socket buffer of every data stream at both ends (iperf3's -w), e.g. 256K, 4M; the
    /// result shows what each kernel granted. Default: the kernel autotunes them
    #[arg(long, short = 'w', value_name = "SIZE")]
    pub window: Option<Size>,
    /// TCP receivers at both ends drop what arrives in the kernel instead of copying it to
    /// user space (as iperf3 3.19's --skip-rx-copy; Linux only): a lighter receiver than
    /// any application's, for finding the path's limit with less CPU. Recorded in the
    /// result (details.skip_rx_copy); off by default
    #[arg(long)]
    pub skip_rx_copy: bool,
    /// TCP senders at both ends hand the kernel their payload by reference instead of
    /// copying it in (sendfile from a memory file, as iperf3's -Z; Linux only, writes of
    /// 64 KiB and more): a lighter sender than an application that writes from its own
    /// buffers. Recorded in the result (details.zerocopy); off by default
    #[arg(long, short = 'Z')]
    pub zerocopy: bool,
    /// UDP test: senders hand the kernel bursts of up to 64 datagrams in one call (GSO) and
    /// receivers take them coalesced (GRO), at both ends where the kernel can (as iperf3 3.21's
    /// --gsro; Linux only). Every datagram keeps its own sequence number and timestamp; bursts
    /// are at most a millisecond of the rate, but on a NIC with segmentation offload they
    /// leave back to back. Recorded in the result (details.udp_offload); off by default
    #[arg(long)]
    pub gsro: bool,
    /// rtt test: both ends spin on non-blocking sockets with SO_BUSY_POLL instead of sleeping
    /// until a reply wakes them (as sockperf's --lls with --nonblocked): lower latency, at the
    /// price of a core at each end while it runs. Recorded in the result (details.busy_poll);
    /// off by default
    #[arg(long)]
    pub busy_poll: bool,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// Where this machine's sockets leave from (`net`, `ping`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SourceArgs {
    /// Source address of every connection (an address of this machine), to compare the
    /// NICs of one host towards one target
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// Leave through this interface whatever the routing table says (SO_BINDTODEVICE:
    /// needs root)
    #[arg(long, value_name = "NIC")]
    pub interface: Option<String>,
}

impl SourceArgs {
    /// The source, checked: the interface exists, the address is this machine's.
    pub fn source(&self) -> anyhow::Result<Source> {
        let source = Source { bind: self.bind, interface: self.interface.clone() };
        source.check()?;
        Ok(source)
    }
}

/// Smallest and largest `--window`: below 1 KiB nothing useful flows; the
/// largest is what a server accepts.
const WINDOW_RANGE: (u64, u64) = (1024, headroom_net::MAX_WINDOW as u64);

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolArg {
    Auto,
    Headroom,
    Iperf3,
    Iperf2,
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
    if let Some(w) = args.window {
        if !(WINDOW_RANGE.0..=WINDOW_RANGE.1).contains(&w.0) {
            bail!("--window {} is out of range: 1KiB to 1GiB (example: --window 4M)", w.0);
        }
    }
    Ok(())
}

/// Prints the heading and each probe as the job reports them (not with --json).
struct Live<'a> {
    out: &'a Output,
    target: String,
}

impl NetReport for Live<'_> {
    fn ready(&mut self, protocol: &str, server_version: Option<&str>, ceiling: &LinkCeiling) {
        if !self.out.json {
            let style = self.out.style();
            self.out.print(&present::net::heading(&self.target, protocol, server_version, ceiling, style));
        }
    }

    fn probe(&mut self, probe: &Probe, ceiling: &LinkCeiling) {
        if !self.out.json {
            self.out.print(&present::net::probe(probe, ceiling, self.out.style()));
        }
    }

    fn failure(&mut self, line: &str) {
        if !self.out.json {
            self.out.print(&present::net::failure(line));
        }
    }
}

pub fn run(args: &NetArgs, out: &Output) -> anyhow::Result<Outcome> {
    validate(args)?;
    let goals = crate::output::parse_goal_flag(args.goal.as_deref())?;
    let tests = selected_tests(args)?;
    let (host, port) = headroom_net::split_host_port(&args.host).map_err(|e| anyhow::anyhow!("HOST {e}"))?;
    let server = NetServer {
        host,
        port: port.unwrap_or(match args.protocol {
            ProtocolArg::Iperf2 => headroom_net::IPERF2_PORT,
            _ => headroom_net::DEFAULT_PORT,
        }),
        token: args.token.clone(),
        timeout: args.timeout.0,
        source: args.source.source()?,
        protocol: match args.protocol {
            ProtocolArg::Auto => ProtocolChoice::Auto,
            ProtocolArg::Headroom => ProtocolChoice::Headroom,
            ProtocolArg::Iperf3 => ProtocolChoice::Iperf3,
            ProtocolArg::Iperf2 => ProtocolChoice::Iperf2,
        },
        session_per_test: false,
    };
    let want_rr_load = tests.iter().any(|t| t == "rtt");
    let target = match server.source.describe() {
        Some(source) => format!("{} {source}", server.display()),
        None => server.display(),
    };
    let tests = tests.into_iter().map(|t| (t.clone(), net_test(&t, args, want_rr_load))).collect();
    let job = net::NetJob {
        server,
        tests,
        tests_named: args.tests.is_some(),
        link: args.link.clone(),
        goals,
        spelling: crate::flags::SPELLING,
    };
    let (progress, iec) = (out.progress, out.iec);
    let mut bars = |plan: &headroom_runner::Plan| -> Box<dyn Sink> { Box::new(ProgressSink::new(progress, iec, plan)) };
    let done = net::run(job, crate::signals::stop_flag(), &mut bars, &mut Live { out, target })?;
    if out.json {
        out.print_json(&done.doc)?;
    }
    if done.failures.is_empty() {
        Ok(crate::output::goal_outcome(&done.goals, out))
    } else {
        for f in &done.failures {
            eprintln!("headroom: error: {}", headroom_report::terminal_safe(f, false));
        }
        Ok(Outcome::Error)
    }
}

/// The net engine's test for a `--tests` name.
fn net_test(t: &str, args: &NetArgs, rr: bool) -> NetTest {
    let (direction, streams) = match t {
        "rtt" => return NetTest::Rtt { time: args.time.0, busy_poll: args.busy_poll },
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
        window: args.window.map(|w| w.0 as u32),
        skip_rx_copy: args.skip_rx_copy && !udp,
        zerocopy: args.zerocopy && !udp,
        udp_offload: args.gsro && udp,
        sample_interval: Some(headroom_runner::sample_interval_for(args.time.0)),
    })
}
