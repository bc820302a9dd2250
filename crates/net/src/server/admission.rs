//! Who may hold the server's resources, and for how long, before proving
//! anything: the one deadline of the pre-auth phase ([`DeadlineStream`]), the
//! bounded table of connections that have not finished it (per source and
//! overall; the oldest gives way), the test slots of `--max-clients` and the
//! peers holding them, and the throttles on failed authentications (per
//! source, an IPv6 source being its /64, and one budget for the whole
//! server, which sources that proved the token before are spared) with their
//! aggregate log lines.
//!
//! Long (about 550 lines): about 450 lines of code, the rest its unit tests.

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
/// Failed authentications all sources together may make in a burst...
pub const GLOBAL_AUTH_BURST: f64 = 20.0;
/// ...after which the whole server checks one more per this interval: many
/// addresses (an IPv6 /48 holds 65,536 /64s) guess no faster than one.
pub const GLOBAL_AUTH_REFILL: Duration = Duration::from_millis(500);
/// Addresses that proved the token and are spared the server-wide throttle.
const MAX_PROVEN_SOURCES: usize = 4096;
/// Beyond this many sources with failures to log, one line sums them all.
const MAX_SOURCE_LINES: usize = 3;

/// Where failed guesses are counted: an IPv4 address, or the /64 of an IPv6
/// one (one host usually holds a whole /64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SourceKey(IpAddr);

impl SourceKey {
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => SourceKey(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    SourceKey(IpAddr::V6(prefix.into()))
                }
            },
            v4 => SourceKey(v4),
        }
    }
}

impl std::fmt::Display for SourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V6(p) => write!(f, "{p}/64"),
            v4 => write!(f, "{v4}"),
        }
    }
}

/// Why a source may not try to authenticate now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Throttled {
    /// How long until it may.
    pub wait: Duration,
    /// The server-wide budget ran out (many sources guessing), not this source's.
    pub server_wide: bool,
}

/// A token bucket of attempts.
struct Bucket {
    allowance: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Self {
        Bucket { allowance: burst, at: now }
    }

    fn refill(&mut self, now: Instant, burst: f64, every: Duration) {
        let gained = now.duration_since(self.at).as_secs_f64() / every.as_secs_f64();
        self.allowance = (self.allowance + gained).min(burst);
        self.at = now;
    }

    fn wait(&self, every: Duration) -> Duration {
        every.mul_f64((1.0 - self.allowance).max(0.0))
    }
}

/// The server-wide budget and what it refused since the last log line.
struct Global {
    bucket: Bucket,
    throttled: u64,
    logged: Instant,
}

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
        let mut b = Bucket { allowance: self.allowance, at: self.at };
        b.refill(now, AUTH_BURST, AUTH_REFILL);
        (self.allowance, self.at) = (b.allowance, b.at);
    }

    /// Takes what is to log, and starts counting again.
    fn take(&mut self, now: Instant) -> (u64, u64, Duration) {
        let counts = (self.wrong, self.throttled, now.duration_since(self.logged));
        self.wrong = 0;
        self.throttled = 0;
        self.logged = now;
        counts
    }
}

