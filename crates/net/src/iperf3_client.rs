//! Our client speaking iperf3's control protocol to a stock `iperf3 -s`:
//! TCP with one or several streams, reverse, bidirectional and UDP.
//! Throughput comes from the receiving side's count (the server's results
//! for uploads, ours for downloads), CPU from both sides' results.

use crate::client::{connect, connect_addr, connect_error, Target, ThroughputResult, ThroughputSpec};
use crate::cpu::CpuMeter;
use crate::datapath::{self, Sampler, StreamParams, StreamSet, UdpHeader};
use crate::iperf3::{self, Params, Results, StreamResult};
use crate::wire::Direction;
use crate::NetError;
use headroom_result::Sample;
use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn state_error(target: &Target, state: i8, conn: &mut TcpStream) -> NetError {
    match state {
        iperf3::ACCESS_DENIED => NetError::Refused(format!(
            "{}: the iperf3 server is busy running a test; try again later",
            target.display()
        )),
        iperf3::SERVER_ERROR => {
            let mut codes = [0u8; 8];
            let _ = std::io::Read::read_exact(conn, &mut codes);
            let ie = i32::from_be_bytes(codes[..4].try_into().expect("4 bytes"));
            let errno = i32::from_be_bytes(codes[4..].try_into().expect("4 bytes"));
            NetError::Refused(format!("{}: the iperf3 server reported error {ie} (errno {errno})", target.display()))
        }
        iperf3::SERVER_TERMINATE => NetError::Broken(format!("{}: the iperf3 server ended the test", target.display())),
        other => NetError::Protocol(format!("unexpected iperf3 state {other}")),
    }
}

fn expect_state(conn: &mut TcpStream, target: &Target, want: i8) -> Result<(), NetError> {
    let st = iperf3::read_state(conn).map_err(|e| broken(target, e))?;
    if st == want {
        Ok(())
    } else {
        Err(state_error(target, st, conn))
    }
}

fn broken(target: &Target, e: std::io::Error) -> NetError {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
            NetError::Broken(format!("{}: the iperf3 server closed the connection", target.display()))
        }
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => NetError::Broken(format!(
            "{}: the iperf3 server did not answer within {:.0} s",
            target.display(),
            target.timeout.as_secs_f64()
        )),
        _ => NetError::Broken(format!("{}: {e}", target.display())),
    }
}

fn udp_stream(peer: SocketAddr, timeout: Duration) -> Result<UdpSocket, NetError> {
    let local: SocketAddr =
        if peer.is_ipv4() { "0.0.0.0:0".parse().expect("literal") } else { "[::]:0".parse().expect("literal") };
    let sock = UdpSocket::bind(local)?;
    sock.connect(peer)?;
    sock.set_read_timeout(Some(timeout))?;
    sock.send(iperf3::UDP_HELLO)?;
    let mut buf = [0u8; 64];
    let n = sock
        .recv(&mut buf)
        .map_err(|e| NetError::Broken(format!("no answer to the iperf3 UDP hello from {peer}: {e}")))?;
    if !iperf3::is_udp_reply(&buf[..n]) {
        return Err(NetError::Protocol(format!("unexpected UDP reply {:?}", &buf[..n])));
    }
    Ok(sock)
}

