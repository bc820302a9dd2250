//! A framed connection: whole frames queued to send, and whole frames cut
//! from what is received, over one non-blocking TCP socket; every wait is
//! bounded by a deadline and ended by Ctrl-C within `wait::SLICE`. iSCSI's
//! session sends and receives its PDUs through it, and SMB's connection
//! (`smb::conn`) its messages.
//!
//! What it owns: the socket's send and receive buffers, moving bytes
//! without blocking, the one wait on the socket (`os::wait_socket`), and the
//! errors of a connection that ended. A frame comes whole or not at all:
//! [`Conn::recv`] returns one within its deadline, or an error whose kind
//! `ProtoError::io` sorts into `Lost` (closed, reset, silent past the
//! deadline) or `Stopped` (Ctrl-C); how the peer ended it is kept in the
//! error ([`Ended`]) for a caller that words it itself. What it must not do: read a protocol's
//! headers (the caller says how long a frame is) or keep its sequence
//! numbers, or allocate or copy per frame beyond the receive buffer: a large
//! payload can be read straight into the caller's own buffer
//! ([`Conn::read_some`]).

use crate::os;
use crate::wait;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sent bytes are dropped from the front of the send buffer once this many
/// pile up before a write that did not empty it.
const TX_COMPACT: usize = 8 << 20;

/// Bytes from which a write straight from the caller's pieces pays: below,
/// copying them to be sent with what follows costs less than a writev of
/// their own (small requests are written many to one call).
const WRITE_DIRECT_FROM: usize = 64 << 10;
/// The most slices one writev takes here (Linux's IOV_MAX is 1024).
const WRITEV_MAX: usize = 1024;

/// The peer and its exchanges as the connection's errors name them.
#[derive(Debug, Clone, Copy)]
pub struct Names {
    /// The peer as a sentence's subject ("the target").
    pub peer: &'static str,
    /// One exchange with it, as Ctrl-C's message names it ("an iSCSI exchange").
    pub exchange: &'static str,
}

/// One non-blocking TCP connection with its send and receive buffers.
pub struct Conn {
    sock: TcpStream,
    rx: Vec<u8>,
    rx_start: usize,
    rx_end: usize,
    tx: Vec<u8>,
    tx_pos: usize,
    /// Bytes ever queued to send.
    tx_total: u64,
    /// The peer closed its side; what came before is still parsed.
    eof: bool,
    /// The connection ended (closed, reset, silent, Ctrl-C).
    broken: bool,
    last_heard: Instant,
    /// What the errors of a silent peer say it was silent for.
    silence: Duration,
    stop: Arc<AtomicBool>,
    names: Names,
    /// Bytes that must be queued before a wait ends (SO_RCVLOWAT as last set).
    wake_at: usize,
}

impl Conn {
    /// A connection on `sock` (already non-blocking) receiving into `rx_len`
    /// bytes (at least two of the largest frames, so one is always whole
    /// after the other); `silence` is what a timed-out wait names.
    pub fn new(sock: TcpStream, stop: Arc<AtomicBool>, names: Names, silence: Duration, rx_len: usize) -> Conn {
        Conn {
            sock,
            rx: vec![0; rx_len],
            rx_start: 0,
            rx_end: 0,
            tx: Vec::with_capacity(1 << 20),
            tx_pos: 0,
            tx_total: 0,
            eof: false,
            broken: false,
            last_heard: Instant::now(),
            silence,
            stop,
            names,
            wake_at: 1,
        }
    }

    /// The socket.
    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Whether the connection ended: nothing more can be sent or received.
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// When the peer last sent a byte.
    pub fn last_heard(&self) -> Instant {
        self.last_heard
    }

    /// The peer's silence counts from now (a first request went out).
    pub fn heard_now(&mut self) {
        self.last_heard = Instant::now();
    }

    /// Queues `head`, `data` and `padding` zero bytes to send.
    pub fn push(&mut self, head: &[u8], data: &[u8], padding: usize) {
        if self.tx_pos == self.tx.len() {
            self.tx.clear();
            self.tx_pos = 0;
        }
        self.tx.extend_from_slice(head);
        self.tx.extend_from_slice(data);
        self.tx.resize(self.tx.len() + padding, 0);
        self.tx_total += (head.len() + data.len() + padding) as u64;
    }

