//! The headroom-protocol client: an authenticated [`Session`] with a
//! headroom server (its throughput tests are in [`crate::throughput`], run by
//! the loop both protocols share), request/response RTT (idle and under load) and UDP
//! echo RTT with jitter and loss. Results come back as plain data
//! ([`RrResult`], [`EchoResult`]); [`crate::probe`] turns them into probes.
//!
//! Long (about 720 lines): the session's opening (greeting, refusal, challenge) and its tests are
//! kept beside the requests they guard; the code itself is under 600 lines, the rest its unit
//! tests.

use crate::address::{connect, Endpoint};
use crate::busy_poll::BusyPollEnd;
use crate::datapath;
use crate::error::NetError;
use crate::socket::{connect_to_server, udp_connected, Inbox, SocketSetup, Source};
use crate::stats::LatencyRecorder;
use crate::wire::{self, Hello, Reply, Request};
use headroom_result::Sample;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a server that accepts a connection and then says nothing may be.
pub(crate) const SILENT_SERVER: &str =
    "the server accepted the connection and said nothing; an iperf2 server (`iperf -s`, port 5001) \
     waits for the client's data: use --protocol iperf2";

/// Request/response round trips.
#[derive(Debug, Clone, Default)]
pub struct RrResult {
    /// Message size, bytes each way.
    pub size: usize,
    /// How long the round trips ran, seconds.
    pub duration_s: f64,
    /// Every round trip time.
    pub rtt: LatencyRecorder,
    /// One sample per `sample_interval`: round trips per second and their mean time.
    pub samples: Vec<Sample>,
    /// Length of each sample (the duration's twentieth, 100 ms to 1 s).
    pub sample_interval: Duration,
    /// Where the connection left from (`--bind`, `--interface`).
    pub source: Option<String>,
    /// `--busy-poll` asked: what each end did.
    pub busy_poll: Option<BusyPoll>,
}

/// What each end of busy-polled round trips did (`details.busy_poll`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BusyPoll {
    /// This machine.
    pub local: BusyPollEnd,
    /// The server: all false when it did not answer the request (a server
    /// that predates `--busy-poll` blocks in its reads).
    pub remote: BusyPollEnd,
}

/// How long a client waits for the server's busy-poll answer before taking
/// it for a server that predates the request (which sends nothing).
const BUSY_POLL_ANSWER_WAIT: Duration = Duration::from_secs(1);

/// UDP echo round trips.
#[derive(Debug, Clone, Default)]
pub struct EchoResult {
    /// Datagrams sent.
    pub sent: u64,
    /// Answers received in time.
    pub received: u64,
    /// How long the series ran, seconds.
    pub duration_s: f64,
    /// Round trip time of every answer.
    pub rtt: LatencyRecorder,
    /// RFC 3550 jitter over successive RTTs, seconds.
    pub jitter_s: f64,
    /// Where the datagrams left from (`--bind`, `--interface`).
    pub source: Option<String>,
}

/// An authenticated control connection to a headroom server.
pub struct Session {
    pub(crate) control: TcpStream,
    /// The session's secret: derived from the authentication, or as a
    /// server without a token sent it.
    pub(crate) keys: wire::SessionKeys,
    /// The server address that answered.
    pub peer: SocketAddr,
    /// Where the session was opened, as the user named it.
    pub target: Endpoint,
    /// The server's headroom version.
    pub server_version: String,
    /// Whether the server runs disk and CPU probes for clients.
    pub runs_probes: bool,
    /// The frame being read from `control`: every read of the control
    /// connection goes through it, so each frame has a deadline.
    inbox: Inbox,
    /// How long the server has to answer a request, whole ([`Endpoint::timeout`]).
    pub(crate) answer_within: Duration,
}

