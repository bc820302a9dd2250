//! The platform seam of headroom-fleet: the one limit a fleet may hit on
//! this machine (a connection held to every agent), implemented once per
//! platform beside this file (`linux.rs`, `windows.rs`; docs/platform.md).
//!
//! What a platform provides:
//! - `raise_open_file_limit(needed)`: makes room for `needed` open files
//!   and sockets, or returns the most this process may have.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
