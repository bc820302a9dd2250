//! The command pipeline: tasks by initiator task tag, SCSI Commands sent
//! while the target's CmdSN window is open (the rest wait in order), their
//! immediate and unsolicited data, Data-Out for each R2T the target may ask
//! for, and the window each answer moves.
//!
//! What it owns: [`Task`], ITTs, CmdSN, the window and R2T admission. What
//! it must not do: parse what the target sends (`receive`) or touch the
//! socket (the session's connection carries the PDUs it queues).

use super::super::pdu::{self, at, flag, op, Header, Out, RESERVED_TAG};
use super::super::scsi::Outcome;
use super::super::scsi::{self, opcode};
use super::{garbage, Session};
use headroom_disk::{IoKind, IoUnit};
use std::collections::VecDeque;
use std::io;
use std::time::Instant;

/// Where a command's Data-In goes.
#[derive(Debug)]
pub(super) enum Sink {
    /// One of the pool's buffers (a runner I/O).
    Pool(u16),
    /// A command of [`Session::command`].
    Owned(Vec<u8>),
}

/// One command outstanding.
#[derive(Debug)]
pub(super) struct Task {
    pub(super) tag: u64,
    pub(super) kind: IoKind,
    pub(super) sink: Sink,
    pub(super) len: u32,
    /// Data-In bytes received, in order (DataPDUInOrder is Yes).
    pub(super) received: u32,
    /// Write data sent unsolicited or asked for by R2Ts so far, in order
    /// (DataSequenceInOrder is Yes): the next R2T must start here.
    pub(super) requested: u32,
    /// Where in the output stream the Data-Out of each R2T not yet fully
    /// sent ends (`Conn::queued`): at most MaxOutstandingR2T of them.
    pub(super) r2t_ends: VecDeque<u64>,
    /// When the command was sent.
    pub(super) issued: Instant,
    pub(super) outcome: Option<Outcome>,
}

impl Task {
    pub(super) fn new(tag: u64, kind: IoKind, sink: Sink, len: u32) -> Task {
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

impl Session {
    fn window_open(&self) -> bool {
        !pdu::sn_gt(self.cmd_sn, self.max_cmd_sn)
    }

    pub(super) fn take_itt(&mut self) -> u32 {
        let mut itt = self.next_itt;
        while itt == RESERVED_TAG || self.tasks.contains_key(&itt) {
            itt = itt.wrapping_add(1);
        }
        self.next_itt = itt.wrapping_add(1);
        itt
    }

    /// The window a target's answer announces (`h` carries one).
    pub(super) fn note_window(&mut self, h: &Header) {
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

    /// Sends waiting runner I/Os while the window is open.
    pub(super) fn issue_waiting(&mut self) {
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
            self.conn.heard_now();
        }
        let itt = self.take_itt();
        let bs = u64::from(self.block_size);
        let (lba, blocks) = (io.offset / bs, (u64::from(io.len) / bs) as u32);
        let (cdb, flags, edtl) = match io.kind {
            IoKind::Read => (
                scsi::read_write_16(opcode::READ_16, false, lba, blocks),
                flag::FINAL | flag::READ | flag::SIMPLE,
                io.len,
            ),
            // F is set once it is known whether Data-Out follows.
            IoKind::Write => {
                (scsi::read_write_16(opcode::WRITE_16, self.fua, lba, blocks), flag::WRITE | flag::SIMPLE, io.len)
            }
            IoKind::Fsync => (scsi::cdb(&[opcode::SYNCHRONIZE_CACHE_10]), flag::FINAL | flag::SIMPLE, 0),
        };
        let task = Task::new(io.tag, io.kind, Sink::Pool(io.buf_index), edtl);
        self.send_command(itt, flags, edtl, &cdb, task);
    }

    /// Sends a SCSI Command with its immediate and unsolicited data (writes).
    pub(super) fn send_command(&mut self, itt: u32, mut flags: u8, edtl: u32, cdb: &[u8; 16], task: Task) {
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
            flags |= flag::FINAL;
        }
        let bhs = Out::new(op::SCSI_CMD, false, flags)
            .data_len(immediate as usize)
            .lun(self.lun)
            .word(at::ITT, itt)
            .word(at::EDTL, edtl)
            .word(at::CMD_SN, self.cmd_sn)
            .word(at::EXP_STAT_SN, self.exp_stat_sn)
            .cdb(cdb)
            .bhs;
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        let buf = match task.sink {
            Sink::Pool(i) => Some(i),
            Sink::Owned(_) => None,
        };
        match buf {
            Some(i) if immediate > 0 => {
                let data = &self.pool.slice_mut(usize::from(i))[..immediate as usize];
                self.conn.push(&bhs, data, pdu::pad4(data.len()) - data.len());
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
    pub(super) fn data_out(&mut self, itt: u32, ttt: u32, buf: u16, offset: u32, len: u32) {
        let seg = self.params.target_max_recv.max(512);
        let data = self.pool.slice_mut(usize::from(buf));
        let (mut off, end, mut sn) = (offset, offset + len, 0u32);
        // The headers first, then one gathered write of headers and
        // payloads straight from the I/O buffer (Conn::push_pieces).
        let mut heads = Vec::with_capacity(end.saturating_sub(off).div_ceil(seg) as usize);
        while off < end {
            let n = seg.min(end - off);
            let last = off + n == end;
            let bhs = Out::new(op::DATA_OUT, false, if last { flag::FINAL } else { 0 })
                .data_len(n as usize)
                .lun(self.lun)
                .word(at::ITT, itt)
                .word(at::TTT, ttt)
                .word(at::EXP_STAT_SN, self.exp_stat_sn)
                .word(at::DATA_SN, sn)
                .word(at::BUFFER_OFFSET, off)
                .bhs;
            heads.push((bhs, off as usize..(off + n) as usize));
            off += n;
            sn += 1;
        }
        const ZEROS: [u8; 3] = [0; 3];
        let mut pieces: Vec<&[u8]> = Vec::with_capacity(3 * heads.len());
        for (bhs, range) in &heads {
            let pad = pdu::pad4(range.len()) - range.len();
            pieces.extend([&bhs[..], &data[range.clone()], &ZEROS[..pad]]);
        }
        self.conn.push_pieces(&pieces);
    }

    /// Admits an R2T for `len` bytes at `off` of task `itt`: the range must
    /// be the next not yet requested (in order, never twice: error recovery
    /// level 0 has no recovery R2T) and no more than MaxOutstandingR2T may
    /// wait for their Data-Out to leave. So R2Ts queue at most the write's
    /// own data, whatever the target repeats.
    pub(super) fn r2t(&mut self, itt: u32, off: u32, len: u32) -> io::Result<()> {
        let sent = self.conn.sent();
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
}
