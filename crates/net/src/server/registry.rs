//! The server's shared state: its configuration, the admission table, the
//! authenticated sessions, and where a test waits for its data streams (TCP
//! stream inboxes by iperf3 cookie or headroom key, iperf2 tests by peer and
//! header, UDP waiters by peer).
//! A test registers before it asks for streams and a [`Registration`]
//! removes it on drop, whatever happened. Knows no protocol message.

use super::admission::Admission;
use super::ServerConfig;
use crate::iperf3 as iperf3_wire;
use crate::wire;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) struct UdpWaiter {
    pub(super) id: u64,
    pub(super) peer_ip: IpAddr,
    /// Headroom streams name their session key; iperf3 streams only their address.
    pub(super) key: Option<[u8; wire::KEY_LEN]>,
    pub(super) tx: SyncSender<UdpSocket>,
}

/// Where the first stream of a test waits for the others: by the peer's
/// address and the header they all repeat.
pub(super) type Iperf2Key = (IpAddr, Vec<u8>);
/// A later stream of a test, with the bytes of its header (counted as data,
/// as the client counts them).
pub(super) type Iperf2Inbox = SyncSender<(TcpStream, u64)>;

/// Slots iperf3 and iperf2 clients may hold: with a token, one stays for
/// token holders, since anyone who reaches the port can be such a client.
pub(super) fn unauthenticated_slots(cfg: &ServerConfig) -> usize {
    if cfg.token.is_some() && cfg.max_clients > 1 {
        cfg.max_clients - 1
    } else {
        cfg.max_clients
    }
}

/// An authenticated headroom session: its peer, and when any of its
/// connections (control, RR, UDP echo) last did something.
#[derive(Clone)]
pub(super) struct SessionInfo {
    pub(super) ip: IpAddr,
    /// The session's secret, which its streams' proofs are checked against.
    pub(super) keys: wire::SessionKeys,
    pub(super) last_activity_ms: Arc<AtomicU64>,
    /// Request/response streams open now ([`SessionInfo::rr_slot`]).
    rr_streams: Arc<AtomicUsize>,
}

/// Request/response streams one session may hold open at once: a client
/// opens one per RR test, and one beside a throughput test's; each holds a
/// thread here, so a peer may not open them without bound.
pub(super) const MAX_RR_STREAMS: usize = 4;

/// One of a session's RR streams, counted until dropped.
pub(super) struct RrSlot(Arc<AtomicUsize>);

impl Drop for RrSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl SessionInfo {
    /// A slot for one more RR stream, None when the session holds
    /// [`MAX_RR_STREAMS`] already.
    pub(super) fn rr_slot(&self) -> Option<RrSlot> {
        let counter = &self.rr_streams;
        counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_RR_STREAMS).then_some(n + 1)).ok()?;
        Some(RrSlot(counter.clone()))
    }

    pub(super) fn touch(&self, s: &Shared) {
        self.touch_at(Instant::now(), s);
    }

    /// [`Self::touch`] with a clock reading the caller already has (a round
    /// trip's loop reads the clock once per echo).
    pub(super) fn touch_at(&self, now: Instant, s: &Shared) {
        self.last_activity_ms.store(now.saturating_duration_since(s.epoch).as_millis() as u64, Ordering::Relaxed);
    }
}

/// Where a running iperf3 test receives its data streams, with their arrival number.
pub(super) type StreamInbox = SyncSender<(u64, TcpStream)>;
/// Where a running headroom test receives its data streams, with their index.
pub(super) type IndexedStreamInbox = SyncSender<(u32, TcpStream)>;

/// What every thread of a running server reads and registers in.
pub(super) struct Shared {
    pub(super) cfg: ServerConfig,
    pub(super) local: SocketAddr,
    /// Where iperf2 clients are served, if they are.
    pub(super) iperf2_local: Option<SocketAddr>,
    pub(super) admission: Arc<Admission>,
    pub(super) tests_done: AtomicUsize,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) iperf3_streams: Mutex<HashMap<[u8; iperf3_wire::COOKIE_LEN], StreamInbox>>,
    pub(super) headroom_streams: Mutex<HashMap<([u8; wire::KEY_LEN], u32), IndexedStreamInbox>>,
    /// iperf2 tests waiting for their other streams.
    pub(super) iperf2_tests: Mutex<HashMap<Iperf2Key, Iperf2Inbox>>,
    /// By public id ([`wire::SessionKeys::id`]).
    pub(super) sessions: Mutex<HashMap<[u8; wire::KEY_LEN], SessionInfo>>,
    pub(super) epoch: Instant,
    pub(super) udp_waiters: Mutex<Vec<UdpWaiter>>,
    pub(super) next_waiter: AtomicU64,
    /// Set while a client's remote plan is prepared (its test file laid out)
    /// until it finishes: one remote plan at a time on the whole server.
    pub(super) remote_busy: Arc<AtomicBool>,
}

