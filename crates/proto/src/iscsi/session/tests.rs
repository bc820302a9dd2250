//! The session against hostile targets on loopback (a CmdSN window of 2,
//! R2Ts repeated or beyond MaxOutstandingR2T, a GOOD status without the
//! data, bytes trickled to hold a command, Ctrl-C) and a window-capped
//! pipeline whose reads land byte for byte in their buffers.

use super::*;
use crate::iscsi::pdu::{Header, RESERVED_TAG};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::Ordering;

fn read_pdu(c: &mut TcpStream) -> Option<([u8; BHS], Vec<u8>)> {
    let mut b = [0u8; BHS];
    c.read_exact(&mut b).ok()?;
    let n = pdu::pad4((usize::from(b[5]) << 16) | (usize::from(b[6]) << 8) | usize::from(b[7]));
    let mut d = vec![0; n];
    c.read_exact(&mut d).ok()?;
    Some((b, d))
}

/// A target that keeps the CmdSN window at 2 and answers READs with
/// data once two commands arrived (or none came for 100 ms). Returns the
/// most commands it held at once and how many arrived beyond the window.
fn narrow_target() -> (String, std::thread::JoinHandle<(usize, usize)>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        read_pdu(&mut c).unwrap();
        let (mut exp, mut stat) = (1u32, 1u32);
        let login = Out::new(op::LOGIN_RESP, false, 0x80 | (1 << 2) | 3).word(28, exp).word(32, exp + 1);
        c.write_all(&login.bhs).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let (mut held, mut most, mut beyond) = (Vec::new(), 0, 0);
        loop {
            match read_pdu(&mut c) {
                Some((b, _)) if b[0] & 0x3f == op::LOGOUT => {
                    let r = Out::new(op::LOGOUT_RESP, false, 0x80).word(16, pdu::Header::parse(&b).unwrap().itt);
                    c.write_all(&r.bhs).unwrap();
                    return (most, beyond);
                }
                Some((b, _)) => {
                    let h = Header::parse(&b).unwrap();
                    let cmd_sn = u32::from_be_bytes([b[24], b[25], b[26], b[27]]);
                    if pdu::sn_gt(cmd_sn, exp + 1) {
                        beyond += 1;
                    }
                    exp = cmd_sn + 1;
                    held.push((h.itt, h.ttt)); // ttt holds the expected length here
                    most = most.max(held.len());
                    if held.len() < 2 {
                        continue;
                    }
                }
                None if held.is_empty() => return (most, beyond),
                None => {}
            }
            for (itt, len) in held.drain(..) {
                let r = Out::new(op::DATA_IN, false, 0x81)
                    .data_len(len as usize)
                    .word(16, itt)
                    .word(20, RESERVED_TAG)
                    .word(24, stat)
                    .word(28, exp)
                    .word(32, exp + 1);
                stat += 1;
                // The header first, the payload a moment later: the
                // initiator then reads the payload straight into its buffer.
                c.write_all(&r.bhs).unwrap();
                std::thread::sleep(Duration::from_millis(2));
                let payload: Vec<u8> = (0..len).map(|i| (i as u8) ^ (itt as u8)).collect();
                c.write_all(&payload[..100]).unwrap();
                std::thread::sleep(Duration::from_millis(2));
                c.write_all(&payload[100..]).unwrap();
            }
        }
    });
    (addr, handle)
}

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (c, l.accept().unwrap().0)
}

fn r2t(itt: u32, offset: u32, len: u32) -> [u8; BHS] {
    Out::new(op::R2T, false, 0x80).word(16, itt).word(20, 7).word(28, 1).word(32, 64).word(40, offset).word(44, len).bhs
}

#[test]
fn a_target_repeating_r2ts_cannot_fill_memory() {
    let (client, _server) = pair();
    let mut s = Session::detached(client, Arc::default());
    s.outstanding();
    // The whole write asked for again and again by a target that never reads.
    for _ in 0..100 {
        s.received(&r2t(2, 0, 4096));
    }
    let e = s.process().expect_err("a range asked for twice");
    assert!(e.to_string().contains("asked for twice"), "{e}");
    assert!(s.conn.unsent() <= 4096 + 4 * BHS, "{} bytes queued", s.conn.unsent());
    s.dead = true;
}

