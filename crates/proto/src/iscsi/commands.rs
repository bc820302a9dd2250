//! The SCSI commands a client runs once per session, before its I/O: TEST
//! UNIT READY until the LUN is ready, REPORT LUNS and READ CAPACITY(16).
//!
//! What it owns: the order and retries of those commands. What it must not
//! do: lay out a CDB or decode an answer (scsi.rs), or know PDUs (the session).

use super::pdu;
use super::scsi::{cdb, check, key, opcode, parse_capacity, parse_report_luns, parse_sense, READ_CAPACITY_16};
use super::session::Session;
use std::io;

/// TEST UNIT READY until it passes: a new I_T nexus may first see UNIT ATTENTION.
pub fn ready(s: &mut Session) -> io::Result<()> {
    let mut last = Ok(());
    for _ in 0..3 {
        let o = s.command(cdb(&[opcode::TEST_UNIT_READY]), 0)?;
        last = check(&o);
        if last.is_ok() || parse_sense(&o.sense).is_none_or(|k| k.key != key::UNIT_ATTENTION) {
            return last;
        }
    }
    last
}

pub fn report_luns(s: &mut Session) -> io::Result<Vec<u16>> {
    let len: u32 = 8 + 8 * 256;
    let mut c = cdb(&[opcode::REPORT_LUNS]);
    c[6..10].copy_from_slice(&len.to_be_bytes());
    let o = s.command_at(pdu::encode_lun(0), c, len)?;
    check(&o)?;
    Ok(parse_report_luns(&o.data))
}

pub fn read_capacity(s: &mut Session) -> io::Result<(u64, u64)> {
    let mut c = cdb(&[opcode::SERVICE_ACTION_IN_16, READ_CAPACITY_16]);
    c[13] = 32;
    let o = s.command(c, 32)?;
    check(&o)?;
    parse_capacity(&o.data).ok_or_else(|| io::Error::other("the target's READ CAPACITY(16) answer is malformed"))
}
