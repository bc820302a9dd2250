//! iperf2's side of a throughput test ([`Protocol`]), spoken to a stock
//! `iperf -s` (2.0.5 and later; 2.1 or later for downloads). iperf2 has no
//! control connection: every stream is a TCP connection whose first bytes
//! say what the test is ([`crate::iperf2`]): the settings header iperf
//! 2.1.8's own client sends, for an upload (the data follows; a 2.0 server
//! reads only its first word, no flag, and counts what arrives) or for
//! `-R` (the server then sends for the time or the bytes asked and closes),
//! or for `--full-duplex` (both ways at once on each connection: the server
//! sends for what was asked while it reads; this side writes on one handle
//! of the socket and reads on another, and half-closes when it is done).
//!
//! A stock iperf2 server reports nothing back over TCP, so an upload's
//! figure is what this side wrote over its own window, as `iperf -c`
//! reports it; a download's is what this side received; a both-way test
//! records both, as iperf3's bidirectional test does.
//!
//! UDP (`iperf -s -u`, uploads): each stream is a connected UDP socket whose
//! datagrams carry 2.1.8's id, send time and settings, paced at the rate;
//! once the test ends, a datagram with the next id negated says so, and the
//! server answers it with its report (bytes, window, loss, reordering,
//! jitter), which the result records as iperf3's UDP results are. Sent again
//! until a report comes, as `iperf -c` does; without one, this side's
//! figures stand, with a note. UDP downloads and UDP both ways are not
//! spoken: refused before connecting.
//!
//! Long (about 500 lines): about 270 lines of code, the rest its unit tests.

use super::{measure, Protocol, ServerFigures, ThroughputResult, ThroughputSpec};
use crate::address::{connect_with, resolve, Endpoint};
use crate::datapath::{self, StreamParams, StreamSet};
use crate::error::NetError;
use crate::iperf2::{client_header, final_id, parse_udp_report, udp_settings, Amount, UdpSent};
use crate::process_cpu::CpuUse;
use crate::setting::NetSetting;
use crate::socket::{connect_to_server, is_timeout, udp_connected, SocketSetup, MAX_UDP_LEN};
use crate::stats::UdpRecvSummary;
use crate::udp_header::{wall_now, UdpHeader};
use crate::wire::TrafficDirection;
use headroom_result::{NetProtocol, Sample};
use headroom_units::setting::Message;
use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// iperf2's port when none is given (`iperf -s` listens there).
pub const IPERF2_PORT: u16 = 5001;

/// Times the final datagram is sent before the report is given up, and
/// how long each waits for it (iperf 2.1.8's client: 10 times, 250 ms).
const FINAL_TRIES: u32 = 10;
const FINAL_WAIT: Duration = Duration::from_millis(250);

/// What iperf2 cannot be asked yet, in one line naming what to run instead.
pub(crate) fn unsupported(spec: &ThroughputSpec) -> Option<Message<NetSetting>> {
    if spec.udp_rate.is_some() && spec.direction != TrafficDirection::Upload {
        Some(
            Message::text(
                "UDP downloads and both-way UDP tests with an iperf2 server are not supported; run the UDP upload (",
            )
            .and(NetSetting::Tests)
            .then(" udp)"),
        )
    } else if spec.bytes.is_some_and(|b| b > i32::MAX as u64) {
        Some(
            Message::text("iperf2's header holds at most 2 GiB per stream for a fixed transfer; use ")
                .and(NetSetting::Time),
        )
    } else {
        None
    }
}

/// Runs one TCP or UDP test against a stock iperf2 server.
pub fn throughput(
    target: &Endpoint,
    spec: &ThroughputSpec,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<ThroughputResult, NetError> {
    if let Some(why) = unsupported(spec) {
        // NetRequest::check refuses these as usage errors before any connection.
        return Err(NetError::Protocol(why.to_string()));
    }
    measure(&mut Iperf2Test { target, udp: None }, spec, stop, on_sample)
}

/// One test: the endpoint, and for UDP what the final datagrams need.
struct Iperf2Test<'a> {
    target: &'a Endpoint,
    udp: Option<UdpStreams>,
}

