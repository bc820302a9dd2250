//! The server's iperf2 UDP side (`serve --iperf2`, for `iperf -c -u`) on
//! the UDP socket of the iperf2 port: each client stream (a source address
//! and port) accounted as its datagrams arrive, the final datagram (a
//! negative id) answered with the report a stock server sends (bytes,
//! window, loss, reordering, jitter), again for each repeat of it for a
//! while, and one log line per test. iperf2 peers are unauthenticated: a
//! stream takes a slot as their TCP tests do (never the one kept for token
//! holders). Reads and writes the datagrams through [`crate::iperf2`]; knows
//! nothing of the other protocols.

use super::admission::Slot;
use super::registry::unauthenticated_slots;
use super::registry::Shared;
use super::test_watch::rate_text;
use crate::iperf2::{udp_datagram_id, udp_report, Refusal, UdpReport, UDP_SETTINGS_LEN};
use crate::socket::{MAX_UDP_LEN, POLL};
use crate::stats::UdpRecvStats;
use crate::udp_header::{wall_now, UdpHeader};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a finished stream's report is sent again to its repeats, and a
/// refused or cut peer's datagrams are ignored without a new log line.
const REMEMBER: Duration = Duration::from_secs(10);
/// Most peers remembered at once: a flood of new sources is ignored beyond it.
const MAX_PEERS: usize = 1024;
/// Refusal lines per second at most: a datagram's source costs nothing to
/// forge, so beyond these they are counted and summed up in one line.
const REFUSALS_LOGGED_PER_SECOND: u32 = 5;

/// Refusal lines, at most [`REFUSALS_LOGGED_PER_SECOND`]: the rest counted.
struct RefusalLog {
    since: Instant,
    logged: u32,
    held_back: u64,
}

impl RefusalLog {
    fn line(&mut self, s: &Shared, line: String) {
        if self.since.elapsed() >= Duration::from_secs(1) {
            self.flush(s);
            self.since = Instant::now();
            self.logged = 0;
        }
        if self.logged < REFUSALS_LOGGED_PER_SECOND {
            self.logged += 1;
            (s.cfg.log)(&line);
        } else {
            self.held_back += 1;
        }
    }

    fn flush(&mut self, s: &Shared) {
        if self.held_back > 0 {
            (s.cfg.log)(&format!("protocol=iperf2 refused {} more UDP peers (not logged one by one)", self.held_back));
            self.held_back = 0;
        }
    }
}

/// One client stream's state.
enum Peer<'a> {
    /// Datagrams arriving; the slot is held until the final one.
    Running { stats: UdpRecvStats, first: Instant, last: Instant, _slot: Slot<'a> },
    /// Reported: the report again for each repeat of the final datagram.
    Done { report: UdpReport, until: Instant },
    /// Refused or cut: ignored until `until` (each datagram pushes it on).
    Ignored { until: Instant },
}

/// Most datagrams already queued that are read before each sweep: about a
/// default socket buffer's worth, so a flood cannot hold the sweep off.
const DRAINED_BEFORE_SWEEP: usize = 1024;

/// Serves iperf2 UDP clients on `sock` until the server stops.
pub(super) fn udp_loop(sock: &UdpSocket, s: &Shared) {
    let _ = sock.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; MAX_UDP_LEN];
    let mut streams = Streams {
        peers: HashMap::new(),
        refusals: RefusalLog { since: Instant::now(), logged: 0, held_back: 0 },
        // Only the id and the send time are read: the settings were checked on the first datagram.
        header: UdpHeader::Iperf2 { settings: [0; UDP_SETTINGS_LEN] },
    };
    let mut swept = Instant::now();
    while !s.stop.load(Ordering::Relaxed) {
        if swept.elapsed() >= POLL {
            swept = Instant::now();
            // What is queued first: datagrams waiting behind a server thread
            // the machine stalled are no silence to end a stream for.
            if sock.set_nonblocking(true).is_ok() {
                for _ in 0..DRAINED_BEFORE_SWEEP {
                    let Ok((n, from)) = sock.recv_from(&mut buf) else { break };
                    streams.datagram(&buf[..n], from, sock, s);
                }
                let _ = sock.set_nonblocking(false);
            }
            sweep(&mut streams.peers, s);
            if streams.refusals.since.elapsed() >= Duration::from_secs(1) {
                streams.refusals.flush(s);
            }
        }
        let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
        streams.datagram(&buf[..n], from, sock, s);
    }
}

