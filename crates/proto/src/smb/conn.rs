//! One SMB connection on a framed connection (`crate::frame`, direct-TCP:
//! a 4-byte length before each message): requests out with their message
//! ids, credits and signature, and answers in, one at a time, for the
//! set-up calls and the engine's pipelined I/O alike; a READ's data goes
//! straight into the I/O's buffer when it has not arrived yet.
//!
//! What it owns: message ids and credits, the session and tree ids on each
//! request, signing (`sign`), 3.1.1's preauthentication hash of the
//! requests, encryption once the session turned it on (`seal`: requests
//! sealed, answers opened in place and refused unencrypted), cutting and
//! parsing answers (`wire`) and the errors of a connection that ended, in
//! the socket's own words (the callers word them for their phase). What it must not do: wait for a
//! particular answer or judge one (`session`, `engine`), or own buffers.

use super::seal::{self, Sealer, TRANSFORM};
use super::sign::{self, SigningKey};
use super::wire::{self, status, Command, RequestHeader, ResponseHeader, HEADER};
use super::CREDIT_ASK;
use crate::frame::{self, Ended, Names};
use crate::wait;
use headroom_disk::BufferPool;
use std::io;
use std::net::TcpStream;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Received bytes held at most: two of the largest answers taken whole
/// (set-up answers are a few hundred bytes). Small on purpose: what is
/// read behind one answer passes through here, and a READ's data that did
/// not goes into its buffer without a copy.
const RX_LEN: usize = 128 << 10;
/// Bytes of an answer read before deciding where the rest goes: the
/// header and a READ response's 16-byte head.
pub(super) const RX_HEAD: usize = HEADER + 16;
/// The connection's own names: its errors are reworded by [`raw`] and the
/// callers, so these do not show.
const NAMES: Names = Names { peer: "the SMB server", exchange: "an SMB request" };

/// One answer received.
pub(super) struct Answer {
    pub(super) h: ResponseHeader,
    /// The answer is a compound chain (NextCommand is set).
    pub(super) compounded: bool,
    pub(super) body: Body,
}

/// Where an answer's body is ([`Conn::body`]), until the next read.
pub(super) enum Body {
    /// In the receive buffer.
    Frame(Range<usize>),
    /// In the decrypted message of an encrypted answer.
    Opened(Range<usize>),
    /// A successful READ's data, this many bytes, placed in its buffer.
    Read(usize),
}

/// Where READ answers' data goes: the buffers, and for a message id the
/// buffer and length of the READ in flight under it.
pub(super) struct Reads<'a> {
    pub(super) pool: &'a mut BufferPool,
    pub(super) read: &'a dyn Fn(u64) -> Option<(u16, u32)>,
}

/// A READ answer whose data is being received into a buffer.
#[derive(Debug, Clone, Copy)]
struct Direct {
    h: ResponseHeader,
    compounded: bool,
    /// Padding before the data still to drop.
    pre: usize,
    buf: u16,
    at: usize,
    len: usize,
    /// Bytes after the data still to drop.
    post: usize,
}

/// An encrypted answer being received whole (it is authenticated before
/// any of it is used, so it cannot go into an I/O's buffer piecemeal).
#[derive(Debug)]
struct Sealed {
    frame: Vec<u8>,
    at: usize,
}

/// One SMB connection: the framed socket and what every request carries.
pub(super) struct Conn {
    link: frame::Conn,
    pub(super) next_id: u64,
    /// Credits held: message ids the server lets us use.
    pub(super) credits: u32,
    pub(super) session_id: u64,
    pub(super) tree_id: u32,
    /// Set once authenticated when the server requires signed messages.
    pub(super) signing: Option<SigningKey>,
    /// SMB 3.1.1's preauthentication hash while the login runs: each
    /// request is chained into it here, answers by the session.
    pub(super) preauth: Option<[u8; 64]>,
    /// Set once the session or share encrypts: every request sealed, every
    /// answer must come sealed.
    pub(super) seal: Option<Sealer>,
    /// For messages.
    pub(super) server: String,
    direct: Option<Direct>,
    sealed: Option<Sealed>,
    /// The last encrypted answer, opened ([`Body::Opened`] points in it);
    /// its allocation is reused for the next.
    opened: Vec<u8>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("server", &self.server).field("next_id", &self.next_id).finish()
    }
}

