//! The server against well-behaved and hostile peers, in process on loopback:
//! it keeps serving the next legitimate client with bounded memory.
//!
//! Long (about 900 lines): 22 tests, most of them hostile peers, sharing one in-process
//! server and its raw-socket helpers.

use headroom_net::wire;
use headroom_net::{
    iperf3, Endpoint, Server, ServerConfig, ServerHandle, ServerSetting, Session, ThroughputSpec, TrafficDirection,
};
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn start(tweak: impl FnOnce(&mut ServerConfig)) -> (ServerHandle, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = ServerConfig::loopback(0);
    cfg.spelling = serve_flag;
    cfg.idle_timeout = Duration::from_secs(1);
    let l2 = log.clone();
    cfg.log = Arc::new(move |line: &str| l2.lock().unwrap().push(line.to_string()));
    tweak(&mut cfg);
    (Server::bind(cfg).expect("bind").spawn(), log)
}

/// `headroom serve`'s spelling of the limits these tests see refused.
fn serve_flag(setting: ServerSetting) -> &'static str {
    match setting {
        ServerSetting::MaxDuration => "--max-duration",
        other => other.name(),
    }
}

fn target(h: &ServerHandle) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port: h.addr.port(),
        token: None,
        timeout: Duration::from_secs(3),
        source: Default::default(),
    }
}

fn spec(direction: TrafficDirection, streams: u32) -> ThroughputSpec {
    ThroughputSpec {
        direction,
        streams,
        duration: Duration::from_millis(500),
        bytes: None,
        len: 128 * 1024,
        udp_rate: None,
        rtt_under_load: false,
        window: None,
        skip_rx_copy: false,
        zerocopy: false,
        udp_offload: false,
        sample_interval: None,
    }
}

/// A legitimate client still gets a full test.
fn legit_test_works(h: &ServerHandle) {
    let mut s = Session::open(&target(h)).expect("legit client admitted");
    let r = s.throughput(&spec(TrafficDirection::Upload, 2), &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(r.upload_bytes > 1_000_000, "moved only {} bytes", r.upload_bytes);
    s.close();
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap()))
        .unwrap()
}

