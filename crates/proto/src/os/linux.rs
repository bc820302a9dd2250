//! Linux: every client headroom speaks itself (iSCSI, SMB), NFS and NBD as
//! this build has them (features `nfs`, `nbd`), poll(2) on a socket, and the
//! mode of a file.

use super::Ready;
use crate::{Credentials, IscsiKeys, IscsiUrl, NbdUrl, NfsUrl, SmbUrl, Source};
use headroom_disk::{DiskError, Share, TargetOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

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

// The NFS and NBD clients call the C libraries libnfs and libnbd, loaded at
// run time (features `nfs` and `nbd`, on by default); the static build
// leaves them out, since a static binary cannot load them and libnbd's static
// archive needs GnuTLS and libxml2 linked in as well.

#[cfg(feature = "nfs")]
pub(crate) fn open_nfs(url: &NfsUrl, opts: &TargetOptions, sources: &[Source]) -> Result<Box<dyn Share>, DiskError> {
    Ok(crate::nfs::open(url, opts, sources)?)
}

#[cfg(not(feature = "nfs"))]
pub(crate) fn open_nfs(_: &NfsUrl, _: &TargetOptions, _: &[Source]) -> Result<Box<dyn Share>, DiskError> {
    Err(not_built("NFS", "libnfs"))
}

#[cfg(feature = "nbd")]
pub(crate) fn open_nbd(url: &NbdUrl, opts: &TargetOptions, sources: &[Source]) -> Result<Box<dyn Share>, DiskError> {
    Ok(crate::nbd::open(url, opts, sources)?)
}

#[cfg(not(feature = "nbd"))]
pub(crate) fn open_nbd(_: &NbdUrl, _: &TargetOptions, _: &[Source]) -> Result<Box<dyn Share>, DiskError> {
    Err(not_built("NBD", "libnbd"))
}

#[cfg(any(not(feature = "nfs"), not(feature = "nbd")))]
fn not_built(protocol: &str, library: &str) -> DiskError {
    DiskError::Usage(format!(
        "this headroom was built without its {protocol} client (a static build leaves out {library}); \
         use a build from `cargo build --release` or the distribution package"
    ))
}

/// The errno an I/O completion reports for a failure of `kind` (the
/// negative completion result the disk engine turns back into an error).
pub(crate) fn io_error_code(kind: io::ErrorKind) -> i32 {
    match kind {
        io::ErrorKind::StorageFull => libc::ENOSPC,
        io::ErrorKind::PermissionDenied => libc::EACCES,
        io::ErrorKind::NotFound => libc::ENOENT,
        _ => libc::EIO,
    }
}

/// What a socket is to this platform's system calls (socket2 and std take it too).
pub(crate) use std::os::fd::AsFd as AsSocket;

/// Waits up to `timeout` for `sock` to be `ready`; false when it was not
/// (the timeout, or a signal: the caller looks at its deadline and Ctrl-C
/// again).
pub(crate) fn wait_socket(sock: &impl AsSocket, ready: Ready, timeout: Duration) -> io::Result<bool> {
    let events = match ready {
        Ready::Read => libc::POLLIN,
        Ready::ReadOrWrite => libc::POLLIN | libc::POLLOUT,
    };
    Ok(poll(sock.as_fd().as_raw_fd(), events, timeout)? != 0)
}

/// Waits up to `timeout` for `events` (`libc::POLLIN`, `POLLOUT`) on `fd`
/// and returns the events that came: none after the timeout or a signal
/// (EINTR), so the caller's loop looks at its deadline and Ctrl-C again. A
/// part of a millisecond rounds up, so a short wait never spins; zero polls
/// once without waiting.
pub(crate) fn poll(fd: RawFd, events: i16, timeout: Duration) -> io::Result<i16> {
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128) as libc::c_int;
    let mut pfd = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one pollfd, valid for the duration of the call; a stale fd is
    // no memory error (poll answers POLLNVAL).
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
    }
    Ok(if n == 0 { 0 } else { pfd.revents })
}

/// Asks the kernel to wake a wait on `sock` only once `bytes` are queued
/// (SO_RCVLOWAT; a FIN or an error still wakes it). Best effort: a kernel
/// that refuses keeps waking on every arrival, which is only slower.
///
/// At most a quarter of the receive buffer as it is now: a mark the buffer
/// cannot hold twice over makes the kernel grow the buffer *and clamp the
/// TCP window to the mark* (tcp_set_rcvlowat), which would cap a long fat
/// path's throughput; below it nothing but the mark changes.
pub(crate) fn wake_when_queued(sock: &impl AsSocket, bytes: usize) {
    let fd = sock.as_fd().as_raw_fd();
    let int_len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let mut rcvbuf: libc::c_int = 0;
    let mut len = int_len;
    // SAFETY: int options of a socket this process holds, read into and
    // written from locals that outlive the calls.
    unsafe {
        if bytes > 1
            && libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&mut rcvbuf as *mut libc::c_int).cast(),
                &mut len,
            ) != 0
        {
            return;
        }
        let value = bytes.min(rcvbuf.max(0) as usize / 4).clamp(1, libc::c_int::MAX as usize) as libc::c_int;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, (&value as *const libc::c_int).cast(), int_len);
    }
}