pub(crate) fn open_stream(
    peer: SocketAddr,
    timeout: Duration,
    setup: &SocketSetup,
    hello: &Hello,
) -> Result<TcpStream, NetError> {
    let mut s = connect_to_server(peer, timeout, setup)?;
    greet(&mut s, hello)?;
    Ok(s)
}

/// Writes the greeting and the hello in one segment.
fn greet(s: &mut TcpStream, hello: &Hello) -> Result<(), NetError> {
    let mut msg = wire::greeting().to_vec();
    let body = serde_json::to_vec(hello).map_err(|e| NetError::Protocol(e.to_string()))?;
    msg.extend_from_slice(&crate::socket::length_prefixed(&body));
    s.write_all(&msg)?;
    Ok(())
}

/// Why one attempt to open a session failed.
enum Opening {
    /// The greeting was reset before any answer.
    Reset,
    Failed(NetError),
}

impl Opening {
    fn into_error(self) -> NetError {
        match self {
            Opening::Reset => NetError::IsIperf3,
            Opening::Failed(e) => e,
        }
    }
}

impl From<NetError> for Opening {
    fn from(e: NetError) -> Self {
        Opening::Failed(e)
    }
}

impl From<std::io::Error> for Opening {
    fn from(e: std::io::Error) -> Self {
        Opening::Failed(e.into())
    }
}

/// Whether the server at `target` answers an iperf3 cookie as iperf3 does:
/// PARAM_EXCHANGE (ready for the test's parameters) or ACCESS_DENIED (busy).
/// The test is abandoned at once; a stock server logs it and listens on.
fn answers_like_iperf3(target: &Endpoint) -> bool {
    let Ok((mut conn, _)) = connect(target) else { return false };
    let _ = conn.set_read_timeout(Some(target.timeout));
    if conn.write_all(&crate::iperf3::new_cookie()).is_err() {
        return false;
    }
    matches!(crate::iperf3::read_state(&mut conn), Ok(crate::iperf3::PARAM_EXCHANGE | crate::iperf3::ACCESS_DENIED))
}

/// How long to wait before greeting again a server that reset the greeting.
const RESET_RETRY_PAUSE: Duration = Duration::from_millis(250);

impl Session {
    /// Connects, greets and authenticates. Returns [`NetError::IsIperf3`] when
    /// the server turns out to be a stock iperf3.
    pub fn open(target: &Endpoint) -> Result<Session, NetError> {
        match Session::open_once(target) {
            // A reset with nothing said is a stock iperf3, or a headroom server
            // dying with our connection in its backlog. Asked again a moment
            // later, iperf3 resets again and a dead server refuses.
            Err(Opening::Reset) => {
                std::thread::sleep(RESET_RETRY_PAUSE);
                match Session::open_once(target) {
                    // Reset twice: ask the way iperf3 is asked, and believe what it does.
                    Err(Opening::Reset) if answers_like_iperf3(target) => Err(NetError::IsIperf3),
                    Err(Opening::Reset) => Err(NetError::Protocol(format!(
                        "{} reset the connection before answering, twice, and does not answer an iperf3 cookie either: neither a headroom server nor a stock iperf3 listens there",
                        target.display()
                    ))),
                    other => other.map_err(Opening::into_error),
                }
            }
            other => other.map_err(Opening::into_error),
        }
    }

