//! The TCP connections of the clients headroom speaks itself (iSCSI, SMB,
//! NBD's socket before libnbd takes it): a name resolved to all its
//! addresses, each tried in turn from the chosen source (`--bind`,
//! `--interface`, applied as `net` applies them), each connect bounded by a
//! deadline and ended by Ctrl-C within `wait::SLICE`.
//!
//! What it owns: resolving, the source, the connect and its deadline,
//! saying where a connection left from ([`Origin`]), and which job's
//! connection takes which of several sources and where each left from
//! ([`Spread`]); the connect itself is net's (`connect_within`, which
//! reads the socket's error after each slice of its wait). What it must not do:
//! send or read protocol bytes, or set socket options the protocols choose
//! (Nagle, blocking mode, timeouts): each client sets those on the stream.

use crate::os;
use crate::wait::Deadline;
use headroom_net::Source;
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

/// Every address HOST:PORT resolves to, in the resolver's order. A name
/// that does not resolve is `HostUnreachable` (the network's fault, not a
/// missing file), its message the resolver's.
pub fn resolve(addr: &str) -> io::Result<Vec<SocketAddr>> {
    let unreachable = |e: io::Error| io::Error::new(io::ErrorKind::HostUnreachable, e);
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(unreachable)?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(io::ErrorKind::HostUnreachable, format!("{addr} resolves to no address")));
    }
    Ok(addrs)
}

/// Connects to the first of `addrs` that answers, each within `limit`, from
/// `source`. The error is the last address's (Ctrl-C's at once); the stream
/// is blocking, with no option set. A connect nobody answered within
/// `limit` is `HostUnreachable`: a timeout here is no lost connection.
pub fn connect(addrs: &[SocketAddr], source: &Source, limit: Duration, stop: &AtomicBool) -> io::Result<TcpStream> {
    let mut last = None;
    for addr in addrs {
        match connect_one(addr, source, limit, stop) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(e),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                last = Some(io::Error::new(io::ErrorKind::HostUnreachable, e));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address")))
}

fn connect_one(addr: &SocketAddr, source: &Source, limit: Duration, stop: &AtomicBool) -> io::Result<TcpStream> {
    let sock = Socket::new(Domain::for_address(*addr), Type::STREAM, Some(Protocol::TCP))?;
    source.apply(&sock, addr)?;
    // net's connect, in slices that look at the stop flag (connect_timeout
    // would hold Ctrl-C for the whole limit).
    let deadline = Deadline::after(limit, "the TCP connect");
    headroom_net::connect_within(&sock, addr, || deadline.left(stop))?;
    Ok(sock.into())
}

/// Where a connection left from: recorded with the probe, and the NIC the
/// verdict holds the path against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// This end's address of the connection.
    pub address: Option<IpAddr>,
    /// The interface it left through: `--interface` when given, else the one
    /// holding the connection's source address.
    pub interface: Option<String>,
}

impl Origin {
    /// The origin of the connected socket `sock`, connected from `source`.
    pub fn of(sock: &impl os::AsSocket, source: &Source) -> Origin {
        let address = SockRef::from(sock).local_addr().ok().and_then(|a| a.as_socket()).map(|a| a.ip());
        let interface = source.interface.clone().or_else(|| address.and_then(headroom_sys::interface_with_address));
        Origin { address, interface }
    }

    /// Fills the probe's record.
    pub fn record(&self, info: &mut headroom_result::ProtocolInfo) {
        info.source_address = self.address.map(|a| a.to_string());
        info.interface = self.interface.clone();
    }
}

/// The sources a share's connections leave from (`--bind A,B`,
/// `--interface a,b`): job N's connection takes entry N mod their number,
/// so `--jobs` sessions spread over several NICs (multipathing's round
/// robin, one connection per job; not SMB multichannel). Remembers where
/// each job's connection left from when there is more than one source.
#[derive(Debug)]
pub struct Spread {
    list: Vec<Source>,
    /// Job -> (entry, where its latest connection left from).
    used: Mutex<BTreeMap<usize, (usize, Origin)>>,
}

impl Spread {
    /// Jobs take `list` round robin; an empty list is the routing table's choice.
    pub fn new(list: &[Source]) -> Spread {
        let list = if list.is_empty() { vec![Source::default()] } else { list.to_vec() };
        Spread { list, used: Mutex::new(BTreeMap::new()) }
    }

    /// Which of the sources (its index in the list) job `job`'s connection leaves from.
    pub fn turn(&self, job: usize) -> usize {
        job % self.list.len()
    }

    /// Where job `job`'s connection leaves from (one-off connections are job 0's).
    pub fn for_job(&self, job: usize) -> &Source {
        &self.list[self.turn(job)]
    }

    /// Every source, in the order given.
    // Only NFS turns each source into something of its own (an interface).
    #[cfg_attr(not(feature = "nfs"), allow(dead_code))]
    pub fn all(&self) -> &[Source] {
        &self.list
    }

    /// Job `job`'s connection left from `origin`; kept only when there is a
    /// choice to report.
    pub fn note(&self, job: usize, origin: Origin) {
        if self.list.len() > 1 {
            self.used.lock().unwrap_or_else(|p| p.into_inner()).insert(job, (self.turn(job), origin));
        }
    }