/// Runs one test against a stock iperf3 server.
pub fn throughput(
    target: &Target,
    spec: &ThroughputSpec,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<ThroughputResult, NetError> {
    let (mut conn, peer) = connect(target)?;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(target.timeout))?;
    let cookie = iperf3::new_cookie();
    conn.write_all(&cookie)?;
    expect_state(&mut conn, target, iperf3::PARAM_EXCHANGE)?;
    let udp = spec.udp_rate.is_some();
    let params = Params {
        udp,
        reverse: spec.direction == Direction::Download,
        bidirectional: spec.direction == Direction::Bidir,
        parallel: spec.streams,
        time_s: spec.duration.as_secs().max(1),
        bytes: spec.bytes.unwrap_or(0),
        len: spec.len as u32,
        bandwidth: spec.udp_rate.map_or(0, |r| (r / f64::from(spec.streams)) as u64),
        ..Default::default()
    };
    iperf3::write_json(&mut conn, &params.to_json())?;
    expect_state(&mut conn, target, iperf3::CREATE_STREAMS)?;
    let n = params.total_streams();
    let client_sends = |i: u32| match spec.direction {
        Direction::Upload => true,
        Direction::Download => false,
        Direction::Bidir => i < spec.streams,
    };
    let sp = StreamParams {
        len: spec.len,
        limit: spec.bytes.map(|b| b.div_ceil(u64::from(spec.streams))),
        stall: target.timeout,
        udp_rate: params.bandwidth as f64,
    };
    let mut streams = if udp {
        let mut socks = Vec::new();
        for i in 0..n {
            socks.push((udp_stream(peer, target.timeout)?, client_sends(i)));
        }
        expect_state(&mut conn, target, iperf3::TEST_START)?;
        expect_state(&mut conn, target, iperf3::TEST_RUNNING)?;
        StreamSet::start_udp(socks, UdpHeader::Iperf3 { seq64: false }, sp)
    } else {
        let mut socks = Vec::new();
        for i in 0..n {
            let mut s = connect_addr(&peer, target.timeout).map_err(|e| connect_error(peer, &e))?;
            s.write_all(&cookie)?;
            socks.push((s, client_sends(i)));
        }
        // Wait for TEST_START and TEST_RUNNING before sending, as a stock client does.
        expect_state(&mut conn, target, iperf3::TEST_START)?;
        expect_state(&mut conn, target, iperf3::TEST_RUNNING)?;
        StreamSet::start_tcp(socks, sp)
    };
    let cpu = CpuMeter::start();
    let mut sampler = Sampler::new();
    let mut samples = Vec::new();
    let mut next_tick = Duration::from_secs(1);
    let recv_counters = streams.counters(false);
    let mut error = None;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let elapsed = sampler.elapsed();
        if elapsed >= next_tick {
            let s = sampler.tick(streams.total_bytes());
            on_sample(&s);
            samples.push(s);
            next_tick += Duration::from_secs(1);
        }
        if stop.load(Ordering::Relaxed) || (spec.bytes.is_none() && elapsed >= spec.duration) {
            break;
        }
        if spec.bytes.is_some() && streams.senders_finished() {
            break;
        }
        if let Some(e) = streams.error() {
            error = Some(e);
            break;
        }
        if crate::server::wait_readable(conn.as_raw_fd(), Duration::ZERO) {
            let st = iperf3::read_state(&mut conn).unwrap_or(iperf3::SERVER_TERMINATE);
            error = Some(state_error(target, st, &mut conn).to_string());
            break;
        }
    }
    let duration = sampler.elapsed().as_secs_f64();
    let download_bytes = datapath::total(&recv_counters);
    let cpu_load_local = cpu.load();
    let cpu_local = cpu.stop();
    streams.stop_senders();
    if duration > samples.last().map_or(0.0, |s| s.t_s) + 0.2 {
        let s = sampler.tick(streams.total_bytes());
        on_sample(&s);
        samples.push(s);
    }
    let mut result = ThroughputResult {
        protocol: "iperf3".into(),
        peer: target.display(),
        direction: Some(spec.direction),
        udp,
        streams: spec.streams,
        duration_s: duration,
        download_bytes,
        samples,
        cpu_local,
        cpu_load_local,
        fixed_bytes: spec.bytes,
        rate_bits: spec.udp_rate,
        ..Default::default()
    };
    let server_results = if error.is_none() {
        match finish_exchange(&mut conn, target, &mut streams, duration, &cpu_local, udp) {
            Ok(r) => Some(r),
            Err(e) => {
                error = Some(e.to_string());
                None
            }
        }
    } else {
        None
    };
    let outcomes = streams.finish(Duration::from_millis(200));
    for o in outcomes.iter().filter(|o| o.sending) {
        if let Some(t) = &o.tcp_info {
            result.sender_tcp_info.push(t.clone());
        }
    }
    if udp {
        result.udp_recv = outcomes
            .iter()
            .filter_map(|o| o.udp.as_ref().map(|u| u.summary))
            .reduce(crate::stats::UdpRecvSummary::merge);
    }
    match server_results {
        Some(r) => {
            // Match by id: the server's stream i has iperf3 id stream_id(i).
            result.upload_bytes = outcomes
                .iter()
                .enumerate()
                .filter(|(_, o)| o.sending)
                .filter_map(|(i, _)| r.streams.iter().find(|s| s.id == iperf3::stream_id(i)))
                .map(|s| s.bytes)
                .sum();
            if udp && spec.direction != Direction::Download {
                result.udp_recv = Some(r.udp_received());
            }
            let window = r.streams.iter().map(|s| s.end_time).fold(0.0, f64::max);
            if window > 0.0 {
                result.upload_duration_s = Some(window);
            }
            result.cpu_remote = Some(crate::cpu::CpuUse {
                user_s: r.cpu_user / 100.0 * duration,
                system_s: r.cpu_system / 100.0 * duration,
                wall_s: duration,
            });
        }
        None => result.upload_bytes = outcomes.iter().filter(|o| o.sending).map(|o| o.bytes).sum(),
    }
    result.error = error;
    Ok(result)
}

/// TEST_END, results both ways, DISPLAY_RESULTS, IPERF_DONE.
fn finish_exchange(
    conn: &mut TcpStream,
    target: &Target,
    streams: &mut StreamSet,
    duration: f64,
    cpu: &crate::cpu::CpuUse,
    udp: bool,
) -> Result<Results, NetError> {
    // Let senders stop before telling the server, so its count is final.
    let wait = Instant::now();
    while !streams.senders_finished()
        && streams.streams.iter().any(|s| s.sending)
        && wait.elapsed() < Duration::from_millis(500)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    iperf3::write_state(conn, iperf3::TEST_END).map_err(|e| broken(target, e))?;
    expect_state(conn, target, iperf3::EXCHANGE_RESULTS)?;
    let ours = Results {
        cpu_total: cpu.percent_total(),
        cpu_user: cpu.percent_user(),
        cpu_system: cpu.percent_system(),
        sender_has_retransmits: if streams.streams.iter().any(|s| s.sending) && !udp { 1 } else { -1 },
        streams: streams
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| StreamResult {
                id: iperf3::stream_id(i),
                bytes: s.bytes.load(Ordering::Relaxed),
                retransmits: -1,
                packets: s.packets.load(Ordering::Relaxed),
                end_time: duration,
                ..Default::default()
            })
            .collect(),
    };
    iperf3::write_json(conn, &ours.to_json()).map_err(|e| broken(target, e))?;
    let theirs = iperf3::read_json(conn, iperf3::MAX_RESULTS).map_err(|e| broken(target, e))?;
    let theirs = Results::from_json(&theirs).map_err(NetError::Protocol)?;
    expect_state(conn, target, iperf3::DISPLAY_RESULTS)?;
    iperf3::write_state(conn, iperf3::IPERF_DONE).map_err(|e| broken(target, e))?;
    let _ = conn.shutdown(std::net::Shutdown::Write);
    Ok(theirs)
}
