//! Who may hold the server's resources, and for how long, before proving
//! anything: the one deadline of the pre-auth phase ([`DeadlineStream`]), the
//! bounded table of connections that have not finished it (per source and
//! overall; the oldest gives way), the test slots of `--max-clients` and the
//! peers holding them, and the per-source throttle on failed authentications
//! with its aggregate log lines.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections allowed in the pre-auth phase at once, all sources together.
pub const MAX_PENDING: usize = 256;
/// Connections one source address may have in the pre-auth phase at once,
/// unless it holds a test slot (its data streams arrive in bursts).
pub const MAX_PENDING_PER_SOURCE: usize = 16;
/// Failed authentications a source may make in a burst...
pub const AUTH_BURST: f64 = 5.0;
/// ...after which it gets one attempt per this interval.
pub const AUTH_REFILL: Duration = Duration::from_secs(2);
/// Failures of one source are logged at most once per this interval.
pub const FAILURE_LOG_EVERY: Duration = Duration::from_secs(10);
/// Sources whose failures are remembered at once (the table's memory bound).
const MAX_FAILURE_SOURCES: usize = 4096;

/// Reads that all end at one deadline: each read waits at most for the time
/// left, so a peer trickling a byte at a time gains nothing.
pub(crate) struct DeadlineStream<'a> {
    pub conn: &'a TcpStream,
    pub deadline: Instant,
}

impl Read for DeadlineStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the pre-authentication deadline passed"));
        }
        self.conn.set_read_timeout(Some(left))?;
        (&*self.conn).read(buf)
    }
}

impl Write for DeadlineStream<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.conn).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&*self.conn).flush()
    }
}

#[derive(Default)]
struct PendingTable {
    next_id: u64,
    /// By admission order, so the first entry is the oldest; the stream is a
    /// clone whose shutdown wakes the connection's thread when it is evicted.
    conns: BTreeMap<u64, (IpAddr, TcpStream)>,
    per_source: HashMap<IpAddr, usize>,
}

impl PendingTable {
    fn remove(&mut self, id: u64) -> Option<TcpStream> {
        let (ip, conn) = self.conns.remove(&id)?;
        if let Some(n) = self.per_source.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&ip);
            }
        }
        Some(conn)
    }

    fn evict(&mut self, id: u64) {
        if let Some(conn) = self.remove(id) {
            let _ = conn.shutdown(Shutdown::Both);
        }
    }
}

#[derive(Default)]
struct Slots {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
}

struct Failures {
    /// Attempts left (token bucket), as of `at`.
    allowance: f64,
    at: Instant,
    wrong: u64,
    throttled: u64,
    logged: Instant,
}

impl Failures {
    fn refill(&mut self, now: Instant) {
        let gained = now.duration_since(self.at).as_secs_f64() / AUTH_REFILL.as_secs_f64();
        self.allowance = (self.allowance + gained).min(AUTH_BURST);
        self.at = now;
    }

    fn line(&mut self, ip: IpAddr, now: Instant) -> String {
        let line = format!(
            "peer={ip} protocol=headroom refused: {} wrong token{} and {} attempt{} throttled in the last {:.0}s",
            self.wrong,
            if self.wrong == 1 { "" } else { "s" },
            self.throttled,
            if self.throttled == 1 { "" } else { "s" },
            now.duration_since(self.logged).as_secs_f64()
        );
        self.wrong = 0;
        self.throttled = 0;
        self.logged = now;
        line
    }
}

/// The server's admission state (one per server).
#[derive(Default)]
pub(crate) struct Admission {
    pending: Mutex<PendingTable>,
    slots: Mutex<Slots>,
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

/// A connection's place in the pre-auth table; leaving it (release or drop) frees the place.
pub(crate) struct PendingTicket {
    adm: Arc<Admission>,
    id: Option<u64>,
    /// When the pre-auth phase of this connection must be over.
    pub deadline: Instant,
}

impl PendingTicket {
    /// The connection finished its pre-auth phase.
    pub fn release(&mut self) {
        if let Some(id) = self.id.take() {
            lock(&self.adm.pending).remove(id);
        }
    }
}

impl Drop for PendingTicket {
    fn drop(&mut self) {
        self.release();
    }
}

/// Holds one of the --max-clients slots for a peer.
pub(crate) struct Slot<'a> {
    adm: &'a Admission,
    ip: IpAddr,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut s = lock(&self.adm.slots);
        s.total -= 1;
        if let Some(n) = s.per_peer.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                s.per_peer.remove(&self.ip);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Admission {
    /// Admits a new connection to the pre-auth phase. Over the bound of its
    /// source, that source's oldest pending connection is closed; over the
    /// overall bound, the oldest of all: a new client always gets its chance,
    /// and a flood only shortens the time everyone gets before the deadline.
    /// A source holding a slot has no per-source bound (its test's streams).
    pub fn admit(self: &Arc<Self>, conn: &TcpStream, ip: IpAddr, deadline: Instant) -> Option<PendingTicket> {
        let clone = conn.try_clone().ok()?;
        let holds_slot = lock(&self.slots).per_peer.contains_key(&ip);
        let mut t = lock(&self.pending);
        if !holds_slot && t.per_source.get(&ip).copied().unwrap_or(0) >= MAX_PENDING_PER_SOURCE {
            let oldest = t.conns.iter().find(|(_, (i, _))| *i == ip).map(|(id, _)| *id);
            if let Some(id) = oldest {
                t.evict(id);
            }
        }
        if t.conns.len() >= MAX_PENDING {
            let oldest = t.conns.keys().next().copied();
            if let Some(id) = oldest {
                t.evict(id);
            }
        }
        let id = t.next_id;
        t.next_id += 1;
        t.conns.insert(id, (ip, clone));
        *t.per_source.entry(ip).or_default() += 1;
        drop(t);
        Some(PendingTicket { adm: self.clone(), id: Some(id), deadline })
    }

    /// Takes a test slot for `ip` if fewer than `cap` are held.
    pub fn take_slot(&self, ip: IpAddr, cap: usize) -> Option<Slot<'_>> {
        let mut s = lock(&self.slots);
        if s.total >= cap {
            return None;
        }
        s.total += 1;
        *s.per_peer.entry(ip).or_default() += 1;
        Some(Slot { adm: self, ip })
    }