    fn open_once(target: &Endpoint) -> Result<Session, Opening> {
        // One connection per attempt: a stock iperf3 server would take a throwaway
        // connection for a control connection and reset the next one.
        let (mut control, peer) = connect(target)?;
        // The whole opening (greeting, challenge, welcome) has one deadline,
        // however the server spaces its bytes.
        let deadline = Instant::now() + target.timeout;
        let hello = Hello::Control { client_version: env!("CARGO_PKG_VERSION").into() };
        greet(&mut control, &hello)?;
        control.set_nodelay(true)?;
        control.set_read_timeout(Some(target.timeout))?;
        let mut first = [0u8; 1];
        control.read_exact(&mut first).map_err(|e| match e.kind() {
            // A stock iperf3 server takes our greeting for a cookie, answers PARAM_EXCHANGE,
            // fails to parse the rest and closes with our bytes unread: the kernel's RST can
            // overtake its answer. A running headroom server never resets a greeting.
            std::io::ErrorKind::ConnectionReset => Opening::Reset,
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Opening::Failed(NetError::Protocol(
                format!("no answer to the greeting within {:.0} s: {SILENT_SERVER}", target.timeout.as_secs_f64()),
            )),
            _ => Opening::Failed(NetError::Protocol(format!("no answer to the greeting: {e}"))),
        })?;
        if first[0] != 0 {
            // A length prefix of a headroom frame starts with 0 (frames are < 16 MiB);
            // iperf3 answers a cookie with PARAM_EXCHANGE (9) or ACCESS_DENIED (0xFF).
            return Err(NetError::IsIperf3.into());
        }
        let mut inbox = Inbox::holding(&first);
        let opening = |e: std::io::Error| {
            NetError::Protocol(format!("{}: the greeting's answer: {}", target.display(), opening_error(&e, target)))
        };
        let mut reply: Reply = inbox
            .read_by(&control, wire::MAX_FRAME, "message", deadline, None)
            .and_then(|body| wire::decode(&body))
            .map_err(opening)?;
        let mut derived = None;
        if let Reply::Challenge { nonce } = &reply {
            derived = Some(answer_challenge(&mut control, target, nonce)?);
            reply = inbox
                .read_by(&control, wire::MAX_FRAME, "message", deadline, None)
                .and_then(|body| wire::decode(&body))
                .map_err(|e| {
                    NetError::Protocol(format!(
                        "{}: after the challenge: {}",
                        target.display(),
                        opening_error(&e, target)
                    ))
                })?;
        }
        match reply {
            Reply::Welcome { session, server_version, probes, .. } => Ok(Session {
                control,
                keys: match derived {
                    Some(keys) => keys,
                    None => wire::SessionKeys::from_hex(&session)
                        .ok_or_else(|| NetError::Protocol("the server's Welcome holds no session key".into()))?,
                },
                peer,
                target: target.clone(),
                server_version,
                runs_probes: probes,
                inbox,
                answer_within: target.timeout,
            }),
            Reply::Refused { reason } => Err(NetError::Refused(format!("{}: {reason}", target.display())).into()),
            other => Err(NetError::Protocol(format!("unexpected {other:?}")).into()),
        }
    }

    pub(crate) fn request(&mut self, req: &Request) -> Result<Reply, NetError> {
        wire::write_frame(&mut self.control, req).map_err(|e| NetError::Broken(format!("control connection: {e}")))?;
        self.read_reply()
    }

