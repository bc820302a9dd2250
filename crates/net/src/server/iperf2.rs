//! The server's iperf2 side (`serve --iperf2`), for stock `iperf -c`
//! clients on a port of their own: its accept loop, the settings header
//! read inside the pre-auth deadline, the streams of one test gathered by
//! their identical headers, uploads counted, `-R` answered and
//! `--full-duplex` both at once on each stream, refusals in
//! one log line with a clean close. iperf2 peers are unauthenticated: they
//! take slots as iperf3 clients do (never the one kept for token holders).
//! Reads the header through [`crate::iperf2`]; knows nothing of the other
//! protocols.

use super::admission::{DeadlineStream, PendingTicket};
use super::registry::{collect, unauthenticated_slots, Iperf2Key, Shared};
use super::test_watch::{log_test, log_test_both_ways};
use super::{ServerConfig, ServerSetting};
use crate::datapath::{tcp_streams, StreamParams, StreamSet};
use crate::iperf2::{header_len, parse_header, Amount, Ask, Refusal, MAX_HEADER_LEN};
use crate::socket::{wait_readable, DEFAULT_TCP_LEN, POLL};
use crate::wire::TrafficDirection;
use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a refused peer's data is read after the server's FIN, so the
/// close is an orderly one rather than a reset, and no longer.
const REFUSAL_DRAIN: Duration = Duration::from_secs(1);

/// Accepts iperf2 clients on their own listener until the server stops.
pub(super) fn accept_loop(listener: &TcpListener, s: &Arc<Shared>) {
    while !s.stop.load(Ordering::Relaxed) {
        if !wait_readable(listener, POLL) {
            continue;
        }
        let Ok((conn, peer)) = listener.accept() else { continue };
        let Some(mut ticket) = s.admission.admit(&conn, peer.ip(), super::preauth_deadline(s)) else { continue };
        let s = s.clone();
        let _ = std::thread::Builder::new()
            .name("serve-iperf2".into())
            .spawn(move || handle_stream(conn, peer, &s, &mut ticket));
    }
}

/// Reads the header of a new connection inside the pre-auth deadline.
fn read_header(conn: &TcpStream, deadline: Instant) -> Result<Vec<u8>, Refusal> {
    let mut dl = DeadlineStream { conn, deadline };
    let mut header = vec![0u8; 4];
    let short = |e: std::io::Error| Refusal::NotIperf2(format!("no header: {e}"));
    dl.read_exact(&mut header).map_err(short)?;
    let len = header_len(u32::from_be_bytes([header[0], header[1], header[2], header[3]]))?;
    debug_assert!(len <= MAX_HEADER_LEN);
    header.resize(len, 0);
    dl.read_exact(&mut header[4..]).map_err(short)?;
    Ok(header)
}

fn handle_stream(conn: TcpStream, peer: SocketAddr, s: &Arc<Shared>, ticket: &mut PendingTicket) {
    let _ = conn.set_write_timeout(Some(s.cfg.idle_timeout));
    let asked = read_header(&conn, ticket.deadline).and_then(|h| parse_header(&h).map(|ask| (h, ask)));
    let (header, ask) = match asked {
        Ok(a) => a,
        Err(Refusal::NotIperf2(why)) => {
            (s.cfg.log)(&format!("peer={peer} protocol=unknown refused on the iperf2 port: {why}"));
            return close_cleanly(conn);
        }
        Err(Refusal::Unsupported(what)) => return refuse(conn, peer, s, &what),
    };
    if let Err(what) = within_limits(&ask, &s.cfg) {
        return refuse(conn, peer, s, &what);
    }
    let key: Iperf2Key = (peer.ip(), header.clone());
    let header_bytes = header.len() as u64;
    // One lock for the look-up and the registration: two streams of a test
    // never both become its first.
    let (tx, rx) = sync_channel(ask.streams as usize);
    {
        let mut tests = s.iperf2_tests.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(first) = tests.get(&key) {
            ticket.release();
            let _ = first.try_send((conn, header_bytes));
            return;
        }
        tests.insert(key.clone(), tx);
    }
    let registered = Unregister { s, key };
    let cap = unauthenticated_slots(&s.cfg);
    let Some(_slot) = s.admission.take_slot(peer.ip(), cap) else {
        drop(registered);
        return refuse(conn, peer, s, &format!("busy ({} clients)", s.cfg.max_clients));
    };
    ticket.release();
    let started = Instant::now();
    let others = collect(&rx, ask.streams as usize - 1, s.cfg.idle_timeout);
    drop(registered);
    let Some(others) = others else {
        return refuse(conn, peer, s, &format!("{} streams asked, not all arrived", ask.streams));
    };
    let mut socks = vec![(conn, header_bytes)];
    socks.extend(others);
    run_test(socks, peer, &ask, s, started);
    s.tests_done.fetch_add(1, Ordering::SeqCst);
}

