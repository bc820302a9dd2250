//! `headroom serve`: one port for headroom clients and stock iperf3 clients.
//!
//! Threads: one accepts TCP connections, one owns the UDP socket of the same
//! port (UDP echo, UDP stream hellos), one per connection. The first byte of
//! a connection says who is calling: `H` starts the headroom greeting, a
//! character of `[a-z2-7]` starts an iperf3 cookie (a new control connection
//! or a data stream of a running test). Anything else is dropped.
//!
//! Defences: the pre-auth phase (first message, authentication, iperf3
//! parameters) has one deadline and a bounded, per-source table
//! ([`crate::admission`]); a test slot is taken only once that phase is over;
//! the token never crosses the wire (challenge-response, [`crate::wire`]) and
//! failed guesses are throttled per source; every message has a size bound;
//! tests are bounded in streams and duration; a client that dies or stalls
//! frees its slot at the idle timeout. The server only ever answers the peer
//! of a connection or datagram, and a UDP reply is never larger than the
//! datagram it answers.

use crate::admission::{Admission, DeadlineStream, PendingTicket};
use crate::cpu::CpuMeter;
use crate::datapath::{self, StreamOutcome, StreamParams, StreamSet, UdpHeader};
use crate::iperf3::{self, Params};
use crate::wire::{self, AuthAnswer, Direction, Hello, Reply, Request, ServerReport, StreamReport};
use crate::NetError;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::admission::MAX_PENDING;

/// How the server runs.
#[derive(Clone)]
pub struct ServerConfig {
    pub bind: IpAddr,
    pub port: u16,
    /// Shared secret headroom clients must prove they hold (challenge-response); None = no authentication.
    pub token: Option<String>,
    /// Serve stock iperf3 clients (they cannot authenticate). With a token,
    /// they may hold at most `max_clients - 1` slots: one stays for token holders.
    pub allow_iperf3: bool,
    pub max_clients: usize,
    pub max_duration: Duration,
    pub idle_timeout: Duration,
    /// Exit after the first test.
    pub once: bool,
    /// Receives one line per test and per refusal.
    pub log: Arc<dyn Fn(&str) + Send + Sync>,
}

impl ServerConfig {
    pub fn loopback(port: u16) -> Self {
        ServerConfig {
            bind: IpAddr::from([127, 0, 0, 1]),
            port,
            token: None,
            allow_iperf3: true,
            max_clients: 4,
            max_duration: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(10),
            once: false,
            log: Arc::new(|_| {}),
        }
    }
}

/// Checks the safety rule: a non-loopback bind needs a token or an explicit opt-out.
pub fn check_bind_policy(bind: IpAddr, token: Option<&str>, no_auth: bool) -> Result<(), String> {
    if bind.is_loopback() || token.is_some() || no_auth {
        Ok(())
    } else {
        Err(format!(
            "--bind {bind} listens beyond this machine: give --token SECRET (clients pass the same --token) or --no-auth to serve anyone who can reach it"
        ))
    }
}

struct UdpWaiter {
    id: u64,
    peer_ip: IpAddr,
    /// Headroom streams name their session key; iperf3 streams only their address.
    key: Option<[u8; wire::KEY_LEN]>,
    tx: SyncSender<UdpSocket>,
}

/// An authenticated headroom session: its peer, and when any of its
/// connections (control, RR, UDP echo) last did something.
#[derive(Clone)]
struct SessionInfo {
    ip: IpAddr,
    last_activity_ms: Arc<std::sync::atomic::AtomicU64>,
}