fn plural(n: u64, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// The server's admission state (one per server).
pub(crate) struct Admission {
    pending: Mutex<PendingTable>,
    slots: Mutex<Slots>,
    failures: Mutex<HashMap<SourceKey, Failures>>,
    global: Mutex<Global>,
    /// Addresses that proved the token, and when they last did.
    proven: Mutex<HashMap<IpAddr, Instant>>,
}

impl Default for Admission {
    fn default() -> Self {
        let now = Instant::now();
        Admission {
            pending: Default::default(),
            slots: Default::default(),
            failures: Default::default(),
            global: Mutex::new(Global { bucket: Bucket::full(GLOBAL_AUTH_BURST, now), throttled: 0, logged: now }),
            proven: Default::default(),
        }
    }
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

    /// Whether `ip` may try to authenticate now: its own source's budget
    /// first, then the server's (which spares addresses that proved the
    /// token before, so a flood of guesses does not lock them out).
    pub fn may_authenticate(&self, ip: IpAddr) -> Result<(), Throttled> {
        let now = Instant::now();
        {
            let mut f = lock(&self.failures);
            if let Some(e) = f.get_mut(&SourceKey::of(ip)) {
                e.refill(now);
                if e.allowance < 1.0 {
                    e.throttled += 1;
                    return Err(Throttled { wait: AUTH_REFILL.mul_f64(1.0 - e.allowance), server_wide: false });
                }
            }
        }
        if lock(&self.proven).contains_key(&ip) {
            return Ok(());
        }
        let mut g = lock(&self.global);
        g.bucket.refill(now, GLOBAL_AUTH_BURST, GLOBAL_AUTH_REFILL);
        if g.bucket.allowance < 1.0 {
            g.throttled += 1;
            return Err(Throttled { wait: g.bucket.wait(GLOBAL_AUTH_REFILL), server_wide: true });
        }
        Ok(())
    }

    /// `ip` proved the token: the server-wide throttle spares it from now on.
    pub fn proved(&self, ip: IpAddr) {
        let mut p = lock(&self.proven);
        if p.len() >= MAX_PROVEN_SOURCES && !p.contains_key(&ip) {
            let stalest = p.iter().min_by_key(|(_, at)| **at).map(|(ip, _)| *ip);
            if let Some(stalest) = stalest {
                p.remove(&stalest);
            }
        }
        p.insert(ip, Instant::now());
    }

    /// Counts a failed authentication of `ip` against its source and the
    /// server. Returns a log line for the first failure of a source; later
    /// ones are summed up by [`Admission::failure_log`].
    pub fn failed_authentication(&self, ip: IpAddr) -> Option<String> {
        let now = Instant::now();
        {
            let mut g = lock(&self.global);
            g.bucket.refill(now, GLOBAL_AUTH_BURST, GLOBAL_AUTH_REFILL);
            g.bucket.allowance -= 1.0;
        }
        let key = SourceKey::of(ip);
        let mut f = lock(&self.failures);
        if f.len() >= MAX_FAILURE_SOURCES && !f.contains_key(&key) {
            prune(&mut f, now);
            if f.len() >= MAX_FAILURE_SOURCES {
                // Forget the source idle longest: the bound on memory wins over its
                // throttle (the server-wide budget still holds).
                let stalest = f.iter().min_by_key(|(_, e)| e.at).map(|(k, _)| *k);
                if let Some(stalest) = stalest {
                    f.remove(&stalest);
                }
            }
        }
        let fresh = !f.contains_key(&key);
        let e =
            f.entry(key).or_insert(Failures { allowance: AUTH_BURST, at: now, wrong: 0, throttled: 0, logged: now });
        e.refill(now);
        e.allowance -= 1.0;
        if fresh && f.len() <= MAX_SOURCE_LINES {
            return Some(format!("peer={ip} protocol=headroom refused: wrong token"));
        }
        f.get_mut(&key).expect("inserted above").wrong += 1;
        None
    }

    /// Log lines summing up the failures not logged for
    /// [`FAILURE_LOG_EVERY`]: one per source while few sources fail, one for
    /// all of them when many do, and one for the server-wide throttle.
    /// Forgets sources that are quiet and fully refilled.
    pub fn failure_log(&self) -> Vec<String> {
        let now = Instant::now();
        let mut f = lock(&self.failures);
        let due: Vec<(SourceKey, (u64, u64, Duration))> = f
            .iter_mut()
            .filter(|(_, e)| e.wrong + e.throttled > 0 && now.duration_since(e.logged) >= FAILURE_LOG_EVERY)
            .map(|(k, e)| (*k, e.take(now)))
            .collect();
        prune(&mut f, now);
        drop(f);
        let mut lines: Vec<String> = if due.len() <= MAX_SOURCE_LINES {
            due.iter()
                .map(|(k, (wrong, throttled, over))| {
                    format!(
                        "peer={k} protocol=headroom refused: {} and {} throttled in the last {:.0}s",
                        plural(*wrong, "wrong token"),
                        plural(*throttled, "attempt"),
                        over.as_secs_f64()
                    )
                })
                .collect()
        } else {
            let wrong: u64 = due.iter().map(|(_, (w, _, _))| w).sum();
            let throttled: u64 = due.iter().map(|(_, (_, t, _))| t).sum();
            let (worst, (most, _, _)) = due.iter().max_by_key(|(_, (w, t, _))| w + t).expect("more than 3");
            vec![format!(
                "protocol=headroom refused: {} and {} throttled from {} sources in the last {:.0}s (most from {worst}: {most})",
                plural(wrong, "wrong token"),
                plural(throttled, "attempt"),
                due.len(),
                FAILURE_LOG_EVERY.as_secs_f64()
            )]
        };
        let mut g = lock(&self.global);
        if g.throttled > 0 && now.duration_since(g.logged) >= FAILURE_LOG_EVERY {
            lines.push(format!(
                "protocol=headroom server-wide throttle: {} refused in the last {:.0}s (too many wrong tokens from many sources; addresses that proved the token are spared)",
                plural(g.throttled, "attempt"),
                now.duration_since(g.logged).as_secs_f64()
            ));
            g.throttled = 0;
            g.logged = now;
        }
        lines
    }
}

/// Drops sources with nothing to log whose allowance is full again.
fn prune(f: &mut HashMap<SourceKey, Failures>, now: Instant) {
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
        let Throttled { wait, server_wide } = adm.may_authenticate(ip).unwrap_err();
        assert!(!server_wide);
        assert!(wait <= AUTH_REFILL && wait > AUTH_REFILL / 2, "{wait:?}");
        assert!(adm.failure_log().is_empty(), "aggregated, not one line per failure");
        // Another source is not affected.
        assert!(adm.may_authenticate([127, 0, 0, 10].into()).is_ok());
    }

    /// Issue 27.4: 1,000 addresses x 5 guesses were all checked. Now many
    /// sources share one budget, an IPv6 /64 is one source, an address that
    /// proved the token is spared, and the log stays a few lines.
    #[test]
    fn many_sources_share_one_budget_and_a_proven_address_is_spared() {
        let adm = Admission::default();
        let honest: IpAddr = [127, 0, 0, 1].into();
        adm.proved(honest);
        let mut checked = 0;
        for i in 0..1000u32 {
            let ip: IpAddr = std::net::Ipv4Addr::from(0x7f00_0100 + i).into();
            for _ in 0..5 {
                if adm.may_authenticate(ip).is_ok() {
                    checked += 1;
                    adm.failed_authentication(ip);
                }
            }
        }
        assert!(checked <= GLOBAL_AUTH_BURST as usize + 2, "{checked} guesses checked from 1000 addresses");
        let throttled = adm.may_authenticate([127, 0, 9, 9].into()).unwrap_err();
        assert!(throttled.server_wide, "{throttled:?}");
        assert!(adm.may_authenticate(honest).is_ok(), "the address that proved the token is locked out");
        // An IPv6 /64 is one source: its 5-guess burst is shared by all its addresses.
        let fresh = Admission::default();
        let in_64 = |n: u16| IpAddr::from([0x2001, 0xdb8, 0, 1, n, n, n, n]);
        let mut ok = 0;
        for n in 0..50 {
            if fresh.may_authenticate(in_64(n)).is_ok() {
                ok += 1;
                fresh.failed_authentication(in_64(n));
            }
        }
        assert_eq!(ok, AUTH_BURST as usize, "a /64 got {ok} guesses");
        assert!(fresh.may_authenticate(IpAddr::from([0x2001, 0xdb8, 0, 2, 0, 0, 0, 1])).is_ok(), "another /64");
        assert_eq!(SourceKey::of(in_64(7)).to_string(), "2001:db8:0:1::/64");
    }

    #[test]
    fn failures_of_many_sources_are_one_log_line() {
        let adm = Admission::default();
        for i in 0..10u8 {
            let ip: IpAddr = [10, 0, 0, i].into();
            adm.failed_authentication(ip);
            adm.failed_authentication(ip);
        }
        // Pretend the interval passed.
        for e in lock(&adm.failures).values_mut() {
            e.logged -= FAILURE_LOG_EVERY;
        }
        let lines = adm.failure_log();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("from 10 sources"), "{lines:?}");
    }
}
