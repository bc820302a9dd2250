//! The headroom protocol's side of a throughput test ([`Protocol`]): `Test`,
//! `TestReady`, the data streams (TCP streams or UDP hellos carrying the
//! session key), `Started`; at the end `End` and the server's `Result`
//! report; and [`Session::throughput`], which runs it. The session itself
//! (authentication, RR, echo) is [`crate::client`]'s.

use super::{measure, Protocol, ServerFigures, ThroughputResult, ThroughputSpec};
use crate::client::RrResult;
use crate::client::{open_stream, rr_loop, udp_hello, RrPlan, Session};

/// Round trips beside a throughput test: 64 bytes until stopped, blocking.
const RR_UNDER_LOAD: RrPlan = RrPlan { size: 64, duration: Duration::from_secs(86_400), busy_poll: false };
use crate::datapath::{StreamParams, StreamSet};
use crate::error::NetError;
use crate::process_cpu::CpuUse;
use crate::socket::SocketSetup;
use crate::udp_header::UdpHeader;
use crate::wire::{self, Hello, Reply, Request, TestRequest};
use headroom_result::{NetProtocol, Sample};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

impl Session {
    /// Runs one throughput test; `on_sample` gets one sample per second.
    pub fn throughput(
        &mut self,
        spec: &ThroughputSpec,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&Sample),
    ) -> Result<ThroughputResult, NetError> {
        measure(&mut HeadroomTest { session: self }, spec, stop, on_sample)
    }
}

/// One test on an open session.
struct HeadroomTest<'a> {
    session: &'a mut Session,
}

impl HeadroomTest<'_> {
    fn refused(&self, reason: &str) -> NetError {
        NetError::Refused(format!("{} refused the test: {reason}", self.session.target.display()))
    }
}

/// Whether the server's report matches the streams this client ran: each
/// index present, and on TCP, bytes the server counted on a stream arrived
/// here (and ours arrived there). A stream the server served to another
/// connection, or that never joined, is an error rather than a silent 0 b/s.
fn check_streams_are_ours(streams: &StreamSet, report: &wire::ServerReport) -> Result<(), String> {
    let tcp = report.udp.is_none();
    for ours in &streams.streams {
        let i = ours.index;
        let Some(theirs) = report.streams.iter().find(|r| r.index == i) else {
            return Err(format!("data stream {i} never joined the test on the server"));
        };
        let here = ours.bytes.load(std::sync::atomic::Ordering::Relaxed);
        if tcp && !ours.sending && theirs.bytes_sent > 0 && here == 0 {
            return Err(format!(
                "the server sent {} bytes on data stream {i} and none arrived here: another connection took its place",
                theirs.bytes_sent
            ));
        }
        if tcp && ours.sending && here > 0 && theirs.bytes_received == 0 && theirs.bytes_sent == 0 {
            return Err(format!(
                "this client sent {here} bytes on data stream {i} and the server received none: another connection took its place"
            ));
        }
    }
    Ok(())
}

