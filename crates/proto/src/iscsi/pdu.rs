//! iSCSI PDUs on the wire (RFC 7143 section 11): the 48-byte Basic Header
//! Segment, login text keys, SCSI sense data. Everything here is pure byte
//! handling, bounded so that garbage from a target is an error, never a
//! panic or an unbounded allocation.

use std::fmt;

/// Bytes of a Basic Header Segment.
pub const BHS: usize = 48;
/// The largest data segment accepted from any target, whatever it declared:
/// a longer one is garbage, not a PDU.
pub const MAX_SEGMENT: usize = 16 << 20;
/// "No task" / "no target transfer tag".
pub const RESERVED_TAG: u32 = 0xffff_ffff;
/// Byte 0's I bit: deliver at once, outside the CmdSN order (login,
/// logout, NOP-Out answers).
pub const IMMEDIATE: u8 = 0x40;
/// Byte 0's opcode bits.
pub const OPCODE_MASK: u8 = 0x3f;
/// An ISID's first byte for the "random" type (T = 10b, RFC 7143 10.12.5).
pub const ISID_RANDOM: u8 = 0x80;

/// Byte 1's flag bits (RFC 7143 11), by the PDUs that carry them.
pub mod flag {
    /// F: the last PDU of a command's unsolicited data, a Data-Out burst or
    /// a request (NOP-Out, logout).
    pub const FINAL: u8 = 0x80;
    /// SCSI Command R: Data-In is expected.
    pub const READ: u8 = 0x40;
    /// SCSI Command W: Data-Out follows.
    pub const WRITE: u8 = 0x20;
    /// SCSI Command ATTR: the SIMPLE task attribute.
    pub const SIMPLE: u8 = 0x01;
    /// Data-In S: the PDU carries the command's status.
    pub const STATUS: u8 = 0x01;
    /// Data-In and SCSI Response U: less moved than expected; the residual
    /// count says how much less.
    pub const UNDERFLOW: u8 = 0x02;
    /// Login T: move to the next stage.
    pub const TRANSIT: u8 = 0x80;
    /// Login C: the text continues in the next PDU.
    pub const CONTINUE: u8 = 0x40;
    /// Login NSG: the next stage's bits (CSG is the two above them).
    pub const NEXT_STAGE: u8 = 0x03;
}

/// Login stages (byte 1's CSG and NSG).
pub mod stage {
    /// Security negotiation (CHAP).
    pub const SECURITY: u8 = 0;
    /// Operational negotiation.
    pub const OPERATIONAL: u8 = 1;
    /// Full feature phase: SCSI commands.
    pub const FULL_FEATURE: u8 = 3;

    /// Byte 1 of a login request in stage `current` asking for `next`.
    pub fn flags(transit: bool, current: u8, next: u8) -> u8 {
        (if transit { super::flag::TRANSIT } else { 0 }) | (current << 2) | next
    }
}

/// Asynchronous events (byte 36 of an Asynchronous Message) that end the session.
pub mod async_event {
    /// The target asks for a logout.
    pub const LOGOUT_REQUESTED: u8 = 1;
    /// The target will drop this connection.
    pub const CONNECTION_DROPPED: u8 = 2;
    /// The target will drop every connection of the session.
    pub const SESSION_DROPPED: u8 = 3;
}

/// Byte offsets of the BHS fields headroom writes in its requests (RFC 7143 11).
pub mod at {
    /// Initiator task tag.
    pub const ITT: usize = 16;
    /// SCSI Command's expected data transfer length.
    pub const EDTL: usize = 20;
    /// Target transfer tag (Data-Out, NOP-Out).
    pub const TTT: usize = 20;
    /// CmdSN.
    pub const CMD_SN: usize = 24;
    /// ExpStatSN.
    pub const EXP_STAT_SN: usize = 28;
    /// DataSN of a Data-Out.
    pub const DATA_SN: usize = 36;
    /// Buffer offset of a Data-Out or Data-In.
    pub const BUFFER_OFFSET: usize = 40;
}

/// Opcodes, initiator to target.
pub mod op {
    /// NOP-Out.
    pub const NOP_OUT: u8 = 0x00;
    /// SCSI Command.
    pub const SCSI_CMD: u8 = 0x01;
    /// Login Request.
    pub const LOGIN: u8 = 0x03;
    /// SCSI Data-Out.
    pub const DATA_OUT: u8 = 0x05;
    /// Logout Request.
    pub const LOGOUT: u8 = 0x06;
    /// NOP-In.
    pub const NOP_IN: u8 = 0x20;
    /// SCSI Response.
    pub const SCSI_RESP: u8 = 0x21;
    /// Login Response.
    pub const LOGIN_RESP: u8 = 0x23;
    /// SCSI Data-In.
    pub const DATA_IN: u8 = 0x25;
    /// Logout Response.
    pub const LOGOUT_RESP: u8 = 0x26;
    /// Ready To Transfer.
    pub const R2T: u8 = 0x31;
    /// Asynchronous Message.
    pub const ASYNC: u8 = 0x32;
    /// Reject.
    pub const REJECT: u8 = 0x3f;
}

