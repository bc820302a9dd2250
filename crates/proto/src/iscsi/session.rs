//! One iSCSI session of one connection (RFC 7143, error recovery level 0):
//! after the login (`login`), SCSI commands pipelined within the target's
//! CmdSN window, Data-In, R2T and Data-Out, NOP-In answers, and logout. The
//! socket is non-blocking; waiting is `transport::poll` with a deadline, so
//! a silent target is an error, never a hang.
//!
//! Over 500 lines because the pipeline's state (send and receive buffers,
//! tasks by ITT, the window, R2T bookkeeping) is one struct whose methods
//! share it; a third of the file is the tests against hostile targets.

mod login;

pub use login::{LoginError, LoginSpec, Params, INITIATOR_NAME};

use super::pdu::{self, op, Header, Out, WireError, BHS, RESERVED_TAG};
use super::scsi::{self, opcode};
use crate::transport::{self, Origin};
use crate::wait;
use headroom_disk::{BufferPool, Completion, IoKind, IoUnit};
use login::LOGIN_TEXT_MAX;
#[cfg(feature = "fuzzing")]
use login::{answer_unoffered, operational_keys};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a target may stay silent while commands are outstanding; also
/// the whole login's limit.
pub const SILENCE: Duration = Duration::from_secs(8);
/// Any one command, from its sending to its status, however the target
/// trickles its bytes: the SCSI layer's default command timeout.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(if cfg!(test) { 3 } else { 30 });
/// Bytes queued to send beyond the I/O buffers' own size: R2Ts can ask for
/// no more than the writes hold (see [`Session::r2t`]), so only NOP-In
/// answers to a target that stopped reading could exceed it.
const TX_SLACK: usize = 4 << 20;
/// What headroom declares it receives per PDU.
pub const OUR_MAX_RECV: u32 = 262_144;

/// The outcome of a command run to completion by [`Session::command`].
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// SCSI status (0 = GOOD).
    pub status: u8,
    /// Sense data.
    pub sense: Vec<u8>,
    /// Data-In received.
    pub data: Vec<u8>,
}

#[derive(Debug)]
enum Sink {
    /// One of the pool's buffers (a runner I/O).
    Pool(u16),
    /// A command of [`Session::command`].
    Owned(Vec<u8>),
}

#[derive(Debug)]
struct Task {
    tag: u64,
    kind: IoKind,
    sink: Sink,
    len: u32,
    /// Data-In bytes received, in order (DataPDUInOrder is Yes).
    received: u32,
    /// Write data sent unsolicited or asked for by R2Ts so far, in order
    /// (DataSequenceInOrder is Yes): the next R2T must start here.
    requested: u32,
    /// Where in the output stream the Data-Out of each R2T not yet fully
    /// sent ends ([`Session::tx_total`]): at most MaxOutstandingR2T of them.
    r2t_ends: VecDeque<u64>,
    /// When the command was sent.
    issued: Instant,
    outcome: Option<Outcome>,
}

/// One logged-in session on one TCP connection.
pub struct Session {
    sock: TcpStream,
    rx: Vec<u8>,
    rx_start: usize,
    rx_end: usize,
    tx: Vec<u8>,
    tx_pos: usize,
    /// Bytes ever queued to send, and the most that may wait unsent.
    tx_total: u64,
    tx_limit: usize,
    stop: Arc<AtomicBool>,
    cmd_sn: u32,
    exp_stat_sn: u32,
    exp_cmd_sn: u32,
    max_cmd_sn: u32,
    next_itt: u32,
    lun: [u8; 8],
    /// What login settled.
    pub params: Params,
    tasks: HashMap<u32, Task>,
    waiting: VecDeque<IoUnit>,
    pool: BufferPool,
    block_size: u32,
    fua: bool,
    last_heard: Instant,
    /// Commands in flight the least times the window held one back; None
    /// while it never did.
    pub window_capped: Option<u32>,
    done: Vec<Completion>,
    sync_done: Vec<(u32, Outcome)>,
    dead: bool,
    eof: bool,
    /// A Data-In whose payload is read straight into its I/O buffer.
    direct: Option<Direct>,
    /// Padding bytes still to drop after a direct payload.
    skip: usize,
}

/// A Data-In PDU being received into a pool buffer: its header, the buffer,
/// the next byte to fill and the end of its payload in the buffer.
#[derive(Debug, Clone, Copy)]
struct Direct {
    h: Header,
    buf: u16,
    at: usize,
    end: usize,
}

