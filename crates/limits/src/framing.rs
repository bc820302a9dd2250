//! Ethernet framing: how much of a link's data rate is payload for TCP, UDP
//! and iSCSI, and how long a frame takes to serialise.
//!
//! On the wire, outside the MTU: preamble+SFD 8, Ethernet header 14, FCS 4,
//! inter-frame gap 12 = 38 bytes, plus 4 per 802.1Q tag. Inside the MTU: the
//! IP header (20 v4 / 40 v6) and TCP (20, +12 with timestamps) or UDP (8).

use serde::Serialize;

/// Bytes every frame costs on the wire beyond its MTU-sized packet.
pub const WIRE_OVERHEAD: u32 = 38;
/// Ethernet header + FCS: what a frame carries beyond its packet.
pub const FRAME_OVERHEAD: u32 = 18;
/// One 802.1Q tag.
pub const VLAN_TAG: u32 = 4;
/// iSCSI Basic Header Segment per PDU.
pub const ISCSI_BHS: u32 = 48;
/// The MTUs headroom accepts, bytes: IPv4's minimum to the largest jumbo frames switches take.
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 576..=9216;
/// RFC 7143: MaxRecvDataSegmentLength is 512 to 2^24 - 1.
pub const ISCSI_SEGMENT_RANGE: std::ops::RangeInclusive<u32> = 512..=16_777_215;

/// The IP version of the packets, which sets the header size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IpVersion {
    /// IPv4 (`"v4"`), 20-byte header.
    V4,
    /// IPv6 (`"v6"`), 40-byte header.
    V6,
}

impl IpVersion {
    /// The IP header without options, bytes.
    pub fn header_bytes(self) -> u32 {
        match self {
            IpVersion::V4 => 20,
            IpVersion::V6 => 40,
        }
    }
}

/// A framing choice that cannot exist. Its line names the setting
/// ([`FramingSetting`]); the front end spells it ([`FramingError::spelled`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FramingError {
    /// The MTU outside [`MTU_RANGE`].
    Mtu(u32),
    /// 802.1Q tags other than 0, 1 or 2.
    VlanTags(u32),
    /// The iSCSI segment outside [`ISCSI_SEGMENT_RANGE`].
    IscsiSegment(u32),
}

impl std::fmt::Display for FramingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.spelled(FramingSetting::name))
    }
}

impl std::error::Error for FramingError {}

/// What a [`Framing`] is set by, as a [`FramingError`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingSetting {
    /// [`Framing::mtu`].
    Mtu,
    /// [`Framing::vlan_tags`].
    VlanTags,
    /// [`Framing::iscsi_segment`].
    IscsiSegment,
}

impl FramingSetting {
    /// The setting's own name, for a front end that gives none.
    pub fn name(self) -> &'static str {
        match self {
            FramingSetting::Mtu => "MTU",
            FramingSetting::VlanTags => "VLAN tags",
            FramingSetting::IscsiSegment => "iSCSI segment",
        }
    }
}

impl FramingError {
    /// The setting refused.
    pub fn setting(&self) -> FramingSetting {
        match self {
            FramingError::Mtu(_) => FramingSetting::Mtu,
            FramingError::VlanTags(_) => FramingSetting::VlanTags,
            FramingError::IscsiSegment(_) => FramingSetting::IscsiSegment,
        }
    }

    /// The line with the setting written as `spell` names it (the front
    /// end's flag). This crate imports no other, so it words the line itself
    /// rather than through headroom-units' `Message`.
    pub fn spelled<'a>(&self, spell: impl Fn(FramingSetting) -> &'a str) -> String {
        let name = spell(self.setting());
        match self {
            FramingError::Mtu(mtu) => {
                format!("{name} {mtu} is out of range: Ethernet MTUs run from 576 to 9216 (e.g. 1500 or 9000)")
            }
            FramingError::VlanTags(tags) => format!("{name} {tags} is out of range: 0, 1 (802.1Q) or 2 (QinQ)"),
            FramingError::IscsiSegment(bytes) => format!(
                "{name} {bytes} is out of range: MaxRecvDataSegmentLength runs from 512 to 16777215 bytes (default 8192)"
            ),
        }
    }
}

