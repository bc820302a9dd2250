//! Helpers shared by the network tests: a `headroom serve` child whose log
//! lines are collected, free ports, and running the binary.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_headroom")
}

/// A port that was free a moment ago (TCP and UDP).
pub fn free_port() -> u16 {
    loop {
        let t = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = t.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A child process whose stdout lines are collected; killed on drop.
pub struct Served {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Served {
    /// Starts `cmd` (stdout piped) and waits until `port` on `host` accepts.
    pub fn start(mut cmd: Command, host: &str, port: u16) -> Served {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start server");
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l2 = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                l2.lock().unwrap().push(line);
            }
        });
        let t0 = Instant::now();
        // Probe with RST-closed connections so the probe leaves no TIME_WAIT behind.
        let addr: std::net::SocketAddr = format!("{host}:{port}").parse().expect("host is an IP literal");
        while headroom_net::connect_once(
            addr,
            Duration::from_secs(1),
            &Default::default(),
            headroom_net::Close::Graceful,
        )
        .is_err()
        {
            assert!(t0.elapsed() < Duration::from_secs(10), "server on {host}:{port} did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        Served { child, lines }
    }

    /// Waits until at least `n` log lines arrived; returns them.
    pub fn wait_lines(&self, n: usize, timeout: Duration) -> Vec<String> {
        let t0 = Instant::now();
        loop {
            let l = self.lines.lock().unwrap().clone();
            if l.len() >= n || t0.elapsed() > timeout {
                return l;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bytes=N` from a server log line.
pub fn logged_bytes(line: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("bytes="))
        .and_then(|v| v.parse().ok())
        .expect("bytes= in log line")
}

/// Runs a command and returns its output.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run command")
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Within `tol` (relative) of each other.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs())
}
