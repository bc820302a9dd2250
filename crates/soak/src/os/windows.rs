//! The Windows implementation of headroom-soak's platform seam (see
//! `mod.rs`): an adapter's state as GetAdaptersAddresses gives it (through
//! headroom-sys). Windows keeps no count of carrier changes, so the link
//! watcher finds flaps by the state it sees change between its looks; the
//! kernel's log is not read on Windows yet (absent, as on a Linux machine
//! without /dev/kmsg).

use super::LinkState;

/// The adapter's state, or `None` when no adapter has that name.
pub(crate) fn link_state(iface: &str) -> Option<LinkState> {
    let nic = headroom_sys::nics(&headroom_sys::SysRoot::live()).into_iter().find(|n| n.name == iface)?;
    Some(LinkState { up: matches!(nic.operstate.as_deref(), Some("up" | "unknown")), carrier_changes: None })
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