impl SessionInfo {
    fn touch(&self, s: &Shared) {
        self.last_activity_ms.store(s.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

/// Where a running iperf3 test receives its data streams, with their arrival number.
type StreamInbox = SyncSender<(u64, TcpStream)>;
/// Where a running headroom test receives its data streams, with their index.
type IndexedStreamInbox = SyncSender<(u32, TcpStream)>;

struct Shared {
    cfg: ServerConfig,
    local: SocketAddr,
    admission: Arc<Admission>,
    tests_done: AtomicUsize,
    stop: Arc<AtomicBool>,
    iperf3_streams: Mutex<HashMap<[u8; iperf3::COOKIE_LEN], StreamInbox>>,
    headroom_streams: Mutex<HashMap<([u8; wire::KEY_LEN], u32), IndexedStreamInbox>>,
    sessions: Mutex<HashMap<[u8; wire::KEY_LEN], SessionInfo>>,
    epoch: Instant,
    udp_waiters: Mutex<Vec<UdpWaiter>>,
    next_waiter: std::sync::atomic::AtomicU64,
}

/// A bound server, ready to run.
pub struct Server {
    listener: TcpListener,
    udp: UdpSocket,
    shared: Arc<Shared>,
}

/// A server running in background threads (tests, the in-process loopback of `headroom run`).
pub struct ServerHandle {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    pub fn stop(mut self) {
        self.shutdown();
    }
    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn reuse_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::DGRAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Why a listening socket could not be made, with what to do about it.
fn listen_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::AddrInUse => format!("{e} (another server has the port; example: --port 5202)"),
        io::ErrorKind::AddrNotAvailable => {
            format!(
                "{e} (no interface of this machine has that address; `ip addr` lists them; example: --bind 0.0.0.0)"
            )
        }
        io::ErrorKind::PermissionDenied => format!("{e} (ports below 1024 need root; example: --port 5201)"),
        _ => e.to_string(),
    }
}

impl Server {
    /// Binds the TCP and UDP sockets of the port.
    pub fn bind(cfg: ServerConfig) -> Result<Server, NetError> {
        let addr = SocketAddr::new(cfg.bind, cfg.port);
        let bind_err = |e: io::Error| NetError::Listen { addr: addr.to_string(), reason: listen_reason(&e) };
        let sock =
            socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None).map_err(bind_err)?;
        sock.set_reuse_address(true).map_err(bind_err)?;
        sock.bind(&addr.into()).map_err(bind_err)?;
        sock.listen(1024).map_err(bind_err)?;
        let listener: TcpListener = sock.into();
        let local = listener.local_addr()?;
        let udp = reuse_udp(local).map_err(bind_err)?;
        udp.set_read_timeout(Some(datapath::POLL))?;
        let shared = Arc::new(Shared {
            cfg,
            local,
            admission: Default::default(),
            tests_done: AtomicUsize::new(0),
            stop: Arc::new(AtomicBool::new(false)),
            iperf3_streams: Default::default(),
            headroom_streams: Default::default(),
            sessions: Default::default(),
            epoch: Instant::now(),
            udp_waiters: Default::default(),
            next_waiter: Default::default(),
        });
        Ok(Server { listener, udp, shared })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    /// Runs in background threads until the handle is stopped or dropped.
    pub fn spawn(self) -> ServerHandle {
        let addr = self.local_addr();
        let stop = self.shared.stop.clone();
        let thread = std::thread::Builder::new()
            .name("headroom-serve".into())
            .spawn(move || {
                let _ = self.run(&AtomicBool::new(false));
            })
            .expect("spawn server thread");
        ServerHandle { addr, stop, thread: Some(thread) }
    }

    /// Serves until `stop` is set (or after one test with `once`).
    pub fn run(self, stop: &AtomicBool) -> io::Result<()> {
        let shared = self.shared;
        let udp_shared = shared.clone();
        let udp = self.udp;
        let udp_thread =
            std::thread::Builder::new().name("serve-udp".into()).spawn(move || udp_loop(&udp, &udp_shared))?;
        let fd = self.listener.as_raw_fd();
        let mut accepted = 0u64;
        let mut failures_logged = Instant::now();
        while !stop.load(Ordering::Relaxed) && !shared.stop.load(Ordering::Relaxed) {
            if shared.cfg.once && shared.tests_done.load(Ordering::Relaxed) > 0 && shared.admission.slots_held() == 0 {
                break;
            }
            if failures_logged.elapsed() >= Duration::from_secs(1) {
                failures_logged = Instant::now();
                for line in shared.admission.failure_log() {
                    (shared.cfg.log)(&line);
                }
            }
            if !wait_readable(fd, datapath::POLL) {
                continue;
            }
            let (conn, peer) = match self.listener.accept() {
                Ok(c) => c,
                Err(_) => continue,
            };
            // iperf3 assigns stream roles by arrival order: remember it, since
            // connection threads may read their cookies in any order.
            accepted += 1;
            let arrival = accepted;
            let Some(mut ticket) = shared.admission.admit(&conn, peer.ip(), preauth_deadline(&shared)) else {
                continue;
            };
            let s = shared.clone();
            let _ = std::thread::Builder::new()
                .name("serve-conn".into())
                .spawn(move || handle_connection(conn, peer, arrival, &s, &mut ticket));
        }
        shared.stop.store(true, Ordering::SeqCst);
        let _ = udp_thread.join();
        Ok(())
    }
}

/// Waits until `fd` is readable or `timeout` passes.
pub(crate) fn wait_readable(fd: i32, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
    rc > 0
}

/// When the pre-auth phase of a connection accepted now must be over: the
/// first message, the authentication and iperf3's parameters all fit in it.
fn preauth_deadline(s: &Shared) -> Instant {
    Instant::now() + s.cfg.idle_timeout.min(Duration::from_secs(10))
}

fn handle_connection(conn: TcpStream, peer: SocketAddr, arrival: u64, s: &Arc<Shared>, ticket: &mut PendingTicket) {
    let _ = conn.set_write_timeout(Some(s.cfg.idle_timeout));
    let mut dl = DeadlineStream { conn: &conn, deadline: ticket.deadline };
    let mut first = [0u8; 1];
    if dl.read_exact(&mut first).is_err() {
        return;
    }
    if iperf3::is_cookie_char(first[0]) {
        let mut cookie = [0u8; iperf3::COOKIE_LEN];
        cookie[0] = first[0];
        if dl.read_exact(&mut cookie[1..]).is_err() || !iperf3::cookie_is_valid(&cookie) {
            return;
        }
        let waiting = s.iperf3_streams.lock().unwrap_or_else(|p| p.into_inner()).get(&cookie).cloned();
        match waiting {
            Some(tx) => {
                ticket.release();
                let _ = tx.try_send((arrival, conn));
            }
            None => serve_iperf3(conn, peer, cookie, s, ticket),
        }
    } else if first[0] == wire::MAGIC[0] {
        let hello = match wire::read_opening(&mut first.chain(&mut dl)) {
            Ok(Some(o)) if o.version == wire::VERSION => o.hello,
            Ok(Some(o)) => {
                let reason = format!(
                    "this server speaks headroom protocol {}, the client {}: run the same headroom version on both ends",
                    wire::VERSION,
                    o.version
                );
                let _ = wire::write_frame(&mut dl, &Reply::Refused { reason });
                return;
            }
            Ok(None) => return,
            Err(e) => {
                let _ = wire::write_frame(&mut dl, &Reply::Refused { reason: format!("bad hello: {e}") });
                return;
            }
        };
        match hello {
            Hello::Control { .. } => serve_headroom(conn, peer, s, ticket),
            Hello::Stream { session, test, index } => {
                ticket.release();
                let key = wire::key_from_hex(&session);
                let tx = key.and_then(|k| {
                    s.headroom_streams.lock().unwrap_or_else(|p| p.into_inner()).get(&(k, test)).cloned()
                });
                if let Some(tx) = tx {
                    let _ = tx.try_send((index, conn));
                }
            }
            Hello::Rr { session, size } => {
                ticket.release();
                let known = wire::key_from_hex(&session)
                    .and_then(|k| s.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&k).cloned())
                    .filter(|info| info.ip == peer.ip());
                if let Some(info) = known.filter(|_| (1..=wire::MAX_RR_SIZE).contains(&size)) {
                    serve_rr(conn, size as usize, &info, s);
                }
            }
        }
    }
}

/// Echoes fixed-size messages until the client leaves or idles out.
fn serve_rr(mut conn: TcpStream, size: usize, session: &SessionInfo, s: &Shared) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(s.cfg.idle_timeout));
    let mut buf = vec![0u8; size];
    let start = Instant::now();
    while start.elapsed() < s.cfg.max_duration && !s.stop.load(Ordering::Relaxed) {
        if conn.read_exact(&mut buf).is_err() || conn.write_all(&buf).is_err() {
            return;
        }
        session.touch(s);
    }
}

