//! The platform seam of headroom-soak: what the link watcher asks of the
//! operating system, implemented once per platform beside this file
//! (`linux.rs`, `windows.rs`). watch.rs and leftovers.rs call only these names, so
//! a port adds a file with the same ones. See docs/platform.md.
//!
//! What a platform provides (leftovers.rs asks headroom-sys for a
//! process's name, which is that crate's seam):
//!
//! link_watch:
//! - `link_state`: whether an interface is up and how often its carrier
//!   changed, or `None` when it does not exist;
//! - `KernelLog`: the kernel's log read from now on (`open`, `read_new`), or
//!   `None` from `open` where it cannot be read.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

/// One look at an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkState {
    /// Up, or in a state that passes traffic without saying so ("unknown").
    pub up: bool,
    /// Carrier changes since the interface appeared, when the platform counts them.
    pub carrier_changes: Option<u64>,
}
