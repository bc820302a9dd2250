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
//! - `cpu_load`: `CpuSnapshot` (per core, per thread, the cgroup's quota);
//! - `cgroup`: where this process's limits live (used by `cpu_load`, `io_limit`);
//! - `io_limit`: the block I/O limit on this process for a path;
//! - `nic`: `nics`, `effective_ceiling`;
//! - `block`: `block_devices`, `block_device_holding`;
//! - `mounts`: `filesystems`;
//! - `route`: `route_interface`, `route_interface_in`, `interface_with_address`;
//! - `serving`: `ServingProcess`, `ServingQuery`, `ServingWatch`.
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

use serde::{Deserialize, Serialize};

/// How to find the processes serving a share here.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ServingQuery {
    /// The share's TCP port (445, 2049, 3260, 10809 or the URL's own).
    #[serde(default)]
    pub port: Option<u16>,
    /// Process names to fall back on when no process holds the port
    /// (`smbd`, `nfsd`, `ganesha.nfsd`, `tgtd`, `nbdkit`, ...).
    #[serde(default)]
    pub names: Vec<String>,
}

/// A process found serving, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingProcess {
    /// Process id.
    pub pid: u32,
    /// How it was found: "port 445" or "name".
    pub found_by: String,
}

/// Most names a query may carry (it comes from the network).
const MOST_NAMES: usize = 16;
/// A process name (comm) is at most 15 bytes.
const LONGEST_NAME: usize = 15;

impl ServingQuery {
    /// Refuses a query no file server's names fit (too many or too long
    /// names): it comes from a peer.
    pub fn check(&self) -> Result<(), String> {
        if self.names.len() > MOST_NAMES {
            return Err(format!("{} process names to follow; at most {MOST_NAMES}", self.names.len()));
        }
        match self.names.iter().find(|n| n.is_empty() || n.len() > LONGEST_NAME) {
            Some(n) => Err(format!("process name of {} bytes; names are 1-{LONGEST_NAME} bytes", n.len())),
            None => Ok(()),
        }
    }
}
