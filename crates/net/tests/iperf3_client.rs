//! Our iperf3 client against Debian's stock `iperf3 -s`, in process on
//! loopback: the shared measurement loop ends a fixed transfer in every
//! direction. (The iperf3 client's own copy of the loop ended a fixed
//! transfer only when this side sent: a fixed download waited for streams a
//! stock server never closes, and failed as "no data received for 5 s".)

use headroom_net::{iperf3_throughput, Endpoint, ThroughputResult, ThroughputSpec, TrafficDirection};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// A stock iperf3 server on a free loopback port, killed on drop.
struct StockServer {
    child: Child,
    port: u16,
}

impl StockServer {
    fn start() -> StockServer {
        let port = loop {
            let t = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = t.local_addr().unwrap().port();
            if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
                break port;
            }
        };
        let child = Command::new("iperf3")
            .args(["-s", "-p", &port.to_string(), "-B", "127.0.0.1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start iperf3 -s");
        // Ready once its port is taken. Not probed with a connection: a stock server
        // takes any connection for a control connection, and after a failed one it
        // re-opens its port, resetting the connection of the test that follows.
        let t0 = Instant::now();
        while std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            assert!(t0.elapsed() < Duration::from_secs(10), "iperf3 -s on port {port} did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        StockServer { child, port }
    }
}

impl Drop for StockServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One fixed transfer of `bytes`; a run that does not end within 30 s fails
/// instead of hanging the suite.
fn fixed_transfer(server: &StockServer, direction: TrafficDirection, bytes: u64) -> ThroughputResult {
    let endpoint = Endpoint {
        host: "127.0.0.1".into(),
        port: server.port,
        token: None,
        timeout: Duration::from_secs(5),
        source: Default::default(),
    };
    let spec = ThroughputSpec {
        direction,
        streams: 1,
        duration: Duration::from_secs(10),
        bytes: Some(bytes),
        len: headroom_net::DEFAULT_TCP_LEN,
        udp_rate: None,
        rtt_under_load: false,
        window: None,
        skip_rx_copy: false,
        zerocopy: false,
        udp_offload: false,
        sample_interval: None,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(iperf3_throughput(&endpoint, &spec, &AtomicBool::new(false), &mut |_| {}));
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{direction:?} fixed transfer did not end within 30 s"))
        .unwrap_or_else(|e| panic!("{direction:?} fixed transfer: {e}"))
}

#[test]
fn fixed_transfers_end_in_every_direction_against_stock_iperf3() {
    headroom_lab::require_program!("iperf3");
    let _machine = headroom_lab::hold_machine();
    let bytes = 20_000_000;
    for direction in [TrafficDirection::Upload, TrafficDirection::Download, TrafficDirection::Bidir] {
        // A stock server serves one test and then re-opens its port: one server per test.
        let server = StockServer::start();
        let r = fixed_transfer(&server, direction, bytes);
        assert_eq!(r.error, None, "{direction:?}: the transfer ended early");
        assert_eq!(r.protocol, "iperf3");
        if direction != TrafficDirection::Download {
            assert!(r.upload_bytes >= bytes, "{direction:?}: the server counted {} of {bytes} B", r.upload_bytes);
        }
        if direction != TrafficDirection::Upload {
            assert!(r.download_bytes >= bytes, "{direction:?}: received {} of {bytes} B", r.download_bytes);
        }
        // Ended by the count, not by the 5 s stall timeout of a stream that never closes.
        assert!(r.duration_s < 5.0, "{direction:?}: took {:.1} s", r.duration_s);
    }
}
