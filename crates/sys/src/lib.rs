//! headroom-sys: the inventory of this machine — CPU, memory, network
//! interfaces, block devices and mounted filesystems — read from /proc and
//! sysfs into [`headroom_result::Host`], each part with its ceiling from the
//! limits model (`headroom_limits`) and flags for what caps it (a 10 GbE NIC in
//! a PCIe 2.0 x1 slot, a USB NIC, an SSD on a 3 Gb/s SATA link).
//!
//! Everything is read below a [`SysRoot`], so tests point it at a fixture tree
//! (`tests/fixtures/*`) and production at `/`. Also answers "which interface
//! routes to this address?" ([`route_interface`]) for the net command.
//!
//! Also reads the CPU counters ([`CpuSnapshot`]: per core, per thread, the
//! cgroup's quota and throttling) whose difference over a test shows a CPU
//! limit on either end of a network test.
//!
//! Also answers who besides its owner may read a secret file
//! ([`secret_file::who_else_may_read`]) for `serve --token-file` and the
//! protocol clients' credentials file.
//!
//! What it asks of the operating system goes through `os/` (one module per
//! concern, `os/linux/` implements them); this file only assembles.
//!
//! Also loads the C libraries other crates call at run time ([`clib`] and its
//! [`c_library!`] macro: libblkid, libnfs, libnbd, libcrypto).
//!
//! Reads only; never writes sysfs, never drives a test itself, knows nothing
//! of output.

pub mod clib;
mod os;
mod pcie;
pub mod secret_file;
mod serving;
mod usage;

pub use os::block::{block_device_holding, block_devices};
pub use os::cpu::{cpu, hostname, kernel, memory_bytes, os};
pub use os::cpu_load::{process_name, CpuSnapshot};
pub use os::io_limit::io_limit;
pub use os::mounts::filesystems;
/// Windows has no statfs: headroom-disk reads a volume's filesystem name through sys's one reader.
#[cfg(windows)]
pub use os::mounts::{volume_information, VolumeInformation};
pub use os::nic::{effective_ceiling, nics};
pub use os::route::{interface_with_address, route_interface, route_interface_in};
pub use serving::{ServingProcess, ServingQuery, ServingWatch};

use headroom_result::Host;
use std::path::{Path, PathBuf};

/// The directory that holds `sys/`, `proc/` and `etc/`: `/` on a live
/// machine, a fixture tree in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot {
    root: PathBuf,
    live: bool,
}

impl SysRoot {
    /// This machine: `/sys`, `/proc`, `/etc`. Also asks the kernel for
    /// interface addresses (getifaddrs), which sysfs does not show.
    pub fn live() -> Self {
        SysRoot { root: PathBuf::from("/"), live: true }
    }

    /// A tree laid out like `/` (with `sys/`, `proc/`, `etc/` below `root`).
    /// Interface addresses are not read: they live in the kernel, not in files.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        SysRoot { root: root.into(), live: false }
    }

    /// Whether this is the running machine (so syscalls may fill in what files do not show).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// `sys/` below the root.
    pub fn sys(&self) -> PathBuf {
        self.root.join("sys")
    }

    /// `proc/` below the root.
    pub fn proc(&self) -> PathBuf {
        self.root.join("proc")
    }

    /// Any path below the root, e.g. `etc/os-release`.
    pub fn path(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.root.join(relative)
    }
}

/// The whole inventory of the machine under `root`.
pub fn inventory(root: &SysRoot) -> Host {
    Host {
        hostname: hostname(root),
        reached_as: None,
        os: os(root),
        kernel: kernel(root),
        cpu: cpu(root),
        memory_bytes: memory_bytes(root),
        nics: nics(root),
        block_devices: block_devices(root),
        filesystems: filesystems(root),
    }
}

/// The inventory of this machine.
pub fn inventory_live() -> Host {
    inventory(&SysRoot::live())
}

/// The TCP goodput ceiling of a port of `speed_mbps` at `mtu`, bytes/s, and
/// the catalog's name for that speed: the same sum on every platform. None
/// for an MTU that cannot carry TCP at all (below the 576-byte IPv4
/// minimum; jumbo MTUs beyond 9216 still compute).
pub(crate) fn port_ceiling(speed_mbps: Option<u64>, mtu: u32) -> (Option<f64>, Option<String>) {
    let link = speed_mbps.and_then(headroom_limits::ethernet_by_speed_mbps).map(|l| l.name.clone());
    let framing = (mtu >= 576).then(|| headroom_limits::Framing { mtu, ..headroom_limits::Framing::default() });
    let ceiling = match (speed_mbps, framing) {
        (Some(speed), Some(framing)) => Some(framing.tcp_goodput_bits(speed as f64 * 1e6) / 8.0),
        _ => None,
    };
    (ceiling, link)
}

/// "4", "7.88", "0.48": a figure with at most two decimals and no trailing zeros.
pub(crate) fn trim_float(value: f64) -> String {
    headroom_units::format_trimmed(value, 2)
}
