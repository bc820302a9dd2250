//! One iSCSI session of one connection (RFC 7143, error recovery level 0),
//! in layers: the framed connection (`crate::frame`: whole PDUs out and in,
//! the socket's buffers, waits with a deadline, so a silent target is an
//! error, never a hang), the login (`login`), the command pipeline
//! (`pipeline`: CmdSN window, tasks by ITT, SCSI Command, R2T and
//! Data-Out), what the target sends (`receive`), and here the session's
//! face: queue, commit, getevents, a set-up command, logout.
//!
//! What it owns: the session's state, one struct whose methods the layers
//! share. What it must not do: write CDBs (`scsi`) or PDU fields by bare
//! number (`pdu`), or touch the socket but through its connection.

mod login;
mod pipeline;
mod receive;
#[cfg(test)]
mod tests;

pub use login::{LoginError, LoginSpec, Params, INITIATOR_NAME};

use super::pdu::{self, at, flag, op, Out, BHS};
use super::scsi::Outcome;
use crate::frame::{Conn, Names};
use crate::transport::Origin;
use headroom_disk::{BufferPool, Completion, IoKind, IoUnit};
use login::LOGIN_TEXT_MAX;
#[cfg(feature = "fuzzing")]
use login::{answer_unoffered, operational_keys};
use pipeline::{Sink, Task};
use receive::Direct;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a target may stay silent while commands are outstanding; also
/// the whole login's limit.
pub const SILENCE: Duration = Duration::from_secs(8);
/// Any one command, from its sending to its status, however the target
/// trickles its bytes: the SCSI layer's default command timeout.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(if cfg!(test) { 3 } else { 30 });
/// Bytes queued to send beyond the I/O buffers' own size: R2Ts can ask for
/// no more than the writes hold (see `Session::r2t`), so only NOP-In
/// answers to a target that stopped reading could exceed it.
const TX_SLACK: usize = 4 << 20;
/// What headroom declares it receives per PDU.
pub const OUR_MAX_RECV: u32 = crate::iscsi_keys::MAX_RECV_SEGMENT;
/// The target as the connection's errors name it.
const NAMES: Names = Names { peer: "the target", exchange: "an iSCSI exchange" };

/// One logged-in session on one TCP connection.
pub struct Session {
    conn: Conn,
    /// The most bytes that may wait unsent.
    tx_limit: usize,
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
    /// Commands in flight the least times the window held one back; None
    /// while it never did.
    pub window_capped: Option<u32>,
    done: Vec<Completion>,
    sync_done: Vec<(u32, Outcome)>,
    /// The session failed or logged out (the connection may still be up).
    dead: bool,
    /// A Data-In whose payload is read straight into its I/O buffer.
    direct: Option<Direct>,
    /// Padding bytes still to drop after a direct payload.
    skip: usize,
    /// Payload bytes read straight from the socket into I/O buffers, not
    /// through the receive buffer (what a profile of the copies counts).
    received_direct: u64,
    /// The last Data-In was large ([`HEADER_FIRST_FROM`]): read headers
    /// apart from their payloads.
    header_first: bool,
}

