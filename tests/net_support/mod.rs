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
    /// Starts `cmd` (stdout piped) and waits until `port` on `host` accepts:
    /// for peers' servers (iperf3); `headroom serve` starts with [`Served::serve`].
    pub fn start(mut cmd: Command, host: &str, port: u16) -> Served {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start server");
        let lines = collect_lines(child.stdout.take().unwrap());
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

    /// `headroom serve ARGS` on a free port, known to be this server: another
    /// test may be handed the same free port between its probe and its bind,
    /// and a connect to the port would then reach that test's server (a probe
    /// refused as "does not allow disk probes" made a test file never appear).
    /// So this waits for the server's own banner naming the port (stderr); a
    /// server that lost the bind exits without it, and a fresh port is tried.
    pub fn serve(args: &[&str]) -> (Served, u16) {
        Served::serve_wrapped(|port| serve_command(port, args))
    }

    /// As [`Served::serve`], with the command built by `command(port)` (for
    /// a server started inside a cgroup, say).
    pub fn serve_wrapped(command: impl Fn(u16) -> Command) -> (Served, u16) {
        for _ in 0..3 {
            let port = free_port();
            if let Some(served) = Served::start_serve(command(port), port) {
                return (served, port);
            }
        }
        panic!("headroom serve did not listen on any of three free ports");
    }

    /// `headroom serve ARGS` again on `port` (a server that was killed comes
    /// back where its clients look for it); panics if it cannot listen there.
    pub fn serve_again(port: u16, args: &[&str]) -> Served {
        Served::start_serve(serve_command(port, args), port)
            .unwrap_or_else(|| panic!("headroom serve could not listen on port {port} again"))
    }

    /// Starts `cmd`, a `headroom serve` on `port`; None when it exits
    /// without its banner (it lost the bind).
    fn start_serve(mut cmd: Command, port: u16) -> Option<Served> {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start headroom serve");
        let lines = collect_lines(child.stdout.take().unwrap());
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        let banner = format!(":{port} (TCP and UDP)");
        if err.by_ref().map_while(Result::ok).any(|l| l.contains("listening on") && l.contains(&banner)) {
            // Keep reading, so a full pipe never blocks the server.
            std::thread::spawn(move || err.for_each(drop));
            return Some(Served { child, lines });
        }
        let _ = child.kill();
        let _ = child.wait();
        None
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

/// `headroom serve --port PORT ARGS`.
fn serve_command(port: u16, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--port", &port.to_string()]).args(args);
    cmd
}

/// Collects `out`'s lines as they come, on a thread of their own.
fn collect_lines(out: std::process::ChildStdout) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            seen.lock().unwrap().push(line);
        }
    });
    lines
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
