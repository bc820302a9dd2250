//! The server's headroom side: challenge-response authentication (failed
//! guesses throttled per source), the session and its idle timeout, test
//! validation against the server's limits, the test itself with its report,
//! and the request/response echo streams of a session.

use super::admission::{DeadlineStream, PendingTicket};
use super::probes::RemotePlan;
use super::registry::{collect, collect_indexed, Registration, SessionInfo, Shared};
use super::test_watch::{log_test, watch_test, Ending};
use super::ServerConfig;
use super::ServerSetting::{MaxClients, MaxDuration, Token};
use crate::datapath::{StreamParams, StreamSet};
use crate::iperf3 as iperf3_wire;
use crate::process_cpu::CpuMeter;
use crate::socket::{wait_readable, POLL};
use crate::udp_header::UdpHeader;
use crate::wire::{self, AuthAnswer, Reply, Request, ServerReport, StreamReport, TrafficDirection};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a fixed UDP transfer's receivers keep reading after the client's
/// End: the datagrams still queued in the kernel or on the wire.
const UDP_FIXED_DRAIN: Duration = Duration::from_secs(1);

/// Echoes fixed-size messages until the client leaves or idles out.
pub(super) fn serve_rr(conn: TcpStream, size: usize, busy_poll: bool, session: &SessionInfo, s: &Shared) {
    let _ = conn.set_nodelay(true);
    let idle = s.cfg.idle_timeout;
    if busy_poll {
        // Say what this end does before the first echo (the client records it).
        let end = crate::busy_poll::prepare(&conn);
        if crate::busy_poll::write_all(&conn, &[end.to_byte()], idle).is_err() {
            return;
        }
    }
    // A client silent for the idle timeout is dropped by the watcher, not by
    // a socket timeout, which would arm a kernel timer in every blocked read.
    let _ = conn.set_read_timeout(None);
    crate::stall_watch::guarded(&conn, idle, &s.stop, |progress| {
        let mut conn = &conn;
        let mut buf = vec![0u8; size];
        let start = Instant::now();
        let mut now = start;
        while now.duration_since(start) < s.cfg.max_duration && !s.stop.load(Ordering::Relaxed) {
            let echoed = if busy_poll {
                crate::busy_poll::read_exact(conn, &mut buf, idle)
                    .and_then(|_| crate::busy_poll::write_all(conn, &buf, idle))
            } else {
                conn.read_exact(&mut buf).and_then(|_| conn.write_all(&buf))
            };
            if echoed.is_err() {
                return;
            }
            progress.tick();
            now = Instant::now();
            session.touch_at(now, s);
        }
    });
}

/// Challenge-response: the session secret both ends derive from it when the
/// peer proved it holds the token, None otherwise. A throttled source is
/// refused before it gets a challenge.
fn authenticate(dl: &mut DeadlineStream, peer: SocketAddr, token: &str, s: &Shared) -> Option<wire::SessionKeys> {
    let ip = peer.ip();
    if let Err(throttled) = s.admission.may_authenticate(ip) {
        let secs = throttled.wait.as_secs_f64().ceil();
        let reason = if throttled.server_wide {
            format!("too many failed authentications on this server, from many addresses: try again in {secs:.0} s")
        } else {
            format!(
                "too many failed authentications from {ip}: try again in {secs:.0} s (check {})",
                s.cfg.spell(Token)
            )
        };
        let _ = wire::write_frame(dl, &Reply::Refused { reason });
        return None;
    }
    let nonce = wire::random_nonce();
    if wire::write_frame(dl, &Reply::Challenge { nonce: wire::to_hex(&nonce) }).is_err() {
        return None;
    }
    // No answer (a client without a token hangs up) is not a guess.
    let answer = wire::read_frame::<AuthAnswer>(dl, wire::MAX_HELLO).ok()?;
    let proven = match (wire::from_hex::<{ wire::NONCE_LEN }>(&answer.nonce), wire::from_hex::<32>(&answer.proof)) {
        (Some(theirs), Some(proof)) if wire::auth_verify(token, &nonce, &theirs, &proof) => {
            Some(wire::SessionKeys::derived(token, &nonce, &theirs))
        }
        _ => None,
    };
    if proven.is_some() {
        s.admission.proved(ip);
    } else {
        let reason = format!("wrong token ({})", s.cfg.spell(Token));
        let _ = wire::write_frame(dl, &Reply::Refused { reason });
        if let Some(line) = s.admission.failed_authentication(ip) {
            (s.cfg.log)(&format!(
                "{line} (failures are throttled per address and server-wide, and logged every {:.0}s)",
                super::admission::FAILURE_LOG_EVERY.as_secs_f64()
            ));
        }
    }
    proven
}