/// A malformed or unexpected PDU; the message says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A parsed Basic Header Segment (the fields every target-to-initiator PDU
/// headroom handles carries at the same place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Opcode without the immediate bit.
    pub opcode: u8,
    /// Byte 1: F and the opcode-specific flags.
    pub flags: u8,
    /// Byte 2 (Response, or the login's version-max).
    pub byte2: u8,
    /// Byte 3 (SCSI status).
    pub byte3: u8,
    /// Additional header segments, bytes.
    pub ahs_len: usize,
    /// Data segment, bytes (without padding).
    pub data_len: usize,
    /// Bytes 8-15: LUN, or ISID+TSIH for login.
    pub lun: [u8; 8],
    /// Initiator task tag.
    pub itt: u32,
    /// Target transfer tag (bytes 20-23).
    pub ttt: u32,
    /// StatSN (bytes 24-27).
    pub stat_sn: u32,
    /// ExpCmdSN (bytes 28-31).
    pub exp_cmd_sn: u32,
    /// MaxCmdSN (bytes 32-35).
    pub max_cmd_sn: u32,
    /// Bytes 36-39: DataSN, R2TSN, or the login status class and detail.
    pub word36: u32,
    /// Bytes 40-43: buffer offset.
    pub word40: u32,
    /// Bytes 44-47: residual count, or R2T's desired length.
    pub word44: u32,
}

impl Header {
    /// Parses a BHS; checks only what makes the PDU's length sane.
    pub fn parse(b: &[u8; BHS]) -> Result<Header, WireError> {
        let data_len = (usize::from(b[5]) << 16) | (usize::from(b[6]) << 8) | usize::from(b[7]);
        if data_len > MAX_SEGMENT {
            return Err(WireError(format!("a PDU announces {data_len} bytes of data (at most {MAX_SEGMENT})")));
        }
        let mut lun = [0u8; 8];
        lun.copy_from_slice(&b[8..16]);
        Ok(Header {
            opcode: b[0] & OPCODE_MASK,
            flags: b[1],
            byte2: b[2],
            byte3: b[3],
            ahs_len: usize::from(b[4]) * 4,
            data_len,
            lun,
            itt: be32(b, 16),
            ttt: be32(b, 20),
            stat_sn: be32(b, 24),
            exp_cmd_sn: be32(b, 28),
            max_cmd_sn: be32(b, 32),
            word36: be32(b, 36),
            word40: be32(b, 40),
            word44: be32(b, 44),
        })
    }

    /// Bytes after the BHS: AHS, data and the data's padding to 4.
    pub fn rest_len(&self) -> usize {
        self.ahs_len + pad4(self.data_len)
    }

    /// A login response's status class and detail (bytes 36 and 37).
    pub fn login_status(&self) -> (u8, u8) {
        ((self.word36 >> 24) as u8, (self.word36 >> 16) as u8)
    }

    /// An Asynchronous Message's event (byte 36).
    pub fn async_event(&self) -> u8 {
        (self.word36 >> 24) as u8
    }

    /// Whether ExpCmdSN/MaxCmdSN are meaningful in this PDU.
    pub fn carries_window(&self) -> bool {
        matches!(
            self.opcode,
            op::NOP_IN | op::SCSI_RESP | op::LOGIN_RESP | op::DATA_IN | op::LOGOUT_RESP | op::R2T | op::ASYNC
        )
    }
}

/// The BHS at the start of `head` parsed, with the whole PDU's length; a
/// data segment longer than `max_data` (what headroom declared it
/// receives) is garbage.
pub fn frame(head: &[u8], max_data: usize) -> Result<(Header, usize), WireError> {
    let b: &[u8; BHS] = head
        .get(..BHS)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| WireError("a PDU shorter than its header".into()))?;
    let h = Header::parse(b)?;
    if h.data_len > max_data {
        return Err(WireError(format!(
            "a PDU (opcode 0x{:02x}) carries {} bytes, more than the {max_data} headroom declared it receives",
            h.opcode, h.data_len
        )));
    }
    Ok((h, BHS + h.rest_len()))
}

/// `n` rounded up to a multiple of 4.
pub fn pad4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// Serial number arithmetic (RFC 1982, 32 bits): whether `a` comes after `b`.
pub fn sn_gt(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 0x8000_0000
}