    /// The server's next message, whole within [`Session::answer_within`].
    pub(crate) fn read_reply(&mut self) -> Result<Reply, NetError> {
        let deadline = Instant::now() + self.answer_within;
        self.read_by(wire::MAX_FRAME, deadline, None).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
                NetError::Broken(format!("{}: the server closed the connection", self.target.display()))
            }
            std::io::ErrorKind::TimedOut => NetError::Broken(format!(
                "{}: {} within {:.0} s",
                self.target.display(),
                e,
                self.answer_within.as_secs_f64()
            )),
            _ => NetError::Broken(format!("{}: {e}", self.target.display())),
        })
    }

    /// The server's next message of at most `max` bytes, whole by
    /// `deadline`; `stop` ends the wait at once.
    pub(crate) fn read_by<T: for<'de> serde::Deserialize<'de>>(
        &mut self,
        max: u32,
        deadline: Instant,
        stop: Option<&AtomicBool>,
    ) -> std::io::Result<T> {
        let body = self.inbox.read_by(&self.control, max, "message", deadline, stop)?;
        wire::decode(&body)
    }

    /// The server's next message if it is whole after waiting at most
    /// `wait` for more of it (a partial one stays in the inbox).
    pub(crate) fn poll<T: for<'de> serde::Deserialize<'de>>(
        &mut self,
        max: u32,
        wait: Duration,
    ) -> std::io::Result<Option<T>> {
        match self.inbox.poll(&self.control, max, "message", wait)? {
            Some(body) => wire::decode(&body).map(Some),
            None => Ok(None),
        }
    }

    /// The session's public id (UDP datagrams carry it).
    pub(crate) fn id(&self) -> [u8; wire::KEY_LEN] {
        self.keys.id()
    }

    /// Request/response round trips of `size` bytes for `duration`; with
    /// `busy_poll` both ends spin on non-blocking sockets ([`crate::busy_poll`]).
    pub fn rr(
        &self,
        size: usize,
        duration: Duration,
        busy_poll: bool,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&Sample),
    ) -> Result<RrResult, NetError> {
        rr_loop(&self.reach(), &self.keys, RrPlan { size, duration, busy_poll }, stop, on_sample)
    }

    /// UDP echo round trips: `count` datagrams of `size` bytes, one every
    /// `interval`; `on_each` sees every datagram's round trip (None: no answer).
    pub fn udp_echo(
        &self,
        count: u32,
        interval: Duration,
        size: usize,
        stop: &AtomicBool,
        on_each: &mut dyn FnMut(u64, Option<Duration>),
    ) -> Result<EchoResult, NetError> {
        let key = self.id();
        let plan = EchoPlan { count, interval, size, wait: self.target.timeout.min(Duration::from_secs(1)) };
        udp_echo(&self.reach(), &key, plan, stop, on_each)
    }

    /// The server's address as this session reached it.
    pub(crate) fn reach(&self) -> Reach {
        Reach { addr: self.peer, timeout: self.target.timeout, source: self.target.source.clone() }
    }

    /// Records a flushcheck run on the server (its `--flushcheck-dir`).
    pub fn flush_begin(&mut self, run: &wire::FlushRun) -> Result<(), NetError> {
        match self.request(&Request::FlushBegin { run: run.clone() })? {
            Reply::FlushRecorded { .. } => Ok(()),
            other => Err(flush_refusal(other)),
        }
    }

    /// Reports one block the storage acknowledged; returns once the server
    /// has it on its disk.
    pub fn flush_ack(&mut self, run: &str, ack: wire::FlushAck) -> Result<(), NetError> {
        match self.request(&Request::FlushAck { run: run.into(), ack })? {
            Reply::FlushRecorded { seq } if seq == ack.seq => Ok(()),
            other => Err(flush_refusal(other)),
        }
    }

    /// The run and every block of it the server recorded, in offset order.
    /// A listener's list is held to the run it declares: pages of at most
    /// [`wire::FLUSH_PAGE`] blocks, each block inside the run, offsets moving
    /// forward, so the whole list is at most the run's block count (a list
    /// whose pages never end is refused, not gathered for ever).
    pub fn flush_list(&mut self, run: &str) -> Result<(wire::FlushRun, Vec<wire::FlushAck>), NetError> {
        let (mut after, mut all) = (0u64, Vec::new());
        let mut declared: Option<wire::FlushRun> = None;
        let listener = self.target.display();
        let wrong = |what: String| NetError::Protocol(format!("{listener}: the listener's flushcheck list {what}"));
        loop {
            match self.request(&Request::FlushList { run: run.into(), after })? {
                Reply::FlushAcks { run: r, acks, more } => {
                    if r.run != run || declared.as_ref().is_some_and(|d| *d != r) {
                        return Err(wrong(format!("is of another run than {run}")));
                    }
                    r.validate().map_err(|e| wrong(format!("declares an impossible run: {e}")))?;
                    if acks.len() > wire::FLUSH_PAGE {
                        return Err(wrong(format!(
                            "sent a page of {} blocks (at most {})",
                            acks.len(),
                            wire::FLUSH_PAGE
                        )));
                    }
                    if let Some(e) = acks.iter().find_map(|a| r.check_ack(a).err()) {
                        return Err(wrong(format!("holds {e}")));
                    }
                    // A page that does not move forward would loop for ever.
                    let last = acks.last().map(|a| a.offset);
                    let back = acks.first().is_some_and(|a| a.offset <= after);
                    if back || acks.windows(2).any(|w| w[0].offset >= w[1].offset) {
                        return Err(wrong("is out of order".into()));
                    }
                    all.extend(acks);
                    if all.len() as u64 > r.blocks {
                        return Err(wrong(format!("holds more blocks than the run's {}", r.blocks)));
                    }
                    match last {
                        Some(l) if more => after = l,
                        _ => return Ok((r, all)),
                    }
                    declared = Some(r);
                }
                other => return Err(flush_refusal(other)),
            }
        }
    }

    /// Says goodbye (the server frees the slot at once).
    pub fn close(mut self) {
        let _ = wire::write_frame(&mut self.control, &Request::Bye);
    }
}

