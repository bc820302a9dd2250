//! headroom's NFS client against what nfs-ganesha answered it, replayed.
//! headroom does not decode NFS itself (libnfs does), so the captured frames
//! (`tests/frames/nfs-ganesha.*`, taken by `scripts/capture-frames.sh`) are
//! not decoded here: a fake server on loopback answers the client's N-th
//! call on its M-th connection with the reply ganesha gave to the N-th call
//! of the M-th captured connection, and the test checks what the client
//! makes of it (the share, the bytes a write and a read moved, the data).
//! The client's xids differ from run to run (libnfs seeds them from the
//! time and the pid), so each reply takes the xid of the call it answers.
//! The same server then breaks one reply, and the client must end with a
//! protocol error in one line, within a deadline, never a panic or a hang.
//! No root: loopback only.

#![cfg(feature = "nfs")]

use headroom_disk::{one_io, IoKind, IoUnit, ShareIo, SyncMode, TargetOptions};
use headroom_proto::{ProtoError, ShareUrl};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The capture's name in tests/frames.
const CAPTURE: &str = "nfs-ganesha";

/// The export path the capture mounted (NFSv4 pseudo path).
const EXPORT: &str = "/export";

const IO: u32 = 4096;

/// What the session writes and reads back: no two 4-byte words alike.
fn pattern() -> Vec<u8> {
    (0..IO / 4).flat_map(|i| (i.wrapping_mul(0x9e37_79b9) ^ 0x5a5a_0000).to_be_bytes()).collect()
}

/// What the client reported.
#[derive(Debug, PartialEq)]
struct Seen {
    size: u64,
    written: Vec<u8>,
    read: Vec<u8>,
}

/// The short session the frames were captured from: open the share
/// (mount, look the export up, create the test file), write the pattern
/// over one connection, read it back over another, remove the file.
fn session(target: &str) -> Result<Seen, ProtoError> {
    let ShareUrl::Nfs(url) = ShareUrl::parse(target).expect("an nfs:// URL") else { panic!("{target}") };
    let opts = TargetOptions { size: Some(1 << 20), ..TargetOptions::default() };
    let share = headroom_proto::nfs::open(&url, &opts, &[])?;
    let io = |write| ShareIo { write, sync: SyncMode::None, depth: 1, buf_size: IO as usize, job: 0 };
    let unit = |kind| IoUnit { kind, offset: 0, len: IO, buf_index: 0, tag: 1 };
    let lost = |e: io::Error| ProtoError::io(&e);
    let mut writer = share.connect(io(true)).map_err(lost)?;
    writer.buffer_mut(0).copy_from_slice(&pattern());
    one_io(writer.as_mut(), unit(IoKind::Write)).map_err(lost)?;
    let written = writer.buffer_mut(0).to_vec();
    drop(writer);
    let mut reader = share.connect(io(false)).map_err(lost)?;
    reader.buffer_mut(0).fill(0);
    one_io(reader.as_mut(), unit(IoKind::Read)).map_err(lost)?;
    let read = reader.buffer_mut(0).to_vec();
    drop(reader);
    Ok(Seen { size: share.size(), written, read })
}

fn frames(file: &str) -> Option<Vec<u8>> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/frames").join(file)).ok()
}

/// The ONC RPC records in `bytes` (RFC 5531 record marking: a 4-byte
/// header, the high bit for the last fragment), fragments joined; a record
/// cut short by the capture's limit is left out.
fn records(bytes: &[u8]) -> Vec<Vec<u8>> {
    let (mut out, mut record, mut at) = (Vec::new(), Vec::new(), 0);
    while let Some(header) = bytes.get(at..at + 4) {
        let marker = u32::from_be_bytes(header.try_into().expect("4 bytes"));
        let len = (marker & 0x7fff_ffff) as usize;
        let Some(fragment) = bytes.get(at + 4..at + 4 + len) else { break };
        record.extend_from_slice(fragment);
        at += 4 + len;
        if marker & 0x8000_0000 != 0 {
            out.push(std::mem::take(&mut record));
        }
    }
    out
}

/// One record from the client, or None at its end.
fn read_record(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut record = Vec::new();
    loop {
        let mut header = [0u8; 4];
        s.read_exact(&mut header).ok()?;
        let marker = u32::from_be_bytes(header);
        let mut fragment = vec![0u8; (marker & 0x7fff_ffff) as usize];
        s.read_exact(&mut fragment).ok()?;
        record.extend_from_slice(&fragment);
        if marker & 0x8000_0000 != 0 {
            return Some(record);
        }
    }
}

/// How the fake server spoils one reply.
#[derive(Clone, Copy)]
enum Spoil {
    /// Every reply as captured.
    None,
    /// The `n`-th reply on connection `conn` keeps its RPC header (the
    /// call's xid, accepted, success) but its NFS results are cut to 8 bytes.
    Truncate { conn: usize, n: usize },
}