/// A BHS to send; fields not named stay zero.
pub struct Out {
    /// The 48 bytes.
    pub bhs: [u8; BHS],
}

impl Out {
    /// A BHS with `opcode` ([`IMMEDIATE`] added for immediate delivery) and byte-1 `flags`.
    pub fn new(opcode: u8, immediate: bool, flags: u8) -> Out {
        let mut bhs = [0u8; BHS];
        bhs[0] = opcode | if immediate { IMMEDIATE } else { 0 };
        bhs[1] = flags;
        Out { bhs }
    }
    /// Sets the data segment length.
    pub fn data_len(mut self, n: usize) -> Out {
        debug_assert!(n < 1 << 24);
        self.bhs[5] = (n >> 16) as u8;
        self.bhs[6] = (n >> 8) as u8;
        self.bhs[7] = n as u8;
        self
    }
    /// Sets bytes 8-15.
    pub fn lun(mut self, lun: [u8; 8]) -> Out {
        self.bhs[8..16].copy_from_slice(&lun);
        self
    }
    /// Sets the 32-bit word at byte `at`.
    pub fn word(mut self, at: usize, v: u32) -> Out {
        self.bhs[at..at + 4].copy_from_slice(&v.to_be_bytes());
        self
    }
    /// Sets the 16-byte CDB (SCSI Command).
    pub fn cdb(mut self, cdb: &[u8; 16]) -> Out {
        self.bhs[32..48].copy_from_slice(cdb);
        self
    }
}

/// The 8-byte LUN field for `lun`: peripheral addressing below 256, flat
/// addressing above (SAM-5 4.7), as Linux and libiscsi encode it.
pub fn encode_lun(lun: u16) -> [u8; 8] {
    let mut b = [0u8; 8];
    if lun < 256 {
        b[1] = lun as u8;
    } else {
        b[0] = 0x40 | ((lun >> 8) as u8 & 0x3f);
        b[1] = lun as u8;
    }
    b
}

/// The LUN number in an 8-byte LUN field (peripheral or flat addressing).
pub fn decode_lun(b: &[u8]) -> Option<u16> {
    match b.first()? >> 6 {
        0 | 1 => Some((u16::from(b[0] & 0x3f) << 8) | u16::from(*b.get(1)?)),
        _ => None,
    }
}

/// Login text: `key=value` pairs, each ended by a NUL (RFC 7143 6.1).
pub fn parse_text(data: &[u8]) -> Result<Vec<(String, String)>, WireError> {
    let mut pairs = Vec::new();
    for item in data.split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let item = std::str::from_utf8(item).map_err(|_| WireError("login text is not UTF-8".into()))?;
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| WireError(format!("login text item '{}' has no '='", item.escape_debug())))?;
        pairs.push((k.to_string(), v.to_string()));
    }
    Ok(pairs)
}

/// `pairs` as login text.
pub fn build_text(pairs: &[(&str, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        out.extend_from_slice(k.as_bytes());
        out.push(b'=');
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}

/// A numeric key value (decimal or 0x hex, RFC 7143 6.1); None for
/// anything else (Irrelevant, Reject, NotUnderstood).
pub fn number(v: &str) -> Option<u64> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// A binary value in hex (`0x...`) form (CHAP challenges).
pub fn hex_value(v: &str) -> Result<Vec<u8>, WireError> {
    let hex = v
        .strip_prefix("0x")
        .or_else(|| v.strip_prefix("0X"))
        .ok_or_else(|| WireError(format!("'{v}' is not a hex value (0x...); base64 (0b...) is not supported")))?;
    if hex.len() % 2 != 0 || hex.len() > 2048 {
        return Err(WireError(format!("hex value of odd or excessive length ({} digits)", hex.len())));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| WireError(format!("'{v}' is not hex"))))
        .collect()
}

/// The login status class and detail as words (RFC 7143 11.13.5).
pub fn login_status(class: u8, detail: u8) -> &'static str {
    match (class, detail) {
        (1, _) => "the target moved (redirection, not followed)",
        (2, 0) => "initiator error",
        (2, 1) => "authentication failed",
        (2, 2) => "authorization failed (this initiator may not use the target)",
        (2, 3) => "no such target",
        (2, 4) => "the target was removed",
        (2, 5) => "unsupported iSCSI version",
        (2, 6) => "too many connections",
        (2, 7) => "missing parameter",
        (2, 8) => "cannot include in session",
        (2, 9) => "session type not supported",
        (2, 10) => "session does not exist",
        (2, 11) => "invalid request during login",
        (3, 0) => "target error",
        (3, 1) => "service unavailable",
        (3, 2) => "out of resources",
        _ => "unknown login failure",
    }
}

