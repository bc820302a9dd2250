//! headroom-job: the main job and the wiring the commands share.
//!
//! What it owns:
//! - the plan of `headroom run` for each preset (which disk, network and CPU
//!   probes it runs, and why those) and its execution on the Runner, up to
//!   the measured document ([`main_job`]);
//! - the live lookups that join this machine's inventory to the ceilings of
//!   `headroom-analysis`: the bus under a path, the link towards a server
//!   ([`path`]);
//! - the post-processing every command applies to measured probes: the
//!   write-cliff check, the share of the link, the CPU kernel against the
//!   link ([`post`]);
//! - the jobs of the single commands, from settings to the document:
//!   `disk` ([`disk`]), whose measuring loop the main job's disk steps share,
//!   and `net` ([`net`]);
//! - the far end: the disk and CPU probes `headroom serve` runs for clients,
//!   confined to its `--allow-path` directories ([`ServedProbes`]).
//!
//! What it must not do: print, draw progress bars or parse command lines.
//! Progress reaches the caller through the [`headroom_runner::Sink`]s it
//! hands in; Ctrl-C through the stop flag.

pub mod disk;
mod far_end;
mod main_job;
pub mod net;
mod path;
mod post;
mod spelling;
mod steps;

pub use disk::disk_spec;
pub use far_end::{parse_allowed_net, ProbeCaps, ServeSetting, ServeSettingError, ServedProbes};
pub use main_job::{
    cpu_hop_plan, disk_plan_of_preset, judge, main_job, net_plan_of_preset, JobError, JobSettings, Preset,
    RUN_CONNECT_TIMEOUT,
};
pub use path::{disk_under, interface_towards, link_towards, link_towards_from, DiskUnder};
pub use post::{cpu_probe_with_link, with_write_checks};
pub use spelling::Spelling;
pub use steps::{hold_goals, StepSinks};
