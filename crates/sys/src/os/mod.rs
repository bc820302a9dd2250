//! The platform seam of headroom-sys: one module per thing this crate asks
//! of the operating system, each implemented once per platform beside this
//! file (`linux/`, `windows.rs`). The rest of the crate (lib.rs) reaches the machine
//! only through these names, so a port adds `windows/` exporting the same
//! modules with the same functions and types, and no `cfg` line appears
//! elsewhere. See docs/platform.md for the table of concerns.
//!
//! The concerns and what each must provide:
//! - `cpu`: `cpu`, `memory_bytes`, `hostname`, `kernel`, `os` (the inventory's
//!   processor and names);
//! - `cpu_load`: `CpuSnapshot` (per core, per thread, the cgroup's quota),
//!   `CgroupCounters` (a CPU limit's counters, `path` and `since`);
//! - `cgroup`: where this process's limits live (used by `cpu_load`, `io_limit`);
//! - `io_limit`: the block I/O limit on this process for a path;
//! - `nic`: `nics`, `effective_ceiling`;
//! - `block`: `block_devices`, `block_device_holding`;
//! - `mounts`: `filesystems`;
//! - `route`: `route_interface`, `route_interface_in`, `interface_with_address`;
//! - `serving`: the hooks of `crate::serving`'s watch: `pids_on_port`,
//!   `pids_named`, `process_ticks`, `thread_ticks` (with names),
//!   `thread_waits` (run-queue delay per thread, empty where unknown),
//!   `ticks_per_sec`, `cpus_allowed`, `limit_counters` (a
//!   `cpu_load::CgroupCounters`, the process's CPU limit);
//! - `secret_file`: `who_else_may_read` (the mode bits; the owner and DACL),
//!   judged by `crate::secret_file`.
//!
//! Must not hold logic that is the same on every platform: that stays in
//! lib.rs or in headroom-limits.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::{block, cpu, cpu_load, io_limit, mounts, nic, route, serving};
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{block, cpu, cpu_load, io_limit, mounts, nic, route, serving};

#[cfg(target_os = "linux")]
pub use linux::secret_file;
#[cfg(windows)]
pub use windows::secret_file;