/// The UDP side's state: each peer, the refusal lines, the header reader.
struct Streams<'a> {
    peers: HashMap<SocketAddr, Peer<'a>>,
    refusals: RefusalLog,
    header: UdpHeader,
}

impl<'a> Streams<'a> {
    /// One datagram from `from`: a new stream or refusal, a counted
    /// datagram, the final one answered.
    fn datagram(&mut self, datagram: &[u8], from: SocketAddr, sock: &UdpSocket, s: &'a Shared) {
        let n = datagram.len();
        let now = Instant::now();
        let known = match self.peers.get(&from) {
            Some(Peer::Running { .. }) => true,
            Some(Peer::Done { until, .. } | Peer::Ignored { until }) => *until > now,
            None => false,
        };
        if !known {
            if self.peers.len() >= MAX_PEERS {
                return;
            }
            let first = start(datagram, from, s, now, &mut self.refusals);
            self.peers.insert(from, first);
        }
        let last_one = udp_datagram_id(datagram).is_ok_and(|id| id < 0);
        match self.peers.get_mut(&from) {
            Some(Peer::Running { stats, last, .. }) => {
                *last = now;
                if let Some((seq, sent)) = self.header.parse(datagram) {
                    stats.record(seq, sent, wall_now().as_secs_f64(), n);
                }
                if last_one {
                    finish(&mut self.peers, from, sock, n, s);
                }
            }
            Some(Peer::Done { report, .. }) if last_one => answer(sock, from, report, n),
            Some(Peer::Ignored { until }) => *until = now + REMEMBER,
            _ => {}
        }
    }
}

/// A new peer's first datagram: a stream that takes a slot, or refused in one log line.
fn start<'a>(datagram: &[u8], from: SocketAddr, s: &'a Shared, now: Instant, log: &mut RefusalLog) -> Peer<'a> {
    let mut refused = |line: String| {
        log.line(s, line);
        Peer::Ignored { until: now + REMEMBER }
    };
    match udp_datagram_id(datagram) {
        Err(Refusal::NotIperf2(why)) => {
            refused(format!("peer={from} protocol=unknown refused on the iperf2 UDP port: {why}"))
        }
        Err(Refusal::Unsupported(what)) => refused(format!("peer={from} protocol=iperf2 refused: {what}")),
        Ok(_) => match s.admission.take_slot(from.ip(), unauthenticated_slots(&s.cfg)) {
            Some(slot) => Peer::Running { stats: UdpRecvStats::default(), first: now, last: now, _slot: slot },
            None => refused(format!("peer={from} protocol=iperf2 refused: busy ({} clients)", s.cfg.max_clients)),
        },
    }
}

/// The final datagram arrived: report, log, free the slot, remember the report.
fn finish(peers: &mut HashMap<SocketAddr, Peer<'_>>, from: SocketAddr, sock: &UdpSocket, room: usize, s: &Shared) {
    let Some(Peer::Running { stats, first, .. }) = peers.remove(&from) else { return };
    let report = UdpReport::of(&stats.summary, first.elapsed());
    answer(sock, from, &report, room);
    log(s, from, &report, "ok");
    s.tests_done.fetch_add(1, Ordering::SeqCst);
    peers.insert(from, Peer::Done { report, until: Instant::now() + REMEMBER });
}

/// Sends the report, never longer than the datagram it answers.
fn answer(sock: &UdpSocket, to: SocketAddr, report: &UdpReport, room: usize) {
    if let Some(bytes) = udp_report(report, room) {
        let _ = sock.send_to(&bytes, to);
    }
}

fn log(s: &Shared, peer: SocketAddr, r: &UdpReport, status: &str) {
    let secs = r.window.as_secs_f64();
    (s.cfg.log)(&format!(
        "peer={peer} protocol=iperf2 test=udp streams=1 duration={secs:.2}s bytes={} rate={} lost={}/{} \
         out_of_order={} jitter={:.3}ms status={status}",
        r.bytes,
        rate_text(r.bytes, secs),
        r.lost,
        r.datagrams,
        r.out_of_order,
        r.jitter_s * 1e3
    ));
}

