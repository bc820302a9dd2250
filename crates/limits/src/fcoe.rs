//! Fibre Channel over Ethernet (FC-BB-5): whole FC frames carried in
//! Ethernet frames, so a storage stream's goodput over Ethernet without IP
//! or TCP. Pure arithmetic from the frame layout; nothing measured.
//!
//! One full FCoE frame: Ethernet header 14, the 802.1Q tag FCoE always
//! carries (its priority is what Data Center Bridging keeps lossless) 4,
//! FCoE header 14 (version, reserved, start-of-frame), FC header 24, FC's
//! largest data field 2112, FC CRC 4, FCoE trailer 4 (end-of-frame,
//! reserved), Ethernet FCS 4 = 2180 bytes: a "baby jumbo" frame, larger than
//! a 1500-byte MTU allows, so every port on the path must take it. On the
//! wire, preamble and inter-frame gap add 20.

use serde::Serialize;

/// The largest FC data field: the payload of one FCoE frame.
pub const FC_PAYLOAD: u32 = 2112;
/// One full FCoE frame, Ethernet header (with its 802.1Q tag) to FCS.
pub const FRAME_BYTES: u32 = 14 + 4 + 14 + 24 + FC_PAYLOAD + 4 + 4 + 4;
/// The same frame on the wire, with preamble, start delimiter and inter-frame gap.
pub const WIRE_BYTES: u32 = FRAME_BYTES + 8 + 12;
/// The Ethernet payload one FCoE frame needs (FCoE header to trailer): the
/// smallest maximum frame payload ("MTU") every port on the path must accept.
pub const ETHERNET_PAYLOAD: u32 = 14 + 24 + FC_PAYLOAD + 4 + 4;
/// FC-BB-5 maps FCoE onto 10 Gb/s Ethernet and faster.
pub const SLOWEST_ETHERNET_BITS: f64 = 10e9;

/// What FCoE leaves of an Ethernet link's data rate, per direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FcoeCeiling {
    /// FC data bytes per frame.
    pub payload_bytes_per_frame: u32,
    /// Bytes each frame takes on the wire.
    pub wire_bytes_per_frame: u32,
    /// The Ethernet payload every port must accept.
    pub ethernet_payload_bytes: u32,
    /// FC data per second, bits.
    pub goodput_bits_per_sec: f64,
}

/// FCoE's ceiling over an Ethernet link of `usable_bits` (its MAC data
/// rate), or None below the 10 Gb/s FCoE is defined for.
pub fn ceiling(usable_bits: f64) -> Option<FcoeCeiling> {
    (usable_bits >= SLOWEST_ETHERNET_BITS).then(|| FcoeCeiling {
        payload_bytes_per_frame: FC_PAYLOAD,
        wire_bytes_per_frame: WIRE_BYTES,
        ethernet_payload_bytes: ETHERNET_PAYLOAD,
        goodput_bits_per_sec: usable_bits * f64::from(FC_PAYLOAD) / f64::from(WIRE_BYTES),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_frame_is_a_baby_jumbo_and_leaves_96_percent() {
        // FC-BB-5's frame: 2180 bytes with the VLAN tag, 2158 of Ethernet payload.
        assert_eq!((FRAME_BYTES, ETHERNET_PAYLOAD, WIRE_BYTES), (2180, 2158, 2200));
        let ten = ceiling(10e9).unwrap();
        assert!((ten.goodput_bits_per_sec - 9.6e9).abs() < 1.0, "{}", ten.goodput_bits_per_sec);
        assert!((ceiling(100e9).unwrap().goodput_bits_per_sec - 96e9).abs() < 10.0);
    }

    #[test]
    fn gigabit_ethernet_carries_no_fcoe() {
        assert_eq!(ceiling(1e9), None);
        assert_eq!(ceiling(2.5e9), None);
    }
}