    /// Slots held now.
    pub fn slots_held(&self) -> usize {
        lock(&self.slots).total
    }

    /// Whether `ip` may try to authenticate now; Err = how long until it may.
    pub fn may_authenticate(&self, ip: IpAddr) -> Result<(), Duration> {
        let mut f = lock(&self.failures);
        let Some(e) = f.get_mut(&ip) else { return Ok(()) };
        e.refill(Instant::now());
        if e.allowance >= 1.0 {
            return Ok(());
        }
        e.throttled += 1;
        Err(AUTH_REFILL.mul_f64(1.0 - e.allowance))
    }

    /// Counts a failed authentication of `ip`. Returns a log line for the first
    /// failure of a source; later ones are summed up by [`Admission::failure_log`].
    pub fn failed_authentication(&self, ip: IpAddr) -> Option<String> {
        let now = Instant::now();
        let mut f = lock(&self.failures);
        if f.len() >= MAX_FAILURE_SOURCES && !f.contains_key(&ip) {
            prune(&mut f, now);
            if f.len() >= MAX_FAILURE_SOURCES {
                // Forget the source idle longest: the bound on memory wins over its throttle.
                let stalest = f.iter().min_by_key(|(_, e)| e.at).map(|(ip, _)| *ip);
                if let Some(stalest) = stalest {
                    f.remove(&stalest);
                }
            }
        }
        let fresh = !f.contains_key(&ip);
        let e = f.entry(ip).or_insert(Failures { allowance: AUTH_BURST, at: now, wrong: 0, throttled: 0, logged: now });
        e.refill(now);
        e.allowance -= 1.0;
        if fresh {
            return Some(format!("peer={ip} protocol=headroom refused: wrong token"));
        }
        e.wrong += 1;
        None
    }

    /// Log lines summing up the failures of each source not logged for
    /// [`FAILURE_LOG_EVERY`]; forgets sources that are quiet and fully refilled.
    pub fn failure_log(&self) -> Vec<String> {
        let now = Instant::now();
        let mut f = lock(&self.failures);
        let lines = f
            .iter_mut()
            .filter(|(_, e)| e.wrong + e.throttled > 0 && now.duration_since(e.logged) >= FAILURE_LOG_EVERY)
            .map(|(ip, e)| e.line(*ip, now))
            .collect();
        prune(&mut f, now);
        lines
    }
}

/// Drops sources with nothing to log whose allowance is full again.
fn prune(f: &mut HashMap<IpAddr, Failures>, now: Instant) {
    f.retain(|_, e| {
        e.refill(now);
        e.wrong + e.throttled > 0 || e.allowance < AUTH_BURST
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    #[test]
    fn a_flooding_source_loses_its_oldest_connection_not_the_newcomer() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let adm = Arc::new(Admission::default());
        let flood: IpAddr = [127, 0, 0, 2].into();
        let mut kept = Vec::new();
        for _ in 0..MAX_PENDING_PER_SOURCE + 1 {
            let (client, server) = pair(&l);
            let ticket = adm.admit(&server, flood, Instant::now()).unwrap();
            kept.push((client, server, ticket));
        }
        // The first one was closed by the server; the newest is still pending.
        let mut buf = [0u8; 1];
        kept[0].0.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!((&kept[0].0).read(&mut buf).unwrap(), 0, "oldest evicted");
        assert_eq!(lock(&adm.pending).per_source[&flood], MAX_PENDING_PER_SOURCE);
        // A slot holder's streams are not bounded per source.
        let _slot = adm.take_slot(flood, 1).unwrap();
        let (_c, s) = pair(&l);
        let _t = adm.admit(&s, flood, Instant::now()).unwrap();
        assert_eq!(lock(&adm.pending).per_source[&flood], MAX_PENDING_PER_SOURCE + 1);
        drop(kept);
        assert_eq!(lock(&adm.pending).conns.len(), 1);
    }

    #[test]
    fn failures_are_throttled_after_a_burst_and_logged_once() {
        let adm = Admission::default();
        let ip: IpAddr = [127, 0, 0, 9].into();
        assert!(adm.may_authenticate(ip).is_ok());
        assert!(adm.failed_authentication(ip).is_some(), "the first failure is logged");
        for _ in 1..AUTH_BURST as usize {
            assert!(adm.may_authenticate(ip).is_ok());
            assert!(adm.failed_authentication(ip).is_none());
        }
        let wait = adm.may_authenticate(ip).unwrap_err();
        assert!(wait <= AUTH_REFILL && wait > AUTH_REFILL / 2, "{wait:?}");
        assert!(adm.failure_log().is_empty(), "aggregated, not one line per failure");
        // Another source is not affected.
        assert!(adm.may_authenticate([127, 0, 0, 10].into()).is_ok());
    }
}
