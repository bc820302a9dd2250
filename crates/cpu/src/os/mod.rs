//! The platform seam of headroom-cpu: what the kernel measurements ask of
//! the operating system, implemented once per platform beside this file
//! (`linux.rs`, `windows.rs`). The rest of the crate calls only `crate::os::...`, so
//! a port adds `windows.rs` with the same functions. See docs/platform.md.
//!
//! What a platform provides:
//! - affinity: `allowed_cpus` (the CPUs this process may run on) and
//!   `pin_to` (best effort: a refusal leaves the thread where it is);
//! - `thread_cpu_time`: CPU time of the calling thread;
//! - `cache_sizes`: the size text of each cache of CPU 0 ("32768K", "2M").

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
