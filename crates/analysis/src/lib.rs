//! Analysis: turns result documents into meaning — ceilings per hop, the
//! bottleneck verdict, comparisons between runs, and detectors over per-second
//! samples (write cliffs, periodic dips, latency drift, link flaps).
//!
//! Reads only the result document (headroom-result) and the limits model;
//! never runs I/O and never prints.

pub mod ceilings;
pub mod cliff;
pub mod compare;
pub mod cpu_limits;
pub mod cpu_link;
pub mod goals;
pub mod link_share;
pub mod verdict;

pub use ceilings::{PathHints, PathModel};
pub use verdict::{analyse, annotate, Analysis, Bottleneck, Direction, DirectionVerdict};
pub mod detect;
