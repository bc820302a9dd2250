//! What every socket user of the crate shares, at the bottom of its imports:
//! the size bounds and timing of the data paths, readiness waits, the 4-byte
//! length prefix both wire protocols frame messages with, connecting (with
//! the retry a stock iperf3 server needs) and the one-line reasons for
//! socket errors.
//!
//! It knows no protocol: the headroom wire ([`crate::wire`]), the iperf3
//! control protocol ([`crate::iperf3`]), the data paths ([`crate::datapath`])
//! and the server all build on it, and it imports none of them.

use crate::error::NetError;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration;

/// How often blocked socket calls wake up to look at the stop flag.
pub const POLL: Duration = Duration::from_millis(200);
/// Default TCP write/read size (iperf3's default too).
pub const DEFAULT_TCP_LEN: usize = 128 * 1024;
/// Default UDP payload: fits one 1500-byte MTU frame over IPv4 (iperf3 uses the same).
pub const DEFAULT_UDP_LEN: usize = 1448;
/// Largest TCP write size accepted from a peer.
pub const MAX_TCP_LEN: usize = 1024 * 1024;
/// Largest UDP datagram accepted from a peer.
pub const MAX_UDP_LEN: usize = 65_507;

/// Waits until `fd` is readable (or at end of stream) or `timeout` passes.
pub(crate) fn wait_readable(fd: &impl AsFd, timeout: Duration) -> bool {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    poll(&mut fds, timeout).is_ok_and(|ready| ready > 0)
}

/// Reads a 4-byte big-endian length and that many bytes, refusing more than
/// `max` before allocating, so a hostile length prefix costs nothing (both
/// iperf3's and headroom's messages are framed so).
pub(crate) fn read_length_prefixed(r: &mut impl Read, max: u32, what: &str) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len);
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what} of {len} bytes exceeds the limit of {max}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// `body` behind its 4-byte big-endian length, ready for one write (one segment).
pub(crate) fn length_prefixed(body: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

/// Whether a socket call only ran out of its timeout (the caller looks at its flags and tries again).
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// A socket error during a test, said the way a user reads it.
pub(crate) fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionReset => "connection reset by the peer".into(),
        io::ErrorKind::BrokenPipe => "the peer closed the connection".into(),
        io::ErrorKind::ConnectionRefused => "the peer's port is closed (connection refused)".into(),
        _ => e.to_string(),
    }
}

/// Connects to `addr`. A connection reset during the handshake is tried
/// again (three times, 100 ms apart): a stock iperf3 server closes and
/// re-opens its listening socket after every test or failed handshake, and a
/// connect that lands in that moment is reset rather than refused.
pub(crate) fn connect_addr(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let mut attempt = 0;
    loop {
        match TcpStream::connect_timeout(addr, timeout) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset && attempt < 3 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

/// [`connect_addr`], with a failure said as a headroom client says it.
pub(crate) fn connect_to_server(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, NetError> {
    connect_addr(&addr, timeout).map_err(|e| connect_error(addr, &e))
}

/// A failed connect to a headroom (or iperf3) server: a refusal suggests
/// starting `headroom serve`.
pub(crate) fn connect_error(addr: SocketAddr, e: &io::Error) -> NetError {
    let mut reason = connect_reason(e);
    if e.kind() == io::ErrorKind::ConnectionRefused {
        reason += "; is `headroom serve` running there?";
    }
    NetError::Connect { addr: addr.to_string(), reason }
}

/// A failed connect to any TCP service (`headroom ping HOST:PORT`): nothing
/// said about headroom, the port may belong to anything.
pub(crate) fn connect_error_any_service(addr: SocketAddr, e: &io::Error) -> NetError {
    NetError::Connect { addr: addr.to_string(), reason: connect_reason(e) }
}

fn connect_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused (nothing listens on that port)".into(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            "timed out (host unreachable or a firewall drops the packets)".into()
        }
        _ if e.raw_os_error() == Some(libc::EHOSTUNREACH) || e.raw_os_error() == Some(libc::ENETUNREACH) => {
            "no route to host (unreachable)".into()
        }
        _ => e.to_string(),
    }
}

/// A UDP socket on an ephemeral port of `peer`'s address family, connected to `peer`.
pub(crate) fn udp_connected(peer: SocketAddr) -> io::Result<UdpSocket> {
    let local: SocketAddr = if peer.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local)?;
    sock.connect(peer)?;
    Ok(sock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn length_prefix_round_trips_and_refuses_before_allocating() {
        let frame = length_prefixed(b"hello");
        assert_eq!(read_length_prefixed(&mut frame.as_slice(), 5, "message").unwrap(), b"hello");
        let err = read_length_prefixed(&mut [0xff, 0xff, 0xff, 0xff].as_slice(), 64, "message").unwrap_err();
        assert!(err.to_string().contains("exceeds the limit of 64"), "{err}");
        // A prefix promising more than arrives is an error, not a hang or a short message.
        assert!(read_length_prefixed(&mut [0, 0, 0, 9, 1].as_slice(), 64, "message").is_err());
    }

    #[test]
    fn readiness_follows_the_peer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        assert!(!wait_readable(&server, Duration::from_millis(10)), "nothing sent yet");
        client.write_all(b"x").unwrap();
        assert!(wait_readable(&server, Duration::from_secs(5)));
    }

    #[test]
    fn udp_sockets_take_the_peer_family() {
        let v4 = udp_connected("127.0.0.1:9".parse().unwrap()).unwrap();
        assert!(v4.local_addr().unwrap().is_ipv4());
    }
}
