//! A worker's SMB engine: READ, WRITE and FLUSH pipelined on its
//! connection within the server's credits, sent without blocking (a
//! WRITE's data from its buffer, no copy), and the answers received by a
//! phase machine that reads a READ's data straight into its I/O buffer.
//!
//! What it owns: requests in flight, the receive phases, completions and
//! the errors of a server lost mid-test. What it must not do: set up the
//! connection (`session`) or word a share's errors.
//!
//! A little over 500 lines: the send side and the receive phases share one
//! struct, and its test constructor (fuzzing, the hostile-server tests)
//! must see every field.

use super::session::Session;
use super::wire::{self, status, Command, FileId, NtStatus, HEADER};
use super::{Granted, REQUEST_TIMEOUT, TIMEOUT};
use crate::transport;
use crate::wait;
use headroom_disk::{BufferPool, Completion, IoEngine, IoKind, IoUnit, ShareIo, SyncMode};
use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A request being sent: its header and body, then maybe a buffer's data.
struct Outgoing {
    head: Vec<u8>,
    data: Option<(u16, usize)>,
    sent: usize,
}

/// What the bytes arriving next are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The 4-byte direct-TCP prefix, into `head`.
    Prefix,
    /// The header and a READ response's head, into `head`.
    Head,
    /// Padding before a READ's data, dropped.
    SkipPre(usize),
    /// A READ's data, straight into its buffer: (buffer, bytes so far, total).
    Data(u16, usize, usize),
    /// Bytes after a READ's data, dropped.
    SkipPost(usize),
    /// The rest of any other answer, into `rest`.
    Rest,
}

/// The frame being received.
struct Rx {
    phase: Phase,
    /// Prefix, then up to [`RX_HEAD`] bytes of the frame.
    head: Vec<u8>,
    /// Frame length from the prefix.
    frame: usize,
    /// The frame after `head`, for answers other than a READ's data.
    rest: Vec<u8>,
    /// Bytes a streamed READ delivered.
    read: Option<usize>,
}

impl Default for Rx {
    fn default() -> Self {
        Rx { phase: Phase::Prefix, head: Vec::with_capacity(4 + RX_HEAD), frame: 0, rest: Vec::new(), read: None }
    }
}

/// Bytes of a frame read before deciding where the rest goes: the header
/// and a READ response's 16-byte head.
const RX_HEAD: usize = HEADER + 16;

/// One worker's pipelined connection.
pub(super) struct SmbEngine {
    session: Session,
    file: FileId,
    bufs: BufferPool,
    write_through: bool,
    /// Queued since the last commit.
    queued: Vec<IoUnit>,
    /// Committed, waiting for credits.
    waiting: VecDeque<IoUnit>,
    /// Sent, by message id, with when it was issued.
    inflight: HashMap<u64, (IoUnit, Instant)>,
    out: VecDeque<Outgoing>,
    rx: Rx,
    done: Vec<Completion>,
    granted: Arc<Mutex<Granted>>,
    /// The most credits held, for [`Granted::credits`].
    peak_credits: u32,
    server_gone: Arc<AtomicBool>,
    shown: String,
}

impl SmbEngine {
    /// The engine of a worker's set-up `session` with `file` open: `io`'s
    /// buffers, nothing in flight yet.
    pub(super) fn new(
        session: Session,
        file: FileId,
        io: &ShareIo,
        granted: Arc<Mutex<Granted>>,
        server_gone: Arc<AtomicBool>,
        shown: String,
    ) -> SmbEngine {
        SmbEngine {
            bufs: BufferPool::new(io.depth.max(1), io.buf_size.max(1), 4096),
            session,
            file,
            write_through: io.sync == SyncMode::Dsync,
            waiting: VecDeque::new(),
            queued: Vec::new(),
            inflight: HashMap::new(),
            out: VecDeque::new(),
            rx: Rx::default(),
            done: Vec::new(),
            granted,
            peak_credits: 0,
            server_gone,
            shown,
        }
    }

