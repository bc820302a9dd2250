//! What the target sends in the full feature phase, PDU by PDU: Data-In
//! (a runner read's payload straight from the socket into its buffer when
//! it has not arrived yet), SCSI Response with sense, R2T answered with
//! Data-Out, NOP-In answered, reject, asynchronous messages, and each
//! command's completion.
//!
//! What it owns: judging each PDU against the task it names (garbage is an
//! error that ends the session, never a panic) and finishing tasks. What it
//! must not do: send commands (`pipeline`) or wait on the socket.

use super::super::pdu::{self, at, flag, op, Header, Out, BHS, RESERVED_TAG};
use super::super::scsi;
use super::super::scsi::Outcome;
use super::pipeline::Sink;
use super::{garbage, other, Session};
use headroom_disk::{Completion, IoKind};
use std::io;
use std::ops::Range;

/// A Data-In PDU being received into a pool buffer: its header, the buffer,
/// the next byte to fill and the end of its payload in the buffer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Direct {
    pub(super) h: Header,
    pub(super) buf: u16,
    pub(super) at: usize,
    pub(super) end: usize,
}

impl Session {
    /// Handles every whole PDU received.
    pub(super) fn process(&mut self) -> io::Result<()> {
        loop {
            if self.direct.is_some() && !self.drain_direct().inspect_err(|_| self.dead = true)? {
                return Ok(());
            }
            if self.skip > 0 {
                let k = self.skip.min(self.conn.buffered().len());
                self.conn.consume(k);
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
            if self.conn.unsent() > self.tx_limit {
                self.dead = true;
                return Err(other(format!(
                    "the target stopped reading while asking for more: {} bytes wait to be sent",
                    self.conn.unsent()
                )));
            }
            self.issue_waiting();
        }
    }

    /// One whole PDU from what was received, if there is one: its header and
    /// where its data segment is ([`Conn::bytes`](crate::frame::Conn::bytes)).
    pub(super) fn parse_one(&mut self, max_data: usize) -> Result<Option<(Header, Range<usize>)>, pdu::WireError> {
        let Some((h, frame)) = self.conn.next_frame(BHS, |head| pdu::frame(head, max_data))? else {
            return Ok(None);
        };
        if h.carries_window() && h.opcode != op::LOGIN_RESP {
            self.note_window(&h);
        }
        let start = frame.start + BHS + h.ahs_len;
        Ok(Some((h, start..start + h.data_len)))
    }

    /// How many bytes to buffer to have the next PDU's header (after the
    /// padding still to drop), and its rest too once the header is here and
    /// says how long it is.
    pub(super) fn next_header_end(&self) -> usize {
        let header_end = self.skip + BHS;
        let Some(head) = self.conn.buffered().get(self.skip..header_end) else { return header_end };
        match head.try_into().map(Header::parse) {
            Ok(Ok(h)) => header_end + h.rest_len(),
            _ => usize::MAX,
        }
    }

    /// Starts receiving a Data-In for a runner I/O into its buffer when its
    /// header is here but its payload is not yet; anything unusual is left
    /// to [`Self::parse_one`] and [`Self::handle`] to judge.
    fn start_direct(&mut self) -> bool {
        let avail = self.conn.buffered();
        let Some(Ok(h)) = avail.get(..BHS).and_then(|b| b.try_into().ok()).map(Header::parse) else { return false };
        if h.opcode != op::DATA_IN
            || h.ahs_len != 0
            || avail.len() >= BHS + h.rest_len()
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
        self.conn.consume(BHS);
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
        let src = self.conn.buffered();
        let n = src.len().min(d.end - d.at);
        self.pool.slice_mut(usize::from(d.buf))[d.at..d.at + n].copy_from_slice(&src[..n]);
        self.conn.consume(n);
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
        self.header_first = h.data_len >= super::HEADER_FIRST_FROM;
        if let Some(task) = self.tasks.get_mut(&h.itt) {
            task.received += h.data_len as u32;
        }
        if h.flags & flag::STATUS != 0 {
            self.exp_stat_sn = h.stat_sn.wrapping_add(1);
            let residual = if h.flags & flag::UNDERFLOW != 0 { h.word44 } else { 0 };
            self.finish(h.itt, h.byte3, Vec::new(), residual)?;
        }
        Ok(())
    }

    fn handle(&mut self, h: Header, range: Range<usize>) -> io::Result<()> {
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
                let src = self.conn.bytes(range);
                match &mut task.sink {
                    Sink::Pool(i) => self.pool.slice_mut(usize::from(*i))[off..off + n].copy_from_slice(src),
                    Sink::Owned(v) => v[off..off + n].copy_from_slice(src),
                }
                self.data_in_done(&h)?;
            }
            op::SCSI_RESP => {
                self.exp_stat_sn = h.stat_sn.wrapping_add(1);
                if h.byte2 != 0 {
                    return Err(other(format!("the target failed a command (iSCSI response 0x{:02x})", h.byte2)));
                }
                let data = self.conn.bytes(range);
                let sense = if data.len() >= 2 {
                    let n = usize::from(u16::from_be_bytes([data[0], data[1]])).min(data.len() - 2);
                    data[2..2 + n].to_vec()
                } else {
                    Vec::new()
                };
                let residual = if h.flags & flag::UNDERFLOW != 0 { h.word44 } else { 0 };
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
                let end = self.conn.queued();
                if let Some(task) = self.tasks.get_mut(&h.itt) {
                    task.r2t_ends.push_back(end);
                }
            }
            op::NOP_IN => {
                if h.ttt != RESERVED_TAG {
                    let ping = self.conn.bytes(range).to_vec();
                    let bhs = Out::new(op::NOP_OUT, true, flag::FINAL)
                        .data_len(ping.len())
                        .lun(h.lun)
                        .word(at::ITT, RESERVED_TAG)
                        .word(at::TTT, h.ttt)
                        .word(at::CMD_SN, self.cmd_sn)
                        .word(at::EXP_STAT_SN, self.exp_stat_sn)
                        .bhs;
                    self.push(&bhs, &ping);
                }
            }
            op::ASYNC => {
                use pdu::async_event::{CONNECTION_DROPPED, LOGOUT_REQUESTED, SESSION_DROPPED};
                let event = h.async_event();
                if matches!(event, LOGOUT_REQUESTED | CONNECTION_DROPPED | SESSION_DROPPED) {
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
                if status != scsi::status::GOOD {
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
