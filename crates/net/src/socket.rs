//! What every socket user of the crate shares, at the bottom of its imports:
//! the size bounds and timing of the data paths, readiness waits, the 4-byte
//! length prefix both wire protocols frame messages with, connecting (with
//! the retry a stock iperf3 server needs), the [`Inbox`] a client reads
//! a peer's frames through (each frame whole by a deadline) and the one-line
//! reasons for socket errors.
//!
//! It knows no protocol: the headroom wire ([`crate::wire`]), the iperf3
//! control protocol ([`crate::iperf3`]), the data paths ([`crate::datapath`])
//! and the server all build on it, and it imports none of them.
//!
//! A source's check names a [`SourceSetting`] for the front end to spell
//! (the binary's `--bind`, `--interface`); this module spells no flag there.

use crate::error::NetError;
use headroom_result::BufferPair;
use headroom_units::setting::Message;
use socket2::{Domain, SockRef, Socket, Type};
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often blocked socket calls wake up to look at the stop flag.
pub const POLL: Duration = Duration::from_millis(200);
/// Default TCP write/read size (iperf3's default too).
pub const DEFAULT_TCP_LEN: usize = 128 * 1024;
/// Default UDP payload: fits one 1500-byte MTU frame over IPv4 (iperf3 uses the same).
pub const DEFAULT_UDP_LEN: usize = 1448;
/// Largest TCP write size accepted from a peer.
pub const MAX_TCP_LEN: usize = 1024 * 1024;
/// Largest UDP datagram accepted from a peer.
pub const MAX_UDP_LEN: usize = 65_507;
/// Largest socket buffer a client may ask (`--window`, iperf3's -w); the
/// kernel caps it further at net.core.wmem_max / rmem_max.
pub const MAX_WINDOW: u32 = 1 << 30;

pub(crate) use crate::os::wait_readable;

/// Reads a 4-byte big-endian length and that many bytes, refusing more than
/// `max` before allocating, so a hostile length prefix costs nothing (both
/// iperf3's and headroom's messages are framed so).
pub(crate) fn read_length_prefixed(r: &mut impl Read, max: u32, what: &str) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len);
    if len > max {
        return Err(too_long(what, len, max));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    Ok(body)
}

fn too_long(what: &str, len: u32, max: u32) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what} of {len} bytes exceeds the limit of {max}"))
}

/// Largest read of one [`Inbox::poll`]: the buffer grows only as bytes arrive.
const INBOX_READ: usize = 64 * 1024;

/// A peer's length-prefixed frames, gathered from whatever has arrived so
/// that the reader decides how long a frame may take. A socket read timeout
/// restarts on every byte, so a peer sending one byte now and then would
/// hold a reader for ever; here a frame is whole by a deadline or it is an
/// error, and [`Inbox::poll`] never waits longer than asked (a fleet's worker
/// reads many agents in turn). It holds at most the frame being read.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    buf: Vec<u8>,
}

impl Inbox {
    /// An inbox that already holds `bytes` (read before it existed).
    pub fn holding(bytes: &[u8]) -> Self {
        Inbox { buf: bytes.to_vec() }
    }

    /// Bytes still needed for the frame being read (its length prefix first).
    fn needed(&self, max: u32, what: &str) -> io::Result<usize> {
        if self.buf.len() < 4 {
            return Ok(4 - self.buf.len());
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if len > max {
            return Err(too_long(what, len, max));
        }
        Ok(4 + len as usize - self.buf.len())
    }

    /// Reads what `stream` has (waiting at most `wait` for it to have
    /// anything); the body of the frame once it is whole. Never reads past
    /// the frame, so the next one stays in the socket.
    pub fn poll(&mut self, stream: &TcpStream, max: u32, what: &str, wait: Duration) -> io::Result<Option<Vec<u8>>> {
        let need = self.needed(max, what)?;
        if need > 0 {
            if !wait_readable(stream, wait) {
                return Ok(None);
            }
            let start = self.buf.len();
            self.buf.resize(start + need.min(INBOX_READ), 0);
            let got = (&*stream).read(&mut self.buf[start..]);
            self.buf.truncate(start + *got.as_ref().unwrap_or(&0));
            match got {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection")),
                Ok(_) => {}
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => return Ok(None),
                Err(e) => return Err(e),
            }
            if self.needed(max, what)? > 0 {
                return Ok(None);
            }
        }
        let body = self.buf.split_off(4);
        self.buf.clear();
        Ok(Some(body))
    }

    /// The body of one whole frame by `deadline` (else a `TimedOut` error),
    /// however its bytes trickle in; `stop` (Ctrl-C) ends the wait at once
    /// (an `Interrupted` error).
    pub fn read_by(
        &mut self,
        stream: &TcpStream,
        max: u32,
        what: &str,
        deadline: Instant,
        stop: Option<&AtomicBool>,
    ) -> io::Result<Vec<u8>> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Some(body) = self.poll(stream, max, what, left.min(POLL))? {
                return Ok(body);
            }
            if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped (Ctrl-C)"));
            }
            if Instant::now() >= deadline {
                let why = if self.buf.is_empty() { "no answer" } else { "an answer that never ended" };
                return Err(io::Error::new(io::ErrorKind::TimedOut, why));
            }
        }
    }
}