    /// Queues `pieces` to send, in order, as [`Conn::push`] would; when
    /// they are large ([`WRITE_DIRECT_FROM`]) and nothing else waits to be
    /// sent, what the socket takes at once is written straight from them
    /// (writev), so only the rest is copied into the send buffer. An error
    /// is left for the next write to report.
    pub fn push_pieces(&mut self, pieces: &[&[u8]]) {
        let (mut piece, mut within) = (0, 0);
        let large = pieces.iter().map(|p| p.len()).sum::<usize>() >= WRITE_DIRECT_FROM;
        if large && self.unsent() == 0 && !self.broken {
            while piece < pieces.len() {
                let batch: Vec<io::IoSlice> = std::iter::once(&pieces[piece][within..])
                    .chain(pieces[piece + 1..].iter().copied())
                    .take(WRITEV_MAX)
                    .map(io::IoSlice::new)
                    .collect();
                match self.sock.write_vectored(&batch) {
                    Ok(0) => break,
                    Ok(mut n) => {
                        self.tx_total += n as u64;
                        while n > 0 {
                            let left = pieces[piece].len() - within;
                            if n < left {
                                within += n;
                                break;
                            }
                            n -= left;
                            (piece, within) = (piece + 1, 0);
                        }
                        // Empty pieces are nothing left to write.
                        while piece < pieces.len() && pieces[piece].len() == within {
                            (piece, within) = (piece + 1, 0);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        if piece < pieces.len() {
            self.push(&pieces[piece][within..], &[], 0);
            for rest in &pieces[piece + 1..] {
                self.push(rest, &[], 0);
            }
        }
    }

    /// Bytes ever queued to send.
    pub fn queued(&self) -> u64 {
        self.tx_total
    }

    /// Bytes of the output stream written to the socket so far.
    pub fn sent(&self) -> u64 {
        self.tx_total - self.unsent() as u64
    }

    /// Bytes queued and not yet written.
    pub fn unsent(&self) -> usize {
        self.tx.len() - self.tx_pos
    }

    /// Writes what the socket takes now.
    pub fn write_some(&mut self) -> io::Result<()> {
        while self.tx_pos < self.tx.len() {
            match self.sock.write(&self.tx[self.tx_pos..]) {
                Ok(0) => return Err(self.closed()),
                Ok(n) => self.tx_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.dropped(e)),
            }
        }
        if self.tx_pos == self.tx.len() {
            self.tx.clear();
            self.tx_pos = 0;
        } else if self.tx_pos > TX_COMPACT {
            self.tx.drain(..self.tx_pos);
            self.tx_pos = 0;
        }
        Ok(())
    }

    /// Reads what the socket has now: into `into` first while nothing else
    /// is buffered (a payload whose header was already cut), then into the
    /// receive buffer. Returns the bytes that went into `into`.
    pub fn read_some(&mut self, into: Option<&mut [u8]>) -> io::Result<usize> {
        self.read_some_up_to(into, usize::MAX)
    }

    /// [`Conn::read_some`], buffering at most `buffered_max` bytes: a caller
    /// that knows where the next frame's header ends reads only that far, so
    /// the large payload behind it can go straight into its own buffer
    /// instead of through the receive buffer (one copy less per byte, for
    /// one more read per frame).
    pub fn read_some_up_to(&mut self, mut into: Option<&mut [u8]>, buffered_max: usize) -> io::Result<usize> {
        if self.rx_start == self.rx_end {
            self.rx_start = 0;
            self.rx_end = 0;
        } else if self.rx_end == self.rx.len() {
            self.rx.copy_within(self.rx_start..self.rx_end, 0);
            self.rx_end -= self.rx_start;
            self.rx_start = 0;
        }
        if self.eof {
            self.broken = true;
            return Err(self.closed());
        }
        let (mut any, mut filled) = (false, 0);
        loop {
            if let Some(dst) = into.as_deref_mut() {
                // One copy less than through `rx`.
                if self.rx_start == self.rx_end && filled < dst.len() {
                    let asked = dst.len() - filled;
                    match self.sock.read(&mut dst[filled..]) {
                        Ok(0) => {
                            self.broken = true;
                            return Err(self.closed());
                        }
                        Ok(n) => {
                            filled += n;
                            any = true;
                            self.last_heard = Instant::now();
                            if n < asked {
                                return Ok(filled);
                            }
                            continue;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(filled),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(self.dropped(e)),
                    }
                }
            }
            let end = self.rx.len().min(self.rx_start.saturating_add(buffered_max));
            if self.rx_end >= end {
                return Ok(filled);
            }
            let asked = end - self.rx_end;
            match self.sock.read(&mut self.rx[self.rx_end..end]) {
                Ok(0) => {
                    // What arrived before the close (a login reject) is parsed first.
                    self.eof = true;
                    if any {
                        return Ok(filled);
                    }
                    self.broken = true;
                    return Err(self.closed());
                }
                Ok(n) => {
                    self.rx_end += n;
                    any = true;
                    self.last_heard = Instant::now();
                    // A short read emptied the socket: the next would only
                    // say WouldBlock (the waits are level-triggered).
                    if n < asked {
                        return Ok(filled);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(filled),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.dropped(e)),
            }
        }
    }

    /// Lets the next waits end only once `bytes` arrived (or the peer
    /// closed, or a slice passed): for a payload whose length is known, so
    /// that it is read in a few large reads, not one per arriving packet.
    pub fn wake_when_queued(&mut self, bytes: usize) {
        let bytes = bytes.max(1);
        if bytes != self.wake_at {
            os::wake_when_queued(&self.sock, bytes);
            self.wake_at = bytes;
        }
    }

    /// Received bytes not yet cut into frames.
    pub fn buffered(&self) -> &[u8] {
        &self.rx[self.rx_start..self.rx_end]
    }

    /// Drops the first `n` buffered bytes (taken by the caller).
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.rx_end - self.rx_start);
        self.rx_start += n;
    }

    /// Cuts the next whole frame from what was received, if it is all here:
    /// `parse` reads the frame's first `head` bytes and answers them parsed
    /// with the frame's whole length, or why they are no frame. The frame's
    /// bytes ([`Conn::bytes`]) stay as they are until the next read.
    pub fn next_frame<H, E>(
        &mut self,
        head: usize,
        parse: impl FnOnce(&[u8]) -> Result<(H, usize), E>,
    ) -> Result<Option<(H, Range<usize>)>, E> {
        let avail = self.buffered();
        if avail.len() < head {
            return Ok(None);
        }
        let (h, len) = parse(&avail[..head])?;
        if avail.len() < len {
            return Ok(None);
        }
        let frame = self.rx_start..self.rx_start + len;
        self.rx_start += len;
        Ok(Some((h, frame)))
    }

    /// The bytes of a frame [`Conn::next_frame`] cut.
    pub fn bytes(&self, frame: Range<usize>) -> &[u8] {
        &self.rx[frame]
    }

    /// Waits for the socket (readable, or writable while output waits) at
    /// most one `wait::SLICE`, writing what it takes before and after; an
    /// error once `deadline` passed or Ctrl-C was pressed. The caller reads.
    pub fn wait(&mut self, deadline: Instant) -> io::Result<()> {
        self.write_some()?;
        if self.stop.load(Ordering::Relaxed) {
            self.broken = true;
            return Err(wait::stopped(self.names.exchange));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.broken = true;
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer from {} for {} s", self.names.peer, self.silence.as_secs()),
            ));
        }
        let ready = if self.unsent() > 0 { os::Ready::ReadOrWrite } else { os::Ready::Read };
        os::wait_socket(&self.sock, ready, left.min(wait::SLICE))?;
        self.write_some()
    }

    /// Sends what is queued and receives until a whole frame is here (as
    /// [`Conn::next_frame`] cuts it), by `deadline`.
    pub fn recv<H, E: From<io::Error>>(
        &mut self,
        deadline: Instant,
        head: usize,
        mut parse: impl FnMut(&[u8]) -> Result<(H, usize), E>,
    ) -> Result<(H, Range<usize>), E> {
        loop {
            if let Some(frame) = self.next_frame(head, &mut parse)? {
                return Ok(frame);
            }
            self.wait(deadline)?;
            self.read_some(None)?;
        }
    }

    /// Bytes as if read from the socket (fuzzing, the hostile-peer tests).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn received(&mut self, data: &[u8]) {
        let n = data.len().min(self.rx.len() - self.rx_end);
        self.rx[self.rx_end..self.rx_end + n].copy_from_slice(&data[..n]);
        self.rx_end += n;
    }

    /// The peer closed the connection: lost, not the user's.
    fn closed(&self) -> io::Error {
        io::Error::new(io::ErrorKind::ConnectionAborted, Ended { peer: self.names.peer, cause: None })
    }

    fn dropped(&mut self, e: io::Error) -> io::Error {
        self.broken = true;
        match e.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted => {
                io::Error::new(io::ErrorKind::ConnectionAborted, Ended { peer: self.names.peer, cause: Some(e) })
            }
            _ => e,
        }
    }
}

