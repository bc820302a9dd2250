//! headroom-net as a Runner engine. A [`NetRequest`] (the server, one test)
//! is plain data; the engine opens one session per server in `prepare`
//! (detecting a stock iperf3 server), runs each test on it, reconnects
//! after a failed test, and hands back the probe. Uses only the client API
//! the commands use: `Session`, `iperf3_throughput`,
//! `ping::tcp_connect_series` and the `probe` constructors.

use crate::setting::{NetSetting, NetSpelling};
use crate::{
    connect_probe, echo_probe, iperf2_throughput, iperf3_throughput, rr_probe, tcp_connect_series, throughput_probe,
    Endpoint, NetError, Session, Source, ThroughputSpec,
};
use headroom_result::{NetProtocol, Probe, ProbeSpec, Sample, Warning};
use headroom_runner::{
    unix_now, EngineKind, Expected, LiveSample, Measured, PrepareEvent, ProbeEngine, ProbeError, ProbeRequest,
};
use headroom_units::setting::Message;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Which wire protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtocolChoice {
    /// headroom, falling back to iperf3 when the server turns out to be one.
    Auto,
    /// The headroom protocol only.
    Headroom,
    /// The iperf3 control protocol only (a stock `iperf3 -s`).
    Iperf3,
    /// iperf2's (a stock `iperf -s`): throughput only (TCP, and UDP
    /// uploads against `iperf -s -u`). Never chosen by
    /// `Auto`: an iperf2 server says nothing until a client has sent, so it
    /// cannot be recognised by what it says.
    Iperf2,
}

/// The server the tests run against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetServer {
    /// Host name or address.
    pub host: String,
    /// TCP port of the control connection.
    pub port: u16,
    /// The server's token (`serve --token`), if it asks for one.
    pub token: Option<String>,
    /// Connect timeout, and how long a stalled test is tolerated.
    pub timeout: Duration,
    /// Which wire protocol to speak.
    pub protocol: ProtocolChoice,
    /// Where this end's sockets leave from (`--bind`, `--interface`).
    #[serde(default, skip_serializing_if = "Source::is_default")]
    pub source: Source,
    /// Open and close a session around every test (a soak's turns are
    /// minutes apart) instead of keeping one for the whole plan.
    pub session_per_test: bool,
}

impl NetServer {
    /// HOST:PORT, `[v6]:PORT` for IPv6.
    pub fn display(&self) -> String {
        self.target().display()
    }

    fn target(&self) -> Endpoint {
        Endpoint {
            host: self.host.clone(),
            port: self.port,
            token: self.token.clone(),
            timeout: self.timeout,
            source: self.source.clone(),
        }
    }
}

/// One network test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetTest {
    /// TCP request/response round trips of 64 bytes at idle.
    Rtt {
        /// How long to measure.
        time: Duration,
        /// Both ends spin on non-blocking sockets with SO_BUSY_POLL
        /// (`--busy-poll`): lower latency for a core each, recorded.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        busy_poll: bool,
    },
    /// 200 UDP echoes 5 ms apart.
    Echo,
    /// 20 TCP handshakes 20 ms apart.
    Connect,
    /// TCP or UDP streams in one direction or both.
    Throughput(ThroughputSpec),
}

/// One test against one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetRequest {
    /// Where the test runs.
    pub server: NetServer,
    /// What it measures.
    pub test: NetTest,
}

impl NetRequest {
    /// As a Runner request, labelled as its progress bar is.
    pub fn to_request(&self) -> ProbeRequest {
        let (label, expected) = match &self.test {
            NetTest::Rtt { time, .. } => ("TCP RR idle".to_string(), Expected::About(*time)),
            NetTest::Echo => ("UDP echo".to_string(), Expected::Unknown),
            NetTest::Connect => ("TCP connect".to_string(), Expected::Instant),
            NetTest::Throughput(t) => {
                (t.label(), if t.bytes.is_some() { Expected::Unknown } else { Expected::About(t.duration) })
            }
        };
        ProbeRequest::new(EngineKind::Net, label, expected, self)
    }

