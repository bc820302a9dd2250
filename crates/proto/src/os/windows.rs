//! Windows: headroom's own iSCSI and SMB clients (their waits on the socket
//! are WSAPoll, their failed I/Os Win32 error numbers); the NFS and NBD
//! clients call libnfs and libnbd, Linux libraries, and are refused in one
//! line. A file has no Unix mode here.

use super::Ready;
use crate::{Credentials, IscsiKeys, IscsiUrl, NbdUrl, NfsUrl, SmbUrl, Source};
use headroom_disk::{DiskError, Share, TargetOptions};
use std::io;
use std::os::windows::io::AsRawSocket;
use std::time::Duration;
use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_DISK_FULL, ERROR_FILE_NOT_FOUND, ERROR_IO_DEVICE};
use windows_sys::Win32::Networking::WinSock::{
    WSAGetLastError, WSAPoll, POLLRDNORM, POLLWRNORM, SOCKET_ERROR, WSAPOLLFD,
};

fn not_yet(scheme: &str) -> DiskError {
    DiskError::Usage(format!("{scheme}:// targets are not available on Windows yet; run headroom on Linux for them"))
}

/// A share on an iSCSI target.
pub(crate) fn open_iscsi(
    url: &IscsiUrl,
    opts: &TargetOptions,
    credentials: &Credentials,
    sources: &[Source],
    keys: &IscsiKeys,
) -> Result<Box<dyn Share>, DiskError> {
    Ok(crate::iscsi::open(url, opts, credentials, sources, keys)?)
}

/// A share on an SMB server.
pub(crate) fn open_smb(
    url: &SmbUrl,
    opts: &TargetOptions,
    credentials: &Credentials,
    sources: &[Source],
) -> Result<Box<dyn Share>, DiskError> {
    Ok(crate::smb::open(url, opts, credentials, sources)?)
}

/// The Win32 error an I/O completion reports for a failure of `kind` (the
/// negative completion result the disk engine turns back into an error with
/// `io::Error::from_raw_os_error`, as for the iocp engine's own failures).
pub(crate) fn io_error_code(kind: io::ErrorKind) -> i32 {
    (match kind {
        io::ErrorKind::StorageFull => ERROR_DISK_FULL,
        io::ErrorKind::PermissionDenied => ERROR_ACCESS_DENIED,
        io::ErrorKind::NotFound => ERROR_FILE_NOT_FOUND,
        _ => ERROR_IO_DEVICE,
    }) as i32
}

/// Refused: headroom's NFS client calls libnfs.
pub(crate) fn open_nfs(_: &NfsUrl, _: &TargetOptions, _: &[Source]) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("nfs"))
}

/// Refused: headroom's NBD client calls libnbd.
pub(crate) fn open_nbd(_: &NbdUrl, _: &TargetOptions, _: &[Source]) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("nbd"))
}

/// What a socket is to this platform's system calls (socket2 and std take it too).
pub(crate) use std::os::windows::io::AsSocket;

/// Waits up to `timeout` for `sock` to be `ready` (WSAPoll; a part of a
/// millisecond rounds up, so a short wait never spins); false when it was
/// not. (The TCP connect is net's `connect_within`, which reads the
/// socket's error between its waits: WSAPoll before Windows 10 2004 does
/// not report a refused connect.)
pub(crate) fn wait_socket(sock: &impl AsSocket, ready: Ready, timeout: Duration) -> io::Result<bool> {
    let events = match ready {
        Ready::Read => POLLRDNORM,
        Ready::ReadOrWrite => POLLRDNORM | POLLWRNORM,
    };
    let mut fd = WSAPOLLFD { fd: sock.as_socket().as_raw_socket() as usize, events, revents: 0 };
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
    // SAFETY: one WSAPOLLFD, valid for the call.
    let n = unsafe { WSAPoll(&mut fd, 1, ms) };
    if n == SOCKET_ERROR {
        // SAFETY: no arguments; reads this thread's last Winsock error.
        return Err(io::Error::from_raw_os_error(unsafe { WSAGetLastError() }));
    }
    Ok(n > 0)
}

/// Windows' TCP provider has no SO_RCVLOWAT: every arrival wakes a wait.
pub(crate) fn wake_when_queued(_: &impl AsSocket, _: usize) {}