impl Task {
    fn new(tag: u64, kind: IoKind, sink: Sink, len: u32) -> Task {
        Task {
            tag,
            kind,
            sink,
            len,
            received: 0,
            requested: 0,
            r2t_ends: VecDeque::new(),
            issued: Instant::now(),
            outcome: None,
        }
    }
}

fn other(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

/// The connection ended under a session: the kind says lost, not the user's.
fn gone(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, msg.into())
}

/// The target broke the protocol.
fn garbage(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

impl Session {
    /// Sets the logical block size and whether writes carry FUA (dsync).
    pub fn set_io(&mut self, block_size: u32, fua: bool) {
        self.block_size = block_size.max(1);
        self.fua = fua;
    }

    /// Buffer `i` of the pool.
    pub fn buffer_mut(&mut self, i: u16) -> &mut [u8] {
        self.pool.slice_mut(usize::from(i))
    }

    /// Where this session's connection left from.
    pub fn origin(&self, source: &headroom_net::Source) -> Origin {
        Origin::of(&self.sock, source)
    }

    /// MaxCmdSN - ExpCmdSN + 1 as the target last announced it.
    pub fn window(&self) -> u32 {
        self.max_cmd_sn.wrapping_sub(self.exp_cmd_sn).wrapping_add(1)
    }

    fn window_open(&self) -> bool {
        !pdu::sn_gt(self.cmd_sn, self.max_cmd_sn)
    }

    fn take_itt(&mut self) -> u32 {
        let mut itt = self.next_itt;
        while itt == RESERVED_TAG || self.tasks.contains_key(&itt) {
            itt = itt.wrapping_add(1);
        }
        self.next_itt = itt.wrapping_add(1);
        itt
    }

    /// Queues a runner I/O: sent now if the CmdSN window allows, else when it opens.
    pub fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        if io.kind != IoKind::Fsync {
            let bs = u64::from(self.block_size);
            if !io.offset.is_multiple_of(bs) || !u64::from(io.len).is_multiple_of(bs) || io.len == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("I/O of {} bytes at {} is not in whole {bs}-byte blocks", io.len, io.offset),
                ));
            }
            if io.len as usize > self.pool.buf_len() || usize::from(io.buf_index) >= self.pool.len() {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "I/O larger than its buffer"));
            }
        }
        self.waiting.push_back(io);
        Ok(())
    }

    fn issue_waiting(&mut self) {
        while let Some(io) = self.waiting.front().copied() {
            if !self.window_open() {
                let in_flight = self.tasks.len() as u32;
                self.window_capped = Some(self.window_capped.map_or(in_flight, |c| c.min(in_flight)));
                return;
            }
            self.waiting.pop_front();
            self.issue(io);
        }
    }

    fn issue(&mut self, io: IoUnit) {
        if self.tasks.is_empty() {
            // The silence deadline counts from the first command outstanding.
            self.last_heard = Instant::now();
        }
        let itt = self.take_itt();
        let bs = u64::from(self.block_size);
        let (lba, blocks) = (io.offset / bs, u64::from(io.len) / bs);
        let mut cdb = [0u8; 16];
        let (flags, edtl) = match io.kind {
            IoKind::Read => {
                cdb[0] = opcode::READ_16;
                (0x80 | 0x40 | 0x01, io.len)
            }
            IoKind::Write => {
                cdb[0] = opcode::WRITE_16;
                if self.fua {
                    cdb[1] = scsi::FUA;
                }
                (0x20 | 0x01, io.len)
            }
            IoKind::Fsync => {
                cdb[0] = opcode::SYNCHRONIZE_CACHE_10;
                (0x80 | 0x01, 0)
            }
        };
        if io.kind != IoKind::Fsync {
            cdb[2..10].copy_from_slice(&lba.to_be_bytes());
            cdb[10..14].copy_from_slice(&(blocks as u32).to_be_bytes());
        }
        let task = Task::new(io.tag, io.kind, Sink::Pool(io.buf_index), edtl);
        self.send_command(itt, flags, edtl, &cdb, task);
    }

    /// Sends a SCSI Command with its immediate and unsolicited data (writes).
    fn send_command(&mut self, itt: u32, mut flags: u8, edtl: u32, cdb: &[u8; 16], task: Task) {
        let p = self.params;
        let (immediate, unsolicited) = if task.kind == IoKind::Write {
            let first = edtl.min(p.first_burst);
            let imm = if p.immediate_data { first.min(p.target_max_recv) } else { 0 };
            let unsolicited = if p.initial_r2t { imm } else { first };
            (imm, unsolicited)
        } else {
            (0, 0)
        };
        if task.kind == IoKind::Write && unsolicited == immediate {
            flags |= 0x80;
        }
        let bhs = Out::new(op::SCSI_CMD, false, flags)
            .data_len(immediate as usize)
            .lun(self.lun)
            .word(16, itt)
            .word(20, edtl)
            .word(24, self.cmd_sn)
            .word(28, self.exp_stat_sn)
            .cdb(cdb)
            .bhs;
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        let buf = match task.sink {
            Sink::Pool(i) => Some(i),
            Sink::Owned(_) => None,
        };
        let pool_ptr: *const BufferPool = &self.pool;
        // SAFETY: the pool is not touched by push/data_out; the borrow checker
        // cannot see that `self.tx` and `self.pool` are disjoint through methods.
        let pool = unsafe { &*pool_ptr };
        match buf {
            Some(i) if immediate > 0 => {
                let data = &pool_slice(pool, i)[..immediate as usize];
                self.push(&bhs, &[data]);
            }
            _ => self.push(&bhs, &[]),
        }
        let mut task = task;
        task.requested = unsolicited;
        self.tasks.insert(itt, task);
        if let Some(i) = buf {
            if unsolicited > immediate {
                self.data_out(itt, RESERVED_TAG, i, immediate, unsolicited - immediate);
            }
        }
    }

    /// Data-Out PDUs for `len` bytes of buffer `buf` from `offset`.
    fn data_out(&mut self, itt: u32, ttt: u32, buf: u16, offset: u32, len: u32) {
        let seg = self.params.target_max_recv.max(512);
        let pool_ptr: *const BufferPool = &self.pool;
        // SAFETY: as in send_command: only `tx` is written.
        let pool = unsafe { &*pool_ptr };
        let data = pool_slice(pool, buf);
        let (mut at, end, mut sn) = (offset, offset + len, 0u32);
        while at < end {
            let n = seg.min(end - at);
            let last = at + n == end;
            let bhs = Out::new(op::DATA_OUT, false, if last { 0x80 } else { 0 })
                .data_len(n as usize)
                .lun(self.lun)
                .word(16, itt)
                .word(20, ttt)
                .word(28, self.exp_stat_sn)
                .word(36, sn)
                .word(40, at)
                .bhs;
            self.push(&bhs, &[&data[at as usize..(at + n) as usize]]);
            at += n;
            sn += 1;
        }
    }

    fn push(&mut self, bhs: &[u8; BHS], data: &[&[u8]]) {
        if self.tx_pos == self.tx.len() {
            self.tx.clear();
            self.tx_pos = 0;
        }
        self.tx.extend_from_slice(bhs);
        let mut n = 0;
        for d in data {
            self.tx.extend_from_slice(d);
            n += d.len();
        }
        self.tx.resize(self.tx.len() + (pdu::pad4(n) - n), 0);
        self.tx_total += (BHS + pdu::pad4(n)) as u64;
    }

    /// Bytes of the output stream written to the socket so far.
    fn tx_sent(&self) -> u64 {
        self.tx_total - (self.tx.len() - self.tx_pos) as u64
    }

    /// Writes what the socket takes now.
    fn write_some(&mut self) -> io::Result<()> {
        while self.tx_pos < self.tx.len() {
            match self.sock.write(&self.tx[self.tx_pos..]) {
                Ok(0) => return Err(gone("the target closed the connection")),
                Ok(n) => self.tx_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(e)),
            }
        }
        if self.tx_pos == self.tx.len() {
            self.tx.clear();
            self.tx_pos = 0;
        } else if self.tx_pos > (8 << 20) {
            self.tx.drain(..self.tx_pos);
            self.tx_pos = 0;
        }
        Ok(())
    }

    fn lost(&mut self, e: io::Error) -> io::Error {
        self.dead = true;
        match e.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted => {
                gone(format!("the target dropped the connection ({e})"))
            }
            _ => e,
        }
    }

    /// Reads what the socket has now; false when nothing was there.
    fn read_some(&mut self) -> io::Result<bool> {
        if self.rx_start == self.rx_end {
            self.rx_start = 0;
            self.rx_end = 0;
        } else if self.rx_end == self.rx.len() {
            self.rx.copy_within(self.rx_start..self.rx_end, 0);
            self.rx_end -= self.rx_start;
            self.rx_start = 0;
        }
        let mut any = false;
        if self.eof {
            self.dead = true;
            return Err(gone("the target closed the connection"));
        }
        loop {
            if let Some(d) = self.direct.as_mut() {
                // A large Data-In payload goes from the socket into its I/O
                // buffer: one copy less than through `rx`.
                if self.rx_start == self.rx_end && d.at < d.end {
                    let dst = &mut pool_slice_mut(&self.pool, d.buf)[d.at..d.end];
                    match self.sock.read(dst) {
                        Ok(0) => {
                            self.dead = true;
                            return Err(gone("the target closed the connection"));
                        }
                        Ok(n) => {
                            d.at += n;
                            any = true;
                            self.last_heard = Instant::now();
                            continue;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(self.lost(e)),
                    }
                }
            }
            if self.rx_end == self.rx.len() {
                return Ok(any);
            }
            match self.sock.read(&mut self.rx[self.rx_end..]) {
                Ok(0) => {
                    // What arrived before the close (a login reject) is parsed first.
                    self.eof = true;
                    if any {
                        return Ok(true);
                    }
                    self.dead = true;
                    return Err(gone("the target closed the connection"));
                }
                Ok(n) => {
                    self.rx_end += n;
                    any = true;
                    self.last_heard = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(e)),
            }
        }
    }

    /// One whole PDU from the receive buffer, if there is one: its header and
    /// the range of its data segment in `rx`.
    fn parse_one(&mut self, max_data: usize) -> Result<Option<(Header, std::ops::Range<usize>)>, WireError> {
        let avail = self.rx_end - self.rx_start;
        if avail < BHS {
            return Ok(None);
        }
        let mut b = [0u8; BHS];
        b.copy_from_slice(&self.rx[self.rx_start..self.rx_start + BHS]);
        let h = Header::parse(&b)?;
        if h.data_len > max_data {
            return Err(WireError(format!(
                "a PDU (opcode 0x{:02x}) carries {} bytes, more than the {max_data} headroom declared it receives",
                h.opcode, h.data_len
            )));
        }
        if avail < BHS + h.rest_len() {
            return Ok(None);
        }
        let start = self.rx_start + BHS + h.ahs_len;
        self.rx_start += BHS + h.rest_len();
        if h.carries_window() && h.opcode != op::LOGIN_RESP {
            self.note_window(&h);
        }
        Ok(Some((h, start..start + h.data_len)))
    }

    fn note_window(&mut self, h: &Header) {
        // RFC 7143 4.2.2.1: a MaxCmdSN below ExpCmdSN - 1 is to be ignored.
        if pdu::sn_gt(h.exp_cmd_sn.wrapping_sub(1), h.max_cmd_sn) {
            return;
        }
        if pdu::sn_gt(h.exp_cmd_sn, self.exp_cmd_sn) {
            self.exp_cmd_sn = h.exp_cmd_sn;
        }
        if pdu::sn_gt(h.max_cmd_sn, self.max_cmd_sn) {
            self.max_cmd_sn = h.max_cmd_sn;
        }
    }

    /// Waits for the socket (readable, or writable while output is pending)
    /// until `deadline`, then moves bytes both ways.
    fn wait(&mut self, deadline: Instant, block: bool) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        self.write_some()?;
        if block {
            if self.stop.load(Ordering::Relaxed) {
                self.dead = true;
                return Err(wait::stopped("an iSCSI exchange"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.dead = true;
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer from the target for {} s", SILENCE.as_secs()),
                ));
            }
            let mut events = libc::POLLIN;
            if self.tx_pos < self.tx.len() {
                events |= libc::POLLOUT;
            }
            transport::poll(self.sock.as_raw_fd(), events, left.min(wait::SLICE))?;
            self.write_some()?;
        }
        self.read_some()?;
        Ok(())
    }

    /// Fails the session once a command has waited [`COMMAND_TIMEOUT`] for
    /// its status, however many bytes trickled in meanwhile.
    fn check_command_deadline(&mut self) -> io::Result<()> {
        let oldest = self.tasks.values().map(|t| t.issued).min();
        if oldest.is_some_and(|t| t.elapsed() >= COMMAND_TIMEOUT) {
            self.dead = true;
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("a command got no status from the target within {} s", COMMAND_TIMEOUT.as_secs()),
            ));
        }
        Ok(())
    }

    /// Sends what is queued and collects completions: blocks until at least
    /// `min` runner I/Os completed.
    pub fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        if self.dead {
            return Err(gone("the connection to the target is gone"));
        }
        self.write_some()?;
        self.read_some()?;
        loop {
            self.issue_waiting();
            self.process()?;
            if self.done.len() >= min || (self.tasks.is_empty() && self.waiting.is_empty()) {
                out.append(&mut self.done);
                return Ok(());
            }
            self.check_command_deadline()?;
            self.wait(self.last_heard + SILENCE, true)?;
        }
    }

    /// Runs one command to completion (set-up commands: TEST UNIT READY,
    /// INQUIRY, REPORT LUNS, READ CAPACITY), receiving up to `data_in` bytes.
    pub fn command(&mut self, cdb: [u8; 16], data_in: u32) -> io::Result<Outcome> {
        self.command_at(self.lun, cdb, data_in)
    }

    /// [`command`](Self::command) addressed to `lun` (REPORT LUNS goes to LUN 0,
    /// which SAM requires to exist, whatever LUN the URL names).
    pub fn command_at(&mut self, lun: [u8; 8], cdb: [u8; 16], data_in: u32) -> io::Result<Outcome> {
        let itt = self.take_itt();
        let flags = 0x80 | if data_in > 0 { 0x40 } else { 0 } | 0x01;
        let task = Task::new(0, IoKind::Read, Sink::Owned(vec![0; data_in as usize]), data_in);
        self.last_heard = Instant::now();
        let own = std::mem::replace(&mut self.lun, lun);
        self.send_command(itt, flags, data_in, &cdb, task);
        self.lun = own;
        loop {
            self.process()?;
            if let Some(i) = self.sync_done.iter().position(|(t, _)| *t == itt) {
                return Ok(self.sync_done.swap_remove(i).1);
            }
            self.check_command_deadline()?;
            self.wait(self.last_heard + SILENCE, true)?;
        }
    }

    /// Logs out (best effort, two seconds at most): the target frees the session at once.
    pub fn logout(&mut self) {
        if self.dead {
            return;
        }
        self.dead = true;
        let itt = self.take_itt();
        let bhs = Out::new(op::LOGOUT, true, 0x80).word(16, itt).word(24, self.cmd_sn).word(28, self.exp_stat_sn).bhs;
        self.push(&bhs, &[]);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if self.wait(deadline, true).is_err() {
                return;
            }
            while let Ok(Some((h, _))) = self.parse_one(self.params.initiator_max_recv as usize) {
                if h.opcode == op::LOGOUT_RESP {
                    return;
                }
            }
        }
    }

    /// Starts sending what is queued, without waiting.
    pub fn commit(&mut self) -> io::Result<()> {
        if self.dead {
            return Err(gone("the connection to the target is gone"));
        }
        self.issue_waiting();
        self.write_some()?;
        self.read_some()?;
        self.process()
    }

    /// Handles every whole PDU received.
    fn process(&mut self) -> io::Result<()> {
        loop {
            if self.direct.is_some() && !self.drain_direct().inspect_err(|_| self.dead = true)? {
                return Ok(());
            }
            if self.skip > 0 {
                let k = self.skip.min(self.rx_end - self.rx_start);
                self.rx_start += k;
                self.skip -= k;
                if self.skip > 0 {
                    return Ok(());
                }
            }
            if self.start_direct() {
                continue;
            }
            let parsed = self.parse_one(self.params.initiator_max_recv as usize).map_err(|e| {
                self.dead = true;
                garbage(format!("garbage from the target: {e}"))
            })?;
            let Some((h, range)) = parsed else { return Ok(()) };
            self.handle(h, range).inspect_err(|_| self.dead = true)?;
            if self.tx.len() - self.tx_pos > self.tx_limit {
                self.dead = true;
                return Err(other(format!(
                    "the target stopped reading while asking for more: {} bytes wait to be sent",
                    self.tx.len() - self.tx_pos
                )));
            }
            self.issue_waiting();
        }
    }

    /// Starts receiving a Data-In for a runner I/O into its buffer when its
    /// header is here but its payload is not yet; anything unusual is left
    /// to [`Self::parse_one`] and [`Self::handle`] to judge.
    fn start_direct(&mut self) -> bool {
        let avail = self.rx_end - self.rx_start;
        if avail < BHS {
            return false;
        }
        let mut b = [0u8; BHS];
        b.copy_from_slice(&self.rx[self.rx_start..self.rx_start + BHS]);
        let Ok(h) = Header::parse(&b) else { return false };
        if h.opcode != op::DATA_IN
            || h.ahs_len != 0
            || avail >= BHS + h.rest_len()
            || h.data_len > self.params.initiator_max_recv as usize
        {
            return false;
        }
        let Some(task) = self.tasks.get(&h.itt) else { return false };
        let (off, n) = (h.word40 as usize, h.data_len);
        let Sink::Pool(buf) = task.sink else { return false };
        if task.kind != IoKind::Read || off + n > task.len as usize || off != task.received as usize {
            return false;
        }
        self.rx_start += BHS;
        self.note_window(&h);
        self.direct = Some(Direct { h, buf, at: off, end: off + n });
        self.skip = pdu::pad4(n) - n;
        true
    }

    /// Moves received payload bytes of the direct Data-In into its buffer;
    /// true once the payload is complete (and its command finished if the
    /// PDU carried the status).
    fn drain_direct(&mut self) -> io::Result<bool> {
        let Some(mut d) = self.direct.take() else { return Ok(true) };
        let n = (self.rx_end - self.rx_start).min(d.end - d.at);
        pool_slice_mut(&self.pool, d.buf)[d.at..d.at + n].copy_from_slice(&self.rx[self.rx_start..self.rx_start + n]);
        self.rx_start += n;
        d.at += n;
        if d.at < d.end {
            self.direct = Some(d);
            return Ok(false);
        }
        self.data_in_done(&d.h)?;
        Ok(true)
    }

    /// A Data-In's payload is in place: count it, and finish the command if
    /// the PDU carried its status.
    fn data_in_done(&mut self, h: &Header) -> io::Result<()> {
        if let Some(task) = self.tasks.get_mut(&h.itt) {
            task.received += h.data_len as u32;
        }
        if h.flags & 0x01 != 0 {
            self.exp_stat_sn = h.stat_sn.wrapping_add(1);
            let residual = if h.flags & 0x02 != 0 { h.word44 } else { 0 };
            self.finish(h.itt, h.byte3, Vec::new(), residual)?;
        }
        Ok(())
    }

    fn handle(&mut self, h: Header, range: std::ops::Range<usize>) -> io::Result<()> {
        match h.opcode {
            op::DATA_IN => {
                let task = self.tasks.get_mut(&h.itt).ok_or_else(|| {
                    garbage(format!("garbage from the target: Data-In for unknown task {:#x}", h.itt))
                })?;
                let (off, n) = (h.word40 as usize, h.data_len);
                if off + n > task.len as usize || task.kind != IoKind::Read && !matches!(task.sink, Sink::Owned(_)) {
                    return Err(garbage(format!(
                        "garbage from the target: Data-In of {n} bytes at offset {off} for a {}-byte command",
                        task.len
                    )));
                }
                if off != task.received as usize {
                    return Err(garbage(format!(
                        "garbage from the target: Data-In at offset {off} where byte {} comes next (DataPDUInOrder=Yes)",
                        task.received
                    )));
                }
                let src = &self.rx[range];
                match &mut task.sink {
                    Sink::Pool(i) => {
                        // SAFETY: a distinct field from `rx`; see pool_slice_mut.
                        let dst = pool_slice_mut(&self.pool, *i);
                        dst[off..off + n].copy_from_slice(src);
                    }
                    Sink::Owned(v) => v[off..off + n].copy_from_slice(src),
                }
                self.data_in_done(&h)?;
            }
            op::SCSI_RESP => {
                self.exp_stat_sn = h.stat_sn.wrapping_add(1);
                if h.byte2 != 0 {
                    return Err(other(format!("the target failed a command (iSCSI response 0x{:02x})", h.byte2)));
                }
                let data = &self.rx[range];
                let sense = if data.len() >= 2 {
                    let n = usize::from(u16::from_be_bytes([data[0], data[1]])).min(data.len() - 2);
                    data[2..2 + n].to_vec()
                } else {
                    Vec::new()
                };
                let residual = if h.flags & 0x02 != 0 { h.word44 } else { 0 };
                self.finish(h.itt, h.byte3, sense, residual)?;
            }
            op::R2T => {
                let task = self
                    .tasks
                    .get(&h.itt)
                    .ok_or_else(|| garbage(format!("garbage from the target: R2T for unknown task {:#x}", h.itt)))?;
                let (off, len) = (h.word40, h.word44);
                let Sink::Pool(buf) = task.sink else {
                    return Err(garbage("garbage from the target: R2T for a command without data"));
                };
                if task.kind != IoKind::Write || u64::from(off) + u64::from(len) > u64::from(task.len) || len == 0 {
                    return Err(garbage(format!(
                        "garbage from the target: R2T for {len} bytes at {off} of a {}-byte command",
                        task.len
                    )));
                }
                self.r2t(h.itt, off, len)?;
                self.data_out(h.itt, h.ttt, buf, off, len);
                let end = self.tx_total;
                if let Some(task) = self.tasks.get_mut(&h.itt) {
                    task.r2t_ends.push_back(end);
                }
            }
            op::NOP_IN => {
                if h.ttt != RESERVED_TAG {
                    let ping = self.rx[range].to_vec();
                    let bhs = Out::new(op::NOP_OUT, true, 0x80)
                        .data_len(ping.len())
                        .lun(h.lun)
                        .word(16, RESERVED_TAG)
                        .word(20, h.ttt)
                        .word(24, self.cmd_sn)
                        .word(28, self.exp_stat_sn)
                        .bhs;
                    self.push(&bhs, &[&ping]);
                }
            }
            op::ASYNC => {
                let event = (h.word36 >> 24) as u8;
                if (1..=3).contains(&event) {
                    return Err(other(format!("the target is ending the session (asynchronous event {event})")));
                }
            }
            op::REJECT => {
                return Err(other(format!("the target rejected a PDU (reason 0x{:02x})", h.byte2)));
            }
            op::LOGOUT_RESP => return Err(other("the target logged the session out")),
            other_op => {
                return Err(garbage(format!("garbage from the target: unexpected opcode 0x{other_op:02x}")));
            }
        }
        Ok(())
    }

    /// Admits an R2T for `len` bytes at `off` of task `itt`: the range must
    /// be the next not yet requested (in order, never twice: error recovery
    /// level 0 has no recovery R2T) and no more than MaxOutstandingR2T may
    /// wait for their Data-Out to leave. So R2Ts queue at most the write's
    /// own data, whatever the target repeats.
    fn r2t(&mut self, itt: u32, off: u32, len: u32) -> io::Result<()> {
        let sent = self.tx_sent();
        let max = self.params.max_outstanding_r2t.max(1) as usize;
        let task = self.tasks.get_mut(&itt).expect("checked by the caller");
        while task.r2t_ends.front().is_some_and(|&end| end <= sent) {
            task.r2t_ends.pop_front();
        }
        if off != task.requested {
            return Err(garbage(format!(
                "garbage from the target: R2T for bytes {off}..{} of a write whose next unrequested byte is {} \
                 (a range asked for twice, or out of order)",
                u64::from(off) + u64::from(len),
                task.requested
            )));
        }
        if task.r2t_ends.len() >= max {
            return Err(garbage(format!(
                "garbage from the target: more R2Ts outstanding for one command than MaxOutstandingR2T={max}"
            )));
        }
        task.requested = off + len;
        Ok(())
    }

    fn finish(&mut self, itt: u32, status: u8, sense: Vec<u8>, residual: u32) -> io::Result<()> {
        let Some(mut task) = self.tasks.remove(&itt) else {
            return Err(garbage(format!("garbage from the target: status for unknown task {itt:#x}")));
        };
        match task.sink {
            Sink::Owned(ref mut data) => {
                data.truncate(task.received as usize);
                let data = std::mem::take(data);
                task.outcome = Some(Outcome { status, sense, data });
                self.sync_done.push((itt, task.outcome.take().unwrap_or_default()));
            }
            Sink::Pool(_) => {
                if status != 0 {
                    return Err(other(format!(
                        "{} at the target: {}",
                        match task.kind {
                            IoKind::Read => "a read failed",
                            IoKind::Write => "a write failed",
                            IoKind::Fsync => "SYNCHRONIZE CACHE failed",
                        },
                        scsi::describe_status(status, &sense)
                    )));
                }
                let moved = match task.kind {
                    IoKind::Fsync => 0,
                    _ => i64::from(task.len.saturating_sub(residual)),
                };
                if task.kind == IoKind::Read && i64::from(task.received) != moved {
                    return Err(garbage(format!(
                        "garbage from the target: GOOD status for a read of {moved} bytes (of {}, residual {residual}) \
                         that delivered {} bytes",
                        task.len, task.received
                    )));
                }
                self.done.push(Completion { tag: task.tag, result: moved });
            }
        }
        Ok(())
    }
}

