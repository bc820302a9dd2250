//! What a Linux `tbf` shaper lets through, so the test lab knows the true
//! ceiling of a shaped veth (docs/reference/lab.md).
//!
//! tbf counts each frame from the MAC header on: the 14-byte Ethernet header
//! plus the IP packet, without FCS, preamble or inter-frame gap. So `tbf rate
//! 1gbit` at MTU 1500 yields TCP goodput 1e9 x 1448 / 1514 = 956.4 Mb/s, not
//! the 941.5 Mb/s of a real 1 GbE link.

use crate::Framing;

/// Ethernet header bytes tbf counts per frame.
pub const TBF_COUNTED_HEADER: u32 = 14;

/// TCP goodput through `tbf rate <rate_bits>` with this framing.
pub fn tbf_tcp_goodput_bits(rate_bits: f64, framing: &Framing) -> f64 {
    rate_bits * f64::from(framing.tcp_payload()) / f64::from(framing.mtu + TBF_COUNTED_HEADER)
}

/// The tbf rate that emulates a real Ethernet link of `link_bits` for TCP:
/// shape at R x (MTU + 14) / (MTU + 38).
pub fn tbf_rate_emulating(link_bits: f64, framing: &Framing) -> f64 {
    link_bits * f64::from(framing.mtu + TBF_COUNTED_HEADER) / f64::from(framing.wire_bytes())
}
