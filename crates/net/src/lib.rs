//! headroom-net: the network engine behind `headroom serve`, `headroom net` and
//! `headroom ping`.
//!
//! It owns sockets and wire formats: the headroom protocol ([`wire`]), the
//! server's admission of unauthenticated peers ([`admission`]), the
//! iperf3 control protocol spoken as client ([`iperf3_client`]) and server
//! ([`server`]), the data paths that move bytes ([`datapath`]), TCP_INFO
//! ([`tcpinfo`]), latency statistics ([`stats`]) and the conversion of what
//! was measured into `headroom_result::Probe`s ([`probe`]).
//!
//! It must not print, draw progress bars or know about the CLI: callers get
//! per-second samples through a callback and typed results back. It never
//! sends traffic to an address other than the peer the caller named (client)
//! or the peer that connected (server).

pub mod admission;
pub mod client;
pub mod cpu;
pub mod datapath;
pub mod iperf3;
pub mod iperf3_client;
pub mod ping;
pub mod probe;
mod probe_engine;
pub mod server;
pub mod stats;
pub mod tcpinfo;
pub mod wire;

pub use probe_engine::{probe_error, NetEngine, NetRequest, NetServer, NetTest, ProtocolChoice, ThroughputParams};

use std::io;

/// The default port, shared with iperf3 so one firewall rule serves both.
pub const DEFAULT_PORT: u16 = 5201;

/// Why a network test could not run or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The host name did not resolve.
    #[error("cannot resolve '{host}': {reason}")]
    Resolve { host: String, reason: String },
    /// The TCP connection could not be made.
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    /// The server could not listen on its address (`serve --bind/--port`).
    #[error("cannot listen on {addr}: {reason}")]
    Listen { addr: String, reason: String },
    /// The server answered but said no (wrong token, busy, limits).
    #[error("{0}")]
    Refused(String),
    /// The peer broke the protocol or sent something we cannot use.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The connection failed while a test ran (link down, peer gone, stalled).
    #[error("{0}")]
    Broken(String),
    /// The server at this address speaks iperf3, not headroom (auto-detection falls back).
    #[error("the server speaks iperf3, not headroom (use --protocol iperf3)")]
    IsIperf3,
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Resolves `host` (a name or address) with `port` to socket addresses.
pub fn resolve(host: &str, port: u16) -> Result<Vec<std::net::SocketAddr>, NetError> {
    use std::net::ToSocketAddrs;
    let host_only = host.trim_start_matches('[').trim_end_matches(']');
    (host_only, port)
        .to_socket_addrs()
        .map(|it| it.collect::<Vec<_>>())
        .map_err(|e| NetError::Resolve { host: host.to_string(), reason: resolve_reason(&e) })
        .and_then(|v| {
            if v.is_empty() {
                Err(NetError::Resolve { host: host.to_string(), reason: "no addresses".into() })
            } else {
                Ok(v)
            }
        })
}

fn resolve_reason(e: &io::Error) -> String {
    let text = e.to_string();
    if text.contains("failed to lookup address") || text.contains("Name or service not known") {
        "no such host (DNS lookup failed)".into()
    } else {
        text
    }
}

/// Splits "HOST[:PORT]", "[v6]:PORT" or a bare IPv6 address into host and optional port.
pub fn split_host_port(spec: &str) -> Result<(String, Option<u16>), String> {
    let bad_port = |p: &str| format!("'{spec}': port '{p}' is not a number from 1 to 65535 (example: nas.lan:5201)");
    if spec.is_empty() {
        return Err("empty host (example: nas.lan or 192.168.1.10:5201)".into());
    }
    if let Some(rest) = spec.strip_prefix('[') {
        let (host, after) =
            rest.split_once(']').ok_or_else(|| format!("'{spec}': missing ']' (example: [fe80::1]:5201)"))?;
        return match after.strip_prefix(':') {
            Some(p) => {
                p.parse::<u16>().ok().filter(|&n| n > 0).map(|n| (host.to_string(), Some(n))).ok_or_else(|| bad_port(p))
            }
            None if after.is_empty() => Ok((host.to_string(), None)),
            None => Err(format!("'{spec}': unexpected text after ']' (example: [fe80::1]:5201)")),
        };
    }
    if spec.matches(':').count() > 1 {
        return Ok((spec.to_string(), None)); // bare IPv6
    }
    match spec.split_once(':') {
        Some((h, p)) => {
            if h.is_empty() {
                return Err(format!("'{spec}': missing host before ':' (example: nas.lan:5201)"));
            }
            p.parse::<u16>().ok().filter(|&n| n > 0).map(|n| (h.to_string(), Some(n))).ok_or_else(|| bad_port(p))
        }
        None => Ok((spec.to_string(), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_forms() {
        assert_eq!(split_host_port("nas.lan").unwrap(), ("nas.lan".into(), None));
        assert_eq!(split_host_port("nas.lan:3260").unwrap(), ("nas.lan".into(), Some(3260)));
        assert_eq!(split_host_port("[::1]:22").unwrap(), ("::1".into(), Some(22)));
        assert_eq!(split_host_port("fe80::1").unwrap(), ("fe80::1".into(), None));
        assert!(split_host_port("nas:0").is_err());
        assert!(split_host_port("nas:http").unwrap_err().contains("example"));
        assert!(split_host_port(":22").is_err());
    }
}