/// `body` behind its 4-byte big-endian length, ready for one write (one segment).
pub(crate) fn length_prefixed(body: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

/// Whether a socket call only ran out of its timeout (the caller looks at its flags and tries again).
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// A socket error during a test, said the way a user reads it.
pub(crate) fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionReset => "connection reset by the peer".into(),
        io::ErrorKind::BrokenPipe => "the peer closed the connection".into(),
        io::ErrorKind::ConnectionRefused => "the peer's port is closed (connection refused)".into(),
        _ => e.to_string(),
    }
}

/// Where this end's sockets leave from (`--bind ADDR`, `--interface NIC`):
/// the seed compares NICs of one host towards one target, and without a
/// source the routing table picks one.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Source {
    /// Source address of every socket (an address of this machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<IpAddr>,
    /// Interface every socket leaves through, whatever the routing table
    /// says (Linux: SO_BINDTODEVICE, needs root or CAP_NET_RAW; Windows:
    /// IP_UNICAST_IF / IPV6_UNICAST_IF with the adapter's index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
}

impl Source {
    /// No source chosen: the routing table decides.
    pub fn is_default(&self) -> bool {
        self.bind.is_none() && self.interface.is_none()
    }

    /// `from 192.0.2.7`, `via eth1`, `via eth1 from 192.0.2.7`; None when default.
    pub fn describe(&self) -> Option<String> {
        let via = self.interface.as_ref().map(|i| format!("via {i}"));
        let from = self.bind.map(|a| format!("from {a}"));
        match (via, from) {
            (None, None) => None,
            (Some(v), Some(f)) => Some(format!("{v} {f}")),
            (Some(x), None) | (None, Some(x)) => Some(x),
        }
    }

    /// The interface this source names: `--interface`, else the one holding
    /// the `--bind` address; None when the routing table chooses.
    pub fn chosen_interface(&self) -> Option<String> {
        self.interface.clone().or_else(|| self.bind.and_then(headroom_sys::interface_with_address))
    }

    /// The interface a connection to `peer` leaves through, by the one rule
    /// every command follows: the chosen one ([`Source::chosen_interface`]),
    /// else the one the routing table sends `peer` through.
    pub fn interface_towards(&self, peer: IpAddr) -> Option<String> {
        self.chosen_interface().or_else(|| headroom_sys::route_interface(peer))
    }

    /// Checks the source before anything runs: the interface exists, the
    /// address belongs to this machine. The error names the setting.
    pub fn check(&self) -> Result<(), SourceError> {
        use SourceSetting::*;
        if let Some(nic) = &self.interface {
            if !crate::os::is_interface_name(nic) {
                return Err(SourceError(
                    Message::of(Interface)
                        .then(format!(" '{nic}' is not an interface name (example: "))
                        .and(Interface)
                        .then(" eth1)"),
                ));
            }
            if !crate::os::interface_exists(nic) {
                return Err(SourceError(Message::of(Interface).then(format!(
                    " {nic}: this machine has no such interface (see `{}`)",
                    crate::os::LIST_INTERFACES
                ))));
            }
        }
        if let Some(addr) = self.bind {
            if let Err(e) = UdpSocket::bind((addr, 0)) {
                return Err(SourceError(Message::of(Bind).then(format!(
                    " {addr}: not an address of this machine ({e}; see `{}`)",
                    crate::os::LIST_ADDRESSES
                ))));
            }
        }
        Ok(())
    }