/// Removes a test's place in the table of tests gathering streams, whatever happened.
struct Unregister<'a> {
    s: &'a Shared,
    key: Iperf2Key,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.s.iperf2_tests.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
    }
}

/// A time longer than --max-duration is refused; a byte count is not, since
/// the test is cut at --max-duration whatever it asked.
fn within_limits(ask: &Ask, cfg: &ServerConfig) -> Result<(), String> {
    match ask.amount {
        Amount::Time(t) if t > cfg.max_duration => Err(format!(
            "a {:.0} s test (-t), over {} {:.0} s",
            t.as_secs_f64(),
            cfg.spell(ServerSetting::MaxDuration),
            cfg.max_duration.as_secs_f64()
        )),
        _ => Ok(()),
    }
}

/// Why a test ran short: the server's duration limit cut it (TCP and UDP).
pub(super) fn cut_at_limit(cfg: &ServerConfig) -> String {
    format!("cut at {} {:.0}s", cfg.spell(ServerSetting::MaxDuration), cfg.max_duration.as_secs_f64())
}

/// Runs the test on its gathered streams and logs it: an upload until the
/// client closes every stream, `-R` for the time or bytes asked, and
/// `--full-duplex` both at once on each stream: this side sends for what
/// was asked, then half-closes, and the test ends once the client closed its
/// side too.
fn run_test(socks: Vec<(TcpStream, u64)>, peer: SocketAddr, ask: &Ask, s: &Shared, started: Instant) {
    let headers: u64 = socks.iter().map(|(_, h)| h).sum();
    let server_sends = ask.direction != TrafficDirection::Upload;
    let both_ways = ask.direction == TrafficDirection::Bidir;
    let limit = match ask.amount {
        Amount::Bytes(b) if server_sends => Some(b),
        _ => None,
    };
    let params = StreamParams {
        len: DEFAULT_TCP_LEN,
        limit,
        stall: s.cfg.idle_timeout,
        udp_rate: 0.0,
        window: None,
        skip_rx_copy: false,
        zerocopy: false,
        udp_offload: false,
    };
    let conns = socks.into_iter().map(|(c, _)| c).collect();
    let streams = match tcp_streams(conns, ask.direction == TrafficDirection::Download, both_ways) {
        Ok(streams) => streams,
        Err(e) => return log_outcome(s, peer, ask, 0.0, (0, 0), &format!("aborted: {e}")),
    };
    let mut set = StreamSet::start_tcp(streams, params);
    let sending_for = match ask.amount {
        Amount::Time(t) if server_sends => t,
        _ => s.cfg.max_duration,
    };
    let cut = loop {
        if set.all_finished() {
            break None;
        }
        if s.stop.load(Ordering::Relaxed) {
            break Some("server shutting down".to_string());
        }
        let elapsed = started.elapsed();
        if server_sends && elapsed >= sending_for {
            set.stop_senders();
            // A time asked was within the limit; a byte count may not be.
            if matches!(ask.amount, Amount::Bytes(_)) {
                break Some(cut_at_limit(&s.cfg));
            }
            // -R is done once sent; both ways, once the client closed too (all_finished).
            if !both_ways && set.senders_finished() {
                break None;
            }
        }
        if elapsed > s.cfg.max_duration + Duration::from_secs(2) {
            break Some(cut_at_limit(&s.cfg));
        }
        std::thread::sleep(POLL.min(Duration::from_millis(10)));
    };
    let duration = started.elapsed().as_secs_f64();
    let error = set.error();
    let outcomes = set.finish(Duration::ZERO);
    let moved = |sending: bool| outcomes.iter().filter(|o| o.sending == sending).map(|o| o.bytes).sum::<u64>();
    // The headers count as received data, as the client counts them.
    let received = if ask.direction == TrafficDirection::Download { 0 } else { moved(false) + headers };
    // With no control connection, a client that has what it wanted says so
    // by closing, while this side may still be sending: only a stall ends
    // its test badly.
    let error = error.filter(|e| !server_sends || e.starts_with("no data"));
    let status = match (cut, error) {
        (Some(why), _) => format!("aborted: {why}"),
        (None, Some(e)) => format!("aborted: {e}"),
        (None, None) => "ok".into(),
    };
    log_outcome(s, peer, ask, duration, (received, moved(true)), &status);
}