    /// Turns waiting I/Os into requests while the credits allow.
    fn issue(&mut self) {
        while let Some(io) = self.waiting.front().copied() {
            let charge = if io.kind == IoKind::Fsync { 1 } else { wire::credit_charge(io.len) };
            if self.session.credits < u32::from(charge) {
                break;
            }
            self.waiting.pop_front();
            let (command, body, data) = match io.kind {
                IoKind::Read => (Command::Read, wire::read(&self.file, io.offset, io.len), None),
                IoKind::Write => (
                    Command::Write,
                    wire::write(&self.file, io.offset, io.len, self.write_through),
                    Some((io.buf_index, io.len as usize)),
                ),
                IoKind::Fsync => (Command::Flush, wire::flush(&self.file), None),
            };
            let h = self.session.header(command, charge);
            let mut head = Vec::with_capacity(4 + HEADER + body.len());
            wire::put_frame_start(&mut head, &h, body.len() + data.map_or(0, |d| d.1));
            head.extend_from_slice(&body);
            if let Some(key) = &self.session.signing {
                let payload: &[u8] = match data {
                    Some((i, len)) => &self.bufs.slice_mut(i as usize)[..len],
                    None => &[],
                };
                let (header, body) = head[4..].split_at_mut(HEADER);
                key.sign_in_place(header, &[body, payload]);
            }
            self.inflight.insert(h.message_id, (io, Instant::now()));
            self.out.push_back(Outgoing { head, data, sent: 0 });
        }
    }

