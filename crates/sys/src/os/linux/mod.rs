//! The Linux implementation of headroom-sys's platform seam: every concern
//! of `os/mod.rs` read from /proc, sysfs and the cgroup filesystem (plus
//! getifaddrs and one ethtool ioctl for what files do not show), always below
//! a [`crate::SysRoot`] so the fixture trees stand in for a machine.
//!
//! Owns the file layouts of those trees and nothing else: no limits model
//! beyond naming a link, no output, no writes.

pub mod block;
pub mod cgroup;
pub mod cpu;
pub mod cpu_load;
pub mod io_limit;
pub mod mounts;
pub mod nic;
pub mod route;
pub mod secret_file;
pub mod serving;
mod sysfs;
