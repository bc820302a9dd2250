//! The Windows implementation of headroom-net's platform seam (see
//! `mod.rs`): WSAPoll, Winsock's error numbers and GetProcessTimes. Only
//! system calls and their error numbers; no protocol, no policy.
//!
//! Not written for Windows yet, each absent rather than made up: binding to
//! an interface by name (an error that says so), SIO_TCP_INFO (no TCP state
//! is recorded) and the destination address of a datagram (the reply leaves
//! from the address Windows picks).

use super::BindDeviceRefusal;
use crate::tcpinfo::TcpInfo;
use socket2::Socket;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::windows::io::AsRawSocket;
use std::time::Duration;
use windows_sys::Win32::Networking::WinSock::{
    WSAPoll, POLLRDNORM, WSAEHOSTUNREACH, WSAENETUNREACH, WSAENOBUFS, WSAPOLLFD,
};

/// What a socket is to this platform's system calls (socket2 and std take it too).
pub(crate) use std::os::windows::io::AsSocket;

/// Waits until `socket` is readable (or at end of stream) or `timeout` passes.
pub(crate) fn wait_readable(socket: &impl AsSocket, timeout: Duration) -> bool {
    let mut fd = WSAPOLLFD { fd: socket.as_socket().as_raw_socket() as usize, events: POLLRDNORM, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one WSAPOLLFD, valid for the call.
    unsafe { WSAPoll(&mut fd, 1, ms) > 0 }
}

/// Whether `name` can name an interface at all.
pub(crate) fn is_interface_name(name: &str) -> bool {
    !name.is_empty()
}

/// Whether this machine has an interface called `name`: not looked up on
/// Windows yet, so every name passes here and binding to it
/// ([`bind_device`]) says that it is not available.
pub(crate) fn interface_exists(_name: &str) -> bool {
    true
}

/// Sends `sock`'s traffic through the interface `name`: not available on
/// Windows yet (it has no SO_BINDTODEVICE; --bind ADDR works).
pub(crate) fn bind_device(_sock: &Socket, _name: &str) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "leaving through a named interface is not available on Windows yet; use --bind ADDR",
    ))
}

/// Why binding a socket to an interface failed, when it is one of the
/// reasons said in words (never, on Windows: see [`bind_device`]).
pub(crate) fn bind_device_refusal(_e: &io::Error) -> Option<BindDeviceRefusal> {
    None
}

/// Whether a connect failed for want of a route (host or network unreachable).
pub(crate) fn is_unreachable(e: &io::Error) -> bool {
    e.raw_os_error() == Some(WSAEHOSTUNREACH) || e.raw_os_error() == Some(WSAENETUNREACH)
}

/// Whether a send failed only because the interface's queue was full.
pub(crate) fn is_no_buffer_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(WSAENOBUFS)
}

/// None: SIO_TCP_INFO is not read on Windows yet, so no TCP state is recorded.
pub(crate) fn tcp_info(_socket: &impl AsSocket) -> Option<TcpInfo> {
    None
}

/// User and system CPU time this process used so far.
pub(crate) fn process_times() -> (Duration, Duration) {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessTimes};
    let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: the pseudo-handle of this process, four valid FILETIMEs.
    if unsafe { GetProcessTimes(GetCurrentProcess(), &mut created, &mut exited, &mut kernel, &mut user) } == 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let duration =
        |t: FILETIME| Duration::from_nanos(((u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)) * 100);
    (duration(user), duration(kernel))
}

/// Nothing to ask: the destination of a datagram is not read on Windows yet.
pub(crate) fn want_destination(_sock: &UdpSocket) -> io::Result<()> {
    Ok(())
}

/// One datagram: its length, its sender, and the local address it was sent
/// to (None: not read on Windows yet).
pub(crate) fn recv_with_destination(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, Option<IpAddr>)> {
    let (n, from) = sock.recv_from(buf)?;
    Ok((n, from, None))
}

/// Sends `msg` to `to`, from the address Windows picks (choosing `from` is
/// not available on Windows yet; it is always None here, see
/// [`recv_with_destination`]).
pub(crate) fn send_from(sock: &UdpSocket, msg: &[u8], to: SocketAddr, _from: Option<IpAddr>) -> io::Result<usize> {
    sock.send_to(msg, to)
}
