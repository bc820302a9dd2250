//! `headroom serve`: one port for headroom clients and stock iperf3 clients,
//! and with `--iperf2` a second one for stock iperf2 clients ([`iperf2`]).
//!
//! Threads: one accepts TCP connections, one owns the UDP socket of the same
//! port (UDP echo, UDP stream hellos), one accepts on the iperf2 port and
//! one owns its UDP socket (`iperf -c -u`, [`iperf2_udp`]), one per
//! connection. The first byte of
//! a connection says who is calling: `H` starts the headroom greeting, a
//! character of `[a-z2-7]` starts an iperf3 cookie (a new control connection
//! or a data stream of a running test). Anything else is dropped.
//!
//! Defences: the pre-auth phase (first message, authentication, iperf3
//! parameters) has one deadline and a bounded, per-source table
//! ([`admission`]); a test slot is taken only once that phase is over;
//! the token never crosses the wire (challenge-response, [`crate::wire`]) and
//! failed guesses are throttled per source; every message has a size bound;
//! tests are bounded in streams and duration; a client that dies or stalls
//! frees its slot at the idle timeout. The server only ever answers the peer
//! of a connection or datagram, and a UDP reply is never larger than the
//! datagram it answers.
//!
//! Long (about 560 lines): about 490 lines of code (the dispatch on the
//! first byte and the threads that share the server's state), the rest tests.

mod admission;
mod flushcheck;
mod headroom;
mod iperf2;
mod iperf2_udp;
mod iperf3;
mod probes;
mod registry;
mod test_watch;
mod udp;

use crate::error::NetError;
use crate::iperf3 as iperf3_wire;
use crate::socket::{wait_readable, POLL};
use crate::wire::{self, Hello, Reply};
use admission::{DeadlineStream, PendingTicket};
pub use flushcheck::FlushLedger;
use headroom_units::setting::Message;
pub use probes::{ProbeHost, MAX_PLAN};
use registry::Shared;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the server runs.
#[derive(Clone)]
pub struct ServerConfig {
    /// Address to listen on (loopback unless told otherwise).
    pub bind: IpAddr,
    /// TCP and UDP port (0 = any free port).
    pub port: u16,
    /// Shared secret headroom clients must prove they hold (challenge-response); None = no authentication.
    pub token: Option<String>,
    /// Serve stock iperf3 clients (they cannot authenticate). With a token,
    /// they may hold at most `max_clients - 1` slots: one stays for token holders.
    pub allow_iperf3: bool,
    /// Serve stock iperf2 clients on this TCP port of the same address (0 =
    /// any free port), and `iperf -c -u` on the UDP port of that number;
    /// None: not served. They take slots as iperf3 clients do.
    pub iperf2_port: Option<u16>,
    /// Test slots; more clients are refused as busy.
    pub max_clients: usize,
    /// Longest test a client may ask for.
    pub max_duration: Duration,
    /// How long a silent client or stalled stream keeps its slot.
    pub idle_timeout: Duration,
    /// Exit after the first test.
    pub once: bool,
    /// Receives one line per test and per refusal.
    pub log: Arc<dyn Fn(&str) + Send + Sync>,
    /// Runs disk and CPU probes and gives the inventory for clients; None:
    /// network tests only.
    pub probes: Option<Arc<dyn ProbeHost>>,
    /// Keeps flushcheck runs for writers on other machines; None: refused.
    pub flush: Option<Arc<dyn FlushLedger>>,
    /// How a refusal or log line names a setting of this server: the
    /// operator's command line spells them (the binary's table); the
    /// default is the setting's own name ([`ServerSetting::name`]).
    pub spelling: fn(ServerSetting) -> &'static str,
}

/// What an operator starts a server with. Refusals sent to clients and the
/// server's log lines name these; the binary spells them as its flags
/// ([`ServerConfig::spelling`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerSetting {
    /// The address listened on.
    Bind,
    /// The TCP and UDP port.
    Port,
    /// The shared secret clients prove they hold.
    Token,
    /// Serving anyone who can reach the server, without a token.
    NoAuth,
    /// Test slots.
    MaxClients,
    /// The longest test a client may ask for.
    MaxDuration,
    /// Serving stock iperf3 clients.
    Iperf3,
    /// Serving stock iperf2 clients.
    Iperf2,
    /// Where flushcheck records are kept.
    FlushcheckDir,
}

impl ServerSetting {
    /// The setting's own name, for a server whose front end gives none.
    pub fn name(self) -> &'static str {
        match self {
            ServerSetting::Bind => "listening address",
            ServerSetting::Port => "port",
            ServerSetting::Token => "token",
            ServerSetting::NoAuth => "no authentication",
            ServerSetting::MaxClients => "client limit",
            ServerSetting::MaxDuration => "duration limit",
            ServerSetting::Iperf3 => "iperf3 serving",
            ServerSetting::Iperf2 => "iperf2 serving",
            ServerSetting::FlushcheckDir => "flushcheck directory",
        }
    }
}

