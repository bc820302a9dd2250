//! The verdict's vocabulary as types: the hops of a path, the bottleneck, the
//! rule that decided, which end a limit sits on, and the per-direction verdict
//! itself. Every enum serialises to the lowercase word documents have always
//! carried (`"bus"`, `"link"`, `"R4"`), so stored documents load unchanged.
//!
//! Owns the words and the shape; the rules that choose them live in
//! `headroom-analysis` (verdict), the sentences in `headroom-report`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Implements `as_str`, `Display` and comparison with the word itself
/// (`hop == "link"`) for a unit enum whose serde names are those words.
macro_rules! words {
    ($ty:ident { $($variant:ident => $word:literal),+ $(,)? }) => {
        impl $ty {
            /// The word written in documents.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $word,)+
                }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
        impl PartialEq<str> for $ty {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }
    };
}

/// A hop of the path, in the order data flows: disk -> bus -> NIC -> link ->
/// protocol -> client, with the CPU beside the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Hop {
    /// The storage device itself (`"disk"`).
    Disk,
    /// The bus a disk or NIC hangs off: PCIe, SATA, USB (`"bus"`).
    Bus,
    /// The network interface, including its slot (`"nic"`).
    Nic,
    /// The network link at its speed and MTU (`"link"`).
    Link,
    /// The storage or transfer protocol above the link: NFS, SMB, iSCSI, TCP (`"protocol"`).
    Protocol,
    /// What a client of a network filesystem gets (a disk probe on NFS/SMB/iSCSI).
    Client,
    /// A processor, on either end (`"cpu"`).
    Cpu,
}

words!(Hop { Disk => "disk", Bus => "bus", Nic => "nic", Link => "link", Protocol => "protocol", Client => "client", Cpu => "cpu" });

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Data flows from the storage to the client (`"read"`).
    Read,
    /// Data flows from the client to the storage (`"write"`).
    Write,
}

words!(Direction { Read => "read", Write => "write" });

impl Direction {
    /// "reads" / "writes", the subject of a verdict sentence.
    pub fn plural(self) -> &'static str {
        match self {
            Direction::Read => "reads",
            Direction::Write => "writes",
        }
    }
}

/// What limits a direction: a hop, or a finding that names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Bottleneck {
    /// The disk itself (`"disk"`).
    Disk,
    /// The disk's bus, or the NIC's slot (the limiting hop says which).
    Bus,
    /// The network link (`"link"`).
    Link,
    /// The storage protocol (`"protocol"`).
    Protocol,
    /// A CPU on either end (`"cpu"`).
    Cpu,
    /// Faster than a ceiling allows: a cache, compression or a wrong ceiling.
    Cache,
    /// Disk and network within the noise of each other: no single bottleneck.
    Level,
    /// Slower than every hop's ceiling with no reason found (`"unexplained"`).
    Unexplained,
}

words!(Bottleneck {
    Disk => "disk", Bus => "bus", Link => "link", Protocol => "protocol", Cpu => "cpu",
    Cache => "cache", Level => "level", Unexplained => "unexplained",
});

/// The rules of docs/verdict.md, by their ids there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Rule {
    /// Faster than a ceiling: a cache.
    R1,
    /// The disk fills its bus.
    R2,
    /// The disk itself.
    R3,
    /// The link, or the NIC's slot, is full.
    R4,
    /// A CPU.
    R5,
    /// Loopback: memory copies.
    R6,
    /// The storage protocol.
    R7,
    /// Unexplained.
    R8,
    /// Disk and network level.
    R9,
}

words!(Rule { R1 => "R1", R2 => "R2", R3 => "R3", R4 => "R4", R5 => "R5", R6 => "R6", R7 => "R7", R8 => "R8", R9 => "R9" });

/// Which end of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The machine that ran the client (`headroom net`, `headroom run`).
    Local,
    /// The server (`headroom serve`, iperf3 -s).
    Remote,
}

words!(Side { Local => "local", Remote => "remote" });

impl Side {
    /// "this machine" / "the server".
    pub fn owner(self) -> &'static str {
        match self {
            Side::Local => "this machine",
            Side::Remote => "the server",
        }
    }
    /// "this machine's" / "the server's".
    pub fn possessive(self) -> &'static str {
        match self {
            Side::Local => "this machine's",
            Side::Remote => "the server's",
        }
    }
}

/// One hop of the chain with what could pass and what did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HopFigure {
    /// The hop this row describes.
    pub hop: Hop,
    /// What it is: `vda`, `PCIe 3.0 x4 of nvme0n1`, `1GbE TCP (MTU 1500)`.
    pub name: String,
    /// The most the hop can carry, bytes/s; absent when headroom could not learn it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_bytes_per_sec: Option<f64>,
    /// What a probe measured through this hop, bytes/s; absent when no probe covered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_bytes_per_sec: Option<f64>,
    /// The probe that measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// The hostname of the machine the hop is on when it is the far end
    /// (the server's disk, bus and CPU); absent: this machine, or the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// The verdict for one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DirectionVerdict {
    /// Reads or writes.
    pub direction: Direction,
    /// The chain of hops for this direction, in the order data flows.
    pub hops: Vec<HopFigure>,
    /// What the path delivers end to end, bytes/s.
    pub figure_bytes_per_sec: f64,
    /// The limiting hop as one word.
    pub bottleneck: Bottleneck,
    /// The rule of docs/verdict.md that decided.
    pub rule: Rule,
    /// The figure as a percentage of the bottleneck's ceiling (100: at the
    /// ceiling), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_of_ceiling: Option<f64>,
    /// One sentence: what limits, and by how much.
    pub explanation: String,
    /// What lifting the bottleneck would give ("a 10GbE link would raise reads up to 4.9x").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<String>,
    /// Upper bound of the gain from lifting the bottleneck, as a factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_factor: Option<f64>,
    /// What to look at, for unexplained and suspicious results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// The hop of the chain that limits (the NIC for a narrow slot, where the
    /// bottleneck says `bus`); none for cache, level and unexplained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limiting_hop: Option<Hop>,
    /// The end the limit sits on, when it is one end's (its disk, its CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<Side>,
}

impl DirectionVerdict {
    /// The hop that limits. Documents written before `limiting_hop` existed
    /// say it only through the bottleneck and the rule (R4's `bus` is the NIC's slot).
    pub fn limiting(&self) -> Option<Hop> {
        self.limiting_hop.or(match (self.bottleneck, self.rule) {
            (Bottleneck::Disk, _) => Some(Hop::Disk),
            (Bottleneck::Bus, Rule::R4) => Some(Hop::Nic),
            (Bottleneck::Bus, _) => Some(Hop::Bus),
            (Bottleneck::Link, _) => Some(Hop::Link),
            (Bottleneck::Protocol, _) => Some(Hop::Protocol),
            (Bottleneck::Cpu, _) => Some(Hop::Cpu),
            (Bottleneck::Cache | Bottleneck::Level | Bottleneck::Unexplained, _) => None,
        })
    }
}

/// Which hop limits the path, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// The reads' bottleneck (the writes' when only writes ran).
    pub bottleneck: Bottleneck,
    /// Every direction's explanation and headroom sentence, joined in one paragraph.
    pub explanation: String,
    /// Per-direction detail (read, write), when analysis produced it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<DirectionVerdict>,
}
