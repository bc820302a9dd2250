//! headroom-fleet: one probe on many agents, one document.
//!
//! `headroom fleet --hosts ... disk PATH` hands the same plan of probe
//! requests to every agent (a `headroom serve` with the token, and for disk
//! probes an `--allow-path` covering PATH), starts them together and gathers
//! what they measured:
//! - [`hosts`]: the `--hosts` list or file checked before anything starts
//!   (syntax, duplicates, names that do not resolve: one line, exit 2);
//! - [`run`]: a bounded pool of workers ([`MAX_WORKERS`]) drives the agents
//!   through the far end's engine ([`headroom_net::RemoteEngine`]): clocks
//!   compared, plans prepared, every test released to all agents together,
//!   a host that fails dropped from the rest of the run with its reason;
//! - [`gather`]: the hosts' probes and, per test, the sum, merged latency
//!   histograms, the spread and per-second aggregate samples
//!   ([`headroom_result::Fleet`]);
//! - [`judge`]: each host's own verdict, and the goals held against the
//!   sums or against every host.
//!
//! What it must not do: know any engine's parameters (it forwards requests),
//! print, or run probes itself.

pub mod gather;
pub mod hosts;
pub mod judge;
mod os;
pub mod run;

pub use gather::gather;
pub use hosts::{parse_hosts, resolve_all, HostsError, Setting};
pub use run::{ensure_file_limit, run_fleet, FleetEvent, HostOutcome, MAX_WORKERS};