    /// Checks the test against the command line's ranges, so a request
    /// from the wire cannot ask for what `headroom net` refuses; the refusal
    /// names settings as `spell` spells them.
    pub fn check(&self, spell: NetSpelling) -> Result<(), ProbeError> {
        let checked = match &self.test {
            NetTest::Throughput(t) if self.server.protocol == ProtocolChoice::Iperf2 => {
                t.check().and_then(|()| crate::throughput::iperf2::unsupported(t).map_or(Ok(()), Err))
            }
            NetTest::Throughput(t) => t.check(),
            NetTest::Rtt { time, .. }
                if !(Duration::from_millis(100)..=crate::throughput::MAX_TEST_TIME).contains(time) =>
            {
                Err(Message::text(format!(
                    "a {:.3} s round-trip test is out of range: 100 ms to 24 h",
                    time.as_secs_f64()
                )))
            }
            NetTest::Rtt { .. } | NetTest::Echo | NetTest::Connect => Ok(()),
        };
        checked.map_err(|m| ProbeError::Usage(m.spelled(spell)))
    }

    /// The test's name as `--tests` spells the headroom-only ones.
    fn headroom_only(&self) -> Option<&'static str> {
        match self.test {
            NetTest::Rtt { .. } => Some("rtt"),
            NetTest::Echo => Some("echo"),
            NetTest::Connect => Some("connect"),
            NetTest::Throughput(_) => None,
        }
    }
}

/// A network error as the Runner sees it, its settings named as `spell`
/// spells them.
pub fn probe_error(e: NetError, spell: NetSpelling) -> ProbeError {
    let text = e.spelled(spell);
    match e {
        NetError::Resolve { .. } | NetError::Connect { .. } => ProbeError::Unreachable(text),
        NetError::Refused(_) | NetError::TokenNeeded { .. } => ProbeError::Refused(text),
        NetError::Broken(_) | NetError::Io(_) => ProbeError::Lost(text),
        NetError::Protocol(_) | NetError::IsIperf3 | NetError::Listen { .. } => ProbeError::Failed(text),
    }
}

/// The session to a server, once `prepare` (or a test) has opened it.
struct Connected {
    server: NetServer,
    /// None: the server speaks iperf3 or iperf2 (connections per test).
    session: Option<Session>,
    /// The server was lost and did not come back: the rest of the plan is abandoned.
    gone: bool,
}

impl Connected {
    /// What the server answered in: a session is headroom's protocol.
    fn protocol(&self) -> NetProtocol {
        match (&self.session, self.server.protocol) {
            (Some(_), _) => NetProtocol::Headroom,
            (None, ProtocolChoice::Iperf2) => NetProtocol::Iperf2,
            (None, _) => NetProtocol::Iperf3,
        }
    }
}

/// The net engine.
pub struct NetEngine {
    connected: Option<Connected>,
    /// How its errors and warnings name a setting ([`NetEngine::spelling_settings`]).
    spelling: NetSpelling,
}

impl Default for NetEngine {
    fn default() -> Self {
        NetEngine::new()
    }
}

impl NetEngine {
    /// An engine with no session yet (it connects when prepared).
    pub fn new() -> Self {
        NetEngine { connected: None, spelling: NetSetting::name }
    }

    /// Names a setting in an error or warning as `spell` does (the binary's
    /// flags, or for a far end the client's); by default its own name.
    pub fn spelling_settings(mut self, spell: NetSpelling) -> Self {
        self.spelling = spell;
        self
    }

    /// Opens a session to `server`, detecting a stock iperf3 server (and
    /// failing early on DNS, a refused port or a wrong token).
    fn connect(&mut self, server: &NetServer) -> Result<&mut Connected, ProbeError> {
        self.close();
        let target = server.target();
        let session = match server.protocol {
            // No probe connection: a stock server would take it for a test.
            ProtocolChoice::Iperf3 | ProtocolChoice::Iperf2 => None,
            ProtocolChoice::Headroom | ProtocolChoice::Auto => match Session::open(&target) {
                Ok(s) => Some(s),
                Err(NetError::IsIperf3) if server.protocol == ProtocolChoice::Auto => {
                    // Give the stock server a moment to forget the aborted handshake.
                    std::thread::sleep(Duration::from_millis(100));
                    None
                }
                Err(e) => return Err(probe_error(e, self.spelling)),
            },
        };
        Ok(self.connected.insert(Connected { server: server.clone(), session, gone: false }))
    }

