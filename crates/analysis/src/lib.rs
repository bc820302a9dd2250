//! Analysis: turns result documents into meaning — ceilings per hop, the
//! bottleneck verdict, comparisons between runs, and detectors over per-second
//! samples (write cliffs, periodic dips, latency drift, link flaps).
//!
//! Reads only the result document (headroom-result) and the limits model;
//! never runs I/O and never prints.

mod ceilings;
mod cliff;
mod compare;
mod cpu_limits;
mod cpu_link;
pub mod detect;
mod goals;
mod iscsi_data_out;
mod link_share;
mod per_second;
mod setting;
mod spec_diff;
mod verdict;
mod write_cache;

pub use ceilings::{
    bus_ceiling, choose_nic, device_for_path, is_virtual_disk, peer_device_for_path, virtual_disk_warning, BadLinkSpec,
    FarEnd, LinkCeiling, LinkSpec, LinkTarget, PathHints, PathModel,
};
pub use cliff::{annotate_write_cliff, detect_write_cliff, detect_write_decline, WriteCliff, WriteDecline};
pub use compare::{
    compare, mann_whitney_u, Cell, CompareError, Comparison, Figure, Row, Significance, ALPHA, MIN_SAMPLES,
    SIGNIFICANCE_TEST,
};
pub use cpu_limits::{cpu_limit, cpu_limit_named, settle_diagnosis, CpuLimit, CpuLimitKind, Side, CPU_BUSY_PERCENT};
pub use cpu_link::{cpu_document, cpu_probe_against_link, fills_link, share_of_link};
pub use goals::{evaluate, parse_goals, Goal, GoalError, GoalResult, Metric};
pub use iscsi_data_out::{iscsi_data_out_warning, write_shape, WriteShape, SMALL_DATA_OUT};
pub use link_share::{faster_than_ceiling, net_probe_against_link, CEILING_SHARE};
pub use per_second::per_second;
pub use setting::Setting;
pub use spec_diff::{differing_settings, SettingDiff};
pub use verdict::{
    analyse, annotate, verdict_source, Analysis, Bottleneck, Direction, DirectionVerdict, VerdictSource,
};
pub use write_cache::{
    annotate_writes_outran_reads, past_the_write_cache, writes_outran_reads, writes_outran_reads_warnings,
    WRITES_OUTRAN_READS,
};