/// The UDP side of the port: echo for authenticated sessions, hellos of UDP test streams.
fn udp_loop(sock: &UdpSocket, s: &Shared) {
    let mut buf = vec![0u8; 2048];
    while !s.stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        let msg = &buf[..n];
        if n >= 4 + wire::KEY_LEN && &msg[..4] == wire::UDP_ECHO_TAG {
            let key: [u8; wire::KEY_LEN] = msg[4..4 + wire::KEY_LEN].try_into().expect("length checked");
            let session = s.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
            if let Some(info) = session.filter(|i| i.ip == from.ip()) {
                info.touch(s);
                // The reply is the request itself: never larger, only to its sender.
                let _ = sock.send_to(msg, from);
            }
        } else if iperf3::is_udp_hello(msg) || (n == 4 + wire::KEY_LEN && &msg[..4] == wire::UDP_DATA_TAG) {
            let key: Option<[u8; wire::KEY_LEN]> = if n == 4 { None } else { msg[4..].try_into().ok() };
            let mut waiters = s.udp_waiters.lock().unwrap_or_else(|p| p.into_inner());
            let Some(pos) = waiters.iter().position(|w| w.peer_ip == from.ip() && w.key == key) else { continue };
            let Ok(stream) = reuse_udp(s.local).and_then(|u| u.connect(from).map(|_| u)) else { continue };
            // Reply from the connected socket so later datagrams of this peer land on it.
            let reply: &[u8] = if key.is_some() {
                msg
            } else if msg == iperf3::UDP_HELLO {
                iperf3::UDP_REPLY
            } else {
                &iperf3::LEGACY_UDP_REPLY.to_ne_bytes()
            };
            if stream.send(reply).is_ok() && waiters[pos].tx.try_send(stream).is_err() {
                waiters.remove(pos);
            }
        }
    }
}

#[allow(clippy::too_many_arguments)] // one log line's fields, named at the call site
fn log_test(
    s: &Shared,
    peer: SocketAddr,
    protocol: &str,
    test: &str,
    streams: u32,
    dur: f64,
    bytes: u64,
    status: &str,
) {
    (s.cfg.log)(&format!(
        "peer={peer} protocol={protocol} test={test} streams={streams} duration={dur:.2}s bytes={bytes} rate={} status={status}",
        headroom_units_free_rate(bytes, dur)
    ));
}