    /// Binds `sock` (of `peer`'s family) to this source, before it connects
    /// (headroom-proto's connections use it too, so both follow one rule).
    /// Its errors name the settings in the front end's words
    /// ([`spell_source_settings`]).
    pub fn apply(&self, sock: &Socket, peer: &SocketAddr) -> io::Result<()> {
        use SourceSetting::*;
        if let Some(nic) = &self.interface {
            crate::os::bind_device(sock, nic, peer).map_err(|e| {
                let why = match crate::os::bind_device_refusal(&e) {
                    Some(crate::os::BindDeviceRefusal::NotPermitted) => {
                        Message::text("leaving through a chosen interface needs root (CAP_NET_RAW); ")
                            .and(Bind)
                            .then(" ADDR does not")
                    }
                    Some(crate::os::BindDeviceRefusal::NoSuchInterface) => Message::text("no such interface"),
                    None => Message::text(e.to_string()),
                };
                source_error(e.kind(), Message::of(Interface).then(format!(" {nic}: ")).join(why))
            })?;
        }
        if let Some(addr) = self.bind {
            if addr.is_ipv4() != peer.is_ipv4() {
                return Err(source_error(
                    io::ErrorKind::InvalidInput,
                    Message::of(Bind)
                        .then(format!(" {addr} and the server's address {} are of different IP families", peer.ip())),
                ));
            }
            sock.bind(&SocketAddr::new(addr, 0).into())
                .map_err(|e| source_error(e.kind(), Message::of(Bind).then(format!(" {addr}: {e}"))))?;
        }
        Ok(())
    }
}

/// The front end's words for a source's settings (`--bind`, `--interface`),
/// registered once at start. Why a process-wide table and not an argument:
/// [`Source::apply`]'s errors leave as `io::Error` text through every
/// client (net's, and headroom-proto's transport for iSCSI, SMB, NBD and
/// NFS) long before a front end sees them, and a `Source` travels in far-end
/// plans as data. Without one, the settings' own names are used.
static SOURCE_SPELLING: std::sync::OnceLock<fn(SourceSetting) -> &'static str> = std::sync::OnceLock::new();

/// Registers the front end's words for [`SourceSetting`]s (the first call wins).
pub fn spell_source_settings(spell: fn(SourceSetting) -> &'static str) {
    let _ = SOURCE_SPELLING.set(spell);
}

/// `message` in the registered words ([`spell_source_settings`]): for a
/// client that refuses a source in its own text (headroom-proto's NFS,
/// whose library binds by itself).
pub fn spelled_source(message: &Message<SourceSetting>) -> String {
    match SOURCE_SPELLING.get() {
        Some(spell) => message.spelled(spell),
        None => message.to_string(),
    }
}

/// An io::Error of `kind` whose text is `message` in the registered words.
fn source_error(kind: io::ErrorKind, message: Message<SourceSetting>) -> io::Error {
    io::Error::new(kind, spelled_source(&message))
}

/// What a connection's source is set by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceSetting {
    /// The local address connections leave from.
    Bind,
    /// The interface connections leave through.
    Interface,
}

impl std::fmt::Display for SourceSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SourceSetting::Bind => "source address",
            SourceSetting::Interface => "interface",
        })
    }
}

/// A source that cannot work on this machine ([`Source::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub Message<SourceSetting>);

/// The socket buffers `fd` has now, as getsockopt reports them.
pub(crate) fn buffers_of(fd: &impl crate::os::AsSocket) -> Option<BufferPair> {
    let sock = SockRef::from(fd);
    Some(BufferPair { send: sock.send_buffer_size().ok()? as u64, recv: sock.recv_buffer_size().ok()? as u64 })
}

/// Asks for `window` bytes of send and receive buffer (iperf3's -w): set
/// before connect, so the window scale the handshake agrees on fits it. The
/// kernel stops autotuning a buffer set this way.
pub(crate) fn set_window(fd: &impl crate::os::AsSocket, window: Option<u32>) -> io::Result<()> {
    if let Some(w) = window {
        let sock = SockRef::from(fd);
        sock.set_send_buffer_size(w as usize)?;
        sock.set_recv_buffer_size(w as usize)?;
    }
    Ok(())
}

