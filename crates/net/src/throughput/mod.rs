//! A throughput test as a client runs it, whichever protocol the server
//! speaks: what is asked ([`ThroughputSpec`]), what comes back
//! ([`ThroughputResult`]), the [`Protocol`] seam (one implementation per
//! control protocol: [`headroom`], [`iperf3`] and [`iperf2`], in the spirit of the disk
//! engines' ops table) and the ONE measurement loop both share ([`measure`]).
//!
//! A protocol only talks to its server: it sets the test up, opens and
//! starts the data streams, ends the test and brings back the server's
//! figures. Sampling, the end of the test (time, a fixed transfer, a stop
//! request, a broken stream, the server ending it) and the local figures
//! belong to the loop. Nothing here prints.

pub(crate) mod headroom;
pub(crate) mod iperf2;
pub(crate) mod iperf3;

use crate::client::RrResult;
use crate::datapath::{self, Sampler, StreamSet};
use crate::error::NetError;
use crate::process_cpu::{CpuMeter, CpuUse};
use crate::setting::NetSetting;
use crate::socket;
use crate::stats::{UdpRecvStats, UdpRecvSummary};
use crate::tcpinfo::TcpInfo;
use crate::wire::TrafficDirection;
use headroom_result::{NetProtocol, Sample};
use headroom_units::setting::Message;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What a throughput test should do (plain data: a Runner request carries it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ThroughputSpec {
    /// Who sends.
    pub direction: TrafficDirection,
    /// Streams per direction.
    pub streams: u32,
    /// How long a test by time runs.
    pub duration: Duration,
    /// Fixed transfer: each direction moves this many bytes in total.
    pub bytes: Option<u64>,
    /// TCP write size or UDP datagram size.
    pub len: usize,
    /// Some = a UDP test at this total rate, bits/s.
    pub udp_rate: Option<f64>,
    /// Measure RR latency on a separate connection while the test runs.
    pub rtt_under_load: bool,
    /// Socket buffer asked for each data stream at both ends, bytes
    /// (iperf3's -w); None leaves the kernel's autotuning on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// TCP receivers at both ends drop what arrives in the kernel instead
    /// of copying it to user space (`--skip-rx-copy`, as iperf3 3.19's):
    /// a lighter receiver than an application's, recorded in the result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_rx_copy: bool,
    /// TCP senders at both ends hand the kernel their payload by reference
    /// instead of copying it in (`--zerocopy`, as iperf3's): a lighter
    /// sender than an application that writes from its own buffers,
    /// recorded in the result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub zerocopy: bool,
    /// UDP senders at both ends hand the kernel bursts of datagrams in one
    /// call (GSO) and receivers take them coalesced (GRO), each datagram
    /// with its own header (`--gsro`, as iperf3 3.21's): recorded in the result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub udp_offload: bool,
    /// Length of each sample; None: a second (soak's turns, older requests).
    /// `headroom net` and `run` take [`headroom_runner::sample_interval_for`]
    /// of the duration, so a 3 s test has 20 samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_interval: Option<Duration>,
}

impl ThroughputSpec {
    /// "TCP up x1", "UDP up x1", "TCP bidir x4".
    pub fn label(&self) -> String {
        let dir = match self.direction {
            TrafficDirection::Upload => "up",
            TrafficDirection::Download => "down",
            TrafficDirection::Bidir => "bidir",
        };
        format!("{} {dir} x{}", if self.udp_rate.is_some() { "UDP" } else { "TCP" }, self.streams)
    }

    /// This test with round trips under load on or off (never for UDP, and
    /// only a headroom server measures them).
    pub fn with_rtt_under_load(&self, on: bool) -> ThroughputSpec {
        ThroughputSpec { rtt_under_load: on && self.udp_rate.is_none(), ..self.clone() }
    }

    /// Whether this side sends on stream `i` (with both directions, the
    /// client's sending streams come first).
    pub(crate) fn client_sends(&self, i: u32) -> bool {
        match self.direction {
            TrafficDirection::Upload => true,
            TrafficDirection::Download => false,
            TrafficDirection::Bidir => i < self.streams,
        }
    }

    /// Data streams the test opens: twice `streams` in both directions.
    pub(crate) fn total_streams(&self) -> u32 {
        if self.direction == TrafficDirection::Bidir {
            self.streams * 2
        } else {
            self.streams
        }
    }

    /// Checks every field against what any headroom server accepts (the
    /// same rules a server applies to a test request, [`check_shape`]) and
    /// the sample length `--sample-interval` allows: a request from the wire
    /// (a fleet agent's plan) is held to the command line's rules.
    pub fn check(&self) -> Result<(), Message<NetSetting>> {
        check_shape(self.udp_rate.is_some(), self.streams, self.len, self.udp_rate, self.window)
            .map_err(Message::text)?;
        if self.bytes == Some(0) {
            return Err(Message::text("a fixed transfer of 0 bytes moves nothing (e.g. ")
                .and(NetSetting::Bytes)
                .then(" 1G)"));
        }
        if self.bytes.is_none() && !(Duration::from_millis(100)..=MAX_TEST_TIME).contains(&self.duration) {
            return Err(Message::text(format!(
                "a {:.3} s test is out of range: 100 ms to 24 h (e.g. ",
                self.duration.as_secs_f64()
            ))
            .and(NetSetting::Time)
            .then(" 10s)"));
        }
        if let Some(every) = self.sample_interval {
            if !(Duration::from_millis(100)..=Duration::from_secs(10)).contains(&every) {
                return Err(Message::text(format!(
                    "a sample interval of {:.3} s is out of range: 100 ms to 10 s",
                    every.as_secs_f64()
                )));
            }
        }
        Ok(())
    }

    /// Bytes each sending stream moves in a fixed transfer.
    pub(crate) fn bytes_per_stream(&self) -> Option<u64> {
        self.bytes.map(|b| b.div_ceil(u64::from(self.streams)))
    }
}

/// Longest throughput test by time.
pub const MAX_TEST_TIME: Duration = Duration::from_secs(86_400);

/// The shape of a throughput test every headroom server accepts, whoever
/// asks (a client's spec, a test request on the wire): 1 to
/// [`crate::iperf3::MAX_STREAMS`] streams, a write or datagram length the
/// socket layer takes, a finite UDP rate up to 400 Gb/s, a window within
/// [`socket::MAX_WINDOW`].
pub(crate) fn check_shape(
    udp: bool,
    streams: u32,
    len: usize,
    rate_bits: Option<f64>,
    window: Option<u32>,
) -> Result<(), String> {
    let most = crate::iperf3::MAX_STREAMS;
    if !(1..=most).contains(&streams) {
        return Err(format!("{streams} streams asked; this server allows 1 to {most}"));
    }
    let max_len = if udp { socket::MAX_UDP_LEN } else { socket::MAX_TCP_LEN };
    if len == 0 || len > max_len {
        return Err(format!("length {len} out of range (1 to {max_len})"));
    }
    if udp && !rate_bits.is_some_and(|r| r.is_finite() && r > 0.0 && r <= 400e9) {
        return Err("UDP tests need a rate between 1 b/s and 400 Gb/s".into());
    }
    if window.is_some_and(|w| w == 0 || w > socket::MAX_WINDOW) {
        return Err(format!("socket buffer (window) out of range (1 to {} bytes)", socket::MAX_WINDOW));
    }
    Ok(())
}

/// What one throughput test measured (either protocol).
#[derive(Debug, Clone, Default)]
pub struct ThroughputResult {
    /// Length of each of `samples` (the last may be shorter).
    pub sample_interval: Duration,
    /// `headroom` or `iperf3`.
    pub protocol: NetProtocol,
    /// The server as the user named it.
    pub peer: String,
    /// Who sent.
    pub direction: Option<TrafficDirection>,
    /// UDP instead of TCP.
    pub udp: bool,
    /// Streams per direction.
    pub streams: u32,
    /// How long the test ran on this side, seconds.
    pub duration_s: f64,
    /// The receiver's window for the upload half (the server's time from the
    /// start of the streams to the end request), when it reported one.
    pub upload_duration_s: Option<f64>,
    /// Payload the server received (upload half), as the receiver counted it.
    pub upload_bytes: u64,
    /// Payload this client received (download half).
    pub download_bytes: u64,
    /// Per-second goodput, both directions together, as this client saw it.
    pub samples: Vec<Sample>,
    /// TCP_INFO of the sending side of each stream.
    pub sender_tcp_info: Vec<TcpInfo>,
    /// CPU of this process over the test.
    pub cpu_local: CpuUse,
    /// CPU of the server over the test, as it reported it.
    pub cpu_remote: Option<CpuUse>,
    /// Per core, per thread and cgroup figures of this machine over the test.
    pub cpu_load_local: Option<headroom_result::CpuLoad>,
    /// The same, as the server measured them (headroom servers only).
    pub cpu_load_remote: Option<headroom_result::CpuLoad>,
    /// UDP receive figures (loss, jitter) of the receiving side.
    pub udp_recv: Option<UdpRecvSummary>,
    /// Request/response RTT measured while the streams ran.
    pub rtt_under_load: Option<headroom_result::Latency>,
    /// The fixed transfer asked, bytes per direction.
    pub fixed_bytes: Option<u64>,
    /// The UDP rate asked, bits/s.
    pub rate_bits: Option<f64>,
    /// Set when the test ended early; the samples up to then are kept.
    pub error: Option<String>,
    /// The socket buffer asked for each stream (`--window`), bytes.
    pub window: Option<u32>,
    /// Where this end's sockets left from (`--bind`, `--interface`).
    pub source: Option<String>,
    /// The buffers this machine's kernel granted (a stream's, all alike).
    pub buffers_local: Option<headroom_result::BufferPair>,
    /// The buffers the server's kernel granted (headroom servers only).
    pub buffers_remote: Option<headroom_result::BufferPair>,
    /// `--skip-rx-copy` asked: what each end's TCP receivers did.
    pub rx_copy: Option<CopySkipped>,
    /// `--zerocopy` asked: what each end's TCP senders did.
    pub zerocopy: Option<CopySkipped>,
    /// `--gsro` asked on a UDP test: what each end's UDP streams did.
    pub udp_offload: Option<UdpOffload>,
    /// Why the server's figures are missing and this side's stand in
    /// (a stock iperf2 server that sent no UDP report): a note, not an error.
    pub missing_report: Option<String>,
}

/// Whether each end's TCP streams of one kind skipped a copy between user
/// space and the kernel: receivers that dropped what arrived in the kernel
/// (`--skip-rx-copy`), senders whose payload the kernel sent by reference
/// (`--zerocopy`). None: that end had no such stream, or did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CopySkipped {
    /// This machine's streams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<bool>,
    /// The server's streams (None also when the server sent no report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<bool>,
}