/// "941.5 Mb/s" without pulling the units crate into the engine.
fn headroom_units_free_rate(bytes: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return "0 b/s".into();
    }
    let bits = bytes as f64 * 8.0 / secs;
    let (v, p) = if bits >= 1e9 {
        (bits / 1e9, "G")
    } else if bits >= 1e6 {
        (bits / 1e6, "M")
    } else {
        (bits / 1e3, "k")
    };
    format!("{v:.1}{p}b/s")
}

/// Collects `n` items from `rx` before `deadline`.
fn collect<T>(rx: &Receiver<T>, n: usize, timeout: Duration) -> Option<Vec<T>> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let left = deadline.checked_duration_since(Instant::now())?;
        out.push(rx.recv_timeout(left).ok()?);
    }
    Some(out)
}

/// Why a running test ended.
enum Ending {
    /// The client asked (TEST_END / End).
    Client,
    /// The control connection died or the client sent something else.
    Gone(String),
    /// A limit or a stalled stream ended it.
    Server(String),
}

/// Waits for the client's end-of-test message while watching limits and streams.
/// `read_end` reads one control message when the connection is readable and
/// says whether it was the end request; `on_activity` runs whenever data moved.
fn watch_test(
    control: &mut TcpStream,
    set: &StreamSet,
    s: &Shared,
    started: Instant,
    on_activity: &dyn Fn(),
    mut read_end: impl FnMut(&mut TcpStream) -> io::Result<bool>,
) -> Ending {
    let fd = control.as_raw_fd();
    let mut last_bytes = 0;
    let mut last_progress = Instant::now();
    loop {
        if s.stop.load(Ordering::Relaxed) {
            return Ending::Server("server shutting down".into());
        }
        if wait_readable(fd, datapath::POLL) {
            let _ = control.set_read_timeout(Some(s.cfg.idle_timeout));
            return match read_end(control) {
                Ok(true) => Ending::Client,
                Ok(false) => Ending::Gone("unexpected control message during the test".into()),
                Err(e) => Ending::Gone(format!("control connection lost: {e}")),
            };
        }
        if started.elapsed() > s.cfg.max_duration + Duration::from_secs(2) {
            return Ending::Server(format!("test exceeded --max-duration {:.0}s", s.cfg.max_duration.as_secs_f64()));
        }
        let bytes = set.total_bytes();
        if bytes != last_bytes {
            last_bytes = bytes;
            last_progress = Instant::now();
            on_activity();
        } else if last_progress.elapsed() > s.cfg.idle_timeout && !set.senders_finished() {
            return Ending::Server(format!(
                "no data for {:.0}s (client gone or stalled)",
                s.cfg.idle_timeout.as_secs_f64()
            ));
        }
        if let Some(e) = set.error() {
            if set.all_finished() {
                return Ending::Server(e);
            }
        }
    }
}

// ---------------------------------------------------------------- iperf3 side

/// Slots iperf3 clients may hold: with a token, one stays for token holders,
/// since anyone who reaches the port can be an iperf3 client.
fn iperf3_slots(cfg: &ServerConfig) -> usize {
    if cfg.token.is_some() && cfg.max_clients > 1 {
        cfg.max_clients - 1
    } else {
        cfg.max_clients
    }
}

/// A new iperf3 control connection. The parameter exchange is part of the
/// pre-auth phase (same deadline, no slot): a peer that never completes it
/// holds nothing a paying client needs.
fn serve_iperf3(
    mut conn: TcpStream,
    peer: SocketAddr,
    cookie: [u8; iperf3::COOKIE_LEN],
    s: &Arc<Shared>,
    ticket: &mut PendingTicket,
) {
    let busy = |conn: &mut TcpStream| {
        let _ = iperf3::write_state(conn, iperf3::ACCESS_DENIED);
        (s.cfg.log)(&format!("peer={peer} protocol=iperf3 refused: busy ({} clients)", s.cfg.max_clients));
    };
    if !s.cfg.allow_iperf3 {
        let _ = iperf3::write_state(&mut conn, iperf3::ACCESS_DENIED);
        (s.cfg.log)(&format!(
            "peer={peer} protocol=iperf3 refused: iperf3 clients are not served (start with --iperf3)"
        ));
        return;
    }
    let cap = iperf3_slots(&s.cfg);
    // Busy now: say so at once, as a stock server does, rather than after the parameters.
    if s.admission.slots_held() >= cap {
        return busy(&mut conn);
    }
    let _ = conn.set_nodelay(true);
    let mut dl = DeadlineStream { conn: &conn, deadline: ticket.deadline };
    if iperf3::write_state(&mut dl, iperf3::PARAM_EXCHANGE).is_err() {
        return;
    }
    let Ok(params) = iperf3::read_json(&mut dl, iperf3::MAX_PARAMS) else { return };
    ticket.release();
    let Some(_slot) = s.admission.take_slot(peer.ip(), cap) else { return busy(&mut conn) };
    let _ = conn.set_read_timeout(Some(s.cfg.idle_timeout));
    let result = iperf3_session(&mut conn, peer, cookie, &params, s);
    s.tests_done.fetch_add(1, Ordering::SeqCst);
    if let Err(e) = result {
        (s.cfg.log)(&format!("peer={peer} protocol=iperf3 status=error: {e}"));
    }
}