pub(super) fn serve_headroom(mut conn: TcpStream, peer: SocketAddr, s: &Arc<Shared>, ticket: &mut PendingTicket) {
    let derived = match &s.cfg.token {
        Some(token) => {
            match authenticate(&mut DeadlineStream { conn: &conn, deadline: ticket.deadline }, peer, token, s) {
                Some(keys) => Some(keys),
                None => return,
            }
        }
        None => None,
    };
    ticket.release();
    let Some(_slot) = s.admission.take_slot(peer.ip(), s.cfg.max_clients) else {
        let _ = wire::write_frame(
            &mut conn,
            &Reply::Refused {
                reason: format!("server busy: {} clients already (its {})", s.cfg.max_clients, s.cfg.spell(MaxClients)),
            },
        );
        (s.cfg.log)(&format!("peer={peer} protocol=headroom refused: busy"));
        return;
    };
    // With a token the secret stays unsaid (both ends derived it); without
    // one there is nothing to keep secret, and the client learns it here.
    let (keys, said) = match derived {
        Some(keys) => (keys, String::new()),
        None => {
            let keys = wire::SessionKeys::random();
            (keys, keys.secret_hex())
        }
    };
    let key = keys.id();
    let info = s.open_session(keys, peer.ip());
    struct SessionGuard<'a>(&'a Shared, [u8; wire::KEY_LEN]);
    impl Drop for SessionGuard<'_> {
        fn drop(&mut self) {
            self.0.sessions.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.1);
        }
    }
    let _session = SessionGuard(s, key);
    let _ = conn.set_nodelay(true);
    let welcome = Reply::Welcome {
        session: said,
        server_version: env!("CARGO_PKG_VERSION").into(),
        max_duration_ms: s.cfg.max_duration.as_millis() as u64,
        max_streams: iperf3_wire::MAX_STREAMS,
        probes: s.cfg.probes.is_some(),
    };
    if wire::write_frame(&mut conn, &welcome).is_err() {
        return;
    }
    let mut test_id = 0u32;
    // Dropped with the session: its engines and test files go with it.
    let mut remote = RemotePlan::default();
    loop {
        // Between tests a session may be silent for at most the idle timeout;
        // its RR and echo traffic counts as activity.
        if !wait_readable(&conn, POLL) {
            let idle_ms =
                (s.epoch.elapsed().as_millis() as u64).saturating_sub(info.last_activity_ms.load(Ordering::Relaxed));
            // A client whose remote plan is prepared (a soak between its turns on
            // this server) may be silent for up to --max-duration.
            let allowed =
                if remote.is_prepared() { s.cfg.max_duration.max(s.cfg.idle_timeout) } else { s.cfg.idle_timeout };
            if Duration::from_millis(idle_ms) > allowed || s.stop.load(Ordering::Relaxed) {
                (s.cfg.log)(&format!(
                    "peer={peer} protocol=headroom session dropped: idle for {:.1}s",
                    idle_ms as f64 / 1e3
                ));
                return;
            }
            continue;
        }
        let _ = conn.set_read_timeout(Some(s.cfg.idle_timeout));
        // A remote plan (a disk sweep is ~60 KiB of requests) may be larger than a test request.
        let limit = if s.cfg.probes.is_some() { wire::MAX_PLAN_FRAME } else { wire::MAX_FRAME };
        let req: Request = match wire::read_frame(&mut conn, limit) {
            Ok(r) => r,
            Err(_) => return,
        };
        info.touch(s);
        match req {
            Request::Bye => return,
            // A late End after the server ended a test itself: already answered.
            Request::End => {}
            Request::Clock => {
                let now = Reply::Clock { unix: headroom_runner::unix_now() };
                if wire::write_frame(&mut conn, &now).is_err() {
                    return;
                }
            }
            probe @ (Request::Inventory
            | Request::Plan { .. }
            | Request::Run { .. }
            | Request::Finish
            | Request::CpuWatch { .. }
            | Request::CpuWatchEnd) => {
                if remote.answer(&mut conn, probe, &info, s).is_err() {
                    return;
                }
            }
            flush @ (Request::FlushBegin { .. } | Request::FlushAck { .. } | Request::FlushList { .. }) => {
                if super::flushcheck::answer(&mut conn, flush, s).is_err() {
                    return;
                }
            }
            Request::Test(asked) => {
                test_id += 1;
                if let Err(reason) = asked.validate(&s.cfg) {
                    let _ = wire::write_frame(&mut conn, &Reply::Refused { reason });
                    continue;
                }
                // The test's data and control messages count as activity, so a
                // client that went silent mid-test is idle since its last byte.
                let r = headroom_test(&mut conn, peer, key, test_id, &asked, &info, s);
                s.tests_done.fetch_add(1, Ordering::SeqCst);
                if r.is_err() {
                    return;
                }
            }
        }
    }
}

/// A test as a client asked for it, not yet trusted.
type TestAsked = wire::TestRequest;