fn flush_refusal(reply: Reply) -> NetError {
    match reply {
        Reply::Refused { reason } => NetError::Refused(reason),
        other => NetError::Protocol(format!("unexpected answer to a flushcheck request: {other:?}")),
    }
}

/// Proves we hold the token without sending it (see [`wire`]); the server's
/// verdict is the next frame. Returns the session secret both ends derive
/// from the exchange.
fn answer_challenge(control: &mut TcpStream, target: &Endpoint, nonce: &str) -> Result<wire::SessionKeys, NetError> {
    let Some(token) = &target.token else {
        return Err(NetError::TokenNeeded { server: target.display() });
    };
    let theirs = wire::from_hex::<{ wire::NONCE_LEN }>(nonce)
        .ok_or_else(|| NetError::Protocol("the server's challenge is not a nonce".into()))?;
    let ours = wire::random_nonce();
    let answer =
        wire::AuthAnswer { nonce: wire::to_hex(&ours), proof: wire::to_hex(&wire::auth_proof(token, &theirs, &ours)) };
    wire::write_frame(control, &answer)?;
    Ok(wire::SessionKeys::derived(token, &theirs, &ours))
}

/// A failed read of the opening's answers, said with the deadline it missed.
fn opening_error(e: &std::io::Error, target: &Endpoint) -> String {
    match e.kind() {
        std::io::ErrorKind::TimedOut => format!("{e} within {:.0} s", target.timeout.as_secs_f64()),
        _ => e.to_string(),
    }
}

/// Opens a UDP stream: a connected socket whose hello the server answered.
pub(crate) fn udp_hello(
    peer: SocketAddr,
    key: &[u8; wire::KEY_LEN],
    timeout: Duration,
    setup: &SocketSetup,
) -> Result<UdpSocket, NetError> {
    let sock = udp_connected(peer, setup)?;
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

/// A server's address as this client reaches it: from where, how patiently.
#[derive(Debug, Clone)]
pub(crate) struct Reach {
    pub addr: SocketAddr,
    pub timeout: Duration,
    pub source: Source,
}

/// A UDP echo series: `count` datagrams of `size` bytes, one every
/// `interval`, each answer awaited at most `wait`.
#[derive(Debug, Clone, Copy)]
pub struct EchoPlan {
    pub count: u32,
    pub interval: Duration,
    pub size: usize,
    pub wait: Duration,
}

/// What round trips to run: message size, how long, busy-polled or not.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RrPlan {
    pub size: usize,
    pub duration: Duration,
    pub busy_poll: bool,
}

