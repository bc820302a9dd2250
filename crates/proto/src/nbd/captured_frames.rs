//! Replays what a real nbdkit (1.32.5, memory plugin, Debian 12) sent
//! headroom's NBD client on loopback, stored under tests/frames/ by
//! scripts/capture-frames.sh, to libnbd over a socketpair: the newstyle-fixed
//! handshake, what headroom reads as granted, and one structured read reply
//! through the engine, without root or network. Owns no logic of its own;
//! must not re-implement what nbd.rs reads.

use super::*;
use std::io::Write;
use std::os::unix::net::UnixStream;

/// Connection 0 of the capture: the probe connection (handshake only).
const PROBE_CONNECTION: &[u8] = include_bytes!("../../tests/frames/nbd-nbdkit.0.s2c");
/// Connection 1: the I/O connection (handshake, then 4 KiB read replies).
const IO_CONNECTION: &[u8] = include_bytes!("../../tests/frames/nbd-nbdkit.1.s2c");

/// The client's end of a socketpair whose server end has said `server_bytes`.
fn replayed(server_bytes: &[u8]) -> (UnixStream, UnixStream) {
    let (mut server, client) = UnixStream::pair().unwrap();
    server.write_all(server_bytes).unwrap();
    client.set_nonblocking(true).unwrap();
    (server, client)
}

fn url() -> NbdUrl {
    NbdUrl { server: crate::url::Server { host: "127.0.0.1".into(), port: 20810 }, export: String::new() }
}

#[test]
fn nbdkit_newstyle_handshake_grants_a_64_mib_export_with_flush_and_fua() {
    let (_server, client) = replayed(PROBE_CONNECTION);
    let h = handshake(&url(), client.into(), &AtomicBool::new(false)).unwrap();
    let g = Granted::read(&h).unwrap();
    assert_eq!(g.protocol.as_deref(), Some("newstyle-fixed"));
    let m = g.as_map();
    assert_eq!(m["export_size"], 64 << 20);
    assert_eq!((m["read_only"], m["can_flush"], m["can_fua"], m["structured_replies"]), (0, 1, 1, 1));
}

#[test]
fn nbdkit_structured_read_reply_completes_the_first_read() {
    let (_server, client) = replayed(IO_CONNECTION);
    let u = url();
    let h = handshake(&u, client.into(), &AtomicBool::new(false)).unwrap();
    let granted = Granted::read(&h).unwrap();
    let mut engine = NbdEngine {
        handle: ManuallyDrop::new(h),
        done: Box::into_raw(Box::default()),
        pool: BufferPool::new(1, 4096, 4096),
        queued: Vec::new(),
        fua: false,
        can_flush: granted.can_flush,
        shown: display(&u),
        issued: HashMap::new(),
        stop: Arc::default(),
    };
    engine.buffer_mut(0).fill(0xa5);
    // libnbd's first cookie is 1, the handle the captured reply answers, for offset 0.
    engine.queue(IoUnit { kind: IoKind::Read, offset: 0, len: 4096, buf_index: 0, tag: 7 }).unwrap();
    engine.commit().unwrap();
    let mut out = Vec::new();
    engine.getevents(1, &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].tag, out[0].result), (7, 4096));
    // nbdkit's memory plugin holds zeros where nothing was written.
    assert!(engine.buffer_mut(0).iter().all(|&b| b == 0), "the reply's data landed in the buffer");
}