/// How the peer ended the connection, inside the error [`Conn`] returns
/// for it: a caller that words its own errors finds the cause with
/// [`Ended::of`] instead of reading the message.
#[derive(Debug)]
pub struct Ended {
    peer: &'static str,
    /// The socket's error when the peer reset the connection; none when it
    /// closed it.
    pub cause: Option<io::Error>,
}

impl Ended {
    /// The end inside `e`, if `e` is the error of a connection the peer ended.
    pub fn of(e: &io::Error) -> Option<&Ended> {
        e.get_ref().and_then(|inner| inner.downcast_ref::<Ended>())
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.cause {
            None => write!(f, "{} closed the connection", self.peer),
            Some(e) => write!(f, "{} dropped the connection ({e})", self.peer),
        }
    }
}

impl std::error::Error for Ended {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProtoError;
    use std::net::TcpListener;

    const NAMES: Names = Names { peer: "the peer", exchange: "a test exchange" };

    /// Frames of a 2-byte big-endian length and that many bytes.
    fn frame(head: &[u8]) -> Result<((), usize), io::Error> {
        Ok(((), 2 + usize::from(u16::from_be_bytes([head[0], head[1]]))))
    }

    fn conn(stop: Arc<AtomicBool>) -> (Conn, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.set_nonblocking(true).unwrap();
        (Conn::new(c, stop, NAMES, Duration::from_secs(1), 64), l.accept().unwrap().0)
    }

