//! The Windows implementation of headroom-net's platform seam (see
//! `mod.rs`): WSAPoll, Winsock's error numbers, IP_UNICAST_IF with the
//! adapter's index, SIO_TCP_INFO, WSARecvMsg and WSASendMsg with
//! IP_PKTINFO, and GetProcessTimes. Only system calls and their error
//! numbers; no protocol, no policy.

use super::BindDeviceRefusal;
use crate::tcpinfo::TcpInfo;
use socket2::Socket;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::windows::io::AsRawSocket;
use std::time::Duration;
use windows_sys::core::GUID;
use windows_sys::Win32::Networking::WinSock::{
    TCP_INFO_v0, TCP_INFO_v1, WSAGetLastError, WSAIoctl, WSAPoll, WSASendMsg, CMSGHDR, IN6_PKTINFO, IN_PKTINFO,
    LPFN_WSARECVMSG, POLLRDNORM, POLLWRNORM, SIO_GET_EXTENSION_FUNCTION_POINTER, SIO_TCP_INFO, SOCKET_ERROR, WSABUF,
    WSAEHOSTUNREACH, WSAEINVAL, WSAENETUNREACH, WSAENOBUFS, WSAEWOULDBLOCK, WSAID_WSARECVMSG, WSAMSG, WSAPOLLFD,
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

/// Waits up to `timeout` for `socket` to be writable (WSAPoll; a part of a
/// millisecond rounds up, so a short wait never spins). WSAPoll before
/// Windows 10 2004 does not report a refused connect: the caller
/// (`socket::connect_within`) reads the socket's error after each wait.
pub(crate) fn wait_writable(socket: &impl AsSocket, timeout: Duration) -> io::Result<bool> {
    let mut fd = WSAPOLLFD { fd: socket.as_socket().as_raw_socket() as usize, events: POLLWRNORM, revents: 0 };
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

/// Whether `name` can name an interface at all (an alias is at most
/// IF_MAX_STRING_SIZE, 256, characters).
pub(crate) fn is_interface_name(name: &str) -> bool {
    !name.is_empty() && name.encode_utf16().count() < 256
}

/// The command that lists this machine's adapters by name (their alias).
pub(crate) const LIST_INTERFACES: &str = "netsh interface show interface";
/// The command that lists this machine's addresses.
pub(crate) const LIST_ADDRESSES: &str = "ipconfig";

/// Whether this machine has an interface called `name`.
pub(crate) fn interface_exists(name: &str) -> bool {
    interface_index(name).is_some()
}

/// The index of the adapter whose alias (GetAdaptersAddresses'
/// FriendlyName, what `headroom sys` lists) is `name`:
/// ConvertInterfaceAliasToLuid, then ConvertInterfaceLuidToIndex. One index
/// serves IPv4 and IPv6 (Vista and later).
fn interface_index(name: &str) -> Option<u32> {
    use windows_sys::Win32::NetworkManagement::IpHelper::{ConvertInterfaceAliasToLuid, ConvertInterfaceLuidToIndex};
    use windows_sys::Win32::NetworkManagement::Ndis::NET_LUID_LH;
    let alias: Vec<u16> = name.encode_utf16().chain(std::iter::once(0)).collect();
    let mut luid = NET_LUID_LH { Value: 0 };
    // SAFETY: a NUL-terminated UTF-16 string and a NET_LUID to fill.
    if unsafe { ConvertInterfaceAliasToLuid(alias.as_ptr(), &mut luid) } != 0 {
        return None;
    }
    let mut index = 0u32;
    // SAFETY: the LUID just filled and a u32 to fill.
    (unsafe { ConvertInterfaceLuidToIndex(&luid, &mut index) } == 0 && index != 0).then_some(index)
}

/// Sends `sock`'s traffic (to `peer`) through the interface `name`:
/// IP_UNICAST_IF for IPv4, whose value is the index in network byte order,
/// IPV6_UNICAST_IF for IPv6, whose value is the index in host byte order
/// (Win32 "IPPROTO_IP socket options", "IPPROTO_IPV6 socket options").
/// Unlike Linux's SO_BINDTODEVICE it chooses where unicast leaves from and
/// needs no privilege; what arrives is not filtered.
pub(crate) fn bind_device(sock: &Socket, name: &str, peer: &SocketAddr) -> io::Result<()> {
    use windows_sys::Win32::Networking::WinSock::{IPPROTO_IP, IPPROTO_IPV6, IPV6_UNICAST_IF, IP_UNICAST_IF};
    let index = interface_index(name).ok_or_else(|| io::Error::from_raw_os_error(NO_SUCH_INTERFACE))?;
    let (level, option, value) = match peer {
        SocketAddr::V4(_) => (IPPROTO_IP, IP_UNICAST_IF, index.to_be()),
        SocketAddr::V6(_) => (IPPROTO_IPV6, IPV6_UNICAST_IF, index),
    };
    set_option(sock, level, option, value)
}

/// The error of a name no adapter has: ERROR_NOT_FOUND, what
/// ConvertInterfaceAliasToLuid answers for an alias it does not know.
const NO_SUCH_INTERFACE: i32 = windows_sys::Win32::Foundation::ERROR_NOT_FOUND as i32;

/// setsockopt(level, option) with a DWORD value.
fn set_option(sock: &impl AsSocket, level: i32, option: i32, value: u32) -> io::Result<()> {
    use windows_sys::Win32::Networking::WinSock::setsockopt;
    let raw = sock.as_socket().as_raw_socket() as usize;
    // SAFETY: a DWORD of the size given, read during the call.
    let rc = unsafe { setsockopt(raw, level, option, (&value as *const u32).cast(), 4) };
    if rc == SOCKET_ERROR {
        // SAFETY: no arguments; reads this thread's last Winsock error.
        return Err(io::Error::from_raw_os_error(unsafe { WSAGetLastError() }));
    }
    Ok(())
}

/// Why binding a socket to an interface failed, when it is one of the
/// reasons said in words (Windows needs no privilege for it).
pub(crate) fn bind_device_refusal(e: &io::Error) -> Option<BindDeviceRefusal> {
    (e.raw_os_error() == Some(NO_SUCH_INTERFACE)).then_some(BindDeviceRefusal::NoSuchInterface)
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

/// Asks Winsock to say, with every datagram, the address it was sent to
/// (IP_PKTINFO, or IPV6_PKTINFO on an IPv6 socket).
pub(crate) fn want_destination(sock: &UdpSocket) -> io::Result<()> {
    use windows_sys::Win32::Networking::WinSock::{IPPROTO_IP, IPPROTO_IPV6, IPV6_PKTINFO, IP_PKTINFO};
    if sock.local_addr()?.is_ipv4() {
        set_option(sock, IPPROTO_IP, IP_PKTINFO, 1)
    } else {
        set_option(sock, IPPROTO_IPV6, IPV6_PKTINFO, 1)
    }
}

/// Room for one IN6_PKTINFO (the larger) in a control buffer, in u64s so
/// the headers are aligned as ws2def.h's WSA_CMSG_* macros expect.
const CONTROL_WORDS: usize = 8;

/// ws2def.h's WSA_CMSGHDR_ALIGN and WSA_CMSGDATA_ALIGN: control headers and
/// their data sit on pointer-size boundaries (8 bytes on x64).
const fn cmsg_align(len: usize) -> usize {
    let a = std::mem::align_of::<CMSGHDR>();
    (len + a - 1) & !(a - 1)
}

/// WSA_CMSG_DATA: where a control message's data starts, after its header.
const CMSG_DATA: usize = cmsg_align(std::mem::size_of::<CMSGHDR>());

/// WSARecvMsg, which Winsock hands out only through
/// WSAIoctl(SIO_GET_EXTENSION_FUNCTION_POINTER, WSAID_WSARECVMSG); asked
/// once (the pointer is the TCP/IP provider's, the same for every socket).
fn wsa_recv_msg(sock: usize) -> io::Result<LPFN_WSARECVMSG> {
    static POINTER: std::sync::OnceLock<LPFN_WSARECVMSG> = std::sync::OnceLock::new();
    if let Some(f) = POINTER.get() {
        return Ok(*f);
    }
    let guid = WSAID_WSARECVMSG;
    let mut f: LPFN_WSARECVMSG = None;
    let mut returned = 0u32;
    // SAFETY: the input is the GUID, the output one function pointer; no OVERLAPPED.
    let rc = unsafe {
        WSAIoctl(
            sock,
            SIO_GET_EXTENSION_FUNCTION_POINTER,
            (&guid as *const GUID).cast(),
            std::mem::size_of::<GUID>() as u32,
            (&mut f as *mut LPFN_WSARECVMSG).cast(),
            std::mem::size_of::<LPFN_WSARECVMSG>() as u32,
            &mut returned,
            std::ptr::null_mut(),
            None,
        )
    };
    if rc == SOCKET_ERROR || f.is_none() {
        // SAFETY: no arguments; reads this thread's last Winsock error.
        return Err(io::Error::from_raw_os_error(unsafe { WSAGetLastError() }));
    }
    let _ = POINTER.set(f);
    Ok(f)
}

/// One datagram: its length, its sender, and the local address it was sent
/// to (WSARecvMsg with IP_PKTINFO / IPV6_PKTINFO; None when Winsock did not
/// say).
pub(crate) fn recv_with_destination(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, Option<IpAddr>)> {
    let raw = sock.as_socket().as_raw_socket() as usize;
    let recv_msg = wsa_recv_msg(raw)?.ok_or_else(|| io::Error::other("no WSARecvMsg"))?;
    let mut control = [0u64; CONTROL_WORDS];
    let mut data = WSABUF { len: buf.len().min(u32::MAX as usize) as u32, buf: buf.as_mut_ptr() };
    let mut got = 0u32;
    // SAFETY: try_init hands a zeroed SOCKADDR_STORAGE and its size for the
    // sender; WSAMSG points at it, at `buf` and at `control`, all alive
    // during the blocking call (no OVERLAPPED), which sets the lengths.
    let (control_len, from) = unsafe {
        socket2::SockAddr::try_init(|name, name_len| {
            let mut msg = WSAMSG {
                name: name.cast(),
                namelen: *name_len,
                lpBuffers: &mut data,
                dwBufferCount: 1,
                Control: WSABUF { len: std::mem::size_of_val(&control) as u32, buf: control.as_mut_ptr().cast() },
                dwFlags: 0,
            };
            if recv_msg(raw, &mut msg, &mut got, std::ptr::null_mut(), None) == SOCKET_ERROR {
                return Err(io::Error::from_raw_os_error(WSAGetLastError()));
            }
            *name_len = msg.namelen;
            Ok(msg.Control.len as usize)
        })?
    };
    let from = from.as_socket().ok_or_else(|| io::Error::other("a datagram without a sender"))?;
    let bytes: Vec<u8> = control.iter().flat_map(|w| w.to_ne_bytes()).collect();
    Ok((got as usize, from, destination_in(&bytes[..control_len.min(bytes.len())])))
}

/// The destination an IP_PKTINFO or IPV6_PKTINFO control message holds,
/// walking the control data as WSA_CMSG_FIRSTHDR and WSA_CMSG_NXTHDR do.
fn destination_in(control: &[u8]) -> Option<IpAddr> {
    use windows_sys::Win32::Networking::WinSock::{IPPROTO_IP, IPPROTO_IPV6, IPV6_PKTINFO, IP_PKTINFO};
    let mut at = 0;
    while at + std::mem::size_of::<CMSGHDR>() <= control.len() {
        // SAFETY: a whole header lies at `at`; read unaligned from the bytes.
        let header = unsafe { std::ptr::read_unaligned(control[at..].as_ptr() as *const CMSGHDR) };
        let data = &control[(at + CMSG_DATA).min(control.len())..(at + header.cmsg_len).min(control.len())];
        match (header.cmsg_level, header.cmsg_type) {
            (IPPROTO_IP, IP_PKTINFO) if data.len() >= std::mem::size_of::<IN_PKTINFO>() => {
                // SAFETY: a whole IN_PKTINFO, read unaligned.
                let info = unsafe { std::ptr::read_unaligned(data.as_ptr() as *const IN_PKTINFO) };
                // SAFETY: S_addr is the u32 view of the address, in network order in memory.
                return Some(IpAddr::from(unsafe { info.ipi_addr.S_un.S_addr }.to_ne_bytes()));
            }
            (IPPROTO_IPV6, IPV6_PKTINFO) if data.len() >= std::mem::size_of::<IN6_PKTINFO>() => {
                // SAFETY: a whole IN6_PKTINFO, read unaligned.
                let info = unsafe { std::ptr::read_unaligned(data.as_ptr() as *const IN6_PKTINFO) };
                // SAFETY: Byte is the byte view of the address.
                return Some(IpAddr::from(unsafe { info.ipi6_addr.u.Byte }));
            }
            _ => {}
        }
        if header.cmsg_len == 0 {
            return None;
        }
        at += cmsg_align(header.cmsg_len);
    }
    None
}

/// Sends `msg` to `to`, from the local address `from` when known:
/// WSASendMsg with an IN_PKTINFO (or IN6_PKTINFO) naming the source, index
/// 0 (the routing table picks the interface).
pub(crate) fn send_from(sock: &UdpSocket, msg: &[u8], to: SocketAddr, from: Option<IpAddr>) -> io::Result<usize> {
    use windows_sys::Win32::Networking::WinSock::{IPPROTO_IP, IPPROTO_IPV6, IPV6_PKTINFO, IP_PKTINFO};
    let mut control = [0u64; CONTROL_WORDS];
    let control_len = match (from, to) {
        (Some(IpAddr::V4(src)), SocketAddr::V4(_)) => {
            let mut info = IN_PKTINFO::default();
            info.ipi_addr.S_un.S_addr = u32::from_ne_bytes(src.octets());
            put_control(&mut control, IPPROTO_IP, IP_PKTINFO, info)
        }
        (Some(IpAddr::V6(src)), SocketAddr::V6(_)) => {
            let mut info = IN6_PKTINFO::default();
            info.ipi6_addr.u.Byte = src.octets();
            put_control(&mut control, IPPROTO_IPV6, IPV6_PKTINFO, info)
        }
        _ => return sock.send_to(msg, to),
    };
    let to = socket2::SockAddr::from(to);
    let mut data = WSABUF { len: msg.len().min(u32::MAX as usize) as u32, buf: msg.as_ptr().cast_mut() };
    let header = WSAMSG {
        name: to.as_ptr().cast_mut().cast(),
        namelen: to.len(),
        lpBuffers: &mut data,
        dwBufferCount: 1,
        Control: WSABUF { len: control_len as u32, buf: control.as_mut_ptr().cast() },
        dwFlags: 0,
    };
    let mut sent = 0u32;
    let raw = sock.as_socket().as_raw_socket() as usize;
    // SAFETY: WSAMSG points at the address, `msg` (only read) and `control`,
    // all alive during the blocking call (no OVERLAPPED).
    if unsafe { WSASendMsg(raw, &header, 0, &mut sent, std::ptr::null_mut(), None) } == SOCKET_ERROR {
        // SAFETY: no arguments; reads this thread's last Winsock error.
        let e = unsafe { WSAGetLastError() };
        // A stack that refuses the source (WSAEINVAL) still gets its answer,
        // from the address Windows picks, as before WSASendMsg was used.
        if e == WSAEINVAL {
            return sock.send_to(msg, to.as_socket().expect("an IP address"));
        }
        return Err(io::Error::from_raw_os_error(e));
    }
    Ok(sent as usize)
}

/// Writes one control message of `level`/`kind` holding `value` at the start
/// of `control`; its WSA_CMSG_SPACE, the length to send.
fn put_control<T: Copy>(control: &mut [u64; CONTROL_WORDS], level: i32, kind: i32, value: T) -> usize {
    let len = CMSG_DATA + std::mem::size_of::<T>();
    let space = CMSG_DATA + cmsg_align(std::mem::size_of::<T>());
    assert!(space <= std::mem::size_of_val(control), "the control buffer holds one pktinfo");
    let base = control.as_mut_ptr() as *mut u8;
    // SAFETY: `space` bytes fit in `control` (asserted); `control` is
    // 8-byte aligned, as is CMSG_DATA, so both writes are aligned.
    unsafe {
        std::ptr::write(base as *mut CMSGHDR, CMSGHDR { cmsg_len: len, cmsg_level: level, cmsg_type: kind });
        std::ptr::write_unaligned(base.add(CMSG_DATA) as *mut T, value);
    }
    space
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

/// A sender by reference (`--zerocopy`) is not made here: TransmitFile
/// could send a file's pages, but it is not wired up, so senders copy and
/// the result records it (`details.zerocopy`).
pub(crate) struct PayloadFile;

impl PayloadFile {
    pub(crate) fn new(_payload: &[u8]) -> io::Result<Self> {
        Err(io::ErrorKind::Unsupported.into())
    }

    pub(crate) fn send(&self, _stream: &std::net::TcpStream, _len: usize) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Every send by reference is refused here (see [`PayloadFile`]).
pub(crate) fn is_send_by_reference_refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
}

/// Windows' own send offload (UDP_SEND_MSG_SIZE) is not used: refused, so
/// the sender goes one datagram per call and records `gso: false`.
pub(crate) fn send_segments(_sock: &std::net::UdpSocket, _buf: &[u8], _segment: u16) -> io::Result<usize> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Whether a segmented send failed for want of segmentation: always, here.
pub(crate) fn is_segmentation_refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
}

/// Windows' receive coalescing (UDP_RECV_MAX_COALESCED_SIZE) is not used:
/// refused, so the receiver reads one datagram per call and records `gro: false`.
pub(crate) fn enable_gro(_sock: &std::net::UdpSocket) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// No control messages are read here.
pub(crate) fn gro_cmsg_space() -> Vec<u8> {
    Vec::new()
}

/// One datagram per receive (GRO is never on here).
pub(crate) fn recv_segments(
    sock: &std::net::UdpSocket,
    buf: &mut [u8],
    _space: &mut Vec<u8>,
) -> io::Result<(usize, Option<usize>)> {
    sock.recv(buf).map(|n| (n, None))
}

/// Windows has no SO_BUSY_POLL: refused (the round trips still spin).
pub(crate) fn set_busy_poll(_stream: &std::net::TcpStream, _usec: u32) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}