/// A UDP test's sockets (clones of the streams'), their datagrams' header and length.
struct UdpStreams {
    socks: Vec<UdpSocket>,
    header: UdpHeader,
    len: usize,
}

impl Iperf2Test<'_> {
    fn start_udp(&mut self, spec: &ThroughputSpec, rate: f64, amount: Amount) -> Result<StreamSet, NetError> {
        let setup = SocketSetup::data(&self.target.source, spec.window);
        // No handshake to pick an address by: the first the name resolves to.
        let peer = resolve(&self.target.host, self.target.port)?[0];
        let per_stream = rate / f64::from(spec.streams);
        let len = spec.len.clamp(crate::iperf2::UDP_HEADER_LEN, MAX_UDP_LEN);
        let header =
            UdpHeader::Iperf2 { settings: udp_settings(spec.streams, self.target.port, len, per_stream, amount) };
        let mut socks = Vec::new();
        let mut clones = Vec::new();
        for _ in 0..spec.streams {
            let sock = udp_connected(peer, &setup)?;
            clones.push(sock.try_clone()?);
            socks.push((sock, true));
        }
        self.udp = Some(UdpStreams { socks: clones, header, len });
        let params = StreamParams {
            len,
            limit: spec.bytes_per_stream(),
            stall: self.target.timeout,
            udp_rate: per_stream,
            window: spec.window,
            skip_rx_copy: spec.skip_rx_copy,
            zerocopy: spec.zerocopy,
            udp_offload: spec.udp_offload,
        };
        Ok(StreamSet::start_udp(socks, header, params))
    }

    /// Ends each UDP stream and reads the server's reports: their figures
    /// together and the longest window, or why a stream got none.
    fn reports(
        &self,
        udp: &UdpStreams,
        streams: &StreamSet,
        duration: f64,
    ) -> Result<Result<(UdpRecvSummary, f64), String>, NetError> {
        // The senders stop within a pacing sleep; their last ids are final then.
        let wait = Instant::now();
        while !streams.senders_finished() && wait.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut merged: Option<UdpRecvSummary> = None;
        let mut window = 0.0f64;
        for (stream, sock) in streams.streams.iter().filter(|s| s.sending).zip(&udp.socks) {
            let id = final_id(stream.last_seq.load(Ordering::Relaxed));
            let (reply, finals) = match final_exchange(sock, udp.header, udp.len, id) {
                Ok(answer) => answer,
                Err(why) => return Ok(Err(why)),
            };
            let sent = UdpSent {
                datagrams: id.wrapping_neg(),
                bytes: stream.bytes.load(Ordering::Relaxed) + u64::from(finals) * udp.len as u64,
                window: Duration::from_secs_f64(duration),
            };
            let r = parse_udp_report(&reply, &sent).map_err(|why| {
                NetError::Protocol(format!("{}: the iperf2 server's UDP report: {why}", self.target.display()))
            })?;
            let one = r.summary();
            merged = Some(merged.map_or(one, |m| m.merge(one)));
            window = window.max(r.window.as_secs_f64());
        }
        Ok(merged.map(|m| (m, window)).ok_or_else(|| "no UDP stream was sent".to_string()))
    }
}

