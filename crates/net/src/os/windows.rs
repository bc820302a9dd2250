//! The Windows implementation of headroom-net's platform seam (see
//! `mod.rs`): WSAPoll, Winsock's error numbers and GetProcessTimes. Only
//! system calls and their error numbers; no protocol, no policy.
//!
//! Not written for Windows yet, each absent rather than made up: binding to
//! an interface by name (an error that says so) and the destination address
//! of a datagram (the reply leaves from the address Windows picks).

use super::BindDeviceRefusal;
use crate::tcpinfo::TcpInfo;
use socket2::Socket;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::windows::io::AsRawSocket;
use std::time::Duration;
use windows_sys::Win32::Networking::WinSock::{
    TCP_INFO_v0, TCP_INFO_v1, WSAIoctl, WSAPoll, POLLRDNORM, SIO_TCP_INFO, WSAEHOSTUNREACH, WSAENETUNREACH, WSAENOBUFS,
    WSAPOLLFD,
};

/// What a socket is to this platform's system calls (socket2 and std take it too).
pub(crate) use std::os::windows::io::AsSocket;

/// What raises a receive window that limited a stream (`tcpinfo::explain`):
/// Windows has no window sysctl; its receive window autotuning grows the
/// window unless a level caps it (disabled, highlyrestricted, restricted).
pub(crate) const RECEIVE_WINDOW_ADVICE: &str = "turn receive window autotuning on at the receiver \
     (netsh int tcp set global autotuninglevel=normal; netsh int tcp show global shows the level)";
/// What raises a send buffer that limited a stream: Windows sizes it by the
/// ideal send backlog unless autotuning is off or a fixed DefaultSendWindow
/// (AFD parameters in the registry) caps it.
pub(crate) const SEND_BUFFER_ADVICE: &str = "check on the sender that TCP autotuning is on \
     (netsh int tcp show global) and that no DefaultSendWindow \
     under HKLM\\SYSTEM\\CurrentControlSet\\Services\\AFD\\Parameters caps the send buffer";

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
/// Windows yet (it has no SO_BINDTODEVICE; a source address works). The
/// caller names that setting ([`BindDeviceRefusal::Unavailable`]).
pub(crate) fn bind_device(_sock: &Socket, _name: &str) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "leaving through a named interface is not available on Windows yet"))
}

/// Why binding a socket to an interface failed, when it is one of the
/// reasons said in words: on Windows, always that it is not available
/// (see [`bind_device`]).
pub(crate) fn bind_device_refusal(e: &io::Error) -> Option<BindDeviceRefusal> {
    (e.kind() == io::ErrorKind::Unsupported).then_some(BindDeviceRefusal::Unavailable)
}

/// Whether a connect failed for want of a route (host or network unreachable).
pub(crate) fn is_unreachable(e: &io::Error) -> bool {
    e.raw_os_error() == Some(WSAEHOSTUNREACH) || e.raw_os_error() == Some(WSAENETUNREACH)
}

/// Whether a send failed only because the interface's queue was full.
pub(crate) fn is_no_buffer_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(WSAENOBUFS)
}

/// The sender's TCP state from WSAIoctl(SIO_TCP_INFO): version 1 (Windows
/// 10 1709 and later) with the time the sender was limited by the receive
/// window, by the congestion window and by its send buffer (milliseconds,
/// RFC 4898's SndLimTime*, whose sum is the busy time), else version 0
/// (1703) without them. Windows counts retransmitted bytes: in segments of
/// the MSS, rounded up. It says no RTT variation and no path MTU: those stay
/// absent. None when Winsock refuses both versions (older Windows; wine 8
/// answers WSAEOPNOTSUPP: docs/platform.md, "Windows"), never zeros.
pub(crate) fn tcp_info(socket: &impl AsSocket) -> Option<TcpInfo> {
    let socket = socket.as_socket().as_raw_socket() as usize;
    let from = |mss: u32, rtt_us: u32, cwnd: u32, bytes_retrans: u32| TcpInfo {
        retransmits: u64::from(bytes_retrans).div_ceil(u64::from(mss.max(1))),
        srtt_us: u64::from(rtt_us),
        rttvar_us: None,
        cwnd_bytes: u64::from(cwnd),
        snd_mss: mss,
        pmtu: None,
        ..TcpInfo::default()
    };
    if let Some(v1) = sio_tcp_info::<TCP_INFO_v1>(socket, 1) {
        let us = |ms: u32| u64::from(ms) * 1000;
        return Some(TcpInfo {
            busy_us: us(v1.SndLimTimeRwin) + us(v1.SndLimTimeCwnd) + us(v1.SndLimTimeSnd),
            rwnd_limited_us: us(v1.SndLimTimeRwin),
            sndbuf_limited_us: us(v1.SndLimTimeSnd),
            has_limits: true,
            ..from(v1.Mss, v1.RttUs, v1.Cwnd, v1.BytesRetrans)
        });
    }
    let v0 = sio_tcp_info::<TCP_INFO_v0>(socket, 0)?;
    Some(from(v0.Mss, v0.RttUs, v0.Cwnd, v0.BytesRetrans))
}

/// One WSAIoctl(SIO_TCP_INFO) of `version` into a `T` (TCP_INFO_v0 or _v1);
/// None when it fails or fills less than a whole `T`.
fn sio_tcp_info<T: Default>(socket: usize, version: u32) -> Option<T> {
    let mut info = T::default();
    let mut returned = 0u32;
    // SAFETY: the input is one u32 (the version), the output a plain-data T
    // of the size given; no OVERLAPPED, so the call completes before it returns.
    let rc = unsafe {
        WSAIoctl(
            socket,
            SIO_TCP_INFO,
            (&version as *const u32).cast(),
            std::mem::size_of::<u32>() as u32,
            (&mut info as *mut T).cast(),
            std::mem::size_of::<T>() as u32,
            &mut returned,
            std::ptr::null_mut(),
            None,
        )
    };
    (rc == 0 && returned as usize >= std::mem::size_of::<T>()).then_some(info)
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

/// Winsock has no way to drop received TCP bytes without copying them
/// (MSG_TRUNC is for datagrams): the receivers read as usual, and the
/// result says the copy was not skipped.
pub(crate) const DISCARDS_RECEIVED: bool = false;

/// Not used while [`DISCARDS_RECEIVED`] is false (the receivers read into
/// their buffer instead); here it reads and drops, as a copy would.
pub(crate) fn discard_received(mut stream: &std::net::TcpStream, len: usize) -> io::Result<usize> {
    use std::io::Read;
    let mut scratch = vec![0u8; len.min(64 * 1024)];
    stream.read(&mut scratch)
}