/// The CHAP response MD5(id || secret || challenge) (RFC 1994 4.1), as `0x` hex.
pub fn chap_response(id: u8, secret: &[u8], challenge: &[u8]) -> String {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    h.update([id]);
    h.update(secret);
    h.update(challenge);
    let digest = h.finalize();
    let mut out = String::from("0x");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iscsi::scsi::{describe_status, parse_sense, Sense};

    #[test]
    fn a_header_is_parsed() {
        let mut b = [0u8; BHS];
        b[0] = 0x25;
        b[1] = 0x81;
        b[4] = 1;
        b[5..8].copy_from_slice(&[0x00, 0x20, 0x00]);
        b[16..20].copy_from_slice(&7u32.to_be_bytes());
        b[40..44].copy_from_slice(&8192u32.to_be_bytes());
        let h = Header::parse(&b).unwrap();
        assert_eq!((h.opcode, h.flags, h.ahs_len, h.data_len, h.itt, h.word40), (0x25, 0x81, 4, 8192, 7, 8192));
        assert_eq!(h.rest_len(), 4 + 8192);
        // 24 bits cannot say more than 16 MiB - 1; the session refuses what
        // exceeds the MaxRecvDataSegmentLength it declared (pdu::frame).
        b[5] = 0xff;
        assert_eq!(Header::parse(&b).unwrap().data_len, 0xff2000);
        b[5] = 0;
        b[7] = 3;
        assert_eq!(Header::parse(&b).unwrap().rest_len(), 4 + 0x2004);
    }

    #[test]
    fn random_headers_never_panic() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            let mut b = [0u8; BHS];
            for byte in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *byte = x as u8;
            }
            if let Ok(h) = Header::parse(&b) {
                assert!(h.data_len <= MAX_SEGMENT && h.ahs_len <= 1020);
            }
            let _ = parse_text(&b);
            let _ = parse_sense(&b[..(x as usize % BHS)]);
            let _ = decode_lun(&b[..(x as usize % 3)]);
        }
    }

    #[test]
    fn serial_numbers_wrap() {
        assert!(sn_gt(1, 0) && sn_gt(0, u32::MAX) && !sn_gt(5, 5) && !sn_gt(0, 1));
    }

    #[test]
    fn login_text_round_trips_and_garbage_is_an_error() {
        let t = build_text(&[("HeaderDigest", "None".into()), ("MaxBurstLength", "262144".into())]);
        assert_eq!(t, b"HeaderDigest=None\0MaxBurstLength=262144\0");
        let p = parse_text(&t).unwrap();
        assert_eq!(p[1], ("MaxBurstLength".to_string(), "262144".to_string()));
        assert!(parse_text(b"NoEquals\0").is_err());
        assert!(parse_text(&[0xff, b'=', 0]).is_err());
        assert_eq!((number("0x10"), number("65536"), number("Irrelevant")), (Some(16), Some(65536), None));
        assert_eq!(hex_value("0xa0ff").unwrap(), vec![0xa0, 0xff]);
        assert!(hex_value("0bAAAA").is_err() && hex_value("0xabc").is_err() && hex_value("0xzz").is_err());
    }

    #[test]
    fn luns_are_encoded_like_linux() {
        assert_eq!(encode_lun(1), [0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encode_lun(300), [0x41, 0x2c, 0, 0, 0, 0, 0, 0]);
        for lun in [0, 1, 255, 256, 300, 16383] {
            assert_eq!(decode_lun(&encode_lun(lun)), Some(lun));
        }
    }

    #[test]
    fn sense_data_reads_as_words() {
        let mut fixed = [0u8; 18];
        fixed[0] = 0x70;
        fixed[2] = 0x05;
        fixed[12] = 0x25;
        assert_eq!(
            describe_status(2, &fixed),
            "SCSI status CHECK CONDITION: ILLEGAL REQUEST, logical unit not supported (ASC/ASCQ 0x25/0x00)"
        );
        assert_eq!(parse_sense(&[0x72, 0x06, 0x29, 0x00]), Some(Sense { key: 6, asc: 0x29, ascq: 0 }));
        assert_eq!(describe_status(0x08, &[]), "SCSI status BUSY");
        assert_eq!(parse_sense(&[0x70, 0, 5]), None);
    }

    #[test]
    fn chap_matches_rfc1994_md5() {
        // MD5 of 0x01 || "secret" || 0x0102: computed independently with
        // `printf '\x01secret\x01\x02' | md5sum`.
        assert_eq!(chap_response(1, b"secret", &[1, 2]), CHAP_EXPECTED);
    }

    const CHAP_EXPECTED: &str = "0x18c6ee42cdcc2258144945ad28cad5a2";
}
