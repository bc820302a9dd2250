//! SCSI over the session (SPC-4, SBC-4): the CDBs headroom sends, with
//! their operation codes named, and what comes back (status, sense data,
//! REPORT LUNS and READ CAPACITY(16) parameter data).
//!
//! What it owns: CDB layouts and the decoding of SCSI answers, the
//! [`Outcome`] of a command among them. What it must not do: know iSCSI PDUs,
//! the session or the socket (the session carries a CDB and returns its
//! [`Outcome`]; commands.rs runs the ones a client needs once).

use super::pdu;
use std::fmt;
use std::io;

/// Operation codes (SPC-4, SBC-4).
pub mod opcode {
    /// TEST UNIT READY.
    pub const TEST_UNIT_READY: u8 = 0x00;
    /// INQUIRY.
    pub const INQUIRY: u8 = 0x12;
    /// SYNCHRONIZE CACHE(10).
    pub const SYNCHRONIZE_CACHE_10: u8 = 0x35;
    /// READ(16).
    pub const READ_16: u8 = 0x88;
    /// WRITE(16).
    pub const WRITE_16: u8 = 0x8a;
    /// SERVICE ACTION IN(16), READ CAPACITY(16)'s opcode.
    pub const SERVICE_ACTION_IN_16: u8 = 0x9e;
    /// REPORT LUNS.
    pub const REPORT_LUNS: u8 = 0xa0;
}

/// READ CAPACITY(16)'s service action under [`opcode::SERVICE_ACTION_IN_16`].
pub const READ_CAPACITY_16: u8 = 0x10;
/// WRITE(16) byte 1: Force Unit Access (the write is durable when acknowledged).
pub const FUA: u8 = 0x08;
/// INQUIRY byte 0: the peripheral device type (0 is a disk).
pub const PERIPHERAL_TYPE_MASK: u8 = 0x1f;
/// Peripheral device type of a direct-access block device.
pub const DIRECT_ACCESS: u8 = 0x00;

/// SCSI status codes (SAM-5).
pub mod status {
    /// The command succeeded.
    pub const GOOD: u8 = 0x00;
    /// Sense data says why it failed.
    pub const CHECK_CONDITION: u8 = 0x02;
    /// BUSY.
    pub const BUSY: u8 = 0x08;
    /// RESERVATION CONFLICT.
    pub const RESERVATION_CONFLICT: u8 = 0x18;
    /// TASK SET FULL.
    pub const TASK_SET_FULL: u8 = 0x28;
    /// ACA ACTIVE.
    pub const ACA_ACTIVE: u8 = 0x30;
    /// TASK ABORTED.
    pub const TASK_ABORTED: u8 = 0x40;
}

/// Sense keys headroom acts on.
pub mod key {
    /// A new I_T nexus or a reset: the next command may pass.
    pub const UNIT_ATTENTION: u8 = 0x06;
}

// Response codes of sense data (SPC-4 4.4.1): fixed or descriptor format,
// current or deferred.
const FIXED_CURRENT: u8 = 0x70;
const FIXED_DEFERRED: u8 = 0x71;
const DESCRIPTOR_CURRENT: u8 = 0x72;
const DESCRIPTOR_DEFERRED: u8 = 0x73;

pub fn cdb(head: &[u8]) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[..head.len()].copy_from_slice(head);
    c
}

/// READ(16) or WRITE(16) (`op`) of `blocks` blocks from `lba`; with `fua`
/// a write is durable once acknowledged.
pub fn read_write_16(op: u8, fua: bool, lba: u64, blocks: u32) -> [u8; 16] {
    let mut c = cdb(&[op, if fua { FUA } else { 0 }]);
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

/// The outcome of a command run to completion (the session fills it in).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// SCSI status (0 = GOOD).
    pub status: u8,
    /// Sense data.
    pub sense: Vec<u8>,
    /// Data-In received.
    pub data: Vec<u8>,
}

pub fn check(o: &Outcome) -> io::Result<()> {
    if o.status == status::GOOD {
        Ok(())
    } else {
        Err(io::Error::other(describe_status(o.status, &o.sense)))
    }
}

/// LUN numbers in REPORT LUNS parameter data (SPC-4 6.33).
pub fn parse_report_luns(d: &[u8]) -> Vec<u16> {
    let Some(head) = d.get(..4) else { return Vec::new() };
    let listed = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    d.get(8..).unwrap_or(&[]).chunks_exact(8).take(listed / 8).filter_map(pdu::decode_lun).collect()
}

