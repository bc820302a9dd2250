//! The headroom-protocol client: throughput (TCP/UDP, up/down/bidir, 1..N
//! streams), request/response RTT (idle and under load), UDP echo RTT with
//! jitter and loss. Results come back as plain data ([`ThroughputResult`],
//! [`RrResult`], [`EchoResult`]); [`crate::probe`] turns them into probes.

use crate::cpu::{CpuMeter, CpuUse};
use crate::datapath::{self, Sampler, StreamParams, StreamSet, UdpHeader};
use crate::stats::{LatencyRecorder, UdpRecvSummary};
use crate::tcpinfo::TcpInfo;
use crate::wire::{self, Direction, Hello, Reply, Request};
use crate::NetError;
use headroom_result::Sample;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where to test and how patient to be.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub token: Option<String>,
    /// Connect timeout, and how long a stalled stream or silent server is tolerated.
    pub timeout: Duration,
}

impl Target {
    pub fn display(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Connects to `addr`. A connection reset during the handshake is tried
/// again (three times, 100 ms apart): a stock iperf3 server closes and
/// re-opens its listening socket after every test or failed handshake, and a
/// connect that lands in that moment is reset rather than refused.
pub(crate) fn connect_addr(addr: &SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut attempt = 0;
    loop {
        match TcpStream::connect_timeout(addr, timeout) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && attempt < 3 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

/// Connects to the first address of `target` that answers.
pub fn connect(target: &Target) -> Result<(TcpStream, SocketAddr), NetError> {
    let addrs = crate::resolve(&target.host, target.port)?;
    let mut last = None;
    for addr in addrs {
        match connect_addr(&addr, target.timeout) {
            Ok(s) => return Ok((s, addr)),
            Err(e) => last = Some((addr, e)),
        }
    }
    let (addr, e) = last.expect("resolve returns at least one address");
    Err(connect_error(addr, &e))
}

/// A failed connect to a headroom (or iperf3) server: a refusal suggests
/// starting `headroom serve`.
pub(crate) fn connect_error(addr: SocketAddr, e: &std::io::Error) -> NetError {
    let mut reason = connect_reason(e);
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        reason += "; is `headroom serve` running there?";
    }
    NetError::Connect { addr: addr.to_string(), reason }
}

/// A failed connect to any TCP service (`headroom ping HOST:PORT`): nothing
/// said about headroom, the port may belong to anything.
pub(crate) fn connect_error_any_service(addr: SocketAddr, e: &std::io::Error) -> NetError {
    NetError::Connect { addr: addr.to_string(), reason: connect_reason(e) }
}

fn connect_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused (nothing listens on that port)".into(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            "timed out (host unreachable or a firewall drops the packets)".into()
        }
        _ if e.raw_os_error() == Some(libc::EHOSTUNREACH) || e.raw_os_error() == Some(libc::ENETUNREACH) => {
            "no route to host (unreachable)".into()
        }
        _ => e.to_string(),
    }
}