/// How this end opens its sockets: where from, and with what buffers.
#[derive(Debug, Clone, Default)]
pub(crate) struct SocketSetup {
    pub source: Source,
    pub window: Option<u32>,
}

impl SocketSetup {
    /// Sockets from `source`, default buffers (control connections).
    pub fn from(source: &Source) -> Self {
        SocketSetup { source: source.clone(), window: None }
    }

    /// Data sockets: from `source`, with `window` bytes of buffer.
    pub fn data(source: &Source, window: Option<u32>) -> Self {
        SocketSetup { source: source.clone(), window }
    }

    pub(crate) fn socket(&self, peer: &SocketAddr, ty: Type) -> io::Result<Socket> {
        let sock = Socket::new(Domain::for_address(*peer), ty, None)?;
        set_window(&sock, self.window)?;
        self.source.apply(&sock, peer)?;
        Ok(sock)
    }
}

/// The longest one wait of [`connect_within`] lasts before it reads the
/// socket's pending error again.
const CONNECT_SLICE: Duration = Duration::from_millis(100);

/// Connects `sock` to `addr`, the one TCP connect of headroom (net's
/// clients and headroom-proto's transport). `next_wait` says how long the
/// next wait may be, or the error that ends the connect (its deadline, or
/// Ctrl-C for a caller that watches a stop flag); each wait is at most
/// [`CONNECT_SLICE`]. The socket's pending error (SO_ERROR) is read after
/// every slice: WSAPoll before Windows 10 2004 never reports a refused
/// connect (socket2's connect_timeout would wait out its whole timeout
/// there), but the error is there. `sock` is blocking again afterwards.
pub fn connect_within(
    sock: &Socket,
    addr: &SocketAddr,
    mut next_wait: impl FnMut() -> io::Result<Duration>,
) -> io::Result<()> {
    sock.set_nonblocking(true)?;
    match sock.connect(&(*addr).into()) {
        Ok(()) => {}
        Err(e) if crate::os::connect_in_progress(&e) => loop {
            let ready = crate::os::wait_writable(sock, next_wait()?.min(CONNECT_SLICE))?;
            if let Some(e) = sock.take_error()? {
                return Err(e);
            }
            if ready {
                break;
            }
        },
        Err(e) => return Err(e),
    }
    sock.set_nonblocking(false)
}

/// A `next_wait` for [`connect_within`]: the time left of `timeout` from
/// now, then `TimedOut` (as socket2's connect_timeout says it).
fn within(timeout: Duration) -> impl FnMut() -> io::Result<Duration> {
    let ends = Instant::now() + timeout;
    move || match ends.saturating_duration_since(Instant::now()) {
        left if left.is_zero() => Err(io::Error::new(io::ErrorKind::TimedOut, "connection timed out")),
        left => Ok(left),
    }
}

/// [`connect_within`] `timeout`, for a caller without a stop flag.
pub(crate) fn connect_timeout(sock: &Socket, addr: &SocketAddr, timeout: Duration) -> io::Result<()> {
    connect_within(sock, addr, within(timeout))
}

/// Connects to `addr`. A connection reset during the handshake is tried
/// again (three times, 100 ms apart): a stock iperf3 server closes and
/// re-opens its listening socket after every test or failed handshake, and a
/// connect that lands in that moment is reset rather than refused.
pub(crate) fn connect_addr(addr: &SocketAddr, timeout: Duration, setup: &SocketSetup) -> io::Result<TcpStream> {
    let mut attempt = 0;
    loop {
        let sock = setup.socket(addr, Type::STREAM)?;
        match connect_timeout(&sock, addr, timeout) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset && attempt < 3 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
            Ok(()) => return Ok(sock.into()),
        }
    }
}

/// [`connect_addr`], with a failure said as a headroom client says it.
pub(crate) fn connect_to_server(
    addr: SocketAddr,
    timeout: Duration,
    setup: &SocketSetup,
) -> Result<TcpStream, NetError> {
    connect_addr(&addr, timeout, setup).map_err(|e| connect_error(addr, &e))
}