/// The most bytes a wait for a direct payload waits to have queued: the
/// largest Data-In headroom declares (the seam lowers it further to a
/// quarter of the socket's receive buffer).
const WAKE_AT_MOST: usize = 256 << 10;
/// A Data-In payload from which the copy through the receive buffer costs
/// more than the extra read of its header on its own: 1 MiB of copies is
/// ~100 us on a 2020s core, a read of 48 bytes ~1-2 us.
const HEADER_FIRST_FROM: usize = 64 << 10;

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
        Origin::of(self.conn.socket(), source)
    }

    /// MaxCmdSN - ExpCmdSN + 1 as the target last announced it.
    pub fn window(&self) -> u32 {
        self.max_cmd_sn.wrapping_sub(self.exp_cmd_sn).wrapping_add(1)
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

    /// Starts sending what is queued, without waiting.
    pub fn commit(&mut self) -> io::Result<()> {
        if self.is_over() {
            return Err(gone("the connection to the target is gone"));
        }
        self.issue_waiting();
        self.conn.write_some()?;
        self.read_some()?;
        self.process()
    }

    /// Sends what is queued and collects completions: blocks until at least
    /// `min` runner I/Os completed.
    pub fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        if self.is_over() {
            return Err(gone("the connection to the target is gone"));
        }
        self.conn.write_some()?;
        self.read_some()?;
        loop {
            self.issue_waiting();
            self.process()?;
            if self.done.len() >= min || (self.tasks.is_empty() && self.waiting.is_empty()) {
                out.append(&mut self.done);
                return Ok(());
            }
            self.check_command_deadline()?;
            self.wait(self.conn.last_heard() + SILENCE)?;
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
        let flags = flag::FINAL | if data_in > 0 { flag::READ } else { 0 } | flag::SIMPLE;
        let task = Task::new(0, IoKind::Read, Sink::Owned(vec![0; data_in as usize]), data_in);
        self.conn.heard_now();
        let own = std::mem::replace(&mut self.lun, lun);
        self.send_command(itt, flags, data_in, &cdb, task);
        self.lun = own;
        loop {
            self.process()?;
            if let Some(i) = self.sync_done.iter().position(|(t, _)| *t == itt) {
                return Ok(self.sync_done.swap_remove(i).1);
            }
            self.check_command_deadline()?;
            self.wait(self.conn.last_heard() + SILENCE)?;
        }
    }

    /// Logs out (best effort, two seconds at most): the target frees the session at once.
    pub fn logout(&mut self) {
        if self.is_over() {
            return;
        }
        self.dead = true;
        let itt = self.take_itt();
        // F with reason code 0: close the session.
        let bhs = Out::new(op::LOGOUT, true, flag::FINAL)
            .word(at::ITT, itt)
            .word(at::CMD_SN, self.cmd_sn)
            .word(at::EXP_STAT_SN, self.exp_stat_sn)
            .bhs;
        self.push(&bhs, &[]);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if self.wait(deadline).is_err() {
                return;
            }
            while let Ok(Some((h, _))) = self.parse_one(self.params.initiator_max_recv as usize) {
                if h.opcode == op::LOGOUT_RESP {
                    return;
                }
            }
        }
    }

    /// Whether the session can take no more commands.
    fn is_over(&self) -> bool {
        self.dead || self.conn.broken()
    }

    /// Queues one PDU with its data segment, padded to 4 bytes.
    fn push(&mut self, bhs: &[u8; BHS], data: &[u8]) {
        self.conn.push(bhs, data, pdu::pad4(data.len()) - data.len());
    }

    /// Reads what the socket has now: a direct Data-In's payload straight
    /// into its I/O buffer. While the target sends large Data-In PDUs, only
    /// up to the end of the next header is buffered, so that the payload
    /// behind it goes direct too rather than through the receive buffer.
    fn read_some(&mut self) -> io::Result<()> {
        let buffered_max = if self.header_first { self.next_header_end() } else { usize::MAX };
        let into = self.direct.as_ref().map(|d| &mut self.pool.slice_mut(usize::from(d.buf))[d.at..d.end]);
        let n = self.conn.read_some_up_to(into, buffered_max)?;
        if let Some(d) = self.direct.as_mut() {
            d.at += n;
            self.received_direct += n as u64;
        }
        Ok(())
    }

    /// Waits for the socket until `deadline` (at most one slice), then moves
    /// bytes both ways.
    fn wait(&mut self, deadline: Instant) -> io::Result<()> {
        let payload_left = self.direct.map_or(1, |d| (d.end - d.at).min(WAKE_AT_MOST));
        self.conn.wake_when_queued(payload_left);
        self.conn.wait(deadline)?;
        self.read_some()
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

    /// A session on a connected socket before login: buffers for `depth`
    /// I/Os of `buf_size` bytes, a receive buffer for two PDUs of
    /// `max_recv` data bytes (the segment it will offer) and never less than
    /// for headroom's own (what it accepts until login ends), nothing
    /// outstanding, RFC 7143's defaults.
    fn fresh(
        sock: TcpStream,
        stop: Arc<AtomicBool>,
        lun: u16,
        (depth, buf_size): (usize, usize),
        max_recv: u32,
    ) -> Session {
        let segment = max_recv.max(OUR_MAX_RECV) as usize;
        let rx_len = 2 * (segment + BHS + 1024).max(LOGIN_TEXT_MAX + BHS + 1024);
        Session {
            conn: Conn::new(sock, stop, NAMES, SILENCE, rx_len),
            tx_limit: depth.max(1).saturating_mul(buf_size.max(1)).saturating_add(TX_SLACK),
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
            window_capped: None,
            done: Vec::new(),
            sync_done: Vec::new(),
            dead: false,
            direct: None,
            header_first: false,
            received_direct: 0,
            skip: 0,
        }
    }

    /// A session on a connected socket, logged in as far as it knows (the
    /// defaults of RFC 7143), two 4 KiB buffers: for fuzzing and the
    /// hostile-target tests.
    #[cfg(any(test, feature = "fuzzing"))]
    fn detached(sock: TcpStream, stop: Arc<AtomicBool>) -> Session {
        let _ = sock.set_nonblocking(true);
        let mut s = Session::fresh(sock, stop, 0, (2, 4096), OUR_MAX_RECV);
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
        self.conn.received(data);
    }
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
        let _ = answer_unoffered(&pairs, &operational_keys(&Default::default()));
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

impl Drop for Session {
    fn drop(&mut self) {
        self.logout();
    }
}