/// What one throughput test measured (either protocol).
#[derive(Debug, Clone, Default)]
pub struct ThroughputResult {
    pub protocol: String,
    pub peer: String,
    pub direction: Option<Direction>,
    pub udp: bool,
    pub streams: u32,
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
    pub cpu_local: CpuUse,
    pub cpu_remote: Option<CpuUse>,
    /// Per core, per thread and cgroup figures of this machine over the test.
    pub cpu_load_local: Option<headroom_result::CpuLoad>,
    /// The same, as the server measured them (headroom servers only).
    pub cpu_load_remote: Option<headroom_result::CpuLoad>,
    /// UDP receive figures (loss, jitter) of the receiving side.
    pub udp_recv: Option<UdpRecvSummary>,
    /// Request/response RTT measured while the streams ran.
    pub rtt_under_load: Option<headroom_result::Latency>,
    pub fixed_bytes: Option<u64>,
    pub rate_bits: Option<f64>,
    /// Set when the test ended early; the samples up to then are kept.
    pub error: Option<String>,
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

/// What a throughput test should do.
#[derive(Debug, Clone)]
pub struct ThroughputSpec {
    pub direction: Direction,
    pub streams: u32,
    pub duration: Duration,
    /// Fixed transfer: each direction moves this many bytes in total.
    pub bytes: Option<u64>,
    /// TCP write size or UDP datagram size.
    pub len: usize,
    /// Some = a UDP test at this total rate, bits/s.
    pub udp_rate: Option<f64>,
    /// Measure RR latency on a separate connection while the test runs.
    pub rtt_under_load: bool,
}

/// Request/response round trips.
#[derive(Debug, Clone, Default)]
pub struct RrResult {
    pub size: usize,
    pub duration_s: f64,
    pub rtt: LatencyRecorder,
    pub samples: Vec<Sample>,
}

/// UDP echo round trips.
#[derive(Debug, Clone, Default)]
pub struct EchoResult {
    pub sent: u64,
    pub received: u64,
    pub duration_s: f64,
    pub rtt: LatencyRecorder,
    /// RFC 3550 jitter over successive RTTs, seconds.
    pub jitter_s: f64,
}

/// An authenticated control connection to a headroom server.
pub struct Session {
    control: TcpStream,
    key: String,
    pub peer: SocketAddr,
    pub target: Target,
    pub server_version: String,
}

fn open_stream(peer: SocketAddr, timeout: Duration, hello: &Hello) -> Result<TcpStream, NetError> {
    let mut s = connect_addr(&peer, timeout).map_err(|e| connect_error(peer, &e))?;
    greet(&mut s, hello)?;
    Ok(s)
}

/// Writes the greeting and the hello in one segment.
fn greet(s: &mut TcpStream, hello: &Hello) -> Result<(), NetError> {
    let mut msg = wire::greeting().to_vec();
    let body = serde_json::to_vec(hello).map_err(|e| NetError::Protocol(e.to_string()))?;
    msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
    msg.extend_from_slice(&body);
    s.write_all(&msg)?;
    Ok(())
}

impl Session {
    /// Connects, greets and authenticates. Returns [`NetError::IsIperf3`] when
    /// the server turns out to be a stock iperf3.
    pub fn open(target: &Target) -> Result<Session, NetError> {
        // One connection only: a stock iperf3 server would take a throwaway
        // connection for a control connection and reset the next one.
        let (mut control, peer) = connect(target)?;
        let hello = Hello::Control { client_version: env!("CARGO_PKG_VERSION").into() };
        greet(&mut control, &hello)?;
        control.set_nodelay(true)?;
        control.set_read_timeout(Some(target.timeout))?;
        let mut first = [0u8; 1];
        control.read_exact(&mut first).map_err(|e| match e.kind() {
            // A stock iperf3 server takes our greeting for a cookie, answers PARAM_EXCHANGE,
            // fails to parse the rest and closes with our bytes unread: the kernel's RST can
            // overtake its answer. A headroom server never resets a greeting.
            std::io::ErrorKind::ConnectionReset => NetError::IsIperf3,
            _ => NetError::Protocol(format!("no answer to the greeting: {e}")),
        })?;
        if first[0] != 0 {
            // A length prefix of a headroom frame starts with 0 (frames are < 16 MiB);
            // iperf3 answers a cookie with PARAM_EXCHANGE (9) or ACCESS_DENIED (0xFF).
            return Err(NetError::IsIperf3);
        }
        let mut reader = std::io::Read::chain(&first[..], &mut control);
        let mut reply: Reply =
            wire::read_frame(&mut reader, wire::MAX_FRAME).map_err(|e| NetError::Protocol(e.to_string()))?;
        if let Reply::Challenge { nonce } = &reply {
            reply = answer_challenge(&mut control, target, nonce)?;
        }
        match reply {
            Reply::Welcome { session, server_version, .. } => {
                Ok(Session { control, key: session, peer, target: target.clone(), server_version })
            }
            Reply::Refused { reason } => Err(NetError::Refused(format!("{}: {reason}", target.display()))),
            other => Err(NetError::Protocol(format!("unexpected {other:?}"))),
        }
    }

    fn request(&mut self, req: &Request) -> Result<Reply, NetError> {
        wire::write_frame(&mut self.control, req).map_err(|e| NetError::Broken(format!("control connection: {e}")))?;
        self.read_reply()
    }