/// The server's answer to a busy-poll request, and this end made to spin;
/// a server that sends nothing within [`BUSY_POLL_ANSWER_WAIT`] predates it.
fn start_busy_poll(s: &mut TcpStream) -> BusyPoll {
    let _ = s.set_read_timeout(Some(BUSY_POLL_ANSWER_WAIT));
    let mut answer = [0u8; 1];
    let remote = match s.read_exact(&mut answer) {
        Ok(()) => BusyPollEnd::from_byte(answer[0]),
        Err(_) => BusyPollEnd::default(),
    };
    BusyPoll { local: crate::busy_poll::prepare(s), remote }
}

pub(crate) fn rr_loop(
    reach: &Reach,
    keys: &wire::SessionKeys,
    plan: RrPlan,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<RrResult, NetError> {
    let size = plan.size.clamp(1, wire::MAX_RR_SIZE as usize);
    let size32 = size as u32;
    let hello = Hello::Rr {
        session: wire::to_hex(&keys.id()),
        size: size32,
        proof: wire::to_hex(&keys.rr_proof(size32)),
        busy_poll: plan.busy_poll,
    };
    let mut s = open_stream(reach.addr, reach.timeout, &SocketSetup::from(&reach.source), &hello)?;
    s.set_nodelay(true)?;
    let busy = plan.busy_poll.then(|| start_busy_poll(&mut s));
    // No read timeout on the socket: it would arm a kernel timer in every
    // blocked read (stall_watch.rs says what that costs); a watcher ends a
    // stalled exchange instead.
    s.set_read_timeout(None)?;
    let plan = RrPlan { size, ..plan };
    let (rtt, samples, duration_s) = crate::stall_watch::guarded(&s, reach.timeout, stop, |progress| {
        round_trips(&s, plan, reach.timeout, stop, progress, on_sample)
    })?;
    Ok(RrResult {
        size,
        duration_s,
        rtt,
        samples,
        sample_interval: headroom_runner::sample_interval_for(plan.duration),
        source: reach.source.describe(),
        busy_poll: busy,
    })
}

/// The round trips of an RR test on `s`, timed: the latencies, the samples
/// and how long they took.
fn round_trips(
    mut s: &TcpStream,
    plan: RrPlan,
    timeout: Duration,
    stop: &AtomicBool,
    progress: &crate::stall_watch::Progress,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<(LatencyRecorder, Vec<Sample>, f64), NetError> {
    let RrPlan { size, duration, busy_poll } = plan;
    let mut buf = datapath::payload(size);
    let mut rtt = LatencyRecorder::default();
    let start = Instant::now();
    let mut samples = Vec::new();
    let every = headroom_runner::sample_interval_for(duration);
    let (mut tick_ops, mut tick_sum, mut next, mut last) = (0u64, 0f64, every, Duration::ZERO);
    // Two clock readings per round trip, as sockperf takes: its start and its end.
    let mut now = Duration::ZERO;
    while now < duration && !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let round_trip = if busy_poll {
            crate::busy_poll::write_all(s, &buf, timeout)
                .and_then(|_| crate::busy_poll::read_exact(s, &mut buf, timeout))
        } else {
            s.write_all(&buf).and_then(|_| s.read_exact(&mut buf))
        };
        if let Err(e) = round_trip {
            if rtt.count() > 0 && stop.load(Ordering::Relaxed) {
                break;
            }
            if progress.stalled() {
                let secs = timeout.as_secs_f64();
                return Err(NetError::Broken(format!("request/response stream: no answer for {secs:.0} s")));
            }
            return Err(NetError::Broken(format!("request/response stream: {e}")));
        }
        progress.tick();
        let t1 = Instant::now();
        let d = t1 - t0;
        rtt.record(d);
        tick_ops += 1;
        tick_sum += d.as_nanos() as f64;
        now = t1 - start;
        if now >= next {
            let sample = Sample {
                t_s: now.as_secs_f64(),
                bytes_per_sec: 0.0,
                iops: Some(tick_ops as f64 / (now - last).as_secs_f64().max(1e-9)),
                latency_ns_mean: Some(tick_sum / tick_ops as f64),
                latency_ns_p99: None,
            };
            on_sample(&sample);
            samples.push(sample);
            tick_ops = 0;
            tick_sum = 0.0;
            last = now;
            next += every;
        }
    }
    Ok((rtt, samples, start.elapsed().as_secs_f64()))
}

fn udp_echo(
    reach: &Reach,
    key: &[u8; wire::KEY_LEN],
    plan: EchoPlan,
    stop: &AtomicBool,
    on_each: &mut dyn FnMut(u64, Option<Duration>),
) -> Result<EchoResult, NetError> {
    let peer = reach.addr;
    let sock = udp_connected(peer, &SocketSetup::from(&reach.source))?;
    let EchoPlan { count, interval, size, wait } = plan;
    let size = size.clamp(4 + wire::KEY_LEN + 8, 1400);
    let mut msg = vec![0u8; size];
    msg[..4].copy_from_slice(wire::UDP_ECHO_TAG);
    msg[4..20].copy_from_slice(key);
    let mut buf = vec![0u8; 2048];
    let mut out = EchoResult { source: reach.source.describe(), ..Default::default() };
    let mut prev_rtt: Option<f64> = None;
    // The wait is set once, not before every read: a system call between the
    // send and the read would be timed as part of the round trip.
    sock.set_read_timeout(Some(wait))?;
    let mut wait_shortened = false;
    let start = Instant::now();
    for seq in 1..=u64::from(count) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if std::mem::take(&mut wait_shortened) {
            sock.set_read_timeout(Some(wait))?;
        }
        let sent_at = Instant::now();
        msg[20..28].copy_from_slice(&seq.to_be_bytes());
        if let Err(e) = sock.send(&msg) {
            return Err(NetError::Broken(format!("UDP echo: {e}")));
        }
        out.sent += 1;
        let mut answered = None;
        let deadline = sent_at + wait;
        loop {
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
                    answered = Some(rtt);
                    break;
                }
                Ok(_) => {
                    // A late answer to an earlier datagram: wait for what is left.
                    match deadline.checked_duration_since(Instant::now()) {
                        Some(left) if !left.is_zero() => sock.set_read_timeout(Some(left))?,
                        _ => break,
                    }
                    wait_shortened = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Err(NetError::Broken(format!(
                        "{peer}: UDP port closed (is `headroom serve` running there?)"
                    )));
                }
                Err(_) => break,
            }
        }
        on_each(seq, answered);
        if let Some(pause) = interval.checked_sub(sent_at.elapsed()) {
            std::thread::sleep(pause);
        }
    }
    out.duration_s = start.elapsed().as_secs_f64();
    Ok(out)
}