    /// `e` of job `job`'s connection, saying which source it tried when
    /// there is a choice (one source: `e` as it was).
    pub fn named(&self, job: usize, e: io::Error) -> io::Error {
        match self.for_job(job).describe().filter(|_| self.list.len() > 1) {
            Some(from) => io::Error::new(e.kind(), format!("{e} (job {job}'s connection, {from})")),
            None => e,
        }
    }

    /// Fills `info.sources`: per entry used, its jobs and where they left
    /// from (the bytes are the disk engine's to add).
    pub fn record(&self, info: &mut headroom_result::ProtocolInfo) {
        let used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        info.sources = (0..self.list.len())
            .filter_map(|entry| {
                let jobs: Vec<(usize, &Origin)> =
                    used.iter().filter(|(_, (e, _))| *e == entry).map(|(j, (_, o))| (*j, o)).collect();
                let (_, origin) = jobs.first()?;
                Some(headroom_result::SourceShare {
                    source_address: origin.address.map(|a| a.to_string()),
                    interface: origin.interface.clone(),
                    jobs: jobs.iter().map(|(j, _)| *j as u32).collect(),
                    ..Default::default()
                })
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait;
    use std::net::TcpListener;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn connects_to_the_first_address_that_answers() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let open = l.local_addr().unwrap();
        let s = connect(&[closed, open], &Source::default(), Duration::from_secs(2), &AtomicBool::new(false)).unwrap();
        assert_eq!(s.peer_addr().unwrap(), open);
        let origin = Origin::of(&s, &Source::default());
        assert_eq!(origin.address, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(origin.interface.as_deref(), Some("lo"));
    }

    #[test]
    fn a_refused_connect_is_the_error_and_a_bind_is_applied_first() {
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let e = connect(&[closed], &Source::default(), Duration::from_secs(2), &AtomicBool::new(false)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let from = Source { bind: Some("127.0.0.2".parse().unwrap()), interface: None };
        let s = connect(&[l.local_addr().unwrap()], &from, Duration::from_secs(2), &AtomicBool::new(false)).unwrap();
        assert_eq!(s.local_addr().unwrap().ip(), "127.0.0.2".parse::<IpAddr>().unwrap());
        let v6 = Source { bind: Some("::1".parse().unwrap()), interface: None };
        let e = connect(&[l.local_addr().unwrap()], &v6, Duration::from_secs(2), &AtomicBool::new(false)).unwrap_err();
        assert!(e.to_string().contains("different IP families"), "{e}");
    }

    #[test]
    fn jobs_take_the_sources_round_robin_and_each_connection_is_recorded_by_source() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ip = |a: &str| Source { bind: Some(a.parse().unwrap()), interface: None };
        let spread = Spread::new(&[ip("127.0.0.1"), ip("127.0.0.2")]);
        let mut held = Vec::new();
        for job in [0, 1, 2] {
            let s = connect(
                &[l.local_addr().unwrap()],
                spread.for_job(job),
                Duration::from_secs(2),
                &AtomicBool::new(false),
            )
            .unwrap();
            spread.note(job, Origin::of(&s, spread.for_job(job)));
            held.push(s);
        }
        let mut info = headroom_result::ProtocolInfo::default();
        spread.record(&mut info);
        let got: Vec<(Option<String>, Vec<u32>)> =
            info.sources.iter().map(|s| (s.source_address.clone(), s.jobs.clone())).collect();
        assert_eq!(got, [(Some("127.0.0.1".into()), vec![0, 2]), (Some("127.0.0.2".into()), vec![1])]);
        assert_eq!(held[1].local_addr().unwrap().ip(), "127.0.0.2".parse::<IpAddr>().unwrap());
        let e = spread.named(3, io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
        assert_eq!(
            (e.kind(), e.to_string()),
            (io::ErrorKind::ConnectionRefused, "refused (job 3's connection, from 127.0.0.2)".into())
        );
    }

    #[test]
    fn one_source_or_none_records_no_spread() {
        for list in [vec![], vec![Source { bind: Some("127.0.0.1".parse().unwrap()), interface: None }]] {
            let spread = Spread::new(&list);
            assert_eq!(spread.for_job(5), spread.for_job(0));
            spread.note(3, Origin::default());
            assert_eq!(spread.named(3, io::Error::other("refused")).to_string(), "refused");
            let mut info = headroom_result::ProtocolInfo::default();
            spread.record(&mut info);
            assert!(info.sources.is_empty());
        }
    }

    #[test]
    fn ctrl_c_ends_a_connect_that_hangs() {
        // 192.0.2.1 (TEST-NET-1) is never routed on a lab machine: either no
        // route (an error at once) or a SYN nobody answers (the wait).
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, Ordering::SeqCst);
        });
        let started = Instant::now();
        let addr: SocketAddr = "192.0.2.1:9".parse().unwrap();
        let e = connect(&[addr], &Source::default(), Duration::from_secs(30), &stop).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10), "Ctrl-C must end the connect");
        if e.kind() == io::ErrorKind::Interrupted {
            assert_eq!(e.to_string(), wait::stopped("the TCP connect").to_string());
        }
    }
}