#[test]
fn all_directions_and_rr_and_echo() {
    let (h, log) = start(|_| {});
    let mut s = Session::open(&target(&h)).unwrap();
    for (dir, n) in [(TrafficDirection::Upload, 1), (TrafficDirection::Download, 1), (TrafficDirection::Bidir, 2)] {
        let r = s.throughput(&spec(dir, n), &AtomicBool::new(false), &mut |_| {}).unwrap();
        assert!(r.error.is_none(), "{dir:?}: {:?}", r.error);
        match dir {
            TrafficDirection::Upload => assert!(r.upload_bytes > 0 && r.download_bytes == 0),
            TrafficDirection::Download => assert!(r.download_bytes > 0 && r.upload_bytes == 0),
            TrafficDirection::Bidir => assert!(r.download_bytes > 0 && r.upload_bytes > 0),
        }
        assert!(!r.sender_tcp_info.is_empty(), "{dir:?}: sender TCP_INFO missing");
        assert!(r.cpu_remote.is_some());
    }
    let rr = s.rr(64, Duration::from_millis(300), false, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert!(rr.rtt.count() > 100);
    assert_eq!(rr.busy_poll, None, "--busy-poll not asked: nothing recorded");
    // --busy-poll: both ends spin, and the result says so for each.
    let busy = s.rr(64, Duration::from_millis(300), true, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert!(busy.rtt.count() > 0);
    let ends = busy.busy_poll.expect("the busy-poll record");
    assert!(ends.local.spin && ends.remote.spin, "{ends:?}");
    assert_eq!(ends.local, ends.remote, "one machine, one kernel: the same answer to SO_BUSY_POLL");
    let echo = s.udp_echo(20, Duration::from_millis(1), 64, &AtomicBool::new(false), &mut |_, _| {}).unwrap();
    assert_eq!(echo.received, 20);
    s.close();
    assert_eq!(log.lock().unwrap().len(), 3, "one log line per test");
}

#[test]
fn fixed_transfer_moves_exactly_the_bytes() {
    let (h, _) = start(|_| {});
    let mut s = Session::open(&target(&h)).unwrap();
    let mut sp = spec(TrafficDirection::Upload, 2);
    sp.bytes = Some(50_000_000);
    let r = s.throughput(&sp, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert_eq!(r.upload_bytes, 50_000_000);
    sp.direction = TrafficDirection::Download;
    let r = s.throughput(&sp, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert_eq!(r.download_bytes, 50_000_000);
}

/// `--skip-rx-copy`: receivers at both ends drop the bytes in the kernel
/// (MSG_TRUNC), count every one of them, and the result says which end did.
#[test]
fn receivers_that_skip_the_copy_count_every_byte_and_say_so() {
    let mut sp = spec(TrafficDirection::Upload, 2);
    sp.skip_rx_copy = true;
    let sp = each_end_records_its_copy_mode(sp, |r| r.rx_copy, CopyKind::Receivers);
    let r = copy_mode_run(&ThroughputSpec { skip_rx_copy: false, ..sp });
    assert_eq!(r.rx_copy, None, "not asked: nothing recorded");
}

/// `--zerocopy`: senders at both ends hand the kernel their payload by
/// reference; every byte is still counted, and the result says which end
/// did. Writes under the size where it pays are copied, and say so.
#[test]
fn senders_by_reference_count_every_byte_and_say_so() {
    use headroom_net::CopySkipped;
    let mut sp = spec(TrafficDirection::Upload, 2);
    sp.zerocopy = true;
    let sp = each_end_records_its_copy_mode(sp, |r| r.zerocopy, CopyKind::Senders);
    let r = copy_mode_run(&ThroughputSpec { len: 16 * 1024, ..sp.clone() });
    assert_eq!(r.zerocopy, Some(CopySkipped { local: Some(false), remote: Some(false) }), "16 KiB writes are copied");
    let r = copy_mode_run(&ThroughputSpec { zerocopy: false, ..sp });
    assert_eq!(r.zerocopy, None, "not asked: nothing recorded");
}

/// Which streams a copy mode concerns.
#[derive(Clone, Copy, PartialEq)]
enum CopyKind {
    Receivers,
    Senders,
}

/// Runs `sp` (a copy mode asked) up, down and both ways, 50 MB each way:
/// every byte arrives, and `recorded` says the mode was applied (Linux) at
/// exactly the ends whose streams it concerns. Returns the bidir spec.
fn each_end_records_its_copy_mode(
    mut sp: ThroughputSpec,
    recorded: fn(&headroom_net::ThroughputResult) -> Option<headroom_net::CopySkipped>,
    kind: CopyKind,
) -> ThroughputSpec {
    use headroom_net::CopySkipped;
    let applied = cfg!(target_os = "linux");
    sp.bytes = Some(50_000_000);
    for direction in [TrafficDirection::Upload, TrafficDirection::Download, TrafficDirection::Bidir] {
        sp.direction = direction;
        let r = copy_mode_run(&sp);
        let (up, down) = (direction != TrafficDirection::Download, direction != TrafficDirection::Upload);
        assert_eq!(
            (r.upload_bytes, r.download_bytes),
            (if up { 50_000_000 } else { 0 }, if down { 50_000_000 } else { 0 })
        );
        // Senders up and receivers down are this end's; the other two the server's.
        let (local, remote) = if kind == CopyKind::Senders { (up, down) } else { (down, up) };
        let want = CopySkipped { local: local.then_some(applied), remote: remote.then_some(applied) };
        assert_eq!(recorded(&r), Some(want), "{direction:?}");
    }
    sp
}

/// One test against a fresh headroom server.
fn copy_mode_run(sp: &ThroughputSpec) -> headroom_net::ThroughputResult {
    let (h, _) = start(|_| {});
    let mut s = Session::open(&target(&h)).unwrap();
    s.throughput(sp, &AtomicBool::new(false), &mut |_| {}).unwrap()
}

/// Every datagram sent is counted once, as received or as lost, each
/// received one at its own length, and none out of order. A few may be lost
/// on loopback when the machine is loaded (the receiver's socket buffer
/// overflows while its thread waits for a CPU: 44 of 2000 in one CI
/// rehearsal); a receiver that counted a coalesced GRO buffer as one
/// datagram would lose most of them, so more than a tenth fails.
fn assert_every_datagram_counted(u: &headroom_net::UdpRecvSummary, sent: u64, len: u64, direction: TrafficDirection) {
    // Up to the last datagram seen, each is received or lost (a lost tail
    // leaves no gap to count).
    assert_eq!(u.received as i64 + u.lost, u.packets as i64, "{direction:?}: {u:?}");
    assert!(u.packets <= sent, "{direction:?}: {u:?}");
    assert_eq!(u.bytes, u.received * len, "{direction:?}: {u:?}");
    assert_eq!(u.out_of_order, 0, "{direction:?}: {u:?}");
    assert!(sent - u.received <= sent / 10, "{direction:?}: {u:?}");
    if u.received < sent {
        eprintln!("{direction:?}: {} of {sent} datagrams lost (a loaded machine's receive buffer)", sent - u.received);
    }
}

/// `--gsro`: senders hand the kernel bursts of datagrams in one call (GSO)
/// and receivers split what their kernel coalesced (GRO); every datagram is
/// still counted on its own, and the result says which end did what.
#[test]
fn udp_with_segmentation_offload_counts_every_datagram_and_says_so() {
    use headroom_net::{UdpOffload, UdpOffloadEnd};
    let (h, _) = start(|_| {});
    let mut s = Session::open(&target(&h)).unwrap();
    let mut sp = spec(TrafficDirection::Upload, 1);
    let datagrams = 3_000u64;
    (sp.udp_rate, sp.len, sp.bytes, sp.udp_offload) = (Some(200e6), 1448, Some(datagrams * 1448), true);
    let on = cfg!(target_os = "linux");
    let (gso, gro) = (UdpOffloadEnd { gso: Some(on), gro: None }, UdpOffloadEnd { gso: None, gro: Some(on) });
    for (direction, local, remote) in [(TrafficDirection::Upload, gso, gro), (TrafficDirection::Download, gro, gso)] {
        sp.direction = direction;
        let r = s.throughput(&sp, &AtomicBool::new(false), &mut |_| {}).unwrap();
        let u = r.udp_recv.expect("the receiver's UDP figures");
        assert_every_datagram_counted(&u, datagrams, 1448, direction);
        assert_eq!(r.udp_offload, Some(UdpOffload { local: Some(local), remote: Some(remote) }), "{direction:?}");
    }
}

/// iperf3 3.21's `--gsro` asks the server for GSO and GRO in its
/// parameters (`gso`, `gro`): headroom's iperf3 client asks as 3.21 does,
/// and `headroom serve --iperf3` does it at its end and says so in its log,
/// every datagram still counted.
#[test]
fn an_iperf3_client_asking_for_gsro_gets_it_at_the_servers_end() {
    let (h, log) = start(|c| c.allow_iperf3 = true);
    let mut sp = spec(TrafficDirection::Upload, 1);
    let datagrams = 2_000u64;
    (sp.udp_rate, sp.len, sp.bytes, sp.udp_offload) = (Some(100e6), 1448, Some(datagrams * 1448), true);
    let on = cfg!(target_os = "linux");
    for direction in [TrafficDirection::Upload, TrafficDirection::Download] {
        sp.direction = direction;
        let before = log.lock().unwrap().len();
        let r = headroom_net::iperf3_throughput(&target(&h), &sp, &AtomicBool::new(false), &mut |_| {}).unwrap();
        let u = r.udp_recv.expect("the receiver's UDP figures");
        assert_every_datagram_counted(&u, datagrams, 1448, direction);
        let offload = r.udp_offload.expect("asked: recorded");
        assert!(offload.local.is_some() && offload.remote.is_none(), "an iperf3 server does not say: {offload:?}");
        let line = iperf3_log_line(&log, before);
        assert!(line.contains(&format!(" udp_offload={on} ")), "{direction:?}: {line}");
    }
    // Not asked: the log says nothing of it.
    sp.udp_offload = false;
    let before = log.lock().unwrap().len();
    headroom_net::iperf3_throughput(&target(&h), &sp, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let line = iperf3_log_line(&log, before);
    assert!(!line.contains("udp_offload"), "{line}");
}

/// iperf3's -Z (`zerocopy`) and 3.19's --skip-rx-copy (`skip_rx_copy`)
/// asked of a headroom server over the iperf3 protocol: it does its end of
/// each and logs it; the client's record leaves the server's end unknown.
#[test]
fn an_iperf3_client_asking_for_zerocopy_and_skip_rx_copy_gets_them_at_the_servers_end() {
    let (h, log) = start(|c| c.allow_iperf3 = true);
    let mut sp = spec(TrafficDirection::Upload, 1);
    (sp.bytes, sp.zerocopy, sp.skip_rx_copy) = (Some(20_000_000), true, true);
    let on = cfg!(target_os = "linux");
    for (direction, words) in [(TrafficDirection::Upload, "skip_rx_copy"), (TrafficDirection::Download, "zerocopy")] {
        sp.direction = direction;
        let before = log.lock().unwrap().len();
        let r = headroom_net::iperf3_throughput(&target(&h), &sp, &AtomicBool::new(false), &mut |_| {}).unwrap();
        assert!(r.zerocopy.is_some_and(|z| z.remote.is_none()), "an iperf3 server does not say: {:?}", r.zerocopy);
        assert!(r.rx_copy.is_some_and(|z| z.remote.is_none()), "an iperf3 server does not say: {:?}", r.rx_copy);
        let line = iperf3_log_line(&log, before);
        assert!(line.contains(&format!(" {words}={on} ")), "{direction:?}: {line}");
    }
}

/// The server's log line of the iperf3 test after line `before`: it is
/// written once the client's last word arrived, so it may come a moment
/// after the client returned.
fn iperf3_log_line(log: &Mutex<Vec<String>>, before: usize) -> String {
    let t0 = Instant::now();
    loop {
        let lines = log.lock().unwrap()[before..].to_vec();
        if let Some(line) = lines.iter().find(|l| l.contains("protocol=iperf3")) {
            return line.clone();
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "no iperf3 test logged: {lines:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn udp_stream_reports_loss_and_jitter() {
    let (h, _) = start(|_| {});
    let mut s = Session::open(&target(&h)).unwrap();
    let mut sp = spec(TrafficDirection::Upload, 1);
    sp.udp_rate = Some(50e6);
    sp.len = 1448;
    let r = s.throughput(&sp, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let u = r.udp_recv.expect("server's UDP figures");
    assert!(u.packets > 1000, "{u:?}");
    assert_eq!(r.udp_offload, None, "--gsro not asked: nothing recorded");
    // 50 Mb/s for 0.5 s is 3.1 MB: the pacing holds the rate within 10%.
    let rate = r.upload_bytes as f64 * 8.0 / r.duration_s;
    assert!((rate - 50e6).abs() < 5e6, "paced at {rate}");
}

#[test]
fn token_is_enforced() {
    let (h, _) = start(|c| c.token = Some("s3cret".into()));
    let mut t = target(&h);
    let err = Session::open(&t).err().expect("no token refused").to_string();
    assert!(err.contains("token"), "{err}");
    t.token = Some("wrong".into());
    assert!(Session::open(&t).is_err());
    t.token = Some("s3cret".into());
    Session::open(&t).expect("right token admitted").close();
}

#[test]
fn limits_refuse_10000_streams_and_a_year_long_test() {
    let (h, _) = start(|c| c.max_duration = Duration::from_secs(60));
    let mut s = Session::open(&target(&h)).unwrap();
    let err =
        s.throughput(&spec(TrafficDirection::Upload, 10_000), &AtomicBool::new(false), &mut |_| {}).err().unwrap();
    assert!(err.to_string().contains("10000 streams"), "{err}");
    let mut year = spec(TrafficDirection::Upload, 1);
    year.duration = Duration::from_secs(365 * 86_400);
    let err = s.throughput(&year, &AtomicBool::new(false), &mut |_| {}).err().unwrap();
    assert!(err.to_string().contains("max-duration"), "{err}");
    // iperf3 side: 10000 parallel streams are refused with SERVER_ERROR.
    let mut c = TcpStream::connect(h.addr).unwrap();
    c.write_all(&iperf3::new_cookie()).unwrap();
    assert_eq!(iperf3::read_state(&mut c).unwrap(), iperf3::PARAM_EXCHANGE);
    iperf3::write_json(&mut c, &serde_json::json!({"tcp": true, "parallel": 10000, "time": 1, "len": 1000})).unwrap();
    assert_eq!(iperf3::read_state(&mut c).unwrap(), iperf3::SERVER_ERROR);
    s.throughput(&spec(TrafficDirection::Download, 1), &AtomicBool::new(false), &mut |_| {}).expect("still serving");
}

#[test]
fn hostile_peers_leave_the_server_serving_with_bounded_memory() {
    let (h, _) = start(|c| c.max_clients = 2);
    legit_test_works(&h);
    let rss_before = rss_kib();
    // Random bytes instead of a greeting.
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..20 {
        let mut c = TcpStream::connect(h.addr).unwrap();
        let junk: Vec<u8> = (0..4096).map(|_| rng.u8(..)).collect();
        let _ = c.write_all(&junk);
    }
    // A greeting, then a JSON length prefix of 4 GB.
    let mut c = TcpStream::connect(h.addr).unwrap();
    c.write_all(&wire::greeting()).unwrap();
    c.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let mut reply = Vec::new();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = c.read_to_end(&mut reply);
    assert!(String::from_utf8_lossy(&reply).contains("exceeds"), "the server says why it refused");
    // iperf3 control connection with a 4 GB parameter length.
    let mut c = TcpStream::connect(h.addr).unwrap();
    c.write_all(&iperf3::new_cookie()).unwrap();
    assert_eq!(iperf3::read_state(&mut c).unwrap(), iperf3::PARAM_EXCHANGE);
    c.write_all(&u32::MAX.to_be_bytes()).unwrap();
    // Slow-loris: a greeting, then silence; and 100 half-open connections.
    let mut loris = TcpStream::connect(h.addr).unwrap();
    loris.write_all(&wire::greeting()).unwrap();
    let half_open: Vec<TcpStream> = (0..100).map(|_| TcpStream::connect(h.addr).unwrap()).collect();
    // A data stream with a cookie no test knows is a new control connection, not a stream.
    let mut stray = TcpStream::connect(h.addr).unwrap();
    stray.write_all(&iperf3::new_cookie()).unwrap();
    // The legitimate client is served meanwhile.
    legit_test_works(&h);
    // The silent ones are dropped within the idle timeout (1 s here).
    loris.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = Instant::now();
    let mut rest = Vec::new();
    let _ = loris.read_to_end(&mut rest);
    assert!(t0.elapsed() < Duration::from_secs(3), "slow-loris held for {:?}", t0.elapsed());
    drop(half_open);
    legit_test_works(&h);
    let grown = rss_kib().saturating_sub(rss_before);
    assert!(grown < 64 * 1024, "memory grew by {grown} KiB");
}

#[test]
fn busy_server_refuses_then_a_stalled_client_frees_its_slot() {
    let (h, log) = start(|c| c.max_clients = 1);
    // Client A starts a test and then stalls: it keeps its sockets open and silent.
    let t = target(&h);
    let mut a = TcpStream::connect(h.addr).unwrap();
    let mut msg = wire::greeting().to_vec();
    let body = serde_json::to_vec(&wire::Hello::Control { client_version: "t".into() }).unwrap();
    msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
    msg.extend_from_slice(&body);
    a.write_all(&msg).unwrap();
    let _: wire::Reply = wire::read_frame(&mut a, wire::MAX_FRAME).unwrap();
    wire::write_frame(
        &mut a,
        &wire::Request::Test(wire::TestRequest {
            udp: false,
            direction: TrafficDirection::Download,
            streams: 1,
            duration_ms: 60_000,
            bytes: None,
            len: 65536,
            rate_bits: None,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
        }),
    )
    .unwrap();
    let _: wire::Reply = wire::read_frame(&mut a, wire::MAX_FRAME).unwrap();
    // (no data streams opened: the server waits at most the idle timeout for them)
    let err = Session::open(&t).err().expect("one slot, taken").to_string();
    assert!(err.contains("busy"), "{err}");
    // An iperf3 client is told "busy" too.
    let mut c = TcpStream::connect(h.addr).unwrap();
    c.write_all(&iperf3::new_cookie()).unwrap();
    assert_eq!(iperf3::read_state(&mut c).unwrap(), iperf3::ACCESS_DENIED);
    // Within the idle timeout (1 s) plus slack, the slot is free again.
    let t0 = Instant::now();
    loop {
        match Session::open(&t) {
            Ok(s) => {
                s.close();
                break;
            }
            Err(_) if t0.elapsed() < Duration::from_secs(4) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => panic!("slot not freed after {:?}: {e}", t0.elapsed()),
        }
    }
    drop(a);
    assert!(log.lock().unwrap().iter().any(|l| l.contains("busy")));
}

/// Both generations of the iperf3 UDP hello are answered in kind.
#[test]
fn iperf3_udp_hello_old_and_new() {
    let (h, _) = start(|_| {});
    for (hello, reply) in [
        (iperf3::UDP_HELLO.to_vec(), iperf3::UDP_REPLY.to_vec()),
        (iperf3::LEGACY_UDP_HELLO.to_ne_bytes().to_vec(), iperf3::LEGACY_UDP_REPLY.to_ne_bytes().to_vec()),
    ] {
        let mut c = TcpStream::connect(h.addr).unwrap();
        let cookie = iperf3::new_cookie();
        c.write_all(&cookie).unwrap();
        assert_eq!(iperf3::read_state(&mut c).unwrap(), iperf3::PARAM_EXCHANGE);
        iperf3::write_json(
            &mut c,
            &serde_json::json!({"udp": true, "parallel": 1, "time": 1, "len": 1000, "bandwidth": 1000000}),
        )
        .unwrap();
        assert_eq!(iperf3::read_state(&mut c).unwrap(), iperf3::CREATE_STREAMS);
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.connect(h.addr).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        u.send(&hello).unwrap();
        let mut buf = [0u8; 16];
        let n = u.recv(&mut buf).expect("hello answered");
        assert_eq!(&buf[..n], &reply[..]);
        assert_eq!(iperf3::read_state(&mut c).unwrap(), iperf3::TEST_START);
        iperf3::write_state(&mut c, iperf3::CLIENT_TERMINATE).unwrap();
    }
    legit_test_works(&h);
}

/// UDP echo answers only known sessions, only to their address, never larger.
#[test]
fn udp_echo_is_not_an_amplifier() {
    let (h, _) = start(|_| {});
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut msg = wire::UDP_ECHO_TAG.to_vec();
    msg.extend_from_slice(&[0u8; wire::KEY_LEN]);
    msg.extend_from_slice(&[1u8; 8]);
    u.send_to(&msg, h.addr).unwrap();
    let mut buf = [0u8; 2048];
    assert!(u.recv(&mut buf).is_err(), "unknown session key answered");
}

/// A TCP connection to `to` from the loopback address `from` (all of 127/8 is
/// local on Linux): hostile peers get their own source address, so a
/// per-source bound is tested apart from the legitimate client on 127.0.0.1.
fn connect_from(from: [u8; 4], to: std::net::SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&std::net::SocketAddr::from((from, 0)).into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// Keeps writing one byte every `every` on each connection (as long as it stays
/// open) until `stop`; returns, per connection, when the server closed it.
fn trickle(
    conns: Vec<TcpStream>,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Option<Duration>>> {
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut closed = vec![None; conns.len()];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            for (c, closed) in conns.iter().zip(closed.iter_mut()) {
                if closed.is_none() && (&*c).write_all(b" ").is_err() {
                    *closed = Some(t0.elapsed());
                }
            }
            std::thread::sleep(every);
        }
        closed
    })
}

fn token_target(h: &ServerHandle, token: &str) -> Endpoint {
    Endpoint { token: Some(token.into()), ..target(h) }
}

/// Issue 12.5: 260 connections from one source and 300 more from 30 others, each
/// with a greeting and a length prefix, then a byte every 500 ms (well inside the
/// old per-read timeout), must neither lock out a token holder nor live past the
/// pre-auth deadline.
#[test]
fn preauth_slow_loris_neither_locks_out_token_holders_nor_outlives_the_deadline() {
    let (h, _) = start(|c| {
        c.token = Some("s3cret".into());
        c.idle_timeout = Duration::from_secs(2);
    });
    let mut loris = Vec::new();
    let sources: Vec<[u8; 4]> =
        std::iter::repeat_n([127, 0, 0, 2], 260).chain((0..300).map(|i| [127, 0, 1, (i / 10) as u8 + 1])).collect();
    for from in sources {
        let mut c = connect_from(from, h.addr);
        c.write_all(&wire::greeting()).unwrap();
        c.write_all(&100u32.to_be_bytes()).unwrap();
        loris.push(c);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let trickler = trickle(loris, Duration::from_millis(500), stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    let mut s = Session::open(&token_target(&h, "s3cret")).expect("token holder admitted during the slow-loris");
    let r = s.throughput(&spec(TrafficDirection::Upload, 1), &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert!(r.error.is_none() && r.upload_bytes > 0, "{:?}", r.error);
    s.close();
    // The whole pre-auth phase has one deadline (2 s here): the tricklers are gone
    // well before the old per-read timeout would ever fire.
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let closed = trickler.join().unwrap();
    let open = closed.iter().filter(|c| c.is_none()).count();
    assert_eq!(open, 0, "{open} trickling connections still open after twice the pre-auth deadline");
}

/// Issue 12.6: iperf3 peers with unknown cookies that trickle their parameter JSON
/// hold no test slot: a token holder is served meanwhile.
#[test]
fn iperf3_peers_trickling_parameters_hold_no_slot() {
    let (h, _) = start(|c| {
        c.token = Some("s3cret".into());
        c.allow_iperf3 = true;
        c.max_clients = 4;
        c.idle_timeout = Duration::from_secs(3);
    });
    let mut peers = Vec::new();
    for i in 0..4 {
        let mut c = connect_from([127, 0, 2, i + 1], h.addr);
        c.write_all(&iperf3::new_cookie()).unwrap();
        assert_eq!(iperf3::read_state(&mut c).unwrap(), iperf3::PARAM_EXCHANGE);
        c.write_all(&200u32.to_be_bytes()).unwrap();
        peers.push(c);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let trickler = trickle(peers, Duration::from_millis(500), stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    let mut s = Session::open(&token_target(&h, "s3cret")).expect("token holder not kept at 'busy'");
    s.throughput(&spec(TrafficDirection::Download, 1), &AtomicBool::new(false), &mut |_| {}).unwrap();
    s.close();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    trickler.join().unwrap();
}

/// Relays one connection from a local listener to `to`, recording what the client sent.
fn recording_relay(to: std::net::SocketAddr) -> (u16, std::thread::JoinHandle<Vec<u8>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (mut client, _) = l.accept().unwrap();
        let mut server = TcpStream::connect(to).unwrap();
        let mut back = server.try_clone().unwrap();
        let mut client_w = client.try_clone().unwrap();
        let down = std::thread::spawn(move || {
            let _ = std::io::copy(&mut back, &mut client_w);
        });
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = client.read(&mut buf) {
            if n == 0 || server.write_all(&buf[..n]).is_err() {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        let _ = server.shutdown(std::net::Shutdown::Both);
        let _ = down.join();
        seen
    });
    (port, t)
}

/// Issue 12.7: the token never crosses the wire, yet only its holder gets in.
#[test]
fn the_token_never_crosses_the_wire() {
    let token = "S3CRET-never-on-the-wire";
    let (h, _) = start(|c| c.token = Some(token.into()));
    let (port, relay) = recording_relay(h.addr);
    let t = Endpoint {
        host: "127.0.0.1".into(),
        port,
        token: Some(token.into()),
        timeout: Duration::from_secs(3),
        source: Default::default(),
    };
    Session::open(&t).expect("admitted through the relay").close();
    let seen = relay.join().unwrap();
    assert!(seen.len() > wire::GREETING_LEN, "the relay saw the handshake");
    assert!(
        !seen.windows(token.len()).any(|w| w == token.as_bytes()),
        "token on the wire: {}",
        String::from_utf8_lossy(&seen)
    );
}

/// Issue 12.7: wrong guesses are throttled per source and logged in aggregate.
#[test]
fn wrong_token_guesses_are_throttled_and_logged_in_aggregate() {
    let (h, log) = start(|c| c.token = Some("s3cret".into()));
    let t0 = Instant::now();
    let (mut wrong, mut throttled) = (0, 0);
    for i in 0..300 {
        let err = Session::open(&token_target(&h, &format!("guess{i}"))).err().expect("a guess is refused").to_string();
        if err.contains("too many") {
            throttled += 1;
        } else {
            assert!(err.contains("token"), "{err}");
            wrong += 1;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    // A burst, then one guess per two seconds.
    assert!(f64::from(wrong) <= 5.0 + secs / 2.0 + 1.0, "{wrong} guesses checked in {secs:.1}s, {throttled} throttled");
    let lines: Vec<String> = log.lock().unwrap().clone();
    assert!(lines.len() <= 2, "one log line per guess: {} lines", lines.len());
    // The aggregate line names the count once the interval is over.
    drop(h);
}

/// Issue 12.8: a client that goes silent mid-test behind a dead link (its sockets
/// stay open, nothing moves) frees its slot at the idle timeout, not twice that.
#[test]
fn a_client_silent_behind_a_dead_link_frees_its_slot_at_the_idle_timeout() {
    let idle = Duration::from_secs(2);
    let (h, _) = start(|c| {
        c.max_clients = 1;
        c.idle_timeout = idle;
    });
    let mut a = TcpStream::connect(h.addr).unwrap();
    let mut msg = wire::greeting().to_vec();
    let body = serde_json::to_vec(&serde_json::json!({"role": "control", "client_version": "t"})).unwrap();
    msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
    msg.extend_from_slice(&body);
    a.write_all(&msg).unwrap();
    let welcome: serde_json::Value = wire::read_frame(&mut a, wire::MAX_FRAME).unwrap();
    let session = welcome["session"].as_str().expect("welcome").to_string();
    let test = wire::Request::Test(wire::TestRequest {
        udp: false,
        direction: TrafficDirection::Upload,
        streams: 1,
        duration_ms: 60_000,
        bytes: None,
        len: 65536,
        rate_bits: None,
        window: None,
        skip_rx_copy: false,
        zerocopy: false,
        udp_offload: false,
    });
    wire::write_frame(&mut a, &test).unwrap();
    let ready: serde_json::Value = wire::read_frame(&mut a, wire::MAX_FRAME).unwrap();
    let mut data = TcpStream::connect(h.addr).unwrap();
    let mut msg = wire::greeting().to_vec();
    let keys = wire::SessionKeys::from_hex(&session).expect("a server without a token sends the secret");
    let test = ready["test"].as_u64().unwrap() as u32;
    let hello = wire::Hello::Stream {
        session: wire::to_hex(&keys.id()),
        test,
        index: 0,
        proof: wire::to_hex(&keys.stream_proof(test, 0)),
    };
    let body = serde_json::to_vec(&hello).unwrap();
    msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
    msg.extend_from_slice(&body);
    data.write_all(&msg).unwrap();
    let started: serde_json::Value = wire::read_frame(&mut a, wire::MAX_FRAME).unwrap();
    assert_eq!(started["msg"], "started");
    let chunk = vec![0u8; 65536];
    for _ in 0..50 {
        data.write_all(&chunk).unwrap();
    }
    // The link dies: nothing more moves, no FIN, no RST.
    let silent = Instant::now();
    loop {
        match Session::open(&target(&h)) {
            Ok(s) => {
                s.close();
                break;
            }
            Err(e) => {
                assert!(e.to_string().contains("busy"), "{e}");
                assert!(
                    silent.elapsed() < idle + idle / 2,
                    "slot still held {:?} after the client went silent (--idle-timeout {idle:?})",
                    silent.elapsed()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    drop((a, data));
}

/// Writes the greeting and `hello` on `c`.
fn send_hello(c: &mut TcpStream, hello: &wire::Hello) {
    let mut msg = wire::greeting().to_vec();
    let body = serde_json::to_vec(hello).unwrap();
    msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
    msg.extend_from_slice(&body);
    c.write_all(&msg).unwrap();
}

/// Issue 27.3: the Welcome of a token server carried the session key in
/// clear, and a data stream presenting it joined from any address (an
/// observer took a client's whole download). Now the secret is derived on
/// both ends, a stream proves itself for its own test and index, and only
/// the session's address may join.
#[test]
fn data_streams_join_only_from_the_sessions_address_with_their_own_proof() {
    let token = "a-token-of-some-length-27";
    let (h, log) = start(|c| {
        c.token = Some(token.into());
        c.idle_timeout = Duration::from_secs(3);
    });
    let mut control = connect_from([127, 0, 0, 1], h.addr);
    send_hello(&mut control, &wire::Hello::Control { client_version: "test".into() });
    let challenge: serde_json::Value = wire::read_frame(&mut control, wire::MAX_FRAME).unwrap();
    let theirs = wire::from_hex::<{ wire::NONCE_LEN }>(challenge["nonce"].as_str().unwrap()).unwrap();
    let ours = [42u8; wire::NONCE_LEN];
    let proof = wire::to_hex(&wire::auth_proof(token, &theirs, &ours));
    wire::write_frame(&mut control, &wire::AuthAnswer { nonce: wire::to_hex(&ours), proof }).unwrap();
    let welcome: serde_json::Value = wire::read_frame(&mut control, wire::MAX_FRAME).unwrap();
    assert_eq!(welcome["msg"], "welcome", "{welcome}");
    assert_eq!(welcome["session"], "", "the session secret crossed the wire: {welcome}");
    let keys = wire::SessionKeys::derived(token, &theirs, &ours);

    let ask = wire::Request::Test(wire::TestRequest {
        udp: false,
        direction: TrafficDirection::Download,
        streams: 1,
        duration_ms: 1500,
        bytes: None,
        len: 65536,
        rate_bits: None,
        window: None,
        skip_rx_copy: false,
        zerocopy: false,
        udp_offload: false,
    });
    wire::write_frame(&mut control, &ask).unwrap();
    let ready: serde_json::Value = wire::read_frame(&mut control, wire::MAX_FRAME).unwrap();
    let test = ready["test"].as_u64().expect("test ready") as u32;
    let stream_hello = |index_proved: u32| wire::Hello::Stream {
        session: wire::to_hex(&keys.id()),
        test,
        index: 0,
        proof: wire::to_hex(&keys.stream_proof(test, index_proved)),
    };
    // An observer replaying the very hello the client sends, from another address.
    let mut observer = connect_from([127, 0, 0, 2], h.addr);
    send_hello(&mut observer, &stream_hello(0));
    // The right address with a proof made for another stream.
    let mut replayed = connect_from([127, 0, 0, 1], h.addr);
    send_hello(&mut replayed, &stream_hello(1));
    std::thread::sleep(Duration::from_millis(200));
    let mut own = connect_from([127, 0, 0, 1], h.addr);
    send_hello(&mut own, &stream_hello(0));
    let started: serde_json::Value = wire::read_frame(&mut control, wire::MAX_FRAME).unwrap();
    assert_eq!(started["msg"], "started", "{started}");
    let drained = |mut c: TcpStream| {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0usize;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(700) {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        got
    };
    assert_eq!(drained(observer), 0, "the observer's stream got data");
    assert_eq!(drained(replayed), 0, "a stream with another stream's proof got data");
    assert!(drained(own) > 0, "the client's own stream got nothing");
    let lines = log.lock().unwrap().clone();
    assert!(lines.iter().any(|l| l.contains("127.0.0.2") && l.contains("no session of this address")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("wrong proof")), "{lines:?}");
}

/// The RR server has no socket timeout (it would arm a kernel timer in every
/// read of a round trip): a watcher lets a client go that stops sending for
/// the idle timeout, and leaves one alone that keeps echoing past it.
#[test]
fn a_silent_round_trip_client_is_let_go_at_the_idle_timeout() {
    let idle = Duration::from_secs(1);
    let (h, _) = start(|c| c.idle_timeout = idle);
    let mut control = TcpStream::connect(h.addr).unwrap();
    send_hello(&mut control, &wire::Hello::Control { client_version: "test".into() });
    let welcome: serde_json::Value = wire::read_frame(&mut control, wire::MAX_FRAME).unwrap();
    let keys = wire::SessionKeys::from_hex(welcome["session"].as_str().unwrap()).expect("the session's secret");
    let mut rr = open_rr(&h, &keys, 64);
    rr.set_read_timeout(Some(idle * 10)).unwrap();
    let mut msg = vec![7u8; 64];
    // Round trips spread over twice the idle timeout: the server keeps echoing.
    let echoing = Instant::now();
    let mut last_echo = echoing;
    while echoing.elapsed() < idle * 2 {
        // The control connection is kept alive by the RR traffic itself.
        std::thread::sleep(Duration::from_millis(50));
        rr.write_all(&msg).unwrap();
        rr.read_exact(&mut msg).expect("an active client keeps its echoes");
        last_echo = Instant::now();
    }
    let mut byte = [0u8; 1];
    let ended = rr.read(&mut byte);
    let silent_for = last_echo.elapsed();
    assert!(matches!(ended, Ok(0)), "the server should close a silent RR stream, got {ended:?}");
    // The server counts its echo as the last activity, a moment before this end received it.
    assert!(
        silent_for + Duration::from_millis(50) >= idle,
        "closed {silent_for:?} after the last echo, before the idle timeout {idle:?}"
    );
    drop(control);
}

/// A request/response stream of `size`-byte messages in the session `keys` name.
fn open_rr(h: &ServerHandle, keys: &wire::SessionKeys, size: u32) -> TcpStream {
    let mut rr = TcpStream::connect(h.addr).unwrap();
    let hello = wire::Hello::Rr {
        session: wire::to_hex(&keys.id()),
        size,
        proof: wire::to_hex(&keys.rr_proof(size)),
        busy_poll: false,
    };
    send_hello(&mut rr, &hello);
    rr
}

/// Each RR stream holds a thread on the server: one session may hold four
/// at once, the next is closed with a log line, and a slot comes back when
/// a stream ends.
#[test]
fn a_session_holds_at_most_four_round_trip_streams() {
    let (h, log) = start(|c| c.idle_timeout = Duration::from_secs(5));
    let mut control = TcpStream::connect(h.addr).unwrap();
    send_hello(&mut control, &wire::Hello::Control { client_version: "test".into() });
    let welcome: serde_json::Value = wire::read_frame(&mut control, wire::MAX_FRAME).unwrap();
    let keys = wire::SessionKeys::from_hex(welcome["session"].as_str().unwrap()).expect("the session's secret");
    let echoes = |rr: &mut TcpStream| {
        rr.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut msg = *b"ping";
        rr.write_all(&msg).is_ok() && rr.read_exact(&mut msg).is_ok() && &msg == b"ping"
    };
    let mut held: Vec<TcpStream> = (0..4).map(|_| open_rr(&h, &keys, 4)).collect();
    assert!(held.iter_mut().all(echoes), "four streams are served");
    let mut fifth = open_rr(&h, &keys, 4);
    assert!(!echoes(&mut fifth), "a fifth stream of the session is closed");
    let t0 = Instant::now();
    while !log.lock().unwrap().iter().any(|l| l.contains("request/response stream refused")) {
        assert!(t0.elapsed() < Duration::from_secs(5), "no log line: {:?}", log.lock().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    // One stream ends: its slot is free again.
    drop(held.pop());
    let t0 = Instant::now();
    loop {
        if echoes(&mut open_rr(&h, &keys, 4)) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "the ended stream's slot never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(control);
}