    fn close(&mut self) {
        if let Some(s) = self.connected.take().and_then(|c| c.session) {
            s.close();
        }
    }

    /// After a test that went wrong, a fresh session for the remaining tests:
    /// the control connection may be gone, or out of step with the server.
    fn reopen_session(&mut self) {
        if let Some(c) = self.connected.as_mut().filter(|c| c.session.is_some()) {
            match Session::open(&c.server.target()) {
                Ok(s) => c.session = Some(s),
                Err(_) => c.gone = true,
            }
        }
    }

    fn measure(
        &mut self,
        req: &NetRequest,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&Sample),
    ) -> Result<Probe, NetError> {
        let spell = self.spelling;
        let c = self.connected.as_mut().expect("connected before measuring");
        let protocol = c.protocol();
        let target = c.server.target();
        match (&req.test, c.session.as_mut()) {
            (NetTest::Rtt { time, busy_poll }, Some(s)) => {
                let r = s.rr(64, (*time).min(Duration::from_secs(5)), *busy_poll, stop, on_sample)?;
                Ok(rr_probe(&r, protocol, &target.display()))
            }
            (NetTest::Echo, Some(s)) => {
                let r = s.udp_echo(200, Duration::from_millis(5), 64, stop, &mut |_, _| {})?;
                Ok(echo_probe(&r, &target.display(), 5.0))
            }
            (NetTest::Connect, Some(s)) => {
                let r = tcp_connect_series(s.peer, &target, 20, Duration::from_millis(20), stop, &mut |_, _| {})?;
                Ok(connect_probe(&r, Some(protocol), 20.0))
            }
            (NetTest::Throughput(t), Some(s)) => {
                let r = s.throughput(&t.with_rtt_under_load(t.rtt_under_load), stop, on_sample)?;
                Ok(throughput_probe(&r, spell))
            }
            (NetTest::Throughput(t), None) => {
                let t = t.with_rtt_under_load(false);
                let r = match protocol {
                    NetProtocol::Iperf2 => iperf2_throughput(&target, &t, stop, on_sample),
                    _ => iperf3_throughput(&target, &t, stop, on_sample),
                };
                // A stock server needs a moment between tests.
                std::thread::sleep(Duration::from_millis(300));
                Ok(throughput_probe(&r?, spell))
            }
            (_, None) => unreachable!("headroom-only tests are refused before measuring"),
        }
    }
}