    fn read_reply(&mut self) -> Result<Reply, NetError> {
        wire::read_frame(&mut self.control, wire::MAX_FRAME).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
                NetError::Broken("the server closed the connection".into())
            }
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                NetError::Broken(format!("the server did not answer within {:.0} s", self.target.timeout.as_secs_f64()))
            }
            _ => NetError::Broken(e.to_string()),
        })
    }

    /// Runs one throughput test; `on_sample` gets one sample per second.
    pub fn throughput(
        &mut self,
        spec: &ThroughputSpec,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&Sample),
    ) -> Result<ThroughputResult, NetError> {
        let udp = spec.udp_rate.is_some();
        let req = Request::Test {
            udp,
            direction: spec.direction,
            streams: spec.streams,
            duration_ms: spec.duration.as_millis() as u64,
            bytes: spec.bytes.map(|b| b.div_ceil(u64::from(spec.streams))),
            len: spec.len as u32,
            rate_bits: spec.udp_rate,
        };
        let test = match self.request(&req)? {
            Reply::TestReady { test } => test,
            Reply::Refused { reason } => {
                return Err(NetError::Refused(format!("{} refused the test: {reason}", self.target.display())))
            }
            other => return Err(NetError::Protocol(format!("unexpected {other:?}"))),
        };
        let n = if spec.direction == Direction::Bidir { spec.streams * 2 } else { spec.streams };
        let client_sends = |i: u32| match spec.direction {
            Direction::Upload => true,
            Direction::Download => false,
            Direction::Bidir => i < spec.streams,
        };
        let params = StreamParams {
            len: spec.len,
            limit: spec.bytes.map(|b| b.div_ceil(u64::from(spec.streams))),
            stall: self.target.timeout,
            udp_rate: spec.udp_rate.unwrap_or(0.0) / f64::from(spec.streams),
        };
        let key = wire::key_from_hex(&self.key).ok_or_else(|| NetError::Protocol("bad session key".into()))?;
        let set = if udp {
            let mut socks = Vec::new();
            for i in 0..n {
                socks.push((udp_hello(self.peer, &key, self.target.timeout)?, client_sends(i)));
            }
            socks
        } else {
            Vec::new()
        };
        let mut tcp = Vec::new();
        if !udp {
            for i in 0..n {
                let hello = Hello::Stream { session: self.key.clone(), test, index: i };
                tcp.push((open_stream(self.peer, self.target.timeout, &hello)?, client_sends(i)));
            }
        }
        match self.read_reply()? {
            Reply::Started => {}
            Reply::Refused { reason } => return Err(NetError::Refused(reason)),
            other => return Err(NetError::Protocol(format!("unexpected {other:?}"))),
        }
        let cpu = CpuMeter::start();
        let mut streams = if udp {
            StreamSet::start_udp(set, UdpHeader::Headroom { key }, params)
        } else {
            StreamSet::start_tcp(tcp, params)
        };
        let rr_stop = Arc::new(AtomicBool::new(false));
        let rr_thread = if spec.rtt_under_load {
            let (peer, key, timeout, stop2) = (self.peer, self.key.clone(), self.target.timeout, rr_stop.clone());
            Some(std::thread::spawn(move || {
                rr_loop(peer, &key, 64, Duration::from_secs(86_400), timeout, &stop2, &mut |_| {})
            }))
        } else {
            None
        };
        let mut sampler = Sampler::new();
        let mut samples = Vec::new();
        let mut next_tick = Duration::from_secs(1);
        let recv_counters = streams.counters(false);
        let mut error = None;
        let mut server_ended = false;
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let elapsed = sampler.elapsed();
            if elapsed >= next_tick {
                let s = sampler.tick(streams.total_bytes());
                on_sample(&s);
                samples.push(s);
                next_tick += Duration::from_secs(1);
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if spec.bytes.is_none() && elapsed >= spec.duration {
                break;
            }
            if spec.bytes.is_some()
                && streams.senders_finished()
                && (spec.direction == Direction::Upload || streams.all_finished())
            {
                break;
            }
            if spec.bytes.is_some() && spec.direction == Direction::Download && streams.all_finished() {
                break;
            }
            if let Some(e) = streams.error() {
                error = Some(e);
                break;
            }
            if crate::server::wait_readable(self.control.as_raw_fd(), Duration::ZERO) {
                server_ended = true;
                break;
            }
        }
        let duration = sampler.elapsed().as_secs_f64();
        let download_bytes = datapath::total(&recv_counters);
        let cpu_load_local = cpu.load();
        let cpu_local = cpu.stop();
        streams.stop_senders();
        // A partial last interval still counts, so the samples cover the whole test.
        if duration > sampler_last(&samples) + 0.2 {
            let s = sampler.tick(streams.total_bytes());
            on_sample(&s);
            samples.push(s);
        }
        rr_stop.store(true, Ordering::Relaxed);
        let mut result = ThroughputResult {
            protocol: "headroom".into(),
            peer: self.target.display(),
            direction: Some(spec.direction),
            udp,
            streams: spec.streams,
            duration_s: duration,
            download_bytes,
            samples,
            cpu_local,
            cpu_load_local,
            fixed_bytes: spec.bytes,
            rate_bits: spec.udp_rate,
            ..Default::default()
        };
        // Ask for the server's side; on a broken path keep what we measured.
        let report = if error.is_some() {
            self.control.set_read_timeout(Some(Duration::from_secs(2))).ok();
            None
        } else {
            let r = if server_ended {
                self.read_reply()
            } else {
                wire::write_frame(&mut self.control, &Request::End)
                    .map_err(|e| NetError::Broken(format!("control connection: {e}")))
                    .and_then(|_| self.read_reply())
            };
            match r {
                Ok(Reply::Result(rep)) => Some(rep),
                Ok(other) => {
                    error = Some(format!("unexpected server reply {other:?}"));
                    None
                }
                Err(e) => {
                    error = Some(e.to_string());
                    None
                }
            }
        };
        let outcomes = streams.finish(Duration::from_secs(1));
        if let Some(h) = rr_thread {
            if let Ok(Ok(rr)) = h.join() {
                result.rtt_under_load = rr.rtt.latency();
            }
        }
        for o in outcomes.iter().filter(|o| o.sending) {
            if let Some(t) = &o.tcp_info {
                result.sender_tcp_info.push(t.clone());
            }
        }
        if udp {
            result.udp_recv =
                outcomes.iter().filter_map(|o| o.udp.as_ref().map(|u| u.summary)).reduce(UdpRecvSummary::merge);
        }
        match report {
            Some(rep) => {
                result.upload_bytes = rep.streams.iter().map(|s| s.bytes_received).sum();
                result.sender_tcp_info.extend(rep.streams.iter().filter_map(|s| s.tcp_info.clone()));
                result.cpu_remote = Some(rep.cpu);
                result.cpu_load_remote = rep.cpu_load.map(|l| *l);
                // The server counted from its streams' start to the end request
                // (or, for a fixed transfer, to the last byte).
                result.upload_duration_s = Some(rep.duration_s);
                if rep.udp.is_some() {
                    result.udp_recv = rep.udp;
                }
                error = error.or(rep.error);
            }
            None => {
                // No server figures: fall back to what this side sent.
                result.upload_bytes = outcomes.iter().filter(|o| o.sending).map(|o| o.bytes).sum();
            }
        }
        result.error = error;
        Ok(result)
    }

    /// Request/response round trips of `size` bytes for `duration`.
    pub fn rr(
        &self,
        size: usize,
        duration: Duration,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&Sample),
    ) -> Result<RrResult, NetError> {
        rr_loop(self.peer, &self.key, size, duration, self.target.timeout, stop, on_sample)
    }

    /// UDP echo round trips: `count` datagrams of `size` bytes, one every `interval`.
    pub fn udp_echo(
        &self,
        count: u32,
        interval: Duration,
        size: usize,
        stop: &AtomicBool,
    ) -> Result<EchoResult, NetError> {
        let key = wire::key_from_hex(&self.key).ok_or_else(|| NetError::Protocol("bad session key".into()))?;
        udp_echo(self.peer, &key, count, interval, size, self.target.timeout.min(Duration::from_secs(1)), stop)
    }

    /// Says goodbye (the server frees the slot at once).
    pub fn close(mut self) {
        let _ = wire::write_frame(&mut self.control, &Request::Bye);
    }
}