impl Protocol for HeadroomTest<'_> {
    fn name(&self) -> NetProtocol {
        NetProtocol::Headroom
    }

    fn peer(&self) -> String {
        self.session.target.display()
    }

    fn source(&self) -> &crate::socket::Source {
        &self.session.target.source
    }

    fn start(&mut self, spec: &ThroughputSpec) -> Result<StreamSet, NetError> {
        let udp = spec.udp_rate.is_some();
        let req = Request::Test(TestRequest {
            udp,
            direction: spec.direction,
            streams: spec.streams,
            duration_ms: spec.duration.as_millis() as u64,
            bytes: spec.bytes_per_stream(),
            len: spec.len as u32,
            rate_bits: spec.udp_rate,
            window: spec.window,
            skip_rx_copy: spec.skip_rx_copy,
            zerocopy: spec.zerocopy,
            udp_offload: spec.udp_offload,
        });
        let test = match self.session.request(&req)? {
            Reply::TestReady { test } => test,
            Reply::Refused { reason } => return Err(self.refused(&reason)),
            other => return Err(NetError::Protocol(format!("unexpected {other:?}"))),
        };
        let params = StreamParams {
            len: spec.len,
            limit: spec.bytes_per_stream(),
            stall: self.session.target.timeout,
            udp_rate: spec.udp_rate.unwrap_or(0.0) / f64::from(spec.streams),
            window: spec.window,
            skip_rx_copy: spec.skip_rx_copy,
            zerocopy: spec.zerocopy,
            udp_offload: spec.udp_offload,
        };
        let (peer, timeout) = (self.session.peer, self.session.target.timeout);
        let setup = SocketSetup::data(&self.session.target.source, spec.window);
        let keys = self.session.keys;
        let key = keys.id();
        let mut udp_socks = Vec::new();
        let mut tcp_socks = Vec::new();
        for i in 0..spec.total_streams() {
            if udp {
                udp_socks.push((udp_hello(peer, &key, timeout, &setup)?, spec.client_sends(i)));
            } else {
                let hello = Hello::Stream {
                    session: wire::to_hex(&key),
                    test,
                    index: i,
                    proof: wire::to_hex(&keys.stream_proof(test, i)),
                };
                tcp_socks.push((open_stream(peer, timeout, &setup, &hello)?, spec.client_sends(i)));
            }
        }
        match self.session.read_reply()? {
            Reply::Started => {}
            Reply::Refused { reason } => return Err(NetError::Refused(reason)),
            other => return Err(NetError::Protocol(format!("unexpected {other:?}"))),
        }
        Ok(if udp {
            StreamSet::start_udp(udp_socks, UdpHeader::Headroom { key }, params)
        } else {
            StreamSet::start_tcp(tcp_socks, params)
        })
    }

    fn control(&self) -> Option<&TcpStream> {
        Some(&self.session.control)
    }

    /// The server ends a fixed transfer itself and sends its report unasked.
    fn server_ended(&mut self) -> Option<String> {
        None
    }

    fn start_rtt_under_load(&self, stop: Arc<AtomicBool>) -> Option<JoinHandle<Result<RrResult, NetError>>> {
        let (reach, keys) = (self.session.reach(), self.session.keys);
        Some(std::thread::spawn(move || rr_loop(&reach, &keys, RR_UNDER_LOAD, &stop, &mut |_| {})))
    }

    fn finish(
        &mut self,
        streams: &StreamSet,
        _: f64,
        _: &CpuUse,
        server_ended: bool,
    ) -> Result<ServerFigures, NetError> {
        if !server_ended {
            wire::write_frame(&mut self.session.control, &Request::End)
                .map_err(|e| NetError::Broken(format!("control connection: {e}")))?;
        }
        let report = match self.session.read_reply()? {
            Reply::Result(report) => report,
            other => return Err(NetError::Broken(format!("unexpected server reply {other:?}"))),
        };
        check_streams_are_ours(streams, &report).map_err(|e| NetError::Broken(format!("{}: {e}", self.peer())))?;
        Ok(ServerFigures {
            upload_bytes: report.streams.iter().map(|s| s.bytes_received).sum(),
            // The server counted from its streams' start to the end request
            // (or, for a fixed transfer, to the last byte).
            upload_duration_s: Some(report.duration_s),
            sender_tcp_info: report.streams.iter().filter_map(|s| s.tcp_info.clone()).collect(),
            cpu: Some(report.cpu),
            cpu_load: report.cpu_load.map(|l| *l),
            udp_recv: report.udp,
            error: report.error,
            buffers: report.streams.iter().find_map(|s| s.buffers),
            missing_report: None,
            rx_copy_skipped: report.streams.iter().any(|s| s.rx_copy_skipped),
            sent_by_reference: report.streams.iter().filter(|s| s.bytes_sent > 0).all(|s| s.sent_by_reference),
            udp_offloaded: report.streams.iter().map(|s| (s.bytes_sent > 0, s.udp_offloaded)).collect(),
            modes_unknown: false,
        })
    }

    fn abandon(&mut self) {
        self.session.answer_within = Duration::from_secs(2);
    }

    fn drain(&self) -> Duration {
        Duration::from_secs(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::Instant;

    fn report(bytes_sent: u64) -> wire::ServerReport {
        wire::ServerReport {
            duration_s: 1.0,
            streams: vec![wire::StreamReport { index: 0, bytes_sent, ..Default::default() }],
            cpu: CpuUse::default(),
            error: None,
            udp: None,
            cpu_load: None,
        }
    }

    /// One receiving stream; `feed` bytes written by its far end.
    fn receiving(feed: usize) -> (StreamSet, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut theirs, _) = l.accept().unwrap();
        theirs.write_all(&vec![1u8; feed]).unwrap();
        let params = StreamParams {
            len: 1024,
            limit: None,
            stall: Duration::from_secs(5),
            udp_rate: 0.0,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
        };
        let set = StreamSet::start_tcp(vec![(ours, false)], params);
        let t0 = Instant::now();
        while feed > 0 && set.total_bytes() < feed as u64 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        (set, theirs)
    }

    #[test]
    fn a_stream_the_server_fed_that_never_reached_us_is_an_error() {
        let (set, _far) = receiving(0);
        let e = check_streams_are_ours(&set, &report(6_700_000)).unwrap_err();
        assert!(e.contains("another connection took its place"), "{e}");
        let e = check_streams_are_ours(&set, &wire::ServerReport { streams: vec![], ..report(0) }).unwrap_err();
        assert!(e.contains("never joined"), "{e}");
        let (set, _far) = receiving(4096);
        assert_eq!(check_streams_are_ours(&set, &report(4096)), Ok(()));
    }
}