#[test]
fn r2ts_beyond_max_outstanding_r2t_are_refused() {
    let (client, _server) = pair();
    let mut s = Session::detached(client, Arc::default());
    s.outstanding();
    assert_eq!(s.params.max_outstanding_r2t, 1);
    // The target reads nothing: once the socket's buffers are full, a
    // Data-Out waits in the send buffer (this test is not about how much
    // may wait there).
    s.tx_limit = usize::MAX;
    s.conn.push(&vec![0; 32 << 20], &[], 0);
    s.conn.write_some().unwrap();
    assert!(s.conn.unsent() > 0, "the socket took 32 MiB");
    // The second R2T comes while the first one's Data-Out has not left.
    s.received(&r2t(2, 0, 2048));
    s.received(&r2t(2, 2048, 2048));
    let e = s.process().expect_err("two outstanding where one is allowed");
    assert!(e.to_string().contains("MaxOutstandingR2T=1"), "{e}");
    s.dead = true;
    // Once the first one's data is written, the next is fine.
    let (client, mut server) = pair();
    let mut s = Session::detached(client, Arc::default());
    s.outstanding();
    s.received(&r2t(2, 0, 2048));
    s.process().unwrap();
    s.conn.write_some().unwrap();
    let mut got = vec![0; BHS + 2048];
    server.read_exact(&mut got).unwrap();
    s.received(&r2t(2, 2048, 2048));
    s.process().unwrap();
    s.dead = true;
}

#[test]
fn a_good_status_without_the_data_is_no_read() {
    let (client, _server) = pair();
    let mut s = Session::detached(client, Arc::default());
    s.outstanding();
    let good = Out::new(op::SCSI_RESP, false, 0x80).word(16, 1).word(24, 1).word(28, 1).word(32, 64);
    s.received(&good.bhs);
    let e = s.process().expect_err("GOOD with no Data-In");
    assert!(e.to_string().contains("delivered 0 bytes"), "{e}");
    assert!(s.done.is_empty(), "{:?}", s.done);
    s.dead = true;
    // A residual that says what was not sent is a short read, not an error.
    let (client, _server) = pair();
    let mut s = Session::detached(client, Arc::default());
    s.outstanding();
    let data_in = Out::new(op::DATA_IN, false, 0x83).data_len(512).word(16, 1).word(24, 1).word(44, 3584);
    s.received(&data_in.bhs);
    s.received(&[1; 512]);
    s.process().unwrap();
    assert_eq!(s.done.len(), 1);
    assert_eq!(s.done[0].result, 512);
    s.dead = true;
}

/// A target that sends a NOP-In (asking no answer) a byte every 200 ms.
fn trickling_target() -> TcpStream {
    let (client, mut server) = pair();
    let nop = Out::new(op::NOP_IN, false, 0x80).word(16, RESERVED_TAG).word(20, RESERVED_TAG).word(28, 1).word(32, 64);
    std::thread::spawn(move || {
        for b in nop.bhs.iter().cycle() {
            if server.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    client
}

#[test]
fn a_trickling_target_cannot_hold_a_command_for_ever() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = Session::detached(trickling_target(), Arc::default());
        let _ = tx.send(s.command([0; 16], 0).map(|_| ()));
    });
    let e = rx.recv_timeout(Duration::from_secs(20)).expect("the command's deadline ends it").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("no status from the target within 3 s"), "{e}");
}

