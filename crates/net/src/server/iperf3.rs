//! The server's iperf3 side, for stock `iperf3 -c` clients: slots (one
//! stays for token holders), the parameter exchange inside the pre-auth
//! deadline, refusals with iperf3's own error codes, the test, and the
//! results document a stock client prints.

use super::admission::{DeadlineStream, PendingTicket};
use super::registry::{collect, unauthenticated_slots, Registration, Shared};
use super::test_watch::{log_test, log_test_with, watch_test, Ending};
use super::ServerSetting;
use crate::datapath::{StreamOutcome, StreamParams, StreamSet};
use crate::iperf3 as iperf3_wire;
use crate::iperf3::Params;
use crate::process_cpu::{CpuMeter, CpuUse};
use crate::udp_header::UdpHeader;
use crate::wire::TrafficDirection;
use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A new iperf3 control connection. The parameter exchange is part of the
/// pre-auth phase (same deadline, no slot): a peer that never completes it
/// holds nothing a paying client needs.
pub(super) fn serve_iperf3(
    mut conn: TcpStream,
    peer: SocketAddr,
    cookie: [u8; iperf3_wire::COOKIE_LEN],
    s: &Arc<Shared>,
    ticket: &mut PendingTicket,
) {
    let busy = |conn: &mut TcpStream| {
        let _ = iperf3_wire::write_state(conn, iperf3_wire::ACCESS_DENIED);
        (s.cfg.log)(&format!("peer={peer} protocol=iperf3 refused: busy ({} clients)", s.cfg.max_clients));
    };
    if !s.cfg.allow_iperf3 {
        let _ = iperf3_wire::write_state(&mut conn, iperf3_wire::ACCESS_DENIED);
        (s.cfg.log)(&format!(
            "peer={peer} protocol=iperf3 refused: iperf3 clients are not served (start with {})",
            s.cfg.spell(ServerSetting::Iperf3)
        ));
        return;
    }
    let cap = unauthenticated_slots(&s.cfg);
    // Busy now: say so at once, as a stock server does, rather than after the parameters.
    if s.admission.slots_held() >= cap {
        return busy(&mut conn);
    }
    let _ = conn.set_nodelay(true);
    let mut dl = DeadlineStream { conn: &conn, deadline: ticket.deadline };
    if iperf3_wire::write_state(&mut dl, iperf3_wire::PARAM_EXCHANGE).is_err() {
        return;
    }
    let Ok(params) = iperf3_wire::read_json(&mut dl, iperf3_wire::MAX_PARAMS) else { return };
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
    cookie: [u8; iperf3_wire::COOKIE_LEN],
    params: &serde_json::Value,
    s: &Arc<Shared>,
) -> Result<(), String> {
    let p = match Params::from_json(params) {
        Ok(p) if Duration::from_secs(p.time_s) <= s.cfg.max_duration => p,
        Ok(p) => {
            let limit = s.cfg.spell(ServerSetting::MaxDuration);
            return Err(refuse_iperf3(conn, IE_DURATION, format!("{} s test exceeds {limit}", p.time_s)));
        }
        Err(e) if e.contains("parallel") => return Err(refuse_iperf3(conn, IE_NUM_STREAMS, e)),
        Err(e) => return Err(refuse_iperf3(conn, IE_BLOCK_SIZE, e)),
    };
    let n = p.total_streams() as usize;
    let (tx, rx) = sync_channel::<(u64, TcpStream)>(n);
    let (utx, urx) = sync_channel::<UdpSocket>(n);
    let _registration = Registration::iperf3(s, cookie, tx, p.udp.then(|| (peer.ip(), utx)));
    iperf3_wire::write_state(conn, iperf3_wire::CREATE_STREAMS).map_err(|e| e.to_string())?;
    // Stream roles by arrival order: with --bidir the client's sending streams come first.
    let server_sends = |i: usize| if p.bidirectional { i >= p.parallel as usize } else { p.reverse };
    let sp = StreamParams {
        len: p.len as usize,
        limit: p.bytes_per_stream(),
        stall: s.cfg.idle_timeout,
        udp_rate: p.bandwidth as f64,
        window: p.window,
        skip_rx_copy: p.skip_rx_copy,
        zerocopy: p.zerocopy,
        udp_offload: p.gsro,
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
    iperf3_wire::write_state(conn, iperf3_wire::TEST_START).map_err(|e| e.to_string())?;
    iperf3_wire::write_state(conn, iperf3_wire::TEST_RUNNING).map_err(|e| e.to_string())?;
    let ending = watch_test(conn, &set, s, started, &|| {}, |c| {
        iperf3_wire::read_state(c).map(|st| st == iperf3_wire::TEST_END)
    });
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
    let test = TrafficDirection::from_iperf3(&p).test_name(p.udp);
    let bytes: u64 = outcomes.iter().map(|o| o.bytes).sum();
    match ending {
        Ending::Client => {}
        Ending::Gone(e) | Ending::Server(e) => {
            let _ = iperf3_wire::write_state(conn, iperf3_wire::SERVER_TERMINATE);
            log_test(s, peer, "iperf3", test.as_str(), p.parallel, duration, bytes, &format!("aborted: {e}"));
            return Ok(());
        }
    }
    iperf3_wire::write_state(conn, iperf3_wire::EXCHANGE_RESULTS).map_err(|e| e.to_string())?;
    let _client_results =
        iperf3_wire::read_json(conn, iperf3_wire::MAX_RESULTS).map_err(|e| format!("client results: {e}"))?;
    let results = iperf3_results(&outcomes, p.udp, duration, &cpu);
    iperf3_wire::write_json(conn, &results.to_json()).map_err(|e| e.to_string())?;
    iperf3_wire::write_state(conn, iperf3_wire::DISPLAY_RESULTS).map_err(|e| e.to_string())?;
    let _ = iperf3_wire::read_state(conn); // IPERF_DONE; its absence changes nothing

    log_test_with(s, peer, "iperf3", test.as_str(), p.parallel, duration, bytes, &modes_done(&p, &outcomes), "ok");
    Ok(())
}

/// The log's words for the modes a client asked (3.21's --gsro, -Z, 3.19's
/// --skip-rx-copy): whether this end did each, for the streams it concerns.
fn modes_done(p: &Params, outcomes: &[StreamOutcome]) -> String {
    let all =
        |sending: bool, did: fn(&StreamOutcome) -> bool| outcomes.iter().filter(|o| o.sending == sending).all(did);
    let mut words = String::new();
    if p.gsro {
        words += &format!(" udp_offload={}", outcomes.iter().any(|o| o.udp_offloaded));
    }
    if p.zerocopy && outcomes.iter().any(|o| o.sending) {
        words += &format!(" zerocopy={}", all(true, |o| o.sent_by_reference));
    }
    if p.skip_rx_copy && outcomes.iter().any(|o| !o.sending) {
        words += &format!(" skip_rx_copy={}", all(false, |o| o.rx_copy_skipped));
    }
    words
}

fn refuse_iperf3(conn: &mut TcpStream, i_errno: i32, why: String) -> String {
    let mut msg = vec![iperf3_wire::SERVER_ERROR as u8];
    msg.extend_from_slice(&i_errno.to_be_bytes());
    msg.extend_from_slice(&0i32.to_be_bytes());
    let _ = conn.write_all(&msg);
    format!("refused: {why}")
}

impl TrafficDirection {
    fn from_iperf3(p: &Params) -> TrafficDirection {
        if p.bidirectional {
            TrafficDirection::Bidir
        } else if p.reverse {
            TrafficDirection::Download
        } else {
            TrafficDirection::Upload
        }
    }
}

fn iperf3_results(outcomes: &[StreamOutcome], udp: bool, duration: f64, cpu: &CpuUse) -> iperf3_wire::Results {
    let any_tcp_send = !udp && outcomes.iter().any(|o| o.sending);
    iperf3_wire::Results {
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
                iperf3_wire::StreamResult {
                    id: iperf3_wire::stream_id(i),
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

#[cfg(test)]
mod tests {
    use super::super::registry::test_support::{shared, tcp_pair};
    use super::*;
    use crate::stats::UdpRecvStats;
    use std::io::Read;

    #[test]
    fn hostile_parameters_are_refused_with_iperf3_error_codes() {
        let s = shared(Duration::from_millis(300));
        let peer = SocketAddr::from(([127, 0, 0, 1], 1));
        for (params, code) in [
            (serde_json::json!({"tcp": true, "time": 1_000_000_000}), IE_DURATION),
            (serde_json::json!({"tcp": true, "parallel": 10_000}), IE_NUM_STREAMS),
            (serde_json::json!({"tcp": true, "len": -5}), IE_BLOCK_SIZE),
            (serde_json::json!([1, 2, 3]), IE_BLOCK_SIZE),
        ] {
            let (mut client, mut server) = tcp_pair();
            let err = iperf3_session(&mut server, peer, iperf3_wire::new_cookie(), &params, &s).unwrap_err();
            assert!(err.starts_with("refused"), "{params}: {err}");
            let mut answer = [0u8; 9];
            client.read_exact(&mut answer).unwrap();
            assert_eq!(answer[0] as i8, iperf3_wire::SERVER_ERROR);
            assert_eq!(i32::from_be_bytes(answer[1..5].try_into().unwrap()), code, "{params}");
            assert!(s.iperf3_streams.lock().unwrap().is_empty(), "a refused test registers nothing");
        }
    }

    #[test]
    fn results_name_streams_by_iperf3_id_with_receiver_counts() {
        let sent = StreamOutcome { index: 0, sending: true, bytes: 100, packets: 0, ..Default::default() };
        let mut udp = UdpRecvStats::default();
        udp.record(1, 0.0, 0.0, 50);
        udp.record(3, 0.0, 0.0, 50);
        let received = StreamOutcome { index: 1, sending: false, bytes: 100, udp: Some(udp), ..Default::default() };
        let r = iperf3_results(&[sent, received], true, 2.0, &CpuUse::default());
        assert_eq!(r.sender_has_retransmits, 0, "UDP sender: no retransmits to report");
        assert_eq!(r.streams.iter().map(|s| s.id).collect::<Vec<_>>(), [1, 3]);
        assert_eq!((r.streams[1].packets, r.streams[1].errors), (3, 1), "receiver: packets by sequence, one lost");
        assert!(r.streams.iter().all(|s| s.retransmits == -1 && s.end_time == 2.0));
        let tcp = iperf3_results(&[], false, 1.0, &CpuUse::default());
        assert_eq!(tcp.sender_has_retransmits, -1);
    }

    #[test]
    fn direction_from_parameters() {
        let p = |reverse, bidirectional| Params { reverse, bidirectional, ..Default::default() };
        assert_eq!(TrafficDirection::from_iperf3(&p(false, false)), TrafficDirection::Upload);
        assert_eq!(TrafficDirection::from_iperf3(&p(true, false)), TrafficDirection::Download);
        assert_eq!(TrafficDirection::from_iperf3(&p(true, true)), TrafficDirection::Bidir);
    }
}