/// What each end's UDP streams did under `--gsro` (None: that end neither
/// sent nor received, or did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UdpOffload {
    /// This machine's streams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<UdpOffloadEnd>,
    /// The server's streams (a stock iperf2 server: false; a stock iperf3
    /// server, asked as 3.21 asks but never saying what it did: absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<UdpOffloadEnd>,
}

/// One end's UDP offload: `gso` when it sent (bursts left in one call),
/// `gro` when it received (its kernel accepted UDP_GRO and handed it
/// coalesced datagrams to split).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UdpOffloadEnd {
    /// The end sent: whether bursts left in one call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso: Option<bool>,
    /// The end received: whether its kernel coalesced for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gro: Option<bool>,
}

impl UdpOffloadEnd {
    /// An end's record from whether its sending and receiving streams were
    /// offloaded (`(sending, offloaded)` per stream): each half only when
    /// the end had streams of that kind, true only when all of them were.
    pub(crate) fn of(streams: impl IntoIterator<Item = (bool, bool)>) -> Option<Self> {
        let (mut gso, mut gro) = (None, None);
        for (sending, offloaded) in streams {
            let half = if sending { &mut gso } else { &mut gro };
            *half = Some(half.unwrap_or(true) && offloaded);
        }
        (gso.is_some() || gro.is_some()).then_some(UdpOffloadEnd { gso, gro })
    }
}

