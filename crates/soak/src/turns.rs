//! The probes of a soak's cycle as Runner requests: the disk turns (write,
//! read, iops) over one shared test file, the net turn to the server; the
//! Runner equipped to run them; and the interfaces on the path to the server
//! that the link watcher polls.

use crate::{FlagError, SoakConfig, Turn, DEFAULT_SIZE};
use headroom_disk::{
    test_def, DirectMode, DiskEngine, DiskRequest, DiskTarget, EngineChoice, Pattern, RunSettings, Rw,
};
use headroom_net::{NetEngine, NetRequest, NetServer, NetTest, ProtocolChoice, ThroughputSpec, TrafficDirection};
use headroom_runner::Runner;
use std::net::ToSocketAddrs;
use std::time::Duration;

/// The turns of the stored cycle, in order. `token` is the server's, if it
/// wants one (never stored).
pub fn turns(config: &SoakConfig, token: Option<String>) -> Result<Vec<Turn>, FlagError> {
    // The disk turns share one test file, created and laid out once by the Runner's prepare.
    let target = DiskTarget {
        path: config.dir(),
        size: Some(config.size()),
        default_size: DEFAULT_SIZE,
        destructive: false,
        force: false,
        keep: false,
    };
    let mut turns = Vec::new();
    for name in &config.cycle {
        if name == "net" {
            turns.push(net_turn(config.server.as_deref().unwrap_or_default(), token.clone())?);
        } else {
            turns.extend(disk_turn(name, &target));
        }
    }
    Ok(turns)
}

/// A Runner with the engines the turns need: disk and net.
pub fn runner() -> Runner<'static> {
    Runner::new().with(DiskEngine::new()).with(NetEngine::new())
}

/// The turn of a disk probe of the cycle over the shared test file; no
/// warm-up: in a soak every second counts, the first included.
fn disk_turn(name: &str, target: &DiskTarget) -> Option<Turn> {
    let (rw, block_size, queue_depth) = match name {
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
        fixedbufs: false,
    };
    Some(Turn {
        name: name.to_string(),
        uses_server: false,
        request: Box::new(move |time| {
            let test = test_def(rw, block_size, queue_depth, 1, time, Duration::ZERO);
            DiskRequest { target: target.clone(), settings, test, bus: None }.to_request()
        }),
    })
}

/// The network turn: one TCP upload stream to the server, on a session of
/// its own. Failing to connect, or losing the server mid-turn, is an outage
/// (the live samples up to then stay in the database), not an error.
fn net_turn(server: &str, token: Option<String>) -> Result<Turn, FlagError> {
    let (host, port) = headroom_net::split_host_port(server).map_err(FlagError::Server)?;
    let server = NetServer {
        host,
        port: port.unwrap_or(headroom_net::DEFAULT_PORT),
        token,
        timeout: Duration::from_secs(3),
        protocol: ProtocolChoice::Headroom,
        session_per_test: true,
    };
    Ok(Turn {
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
            });
            NetRequest { server: server.clone(), test }.to_request()
        }),
    })
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
            extra: serde_json::json!({"size": 8 << 20}),
        }
    }

    #[test]
    fn turns_follow_the_cycle_in_order() {
        let turns = turns(&config(&["iops", "net", "write"], Some("127.0.0.1:9")), None).unwrap();
        let names: Vec<_> = turns.iter().map(|t| (t.name.as_str(), t.uses_server)).collect();
        assert_eq!(names, [("iops", false), ("net", true), ("write", false)]);
    }

    #[test]
    fn a_stored_server_that_is_not_host_port_is_named() {
        let e = turns(&config(&["net"], Some("nas.lan:0")), None).err().expect("refused");
        assert!(e.to_string().starts_with("--server 'nas.lan:0': port '0'"), "{e}");
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