/// The test's log line: one way, the bytes that moved; both ways, each way's too.
fn log_outcome(s: &Shared, peer: SocketAddr, ask: &Ask, duration: f64, (received, sent): (u64, u64), status: &str) {
    match ask.direction {
        TrafficDirection::Bidir => {
            log_test_both_ways(s, peer, "iperf2", ask.streams, duration, (received, sent), status)
        }
        one_way => {
            let test = one_way.test_name(false);
            log_test(s, peer, "iperf2", test.as_str(), ask.streams, duration, received + sent, status)
        }
    }
}

/// Logs what was asked and closes the connection cleanly.
fn refuse(conn: TcpStream, peer: SocketAddr, s: &Shared, what: &str) {
    (s.cfg.log)(&format!("peer={peer} protocol=iperf2 refused: {what}"));
    close_cleanly(conn);
}

/// Sends FIN, then reads what the peer still sends for a moment: closing
/// with unread data would reset the connection instead.
fn close_cleanly(mut conn: TcpStream) {
    let _ = conn.shutdown(Shutdown::Write);
    let until = Instant::now() + REFUSAL_DRAIN;
    let mut sink = [0u8; 16 * 1024];
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        let _ = conn.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match conn.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::registry::test_support::{shared, tcp_pair};
    use super::*;

    #[test]
    fn a_long_time_is_refused_and_a_byte_count_is_cut_instead() {
        let ask = |amount| Ask { streams: 1, direction: TrafficDirection::Download, amount };
        let cfg = ServerConfig { max_duration: Duration::from_secs(600), ..ServerConfig::loopback(0) };
        let max = cfg.max_duration;
        assert!(within_limits(&ask(Amount::Time(Duration::from_secs(1_000_000))), &cfg).unwrap_err().contains("-t"));
        assert!(within_limits(&ask(Amount::Time(max)), &cfg).is_ok());
        assert!(within_limits(&ask(Amount::Bytes(i32::MAX as u64)), &cfg).is_ok());
    }

    #[test]
    fn a_reverse_test_sends_the_bytes_asked_and_closes() {
        let s = shared(Duration::from_secs(2));
        let (mut client, server) = tcp_pair();
        let ask = Ask { streams: 1, direction: TrafficDirection::Download, amount: Amount::Bytes(300_000) };
        let peer = client.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut got = Vec::new();
            client.read_to_end(&mut got).unwrap();
            got.len()
        });
        run_test(vec![(server, 60)], peer, &ask, &s, Instant::now());
        assert_eq!(t.join().unwrap(), 300_000);
    }
}

/// A real server on loopback, and peers that misbehave.
#[cfg(test)]
mod server_tests {
    use super::super::{test_flags, Server, ServerConfig, ServerHandle};
    use crate::iperf2::{client_header, Amount};
    use crate::wire::TrafficDirection;
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
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
            spelling: test_flags,
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

    /// The server's side ends with FIN (read gives 0), not a reset, and soon.
    fn closed_cleanly(mut c: TcpStream) {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(c.read(&mut buf).unwrap(), 0, "the server closes with FIN");
    }

    fn header(streams: u32, seconds: u64) -> [u8; 60] {
        client_header(streams, 5001, Amount::Time(Duration::from_secs(seconds)), TrafficDirection::Upload)
    }