    /// Sends what the socket takes now. Returns whether anything was sent.
    fn send(&mut self) -> io::Result<bool> {
        let mut progress = false;
        while let Some(o) = self.out.front_mut() {
            let data: &[u8] = match o.data {
                Some((i, len)) => &self.bufs.slice_mut(i as usize)[..len],
                None => &[],
            };
            let total = o.head.len() + data.len();
            let r = if o.sent < o.head.len() {
                self.session.sock.write_vectored(&[IoSlice::new(&o.head[o.sent..]), IoSlice::new(data)])
            } else {
                self.session.sock.write(&data[o.sent - o.head.len()..])
            };
            match r {
                Ok(0) => return Err(self.gone()),
                Ok(n) => {
                    o.sent += n;
                    progress = true;
                    if o.sent == total {
                        self.out.pop_front();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(e)),
            }
        }
        Ok(progress)
    }

    /// Reads what arrived and completes I/Os. Returns whether anything was read.
    pub(super) fn receive(&mut self) -> io::Result<bool> {
        let mut progress = false;
        loop {
            let sock = &mut self.session.sock;
            let rx = &mut self.rx;
            let r = match rx.phase {
                Phase::Prefix | Phase::Head => {
                    let want = if rx.phase == Phase::Prefix { 4 } else { 4 + RX_HEAD.min(rx.frame) };
                    let at = rx.head.len();
                    rx.head.resize(want, 0);
                    let r = sock.read(&mut rx.head[at..]);
                    rx.head.truncate(at + *r.as_ref().unwrap_or(&0));
                    r
                }
                Phase::SkipPre(n) | Phase::SkipPost(n) => {
                    let mut sink = [0u8; 256];
                    sock.read(&mut sink[..n.min(256)])
                }
                Phase::Data(buf, got, total) => sock.read(&mut self.bufs.slice_mut(buf as usize)[got..total]),
                Phase::Rest => {
                    let at = rx.rest.len();
                    rx.rest.resize(rx.frame - (rx.head.len() - 4), 0);
                    let r = sock.read(&mut rx.rest[at..]);
                    rx.rest.truncate(at + *r.as_ref().unwrap_or(&0));
                    r
                }
            };
            match r {
                Ok(0) => return Err(self.gone()),
                Ok(n) => {
                    progress = true;
                    self.advance(n)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(progress),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(e)),
            }
        }
    }

    /// Moves the receive state on after `n` bytes arrived; completes a frame.
    fn advance(&mut self, n: usize) -> io::Result<()> {
        let rx = &mut self.rx;
        match rx.phase {
            Phase::Prefix => {
                if rx.head.len() == 4 {
                    let prefix: [u8; 4] = rx.head[..4].try_into().expect("4 bytes");
                    rx.frame = wire::frame_len(prefix).map_err(|e| self.session.protocol_error(e))?;
                    rx.phase = Phase::Head;
                }
                return Ok(());
            }
            Phase::Head => {
                if rx.head.len() < 4 + RX_HEAD.min(rx.frame) {
                    return Ok(());
                }
                self.rx.phase = self.after_head()?;
            }
            Phase::SkipPre(left) => {
                self.rx.phase = match left - n {
                    0 => match self.rx.read {
                        Some(len) => Phase::Data(self.read_buffer()?, 0, len),
                        None => Phase::Rest,
                    },
                    more => Phase::SkipPre(more),
                };
            }
            Phase::Data(buf, got, total) => {
                let got = got + n;
                let pre = self.pre_skip();
                let rx = &mut self.rx;
                rx.phase = if got < total {
                    Phase::Data(buf, got, total)
                } else {
                    let after = rx.frame - (rx.head.len() - 4) - rx.read.unwrap_or(0) - pre;
                    if after > 0 {
                        Phase::SkipPost(after)
                    } else {
                        Phase::Prefix
                    }
                };
            }
            Phase::SkipPost(left) => rx.phase = if left > n { Phase::SkipPost(left - n) } else { Phase::Prefix },
            Phase::Rest => {
                rx.phase = if rx.head.len() - 4 + rx.rest.len() < rx.frame { Phase::Rest } else { Phase::Prefix };
            }
        }
        if self.rx.phase == Phase::Prefix {
            self.complete_frame()?;
        }
        Ok(())
    }

    /// Bytes of padding between a READ response's head and its data.
    fn pre_skip(&self) -> usize {
        let body = &self.rx.head[4 + HEADER..];
        (body[2] as usize).saturating_sub(RX_HEAD)
    }

    fn read_buffer(&self) -> io::Result<u16> {
        let h = wire::parse_header(&self.rx.head[4..]).map_err(|e| self.session.protocol_error(e))?;
        Ok(self.inflight.get(&h.message_id).expect("checked in after_head").0.buf_index)
    }

    /// Where the rest of a frame goes, once its head is in: a successful
    /// READ's data straight into the I/O's buffer, anything else into memory.
    fn after_head(&mut self) -> io::Result<Phase> {
        let frame = self.rx.frame;
        let h = wire::parse_header(&self.rx.head[4..]).map_err(|e| self.session.protocol_error(e))?;
        if h.command == Command::Read as u16 && h.status.0 == status::SUCCESS && frame >= RX_HEAD {
            // Only a READ's answer goes into its buffer; a READ answer to
            // anything else is refused whole by `result`.
            if let Some((io, _)) = self.inflight.get(&h.message_id).filter(|(io, _)| io.kind == IoKind::Read) {
                let (offset, len) =
                    wire::parse_read(&self.rx.head[4 + HEADER..]).map_err(|e| self.session.protocol_error(e))?;
                if offset < RX_HEAD || offset + len > frame || len > io.len as usize {
                    return Err(self.session.protocol_error(format!(
                        "a READ answer of {len} bytes at offset {offset} in a frame of {frame} bytes (asked {})",
                        io.len
                    )));
                }
                self.rx.read = Some(len);
                let pre = offset - RX_HEAD;
                return Ok(match (pre, len) {
                    (_, 0) if frame > RX_HEAD => Phase::SkipPost(frame - RX_HEAD),
                    (_, 0) => Phase::Prefix,
                    (0, _) => Phase::Data(io.buf_index, 0, len),
                    _ => Phase::SkipPre(pre),
                });
            }
        }
        Ok(if frame > RX_HEAD { Phase::Rest } else { Phase::Prefix })
    }

    fn complete_frame(&mut self) -> io::Result<()> {
        let rx = std::mem::take(&mut self.rx);
        let h = wire::parse_header(&rx.head[4..]).map_err(|e| self.session.protocol_error(e))?;
        if wire::le32(&rx.head[4..], 20) != 0 {
            return Err(self.session.protocol_error("a compounded answer to a request that was not compounded"));
        }
        self.session.credits = self.session.credits.saturating_add(u32::from(h.credits));
        self.peak_credits = self.peak_credits.max(self.session.credits);
        if h.message_id == u64::MAX || h.status.0 == status::PENDING {
            return Ok(()); // an oplock break, or an interim answer (credits only)
        }
        let Some((io, _)) = self.inflight.remove(&h.message_id) else {
            return Err(self
                .session
                .protocol_error(format!("an answer to message {} that was never sent", h.message_id)));
        };
        let result = match rx.read {
            Some(len) => len as i64,
            None => {
                let mut body = rx.head[4 + HEADER..].to_vec();
                body.extend_from_slice(&rx.rest);
                self.result(&h, io, &body)?
            }
        };
        self.done.push(Completion { tag: io.tag, result });
        Ok(())
    }

    /// The completion result of an answer that was read whole.
    fn result(&mut self, h: &wire::ResponseHeader, io: IoUnit, body: &[u8]) -> io::Result<i64> {
        let expected = match io.kind {
            IoKind::Read => Command::Read,
            IoKind::Write => Command::Write,
            IoKind::Fsync => Command::Flush,
        };
        if h.command != expected as u16 {
            return Err(self
                .session
                .protocol_error(format!("command {} answered request {} ({expected:?})", h.command, h.message_id)));
        }
        Ok(match (io.kind, h.status.0) {
            (IoKind::Read, status::END_OF_FILE) => 0,
            (IoKind::Read, status::SUCCESS) => {
                return Err(self.session.protocol_error(format!(
                    "a READ answer of {} bytes, too short to hold its data (request {})",
                    body.len() + HEADER,
                    h.message_id
                )))
            }
            (IoKind::Write, status::SUCCESS) => {
                let count = wire::parse_write(body).map_err(|e| self.session.protocol_error(e))?;
                if count > io.len {
                    return Err(self.session.protocol_error(format!(
                        "a WRITE of {} bytes answered as {count} bytes written (request {})",
                        io.len, h.message_id
                    )));
                }
                i64::from(count)
            }
            (IoKind::Fsync, status::SUCCESS) => 0,
            (_, s) => -i64::from(NtStatus(s).errno()),
        })
    }

    fn gone(&self) -> io::Error {
        self.lost(io::Error::new(io::ErrorKind::ConnectionAborted, "it closed the connection"))
    }

    /// The connection broke mid-test: say so once, naming the file that
    /// stays if the server itself died (delete-on-close needs a live server).
    fn lost(&self, e: io::Error) -> io::Error {
        self.server_gone.store(true, Ordering::Relaxed);
        let cause = e.to_string().split(" (os error").next().unwrap_or_default().to_lowercase();
        io::Error::new(
            e.kind(),
            format!(
                "the SMB server {} went away mid-test ({cause}); if the server died, {} is left on it",
                self.session.server, self.shown
            ),
        )
    }
}

impl IoEngine for SmbEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.bufs.slice_mut(index as usize)
    }

    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        if usize::from(io.buf_index) >= self.bufs.len() || io.len as usize > self.bufs.buf_len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "I/O outside the engine's buffers"));
        }
        self.queued.push(io);
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        self.waiting.extend(self.queued.drain(..));
        self.issue();
        self.send().map(|_| ())
    }

    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let mut last = Instant::now();
        loop {
            let sent = self.send()?;
            let got = self.receive()?;
            self.issue();
            if sent || got {
                last = Instant::now();
            }
            if self.done.len() >= min || (self.inflight.is_empty() && self.waiting.is_empty() && self.out.is_empty()) {
                break;
            }
            if sent || got {
                continue;
            }
            if self.inflight.is_empty() && self.out.is_empty() {
                return Err(self
                    .session
                    .protocol_error(format!("it granted {} credits, too few for one request", self.session.credits)));
            }
            if self.session.stop.load(Ordering::Relaxed) {
                return Err(wait::stopped("an SMB request"));
            }
            let oldest = self.inflight.values().map(|(_, at)| *at).min().unwrap_or_else(Instant::now);
            if oldest.elapsed() >= REQUEST_TIMEOUT {
                self.server_gone.store(true, Ordering::Relaxed);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the SMB server {} did not complete a request within {} s; {} may be left on it",
                        self.session.server,
                        REQUEST_TIMEOUT.as_secs(),
                        self.shown
                    ),
                ));
            }
            let left = TIMEOUT.saturating_sub(last.elapsed());
            if left.is_zero() {
                self.server_gone.store(true, Ordering::Relaxed);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the SMB server {} did not answer for {} s; {} may be left on it",
                        self.session.server,
                        TIMEOUT.as_secs(),
                        self.shown
                    ),
                ));
            }
            let events = libc::POLLIN | if self.out.is_empty() { 0 } else { libc::POLLOUT };
            transport::poll(self.session.sock.as_raw_fd(), events, left.min(wait::SLICE))?;
        }
        out.append(&mut self.done);
        Ok(())
    }
}

