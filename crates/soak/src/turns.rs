//! The probes of a soak's cycle as Runner requests: the disk turns (write,
//! read, iops) over one shared test file, the same turns on the server's own
//! disk (remote-write, remote-read, remote-iops over one test file there),
//! the net turn to the server; the Runner equipped to run them; and the
//! interfaces on the path to the server that the link watcher polls.

use crate::remote::FarEnd;
use crate::setup::REMOTE;
use crate::{FlagError, SoakConfig, Turn, DEFAULT_SIZE};
use headroom_disk::{
    test_def, DirectMode, DiskEngine, DiskRequest, DiskTarget, EngineChoice, Pattern, RunSettings, Rw,
};
use headroom_net::{
    Endpoint, NetEngine, NetRequest, NetServer, NetTest, ProtocolChoice, ThroughputSpec, TrafficDirection,
};
use headroom_runner::Runner;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

/// How long a server may take to accept a connection (and stay silent on
/// one) before its turn counts as an outage.
const SERVER_TIMEOUT: Duration = Duration::from_secs(3);

/// The turns of the stored cycle, in order. `token` is the server's, if it
/// wants one (never stored).
pub fn turns(config: &SoakConfig, token: Option<String>) -> Result<Vec<Turn>, FlagError> {
    // The disk turns of each side share one test file, created and laid out
    // once by the Runner's prepare (here by the disk engine, there by the server).
    let target = |path: PathBuf| DiskTarget {
        path,
        size: Some(config.size()),
        default_size: DEFAULT_SIZE,
        destructive: false,
        force: false,
        keep: false,
    };
    let here = target(config.dir());
    let mut turns = Vec::new();
    for name in &config.cycle {
        if name == "net" {
            turns.push(net_turn(endpoint(config, token.clone())?));
        } else if let Some(test) = name.strip_prefix(REMOTE) {
            let (Some(dir), Some(_)) = (config.remote_path(), &config.server) else {
                return Err(FlagError::RemoteNeedsRemotePath(name.clone()));
            };
            let at = endpoint(config, None)?.display();
            turns.extend(disk_turn(name, test, &target(dir), Some(at)));
        } else {
            turns.extend(disk_turn(name, name, &here, None));
        }
    }
    Ok(turns)
}

/// How a soak's errors and warnings name the disk and network settings
/// (the front end's tables; by default the settings' own names).
#[derive(Debug, Clone, Copy)]
pub struct Spelling {
    /// The disk turns' settings; None: their own names.
    pub disk: Option<fn(headroom_disk::Setting) -> &'static str>,
    /// The network turns' settings.
    pub net: headroom_net::NetSpelling,
}

impl Default for Spelling {
    fn default() -> Self {
        Spelling { disk: None, net: headroom_net::NetSetting::name }
    }
}

/// A Runner with the engines the turns of `config` need: disk and net here,
/// and with `--remote-path` the server's disk. `token` is the server's;
/// `spelling` names a setting in an error or warning (the front end's flags).
pub fn runner(config: &SoakConfig, token: Option<String>, spelling: &Spelling) -> Result<Runner<'static>, FlagError> {
    let disk = match spelling.disk {
        Some(spell) => DiskEngine::new().spelling_settings(spell),
        None => DiskEngine::new(),
    };
    let net = NetEngine::new().spelling_settings(spelling.net);
    let runner = Runner::new().with(disk).with(net);
    if config.remote_path().is_none() || config.server.is_none() {
        return Ok(runner);
    }
    Ok(runner.with(FarEnd::new(endpoint(config, token)?, spelling.net)))
}

/// The inventory of the soak's server, as reached at its stored address
/// (`reached_as`); None without a server, or when it does not answer or
/// send one (the turns record an outage, not this).
pub fn server_inventory(config: &SoakConfig, token: Option<String>) -> Option<headroom_result::Host> {
    let server = config.server.as_ref().and_then(|_| endpoint(config, token).ok())?;
    headroom_net::peer_inventory(&server).ok()
}

/// The stored server as an endpoint of remote probes.
fn endpoint(config: &SoakConfig, token: Option<String>) -> Result<Endpoint, FlagError> {
    Endpoint::parse(config.server.as_deref().unwrap_or_default(), token, SERVER_TIMEOUT).map_err(FlagError::Server)
}

/// The turn `name` of the cycle: the disk test `test` over the shared test
/// file of `target`, run by the server at `at` (its `HOST:PORT`) or here; no
/// warm-up: in a soak every second counts, the first included. A turn on the
/// server counts its failures to reach it as outages.
fn disk_turn(name: &str, test: &str, target: &DiskTarget, at: Option<String>) -> Option<Turn> {
    let (rw, block_size, queue_depth) = match test {
        "write" => (Rw::Write, 1 << 20, 8),
        "read" => (Rw::Read, 1 << 20, 8),
        "iops" => (Rw::RandRead, 4096, 32),
        _ => return None,
    };
    let target = target.clone();
    let settings = RunSettings {
        engine: EngineChoice::Auto,
        direct: DirectMode::Auto,
        pattern: Pattern::Random,
        fixedbufs: headroom_disk::FixedBufs::Auto,
    };
    Some(Turn {
        name: name.to_string(),
        uses_server: at.is_some(),
        request: Box::new(move |time| {
            let test = test_def(rw, block_size, queue_depth, 1, time, Duration::ZERO);
            let request = DiskRequest { target: target.clone(), settings, test, bus: None }.to_request();
            match &at {
                Some(server) => request.placed_at(server.clone()),
                None => request,
            }
        }),
    })
}