fn pool_slice(pool: &BufferPool, i: u16) -> &[u8] {
    // SAFETY: ptr(i) is the start of buffer i, buf_len bytes long, owned by the pool.
    unsafe { std::slice::from_raw_parts(pool.ptr(usize::from(i)), pool.buf_len()) }
}

#[allow(clippy::mut_from_ref)]
fn pool_slice_mut(pool: &BufferPool, i: u16) -> &mut [u8] {
    // SAFETY: buffer i belongs to one task at a time; nothing else holds a
    // reference into it while the session copies received data there.
    unsafe { std::slice::from_raw_parts_mut(pool.ptr(usize::from(i)), pool.buf_len()) }
}

/// Fuzzing: `data` is what a target sends. Its key=value text is applied as
/// a login answer would be; then, as PDUs received by a session with a
/// 4 KiB READ (ITT 1), a 4 KiB WRITE (ITT 2) and a 32-byte set-up command
/// (ITT 3) outstanding, it is processed as the session would (R2T, Data-In,
/// SCSI response, NOP-In, reject, async...).
#[cfg(feature = "fuzzing")]
pub fn fuzz_pdus(data: &[u8]) {
    use std::os::unix::net::UnixStream;
    let Ok((_server, client)) = UnixStream::pair() else { return };
    let mut s = Session::detached(TcpStream::from(std::os::fd::OwnedFd::from(client)), Arc::default());
    if let Ok(pairs) = pdu::parse_text(data) {
        let _ = s.apply(&pairs);
        let _ = answer_unoffered(&pairs, &operational_keys());
    }
    s.outstanding();
    // In two pieces, as a socket may deliver them: the direct Data-In path too.
    let half = data.len() / 2;
    for piece in [&data[..half], &data[half..]] {
        s.received(piece);
        if s.process().is_err() {
            break;
        }
    }
    s.dead = true; // no logout
}