#[test]
fn ctrl_c_ends_a_wait_for_the_target_at_once() {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || {
        let mut s = Session::detached(trickling_target(), flag);
        let _ = tx.send(s.command([0; 16], 0).map(|_| ()));
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    let e = rx.recv_timeout(Duration::from_secs(2)).expect("Ctrl-C ends it within 2 s").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
}

#[test]
fn commands_stay_within_the_cmdsn_window_and_the_cap_is_recorded() {
    let (addr, target) = narrow_target();
    let spec = LoginSpec {
        addr,
        target: "iqn.2026-11.dev.headroom:test".into(),
        chap: None,
        lun: 1,
        stop: Arc::default(),
        source: Default::default(),
        keys: Default::default(),
    };
    let mut s = Session::login(&spec, 8, 4096).unwrap();
    assert_eq!(s.params.cmdsn_window, 2);
    s.set_io(512, false);
    for i in 0..8u16 {
        s.queue(IoUnit {
            kind: IoKind::Read,
            offset: u64::from(i) * 4096,
            len: 4096,
            buf_index: i,
            tag: 100 + u64::from(i),
        })
        .unwrap();
    }
    s.commit().unwrap();
    let mut out = Vec::new();
    while out.len() < 8 {
        s.getevents(1, &mut out).unwrap();
    }
    assert!(out.iter().all(|c| c.result == 4096), "{out:?}");
    // Every byte where it belongs, whichever way it was received; ITTs
    // were handed out from 1 in queue order.
    for i in 0..8u16 {
        let itt = u32::from(i) + 1;
        let expect: Vec<u8> = (0..4096u32).map(|b| (b as u8) ^ (itt as u8)).collect();
        assert!(s.buffer_mut(i)[..4096] == expect[..], "buffer {i}");
    }
    assert_eq!(s.window_capped, Some(2));
    drop(s);
    let (most, beyond) = target.join().unwrap();
    assert_eq!((most, beyond), (2, 0), "commands held at once, commands beyond the window");
}

/// Large Data-In PDUs arriving back to back: once one large PDU was seen,
/// only headers go through the receive buffer and every later payload is
/// read straight into the I/O buffer (one copy less per byte), and the data
/// lands byte for byte. Reading as much as the socket had would have taken
/// the three PDUs sent together whole into the receive buffer.
#[test]
fn payloads_behind_large_data_in_headers_go_straight_into_the_buffer() {
    const PIECE: usize = 64 << 10;
    let (client, mut server) = pair();
    client.set_nonblocking(true).unwrap();
    let mut s = Session::fresh(client, Arc::default(), 0, (1, 4 * PIECE), OUR_MAX_RECV);
    (s.max_cmd_sn, s.next_itt) = (64, 4);
    s.tasks.insert(1, Task::new(1, IoKind::Read, Sink::Pool(0), 4 * PIECE as u32));
    let data: Vec<u8> = (0..4 * PIECE).map(|i| (i * 7 + i / 251) as u8).collect();
    let pdu = |i: usize| {
        let flags = if i == 3 { 0x81 } else { 0 };
        let h = Out::new(op::DATA_IN, false, flags).data_len(PIECE).word(16, 1).word(20, RESERVED_TAG);
        let h = h.word(24, 1).word(28, 1).word(32, 64).word(40, (i * PIECE) as u32);
        [&h.bhs[..], &data[i * PIECE..(i + 1) * PIECE]].concat()
    };
    let (first, rest) = (pdu(0), [pdu(1), pdu(2), pdu(3)].concat());
    let target = std::thread::spawn(move || {
        server.write_all(&first).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        server.write_all(&rest).unwrap();
        server
    });
    let mut done = Vec::new();
    s.getevents(1, &mut done).unwrap();
    let _server = target.join().unwrap();
    assert_eq!(done.len(), 1);
    assert!(s.buffer_mut(0)[..4 * PIECE] == data[..], "the payload landed byte for byte");
    assert!(s.received_direct >= 3 * PIECE as u64, "{} bytes direct", s.received_direct);
    s.dead = true;
}

/// A Data-Out burst leaves straight from the I/O buffer when nothing else
/// waits to be sent, in Data-Out PDUs of the target's MaxRecvDataSegmentLength
/// whose headers, payloads and padding arrive in order, byte for byte.
#[test]
fn a_data_out_burst_is_written_from_the_buffer_in_order() {
    let (client, mut server) = pair();
    let mut s = Session::detached(client, Arc::default());
    s.outstanding();
    const LEN: usize = 64 << 10;
    s.tasks.insert(2, Task::new(2, IoKind::Write, Sink::Pool(0), LEN as u32));
    s.pool = BufferPool::new(1, LEN, 4096);
    s.params.target_max_recv = 8190; // PDUs of 8190 bytes (2 of padding each), the last of 16
    let data: Vec<u8> = (0..LEN).map(|i| (i % 253) as u8).collect();
    s.buffer_mut(0)[..LEN].copy_from_slice(&data);
    s.received(&r2t(2, 0, LEN as u32));
    s.process().unwrap();
    assert_eq!(s.conn.unsent(), 0, "all of it written at once, none copied to the send buffer");
    let mut got = Vec::new();
    while got.len() < LEN {
        let (bhs, payload) = read_pdu(&mut server).unwrap();
        let h = Header::parse(&bhs).unwrap();
        assert_eq!((h.opcode, h.word40 as usize), (op::DATA_OUT, got.len()));
        assert_eq!(h.flags & flag::FINAL != 0, got.len() + h.data_len == LEN);
        got.extend_from_slice(&payload[..h.data_len]);
    }
    assert!(got == data);
    s.dead = true;
}