impl ThroughputResult {
    /// Goodput over the whole test, bytes per second: each half counted by
    /// its receiver over that receiver's own window.
    pub fn bytes_per_sec(&self) -> f64 {
        let per = |bytes: u64, secs: f64| if secs > 0.0 { bytes as f64 / secs } else { 0.0 };
        per(self.upload_bytes, self.upload_duration_s.unwrap_or(self.duration_s))
            + per(self.download_bytes, self.duration_s)
    }
}

/// The server's side of a finished test, as its protocol reports it.
#[derive(Debug, Default)]
pub(crate) struct ServerFigures {
    /// Payload the server received from this client's sending streams.
    pub upload_bytes: u64,
    /// The server's receive window, when it says.
    pub upload_duration_s: Option<f64>,
    /// TCP_INFO of the server's sending streams.
    pub sender_tcp_info: Vec<TcpInfo>,
    pub cpu: Option<CpuUse>,
    pub cpu_load: Option<headroom_result::CpuLoad>,
    /// The server's UDP receive figures; they replace this side's when present.
    pub udp_recv: Option<UdpRecvSummary>,
    /// Why the server ended the test early, if it says.
    pub error: Option<String>,
    /// The socket buffers its kernel granted (a stream's), when it says.
    pub buffers: Option<headroom_result::BufferPair>,
    /// The server sent no figures: why, and that this side's stand in.
    pub missing_report: Option<String>,
    /// The server's TCP receivers dropped their bytes in the kernel
    /// (headroom servers asked `--skip-rx-copy`; stock servers copy).
    pub rx_copy_skipped: bool,
    /// The server's TCP senders sent by reference (headroom servers asked
    /// `--zerocopy`; stock servers copy).
    pub sent_by_reference: bool,
    /// The server's UDP streams under `--gsro`, as (sending, offloaded)
    /// per stream; empty: a server that does not say (it sends and
    /// receives one datagram per call).
    pub udp_offloaded: Vec<(bool, bool)>,
    /// The server was asked for `--gsro`, `--skip-rx-copy` or `--zerocopy`
    /// in words a newer one answers but does not report on (iperf3 3.19
    /// and 3.21 do their end, 3.12 ignores them): what it did is unknown,
    /// not false.
    pub modes_unknown: bool,
}