/// iperf3's i_errno values (iperf_api.h) whose text a stock client prints.
const IE_DURATION: i32 = 5; // "test duration too long"
const IE_NUM_STREAMS: i32 = 6; // "number of parallel streams too large"
const IE_BLOCK_SIZE: i32 = 7; // "block size too large"

fn iperf3_session(
    conn: &mut TcpStream,
    peer: SocketAddr,
    cookie: [u8; iperf3::COOKIE_LEN],
    params: &serde_json::Value,
    s: &Arc<Shared>,
) -> Result<(), String> {
    let p = match Params::from_json(params) {
        Ok(p) if Duration::from_secs(p.time_s) <= s.cfg.max_duration => p,
        Ok(p) => return Err(refuse_iperf3(conn, IE_DURATION, format!("{} s test exceeds --max-duration", p.time_s))),
        Err(e) if e.contains("parallel") => return Err(refuse_iperf3(conn, IE_NUM_STREAMS, e)),
        Err(e) => return Err(refuse_iperf3(conn, IE_BLOCK_SIZE, e)),
    };
    let n = p.total_streams() as usize;
    let (tx, rx) = sync_channel::<(u64, TcpStream)>(n);
    let (utx, urx) = sync_channel::<UdpSocket>(n);
    let _registration = Registration::iperf3(s, cookie, tx, p.udp.then(|| (peer.ip(), utx)));
    iperf3::write_state(conn, iperf3::CREATE_STREAMS).map_err(|e| e.to_string())?;
    // Stream roles by arrival order: with --bidir the client's sending streams come first.
    let server_sends = |i: usize| if p.bidirectional { i >= p.parallel as usize } else { p.reverse };
    let sp = StreamParams {
        len: p.len as usize,
        limit: p.bytes_per_stream(),
        stall: s.cfg.idle_timeout,
        udp_rate: p.bandwidth as f64,
    };
    let mut set = if p.udp {
        let socks = collect(&urx, n, s.cfg.idle_timeout).ok_or("UDP streams did not arrive")?;
        StreamSet::start_udp(
            socks.into_iter().enumerate().map(|(i, u)| (u, server_sends(i))).collect(),
            UdpHeader::Iperf3 { seq64: p.udp_counters_64bit },
            sp,
        )
    } else {
        let mut socks = collect(&rx, n, s.cfg.idle_timeout).ok_or("TCP streams did not arrive")?;
        socks.sort_by_key(|(arrival, _)| *arrival);
        StreamSet::start_tcp(socks.into_iter().enumerate().map(|(i, (_, t))| (t, server_sends(i))).collect(), sp)
    };
    drop(_registration);
    let cpu = CpuMeter::start();
    let started = Instant::now();
    iperf3::write_state(conn, iperf3::TEST_START).map_err(|e| e.to_string())?;
    iperf3::write_state(conn, iperf3::TEST_RUNNING).map_err(|e| e.to_string())?;
    let ending = watch_test(conn, &set, s, started, &|| {}, |c| iperf3::read_state(c).map(|st| st == iperf3::TEST_END));
    let duration = started.elapsed().as_secs_f64();
    // Count what arrived until TEST_END, as a stock server does; data still
    // in flight (socket buffers, a shaper's queue) was not delivered in time.
    let at_end = set.snapshot();
    let mut outcomes = set.finish(Duration::from_millis(50));
    for (o, b) in outcomes.iter_mut().zip(at_end) {
        if !o.sending {
            o.bytes = b;
        }
    }
    let cpu = cpu.stop();
    let test = if p.udp { "udp" } else { Direction::from_iperf3(&p).test_name(false) };
    let bytes: u64 = outcomes.iter().map(|o| o.bytes).sum();
    match ending {
        Ending::Client => {}
        Ending::Gone(e) | Ending::Server(e) => {
            let _ = iperf3::write_state(conn, iperf3::SERVER_TERMINATE);
            log_test(s, peer, "iperf3", test, p.parallel, duration, bytes, &format!("aborted: {e}"));
            return Ok(());
        }
    }
    iperf3::write_state(conn, iperf3::EXCHANGE_RESULTS).map_err(|e| e.to_string())?;
    let _client_results = iperf3::read_json(conn, iperf3::MAX_RESULTS).map_err(|e| format!("client results: {e}"))?;
    let results = iperf3_results(&outcomes, p.udp, duration, &cpu);
    iperf3::write_json(conn, &results.to_json()).map_err(|e| e.to_string())?;
    iperf3::write_state(conn, iperf3::DISPLAY_RESULTS).map_err(|e| e.to_string())?;
    let _ = iperf3::read_state(conn); // IPERF_DONE; its absence changes nothing
    log_test(s, peer, "iperf3", test, p.parallel, duration, bytes, "ok");
    Ok(())
}