/// Proves we hold the token without sending it (see [`wire`]); returns the server's verdict.
fn answer_challenge(control: &mut TcpStream, target: &Target, nonce: &str) -> Result<Reply, NetError> {
    let Some(token) = &target.token else {
        return Err(NetError::Refused(format!(
            "{} requires a token: pass --token (the one given to `headroom serve --token`)",
            target.display()
        )));
    };
    let theirs = wire::from_hex::<{ wire::NONCE_LEN }>(nonce)
        .ok_or_else(|| NetError::Protocol("the server's challenge is not a nonce".into()))?;
    let ours = wire::random_nonce();
    let answer =
        wire::AuthAnswer { nonce: wire::to_hex(&ours), proof: wire::to_hex(&wire::auth_proof(token, &theirs, &ours)) };
    wire::write_frame(control, &answer)?;
    wire::read_frame(control, wire::MAX_FRAME).map_err(|e| NetError::Protocol(format!("after the challenge: {e}")))
}

fn sampler_last(samples: &[Sample]) -> f64 {
    samples.last().map_or(0.0, |s| s.t_s)
}

/// Opens a UDP stream: a connected socket whose hello the server answered.
fn udp_hello(peer: SocketAddr, key: &[u8; wire::KEY_LEN], timeout: Duration) -> Result<UdpSocket, NetError> {
    let local: SocketAddr =
        if peer.is_ipv4() { "0.0.0.0:0".parse().expect("literal") } else { "[::]:0".parse().expect("literal") };
    let sock = UdpSocket::bind(local)?;
    sock.connect(peer)?;
    let mut hello = wire::UDP_DATA_TAG.to_vec();
    hello.extend_from_slice(key);
    sock.set_read_timeout(Some(Duration::from_millis(300)))?;
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 64];
    while Instant::now() < deadline {
        sock.send(&hello)?;
        if let Ok(n) = sock.recv(&mut buf) {
            if buf[..n] == hello[..] {
                return Ok(sock);
            }
        }
    }
    Err(NetError::Broken(format!("no answer to the UDP hello from {peer} (UDP blocked by a firewall?)")))
}