impl Session {
    /// A session on a connected socket before login: buffers for `depth`
    /// I/Os of `buf_size` bytes, nothing outstanding, RFC 7143's defaults.
    fn fresh(sock: TcpStream, stop: Arc<AtomicBool>, lun: u16, depth: usize, buf_size: usize) -> Session {
        Session {
            sock,
            rx: vec![0; 2 * (OUR_MAX_RECV as usize + BHS + 1024).max(LOGIN_TEXT_MAX + BHS + 1024)],
            rx_start: 0,
            rx_end: 0,
            tx: Vec::with_capacity(1 << 20),
            tx_pos: 0,
            tx_total: 0,
            tx_limit: depth.max(1).saturating_mul(buf_size.max(1)).saturating_add(TX_SLACK),
            stop,
            cmd_sn: 1,
            exp_stat_sn: 0,
            exp_cmd_sn: 1,
            max_cmd_sn: 1,
            next_itt: 1,
            lun: pdu::encode_lun(lun),
            params: Params::default(),
            tasks: HashMap::new(),
            waiting: VecDeque::new(),
            pool: BufferPool::new(depth.max(1), buf_size.max(1), 4096),
            block_size: 512,
            fua: false,
            last_heard: Instant::now(),
            window_capped: None,
            done: Vec::new(),
            sync_done: Vec::new(),
            dead: false,
            eof: false,
            direct: None,
            skip: 0,
        }
    }