/// True when every one is, None when there are none (an end that had no
/// such stream says nothing).
fn all_of(each: impl Iterator<Item = bool>) -> Option<bool> {
    each.reduce(|all, one| all && one)
}

/// The server's half of the `--gsro` record: what its streams said, or,
/// from a server that says nothing, false for each way it sent or received.
fn server_offload(direction: TrafficDirection, said: &[(bool, bool)]) -> Option<UdpOffloadEnd> {
    if !said.is_empty() {
        return UdpOffloadEnd::of(said.iter().copied());
    }
    let sends = direction != TrafficDirection::Upload;
    let receives = direction != TrafficDirection::Download;
    Some(UdpOffloadEnd { gso: sends.then_some(false), gro: receives.then_some(false) })
}

/// What the control protocols differ in; the measurement loop ([`measure`]) does the rest.
pub(crate) trait Protocol {
    /// The protocol's name as the result records it (`headroom`, `iperf3`).
    fn name(&self) -> NetProtocol;
    /// The server as the result records it.
    fn peer(&self) -> String;
    /// Where this end's sockets leave from.
    fn source(&self) -> &crate::socket::Source;
    /// Sets the test up with the server, opens the data streams and starts them.
    fn start(&mut self, spec: &ThroughputSpec) -> Result<StreamSet, NetError>;
    /// The control connection: readable during a test means the server
    /// ended it (None: the protocol has none, iperf2's).
    fn control(&self) -> Option<&TcpStream>;
    /// Reads why the server ended the test: None = it ended it in order and
    /// will report (a fixed transfer done), Some = an error to record.
    fn server_ended(&mut self) -> Option<String>;
    /// Request/response round trips on a connection of their own while the
    /// streams run (`rtt_under_load`), where the protocol has them.
    fn start_rtt_under_load(&self, _stop: Arc<AtomicBool>) -> Option<JoinHandle<Result<RrResult, NetError>>> {
        None
    }
    /// Ends the test with the server and fetches its figures, given this
    /// side's duration and CPU; `server_ended` says whether the server already ended it.
    fn finish(
        &mut self,
        streams: &StreamSet,
        duration_s: f64,
        local_cpu: &CpuUse,
        server_ended: bool,
    ) -> Result<ServerFigures, NetError>;
    /// The test broke on this side: nothing more is asked of the server.
    fn abandon(&mut self) {}
    /// How long this side's receivers may read what is still in flight once the test ended.
    fn drain(&self) -> Duration;
}

