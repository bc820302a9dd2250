//! The SMB client against hostile servers on loopback: answers to the
//! wrong request, more written than sent, bytes trickled to hold a request
//! or a login, Ctrl-C, a login without random numbers, and on an encrypted
//! session answers sent in the clear or tampered with.

use super::engine::SmbEngine;
use super::session::{random_from, Session};
use super::wire::{self, status, Command, HEADER};
use super::*;
use headroom_disk::IoEngine;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

/// One SMB2 response frame (prefix included).
fn frame(command: Command, status: u32, message_id: u64, body: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; HEADER];
    h[..4].copy_from_slice(b"\xfeSMB");
    h[4..6].copy_from_slice(&64u16.to_le_bytes());
    h[8..12].copy_from_slice(&status.to_le_bytes());
    h[12..14].copy_from_slice(&(command as u16).to_le_bytes());
    h[14..16].copy_from_slice(&1u16.to_le_bytes());
    h[16..20].copy_from_slice(&wire::FLAG_RESPONSE.to_le_bytes());
    h[24..32].copy_from_slice(&message_id.to_le_bytes());
    h.extend_from_slice(body);
    let mut f = (h.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&h);
    f
}

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (c, l.accept().unwrap().0)
}

/// Runs `f` on a thread; None when it has not returned within `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// Sends `bytes` one every 200 ms, for as long as the peer listens.
fn trickle(mut sock: TcpStream, bytes: Vec<u8>) {
    std::thread::spawn(move || {
        for b in bytes.iter().cycle() {
            if sock.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
}

#[test]
fn a_write_answered_by_a_read_response_is_refused() {
    let (client, mut server) = pair();
    let mut engine = SmbEngine::detached(client, Arc::default());
    let mut body = vec![17u8, 0, 80, 0];
    body.extend_from_slice(&512u32.to_le_bytes());
    body.extend_from_slice(&[0; 8]);
    body.extend_from_slice(&[7; 512]);
    server.write_all(&frame(Command::Read, status::SUCCESS, 2, &body)).unwrap();
    let mut out = Vec::new();
    let e = engine.getevents(1, &mut out).expect_err("a READ answer to a WRITE");
    assert!(e.to_string().contains("answered request 2 (Write)"), "{e}");
    assert!(out.is_empty());
}

#[test]
fn a_read_answer_in_pieces_lands_in_its_buffer_past_its_padding() {
    let (client, server) = pair();
    let mut engine = SmbEngine::detached(client, Arc::default());
    // DataOffset 88: 8 bytes of padding between the READ head and the data.
    let mut body = vec![17u8, 0, 88, 0];
    body.extend_from_slice(&4000u32.to_le_bytes());
    body.extend_from_slice(&[0; 8]);
    body.extend_from_slice(&[0xee; 8]);
    body.extend(std::iter::repeat_n(7u8, 4000));
    body.extend_from_slice(&[0xee; 3]); // after the data: dropped
    let f = frame(Command::Read, status::SUCCESS, 1, &body);
    send_in_pieces(server, f, [50, 100, 2000]);
    assert_one_read_of_4000(&mut engine, 7);
}

/// Writes `f` in four pieces cut at `cuts`, 30 ms apart, then holds the
/// connection open: the engine must assemble the answer across reads.
fn send_in_pieces(mut server: TcpStream, f: Vec<u8>, cuts: [usize; 3]) {
    std::thread::spawn(move || {
        let [a, b, c] = cuts;
        for piece in [&f[..a], &f[a..b], &f[b..c], &f[c..]] {
            server.write_all(piece).unwrap();
            std::thread::sleep(Duration::from_millis(30));
        }
        std::thread::sleep(Duration::from_secs(2));
    });
}

/// One completion, tag 1, of 4000 bytes, all `byte` in buffer 0.
fn assert_one_read_of_4000(engine: &mut SmbEngine, byte: u8) {
    let mut out = Vec::new();
    engine.getevents(1, &mut out).unwrap();
    assert_eq!((out.len(), out[0].tag, out[0].result), (1, 1, 4000));
    assert!(engine.buffer_mut(0)[..4000].iter().all(|b| *b == byte));
}

/// A detached engine whose session encrypts with AES-128-GCM, and the
/// server's side of its keys.
fn encrypted_engine(client: TcpStream) -> (SmbEngine, seal::Sealer) {
    let mut engine = SmbEngine::detached(client, Arc::default());
    let keys = |salt| seal::Sealer::new(0x0311, crate::url::SmbCipher::Aes128Gcm, &[5; 16], &[6; 64], 1, salt);
    engine.conn_mut().seal = Some(keys([1; 4]));
    (engine, keys([2; 4]).peer())
}

/// `frame` (prefix included) sealed by `server`.
fn sealed(server: &mut seal::Sealer, frame: &[u8]) -> Vec<u8> {
    let mut msg = frame[4..].to_vec();
    let t = server.seal(&mut msg);
    let mut out = ((t.len() + msg.len()) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&t);
    out.extend_from_slice(&msg);
    out
}

#[test]
fn an_encrypted_read_answer_in_pieces_is_opened_into_its_buffer() {
    let (client, server) = pair();
    let (mut engine, mut keys) = encrypted_engine(client);
    let mut body = vec![17u8, 0, 80, 0];
    body.extend_from_slice(&4000u32.to_le_bytes());
    body.extend_from_slice(&[0; 8]);
    body.extend(std::iter::repeat_n(9u8, 4000));
    let f = sealed(&mut keys, &frame(Command::Read, status::SUCCESS, 1, &body));
    send_in_pieces(server, f, [30, 100, 3000]);
    assert_one_read_of_4000(&mut engine, 9);
}

#[test]
fn an_encrypted_session_refuses_clear_and_tampered_answers() {
    let mut body = vec![17u8, 0, 0, 0];
    body.extend_from_slice(&512u32.to_le_bytes());
    body.extend_from_slice(&[0; 8]);
    let answer = frame(Command::Write, status::SUCCESS, 2, &body);
    let (client, mut server) = pair();
    let (mut engine, _) = encrypted_engine(client);
    server.write_all(&answer).unwrap();
    let e = engine.getevents(1, &mut Vec::new()).expect_err("a clear answer");
    assert!(e.to_string().contains("an unencrypted answer on an encrypted session"), "{e}");
    let (client, mut server) = pair();
    let (mut engine, mut keys) = encrypted_engine(client);
    let mut bad = sealed(&mut keys, &answer);
    let last = bad.len() - 1;
    bad[last] ^= 0x40;
    server.write_all(&bad).unwrap();
    let e = engine.getevents(1, &mut Vec::new()).expect_err("a tampered answer");
    assert!(e.to_string().contains("does not authenticate"), "{e}");
    // Sealed right, the same answer completes the WRITE.
    let (client, mut server) = pair();
    let (mut engine, mut keys) = encrypted_engine(client);
    server.write_all(&sealed(&mut keys, &answer)).unwrap();
    let mut out = Vec::new();
    engine.getevents(1, &mut out).unwrap();
    assert_eq!((out[0].tag, out[0].result), (2, 512));
}

#[test]
fn a_write_answered_with_more_bytes_than_sent_is_refused() {
    let (client, mut server) = pair();
    let mut engine = SmbEngine::detached(client, Arc::default());
    let mut body = vec![17u8, 0, 0, 0];
    body.extend_from_slice(&4096u32.to_le_bytes()); // 512 were sent
    body.extend_from_slice(&[0; 8]);
    server.write_all(&frame(Command::Write, status::SUCCESS, 2, &body)).unwrap();
    let e = engine.getevents(1, &mut Vec::new()).expect_err("more written than sent");
    assert!(e.to_string().contains("answered as 4096 bytes written"), "{e}");
}

#[test]
fn a_server_trickling_bytes_cannot_hold_a_request_for_ever() {
    let (client, server) = pair();
    // An interim answer, one byte at a time: bytes keep coming, no answer does.
    trickle(server, frame(Command::Read, status::PENDING, 1, &[9, 0, 0, 0, 0, 0, 0, 0, 0]));
    let r = within(Duration::from_secs(20), move || {
        let mut engine = SmbEngine::detached(client, Arc::default());
        engine.getevents(1, &mut Vec::new())
    });
    let e = r.expect("the request's deadline ends the wait").expect_err("no answer came");
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("did not complete a request within 3 s"), "{e}");
}

#[test]
fn ctrl_c_ends_a_wait_for_an_answer_at_once() {
    let (client, server) = pair();
    trickle(server, vec![0]);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        flag.store(true, Ordering::SeqCst);
    });
    let r = within(Duration::from_secs(2), move || {
        let mut engine = SmbEngine::detached(client, stop);
        engine.getevents(1, &mut Vec::new())
    });
    let e = r.expect("Ctrl-C ends the wait within 2 s").expect_err("stopped");
    assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
}