impl Conn {
    /// A connection on `sock`, before NEGOTIATE: one credit, message id 0.
    pub(super) fn new(sock: TcpStream, server: String) -> io::Result<Conn> {
        sock.set_nonblocking(true)?;
        Ok(Conn {
            // Never set: the callers look at Ctrl-C (and at the share's
            // last CLOSE, which Ctrl-C must not stop) before each wait.
            link: frame::Conn::new(sock, Arc::default(), NAMES, super::TIMEOUT, RX_LEN),
            next_id: 0,
            credits: 1,
            session_id: 0,
            tree_id: 0,
            signing: None,
            preauth: None,
            seal: None,
            server,
            direct: None,
            sealed: None,
            opened: Vec::new(),
        })
    }

    /// The socket.
    pub(super) fn socket(&self) -> &TcpStream {
        self.link.socket()
    }

    /// Whether nothing more can be sent or received.
    pub(super) fn broken(&self) -> bool {
        self.link.broken()
    }

    /// Bytes queued and not yet written.
    pub(super) fn unsent(&self) -> usize {
        self.link.unsent()
    }

    /// Bytes of the output written to the socket so far.
    pub(super) fn sent(&self) -> u64 {
        self.link.sent()
    }

    /// The server's silence counts from now (a request went out).
    pub(super) fn heard_now(&mut self) {
        self.link.heard_now();
    }

    /// When the server last sent a byte.
    pub(super) fn last_heard(&self) -> Instant {
        self.link.last_heard()
    }

    /// The bytes of an answer's body (none for a READ's data, which is in
    /// its buffer).
    pub(super) fn body(&self, body: &Body) -> &[u8] {
        match body {
            Body::Frame(r) => self.link.bytes(r.clone()),
            Body::Opened(r) => &self.opened[r.clone()],
            Body::Read(_) => &[],
        }
    }

    /// The whole message of an answer (its header and body), for the
    /// preauthentication hash.
    pub(super) fn message(&self, body: &Body) -> &[u8] {
        match body {
            Body::Frame(r) => self.link.bytes(r.start - HEADER..r.end),
            Body::Opened(r) => &self.opened[r.start - HEADER..r.end],
            Body::Read(_) => &[],
        }
    }

    /// The header of the next request, consuming `charge` credits.
    pub(super) fn header(&mut self, command: Command, charge: u16) -> RequestHeader {
        let h = RequestHeader {
            command,
            credit_charge: charge,
            credit_request: charge.saturating_add(CREDIT_ASK),
            message_id: self.next_id,
            tree_id: self.tree_id,
            session_id: self.session_id,
        };
        self.next_id += u64::from(charge.max(1));
        self.credits = self.credits.saturating_sub(u32::from(charge.max(1)));
        h
    }

    /// Queues one request, `payload` after its body (a WRITE's data),
    /// sealed when the session encrypts, else signed when it signs.
    /// Returns its message id.
    pub(super) fn request(&mut self, command: Command, charge: u16, body: &[u8], payload: &[u8]) -> u64 {
        let h = self.header(command, charge);
        let mut head = Vec::with_capacity(4 + HEADER + body.len());
        wire::put_frame_start(&mut head, &h, body.len() + payload.len());
        head.extend_from_slice(body);
        if let Some(sealer) = &mut self.seal {
            // An encrypted message is not signed (MS-SMB2 3.2.4.1.1): the
            // AEAD's tag authenticates it. The payload is copied: the I/O's
            // buffer must keep its data.
            let mut msg = Vec::with_capacity(TRANSFORM + head.len() + payload.len());
            msg.extend_from_slice(&((TRANSFORM + head.len() - 4 + payload.len()) as u32).to_be_bytes());
            msg.resize(4 + TRANSFORM, 0);
            msg.extend_from_slice(&head[4..]);
            msg.extend_from_slice(payload);
            let transform = sealer.seal(&mut msg[4 + TRANSFORM..]);
            msg[4..4 + TRANSFORM].copy_from_slice(&transform);
            self.link.push(&msg, &[], 0);
            return h.message_id;
        }
        if let Some(key) = &self.signing {
            let (header, body) = head[4..].split_at_mut(HEADER);
            key.sign_in_place(header, &[body, payload]);
        }
        if let Some(hash) = &mut self.preauth {
            *hash = sign::preauth_chain(hash, &[&head[4..], payload]);
        }
        self.link.push_pieces(&[&head, payload]);
        h.message_id
    }

    /// Writes what the socket takes now.
    pub(super) fn write_some(&mut self) -> io::Result<()> {
        self.link.write_some().map_err(raw)
    }

