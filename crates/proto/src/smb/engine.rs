//! A worker's SMB engine: READ, WRITE and FLUSH pipelined on its
//! connection within the server's credits (many requests in flight, by
//! message id), and each answer judged and turned into a completion.
//!
//! What it owns: the I/Os waiting for credits and in flight, completions,
//! and the errors of a server lost mid-test. What it must not do: set up
//! the connection (`session`), send or receive but through the connection
//! (`conn`: framing, signing, encryption, a READ's data into its buffer), or word a
//! share's errors.

use super::conn::{Body, Conn, Reads};
use super::session::Session;
use super::wire::{self, status, Command, FileId, NtStatus, HEADER};
use super::{Granted, REQUEST_TIMEOUT, TIMEOUT};
use crate::wait;
use headroom_disk::{BufferPool, Completion, IoEngine, IoKind, IoUnit, ShareIo, SyncMode};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

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
            if self.session.conn.credits < u32::from(charge) {
                break;
            }
            self.waiting.pop_front();
            let (command, body) = match io.kind {
                IoKind::Read => (Command::Read, wire::read(&self.file, io.offset, io.len)),
                IoKind::Write => (Command::Write, wire::write(&self.file, io.offset, io.len, self.write_through)),
                IoKind::Fsync => (Command::Flush, wire::flush(&self.file)),
            };
            let payload: &[u8] = match io.kind {
                IoKind::Write => &self.bufs.slice_mut(io.buf_index as usize)[..io.len as usize],
                _ => &[],
            };
            let id = self.session.conn.request(command, charge, &body, payload);
            self.inflight.insert(id, (io, Instant::now()));
        }
    }

    /// Writes what the socket takes now. Returns whether anything was sent.
    fn send(&mut self) -> io::Result<bool> {
        let before = self.session.conn.sent();
        self.session.conn.write_some().map_err(|e| self.lost(e))?;
        Ok(self.session.conn.sent() != before)
    }

    /// Reads what arrived and completes I/Os. Returns whether anything was read.
    pub(super) fn receive(&mut self) -> io::Result<bool> {
        let heard = self.session.conn.last_heard();
        self.complete()?;
        let read = {
            let inflight = &self.inflight;
            let read = |id: u64| read_in_flight(inflight, id);
            self.session.conn.read_some(Some(&mut Reads { pool: &mut self.bufs, read: &read }))
        };
        read.map_err(|e| self.lost(e))?;
        self.complete()?;
        Ok(self.session.conn.last_heard() != heard)
    }

    /// Completes the I/Os whose answers are whole.
    fn complete(&mut self) -> io::Result<()> {
        loop {
            let answer = {
                let inflight = &self.inflight;
                let read = |id: u64| read_in_flight(inflight, id);
                self.session.conn.next(Some(&mut Reads { pool: &mut self.bufs, read: &read }))?
            };
            let Some(a) = answer else { return Ok(()) };
            let conn = &mut self.session.conn;
            if a.compounded {
                return Err(conn.protocol_error("a compounded answer to a request that was not compounded"));
            }
            conn.credits = conn.credits.saturating_add(u32::from(a.h.credits));
            self.peak_credits = self.peak_credits.max(conn.credits);
            if a.h.message_id == u64::MAX || a.h.status.0 == status::PENDING {
                continue; // an oplock break, or an interim answer (credits only)
            }
            let Some((io, _)) = self.inflight.remove(&a.h.message_id) else {
                return Err(conn.protocol_error(format!("an answer to message {} that was never sent", a.h.message_id)));
            };
            let result = match a.body {
                Body::Read(len) => len as i64,
                Body::Frame(_) | Body::Opened(_) => result(conn, &a.h, io, conn.body(&a.body))?,
            };
            self.done.push(Completion { tag: io.tag, result });
        }
    }

    /// The connection broke mid-test: say so once, naming the file that
    /// stays if the server itself died (delete-on-close needs a live server).
    fn lost(&self, e: io::Error) -> io::Error {
        self.server_gone.store(true, Ordering::Relaxed);
        let e = match e.kind() {
            io::ErrorKind::UnexpectedEof => {
                io::Error::new(io::ErrorKind::ConnectionAborted, "it closed the connection")
            }
            _ => e,
        };
        let cause = e.to_string().split(" (os error").next().unwrap_or_default().to_lowercase();
        io::Error::new(
            e.kind(),
            format!(
                "the SMB server {} went away mid-test ({cause}); if the server died, {} is left on it",
                self.session.conn.server, self.shown
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
            let unsent = self.session.conn.unsent();
            if self.done.len() >= min || (self.inflight.is_empty() && self.waiting.is_empty() && unsent == 0) {
                break;
            }
            if sent || got {
                continue;
            }
            if self.inflight.is_empty() && unsent == 0 {
                let conn = &self.session.conn;
                return Err(
                    conn.protocol_error(format!("it granted {} credits, too few for one request", conn.credits))
                );
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
                        self.session.conn.server,
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
                        self.session.conn.server,
                        TIMEOUT.as_secs(),
                        self.shown
                    ),
                ));
            }
            self.session.conn.wait().map_err(|e| self.lost(e))?;
        }
        out.append(&mut self.done);
        Ok(())
    }
}