/// (blocks, block size) from READ CAPACITY(16) data (SBC-4 5.16.2).
pub fn parse_capacity(d: &[u8]) -> Option<(u64, u64)> {
    let last = u64::from_be_bytes(d.get(0..8)?.try_into().ok()?);
    let bs = u64::from(u32::from_be_bytes(d.get(8..12)?.try_into().ok()?));
    // The capacity in bytes must fit in 64 bits: a huge last block would wrap.
    let blocks = last.checked_add(1)?;
    if !(512..=1 << 20).contains(&bs) || !bs.is_power_of_two() || blocks.checked_mul(bs).is_none() {
        return None;
    }
    Some((blocks, bs))
}

pub fn device_type_name(t: u8) -> &'static str {
    match t {
        0x01 => "tape",
        0x05 => "CD/DVD drive",
        0x0c => "storage controller",
        0x0d => "enclosure",
        0x1f => "unknown or absent device",
        _ => "non-disk device",
    }
}

/// SCSI status and sense data as one readable phrase.
pub fn describe_status(status: u8, sense: &[u8]) -> String {
    let status_name = match status {
        status::CHECK_CONDITION => "CHECK CONDITION",
        status::BUSY => "BUSY",
        status::RESERVATION_CONFLICT => "RESERVATION CONFLICT",
        status::TASK_SET_FULL => "TASK SET FULL",
        status::ACA_ACTIVE => "ACA ACTIVE",
        status::TASK_ABORTED => "TASK ABORTED",
        _ => "",
    };
    let head = if status_name.is_empty() {
        format!("SCSI status 0x{status:02x}")
    } else {
        format!("SCSI status {status_name}")
    };
    match parse_sense(sense) {
        Some(s) => format!("{head}: {s}"),
        None => head,
    }
}

/// Decoded sense data (fixed or descriptor format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sense {
    /// Sense key.
    pub key: u8,
    /// Additional sense code.
    pub asc: u8,
    /// Its qualifier.
    pub ascq: u8,
}

/// Sense data, or None when too short or of an unknown format.
pub fn parse_sense(s: &[u8]) -> Option<Sense> {
    match s.first()? & 0x7f {
        FIXED_CURRENT | FIXED_DEFERRED if s.len() >= 14 => Some(Sense { key: s[2] & 0x0f, asc: s[12], ascq: s[13] }),
        DESCRIPTOR_CURRENT | DESCRIPTOR_DEFERRED if s.len() >= 4 => {
            Some(Sense { key: s[1] & 0x0f, asc: s[2], ascq: s[3] })
        }
        _ => None,
    }
}

impl fmt::Display for Sense {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = [
            "NO SENSE",
            "RECOVERED ERROR",
            "NOT READY",
            "MEDIUM ERROR",
            "HARDWARE ERROR",
            "ILLEGAL REQUEST",
            "UNIT ATTENTION",
            "DATA PROTECT",
            "BLANK CHECK",
            "VENDOR SPECIFIC",
            "COPY ABORTED",
            "ABORTED COMMAND",
            "RESERVED",
            "VOLUME OVERFLOW",
            "MISCOMPARE",
            "COMPLETED",
        ][usize::from(self.key & 0x0f)];
        let what = match (self.asc, self.ascq) {
            (0x04, _) => "logical unit not ready",
            (0x11, _) => "unrecovered read error",
            (0x20, 0) => "invalid command operation code",
            (0x21, 0) => "logical block address out of range",
            (0x24, 0) => "invalid field in CDB",
            (0x25, 0) => "logical unit not supported",
            (0x27, _) => "write protected",
            (0x28, 0) => "medium may have changed",
            (0x29, _) => "power on, reset or bus device reset occurred",
            (0x2a, _) => "parameters changed",
            (0x3a, _) => "medium not present",
            _ => "",
        };
        if what.is_empty() {
            write!(f, "{key}, ASC/ASCQ 0x{:02x}/0x{:02x}", self.asc, self.ascq)
        } else {
            write!(f, "{key}, {what} (ASC/ASCQ 0x{:02x}/0x{:02x})", self.asc, self.ascq)
        }
    }
}