/// A fake NFS server on loopback answering with the captured replies; the
/// listener's address.
fn replay_server(spoil: Spoil) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for (conn, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            // A connection beyond the capture (the client's own check that
            // the server listens) is closed at once.
            let (Some(c2s), Some(s2c)) =
                (frames(&format!("{CAPTURE}.{conn}.c2s")), frames(&format!("{CAPTURE}.{conn}.s2c")))
            else {
                continue;
            };
            let (calls, replies) = (records(&c2s), records(&s2c));
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                for n in 0.. {
                    let Some(call) = read_record(&mut stream) else { return };
                    let reply = calls.get(n).and_then(|c| replies.iter().find(|r| r.get(..4) == c.get(..4)));
                    let (Some(reply), Some(xid)) = (reply, call.get(..4)) else { return };
                    let mut body = [xid, &reply[4..]].concat();
                    if let Spoil::Truncate { conn: c, n: k } = spoil {
                        if conn == c && n == k {
                            // xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS: 24 bytes.
                            body.truncate(24 + 8);
                        }
                    }
                    let marker = (body.len() as u32 | 0x8000_0000).to_be_bytes();
                    if stream.write_all(&[&marker[..], &body].concat()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn have_frames() -> bool {
    if frames(&format!("{CAPTURE}.0.s2c")).is_none() {
        eprintln!("SKIPPED: no {CAPTURE} frames in tests/frames (scripts/capture-frames.sh)");
        return false;
    }
    true
}

#[test]
fn the_client_reads_back_what_it_wrote_from_ganeshas_replayed_answers() {
    if !have_frames() {
        return;
    }
    let addr = replay_server(Spoil::None);
    let seen = session(&format!("nfs://{addr}{EXPORT}?version=4")).expect("the replayed session");
    assert_eq!(seen.size, 1 << 20);
    assert_eq!(seen.written, pattern());
    // The data came from ganesha's captured READ reply: the bytes written.
    assert_eq!(seen.read, pattern(), "the data read back");
}

#[test]
fn a_malformed_reply_is_a_protocol_error_in_one_line_not_a_hang() {
    if !have_frames() {
        return;
    }
    // The calls of the first connection whose replies carry NFS results
    // (NULL's reply is its RPC header alone): SETCLIENTID, its CONFIRM, the
    // export's lookup, ...
    let replies = records(&frames(&format!("{CAPTURE}.0.s2c")).unwrap());
    let spoilt: Vec<usize> = (0..replies.len()).filter(|&k| replies[k].len() > 40).take(4).collect();
    assert_eq!(spoilt.len(), 4, "the capture holds the open's calls: {} replies", replies.len());
    for k in spoilt {
        let addr = replay_server(Spoil::Truncate { conn: 0, n: k });
        let started = Instant::now();
        let Err(e) = session(&format!("nfs://{addr}{EXPORT}?version=4")) else {
            panic!("reply {k} cut short, yet the session went through")
        };
        let took = started.elapsed();
        eprintln!("reply {k} cut: {took:?}: {e:?}");
        assert!(took < Duration::from_secs(15), "took {took:?}");
        assert!(matches!(e, ProtoError::Protocol(_)), "reply {k}: {e:?}");
        assert!(!e.to_string().contains('\n') && e.to_string().starts_with(&format!("nfs://{addr}{EXPORT}")), "{e}");
    }
    // The READ's reply (the largest of the reading connection): the
    // worker's connection ends with the same fault, naming the server.
    let replies = records(&frames(&format!("{CAPTURE}.2.s2c")).unwrap());
    let read = (0..replies.len()).max_by_key(|&k| replies[k].len()).unwrap();
    let addr = replay_server(Spoil::Truncate { conn: 2, n: read });
    let Err(e) = session(&format!("nfs://{addr}{EXPORT}?version=4")) else { panic!("the READ's reply was cut short") };
    eprintln!("READ reply cut: {e:?}");
    assert!(matches!(e, ProtoError::Protocol(_)), "{e:?}");
    assert!(!e.to_string().contains('\n') && e.to_string().contains(&format!("NFS server {addr}")), "{e}");
}

/// Not a test: `scripts/capture-frames.sh` runs the session through its
/// relay to a real ganesha (NFS_CAPTURE_TARGET) to take the frames.
#[test]
#[ignore = "run by scripts/capture-frames.sh against a real server"]
fn capture_session() {
    let target = std::env::var("NFS_CAPTURE_TARGET").expect("NFS_CAPTURE_TARGET=nfs://HOST:PORT/export?version=4");
    let seen = session(&target).expect("the session against the real server");
    assert_eq!(seen.read, pattern());
}
