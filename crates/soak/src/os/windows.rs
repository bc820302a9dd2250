//! The Windows implementation of headroom-soak's platform seam (see
//! `mod.rs`): process names, an adapter's state and the kernel's log are not read on
//! Windows yet, so the link watcher sees no interface and no log (absent,
//! as on a Linux machine without sysfs or /dev/kmsg).

use super::LinkState;

/// Whether `pid` may be a running headroom. Process names are not looked
/// up on Windows yet, so every other live-or-not process counts as one:
/// a soak's `--resume` then leaves a test file in place rather than delete
/// one a running headroom still writes.
pub(crate) fn is_headroom(_pid: u32) -> bool {
    true
}

/// None: adapter states are not read on Windows yet.
pub(crate) fn link_state(_iface: &str) -> Option<LinkState> {
    None
}

/// The kernel's log (not readable on Windows yet: never opened).
pub(crate) struct KernelLog(std::convert::Infallible);

impl KernelLog {
    /// None: Windows' event log is not read yet.
    pub(crate) fn open() -> Option<KernelLog> {
        None
    }

    /// New kernel log messages.
    pub(crate) fn read_new(&mut self) -> Vec<String> {
        match self.0 {}
    }
}