impl Shared {
    pub(super) fn new(cfg: ServerConfig, local: SocketAddr) -> Shared {
        Shared {
            cfg,
            local,
            iperf2_local: None,
            admission: Default::default(),
            tests_done: AtomicUsize::new(0),
            stop: Arc::new(AtomicBool::new(false)),
            iperf3_streams: Default::default(),
            headroom_streams: Default::default(),
            iperf2_tests: Default::default(),
            sessions: Default::default(),
            epoch: Instant::now(),
            udp_waiters: Default::default(),
            next_waiter: Default::default(),
            remote_busy: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts a session for `ip`, known by its public id.
    pub(super) fn open_session(&self, keys: wire::SessionKeys, ip: IpAddr) -> SessionInfo {
        let info = SessionInfo { ip, keys, last_activity_ms: Default::default(), rr_streams: Default::default() };
        info.touch(self);
        self.sessions.lock().unwrap_or_else(|p| p.into_inner()).insert(keys.id(), info.clone());
        info
    }

    /// The session `id` (hex) names, if it is `peer`'s: a stream from
    /// another address never joins a session, whatever it presents.
    pub(super) fn session_of(&self, id: &str, peer: IpAddr) -> Option<SessionInfo> {
        let id = wire::key_from_hex(id)?;
        self.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&id).filter(|info| info.ip == peer).cloned()
    }
}

/// Collects `n` items from `rx` before `deadline`.
pub(super) fn collect<T>(rx: &Receiver<T>, n: usize, timeout: Duration) -> Option<Vec<T>> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let left = deadline.checked_duration_since(Instant::now())?;
        out.push(rx.recv_timeout(left).ok()?);
    }
    Some(out)
}

/// Collects the `n` data streams of a headroom test, indices 0 to n-1,
/// before the timeout, in index order. A stream whose index is out of range
/// or already taken is closed: one connection per index, the first one wins.
pub(super) fn collect_indexed(rx: &Receiver<(u32, TcpStream)>, n: usize, timeout: Duration) -> Option<Vec<TcpStream>> {
    let deadline = Instant::now() + timeout;
    let mut slots: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut filled = 0;
    while filled < n {
        let left = deadline.checked_duration_since(Instant::now())?;
        let (index, stream) = rx.recv_timeout(left).ok()?;
        match slots.get_mut(index as usize) {
            Some(slot @ None) => {
                *slot = Some(stream);
                filled += 1;
            }
            _ => drop(stream),
        }
    }
    Some(slots.into_iter().flatten().collect())
}

/// Removes a test's stream registrations when dropped, whatever happened.
pub(super) struct Registration<'a> {
    pub(super) s: &'a Shared,
    pub(super) cookie: Option<[u8; iperf3_wire::COOKIE_LEN]>,
    pub(super) headroom: Option<([u8; wire::KEY_LEN], u32)>,
    pub(super) udp_waiter: Option<u64>,
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
    pub(super) fn iperf3(
        s: &'a Shared,
        cookie: [u8; iperf3_wire::COOKIE_LEN],
        tx: SyncSender<(u64, TcpStream)>,
        udp: Option<(IpAddr, SyncSender<UdpSocket>)>,
    ) -> Self {
        s.iperf3_streams.lock().unwrap_or_else(|p| p.into_inner()).insert(cookie, tx);
        Registration { s, cookie: Some(cookie), headroom: None, udp_waiter: add_waiter(s, udp, None) }
    }

    pub(super) fn headroom(
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

/// Pieces the server's unit tests share: a server state without sockets, and
/// a connected loopback pair standing for a client and its server side.
#[cfg(test)]
pub(super) mod test_support {
    use super::*;
    use std::net::TcpListener;

    /// A loopback server's state with `idle` as its idle timeout.
    pub(crate) fn shared(idle: Duration) -> Arc<Shared> {
        let cfg = ServerConfig { idle_timeout: idle, ..ServerConfig::loopback(0) };
        Arc::new(Shared::new(cfg, SocketAddr::from(([127, 0, 0, 1], 0))))
    }

    /// (client, server) ends of one TCP connection.
    pub(crate) fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::shared;
    use super::*;
    use std::sync::mpsc::sync_channel;

    #[test]
    fn with_a_token_one_slot_stays_for_token_holders() {
        let cfg = |token: Option<&str>, max_clients| ServerConfig {
            token: token.map(Into::into),
            max_clients,
            ..ServerConfig::loopback(0)
        };
        assert_eq!(unauthenticated_slots(&cfg(None, 4)), 4);
        assert_eq!(unauthenticated_slots(&cfg(Some("t"), 4)), 3);
        assert_eq!(unauthenticated_slots(&cfg(Some("t"), 1)), 1);
    }

    #[test]
    fn collect_gives_up_when_streams_do_not_arrive() {
        let (tx, rx) = sync_channel(4);
        tx.send(1).unwrap();
        // A client that opens one of its two streams cannot hold the test.
        let t0 = Instant::now();
        assert_eq!(collect(&rx, 2, Duration::from_millis(100)), None);
        assert!(t0.elapsed() < Duration::from_secs(5));
        tx.send(2).unwrap();
        tx.send(3).unwrap();
        assert_eq!(collect(&rx, 2, Duration::from_millis(100)), Some(vec![2, 3]));
    }

    #[test]
    fn registrations_vanish_on_drop() {
        let s = shared(Duration::from_secs(1));
        let key = wire::random_key();
        let (tx, _rx) = sync_channel(1);
        let (utx, _urx) = sync_channel(1);
        {
            let _r = Registration::headroom(&s, key, 7, tx, Some((IpAddr::from([127, 0, 0, 1]), utx)));
            assert!(s.headroom_streams.lock().unwrap().contains_key(&(key, 7)));
            assert_eq!(s.udp_waiters.lock().unwrap().len(), 1);
        }
        assert!(s.headroom_streams.lock().unwrap().is_empty());
        assert!(s.udp_waiters.lock().unwrap().is_empty());
        let cookie = crate::iperf3::new_cookie();
        let (tx, _rx) = sync_channel(1);
        drop(Registration::iperf3(&s, cookie, tx, None));
        assert!(s.iperf3_streams.lock().unwrap().is_empty());
    }
}