/// Streams silent for the idle timeout, or longer than --max-duration, end
/// (logged, slot freed); what is remembered expires.
fn sweep(peers: &mut HashMap<SocketAddr, Peer<'_>>, s: &Shared) {
    let now = Instant::now();
    let mut ended = Vec::new();
    peers.retain(|from, p| match p {
        Peer::Running { stats, first, last, .. } => {
            let why = if now.duration_since(*last) >= s.cfg.idle_timeout {
                format!("no datagram for {:.0} s", s.cfg.idle_timeout.as_secs_f64())
            } else if now.duration_since(*first) > s.cfg.max_duration + Duration::from_secs(2) {
                super::iperf2::cut_at_limit(&s.cfg)
            } else {
                return true;
            };
            let report = UdpReport::of(&stats.summary, last.duration_since(*first));
            ended.push((*from, report, why));
            false
        }
        Peer::Done { until, .. } | Peer::Ignored { until } => *until > now,
    });
    for (from, report, why) in ended {
        log(s, from, &report, &format!("aborted: {why}"));
        s.tests_done.fetch_add(1, Ordering::SeqCst);
        peers.insert(from, Peer::Ignored { until: now + REMEMBER });
    }
}

/// A real server on loopback: headroom's and stock clients, and peers that misbehave.
#[cfg(test)]
mod tests {
    use super::super::{Server, ServerConfig, ServerHandle};
    use crate::address::Endpoint;
    use crate::iperf2::{parse_udp_report, udp_settings, Amount, UdpSent};
    use crate::throughput::ThroughputSpec;
    use crate::udp_header::{wall_now, UdpHeader};
    use crate::wire::TrafficDirection;
    use std::net::{SocketAddr, UdpSocket};
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    fn serve(token: Option<&str>, max_clients: usize) -> (ServerHandle, SocketAddr, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let cfg = ServerConfig {
            iperf2_port: Some(0),
            token: token.map(Into::into),
            max_clients,
            idle_timeout: Duration::from_millis(500),
            log: Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string())),
            ..ServerConfig::loopback(0)
        };
        let server = Server::bind(cfg).unwrap();
        let at = server.iperf2_addr().unwrap();
        (server.spawn(), at, lines)
    }

    fn wait_for(lines: &Mutex<Vec<String>>, what: &str) -> String {
        let t0 = Instant::now();
        loop {
            if let Some(l) = lines.lock().unwrap().iter().find(|l| l.contains(what)) {
                return l.clone();
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "no log line with {what:?}: {:?}", lines.lock().unwrap());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `key=value` of a log line.
    fn field<'a>(line: &'a str, key: &str) -> &'a str {
        line.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('=')).unwrap_or_default()
    }

    /// A client's datagram as iperf 2.1.8 writes it.
    fn datagram(id: i64, len: usize) -> Vec<u8> {
        let header =
            UdpHeader::Iperf2 { settings: udp_settings(1, 5001, len, 1e6, Amount::Time(Duration::from_secs(1))) };
        let mut d = vec![7u8; len];
        header.write(&mut d, id as u64, wall_now());
        d
    }

    fn client(at: SocketAddr) -> UdpSocket {
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.connect(at).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        c
    }

    #[test]
    fn headroom_and_stock_udp_clients_get_the_report_serve_logs() {
        let (_server, at, lines) = serve(None, 4);
        let target = Endpoint {
            host: "127.0.0.1".into(),
            port: at.port(),
            token: None,
            timeout: Duration::from_secs(2),
            source: Default::default(),
        };
        let spec = ThroughputSpec {
            direction: TrafficDirection::Upload,
            streams: 1,
            duration: Duration::from_millis(500),
            bytes: None,
            len: 1448,
            udp_rate: Some(4e6),
            rtt_under_load: false,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
            sample_interval: None,
        };
        let r = crate::throughput::iperf2::throughput(&target, &spec, &AtomicBool::new(false), &mut |_| {}).unwrap();
        let line = wait_for(&lines, "test=udp");
        assert!(line.ends_with("status=ok") && line.contains("protocol=iperf2"), "{line}");
        assert!(r.error.is_none() && r.missing_report.is_none(), "{:?} {:?}", r.error, r.missing_report);
        let u = r.udp_recv.unwrap();
        assert_eq!(field(&line, "bytes"), r.upload_bytes.to_string(), "{line}");
        assert_eq!(field(&line, "lost"), format!("{}/{}", u.lost, u.packets), "{line}");
        assert!(u.packets > 100 && u.lost == 0, "{u:?}");
        if std::process::Command::new("iperf").arg("-v").output().is_err() {
            eprintln!(
                "SKIPPED stock iperf -c -u against serve: `iperf` is not installed (run scripts/install-deps.sh)"
            );
            return;
        }
        let out = std::process::Command::new("iperf")
            .args(["-c", "127.0.0.1", "-u", "-p", &at.port().to_string(), "-b", "2M", "-t", "1"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let report = text.lines().skip_while(|l| !l.contains("Server Report")).nth(2).unwrap_or_default();
        let served = lines.lock().unwrap().iter().filter(|l| l.contains("test=udp")).nth(1).cloned();
        let served = served.unwrap_or_else(|| wait_for(&lines, "nothing"));
        eprintln!("iperf -c -u: {report:?}; serve: {served}");
        assert!(served.ends_with("status=ok"), "{served}");
        assert!(
            report.contains(&format!(" {} (", field(&served, "lost"))),
            "iperf printed {report:?}; serve logged {served}"
        );
        assert!(!text.contains("did not receive ack"), "{text}");
    }

    #[test]
    fn hostile_udp_peers_are_refused_in_one_line_and_slots_come_back() {
        let (_server, at, lines) = serve(Some("a-token-of-some-length"), 2);
        // Not an iperf2 datagram; a UDP test asking the server to send.
        client(at).send(&[0x55; 200]).unwrap();
        wait_for(&lines, "protocol=unknown refused on the iperf2 UDP port");
        let mut reverse = datagram(1, 500);
        reverse[48..52].copy_from_slice(&0x0400_0000u32.to_be_bytes());
        client(at).send(&reverse).unwrap();
        wait_for(&lines, "protocol=iperf2 refused: a UDP test where the server sends");
        // A flood of forged sources: a few lines, the rest summed up.
        for _ in 0..40 {
            client(at).send(&[0x55; 100]).unwrap();
        }
        let summed = wait_for(&lines, "more UDP peers (not logged one by one)");
        let refused = lines.lock().unwrap().iter().filter(|l| l.contains("refused on the iperf2 UDP port")).count();
        assert!(refused <= 6, "{refused} lines; {summed}");
        // A stream that holds the one slot iperf2 clients may have, then goes silent.
        let silent = client(at);
        for id in 1..=3 {
            silent.send(&datagram(id, 500)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        client(at).send(&datagram(1, 500)).unwrap();
        wait_for(&lines, "refused: busy (2 clients)");
        let aborted = wait_for(&lines, "status=aborted: no datagram for");
        assert!(aborted.contains("lost=0/3"), "{aborted}");
        // The slot is free again: a short stream whose final datagram leaves room for 2.0's report only.
        let c = client(at);
        c.send(&datagram(1, 92)).unwrap();
        c.send(&datagram(-2, 92)).unwrap();
        let mut reply = [0u8; 2048];
        let n = c.recv(&mut reply).unwrap();
        assert!(n <= 92, "a reply of {n} bytes to a 92-byte datagram");
        let sent = UdpSent { datagrams: 2, bytes: 184, window: Duration::from_secs(1) };
        let r = parse_udp_report(&reply[..n], &sent).unwrap();
        assert_eq!((r.datagrams, r.lost, r.bytes), (2, 0, 184));
        // The final datagram again (its report was lost): the same report.
        c.send(&datagram(-2, 92)).unwrap();
        let again = c.recv(&mut reply).unwrap();
        assert_eq!(parse_udp_report(&reply[..again], &sent).unwrap(), r);
    }
}
