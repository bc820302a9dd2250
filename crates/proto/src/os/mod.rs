//! The platform seam of headroom-proto: which protocol clients this
//! platform has and the waits on a socket, implemented once per platform
//! beside this file (`linux.rs`, `windows.rs`; docs/platform.md has the
//! rule). lib.rs, transport.rs and frame.rs call only these names (who may
//! read a credentials file is headroom-sys's `secret_file`).
//!
//! What a platform provides:
//! - `open_iscsi`, `open_smb`, `open_nfs`, `open_nbd`: a share through each
//!   client, or the one-line refusal where this platform (or this build)
//!   has no such client;
//! - `AsSocket`: the trait a socket is passed as; `wait_socket`: one wait
//!   for a socket to be ready ([`Ready`]), bounded by a timeout (Linux also
//!   has `poll`, for the sockets libnbd and libnfs hold as file
//!   descriptors); the TCP connect is headroom-net's `connect_within`;
//! - `wake_when_queued`: a socket's waits end only once so many bytes are
//!   queued (SO_RCVLOWAT; a no-op where the platform has none);
//! - `io_error_code`: the error number a failed I/O's completion carries
//!   for a kind of failure (errno on Linux, a Win32 error on Windows).
//!
//! Must not hold a protocol: the clients are their own modules.

/// What a wait on a socket waits for; a hang-up or an error ends each (the
/// read or write that follows reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// Bytes to read (or the end of the stream).
    Read,
    /// Either.
    ReadOrWrite,
}

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
