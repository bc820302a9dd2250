//! The iperf3 control protocol's side of a throughput test ([`Protocol`]),
//! spoken to a stock `iperf3 -s`: cookie, PARAM_EXCHANGE, CREATE_STREAMS,
//! TEST_START/TEST_RUNNING, and at the end TEST_END, the results both ways,
//! DISPLAY_RESULTS, IPERF_DONE. Throughput comes from the receiving side's
//! count (the server's results for uploads, ours for downloads), CPU from
//! both sides' results.

use super::{measure, Protocol, ServerFigures, ThroughputResult, ThroughputSpec};
use crate::address::{connect_through_refusals, Endpoint};
use crate::datapath::{StreamParams, StreamSet};
use crate::error::NetError;
use crate::iperf3::{self, Params, Results, StreamResult};
use crate::process_cpu::CpuUse;
use crate::socket::{connect_to_server, udp_connected, SocketSetup};
use crate::udp_header::UdpHeader;
use crate::wire::TrafficDirection;
use headroom_result::{NetProtocol, Sample};
use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a refused control connection is asked again. A stock `iperf3 -s`
/// closes its listening socket after each test (and after each failed
/// handshake, as auto-detection's greeting) and opens it again, so the next
/// test's connect can fall in that gap: a CI rehearsal's did on a loaded
/// machine. A port where nothing listens is said refused after this long.
const RELISTEN_WAIT: Duration = Duration::from_secs(2);

/// Runs one test against a stock iperf3 server.
pub fn throughput(
    target: &Endpoint,
    spec: &ThroughputSpec,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<ThroughputResult, NetError> {
    let (conn, peer) = connect_through_refusals(target, &SocketSetup::from(&target.source), RELISTEN_WAIT)?;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(target.timeout))?;
    measure(&mut Iperf3Test { target, conn, peer, udp: spec.udp_rate.is_some() }, spec, stop, on_sample)
}

/// One test: the control connection to a stock server.
struct Iperf3Test<'a> {
    target: &'a Endpoint,
    conn: TcpStream,
    peer: SocketAddr,
    udp: bool,
}