impl std::fmt::Display for ServerSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A server's settings that cannot go together, naming them ([`check_bind_policy`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ServerSettingError(pub Message<ServerSetting>);

impl ServerConfig {
    /// A loopback server on `port` with the default limits (tests, `headroom run`).
    pub fn loopback(port: u16) -> Self {
        ServerConfig {
            bind: IpAddr::from([127, 0, 0, 1]),
            port,
            token: None,
            allow_iperf3: true,
            iperf2_port: None,
            max_clients: 4,
            max_duration: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(10),
            once: false,
            log: Arc::new(|_| {}),
            probes: None,
            flush: None,
            spelling: ServerSetting::name,
        }
    }

    /// `setting` as this server's operator knows it.
    pub(crate) fn spell(&self, setting: ServerSetting) -> &'static str {
        (self.spelling)(setting)
    }
}

/// Checks the safety rule: a non-loopback bind needs a token or an explicit opt-out.
pub fn check_bind_policy(bind: IpAddr, token: Option<&str>, no_auth: bool) -> Result<(), ServerSettingError> {
    use ServerSetting::*;
    if bind.is_loopback() || token.is_some() || no_auth {
        Ok(())
    } else {
        Err(ServerSettingError(
            Message::of(Bind)
                .then(format!(" {bind} listens beyond this machine: give "))
                .and(Token)
                .then(" SECRET (clients pass the same ")
                .and(Token)
                .then(") or ")
                .and(NoAuth)
                .then(" to serve anyone who can reach it"),
        ))
    }
}

/// A bound server, ready to run.
pub struct Server {
    listener: TcpListener,
    iperf2: Option<TcpListener>,
    /// The iperf2 port's UDP socket (None when another program holds it).
    iperf2_udp: Option<UdpSocket>,
    udp: UdpSocket,
    shared: Arc<Shared>,
}

/// A server running in background threads (tests, the in-process loopback of `headroom run`).
pub struct ServerHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    /// Stops the server and waits for its threads.
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

/// A UDP socket on `addr` without address reuse: a port another program
/// holds is an error, not a socket sharing its datagrams. It receives every
/// `iperf -c -u` test on one thread, so its buffer is as large as the system
/// allows (up to [`UDP_RECEIVE_BUFFER`]): the default 208 KiB holds 17 ms of
/// 100 Mb/s, and a loaded machine kept the thread from a core longer than
/// that (727 of 26,753 datagrams counted lost beside builds), a loss that was
/// serve's, not the network's.
fn plain_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::DGRAM, None)?;
    // Capped silently by net.core.rmem_max; a smaller buffer still works.
    let _ = s.set_recv_buffer_size(UDP_RECEIVE_BUFFER);
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// The receive buffer asked for serve's shared iperf2 UDP socket: a third of
/// a second of 100 Mb/s (the kernel caps it at net.core.rmem_max).
const UDP_RECEIVE_BUFFER: usize = 4 << 20;

pub(super) fn reuse_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::DGRAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// A listening TCP socket on `addr`, which a restarted server may take at once.
fn listen_tcp(addr: SocketAddr, cfg: &ServerConfig) -> Result<TcpListener, NetError> {
    let bind_err = |e: io::Error| NetError::Listen { addr: addr.to_string(), reason: listen_reason(&e, cfg) };
    let sock =
        socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None).map_err(bind_err)?;
    sock.set_reuse_address(true).map_err(bind_err)?;
    sock.bind(&addr.into()).map_err(bind_err)?;
    sock.listen(1024).map_err(bind_err)?;
    Ok(sock.into())
}

/// Why a listening socket could not be made, with what to do about it.
fn listen_reason(e: &io::Error, cfg: &ServerConfig) -> String {
    let (port, bind) = (cfg.spell(ServerSetting::Port), cfg.spell(ServerSetting::Bind));
    match e.kind() {
        io::ErrorKind::AddrInUse => format!("{e} (another server has the port; example: {port} 5202)"),
        io::ErrorKind::AddrNotAvailable => {
            format!(
                "{e} (no interface of this machine has that address; `ip addr` lists them; example: {bind} 0.0.0.0)"
            )
        }
        io::ErrorKind::PermissionDenied => format!("{e} (ports below 1024 need root; example: {port} 5201)"),
        _ => e.to_string(),
    }
}