/// Whether a fixed transfer is over: every sending stream moved its bytes,
/// and this side received what the server sends (its streams ended, or the
/// count arrived: a stock iperf3 server stops sending but keeps its streams
/// open; or, over UDP, the datagrams stopped coming: lost ones never will).
fn fixed_transfer_done(streams: &StreamSet, bytes: u64, received: u64, udp_silent: bool) -> bool {
    let senders_done = !streams.has_senders() || streams.senders_finished();
    let receivers_done = !streams.has_receivers() || streams.receivers_finished() || received >= bytes || udp_silent;
    senders_done && receivers_done
}

/// Watches the received byte count of a fixed UDP transfer: silent once no
/// datagram came for several datagram intervals (at least a second), so a
/// transfer that lost its last datagrams still ends.
struct UdpSilence {
    quiet_after: Option<Duration>,
    last_count: u64,
    last_change: std::time::Instant,
}

impl UdpSilence {
    fn new(spec: &ThroughputSpec) -> Self {
        let quiet_after = spec.udp_rate.map(|rate| {
            let per_stream = rate / f64::from(spec.streams.max(1));
            let interval = (spec.len as f64 * 8.0 / per_stream.max(1.0)).min(3600.0);
            Duration::from_secs_f64(interval * 8.0).max(Duration::from_secs(1))
        });
        UdpSilence { quiet_after, last_count: 0, last_change: std::time::Instant::now() }
    }

    fn silent(&mut self, received: u64) -> bool {
        if received != self.last_count {
            self.last_count = received;
            self.last_change = std::time::Instant::now();
        }
        self.quiet_after.is_some_and(|q| self.last_change.elapsed() >= q)
    }
}

