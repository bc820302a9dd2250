//! The header at the front of every UDP test datagram, in each protocol's
//! format: iperf3's (send time, sequence number), iperf2's (id, send time,
//! the id's high word, then the client's settings) and headroom's (tag,
//! session key, sequence number, send time). Senders stamp it, receivers
//! parse it from untrusted bytes (the fuzzer feeds it too).

use crate::wire;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The header a UDP sender writes at the front of each datagram.
#[derive(Debug, Clone, Copy)]
pub enum UdpHeader {
    /// iperf3: sec u32, usec u32, sequence u32 or u64, all big-endian.
    Iperf3 {
        /// 64-bit sequence numbers (iperf3 `--udp-counters-64bit`).
        seq64: bool,
    },
    /// iperf 2.1: id's low word i32, sec u32, usec u32, id's high word,
    /// then the client's settings ([`crate::iperf2::udp_settings`]); a
    /// negative id ends the stream.
    Iperf2 {
        /// The settings every datagram carries.
        settings: [u8; crate::iperf2::UDP_SETTINGS_LEN],
    },
    /// headroom: tag, session key, sequence u64, send time ns u64.
    Headroom {
        /// The session key that proves the datagram belongs to the test.
        key: [u8; wire::KEY_LEN],
    },
}

impl UdpHeader {
    /// Header length in bytes.
    pub fn len(&self) -> usize {
        match self {
            UdpHeader::Iperf3 { seq64: false } => 12,
            UdpHeader::Iperf3 { seq64: true } => 16,
            UdpHeader::Iperf2 { .. } => crate::iperf2::UDP_HEADER_LEN,
            UdpHeader::Headroom { .. } => wire::UDP_HEADER_LEN,
        }
    }

    /// Never: every format has a header (clippy wants it next to `len`).
    pub fn is_empty(&self) -> bool {
        false
    }

    pub(crate) fn write(&self, buf: &mut [u8], seq: u64, now: Duration) {
        match *self {
            UdpHeader::Iperf3 { seq64 } => {
                buf[0..4].copy_from_slice(&(now.as_secs() as u32).to_be_bytes());
                buf[4..8].copy_from_slice(&now.subsec_micros().to_be_bytes());
                if seq64 {
                    buf[8..16].copy_from_slice(&seq.to_be_bytes());
                } else {
                    buf[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
                }
            }
            UdpHeader::Iperf2 { settings } => {
                buf[0..4].copy_from_slice(&(seq as u32).to_be_bytes());
                buf[4..8].copy_from_slice(&(now.as_secs() as u32).to_be_bytes());
                buf[8..12].copy_from_slice(&now.subsec_micros().to_be_bytes());
                buf[12..16].copy_from_slice(&((seq >> 32) as u32).to_be_bytes());
                buf[16..self.len()].copy_from_slice(&settings);
            }
            UdpHeader::Headroom { key } => {
                buf[0..4].copy_from_slice(wire::UDP_DATA_TAG);
                buf[4..20].copy_from_slice(&key);
                buf[20..28].copy_from_slice(&seq.to_be_bytes());
                buf[28..36].copy_from_slice(&(now.as_nanos() as u64).to_be_bytes());
            }
        }
    }

    /// Parses (sequence, send time in seconds) from a datagram in this format.
    pub fn parse(&self, buf: &[u8]) -> Option<(u64, f64)> {
        match *self {
            UdpHeader::Iperf3 { seq64 } => {
                if buf.len() < self.len() {
                    return None;
                }
                let sec = u32::from_be_bytes(buf[0..4].try_into().ok()?);
                let usec = u32::from_be_bytes(buf[4..8].try_into().ok()?);
                let seq = if seq64 {
                    u64::from_be_bytes(buf[8..16].try_into().ok()?)
                } else {
                    u64::from(u32::from_be_bytes(buf[8..12].try_into().ok()?))
                };
                Some((seq, f64::from(sec) + f64::from(usec) * 1e-6))
            }
            // The final datagram's negative id counts as its absolute value.
            UdpHeader::Iperf2 { .. } => {
                if buf.len() < self.len() {
                    return None;
                }
                let word = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
                let id = (u64::from(word(12)) << 32) | u64::from(word(0));
                Some((id.wrapping_neg().min(id), f64::from(word(4)) + f64::from(word(8)) * 1e-6))
            }
            UdpHeader::Headroom { .. } => {
                if buf.len() < wire::UDP_HEADER_LEN {
                    return None;
                }
                let seq = u64::from_be_bytes(buf[20..28].try_into().ok()?);
                let ns = u64::from_be_bytes(buf[28..36].try_into().ok()?);
                Some((seq, ns as f64 * 1e-9))
            }
        }
    }
}

/// Wall-clock time since the epoch: both ends stamp with it; only differences are used.
pub fn wall_now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}
