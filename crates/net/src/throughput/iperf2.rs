//! iperf2's side of a throughput test ([`Protocol`]), spoken to a stock
//! `iperf -s` (2.0.5 and later; 2.1 or later for downloads). iperf2 has no
//! control connection: every stream is a TCP connection whose first bytes
//! say what the test is. An upload starts with a zero flags word (no
//! settings: the server just counts what arrives, as with an iperf 2.0
//! client); a download sends the settings header iperf 2.1's own client
//! sends for `-R` (captured from iperf 2.1.8), after which the server sends
//! for the time or the bytes asked and closes.
//!
//! A stock iperf2 server reports nothing back over TCP, so an upload's
//! figure is what this side wrote over its own window, as `iperf -c`
//! reports it; a download's is what this side received. UDP and
//! simultaneous both-way tests are not spoken yet: refused before connecting.

use super::{measure, Protocol, ServerFigures, ThroughputResult, ThroughputSpec};
use crate::address::{connect_with, Endpoint};
use crate::datapath::{self, StreamParams, StreamSet};
use crate::error::NetError;
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

/// The flags word iperf 2.1.8's client sends for `-R`: an extended header
/// (0x40000000) of the second version (0x04000000) with 2.1's length bits.
const REVERSE_FLAGS: u32 = 0x4401_0078;
/// The extended-flags word that asks the server to send (reverse).
const EXTENDED_REVERSE: u32 = 0x0400_0000;
/// The client version words 2.1.8 sends (2.1, 8.3): a server reads the
/// header as that client's.
const VERSION_WORDS: [u32; 2] = [0x0002_0001, 0x0008_0003];

/// The 60 bytes a download stream starts with: flags, streams, the server's
/// port, buffer length and window (0: the server's own), the amount (a byte
/// count, or minus the time in hundredths of a second), then the extended
/// part asking the server to send.
fn reverse_header(streams: u32, port: u16, amount: Amount) -> [u8; 60] {
    let amount = match amount {
        Amount::Bytes(b) => i32::try_from(b).unwrap_or(i32::MAX),
        Amount::Time(t) => -i32::try_from(t.as_millis().div_ceil(10)).unwrap_or(i32::MAX),
    };
    let words: [u32; 15] = [
        REVERSE_FLAGS,
        streams,
        u32::from(port),
        0,
        0,
        amount as u32,
        0,
        0,
        EXTENDED_REVERSE,
        VERSION_WORDS[0],
        VERSION_WORDS[1],
        0,
        0,
        0,
        0,
    ];
    let mut header = [0u8; 60];
    for (chunk, word) in header.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    header
}

/// How much a download's server sends before it closes.
#[derive(Debug, Clone, Copy)]
enum Amount {
    Bytes(u64),
    Time(Duration),
}

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
        let opening: Vec<u8> = if sends {
            0u32.to_be_bytes().to_vec()
        } else {
            reverse_header(spec.streams, self.target.port, amount).to_vec()
        };
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
    fn the_download_header_is_the_one_iperf_2_1_8_sends_for_reverse() {
        // `iperf -c HOST -p 15011 -t 2.5 -P 3 -R` (2.1.8), as captured on the wire.
        let captured = "44010078 00000003 00003aa3 00000000 00000000 ffffff06 00000000 00000000 \
                        04000000 00020001 00080003 00000000 00000000 00000000 00000000";
        let words: Vec<u32> = captured.split_whitespace().map(|w| u32::from_str_radix(w, 16).unwrap()).collect();
        let header = reverse_header(3, 15011, Amount::Time(Duration::from_millis(2500)));
        let ours: Vec<u32> = header.chunks_exact(4).map(|c| u32::from_be_bytes(c.try_into().unwrap())).collect();
        assert_eq!(ours, words);
        let bytes = reverse_header(1, 5001, Amount::Bytes(1 << 20));
        assert_eq!(&bytes[20..24], &(1u32 << 20).to_be_bytes(), "a byte count is positive");
    }

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