impl SmbEngine {
    /// An engine on a connected socket, logged in as far as it knows, with
    /// a 4 KiB READ (message id 1), a 512-byte WRITE (2) and a FLUSH (3)
    /// in flight: for fuzzing and the hostile-server tests.
    /// The connection, for the hostile-server tests to turn encryption on.
    #[cfg(test)]
    pub(super) fn conn_mut(&mut self) -> &mut Conn {
        &mut self.session.conn
    }

    #[cfg(any(test, feature = "fuzzing"))]
    pub(super) fn detached(sock: std::net::TcpStream, stop: Arc<AtomicBool>) -> SmbEngine {
        let mut conn = Conn::new(sock, "fuzz".into()).expect("a socket that takes O_NONBLOCK");
        (conn.next_id, conn.session_id, conn.tree_id) = (4, 1, 1);
        let session = Session {
            conn,
            neg: wire::Negotiated {
                dialect: 0x0300,
                signing_required: false,
                max_transact: 1 << 20,
                max_read: 1 << 20,
                max_write: 1 << 20,
                cipher: None,
            },
            stop,
            login_ends: None,
            sealer: None,
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
        if self.inflight.is_empty() && self.session.conn.unsent() == 0 && !self.session.conn.broken() {
            let _ = self.session.call(Command::Close, &wire::close(&self.file));
        }
    }
}

/// The buffer and length of the READ in flight under `message_id`.
fn read_in_flight(inflight: &HashMap<u64, (IoUnit, Instant)>, message_id: u64) -> Option<(u16, u32)> {
    inflight.get(&message_id).filter(|(io, _)| io.kind == IoKind::Read).map(|(io, _)| (io.buf_index, io.len))
}

/// The completion result of an answer that was read whole.
fn result(conn: &Conn, h: &wire::ResponseHeader, io: IoUnit, body: &[u8]) -> io::Result<i64> {
    let expected = match io.kind {
        IoKind::Read => Command::Read,
        IoKind::Write => Command::Write,
        IoKind::Fsync => Command::Flush,
    };
    if h.command != expected as u16 {
        return Err(
            conn.protocol_error(format!("command {} answered request {} ({expected:?})", h.command, h.message_id))
        );
    }
    Ok(match (io.kind, h.status.0) {
        (IoKind::Read, status::END_OF_FILE) => 0,
        (IoKind::Read, status::SUCCESS) => {
            return Err(conn.protocol_error(format!(
                "a READ answer of {} bytes, too short to hold its data (request {})",
                body.len() + HEADER,
                h.message_id
            )))
        }
        (IoKind::Write, status::SUCCESS) => {
            let count = wire::parse_write(body).map_err(|e| conn.protocol_error(e))?;
            if count > io.len {
                return Err(conn.protocol_error(format!(
                    "a WRITE of {} bytes answered as {count} bytes written (request {})",
                    io.len, h.message_id
                )));
            }
            i64::from(count)
        }
        (IoKind::Fsync, status::SUCCESS) => 0,
        (_, s) => -i64::from(crate::os::io_error_code(NtStatus(s).error_kind())),
    })
}
