//! Where a client goes: the server's [`Endpoint`] (host, port, token,
//! patience), name resolution, `HOST[:PORT]` parsing and connecting to the
//! first address that answers. Knows no protocol.

use crate::error::NetError;
use crate::socket::{connect_addr, connect_error, SocketSetup, Source};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The server to test against, and how patient to be.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Host name or address as the user gave it.
    pub host: String,
    /// TCP (and UDP) port of the server.
    pub port: u16,
    /// Shared secret of a `headroom serve --token` server.
    pub token: Option<String>,
    /// Connect timeout, and how long a stalled stream or silent server is tolerated.
    pub timeout: Duration,
    /// Where this end's sockets leave from (`--bind`, `--interface`).
    pub source: Source,
}

impl Endpoint {
    /// `HOST[:PORT]` as users write it ([`split_host_port`]), the port
    /// defaulting to [`crate::DEFAULT_PORT`]; the error says what is wrong.
    pub fn parse(spec: &str, token: Option<String>, timeout: Duration) -> Result<Endpoint, String> {
        let (host, port) = split_host_port(spec)?;
        Ok(Endpoint { host, port: port.unwrap_or(crate::DEFAULT_PORT), token, timeout, source: Source::default() })
    }

    /// `host:port`, with brackets around an IPv6 address.
    pub fn display(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Connects to the first address of `endpoint` that answers.
pub fn connect(endpoint: &Endpoint) -> Result<(TcpStream, SocketAddr), NetError> {
    connect_with(endpoint, &SocketSetup::from(&endpoint.source))
}

/// [`connect`] with the socket set up as `setup` says (a data stream's buffers).
pub(crate) fn connect_with(endpoint: &Endpoint, setup: &SocketSetup) -> Result<(TcpStream, SocketAddr), NetError> {
    connect_through_refusals(endpoint, setup, Duration::ZERO)
}

/// [`connect`], asking again every 50 ms for up to `wait` while every address
/// refuses: for a server that closes its listening socket between tests and
/// opens it again (a stock iperf3 does, after each test and each failed
/// handshake), where a connect in that gap is refused though it serves.
pub(crate) fn connect_through_refusals(
    endpoint: &Endpoint,
    setup: &SocketSetup,
    wait: Duration,
) -> Result<(TcpStream, SocketAddr), NetError> {
    let addrs = resolve(&endpoint.host, endpoint.port)?;
    let deadline = Instant::now() + wait;
    loop {
        let mut last = None;
        for addr in &addrs {
            match connect_addr(addr, endpoint.timeout, setup) {
                Ok(s) => return Ok((s, *addr)),
                Err(e) => last = Some((*addr, e)),
            }
        }
        let (addr, e) = last.expect("resolve returns at least one address");
        if e.kind() != io::ErrorKind::ConnectionRefused || Instant::now() >= deadline {
            return Err(connect_error(addr, &e));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Resolves `host` (a name or address) with `port` to socket addresses.
pub fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, NetError> {
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

/// Splits `HOST[:PORT]`, `[v6]:PORT` or a bare IPv6 address into host and optional port.
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
    fn an_endpoint_takes_the_default_port_unless_one_is_given() {
        let t = Duration::from_secs(1);
        assert_eq!(Endpoint::parse("nas.lan", None, t).unwrap().display(), "nas.lan:5201");
        assert_eq!(Endpoint::parse("[fe80::1]:5300", None, t).unwrap().display(), "[fe80::1]:5300");
        assert!(Endpoint::parse("nas.lan:0", None, t).unwrap_err().contains("port '0'"));
    }

    /// A listener closed and opened again on the same port 300 ms later, as a
    /// stock iperf3 does between tests.
    fn relistening_server() -> (Endpoint, std::thread::JoinHandle<()>) {
        let first = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = first.local_addr().unwrap().port();
        drop(first);
        let again = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
            let _ = listener.accept();
        });
        (Endpoint::parse(&format!("127.0.0.1:{port}"), None, Duration::from_secs(2)).unwrap(), again)
    }

    #[test]
    fn a_connect_waits_through_a_servers_gap_between_listens_only_when_asked() {
        let (endpoint, again) = relistening_server();
        let setup = SocketSetup::from(&endpoint.source);
        let refused = connect_through_refusals(&endpoint, &setup, Duration::ZERO).unwrap_err();
        assert!(refused.to_string().contains("connection refused"), "{refused}");
        connect_through_refusals(&endpoint, &setup, Duration::from_secs(2)).expect("connected once it listened again");
        again.join().unwrap();
    }

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