    /// A session on a connected socket, logged in as far as it knows (the
    /// defaults of RFC 7143), two 4 KiB buffers: for fuzzing and the
    /// hostile-target tests.
    #[cfg(any(test, feature = "fuzzing"))]
    fn detached(sock: TcpStream, stop: Arc<AtomicBool>) -> Session {
        let _ = sock.set_nonblocking(true);
        let mut s = Session::fresh(sock, stop, 0, 2, 4096);
        s.max_cmd_sn = 64;
        s.next_itt = 4;
        s
    }

    /// A 4 KiB READ (ITT 1) and a 4 KiB WRITE (ITT 2, nothing sent
    /// unsolicited) into the pool, and a 32-byte set-up command (ITT 3).
    #[cfg(any(test, feature = "fuzzing"))]
    fn outstanding(&mut self) {
        self.tasks.insert(1, Task::new(1, IoKind::Read, Sink::Pool(0), 4096));
        self.tasks.insert(2, Task::new(2, IoKind::Write, Sink::Pool(1), 4096));
        self.tasks.insert(3, Task::new(0, IoKind::Read, Sink::Owned(vec![0; 32]), 32));
    }

    /// Received bytes, as if read from the socket.
    #[cfg(any(test, feature = "fuzzing"))]
    fn received(&mut self, data: &[u8]) {
        let n = data.len().min(self.rx.len() - self.rx_end);
        self.rx[self.rx_end..self.rx_end + n].copy_from_slice(&data[..n]);
        self.rx_end += n;
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.logout();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

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
        Out::new(op::R2T, false, 0x80)
            .word(16, itt)
            .word(20, 7)
            .word(28, 1)
            .word(32, 64)
            .word(40, offset)
            .word(44, len)
            .bhs
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
        assert!(s.tx.len() <= 4096 + 4 * BHS, "{} bytes queued", s.tx.len());
        s.dead = true;
    }

    #[test]
    fn r2ts_beyond_max_outstanding_r2t_are_refused() {
        let (client, _server) = pair();
        let mut s = Session::detached(client, Arc::default());
        s.outstanding();
        assert_eq!(s.params.max_outstanding_r2t, 1);
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
        s.write_some().unwrap();
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
        let nop =
            Out::new(op::NOP_IN, false, 0x80).word(16, RESERVED_TAG).word(20, RESERVED_TAG).word(28, 1).word(32, 64);
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
}