impl Server {
    /// Binds the TCP and UDP sockets of the port.
    pub fn bind(cfg: ServerConfig) -> Result<Server, NetError> {
        let addr = SocketAddr::new(cfg.bind, cfg.port);
        let bind_err = |e: io::Error| NetError::Listen { addr: addr.to_string(), reason: listen_reason(&e, &cfg) };
        let listener = listen_tcp(addr, &cfg)?;
        let local = listener.local_addr()?;
        let udp = reuse_udp(local).map_err(bind_err)?;
        udp.set_read_timeout(Some(POLL))?;
        let iperf2 = cfg.iperf2_port.map(|port| listen_tcp(SocketAddr::new(cfg.bind, port), &cfg)).transpose()?;
        let iperf2_local = iperf2.as_ref().map(TcpListener::local_addr).transpose()?;
        // A stock `iperf -s -u` may hold the UDP port: TCP clients are still served.
        let iperf2_udp = match iperf2_local.map(|at| (at, plain_udp(at))) {
            Some((_, Ok(sock))) => Some(sock),
            Some((at, Err(e))) => {
                let reason = listen_reason(&e, &cfg);
                (cfg.log)(&format!("iperf2 UDP port {at}: {reason}; iperf -c -u clients are not served"));
                None
            }
            None => None,
        };
        let mut shared = Shared::new(cfg, local);
        shared.iperf2_local = iperf2_local;
        Ok(Server { listener, iperf2, iperf2_udp, udp, shared: Arc::new(shared) })
    }

    /// The address iperf2 clients connect to, if they are served.
    pub fn iperf2_addr(&self) -> Option<SocketAddr> {
        self.shared.iperf2_local
    }

    /// The address it listens on (the port chosen when 0 was asked).
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
            std::thread::Builder::new().name("serve-udp".into()).spawn(move || udp::udp_loop(&udp, &udp_shared))?;
        let iperf2_thread = match self.iperf2 {
            Some(l) => {
                let s = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name("serve-iperf2".into())
                        .spawn(move || iperf2::accept_loop(&l, &s))?,
                )
            }
            None => None,
        };
        let iperf2_udp_thread = match self.iperf2_udp {
            Some(sock) => {
                let s = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name("serve-iperf2-udp".into())
                        .spawn(move || iperf2_udp::udp_loop(&sock, &s))?,
                )
            }
            None => None,
        };
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
            if !wait_readable(&self.listener, POLL) {
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
        for t in [iperf2_thread, iperf2_udp_thread].into_iter().flatten() {
            let _ = t.join();
        }
        Ok(())
    }
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
    if iperf3_wire::is_cookie_char(first[0]) {
        let mut cookie = [0u8; iperf3_wire::COOKIE_LEN];
        cookie[0] = first[0];
        if dl.read_exact(&mut cookie[1..]).is_err() || !iperf3_wire::cookie_is_valid(&cookie) {
            return;
        }
        let waiting = s.iperf3_streams.lock().unwrap_or_else(|p| p.into_inner()).get(&cookie).cloned();
        match waiting {
            Some(tx) => {
                ticket.release();
                let _ = tx.try_send((arrival, conn));
            }
            None => iperf3::serve_iperf3(conn, peer, cookie, s, ticket),
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
            Hello::Control { .. } => headroom::serve_headroom(conn, peer, s, ticket),
            Hello::Stream { session, test, index, proof } => {
                ticket.release();
                let Some(info) = s.session_of(&session, peer.ip()) else {
                    (s.cfg.log)(&format!(
                        "peer={peer} protocol=headroom data stream refused: no session of this address"
                    ));
                    return;
                };
                if !wire::SessionKeys::proves(&info.keys.stream_proof(test, index), &proof) {
                    (s.cfg.log)(&format!("peer={peer} protocol=headroom data stream refused: wrong proof"));
                    return;
                }
                let id = info.keys.id();
                let tx = s.headroom_streams.lock().unwrap_or_else(|p| p.into_inner()).get(&(id, test)).cloned();
                if let Some(tx) = tx {
                    let _ = tx.try_send((index, conn));
                }
            }
            Hello::Rr { session, size, proof, busy_poll } => {
                ticket.release();
                let known = s
                    .session_of(&session, peer.ip())
                    .filter(|info| wire::SessionKeys::proves(&info.keys.rr_proof(size), &proof));
                if let Some(info) = known.filter(|_| (1..=wire::MAX_RR_SIZE).contains(&size)) {
                    let Some(_slot) = info.rr_slot() else {
                        (s.cfg.log)(&format!(
                            "peer={peer} protocol=headroom request/response stream refused: the session holds {} already",
                            registry::MAX_RR_STREAMS
                        ));
                        return;
                    };
                    headroom::serve_rr(conn, size as usize, busy_poll, &info, s);
                }
            }
        }
    } else {
        let mut header = [0u8; IPERF2_HEADER_START];
        header[0] = first[0];
        let local_port = conn.local_addr().map_or(0, |a| a.port());
        let said = match dl.read_exact(&mut header[1..]) {
            Ok(()) if is_iperf2_header(&header, local_port) => match s.cfg.iperf2_port {
                Some(_) => format!(
                    "an iperf2 client's header (iperf -c): this port speaks headroom's and iperf3's protocols; \
                     iperf2 clients are served on port {}",
                    s.iperf2_local.map_or(0, |a| a.port())
                ),
                None => format!(
                    "an iperf2 client's header (iperf -c): this server speaks headroom's and iperf3's \
                     protocols; use iperf3 -c or headroom net, or start serve with {}",
                    s.cfg.spell(ServerSetting::Iperf2)
                ),
            },
            _ => format!("neither headroom's greeting nor an iperf3 cookie (first byte {:02x})", first[0]),
        };
        (s.cfg.log)(&format!("peer={peer} protocol=unknown refused: {said}"));
    }
}