    #[test]
    fn an_upload_of_several_streams_is_one_test_with_every_byte() {
        let (_server, at, lines) = serve(None, 4);
        let mut streams: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(at).unwrap()).collect();
        for s in &mut streams {
            s.write_all(&header(3, 2)).unwrap();
            s.write_all(&vec![7u8; 1 << 20]).unwrap();
        }
        drop(streams);
        let line = wait_for(&lines, "protocol=iperf2 test=");
        assert!(line.contains("test=tcp streams=3"), "{line}");
        assert!(line.contains(&format!("bytes={} ", 3 * (60 + (1 << 20)))), "{line}");
        assert!(line.ends_with("status=ok"), "{line}");
    }

    #[test]
    fn a_full_duplex_test_sends_and_receives_on_every_stream_at_once() {
        let (_server, at, lines) = serve(None, 4);
        let opening = client_header(2, 5001, Amount::Bytes(700_000), TrafficDirection::Bidir);
        let streams: Vec<_> = (0..2)
            .map(|i| {
                let mut c = TcpStream::connect(at).unwrap();
                c.write_all(&opening).unwrap();
                let mut writer = c.try_clone().unwrap();
                // Writes and reads at once: a server that sent only after reading would stall here.
                let w = std::thread::spawn(move || {
                    writer.write_all(&vec![i as u8; 500_000]).unwrap();
                    writer.shutdown(std::net::Shutdown::Write).unwrap();
                });
                let r = std::thread::spawn(move || {
                    let mut got = Vec::new();
                    c.read_to_end(&mut got).unwrap();
                    got.len()
                });
                (w, r)
            })
            .collect();
        for (w, r) in streams {
            w.join().unwrap();
            assert_eq!(r.join().unwrap(), 700_000, "the bytes the header asked, on each stream");
        }
        let line = wait_for(&lines, "protocol=iperf2 test=");
        assert!(line.contains("test=tcp_bidir streams=2"), "{line}");
        let received = 2 * (60 + 500_000);
        assert!(line.contains(&format!(" received={received} ")), "{line}");
        assert!(
            line.contains(" sent=1400000 ") && line.contains(&format!("bytes={} ", received + 1_400_000)),
            "{line}"
        );
        assert!(line.ends_with("status=ok"), "{line}");
    }

    #[test]
    fn hostile_peers_are_refused_in_one_line_and_closed_cleanly() {
        let (_server, at, lines) = serve(None, 4);
        // headroom's greeting on the wrong port.
        let mut c = TcpStream::connect(at).unwrap();
        c.write_all(b"HEADROOM and more").unwrap();
        closed_cleanly(c);
        wait_for(&lines, "protocol=unknown refused on the iperf2 port: first word 48454144");
        // -d, as 2.1.8 sends it, with data behind it: refused by name, FIN.
        let mut c = TcpStream::connect(at).unwrap();
        let mut dual = header(1, 10);
        dual[..4].copy_from_slice(&0xc001_0079u32.to_be_bytes());
        c.write_all(&dual).unwrap();
        c.write_all(&[1u8; 100_000]).unwrap();
        closed_cleanly(c);
        wait_for(&lines, "protocol=iperf2 refused: a dual test (-d)");
        // A test far longer than --max-duration.
        let mut c = TcpStream::connect(at).unwrap();
        let long = Amount::Time(Duration::from_secs(20_000_000));
        c.write_all(&client_header(1, 5001, long, TrafficDirection::Download)).unwrap();
        closed_cleanly(c);
        wait_for(&lines, "over --max-duration");
        // Silent, and half a header: both gone at the pre-auth deadline.
        let silent = TcpStream::connect(at).unwrap();
        let mut half = TcpStream::connect(at).unwrap();
        half.write_all(&header(1, 1)[..30]).unwrap();
        let t0 = Instant::now();
        closed_cleanly(silent);
        closed_cleanly(half);
        assert!(t0.elapsed() < Duration::from_secs(3));
        // Three streams asked, one opened: refused at the idle timeout, its slot free again.
        let mut lone = TcpStream::connect(at).unwrap();
        lone.write_all(&header(3, 1)).unwrap();
        closed_cleanly(lone);
        wait_for(&lines, "3 streams asked, not all arrived");
        let mut ok = TcpStream::connect(at).unwrap();
        ok.write_all(&header(1, 1)).unwrap();
        drop(ok);
        wait_for(&lines, "test=tcp streams=1");
    }

    #[test]
    fn with_a_token_iperf2_clients_leave_a_slot_for_token_holders() {
        let (_server, at, lines) = serve(Some("a-token-of-some-length"), 2);
        // The first test holds the one slot iperf2 clients may have.
        let mut first = TcpStream::connect(at).unwrap();
        first.write_all(&header(1, 5)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let mut second = TcpStream::connect(at).unwrap();
        second.write_all(&header(1, 5)).unwrap();
        closed_cleanly(second);
        wait_for(&lines, "protocol=iperf2 refused: busy (2 clients)");
        drop(first);
    }
}