#[cfg(test)]
mod reset_tests {
    use super::*;
    use std::net::TcpListener;

    /// A listener that resets the first `resets` greetings (linger 0), then,
    /// when `then` is given, answers one more connection's first bytes with it,
    /// then closes: afterwards nothing listens on its port.
    fn resetting_server(resets: usize, then: Option<u8>) -> (u16, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            for _ in 0..resets {
                let (conn, _) = listener.accept().unwrap();
                std::thread::sleep(Duration::from_millis(50)); // the greeting arrives, unread
                socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO)).unwrap();
            }
            if let Some(answer) = then {
                let (mut conn, _) = listener.accept().unwrap();
                let mut cookie = [0u8; crate::iperf3::COOKIE_LEN];
                conn.read_exact(&mut cookie).unwrap();
                conn.write_all(&[answer]).unwrap();
            }
        });
        (port, handle)
    }

    fn endpoint(port: u16) -> Endpoint {
        Endpoint::parse(&format!("127.0.0.1:{port}"), None, Duration::from_secs(3)).unwrap()
    }

    #[test]
    fn a_server_that_reset_once_and_died_is_unreachable_not_iperf3() {
        let (port, server) = resetting_server(1, None);
        let err = Session::open(&endpoint(port)).err().expect("no session");
        server.join().unwrap();
        assert!(matches!(err, NetError::Connect { .. }), "{err:?}");
    }

    /// Issue 29.4: two resets were taken for a stock iperf3; iperf3 is now
    /// recognised by its answer to a cookie, anything else says what it did.
    #[test]
    fn a_server_that_resets_twice_is_iperf3_only_if_it_answers_a_cookie_as_iperf3() {
        let (port, server) = resetting_server(2, Some(crate::iperf3::PARAM_EXCHANGE as u8));
        let err = Session::open(&endpoint(port)).err().expect("no session");
        server.join().unwrap();
        assert!(matches!(err, NetError::IsIperf3), "{err:?}");
        let (port, server) = resetting_server(3, None);
        let err = Session::open(&endpoint(port)).err().expect("no session");
        server.join().unwrap();
        assert!(matches!(err, NetError::Protocol(_)), "{err:?}");
        assert!(err.to_string().contains("reset the connection before answering, twice"), "{err}");
    }
}