fn rr_loop(
    peer: SocketAddr,
    key: &str,
    size: usize,
    duration: Duration,
    timeout: Duration,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<RrResult, NetError> {
    let size = size.clamp(1, wire::MAX_RR_SIZE as usize);
    let mut s = open_stream(peer, timeout, &Hello::Rr { session: key.into(), size: size as u32 })?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(timeout))?;
    let mut buf = datapath::payload(size);
    let mut rtt = LatencyRecorder::default();
    let start = Instant::now();
    let mut samples = Vec::new();
    let (mut tick_ops, mut tick_sum, mut next) = (0u64, 0f64, Duration::from_secs(1));
    while start.elapsed() < duration && !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        if let Err(e) = s.write_all(&buf).and_then(|_| s.read_exact(&mut buf)) {
            if rtt.count() > 0 && stop.load(Ordering::Relaxed) {
                break;
            }
            return Err(NetError::Broken(format!("request/response stream: {e}")));
        }
        let d = t0.elapsed();
        rtt.record(d);
        tick_ops += 1;
        tick_sum += d.as_nanos() as f64;
        if start.elapsed() >= next {
            let sample = Sample {
                t_s: start.elapsed().as_secs_f64(),
                bytes_per_sec: 0.0,
                iops: Some(tick_ops as f64),
                latency_ns_mean: Some(tick_sum / tick_ops as f64),
                latency_ns_p99: None,
            };
            on_sample(&sample);
            samples.push(sample);
            tick_ops = 0;
            tick_sum = 0.0;
            next += Duration::from_secs(1);
        }
    }
    Ok(RrResult { size, duration_s: start.elapsed().as_secs_f64(), rtt, samples })
}

fn udp_echo(
    peer: SocketAddr,
    key: &[u8; wire::KEY_LEN],
    count: u32,
    interval: Duration,
    size: usize,
    wait: Duration,
    stop: &AtomicBool,
) -> Result<EchoResult, NetError> {
    let local: SocketAddr =
        if peer.is_ipv4() { "0.0.0.0:0".parse().expect("literal") } else { "[::]:0".parse().expect("literal") };
    let sock = UdpSocket::bind(local)?;
    sock.connect(peer)?;
    let size = size.clamp(4 + wire::KEY_LEN + 8, 1400);
    let mut msg = vec![0u8; size];
    msg[..4].copy_from_slice(wire::UDP_ECHO_TAG);
    msg[4..20].copy_from_slice(key);
    let mut buf = vec![0u8; 2048];
    let mut out = EchoResult::default();
    let mut prev_rtt: Option<f64> = None;
    let start = Instant::now();
    for seq in 1..=u64::from(count) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let sent_at = Instant::now();
        msg[20..28].copy_from_slice(&seq.to_be_bytes());
        if let Err(e) = sock.send(&msg) {
            return Err(NetError::Broken(format!("UDP echo: {e}")));
        }
        out.sent += 1;
        let deadline = sent_at + wait;
        loop {
            let left = match deadline.checked_duration_since(Instant::now()) {
                Some(l) if !l.is_zero() => l,
                _ => break,
            };
            sock.set_read_timeout(Some(left))?;
            match sock.recv(&mut buf) {
                Ok(n) if n == size && buf[20..28] == seq.to_be_bytes() => {
                    let rtt = sent_at.elapsed();
                    out.rtt.record(rtt);
                    out.received += 1;
                    let r = rtt.as_secs_f64();
                    if let Some(p) = prev_rtt {
                        out.jitter_s += ((r - p).abs() - out.jitter_s) / 16.0;
                    }
                    prev_rtt = Some(r);
                    break;
                }
                Ok(_) => continue, // a late answer to an earlier datagram
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Err(NetError::Broken(format!(
                        "{peer}: UDP port closed (is `headroom serve` running there?)"
                    )));
                }
                Err(_) => break,
            }
        }
        if let Some(pause) = interval.checked_sub(sent_at.elapsed()) {
            std::thread::sleep(pause);
        }
    }
    out.duration_s = start.elapsed().as_secs_f64();
    Ok(out)
}
