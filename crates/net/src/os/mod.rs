//! The platform seam of headroom-net: everything the crate asks of the
//! operating system beyond `std::net` and socket2, behind one name per
//! concern, implemented once per platform beside this file (`linux.rs`,
//! `windows.rs`). The rest of the crate calls only `crate::os::...`, so a port adds
//! `windows.rs` with the same functions and no `cfg` line appears elsewhere.
//!
//! The concerns (docs/platform.md has the table):
//! - sockets: `AsSocket`, the trait a socket handle is passed as;
//! - poll: `wait_readable`;
//! - nic: `is_interface_name`, `interface_exists`, `bind_device`, `bind_device_refusal`
//!   (what binding to an interface refused, in the crate's words),
//!   `LIST_INTERFACES`, `LIST_ADDRESSES` (the command that shows them);
//! - connect: `wait_writable`, `connect_in_progress` (for `socket::connect_within`);
//! - socket errors: `is_unreachable`, `is_no_buffer_space`;
//! - tcp_info: `tcp_info` (the sender's TCP_INFO as [`crate::TcpInfo`]);
//! - copies and offloads: `DISCARDS_RECEIVED`, `discard_received` (a receive
//!   that drops the bytes in the kernel), `PayloadFile`,
//!   `is_send_by_reference_refused` (a payload the kernel sends by reference),
//!   `send_segments`, `is_segmentation_refused`, `enable_gro`, `gro_cmsg_space`,
//!   `recv_segments` (UDP GSO and GRO);
//! - packet info: `want_destination`, `recv_with_destination`, `send_from`
//!   (a UDP server answers from the address it was reached at);
//! - process CPU: `process_times` (user and system time of this process);
//! - tuning words: `RECEIVE_WINDOW_ADVICE`, `SEND_BUFFER_ADVICE` (what to
//!   change when TCP_INFO finds a stream limited by the receive window or the
//!   send buffer, in this platform's terms: sysctls, netsh).
//!
//! Holds no protocol and no policy: those are the same on every platform.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

/// Why the kernel refused to bind a socket to a named interface, for the
/// reasons the user is told in words. (Windows needs no privilege for it:
/// it makes only `NoSuchInterface`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(windows, allow(dead_code))]
pub(crate) enum BindDeviceRefusal {
    /// Binding to an interface needs a privilege this process lacks.
    NotPermitted,
    /// No interface has that name.
    NoSuchInterface,
}