impl Protocol for Iperf3Test<'_> {
    fn name(&self) -> NetProtocol {
        NetProtocol::Iperf3
    }

    fn peer(&self) -> String {
        self.target.display()
    }

    fn source(&self) -> &crate::socket::Source {
        &self.target.source
    }

    fn start(&mut self, spec: &ThroughputSpec) -> Result<StreamSet, NetError> {
        let (target, peer) = (self.target, self.peer);
        let setup = SocketSetup::data(&target.source, spec.window);
        let cookie = iperf3::new_cookie();
        self.conn.write_all(&cookie)?;
        expect_state(&mut self.conn, target, iperf3::PARAM_EXCHANGE)?;
        let params = Params {
            udp: self.udp,
            reverse: spec.direction == TrafficDirection::Download,
            bidirectional: spec.direction == TrafficDirection::Bidir,
            parallel: spec.streams,
            time_s: spec.duration.as_secs().max(1),
            bytes: spec.bytes.unwrap_or(0),
            len: spec.len as u32,
            bandwidth: spec.udp_rate.map_or(0, |r| (r / f64::from(spec.streams)) as u64),
            window: spec.window,
            gsro: spec.udp_offload && self.udp,
            zerocopy: spec.zerocopy && !self.udp,
            skip_rx_copy: spec.skip_rx_copy && !self.udp,
            ..Default::default()
        };
        iperf3::write_json(&mut self.conn, &params.to_json())?;
        expect_state(&mut self.conn, target, iperf3::CREATE_STREAMS)?;
        let sp = StreamParams {
            len: spec.len,
            limit: spec.bytes_per_stream(),
            stall: target.timeout,
            udp_rate: params.bandwidth as f64,
            window: spec.window,
            skip_rx_copy: spec.skip_rx_copy,
            zerocopy: spec.zerocopy,
            udp_offload: spec.udp_offload,
        };
        let mut udp_socks = Vec::new();
        let mut tcp_socks = Vec::new();
        for i in 0..params.total_streams() {
            if self.udp {
                udp_socks.push((udp_stream(peer, target.timeout, &setup)?, spec.client_sends(i)));
            } else {
                let mut s = connect_to_server(peer, target.timeout, &setup)?;
                s.write_all(&cookie)?;
                tcp_socks.push((s, spec.client_sends(i)));
            }
        }
        // Wait for TEST_START and TEST_RUNNING before sending, as a stock client does.
        expect_state(&mut self.conn, target, iperf3::TEST_START)?;
        expect_state(&mut self.conn, target, iperf3::TEST_RUNNING)?;
        Ok(if self.udp {
            StreamSet::start_udp(udp_socks, UdpHeader::Iperf3 { seq64: false }, sp)
        } else {
            StreamSet::start_tcp(tcp_socks, sp)
        })
    }

    fn control(&self) -> Option<&TcpStream> {
        Some(&self.conn)
    }

    /// A stock server says something during a test only to end it early.
    fn server_ended(&mut self) -> Option<String> {
        let st = iperf3::read_state(&mut self.conn).unwrap_or(iperf3::SERVER_TERMINATE);
        Some(state_error(self.target, st, &mut self.conn).to_string())
    }

    fn finish(
        &mut self,
        streams: &StreamSet,
        duration: f64,
        local_cpu: &CpuUse,
        _: bool,
    ) -> Result<ServerFigures, NetError> {
        let r = finish_exchange(&mut self.conn, self.target, streams, duration, local_cpu, self.udp)?;
        // Match by id: the server's stream i has iperf3 id stream_id(i).
        let upload_bytes = streams
            .streams
            .iter()
            .enumerate()
            .filter(|(_, s)| s.sending)
            .filter_map(|(i, _)| r.streams.iter().find(|s| s.id == iperf3::stream_id(i)))
            .map(|s| s.bytes)
            .sum();
        let sends_udp = self.udp && streams.has_senders();
        let window = r.streams.iter().map(|s| s.end_time).fold(0.0, f64::max);
        Ok(ServerFigures {
            upload_bytes,
            upload_duration_s: (window > 0.0).then_some(window),
            cpu: Some(CpuUse {
                user_s: r.cpu_user / 100.0 * duration,
                system_s: r.cpu_system / 100.0 * duration,
                wall_s: duration,
            }),
            udp_recv: sends_udp.then(|| r.udp_received()),
            modes_unknown: true,
            ..Default::default()
        })
    }

    fn drain(&self) -> Duration {
        Duration::from_millis(200)
    }
}

fn state_error(target: &Endpoint, state: i8, conn: &mut TcpStream) -> NetError {
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

fn expect_state(conn: &mut TcpStream, target: &Endpoint, want: i8) -> Result<(), NetError> {
    let st = iperf3::read_state(conn).map_err(|e| broken(target, e))?;
    if st == want {
        Ok(())
    } else {
        Err(state_error(target, st, conn))
    }
}

fn broken(target: &Endpoint, e: std::io::Error) -> NetError {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
            NetError::Broken(format!("{}: the iperf3 server closed the connection", target.display()))
        }
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => NetError::Broken(format!(
            "{}: the iperf3 server did not answer within {:.0} s ({})",
            target.display(),
            target.timeout.as_secs_f64(),
            crate::client::SILENT_SERVER
        )),
        _ => NetError::Broken(format!("{}: {e}", target.display())),
    }
}

fn udp_stream(peer: SocketAddr, timeout: Duration, setup: &SocketSetup) -> Result<UdpSocket, NetError> {
    let sock = udp_connected(peer, setup)?;
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

/// TEST_END, results both ways, DISPLAY_RESULTS, IPERF_DONE.
fn finish_exchange(
    conn: &mut TcpStream,
    target: &Endpoint,
    streams: &StreamSet,
    duration: f64,
    cpu: &CpuUse,
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