fn refuse_iperf3(conn: &mut TcpStream, i_errno: i32, why: String) -> String {
    let mut msg = vec![iperf3::SERVER_ERROR as u8];
    msg.extend_from_slice(&i_errno.to_be_bytes());
    msg.extend_from_slice(&0i32.to_be_bytes());
    let _ = conn.write_all(&msg);
    format!("refused: {why}")
}

impl Direction {
    fn from_iperf3(p: &Params) -> Direction {
        if p.bidirectional {
            Direction::Bidir
        } else if p.reverse {
            Direction::Download
        } else {
            Direction::Upload
        }
    }
}

fn iperf3_results(outcomes: &[StreamOutcome], udp: bool, duration: f64, cpu: &crate::cpu::CpuUse) -> iperf3::Results {
    let any_tcp_send = !udp && outcomes.iter().any(|o| o.sending);
    iperf3::Results {
        cpu_total: cpu.percent_total(),
        cpu_user: cpu.percent_user(),
        cpu_system: cpu.percent_system(),
        sender_has_retransmits: if any_tcp_send {
            1
        } else if udp && outcomes.iter().any(|o| o.sending) {
            0
        } else {
            -1
        },
        streams: outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let u = o.udp.as_ref().map(|u| u.summary).unwrap_or_default();
                iperf3::StreamResult {
                    id: iperf3::stream_id(i),
                    bytes: o.bytes,
                    retransmits: o.tcp_info.as_ref().map_or(-1, |t| t.retransmits as i64),
                    jitter_s: u.jitter_s,
                    errors: u.lost,
                    packets: if o.sending { o.packets } else { u.packets },
                    end_time: duration,
                }
            })
            .collect(),
    }
}

/// Removes a test's stream registrations when dropped, whatever happened.
struct Registration<'a> {
    s: &'a Shared,
    cookie: Option<[u8; iperf3::COOKIE_LEN]>,
    headroom: Option<([u8; wire::KEY_LEN], u32)>,
    udp_waiter: Option<u64>,
}

fn add_waiter(
    s: &Shared,
    udp: Option<(IpAddr, SyncSender<UdpSocket>)>,
    key: Option<[u8; wire::KEY_LEN]>,
) -> Option<u64> {
    let (peer_ip, tx) = udp?;
    let id = s.next_waiter.fetch_add(1, Ordering::SeqCst);
    s.udp_waiters.lock().unwrap_or_else(|p| p.into_inner()).push(UdpWaiter { id, peer_ip, key, tx });
    Some(id)
}

impl<'a> Registration<'a> {
    fn iperf3(
        s: &'a Shared,
        cookie: [u8; iperf3::COOKIE_LEN],
        tx: SyncSender<(u64, TcpStream)>,
        udp: Option<(IpAddr, SyncSender<UdpSocket>)>,
    ) -> Self {
        s.iperf3_streams.lock().unwrap_or_else(|p| p.into_inner()).insert(cookie, tx);
        Registration { s, cookie: Some(cookie), headroom: None, udp_waiter: add_waiter(s, udp, None) }
    }

    fn headroom(
        s: &'a Shared,
        key: [u8; wire::KEY_LEN],
        test: u32,
        tx: SyncSender<(u32, TcpStream)>,
        udp: Option<(IpAddr, SyncSender<UdpSocket>)>,
    ) -> Self {
        s.headroom_streams.lock().unwrap_or_else(|p| p.into_inner()).insert((key, test), tx);
        Registration { s, cookie: None, headroom: Some((key, test)), udp_waiter: add_waiter(s, udp, Some(key)) }
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.cookie {
            self.s.iperf3_streams.lock().unwrap_or_else(|p| p.into_inner()).remove(&c);
        }
        if let Some(k) = self.headroom {
            self.s.headroom_streams.lock().unwrap_or_else(|p| p.into_inner()).remove(&k);
        }
        if let Some(id) = self.udp_waiter {
            self.s.udp_waiters.lock().unwrap_or_else(|p| p.into_inner()).retain(|w| w.id != id);
        }
    }
}

// ---------------------------------------------------------------- headroom side