impl SmbEngine {
    /// An engine on a connected socket, logged in as far as it knows, with
    /// a 4 KiB READ (message id 1), a 512-byte WRITE (2) and a FLUSH (3)
    /// in flight: for fuzzing and the hostile-server tests.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(super) fn detached(sock: std::net::TcpStream, stop: Arc<AtomicBool>) -> SmbEngine {
        let _ = sock.set_nonblocking(true);
        let session = Session {
            sock,
            next_id: 4,
            credits: 1,
            session_id: 1,
            tree_id: 1,
            neg: wire::Negotiated {
                dialect: 0x0300,
                signing_required: false,
                max_transact: 1 << 20,
                max_read: 1 << 20,
                max_write: 1 << 20,
            },
            signing: None,
            server: "fuzz".into(),
            stop,
            login_ends: None,
        };
        let now = Instant::now();
        let io = |kind, len, buf_index, tag| (IoUnit { kind, offset: 0, len, buf_index, tag }, now);
        SmbEngine {
            bufs: BufferPool::new(2, 4096, 4096),
            session,
            file: [0; 16],
            write_through: false,
            waiting: VecDeque::new(),
            queued: Vec::new(),
            inflight: HashMap::from([
                (1, io(IoKind::Read, 4096, 0, 1)),
                (2, io(IoKind::Write, 512, 1, 2)),
                (3, io(IoKind::Fsync, 0, 0, 3)),
            ]),
            out: VecDeque::new(),
            rx: Rx::default(),
            done: Vec::new(),
            granted: Arc::default(),
            peak_credits: 0,
            server_gone: Arc::default(),
            shown: "smb://fuzz/share/file".into(),
        }
    }
}

impl Drop for SmbEngine {
    fn drop(&mut self) {
        if let Ok(mut g) = self.granted.lock() {
            g.credits = g.credits.max(self.peak_credits);
        }
        // Best effort: the handle goes with the connection anyway.
        if self.inflight.is_empty() && self.out.is_empty() && self.session.sock.set_nonblocking(false).is_ok() {
            let _ = self.session.call(Command::Close, &wire::close(&self.file));
        }
    }
}