impl ProbeEngine for NetEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Net
    }

    fn prepare(
        &mut self,
        requests: &[&ProbeRequest],
        _stop: &AtomicBool,
        events: &mut dyn FnMut(&PrepareEvent),
    ) -> Result<Vec<Warning>, ProbeError> {
        for request in requests {
            request.params::<NetRequest>()?.check(self.spelling)?;
        }
        let Some(first) = requests.first() else { return Ok(Vec::new()) };
        let req: NetRequest = first.params()?;
        if req.server.session_per_test {
            return Ok(Vec::new());
        }
        let c = self.connect(&req.server)?;
        events(&PrepareEvent::PeerReady {
            peer: c.server.target().display(),
            protocol: c.protocol().to_string(),
            server_version: c.session.as_ref().map(|s| s.server_version.clone()),
        });
        Ok(Vec::new())
    }

    fn run(
        &mut self,
        request: &ProbeRequest,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&LiveSample),
    ) -> Result<Measured, ProbeError> {
        let req: NetRequest = request.params()?;
        let same_server = self.connected.as_ref().is_some_and(|c| c.server == req.server);
        if !same_server || req.server.session_per_test {
            self.connect(&req.server)?;
        }
        let c = self.connected.as_ref().expect("connected above");
        if c.gone {
            return Err(ProbeError::Abandoned);
        }
        if let (Some(test), None) = (req.headroom_only(), &c.session) {
            return Err(ProbeError::Unsupported(format!(
                "test '{test}' needs a headroom server (this one speaks {})",
                c.protocol()
            )));
        }
        let started_unix = unix_now();
        let result = self.measure(&req, stop, &mut |s: &Sample| {
            on_sample(&LiveSample {
                t_unix: started_unix + s.t_s,
                elapsed: Duration::from_secs_f64(s.t_s.max(0.0)),
                ramping: false,
                bytes_per_sec: s.bytes_per_sec,
                iops: s.iops,
                latency_ns_mean: s.latency_ns_mean,
                latency_ns_p99: s.latency_ns_p99,
            })
        });
        if req.server.session_per_test {
            self.close();
        }
        match result {
            Ok(mut probe) => {
                // Recorded where the test ran (an agent of a fleet, a far
                // end): only this machine knows its routes.
                if let ProbeSpec::Net(spec) = &mut probe.spec {
                    let peer = crate::resolve(&req.server.host, req.server.port).ok().and_then(|a| a.first().copied());
                    spec.interface = peer.and_then(|p| req.server.source.interface_towards(p.ip()));
                }
                let error = probe.error().map(|e| ProbeError::Lost(format!("lost the server mid-test: {e}")));
                if error.is_some() {
                    // The server's report may still be on its way: a late reply
                    // would answer the next test's request.
                    self.reopen_session();
                }
                Ok(Measured { probe, started_unix, error })
            }
            Err(e) => {
                self.reopen_session();
                Err(probe_error(e, self.spelling))
            }
        }
    }

    fn finish(&mut self) {
        self.close();
    }
}

impl Drop for NetEngine {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Server, ServerConfig, TrafficDirection};
    use headroom_runner::{Plan, Runner, SampleLog, Sink};

    fn server_on(port: u16, protocol: ProtocolChoice) -> NetServer {
        NetServer {
            host: "127.0.0.1".into(),
            port,
            token: None,
            timeout: Duration::from_secs(3),
            source: Default::default(),
            protocol,
            session_per_test: false,
        }
    }

    fn upload(server: &NetServer) -> ProbeRequest {
        let test = NetTest::Throughput(ThroughputSpec {
            direction: TrafficDirection::Upload,
            streams: 1,
            duration: Duration::from_millis(600),
            bytes: None,
            len: crate::DEFAULT_TCP_LEN,
            udp_rate: None,
            rtt_under_load: false,
            window: None,
            skip_rx_copy: false,
            zerocopy: false,
            udp_offload: false,
            sample_interval: None,
        });
        NetRequest { server: server.clone(), test }.to_request()
    }

    #[test]
    fn a_plan_runs_over_one_session_to_a_loopback_server() {
        let running = Server::bind(ServerConfig::loopback(0)).unwrap().spawn();
        let server = server_on(running.addr.port(), ProtocolChoice::Auto);
        let plan = Plan::new(vec![
            NetRequest { server: server.clone(), test: NetTest::Connect }.to_request(),
            upload(&server),
        ]);
        let mut log = SampleLog::default();
        let runs = Runner::new().with(NetEngine::new()).run_all(
            &plan,
            &AtomicBool::new(false),
            &mut [&mut log as &mut dyn Sink],
        );
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert!(runs[0].probe().unwrap().summary.latency_ns.is_some(), "handshake times");
        let up = runs[1].probe().unwrap();
        assert_eq!(up.id, "tcp-up-1");
        assert!(up.summary.bytes_per_sec > 0.0);
        assert!(matches!(&log.events[0], PrepareEvent::PeerReady { protocol, .. } if protocol == "headroom"));
        assert!(log.samples.iter().any(|(i, s)| *i == 1 && s.bytes_per_sec > 0.0));
    }

    #[test]
    fn nobody_listening_is_unreachable_before_anything_runs() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let plan = Plan::new(vec![upload(&server_on(port, ProtocolChoice::Headroom))]);
        let runs = Runner::new().with(NetEngine::new()).run_all(&plan, &AtomicBool::new(false), &mut []);
        assert!(
            matches!(runs[0].error(), Some(ProbeError::Unreachable(m)) if m.contains("cannot connect")),
            "{runs:?}"
        );
    }
}