/// Runs one throughput test over `protocol`; `on_sample` gets one sample per `spec.sample_interval`.
pub(crate) fn measure(
    protocol: &mut dyn Protocol,
    spec: &ThroughputSpec,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<ThroughputResult, NetError> {
    let mut streams = protocol.start(spec)?;
    let cpu = CpuMeter::start();
    let rr_stop = Arc::new(AtomicBool::new(false));
    let rr_thread = if spec.rtt_under_load { protocol.start_rtt_under_load(rr_stop.clone()) } else { None };
    let mut sampler = Sampler::new();
    let mut samples = Vec::new();
    let every = spec.sample_interval.unwrap_or(Duration::from_secs(1));
    let mut next_tick = every;
    let recv_counters = streams.counters(false);
    let mut error = None;
    let mut server_ended = false;
    let mut udp_silence = UdpSilence::new(spec);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let elapsed = sampler.elapsed();
        if elapsed >= next_tick {
            let s = sampler.tick(streams.total_bytes());
            on_sample(&s);
            samples.push(s);
            next_tick += every;
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match spec.bytes {
            None if elapsed >= spec.duration => break,
            Some(bytes) => {
                let received = datapath::total(&recv_counters);
                if fixed_transfer_done(&streams, bytes, received, udp_silence.silent(received)) {
                    break;
                }
            }
            _ => {}
        }
        if let Some(e) = streams.error() {
            error = Some(e);
            break;
        }
        if protocol.control().is_some_and(|c| socket::wait_readable(c, Duration::ZERO)) {
            server_ended = true;
            error = protocol.server_ended();
            break;
        }
    }
    let duration = sampler.elapsed().as_secs_f64();
    let download_bytes = datapath::total(&recv_counters);
    let cpu_load_local = cpu.load();
    let cpu_local = cpu.stop();
    streams.stop_senders();
    // A partial last interval still counts, so the samples cover the whole test.
    if duration > samples.last().map_or(0.0, |s: &Sample| s.t_s) + 0.2 {
        let s = sampler.tick(streams.total_bytes());
        on_sample(&s);
        samples.push(s);
    }
    rr_stop.store(true, Ordering::Relaxed);
    let mut result = ThroughputResult {
        protocol: protocol.name(),
        peer: protocol.peer(),
        direction: Some(spec.direction),
        udp: spec.udp_rate.is_some(),
        streams: spec.streams,
        duration_s: duration,
        download_bytes,
        sample_interval: every,
        samples,
        cpu_local,
        cpu_load_local,
        fixed_bytes: spec.bytes,
        rate_bits: spec.udp_rate,
        window: spec.window,
        source: protocol.source().describe(),
        ..Default::default()
    };
    // Ask for the server's side; on a broken path keep what we measured.
    let server = if error.is_some() {
        protocol.abandon();
        None
    } else {
        protocol.finish(&streams, duration, &cpu_local, server_ended).map_err(|e| error = Some(e.to_string())).ok()
    };
    let outcomes = streams.finish(protocol.drain());
    if let Some(rr) = rr_thread.and_then(|h| h.join().ok()).and_then(Result::ok) {
        result.rtt_under_load = rr.rtt.latency();
    }
    result.sender_tcp_info = outcomes.iter().filter(|o| o.sending).filter_map(|o| o.tcp_info.clone()).collect();
    result.buffers_local = outcomes.iter().find_map(|o| o.buffers);
    let tcp = spec.udp_rate.is_none();
    if spec.skip_rx_copy && tcp {
        let local = all_of(outcomes.iter().filter(|o| !o.sending).map(|o| o.rx_copy_skipped));
        result.rx_copy = Some(CopySkipped { local, remote: None });
    }
    if spec.zerocopy && tcp {
        let local = all_of(outcomes.iter().filter(|o| o.sending).map(|o| o.sent_by_reference));
        result.zerocopy = Some(CopySkipped { local, remote: None });
    }
    if spec.udp_offload && result.udp {
        let local = UdpOffloadEnd::of(outcomes.iter().map(|o| (o.sending, o.udp_offloaded)));
        result.udp_offload = Some(UdpOffload { local, remote: None });
    }
    if result.udp {
        result.udp_recv = outcomes
            .iter()
            .filter_map(|o| o.udp.as_ref().map(|u: &UdpRecvStats| u.summary))
            .reduce(UdpRecvSummary::merge);
    }
    match server {
        Some(figures) => {
            result.upload_bytes = figures.upload_bytes;
            result.upload_duration_s = figures.upload_duration_s;
            result.sender_tcp_info.extend(figures.sender_tcp_info);
            result.cpu_remote = figures.cpu;
            result.cpu_load_remote = figures.cpu_load;
            result.udp_recv = figures.udp_recv.or(result.udp_recv);
            result.buffers_remote = figures.buffers;
            let known = !figures.modes_unknown;
            if let Some(rx) = result.rx_copy.as_mut() {
                let server_receives = spec.direction != TrafficDirection::Download;
                rx.remote = (server_receives && known).then_some(figures.rx_copy_skipped);
            }
            if let Some(tx) = result.zerocopy.as_mut() {
                let server_sends = spec.direction != TrafficDirection::Upload;
                tx.remote = (server_sends && known).then_some(figures.sent_by_reference);
            }
            if let Some(offload) = result.udp_offload.as_mut() {
                offload.remote =
                    if figures.modes_unknown { None } else { server_offload(spec.direction, &figures.udp_offloaded) };
            }
            result.missing_report = figures.missing_report;
            error = error.or(figures.error);
        }
        // No server figures: fall back to what this side sent.
        None => result.upload_bytes = outcomes.iter().filter(|o| o.sending).map(|o| o.bytes).sum(),
    }
    result.error = error;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_records_only_the_halves_it_ran_and_true_only_when_all_streams_were_offloaded() {
        let end = |gso, gro| Some(UdpOffloadEnd { gso, gro });
        assert_eq!(UdpOffloadEnd::of([(true, true), (true, true)]), end(Some(true), None));
        assert_eq!(UdpOffloadEnd::of([(true, true), (true, false)]), end(Some(false), None));
        assert_eq!(UdpOffloadEnd::of([(false, true), (true, false)]), end(Some(false), Some(true)));
        assert_eq!(UdpOffloadEnd::of([]), None, "an end without streams says nothing");
        // A server that says nothing did not offload what it sent or received.
        assert_eq!(server_offload(TrafficDirection::Upload, &[]), end(None, Some(false)));
        assert_eq!(server_offload(TrafficDirection::Download, &[]), end(Some(false), None));
        assert_eq!(server_offload(TrafficDirection::Bidir, &[]), end(Some(false), Some(false)));
        assert_eq!(server_offload(TrafficDirection::Upload, &[(false, true)]), end(None, Some(true)));
    }
}