/// Challenge-response: true when the peer proved it holds the token. A
/// throttled source is refused before it gets a challenge.
fn authenticate(dl: &mut DeadlineStream, peer: SocketAddr, token: &str, s: &Shared) -> bool {
    let ip = peer.ip();
    if let Err(wait) = s.admission.may_authenticate(ip) {
        let reason = format!(
            "too many failed authentications from {ip}: try again in {:.0} s (check --token)",
            wait.as_secs_f64().ceil()
        );
        let _ = wire::write_frame(dl, &Reply::Refused { reason });
        return false;
    }
    let nonce = wire::random_nonce();
    if wire::write_frame(dl, &Reply::Challenge { nonce: wire::to_hex(&nonce) }).is_err() {
        return false;
    }
    // No answer (a client without a token hangs up) is not a guess.
    let Ok(answer) = wire::read_frame::<AuthAnswer>(dl, wire::MAX_HELLO) else { return false };
    let proven = match (wire::from_hex::<{ wire::NONCE_LEN }>(&answer.nonce), wire::from_hex::<32>(&answer.proof)) {
        (Some(theirs), Some(proof)) => wire::auth_verify(token, &nonce, &theirs, &proof),
        _ => false,
    };
    if !proven {
        let _ = wire::write_frame(dl, &Reply::Refused { reason: "wrong token (--token)".into() });
        if let Some(line) = s.admission.failed_authentication(ip) {
            (s.cfg.log)(&format!(
                "{line} (failures from one address are throttled and logged every {:.0}s)",
                crate::admission::FAILURE_LOG_EVERY.as_secs_f64()
            ));
        }
    }
    proven
}

fn serve_headroom(mut conn: TcpStream, peer: SocketAddr, s: &Arc<Shared>, ticket: &mut PendingTicket) {
    if let Some(token) = &s.cfg.token {
        if !authenticate(&mut DeadlineStream { conn: &conn, deadline: ticket.deadline }, peer, token, s) {
            return;
        }
    }
    ticket.release();
    let Some(_slot) = s.admission.take_slot(peer.ip(), s.cfg.max_clients) else {
        let _ = wire::write_frame(
            &mut conn,
            &Reply::Refused {
                reason: format!("server busy: {} clients already (its --max-clients)", s.cfg.max_clients),
            },
        );
        (s.cfg.log)(&format!("peer={peer} protocol=headroom refused: busy"));
        return;
    };
    let key = wire::random_key();
    let info = SessionInfo { ip: peer.ip(), last_activity_ms: Default::default() };
    info.touch(s);
    s.sessions.lock().unwrap_or_else(|p| p.into_inner()).insert(key, info.clone());
    struct SessionGuard<'a>(&'a Shared, [u8; wire::KEY_LEN]);
    impl Drop for SessionGuard<'_> {
        fn drop(&mut self) {
            self.0.sessions.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.1);
        }
    }
    let _session = SessionGuard(s, key);
    let _ = conn.set_nodelay(true);
    let welcome = Reply::Welcome {
        session: wire::key_hex(&key),
        server_version: env!("CARGO_PKG_VERSION").into(),
        max_duration_ms: s.cfg.max_duration.as_millis() as u64,
        max_streams: iperf3::MAX_STREAMS,
    };
    if wire::write_frame(&mut conn, &welcome).is_err() {
        return;
    }
    let mut test_id = 0u32;
    loop {
        // Between tests a session may be silent for at most the idle timeout;
        // its RR and echo traffic counts as activity.
        if !wait_readable(conn.as_raw_fd(), datapath::POLL) {
            let idle_ms =
                (s.epoch.elapsed().as_millis() as u64).saturating_sub(info.last_activity_ms.load(Ordering::Relaxed));
            if Duration::from_millis(idle_ms) > s.cfg.idle_timeout || s.stop.load(Ordering::Relaxed) {
                (s.cfg.log)(&format!(
                    "peer={peer} protocol=headroom session dropped: idle for {:.1}s",
                    idle_ms as f64 / 1e3
                ));
                return;
            }
            continue;
        }
        let _ = conn.set_read_timeout(Some(s.cfg.idle_timeout));
        let req: Request = match wire::read_frame(&mut conn, wire::MAX_FRAME) {
            Ok(r) => r,
            Err(_) => return,
        };
        info.touch(s);
        match req {
            Request::Bye => return,
            // A late End after the server ended a test itself: already answered.
            Request::End => {}
            Request::Test { udp, direction, streams, duration_ms, bytes, len, rate_bits } => {
                test_id += 1;
                if let Err(reason) = validate_test(s, udp, streams, duration_ms, len, rate_bits) {
                    let _ = wire::write_frame(&mut conn, &Reply::Refused { reason });
                    continue;
                }
                // The test's data and control messages count as activity, so a
                // client that went silent mid-test is idle since its last byte.
                let r = headroom_test(
                    &mut conn, peer, key, test_id, udp, direction, streams, bytes, len, rate_bits, &info, s,
                );
                s.tests_done.fetch_add(1, Ordering::SeqCst);
                if r.is_err() {
                    return;
                }
            }
        }
    }
}