    /// Waits at most one `wait::SLICE` for the socket (readable, or
    /// writable while output waits), writing what it takes; the caller
    /// reads. The callers check their deadlines and Ctrl-C themselves, in
    /// their own words, so the connection's own deadline is never reached.
    pub(super) fn wait(&mut self) -> io::Result<()> {
        self.link.wait(Instant::now() + wait::SLICE + Duration::from_millis(10)).map_err(raw)
    }

    /// Reads what the socket has now: a READ answer's data whose head is
    /// in goes straight into its buffer.
    pub(super) fn read_some(&mut self, reads: Option<&mut Reads>) -> io::Result<()> {
        if let Some(s) = self.sealed.as_mut().filter(|s| s.at < s.frame.len()) {
            if self.link.buffered().is_empty() {
                s.at += self.link.read_some(Some(&mut s.frame[s.at..])).map_err(raw)?;
                return Ok(());
            }
        }
        let into = match (self.direct.as_mut(), reads) {
            (Some(d), Some(r)) if d.pre == 0 && d.at < d.len => Some((d, r)),
            _ => None,
        };
        match into {
            Some((d, r)) => {
                let n = self.link.read_some(Some(&mut r.pool.slice_mut(usize::from(d.buf))[d.at..d.len]));
                d.at += n.map_err(raw)?;
            }
            None => {
                self.link.read_some(None).map_err(raw)?;
            }
        }
        Ok(())
    }

    /// The next whole answer received, if it is here; READ answers'
    /// data into `reads`' buffers (set-up calls have none).
    pub(super) fn next(&mut self, mut reads: Option<&mut Reads>) -> io::Result<Option<Answer>> {
        if self.seal.is_some() {
            return self.next_sealed(reads);
        }
        if let Some(d) = self.direct {
            return Ok(self.drain_direct(d, reads));
        }
        let avail = self.link.buffered();
        let Some(prefix) = avail.get(..4) else { return Ok(None) };
        let len = wire::frame_len(prefix.try_into().expect("4 bytes")).map_err(|e| self.protocol_error(e))?;
        let Some(head) = avail.get(4..4 + RX_HEAD.min(len)) else { return Ok(None) };
        let h = wire::parse_header(head).map_err(|e| self.protocol_error(e))?;
        let compounded = wire::le32(head, 20) != 0;
        if let Some(r) = reads.as_deref_mut() {
            if let Some((pre, data)) = self.read_data(&h, head, len, r)? {
                let post = len - RX_HEAD - pre - data;
                let (buf, _) = (r.read)(h.message_id).expect("checked in read_data");
                if avail.len() < 4 + len {
                    self.link.consume(4 + RX_HEAD);
                    let d = Direct { h, compounded, pre, buf, at: 0, len: data, post };
                    return Ok(self.drain_direct(d, reads));
                }
                let start = 4 + RX_HEAD + pre;
                r.pool.slice_mut(usize::from(buf))[..data].copy_from_slice(&avail[start..start + data]);
                self.link.consume(4 + len);
                return Ok(Some(Answer { h, compounded, body: Body::Read(data) }));
            }
        }
        if len > RX_LEN / 2 {
            return Err(self.protocol_error(format!("an answer of {len} bytes, more than headroom takes whole")));
        }
        match self.link.next_frame(4, |_| Ok::<_, io::Error>(((), 4 + len)))? {
            Some(((), frame)) => {
                Ok(Some(Answer { h, compounded, body: Body::Frame(frame.start + 4 + HEADER..frame.end) }))
            }
            None => Ok(None),
        }
    }