/// The network turn: one TCP upload stream to the server, on a session of
/// its own. Failing to connect, or losing the server mid-turn, is an outage
/// (the live samples up to then stay in the database), not an error.
fn net_turn(server: Endpoint) -> Turn {
    let Endpoint { host, port, token, timeout, source } = server;
    let server =
        NetServer { host, port, token, timeout, source, protocol: ProtocolChoice::Headroom, session_per_test: true };
    Turn {
        name: "net".into(),
        uses_server: true,
        request: Box::new(move |time| {
            let test = NetTest::Throughput(ThroughputSpec {
                direction: TrafficDirection::Upload,
                streams: 1,
                duration: time,
                bytes: None,
                len: headroom_net::DEFAULT_TCP_LEN,
                udp_rate: None,
                rtt_under_load: false,
                window: None,
                skip_rx_copy: false,
                zerocopy: false,
                udp_offload: false,
                // Soak's detectors read one sample a second.
                sample_interval: None,
            });
            NetRequest { server: server.clone(), test }.to_request()
        }),
    }
}

/// Interfaces on the path to `server` (`HOST[:PORT]`): the one the kernel
/// routes it through. None when there is no server or it does not resolve
/// (the outage is then recorded by the net probe).
pub fn path_interfaces(server: Option<&str>) -> Vec<String> {
    let Some((host, _)) = server.and_then(|s| headroom_net::split_host_port(s).ok()) else { return Vec::new() };
    let addrs = (host.as_str(), 0).to_socket_addrs().map(|a| a.collect::<Vec<_>>()).unwrap_or_default();
    addrs.into_iter().find_map(|a| headroom_sys::route_interface(a.ip())).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(cycle: &[&str], server: Option<&str>) -> SoakConfig {
        SoakConfig {
            cycle: cycle.iter().map(|s| s.to_string()).collect(),
            probe_s: 1.0,
            path: Some("/tmp".into()),
            server: server.map(String::from),
            vmkernel_log: None,
            extra: serde_json::json!({"size": 8 << 20, "remote_path": "/tank/bench"}),
        }
    }

    #[test]
    fn turns_follow_the_cycle_in_order() {
        let turns = turns(&config(&["iops", "net", "write"], Some("127.0.0.1:9")), None).unwrap();
        let names: Vec<_> = turns.iter().map(|t| (t.name.as_str(), t.uses_server)).collect();
        assert_eq!(names, [("iops", false), ("net", true), ("write", false)]);
    }

    #[test]
    fn remote_turns_are_the_same_tests_placed_at_the_server() {
        let config = config(&["write", "remote-write", "remote-iops"], Some("::1"));
        let turns = turns(&config, None).unwrap();
        let requests: Vec<_> = turns.iter().map(|t| (t.request)(Duration::from_secs(2))).collect();
        assert_eq!(
            requests.iter().map(|r| r.at.as_deref()).collect::<Vec<_>>(),
            [None, Some("[::1]:5201"), Some("[::1]:5201")]
        );
        assert_eq!(turns.iter().map(|t| t.uses_server).collect::<Vec<_>>(), [false, true, true]);
        let disk = |r: &headroom_runner::ProbeRequest| r.params::<DiskRequest>().unwrap();
        let (here, there) = (disk(&requests[0]), disk(&requests[1]));
        assert_eq!(
            (here.target.path.as_path(), there.target.path.as_path()),
            (std::path::Path::new("/tmp"), std::path::Path::new("/tank/bench"))
        );
        let json = |t: &headroom_disk::TestDef| serde_json::to_value(t).unwrap();
        assert_eq!(json(&here.test), json(&there.test), "remote-write is the write test");
        assert_eq!(disk(&requests[2]).test.block_size, 4096);
    }

    #[test]
    fn a_stored_server_that_is_not_host_port_is_named() {
        let e = turns(&config(&["net"], Some("nas.lan:0")), None).err().expect("refused");
        assert_eq!(e.message().settings().next(), Some(crate::Setting::Server), "{e}");
        assert!(e.to_string().starts_with("server 'nas.lan:0': port '0'"), "{e}");
    }

    #[test]
    fn path_interfaces_takes_every_host_port_form() {
        // Loopback routes through lo, whichever form names it; the bracketed
        // IPv6 form with a port needs the one host:port rule of headroom-net.
        for server in ["127.0.0.1", "127.0.0.1:5201", "[::1]:5201", "::1", "localhost:5201"] {
            assert_eq!(path_interfaces(Some(server)), ["lo"], "{server}");
        }
        assert!(path_interfaces(None).is_empty());
        assert!(path_interfaces(Some("nas.lan:99999")).is_empty());
    }
}