fn validate_test(
    s: &Shared,
    udp: bool,
    streams: u32,
    duration_ms: u64,
    len: u32,
    rate: Option<f64>,
) -> Result<(), String> {
    if !(1..=iperf3::MAX_STREAMS).contains(&streams) {
        return Err(format!("{streams} streams asked; this server allows 1 to {}", iperf3::MAX_STREAMS));
    }
    if Duration::from_millis(duration_ms) > s.cfg.max_duration {
        return Err(format!(
            "a {:.0} s test exceeds this server's --max-duration of {:.0} s",
            duration_ms as f64 / 1000.0,
            s.cfg.max_duration.as_secs_f64()
        ));
    }
    let max_len = if udp { datapath::MAX_UDP_LEN } else { datapath::MAX_TCP_LEN };
    if len == 0 || len as usize > max_len {
        return Err(format!("length {len} out of range (1 to {max_len})"));
    }
    if udp && !rate.is_some_and(|r| r.is_finite() && r > 0.0 && r <= 400e9) {
        return Err("UDP tests need a rate between 1 b/s and 400 Gb/s".into());
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn headroom_test(
    conn: &mut TcpStream,
    peer: SocketAddr,
    key: [u8; wire::KEY_LEN],
    test_id: u32,
    udp: bool,
    direction: Direction,
    streams: u32,
    bytes: Option<u64>,
    len: u32,
    rate_bits: Option<f64>,
    session: &SessionInfo,
    s: &Arc<Shared>,
) -> io::Result<()> {
    let n = if direction == Direction::Bidir { streams * 2 } else { streams } as usize;
    let (tx, rx) = sync_channel::<(u32, TcpStream)>(n);
    let (utx, urx) = sync_channel::<UdpSocket>(n);
    let registration = Registration::headroom(s, key, test_id, tx, udp.then(|| (peer.ip(), utx)));
    wire::write_frame(conn, &Reply::TestReady { test: test_id })?;
    let server_sends = |i: usize| match direction {
        Direction::Upload => false,
        Direction::Download => true,
        Direction::Bidir => i >= streams as usize,
    };
    let sp = StreamParams {
        len: len as usize,
        limit: bytes,
        stall: s.cfg.idle_timeout,
        udp_rate: rate_bits.unwrap_or(1e6) / streams as f64,
    };
    let set = if udp {
        collect(&urx, n, s.cfg.idle_timeout).map(|socks| {
            StreamSet::start_udp(
                socks.into_iter().enumerate().map(|(i, u)| (u, server_sends(i))).collect(),
                UdpHeader::Headroom { key },
                sp,
            )
        })
    } else {
        collect(&rx, n, s.cfg.idle_timeout).map(|mut socks| {
            socks.sort_by_key(|(i, _)| *i);
            StreamSet::start_tcp(socks.into_iter().enumerate().map(|(i, (_, t))| (t, server_sends(i))).collect(), sp)
        })
    };
    drop(registration);
    let Some(mut set) = set else {
        wire::write_frame(conn, &Reply::Refused { reason: "the data streams did not arrive in time".into() })?;
        return Ok(());
    };
    let cpu = CpuMeter::start();
    let started = Instant::now();
    wire::write_frame(conn, &Reply::Started)?;
    let ending = watch_test(conn, &set, s, started, &|| session.touch(s), |c| {
        let end = wire::read_frame::<Request>(c, wire::MAX_FRAME).map(|r| r == Request::End);
        session.touch(s);
        end
    });
    let mut duration = started.elapsed().as_secs_f64();
    let at_end = set.snapshot();
    // While the stream threads live (a fixed transfer runs on through finish).
    let load_at_end = if bytes.is_none() { cpu.load() } else { None };
    let mut outcomes = if bytes.is_some() {
        // A fixed transfer counts every byte: wait for the client's streams to end,
        // and the test lasted until the last byte arrived.
        let o = set.finish(s.cfg.idle_timeout);
        duration = started.elapsed().as_secs_f64();
        o
    } else {
        set.finish(Duration::from_millis(100))
    };
    if bytes.is_none() {
        // By time: what arrived until End; data still in flight was not delivered in time.
        for (o, b) in outcomes.iter_mut().zip(at_end) {
            if !o.sending {
                o.bytes = b;
            }
        }
    }
    let cpu_load = load_at_end.or_else(|| cpu.load()).map(Box::new);
    let cpu = cpu.stop();
    let total: u64 = outcomes.iter().map(|o| o.bytes).sum();
    let test = direction.test_name(udp);
    let error = match &ending {
        Ending::Client => None,
        Ending::Gone(e) | Ending::Server(e) => Some(e.clone()),
    };
    log_test(
        s,
        peer,
        "headroom",
        test,
        streams,
        duration,
        total,
        error.as_deref().map_or("ok".into(), |e| format!("aborted: {e}")).as_str(),
    );
    if let Ending::Gone(_) = ending {
        return Err(io::Error::other("client gone"));
    }
    let report = ServerReport {
        duration_s: duration,
        streams: outcomes
            .iter()
            .map(|o| StreamReport {
                index: o.index,
                bytes_sent: if o.sending { o.bytes } else { 0 },
                bytes_received: if o.sending { 0 } else { o.bytes },
                tcp_info: o.tcp_info.clone(),
            })
            .collect(),
        cpu,
        error,
        udp: outcomes
            .iter()
            .filter_map(|o| o.udp.as_ref())
            .map(|u| u.summary)
            .reduce(crate::stats::UdpRecvSummary::merge),
        cpu_load,
    };
    wire::write_frame(conn, &Reply::Result(report))?;
    Ok(())
}
