//! The UDP side of the port: echo for authenticated sessions (a reply is
//! the request itself, only to its sender, never larger), and the hellos
//! that open UDP test streams of both protocols. Anything else is dropped.
//!
//! Every answer leaves from the address the datagram was sent to (learnt
//! with IP_PKTINFO): a server listening on a wildcard address with several
//! addresses (a NAS's service address beside its NIC's) would otherwise
//! answer from the routing table's choice, which the client's connected
//! socket drops.

use super::registry::Shared;
use super::reuse_udp;
use crate::iperf3 as iperf3_wire;
use crate::os::{recv_with_destination, send_from, want_destination};
use crate::wire;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;

/// The UDP side of the port: echo for authenticated sessions, hellos of UDP test streams.
pub(super) fn udp_loop(sock: &UdpSocket, s: &Shared) {
    let mut buf = vec![0u8; 2048];
    let _ = want_destination(sock);
    while !s.stop.load(Ordering::Relaxed) {
        let (n, from, to) = match recv_with_destination(sock, &mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        let msg = &buf[..n];
        if n >= 4 + wire::KEY_LEN && &msg[..4] == wire::UDP_ECHO_TAG {
            let key: [u8; wire::KEY_LEN] = msg[4..4 + wire::KEY_LEN].try_into().expect("length checked");
            let session = s.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
            if let Some(info) = session.filter(|i| i.ip == from.ip()) {
                info.touch(s);
                // The reply is the request itself: never larger, only to its sender.
                let _ = send_from(sock, msg, from, to);
            }
        } else if iperf3_wire::is_udp_hello(msg) || (n == 4 + wire::KEY_LEN && &msg[..4] == wire::UDP_DATA_TAG) {
            let key: Option<[u8; wire::KEY_LEN]> = if n == 4 { None } else { msg[4..].try_into().ok() };
            let mut waiters = s.udp_waiters.lock().unwrap_or_else(|p| p.into_inner());
            let Some(pos) = waiters.iter().position(|w| w.peer_ip == from.ip() && w.key == key) else { continue };
            let local = SocketAddr::new(to.unwrap_or(s.local.ip()), s.local.port());
            let Ok(stream) = reuse_udp(local).and_then(|u| u.connect(from).map(|_| u)) else { continue };
            // Reply from the connected socket so later datagrams of this peer land on it.
            let reply: &[u8] = if key.is_some() {
                msg
            } else if msg == iperf3_wire::UDP_HELLO {
                iperf3_wire::UDP_REPLY
            } else {
                &iperf3_wire::LEGACY_UDP_REPLY.to_ne_bytes()
            };
            if stream.send(reply).is_ok() && waiters[pos].tx.try_send(stream).is_err() {
                waiters.remove(pos);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::registry::test_support::shared;
    use super::*;
    use std::time::{Duration, Instant};

    /// What `client` gets back within a short wait, if anything.
    fn answer(client: &UdpSocket, msg: &[u8]) -> Option<Vec<u8>> {
        client.send(msg).unwrap();
        let mut buf = [0u8; 4096];
        client.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
    }

    #[test]
    fn hostile_datagrams_get_no_answer_and_echo_only_answers_its_session() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(crate::socket::POLL)).unwrap();
        let s = shared(Duration::from_secs(5));
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(sock.local_addr().unwrap()).unwrap();
        client.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let s2 = s.clone();
        let server = std::thread::spawn(move || udp_loop(&sock, &s2));

        let keys = wire::SessionKeys::random();
        let key = keys.id();
        let mut echo = wire::UDP_ECHO_TAG.to_vec();
        echo.extend_from_slice(&key);
        echo.extend_from_slice(&[9; 8]);
        let mut data_hello = wire::UDP_DATA_TAG.to_vec();
        data_hello.extend_from_slice(&key);
        for hostile in [
            &b""[..],
            b"HRE1",
            &echo,                  // a key no session holds
            &data_hello,            // no test waits for it
            iperf3_wire::UDP_HELLO, // no iperf3 test waits either
            &[0xff; 2000],
        ] {
            assert_eq!(answer(&client, hostile), None, "{hostile:?}");
        }
        // A session of another address: its key alone opens nothing.
        s.open_session(keys, [10, 0, 0, 1].into());
        assert_eq!(answer(&client, &echo), None);
        s.open_session(keys, [127, 0, 0, 1].into());
        assert_eq!(answer(&client, &echo).as_deref(), Some(&echo[..]), "the reply is the request itself");

        s.stop.store(true, Ordering::Relaxed);
        let t0 = Instant::now();
        while !server.is_finished() {
            assert!(t0.elapsed() < Duration::from_secs(5), "the UDP loop did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