fn target(addr: SocketAddr, stop: Arc<AtomicBool>) -> Target {
    Target {
        addrs: vec![addr],
        source: Default::default(),
        server: crate::url::Server { host: "127.0.0.1".into(), port: addr.port() },
        share: "s".into(),
        login: Login { user: String::new(), password: String::new(), domain: String::new() },
        shown: "smb://127.0.0.1/s/f".into(),
        stop,
        encrypt: None,
    }
}

/// A server that answers NEGOTIATE with interim answers for ever, a
/// byte at a time (the login loop that once outlived Ctrl-C).
fn pending_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (sock, _) = l.accept().unwrap();
        trickle(sock, frame(Command::Negotiate, status::PENDING, 0, &[9, 0, 0, 0, 0, 0, 0, 0, 0]));
    });
    addr
}

#[test]
fn a_login_has_a_deadline_however_the_server_trickles() {
    let addr = pending_server();
    let r = within(Duration::from_secs(20), move || Session::connect(&target(addr, Arc::default()), 1).map(|_| ()));
    let e = r.expect("the login's deadline ends it").expect_err("never logged in");
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("the SMB login took more than 3 s"), "{e}");
}

#[test]
fn ctrl_c_ends_a_login_at_once() {
    let addr = pending_server();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        flag.store(true, Ordering::SeqCst);
    });
    let r = within(Duration::from_secs(2), move || Session::connect(&target(addr, stop), 1).map(|_| ()));
    let e = r.expect("Ctrl-C ends the login within 2 s").expect_err("stopped");
    assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
}

#[test]
fn no_random_numbers_no_login() {
    let e = random_from::<8>("nas", |_| Err(getrandom::Error::UNSUPPORTED)).expect_err("getrandom failed");
    assert!(e.to_string().contains("no random numbers for the login to the SMB server nas"), "{e}");
    assert_eq!(
        random_from::<4>("nas", |b| {
            b.fill(5);
            Ok(())
        })
        .unwrap(),
        [5; 4]
    );
}