impl TestAsked {
    /// Refuses what exceeds this server's limits, with the reason the client prints.
    fn validate(&self, cfg: &ServerConfig) -> Result<(), String> {
        crate::throughput::check_shape(self.udp, self.streams, self.len as usize, self.rate_bits, self.window)?;
        if Duration::from_millis(self.duration_ms) > cfg.max_duration {
            return Err(format!(
                "a {:.0} s test exceeds this server's {} of {:.0} s",
                self.duration_ms as f64 / 1000.0,
                cfg.spell(MaxDuration),
                cfg.max_duration.as_secs_f64()
            ));
        }
        Ok(())
    }
}

fn headroom_test(
    conn: &mut TcpStream,
    peer: SocketAddr,
    key: [u8; wire::KEY_LEN],
    test_id: u32,
    asked: &TestAsked,
    session: &SessionInfo,
    s: &Arc<Shared>,
) -> io::Result<()> {
    let TestAsked {
        udp, direction, streams, bytes, len, rate_bits, window, skip_rx_copy, zerocopy, udp_offload, ..
    } = *asked;
    let n = if direction == TrafficDirection::Bidir { streams * 2 } else { streams } as usize;
    let (tx, rx) = sync_channel::<(u32, TcpStream)>(n);
    let (utx, urx) = sync_channel::<UdpSocket>(n);
    let registration = Registration::headroom(s, key, test_id, tx, udp.then(|| (peer.ip(), utx)));
    wire::write_frame(conn, &Reply::TestReady { test: test_id })?;
    let server_sends = |i: usize| match direction {
        TrafficDirection::Upload => false,
        TrafficDirection::Download => true,
        TrafficDirection::Bidir => i >= streams as usize,
    };
    let sp = StreamParams {
        len: len as usize,
        limit: bytes,
        stall: s.cfg.idle_timeout,
        udp_rate: rate_bits.unwrap_or(1e6) / streams as f64,
        window,
        skip_rx_copy,
        zerocopy,
        udp_offload,
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
        collect_indexed(&rx, n, s.cfg.idle_timeout).map(|socks| {
            StreamSet::start_tcp(socks.into_iter().enumerate().map(|(i, t)| (t, server_sends(i))).collect(), sp)
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
        // and the test lasted until the last byte arrived. UDP has no end of
        // stream: a receiver stops at its byte count, and when datagrams were
        // lost, what is still in flight gets a moment after the client's End.
        let o = set.finish(if udp { UDP_FIXED_DRAIN } else { s.cfg.idle_timeout });
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
        test.as_str(),
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
                buffers: o.buffers,
                rx_copy_skipped: o.rx_copy_skipped,
                sent_by_reference: o.sent_by_reference,
                udp_offloaded: o.udp_offloaded,
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

#[cfg(test)]
mod tests {
    use super::super::registry::test_support::{shared, tcp_pair};
    use super::*;

    fn asked() -> TestAsked {
        TestAsked {
            udp: false,
            direction: TrafficDirection::Upload,
            streams: 1,
            duration_ms: 1000,
            bytes: None,
            len: 1000,
            rate_bits: None,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
        }
    }

    #[test]
    fn hostile_test_requests_are_refused_with_a_reason() {
        let cfg = ServerConfig { spelling: super::super::test_flags, ..ServerConfig::loopback(0) };
        assert!(asked().validate(&cfg).is_ok());
        let udp = |rate_bits| TestAsked { udp: true, rate_bits, ..asked() };
        for (bad, says) in [
            (TestAsked { streams: 0, ..asked() }, "allows 1 to 128"),
            (TestAsked { streams: u32::MAX, ..asked() }, "allows 1 to 128"),
            (TestAsked { duration_ms: u64::MAX, ..asked() }, "--max-duration"),
            (TestAsked { len: 0, ..asked() }, "out of range"),
            (TestAsked { len: u32::MAX, ..asked() }, "out of range"),
            (TestAsked { len: 70_000, ..udp(Some(1e6)) }, "out of range"),
            (udp(None), "rate"),
            (udp(Some(f64::NAN)), "rate"),
            (udp(Some(f64::INFINITY)), "rate"),
            (udp(Some(-1.0)), "rate"),
            (udp(Some(1e12)), "rate"),
            (TestAsked { window: Some(0), ..asked() }, "window"),
            (TestAsked { window: Some(u32::MAX), ..asked() }, "window"),
        ] {
            let e = bad.validate(&cfg).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn rr_echoes_and_a_peer_silent_mid_message_frees_its_thread() {
        let s = shared(Duration::from_millis(300));
        let info = s.open_session(wire::SessionKeys::random(), [127, 0, 0, 1].into());
        let (mut client, server) = tcp_pair();
        let s2 = s.clone();
        let rr = std::thread::spawn(move || serve_rr(server, 4, false, &info, &s2));
        client.write_all(b"ping").unwrap();
        let mut back = [0u8; 4];
        client.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"ping");
        client.write_all(b"pi").unwrap(); // half a message, then silence
        let t0 = Instant::now();
        while !rr.is_finished() {
            assert!(t0.elapsed() < Duration::from_secs(5), "serve_rr outlived the idle timeout");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
