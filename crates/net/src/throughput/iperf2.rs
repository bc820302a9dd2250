//! iperf2's side of a throughput test ([`Protocol`]), spoken to a stock
//! `iperf -s` (2.0.5 and later; 2.1 or later for downloads). iperf2 has no
//! control connection: every stream is a TCP connection whose first bytes
//! say what the test is ([`crate::iperf2`]): the settings header iperf
//! 2.1.8's own client sends, for an upload (the data follows; a 2.0 server
//! reads only its first word, no flag, and counts what arrives) or for
//! `-R` (the server then sends for the time or the bytes asked and closes).
//!
//! A stock iperf2 server reports nothing back over TCP, so an upload's
//! figure is what this side wrote over its own window, as `iperf -c`
//! reports it; a download's is what this side received. UDP and
//! simultaneous both-way tests are not spoken yet: refused before connecting.

use super::{measure, Protocol, ServerFigures, ThroughputResult, ThroughputSpec};
use crate::address::{connect_with, Endpoint};
use crate::datapath::{self, StreamParams, StreamSet};
use crate::error::NetError;
use crate::iperf2::{client_header, Amount};
use crate::process_cpu::CpuUse;
use crate::socket::{connect_to_server, SocketSetup};
use crate::wire::TrafficDirection;
use headroom_result::{NetProtocol, Sample};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// iperf2's port when none is given (`iperf -s` listens there).
pub const IPERF2_PORT: u16 = 5001;

/// What iperf2 cannot be asked yet, in one line naming what to run instead.
pub(crate) fn unsupported(spec: &ThroughputSpec) -> Option<&'static str> {
    if spec.udp_rate.is_some() {
        Some("UDP tests against an iperf2 server are not supported yet; use TCP, or an iperf3 or headroom server")
    } else if spec.direction == TrafficDirection::Bidir {
        Some("both-way tests against an iperf2 server are not supported yet; run an upload and a download")
    } else if spec.bytes.is_some_and(|b| b > i32::MAX as u64) {
        Some("iperf2's header holds at most 2 GiB per stream for a fixed transfer; use --time")
    } else {
        None
    }
}

/// Runs one TCP test against a stock iperf2 server.
pub fn throughput(
    target: &Endpoint,
    spec: &ThroughputSpec,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<ThroughputResult, NetError> {
    if let Some(why) = unsupported(spec) {
        // NetRequest::check refuses these as usage errors before any connection.
        return Err(NetError::Protocol(why.into()));
    }
    measure(&mut Iperf2Test { target }, spec, stop, on_sample)
}

/// One test: only the endpoint; the streams carry everything.
struct Iperf2Test<'a> {
    target: &'a Endpoint,
}

impl Protocol for Iperf2Test<'_> {
    fn name(&self) -> NetProtocol {
        NetProtocol::Iperf2
    }

    fn peer(&self) -> String {
        self.target.display()
    }

    fn source(&self) -> &crate::socket::Source {
        &self.target.source
    }

    fn start(&mut self, spec: &ThroughputSpec) -> Result<StreamSet, NetError> {
        let setup = SocketSetup::data(&self.target.source, spec.window);
        let sends = spec.direction == TrafficDirection::Upload;
        // The server sends a little longer than this side measures, so the
        // window is never cut short by its clock starting first.
        let amount = match spec.bytes_per_stream() {
            Some(b) => Amount::Bytes(b),
            None => Amount::Time(spec.duration + Duration::from_millis(500)),
        };
        let opening = client_header(spec.streams, self.target.port, amount, !sends);
        // The first stream from the first address of the name that answers; the others to the same.
        let (first, peer) = connect_with(self.target, &setup)?;
        let mut socks = vec![first];
        for _ in 1..spec.streams {
            socks.push(connect_to_server(peer, self.target.timeout, &setup)?);
        }
        for s in &mut socks {
            s.write_all(&opening)?;
        }
        let params = StreamParams {
            len: spec.len,
            limit: spec.bytes_per_stream(),
            stall: self.target.timeout,
            udp_rate: 0.0,
            window: spec.window,
        };
        Ok(StreamSet::start_tcp(socks.into_iter().map(|s| (s, sends)).collect(), params))
    }

    fn control(&self) -> Option<&TcpStream> {
        None
    }

    fn server_ended(&mut self) -> Option<String> {
        None
    }

    /// Nothing comes back over TCP: the upload is what this side wrote.
    fn finish(&mut self, streams: &StreamSet, _: f64, _: &CpuUse, _: bool) -> Result<ServerFigures, NetError> {
        Ok(ServerFigures { upload_bytes: datapath::total(&streams.counters(true)), ..Default::default() })
    }

    fn drain(&self) -> Duration {
        Duration::from_millis(200)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_both_ways_and_huge_transfers_are_refused_with_what_to_run() {
        let tcp = ThroughputSpec {
            direction: TrafficDirection::Upload,
            streams: 1,
            duration: Duration::from_secs(1),
            bytes: None,
            len: 128 << 10,
            udp_rate: None,
            rtt_under_load: false,
            window: None,
            sample_interval: None,
        };
        assert_eq!(unsupported(&tcp), None);
        let udp = ThroughputSpec { udp_rate: Some(1e9), len: 1470, ..tcp.clone() };
        assert!(unsupported(&udp).unwrap().contains("UDP"));
        let both = ThroughputSpec { direction: TrafficDirection::Bidir, ..tcp.clone() };
        assert!(unsupported(&both).unwrap().contains("upload and a download"));
        let huge = ThroughputSpec { bytes: Some(8 << 30), ..tcp };
        assert!(unsupported(&huge).unwrap().contains("--time"));
    }
}