/// How packets are framed on an Ethernet link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Framing {
    /// IP MTU, bytes (the packet, without Ethernet header and FCS).
    pub mtu: u32,
    /// IPv4 or IPv6.
    pub ip: IpVersion,
    /// Whether TCP carries the timestamps option (12 bytes per segment, Linux's default).
    pub tcp_timestamps: bool,
    /// 802.1Q tags per frame: 0, 1, or 2 (QinQ), 4 bytes each.
    pub vlan_tags: u32,
    /// iSCSI MaxRecvDataSegmentLength, bytes of data per PDU.
    pub iscsi_segment: u32,
}

impl Default for Framing {
    /// MTU 1500, IPv4, TCP timestamps on (Linux's default), no VLAN tag, iSCSI 8192.
    fn default() -> Self {
        Framing { mtu: 1500, ip: IpVersion::V4, tcp_timestamps: true, vlan_tags: 0, iscsi_segment: 8192 }
    }
}

impl Framing {
    /// Checks every field against what real networks allow.
    pub fn validate(&self) -> Result<(), FramingError> {
        if !MTU_RANGE.contains(&self.mtu) {
            return Err(FramingError::Mtu(self.mtu));
        }
        if self.vlan_tags > 2 {
            return Err(FramingError::VlanTags(self.vlan_tags));
        }
        if !ISCSI_SEGMENT_RANGE.contains(&self.iscsi_segment) {
            return Err(FramingError::IscsiSegment(self.iscsi_segment));
        }
        Ok(())
    }

    /// Bytes one full frame occupies on the wire, preamble and gap included.
    pub fn wire_bytes(&self) -> u32 {
        self.mtu + WIRE_OVERHEAD + VLAN_TAG * self.vlan_tags
    }

    /// Bytes of one full frame from destination MAC to FCS.
    pub fn frame_bytes(&self) -> u32 {
        self.mtu + FRAME_OVERHEAD + VLAN_TAG * self.vlan_tags
    }

    /// TCP payload in one full-MTU segment.
    pub fn tcp_payload(&self) -> u32 {
        self.mtu - self.ip.header_bytes() - 20 - if self.tcp_timestamps { 12 } else { 0 }
    }

    /// UDP payload in one unfragmented datagram.
    pub fn udp_payload(&self) -> u32 {
        self.mtu - self.ip.header_bytes() - 8
    }

    /// TCP goodput on a link whose MAC data rate is `usable_bits`.
    pub fn tcp_goodput_bits(&self, usable_bits: f64) -> f64 {
        usable_bits * f64::from(self.tcp_payload()) / f64::from(self.wire_bytes())
    }

    /// UDP goodput on a link whose MAC data rate is `usable_bits`.
    pub fn udp_goodput_bits(&self, usable_bits: f64) -> f64 {
        usable_bits * f64::from(self.udp_payload()) / f64::from(self.wire_bytes())
    }

    /// iSCSI data goodput: TCP goodput less one 48-byte BHS per data segment.
    pub fn iscsi_goodput_bits(&self, usable_bits: f64) -> f64 {
        let seg = f64::from(self.iscsi_segment);
        self.tcp_goodput_bits(usable_bits) * seg / (seg + f64::from(ISCSI_BHS))
    }

    /// Seconds to clock one full frame (header to FCS) onto a link of
    /// `usable_bits`: the delay a store-and-forward switch adds per hop.
    pub fn frame_serialization_s(&self, usable_bits: f64) -> f64 {
        f64::from(self.frame_bytes()) * 8.0 / usable_bits
    }

    /// Seconds one full frame holds the wire, preamble and inter-frame gap included.
    pub fn wire_slot_s(&self, usable_bits: f64) -> f64 {
        f64::from(self.wire_bytes()) * 8.0 / usable_bits
    }
}