#[cfg(test)]
mod hostile_tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// A fake server on loopback: reads the opening, then hands the connection to `then`.
    fn fake_server(then: impl FnOnce(TcpStream) + Send + 'static) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            wire::read_opening(&mut conn).unwrap().expect("a headroom greeting");
            then(conn);
        });
        port
    }

    fn welcome() -> Reply {
        Reply::Welcome {
            session: wire::key_hex(&[7; wire::KEY_LEN]),
            server_version: "x".into(),
            max_duration_ms: 1000,
            max_streams: 1,
            probes: true,
        }
    }

    /// Runs `f` on a thread; the test fails (rather than hangs) when it takes a minute.
    fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(f()).unwrap());
        rx.recv_timeout(Duration::from_secs(60)).expect("the client was still reading after a minute")
    }

    #[test]
    fn a_server_trickling_its_answer_misses_the_deadline() {
        // A length prefix, then one byte every 100 ms: each byte would restart a silence timer.
        let port = fake_server(|mut conn| {
            let _ = conn.write_all(&[0, 0, 1, 0]);
            while conn.write_all(b" ").is_ok() {
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let target = Endpoint::parse(&format!("127.0.0.1:{port}"), None, Duration::from_secs(1)).unwrap();
        let err = within_a_minute(move || Session::open(&target).err().expect("no session"));
        assert!(err.to_string().contains("an answer that never ended within 1 s"), "{err}");
    }

    #[test]
    fn a_flushcheck_list_that_never_ends_is_refused() {
        let run = wire::FlushRun {
            run: "00112233445566778899aabbccddeeff".into(),
            block_size: 4096,
            blocks: 1000,
            sync: "fsync".into(),
            path: "/f".into(),
            host: "h".into(),
        };
        let declared = run.clone();
        // Every page is full and says more follow, its offsets always further on.
        let port = fake_server(move |mut conn| {
            wire::write_frame(&mut conn, &welcome()).unwrap();
            while let Ok(Request::FlushList { after, .. }) = wire::read_frame(&mut conn, wire::MAX_FRAME) {
                let acks = (1..=wire::FLUSH_PAGE as u64)
                    .map(|i| wire::FlushAck { seq: 1, offset: after + i * 4096, checksum: 0 })
                    .collect();
                let page = Reply::FlushAcks { run: declared.clone(), acks, more: true };
                if wire::write_frame(&mut conn, &page).is_err() {
                    break;
                }
            }
        });
        let target = Endpoint::parse(&format!("127.0.0.1:{port}"), None, Duration::from_secs(5)).unwrap();
        let err = within_a_minute(move || {
            let mut session = Session::open(&target).unwrap();
            session.flush_list(&run.run).expect_err("the list is refused")
        });
        let text = err.to_string();
        assert!(text.contains("127.0.0.1") && text.contains("outside run"), "{text}");
    }
}