/// `headroom serve`'s spelling of its settings, as the binary gives it
/// (tests here check the words a client or operator reads).
#[cfg(test)]
pub(crate) fn test_flags(setting: ServerSetting) -> &'static str {
    match setting {
        ServerSetting::Bind => "--bind",
        ServerSetting::Port => "--port",
        ServerSetting::Token => "--token",
        ServerSetting::NoAuth => "--no-auth",
        ServerSetting::MaxClients => "--max-clients",
        ServerSetting::MaxDuration => "--max-duration",
        ServerSetting::Iperf3 => "--iperf3",
        ServerSetting::Iperf2 => "--iperf2",
        ServerSetting::FlushcheckDir => "--flushcheck-dir",
    }
}

/// The part of iperf2's client header [`is_iperf2_header`] reads: three
/// big-endian words, flags, threads and port.
const IPERF2_HEADER_START: usize = 12;

/// Whether a connection opened with iperf 2.1's client header, by what the
/// header says: its flags word sets HEADER_EXTEND (bit 30) or, with -r/-d,
/// HEADER_VERSION1 (bit 31); then the number of parallel streams (-P, at
/// least one) and the port the client was told to connect to, which is this
/// server's. Seen from 2.1.8 on port 15999: 40010078 00000001 00003e7f.
fn is_iperf2_header(header: &[u8; IPERF2_HEADER_START], local_port: u16) -> bool {
    const HEADER_VERSION1: u32 = 0x8000_0000;
    const HEADER_EXTEND: u32 = 0x4000_0000;
    let word = |i: usize| u32::from_be_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let (flags, threads, port) = (word(0), word(4), word(8));
    flags & (HEADER_VERSION1 | HEADER_EXTEND) != 0 && (1..=1024).contains(&threads) && port == u32::from(local_port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_iperf2_header_is_known_by_its_flags_streams_and_port() {
        let header = |words: [u32; 3]| {
            let mut h = [0u8; IPERF2_HEADER_START];
            for (i, w) in words.iter().enumerate() {
                h[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
            }
            h
        };
        // As iperf 2.1.8 sent them to port 15999: plain, -r, -R, -P 2.
        for flags in [0x4001_0078, 0xc001_0078, 0x4401_0078] {
            assert!(is_iperf2_header(&header([flags, 1, 15999]), 15999), "{flags:08x}");
        }
        assert!(is_iperf2_header(&header([0x4001_0078, 2, 15999]), 15999));
        // Another port, no stream, no header flag: not iperf2.
        assert!(!is_iperf2_header(&header([0x4001_0078, 1, 5001]), 15999));
        assert!(!is_iperf2_header(&header([0x4001_0078, 0, 15999]), 15999));
        assert!(!is_iperf2_header(&header([0x0001_0078, 1, 15999]), 15999));
    }

    #[test]
    fn beyond_loopback_a_token_or_an_explicit_opt_out() {
        assert!(check_bind_policy(IpAddr::from([127, 0, 0, 1]), None, false).is_ok());
        assert!(check_bind_policy(IpAddr::from([0, 0, 0, 0]), Some("t"), false).is_ok());
        assert!(check_bind_policy(IpAddr::from([0, 0, 0, 0]), None, true).is_ok());
        let e = check_bind_policy(IpAddr::from([0, 0, 0, 0]), None, false).unwrap_err().0.spelled(test_flags);
        assert!(e.contains("--token") && e.contains("--no-auth"), "{e}");
    }

    #[test]
    fn a_taken_port_is_refused_with_an_example() {
        let first = Server::bind(ServerConfig::loopback(0)).unwrap();
        let cfg = ServerConfig { spelling: test_flags, ..ServerConfig::loopback(first.local_addr().port()) };
        let err = Server::bind(cfg).err().expect("port taken");
        assert!(err.to_string().contains("example: --port"), "{err}");
    }
}
