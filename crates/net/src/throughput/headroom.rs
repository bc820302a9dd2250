//! The headroom protocol's side of a throughput test ([`Protocol`]): `Test`,
//! `TestReady`, the data streams (TCP streams or UDP hellos carrying the
//! session key), `Started`; at the end `End` and the server's `Result`
//! report; and [`Session::throughput`], which runs it. The session itself
//! (authentication, RR, echo) is [`crate::client`]'s.

use super::{measure, Protocol, ServerFigures, ThroughputResult, ThroughputSpec};
use crate::client::RrResult;
use crate::client::{open_stream, rr_loop, udp_hello, Session};
use crate::datapath::{StreamParams, StreamSet};
use crate::error::NetError;
use crate::process_cpu::CpuUse;
use crate::socket::SocketSetup;
use crate::udp_header::UdpHeader;
use crate::wire::{self, Hello, Reply, Request};
use headroom_result::Sample;
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

impl Protocol for HeadroomTest<'_> {
    fn name(&self) -> &'static str {
        "headroom"
    }

    fn peer(&self) -> String {
        self.session.target.display()
    }

    fn source(&self) -> &crate::socket::Source {
        &self.session.target.source
    }

    fn start(&mut self, spec: &ThroughputSpec) -> Result<StreamSet, NetError> {
        let udp = spec.udp_rate.is_some();
        let req = Request::Test {
            udp,
            direction: spec.direction,
            streams: spec.streams,
            duration_ms: spec.duration.as_millis() as u64,
            bytes: spec.bytes_per_stream(),
            len: spec.len as u32,
            rate_bits: spec.udp_rate,
            window: spec.window,
        };
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
        };
        let (peer, timeout) = (self.session.peer, self.session.target.timeout);
        let setup = SocketSetup::data(&self.session.target.source, spec.window);
        let key = self.session.key_bytes()?;
        let mut udp_socks = Vec::new();
        let mut tcp_socks = Vec::new();
        for i in 0..spec.total_streams() {
            if udp {
                udp_socks.push((udp_hello(peer, &key, timeout, &setup)?, spec.client_sends(i)));
            } else {
                let hello = Hello::Stream { session: self.session.key.clone(), test, index: i };
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

    fn control(&self) -> &TcpStream {
        &self.session.control
    }

    /// The server ends a fixed transfer itself and sends its report unasked.
    fn server_ended(&mut self) -> Option<String> {
        None
    }

    fn start_rtt_under_load(&self, stop: Arc<AtomicBool>) -> Option<JoinHandle<Result<RrResult, NetError>>> {
        let (reach, key) = (self.session.reach(), self.session.key.clone());
        Some(std::thread::spawn(move || rr_loop(&reach, &key, 64, Duration::from_secs(86_400), &stop, &mut |_| {})))
    }

    fn finish(&mut self, _: &StreamSet, _: f64, _: &CpuUse, server_ended: bool) -> Result<ServerFigures, NetError> {
        if !server_ended {
            wire::write_frame(&mut self.session.control, &Request::End)
                .map_err(|e| NetError::Broken(format!("control connection: {e}")))?;
        }
        let report = match self.session.read_reply()? {
            Reply::Result(report) => report,
            other => return Err(NetError::Broken(format!("unexpected server reply {other:?}"))),
        };
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
        })
    }

    fn abandon(&mut self) {
        self.session.answer_within = Duration::from_secs(2);
    }

    fn drain(&self) -> Duration {
        Duration::from_secs(1)
    }
}
