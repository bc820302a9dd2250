//! Windows: headroom's own iSCSI client (its waits on the socket are
//! WSAPoll); the SMB client still answers in errno numbers, so it is not
//! built for Windows yet; the NFS and NBD clients call libnfs and libnbd,
//! Linux libraries. Each client not here is refused in one line. A file has
//! no Unix mode here.

use super::Ready;
use crate::{Credentials, IscsiKeys, IscsiUrl, NbdUrl, NfsUrl, SmbUrl, Source};
use headroom_disk::{DiskError, Share, TargetOptions};
use std::io;
use std::os::windows::io::AsRawSocket;
use std::time::Duration;
use windows_sys::Win32::Networking::WinSock::{
    WSAGetLastError, WSAPoll, POLLRDNORM, POLLWRNORM, SOCKET_ERROR, WSAEWOULDBLOCK, WSAPOLLFD,
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

/// Refused: not available on Windows yet.
pub(crate) fn open_smb(
    _: &SmbUrl,
    _: &TargetOptions,
    _: &Credentials,
    _: &[Source],
) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("smb"))
}

/// Refused: headroom's NFS client calls libnfs.
pub(crate) fn open_nfs(_: &NfsUrl, _: &TargetOptions, _: &[Source]) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("nfs"))
}

/// Refused: headroom's NBD client calls libnbd.
pub(crate) fn open_nbd(_: &NbdUrl, _: &TargetOptions, _: &[Source]) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("nbd"))
}

/// Refused: Windows keeps who may read a file in its ACL, which is not read yet.
pub(crate) fn file_mode(_meta: &std::fs::Metadata) -> Result<u32, String> {
    Err("who may read a file is not checked on Windows yet; give the credentials in the environment".into())
}

/// What a socket is to this platform's system calls (socket2 and std take it too).
pub(crate) use std::os::windows::io::AsSocket;

/// Waits up to `timeout` for `sock` to be `ready` (WSAPoll; a part of a
/// millisecond rounds up, so a short wait never spins); false when it was
/// not. WSAPoll before Windows 10 2004 does not report a refused connect:
/// such a connect waits out its deadline and is then unreachable.
pub(crate) fn wait_socket(sock: &impl AsSocket, ready: Ready, timeout: Duration) -> io::Result<bool> {
    let events = match ready {
        Ready::Read => POLLRDNORM,
        Ready::Write => POLLWRNORM,
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

/// Whether a non-blocking connect's error means it goes on (WSAEWOULDBLOCK).
pub(crate) fn connect_in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(WSAEWOULDBLOCK)
}
