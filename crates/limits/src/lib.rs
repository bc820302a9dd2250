//! The limits model: what each link and bus can carry, and what protocols
//! leave of it. Pure arithmetic, no I/O, so every figure is unit-tested
//! against published numbers (docs/reference/links.md).
//!
//! - [`mod@catalog`]: link technologies (Ethernet, Fibre Channel, SATA, SAS, PCIe,
//!   USB/Thunderbolt, InfiniBand) with the aliases users type, their signalling
//!   rate, line encoding and usable data rate.
//! - [`fcoe`]: what Fibre Channel over Ethernet leaves of a 10 GbE-and-faster link.
//! - [`framing`]: Ethernet frame overhead: TCP, UDP and iSCSI goodput per MTU,
//!   VLAN tags and IP version; serialization delay of a frame.
//! - [`shaper`]: what a Linux `tbf` shaper lets through, for the test lab.
//! - [`protocol`]: what NFS, iSCSI, NBD and SMB headers leave of a TCP stream.
//! - [`switching`]: one frame's delay across switches, store-and-forward or cut-through.
//!
//! Knows nothing of measurements, probes or output.

pub mod catalog;
pub mod fcoe;
pub mod framing;
pub mod protocol;
pub mod shaper;
pub mod switching;

pub use catalog::{catalog, ethernet_by_speed_mbps, lookup, pcie_link, Family, Link, UnknownLink};
pub use framing::{Framing, FramingError, FramingSetting, IpVersion};
pub use shaper::{tbf_rate_emulating, tbf_tcp_goodput_bits};