/// A failed connect to a headroom (or iperf3) server: a refusal suggests
/// starting `headroom serve`.
pub(crate) fn connect_error(addr: SocketAddr, e: &io::Error) -> NetError {
    let mut reason = connect_reason(e);
    if e.kind() == io::ErrorKind::ConnectionRefused {
        reason += "; is `headroom serve` running there?";
    }
    NetError::Connect { addr: addr.to_string(), reason }
}

/// A failed connect to any TCP service (`headroom ping HOST:PORT`): nothing
/// said about headroom, the port may belong to anything.
pub(crate) fn connect_error_any_service(addr: SocketAddr, e: &io::Error) -> NetError {
    NetError::Connect { addr: addr.to_string(), reason: connect_reason(e) }
}

fn connect_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused (nothing listens on that port)".into(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            "timed out (host unreachable or a firewall drops the packets)".into()
        }
        _ if crate::os::is_unreachable(e) => "no route to host (unreachable)".into(),
        _ => e.to_string(),
    }
}

/// A UDP socket on an ephemeral port of `peer`'s address family, connected to `peer`.
pub(crate) fn udp_connected(peer: SocketAddr, setup: &SocketSetup) -> io::Result<UdpSocket> {
    let sock = setup.socket(&peer, Type::DGRAM)?;
    if setup.source.bind.is_none() {
        let any: SocketAddr = if peer.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        sock.bind(&any.into())?;
    }
    sock.connect(&peer.into())?;
    Ok(sock.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The only test here that registers spellings (the table is process-wide).
    #[test]
    fn a_source_that_cannot_reach_the_peer_is_named_in_the_front_ends_words() {
        spell_source_settings(|s| match s {
            SourceSetting::Bind => "--from",
            SourceSetting::Interface => "--via",
        });
        let peer: SocketAddr = "[::1]:5201".parse().unwrap();
        let sock = Socket::new(Domain::IPV6, Type::STREAM, None).unwrap();
        let v4 = Source { bind: Some("127.0.0.1".parse().unwrap()), interface: None };
        let e = v4.apply(&sock, &peer).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "--from 127.0.0.1 and the server's address ::1 are of different IP families");
    }

    #[test]
    fn length_prefix_round_trips_and_refuses_before_allocating() {
        let frame = length_prefixed(b"hello");
        assert_eq!(read_length_prefixed(&mut frame.as_slice(), 5, "message").unwrap(), b"hello");
        let err = read_length_prefixed(&mut [0xff, 0xff, 0xff, 0xff].as_slice(), 64, "message").unwrap_err();
        assert!(err.to_string().contains("exceeds the limit of 64"), "{err}");
        // A prefix promising more than arrives is an error, not a hang or a short message.
        assert!(read_length_prefixed(&mut [0, 0, 0, 9, 1].as_slice(), 64, "message").is_err());
    }

    #[test]
    fn readiness_follows_the_peer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        assert!(!wait_readable(&server, Duration::from_millis(10)), "nothing sent yet");
        client.write_all(b"x").unwrap();
        assert!(wait_readable(&server, Duration::from_secs(5)));
    }

    #[test]
    fn a_connect_within_its_time_is_blocking_after_and_a_refusal_is_its_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap();
        let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        connect_timeout(&sock, &open, Duration::from_secs(5)).unwrap();
        assert_eq!(sock.peer_addr().unwrap().as_socket(), Some(open));
        assert!(sock.nonblocking().is_ok_and(|n| !n), "blocking again, as std's streams expect");
        drop(listener);
        let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let e = connect_timeout(&sock, &open, Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        // The caller's verdict on the wait ends it: its error is the connect's.
        let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let unanswered: SocketAddr = "192.0.2.1:9".parse().unwrap();
        if let Err(e) = connect_within(&sock, &unanswered, || Err(io::Error::other("given up"))) {
            assert!(e.to_string() == "given up" || crate::os::is_unreachable(&e), "{e}");
        }
    }

    #[test]
    fn udp_sockets_take_the_peer_family() {
        let v4 = udp_connected("127.0.0.1:9".parse().unwrap(), &SocketSetup::default()).unwrap();
        assert!(v4.local_addr().unwrap().is_ipv4());
    }
}