/// Sends the datagram that ends a stream (`id`, negative) until the server
/// answers it with its report, as `iperf -c` does: the reply and how many
/// final datagrams went out, or why no report came.
fn final_exchange(sock: &UdpSocket, header: UdpHeader, len: usize, id: u64) -> Result<(Vec<u8>, u32), String> {
    let closed = || "its UDP port is closed (ICMP port unreachable)".to_string();
    sock.set_read_timeout(Some(FINAL_WAIT)).map_err(|e| e.to_string())?;
    let mut datagram = datapath::payload(len);
    let mut reply = vec![0u8; MAX_UDP_LEN];
    for tries in 1..=FINAL_TRIES {
        header.write(&mut datagram, id, wall_now());
        match sock.send(&datagram) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Err(closed()),
            Err(e) => return Err(crate::socket::describe(&e)),
        }
        match sock.recv(&mut reply) {
            Ok(n) => return Ok((reply[..n].to_vec(), tries)),
            Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Err(closed()),
            Err(e) => return Err(crate::socket::describe(&e)),
        }
    }
    Err(format!("no answer to {FINAL_TRIES} final datagrams {} ms apart", FINAL_WAIT.as_millis()))
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
        if let Some(rate) = spec.udp_rate {
            let amount = spec.bytes_per_stream().map_or(Amount::Time(spec.duration), Amount::Bytes);
            return self.start_udp(spec, rate, amount);
        }
        let setup = SocketSetup::data(&self.target.source, spec.window);
        // The server sends a little longer than this side measures, so the
        // window is never cut short by its clock starting first.
        let amount = match spec.bytes_per_stream() {
            Some(b) => Amount::Bytes(b),
            None => Amount::Time(spec.duration + Duration::from_millis(500)),
        };
        let opening = client_header(spec.streams, self.target.port, amount, spec.direction);
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
            skip_rx_copy: spec.skip_rx_copy,
            zerocopy: spec.zerocopy,
            udp_offload: spec.udp_offload,
        };
        let (sends, both) = (spec.direction == TrafficDirection::Upload, spec.direction == TrafficDirection::Bidir);
        Ok(StreamSet::start_tcp(datapath::tcp_streams(socks, sends, both)?, params))
    }

    fn control(&self) -> Option<&TcpStream> {
        None
    }

    fn server_ended(&mut self) -> Option<String> {
        None
    }

    /// Over TCP nothing comes back: the upload is what this side wrote.
    /// Over UDP, the server's report, or this side's figures with a note.
    fn finish(&mut self, streams: &StreamSet, duration: f64, _: &CpuUse, _: bool) -> Result<ServerFigures, NetError> {
        let sent = datapath::total(&streams.counters(true));
        let Some(udp) = &self.udp else {
            return Ok(ServerFigures { upload_bytes: sent, ..Default::default() });
        };
        Ok(match self.reports(udp, streams, duration)? {
            Ok((summary, window)) => ServerFigures {
                upload_bytes: summary.bytes,
                upload_duration_s: (window > 0.0).then_some(window),
                udp_recv: Some(summary),
                ..Default::default()
            },
            Err(why) => ServerFigures {
                upload_bytes: sent,
                missing_report: Some(format!(
                    "{}: the iperf2 server sent no UDP report ({why}); the figures are this side's: \
                     what it sent, with no loss or jitter",
                    self.target.display()
                )),
                ..Default::default()
            },
        })
    }

    fn drain(&self) -> Duration {
        Duration::from_millis(200)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::Source;

    fn tcp_up() -> ThroughputSpec {
        ThroughputSpec {
            direction: TrafficDirection::Upload,
            streams: 1,
            duration: Duration::from_secs(1),
            bytes: None,
            len: 128 << 10,
            udp_rate: None,
            rtt_under_load: false,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
            sample_interval: None,
        }
    }

    #[test]
    fn udp_downloads_udp_both_ways_and_huge_transfers_are_refused_with_what_to_run() {
        let tcp = tcp_up();
        assert_eq!(unsupported(&tcp), None);
        let udp = ThroughputSpec { udp_rate: Some(1e9), len: 1470, ..tcp.clone() };
        assert_eq!(unsupported(&udp), None, "UDP uploads are spoken");
        let udp_down = ThroughputSpec { direction: TrafficDirection::Download, ..udp };
        assert!(unsupported(&udp_down).unwrap().to_string().contains("UDP downloads"));
        let both = ThroughputSpec { direction: TrafficDirection::Bidir, ..tcp.clone() };
        assert!(unsupported(&both).is_none(), "TCP both ways is --full-duplex");
        let udp_both =
            ThroughputSpec { direction: TrafficDirection::Bidir, udp_rate: Some(1e9), len: 1470, ..tcp.clone() };
        assert!(unsupported(&udp_both).unwrap().to_string().contains("both-way UDP"));
        let huge = ThroughputSpec { bytes: Some(8 << 30), ..tcp };
        assert!(unsupported(&huge).unwrap().spelled(crate::setting::test_flags).contains("--time"));
    }

    /// How a fake `iperf -s -u` answers the final datagram.
    #[derive(Clone, Copy)]
    enum Answer {
        /// A 2.1.8-shaped report of what it received, with 0.25 ms of jitter.
        Report,
        /// A report claiming more datagrams lost than counted.
        Hostile,
        /// Nothing at all.
        Silent,
    }

    /// What the fake server saw: bytes and ids up to the first final
    /// datagram, whether every datagram carried 2.1.8's settings, final
    /// datagrams received.
    #[derive(Debug, Default)]
    struct Seen {
        bytes: u64,
        ids: Vec<i64>,
        settings_ok: bool,
        finals: u32,
    }

    impl Seen {
        /// The final datagram's id, negated: the datagrams the client sent, itself included.
        fn sent(&self) -> u64 {
            self.ids.last().map_or(0, |id| id.unsigned_abs())
        }
    }

    fn fake_server(answer: Answer) -> (u16, std::thread::JoinHandle<Seen>) {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        sock.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
        let server = std::thread::spawn(move || {
            let mut seen = Seen { settings_ok: true, ..Default::default() };
            let mut buf = vec![0u8; 65536];
            let mut first = None;
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                let first = *first.get_or_insert_with(Instant::now);
                let word = |i: usize| u32::from_be_bytes(buf[4 * i..4 * i + 4].try_into().unwrap());
                let id = ((u64::from(word(3)) << 32) | u64::from(word(0))) as i64;
                seen.settings_ok &= n >= 92 && word(4) == 0x4801_0098 && word(13) == 0x0002_0001;
                if id >= 0 || seen.finals == 0 {
                    seen.bytes += n as u64;
                    seen.ids.push(id);
                }
                if id >= 0 {
                    continue;
                }
                seen.finals += 1;
                let t = first.elapsed();
                // Loopback may drop a datagram on a loaded machine: counted as lost.
                let (lost, jitter_us) = match answer {
                    Answer::Report => (id.unsigned_abs() as u32 - seen.ids.len() as u32, 250),
                    Answer::Hostile => (id.unsigned_abs() as u32 + 1, 250),
                    Answer::Silent => continue,
                };
                let words = [
                    0x8800_0000,
                    (seen.bytes >> 32) as u32,
                    seen.bytes as u32,
                    t.as_secs() as u32,
                    t.subsec_micros(),
                    lost,
                    0,
                    id.unsigned_abs() as u32,
                    0,
                    jitter_us,
                ];
                let mut report = vec![0u8; 128];
                for (i, w) in words.iter().enumerate() {
                    report[16 + 4 * i..20 + 4 * i].copy_from_slice(&w.to_be_bytes());
                }
                sock.send_to(&report, from).unwrap();
                break;
            }
            seen
        });
        (port, server)
    }

    fn udp_test(answer: Answer) -> (ThroughputResult, Seen) {
        let (port, server) = fake_server(answer);
        let target = Endpoint {
            host: "127.0.0.1".into(),
            port,
            token: None,
            timeout: Duration::from_secs(2),
            source: Source::default(),
        };
        let spec = ThroughputSpec {
            duration: Duration::from_millis(400),
            len: 1448,
            udp_rate: Some(4e6),
            sample_interval: Some(Duration::from_millis(100)),
            ..tcp_up()
        };
        let r = throughput(&target, &spec, &AtomicBool::new(false), &mut |_| {}).unwrap();
        (r, server.join().unwrap())
    }

    #[test]
    fn the_servers_udp_report_is_the_result() {
        let (r, seen) = udp_test(Answer::Report);
        assert!(r.error.is_none() && r.missing_report.is_none(), "{:?} {:?}", r.error, r.missing_report);
        // 2.1.8's datagrams: ids 1, 2, ... then the next one negated, settings in every one.
        let n = seen.sent();
        assert!(n > 50, "{n} datagrams at 4 Mb/s for 0.4 s");
        let (data, last) = seen.ids.split_at(seen.ids.len() - 1);
        assert!(data.windows(2).all(|w| w[0] < w[1]) && data.iter().all(|&id| id > 0 && id < n as i64), "{data:?}");
        assert_eq!(last, [-(n as i64)]);
        assert!(seen.settings_ok);
        let u = r.udp_recv.expect("the report's figures");
        let received = seen.ids.len() as u64;
        assert_eq!((u.packets, u.received, u.lost, u.bytes), (n, received, (n - received) as i64, seen.bytes));
        assert!((u.jitter_s - 0.000_25).abs() < 1e-12);
        assert_eq!(r.upload_bytes, seen.bytes, "what the server counted, the final datagram included");
        assert!(r.upload_duration_s.is_some_and(|w| w > 0.3 && w < 5.0), "{:?}", r.upload_duration_s);
    }

    #[test]
    fn a_hostile_report_is_an_error_and_a_silent_server_leaves_this_sides_figures_with_a_note() {
        let (r, _) = udp_test(Answer::Hostile);
        let e = r.error.expect("a report that cannot be true is an error");
        assert!(e.contains("UDP report") && e.contains("datagrams lost"), "{e}");
        let (r, seen) = udp_test(Answer::Silent);
        assert!(r.error.is_none(), "{:?}", r.error);
        let why = r.missing_report.expect("a note");
        assert!(why.contains("sent no UDP report") && why.contains("10 final datagrams"), "{why}");
        assert_eq!(seen.finals, FINAL_TRIES, "sent again as iperf -c does");
        assert!(r.udp_recv.is_none());
        assert_eq!(r.upload_bytes, (seen.sent() - 1) * 1448, "what this side sent, the final datagram aside");
    }

    #[test]
    fn stock_iperf_s_u_reports_what_it_logs() {
        if std::process::Command::new("iperf").arg("-v").output().is_err() {
            eprintln!("SKIPPED stock iperf -s -u on loopback: `iperf` is not installed (run scripts/install-deps.sh)");
            return;
        }
        let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = std::env::temp_dir().join(format!("headroom-iperf2-udp-{}-{port}.csv", std::process::id()));
        let mut server = std::process::Command::new("iperf")
            .args(["-s", "-u", "-B", "127.0.0.1", "-p", &port.to_string(), "-y", "C", "-o"])
            .arg(&log)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Listening: by the socket table, never by sending it a datagram.
        let t0 = Instant::now();
        while !String::from_utf8_lossy(&std::process::Command::new("ss").arg("-lunH").output().unwrap().stdout)
            .contains(&format!("127.0.0.1:{port} "))
        {
            assert!(t0.elapsed() < Duration::from_secs(10), "iperf -s -u did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        let target = Endpoint {
            host: "127.0.0.1".into(),
            port,
            token: None,
            timeout: Duration::from_secs(2),
            source: Source::default(),
        };
        let spec = ThroughputSpec { len: 1448, udp_rate: Some(2e6), ..tcp_up() };
        let r = throughput(&target, &spec, &AtomicBool::new(false), &mut |_| {});
        // The server logs the test once it answered the final datagram.
        let t0 = Instant::now();
        let line = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(l) = text.lines().find(|l| l.split(',').count() >= 14) {
                break l.to_string();
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "iperf -s -u logged nothing: {text:?}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let _ = server.kill();
        let _ = server.wait();
        let _ = std::fs::remove_file(&log);
        let r = r.unwrap();
        assert!(r.error.is_none() && r.missing_report.is_none(), "{:?} {:?}", r.error, r.missing_report);
        // -y C: ..., bytes, bits/s, jitter ms, lost, total, loss %, out of order.
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| f[i].parse::<f64>().unwrap();
        let u = r.udp_recv.unwrap();
        eprintln!("iperf -s -u: {line}; headroom {:.0} b/s, {u:?}", r.bytes_per_sec() * 8.0);
        assert_eq!(r.upload_bytes as f64, num(7));
        assert_eq!((u.lost as f64, u.packets as f64, u.out_of_order as f64), (num(10), num(11), num(13)));
        assert!((u.jitter_s * 1e3 - num(9)).abs() < 0.0015, "jitter {} ms, iperf {}", u.jitter_s * 1e3, num(9));
        let rate = r.bytes_per_sec() * 8.0;
        assert!((rate / num(8) - 1.0).abs() < 0.02, "headroom {rate:.0} b/s, iperf -s -u {} b/s", num(8));
    }
}