    /// The next whole encrypted answer, opened; a READ's data copied into
    /// its buffer. An unencrypted answer is refused: a server (or anyone on
    /// the path) must not be able to drop the encryption.
    fn next_sealed(&mut self, reads: Option<&mut Reads>) -> io::Result<Option<Answer>> {
        if self.sealed.is_none() {
            let avail = self.link.buffered();
            let Some(head) = avail.get(..8) else { return Ok(None) };
            let len = wire::frame_len(head[..4].try_into().expect("4 bytes")).map_err(|e| self.protocol_error(e))?;
            if &head[4..8] != seal::PROTOCOL_ID {
                return Err(self.protocol_error(if &head[4..8] == b"\xfeSMB" {
                    "an unencrypted answer on an encrypted session".to_string()
                } else {
                    format!("a message starting {:02x?} where an encrypted one was due", &head[4..8])
                }));
            }
            self.link.consume(4);
            // frame_len's prefix caps `len` below 16 MiB.
            let mut frame = std::mem::take(&mut self.opened);
            frame.clear();
            frame.resize(len, 0);
            self.sealed = Some(Sealed { frame, at: 0 });
        }
        let s = self.sealed.as_mut().expect("set above");
        let src = self.link.buffered();
        let n = src.len().min(s.frame.len() - s.at);
        s.frame[s.at..s.at + n].copy_from_slice(&src[..n]);
        self.link.consume(n);
        s.at += n;
        if s.at < s.frame.len() {
            return Ok(None);
        }
        let mut frame = self.sealed.take().expect("set above").frame;
        let sealer = self.seal.as_ref().expect("checked by next");
        if let Err(e) = sealer.open(&mut frame) {
            return Err(self.protocol_error(e));
        }
        self.opened = frame;
        let msg = &self.opened[TRANSFORM..];
        let h = wire::parse_header(msg).map_err(|e| self.protocol_error(e))?;
        let compounded = wire::le32(msg, 20) != 0;
        if let Some(r) = reads {
            if let Some((pre, data)) = self.read_data(&h, &msg[..RX_HEAD.min(msg.len())], msg.len(), r)? {
                let (buf, _) = (r.read)(h.message_id).expect("checked in read_data");
                let start = RX_HEAD + pre;
                r.pool.slice_mut(usize::from(buf))[..data].copy_from_slice(&msg[start..start + data]);
                return Ok(Some(Answer { h, compounded, body: Body::Read(data) }));
            }
        }
        Ok(Some(Answer { h, compounded, body: Body::Opened(TRANSFORM + HEADER..self.opened.len()) }))
    }

    /// Where a successful READ answer's data is in its frame (padding
    /// before it, its length), when a READ of ours is in flight under its
    /// message id; an answer that does not fit that READ is an error.
    fn read_data(
        &self,
        h: &ResponseHeader,
        head: &[u8],
        frame: usize,
        r: &Reads,
    ) -> io::Result<Option<(usize, usize)>> {
        if h.command != Command::Read as u16 || h.status.0 != status::SUCCESS || frame < RX_HEAD {
            return Ok(None);
        }
        // Only a READ's answer goes into its buffer; a READ answer to
        // anything else is refused whole by the engine.
        let Some((_, asked)) = (r.read)(h.message_id) else { return Ok(None) };
        let (offset, len) = wire::parse_read(&head[HEADER..]).map_err(|e| self.protocol_error(e))?;
        if offset < RX_HEAD || offset + len > frame || len > asked as usize {
            return Err(self.protocol_error(format!(
                "a READ answer of {len} bytes at offset {offset} in a frame of {frame} bytes (asked {asked})"
            )));
        }
        Ok(Some((offset - RX_HEAD, len)))
    }

    /// Moves what was received of the direct READ's padding and data on;
    /// its answer once all of its frame is in.
    fn drain_direct(&mut self, mut d: Direct, reads: Option<&mut Reads>) -> Option<Answer> {
        let skip = |link: &mut frame::Conn, left: &mut usize| {
            let k = (*left).min(link.buffered().len());
            link.consume(k);
            *left -= k;
        };
        skip(&mut self.link, &mut d.pre);
        if let (0, true, Some(r)) = (d.pre, d.at < d.len, reads) {
            let src = self.link.buffered();
            let n = src.len().min(d.len - d.at);
            r.pool.slice_mut(usize::from(d.buf))[d.at..d.at + n].copy_from_slice(&src[..n]);
            self.link.consume(n);
            d.at += n;
        }
        if d.at == d.len {
            skip(&mut self.link, &mut d.post);
        }
        if d.pre > 0 || d.at < d.len || d.post > 0 {
            self.direct = Some(d);
            return None;
        }
        self.direct = None;
        Some(Answer { h: d.h, compounded: d.compounded, body: Body::Read(d.len) })
    }

    /// The server sent what SMB2 does not allow.
    pub(super) fn protocol_error(&self, what: impl std::fmt::Display) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, format!("the SMB server {} broke the protocol: {what}", self.server))
    }
}

/// The connection's error in the socket's words: the server closing it is
/// `UnexpectedEof`, a reset its own error, for the callers to word.
fn raw(e: io::Error) -> io::Error {
    match Ended::of(&e) {
        Some(Ended { cause: None, .. }) => io::ErrorKind::UnexpectedEof.into(),
        Some(Ended { cause: Some(_), .. }) => {
            let inner = e.into_inner().expect("checked").downcast::<Ended>().expect("checked");
            inner.cause.expect("checked")
        }
        None => e,
    }
}