    #[test]
    fn a_frame_sent_in_pieces_comes_whole() {
        let (mut c, mut peer) = conn(Arc::default());
        std::thread::spawn(move || {
            for piece in [&[0u8][..], &[5, b'h', b'e'], &[b'l', b'l', b'o', 0, 1, b'!']] {
                peer.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_secs(2));
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        let ((), f) = c.recv(deadline, 2, frame).unwrap();
        assert_eq!(c.bytes(f), b"\0\x05hello");
        let ((), f) = c.recv(deadline, 2, frame).unwrap();
        assert_eq!(c.bytes(f), b"\0\x01!");
    }

    #[test]
    fn a_silent_or_closed_peer_is_lost_and_ctrl_c_is_stopped() {
        let (mut c, _peer) = conn(Arc::default());
        let e = c.recv(Instant::now() + Duration::from_millis(150), 2, frame).unwrap_err();
        assert_eq!(e.to_string(), "no answer from the peer for 1 s");
        assert!(matches!(ProtoError::io(&e), ProtoError::Lost(_)) && c.broken(), "{e:?}");

        let (mut c, peer) = conn(Arc::default());
        drop(peer);
        let e = c.recv(Instant::now() + Duration::from_secs(5), 2, frame).unwrap_err();
        assert_eq!(e.to_string(), "the peer closed the connection");
        assert!(Ended::of(&e).is_some_and(|end| end.cause.is_none()), "{e:?}");
        assert!(matches!(ProtoError::io(&e), ProtoError::Lost(_)), "{e:?}");

        let (mut c, _peer) = conn(Arc::new(AtomicBool::new(true)));
        let e = c.recv(Instant::now() + Duration::from_secs(5), 2, frame).unwrap_err();
        assert!(matches!(ProtoError::io(&e), ProtoError::Stopped(_)), "{e:?}");
    }
}
