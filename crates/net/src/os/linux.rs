//! The Linux implementation of headroom-net's platform seam (see `mod.rs`):
//! poll(2), SO_BINDTODEVICE's errors, /sys/class/net, TCP_INFO, IP_PKTINFO,
//! UDP GSO/GRO and getrusage. Only system calls and their errno; no protocol, no policy.

use super::BindDeviceRefusal;
use crate::tcpinfo::TcpInfo;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    recvmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// What a socket is to this platform's system calls (socket2 and std take it too).
pub(crate) use std::os::fd::AsFd as AsSocket;
use std::time::Duration;

/// What raises a receive window that limited a stream: the sysctls capping
/// the kernel's autotuning (`tcpinfo::explain`).
pub(crate) const RECEIVE_WINDOW_ADVICE: &str = "raise net.core.rmem_max and net.ipv4.tcp_rmem on the receiver";
/// What raises a send buffer that limited a stream.
pub(crate) const SEND_BUFFER_ADVICE: &str = "raise net.core.wmem_max and net.ipv4.tcp_wmem on the sender";

/// Waits until `fd` is readable (or at end of stream) or `timeout` passes.
pub(crate) fn wait_readable(fd: &impl AsSocket, timeout: Duration) -> bool {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    poll(&mut fds, timeout).is_ok_and(|ready| ready > 0)
}

/// Waits up to `timeout` for `fd` to be writable (a connect that finished,
/// or failed: the caller reads the socket's error). A part of a millisecond
/// rounds up, so a short wait never spins; EINTR is a wait that ended early.
pub(crate) fn wait_writable(fd: &impl AsSocket, timeout: Duration) -> io::Result<bool> {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
    match poll(&mut fds, PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)) {
        Ok(ready) => Ok(ready > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Whether a non-blocking connect's error means it goes on (EINPROGRESS).
pub(crate) fn connect_in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINPROGRESS)
}

/// Whether `name` can name an interface at all (length, no slash).
pub(crate) fn is_interface_name(name: &str) -> bool {
    !name.is_empty() && name.len() < libc::IFNAMSIZ && !name.contains('/')
}

/// Whether this machine has an interface called `name`.
pub(crate) fn interface_exists(name: &str) -> bool {
    std::path::Path::new("/sys/class/net").join(name).exists()
}

/// The command that lists this machine's interfaces by name.
pub(crate) const LIST_INTERFACES: &str = "ip link";
/// The command that lists this machine's addresses.
pub(crate) const LIST_ADDRESSES: &str = "ip addr";

/// Sends `sock`'s traffic through the interface `name` (SO_BINDTODEVICE,
/// whatever the peer's family).
pub(crate) fn bind_device(sock: &socket2::Socket, name: &str, _peer: &SocketAddr) -> io::Result<()> {
    sock.bind_device(Some(name.as_bytes()))
}

/// Why binding a socket to an interface failed, when it is one of the
/// reasons said in words.
pub(crate) fn bind_device_refusal(e: &io::Error) -> Option<BindDeviceRefusal> {
    match e.raw_os_error() {
        Some(libc::EPERM) => Some(BindDeviceRefusal::NotPermitted),
        Some(libc::ENODEV) => Some(BindDeviceRefusal::NoSuchInterface),
        _ => None,
    }
}

/// Whether a connect failed for want of a route (host or network unreachable).
pub(crate) fn is_unreachable(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EHOSTUNREACH) || e.raw_os_error() == Some(libc::ENETUNREACH)
}

/// Whether a send failed only because the interface's queue was full.
pub(crate) fn is_no_buffer_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS)
}

// Hand-written because neither libc nor socket2 exposes the newer fields
// (tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited; Linux 4.10+):
// the struct below mirrors `struct tcp_info` of linux/tcp.h up to them.
#[repr(C)]
#[derive(Default)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
}

/// TCP_INFO of a connected TCP socket; None when the kernel refuses.
pub(crate) fn tcp_info(socket: &impl AsSocket) -> Option<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `raw`, a plain-data struct.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let has_limits = len as usize >= std::mem::size_of::<RawTcpInfo>();
    Some(TcpInfo {
        retransmits: u64::from(raw.total_retrans),
        srtt_us: u64::from(raw.rtt),
        rttvar_us: Some(u64::from(raw.rttvar)),
        cwnd_bytes: u64::from(raw.snd_cwnd) * u64::from(raw.snd_mss),
        snd_mss: raw.snd_mss,
        pmtu: Some(raw.pmtu),
        busy_us: raw.busy_time,
        rwnd_limited_us: raw.rwnd_limited,
        sndbuf_limited_us: raw.sndbuf_limited,
        has_limits,
    })
}

/// User and system CPU time this process used so far.
pub(crate) fn process_times() -> (Duration, Duration) {
    use nix::sys::resource::{getrusage, UsageWho};
    // getrusage(RUSAGE_SELF) fails only for a bad `who`: zero then reads as "no CPU used".
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else { return (Duration::ZERO, Duration::ZERO) };
    let duration = |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, (t.tv_usec() as u32) * 1000);
    (duration(usage.user_time()), duration(usage.system_time()))
}

/// Asks the kernel to say, with every datagram, the address it was sent to.
pub(crate) fn want_destination(sock: &UdpSocket) -> io::Result<()> {
    if sock.local_addr().is_ok_and(|a| a.is_ipv4()) {
        Ok(setsockopt(sock, sockopt::Ipv4PacketInfo, &true)?)
    } else {
        Ok(setsockopt(sock, sockopt::Ipv6RecvPacketInfo, &true)?)
    }
}

/// One datagram: its length, its sender, and the local address it was sent
/// to (None when the kernel did not say).
pub(crate) fn recv_with_destination(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, Option<IpAddr>)> {
    let mut space = nix::cmsg_space!(libc::in_pktinfo, libc::in6_pktinfo);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<SockaddrStorage>(sock.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::empty())?;
    let from = msg
        .address
        .and_then(|a| {
            a.as_sockaddr_in()
                .map(|v4| SocketAddr::from((v4.ip(), v4.port())))
                .or_else(|| a.as_sockaddr_in6().map(|v6| SocketAddr::from((v6.ip(), v6.port()))))
        })
        .ok_or_else(|| io::Error::other("a datagram without a sender"))?;
    let mut to = None;
    for c in msg.cmsgs()? {
        match c {
            ControlMessageOwned::Ipv4PacketInfo(i) => {
                to = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(i.ipi_addr.s_addr))));
            }
            ControlMessageOwned::Ipv6PacketInfo(i) => to = Some(IpAddr::V6(Ipv6Addr::from(i.ipi6_addr.s6_addr))),
            _ => {}
        }
    }
    Ok((msg.bytes, from, to))
}

/// Sends `msg` to `to`, from the local address `from` when known.
pub(crate) fn send_from(sock: &UdpSocket, msg: &[u8], to: SocketAddr, from: Option<IpAddr>) -> io::Result<usize> {
    let iov = [std::io::IoSlice::new(msg)];
    let dest = SockaddrStorage::from(to);
    let sent = match from {
        Some(IpAddr::V4(src)) if to.is_ipv4() => {
            let info = libc::in_pktinfo {
                ipi_ifindex: 0,
                ipi_spec_dst: libc::in_addr { s_addr: u32::from(src).to_be() },
                ipi_addr: libc::in_addr { s_addr: 0 },
            };
            sendmsg(sock.as_raw_fd(), &iov, &[ControlMessage::Ipv4PacketInfo(&info)], MsgFlags::empty(), Some(&dest))
        }
        Some(IpAddr::V6(src)) if to.is_ipv6() => {
            let info = libc::in6_pktinfo { ipi6_addr: libc::in6_addr { s6_addr: src.octets() }, ipi6_ifindex: 0 };
            sendmsg(sock.as_raw_fd(), &iov, &[ControlMessage::Ipv6PacketInfo(&info)], MsgFlags::empty(), Some(&dest))
        }
        _ => sendmsg(sock.as_raw_fd(), &iov, &[], MsgFlags::empty(), Some(&dest)),
    };
    Ok(sent?)
}

/// Linux discards received TCP bytes in the kernel: `recv` with MSG_TRUNC
/// and no buffer (tcp_recvmsg skips the copy to user space; iperf3's
/// `--skip-rx-copy` does the same).
pub(crate) const DISCARDS_RECEIVED: bool = true;

/// Takes up to `len` received bytes off `stream` without copying them out
/// of the kernel; 0 at the end of the stream.
pub(crate) fn discard_received(stream: &std::net::TcpStream, len: usize) -> io::Result<usize> {
    // SAFETY: a null buffer is what MSG_TRUNC on a TCP socket asks for: the
    // kernel writes nothing and returns how many bytes it dropped.
    let n = unsafe { libc::recv(stream.as_raw_fd(), std::ptr::null_mut(), len, libc::MSG_TRUNC) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// The payload a TCP sender hands the kernel by reference (`--zerocopy`):
/// a memory file holding it, sent with sendfile(2), so the sender never
/// copies it into the kernel and a local receiver reads it straight from
/// these pages. MSG_ZEROCOPY is not used: on loopback and veth the kernel
/// copies a zero-copy send at delivery and reports every one as copied
/// (SO_EE_CODE_ZEROCOPY_COPIED, all of 99 999 sends in a probe), while a
/// spliced page is delivered as it is; sendfile is also what iperf3's
/// `--zerocopy` does. The file is never written after it is made.
pub(crate) struct PayloadFile(std::os::fd::OwnedFd);

impl PayloadFile {
    /// A memory file (memfd) holding `payload`.
    pub(crate) fn new(payload: &[u8]) -> io::Result<Self> {
        use std::io::Write;
        let fd = nix::sys::memfd::memfd_create("headroom-payload", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)?;
        let mut file = std::fs::File::from(fd);
        file.write_all(payload)?;
        Ok(PayloadFile(file.into()))
    }

    /// Sends up to `len` bytes of the payload, from its start, on `stream`;
    /// the bytes sent, as write(2) would say (a send timeout is EAGAIN).
    pub(crate) fn send(&self, stream: &std::net::TcpStream, len: usize) -> io::Result<usize> {
        let mut offset: libc::off_t = 0;
        Ok(nix::sys::sendfile::sendfile(stream.as_fd(), self.0.as_fd(), Some(&mut offset), len)?)
    }
}

/// A send by reference this kernel or socket cannot take (no sendfile to
/// a socket, no memfd), not a network error: the stream copies instead.
pub(crate) fn is_send_by_reference_refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP))
}

/// Sends `buf` as datagrams of `segment` bytes each (the last may be
/// shorter) in one system call: UDP_SEGMENT as a control message (Linux
/// 4.18+), so a refusal touches only this call.
pub(crate) fn send_segments(sock: &UdpSocket, buf: &[u8], segment: u16) -> io::Result<usize> {
    let iov = [std::io::IoSlice::new(buf)];
    let cmsg = [ControlMessage::UdpGsoSegments(&segment)];
    Ok(sendmsg::<SockaddrStorage>(sock.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)?)
}

/// Whether a segmented send failed because this kernel, route or device
/// cannot segment (no UDP_SEGMENT: EINVAL or ENOPROTOOPT; no checksum
/// offload on the way out: EIO), so one datagram per call is the way.
pub(crate) fn is_segmentation_refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP))
}

/// Asks the kernel to hand this socket coalesced datagrams (UDP_GRO, Linux
/// 5.0+), each receive saying its segment size.
pub(crate) fn enable_gro(sock: &UdpSocket) -> io::Result<()> {
    Ok(setsockopt(sock, sockopt::UdpGroSegment, &true)?)
}

/// Room for the control message of a coalesced receive.
pub(crate) fn gro_cmsg_space() -> Vec<u8> {
    nix::cmsg_space!(libc::c_int)
}

/// One receive on a socket with GRO: the bytes, and the size of each
/// datagram in them when the kernel coalesced several (None: one datagram).
#[allow(clippy::ptr_arg)] // nix's recvmsg takes the control buffer as a Vec
pub(crate) fn recv_segments(
    sock: &UdpSocket,
    buf: &mut [u8],
    space: &mut Vec<u8>,
) -> io::Result<(usize, Option<usize>)> {
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(space), MsgFlags::empty())?;
    let segment = msg.cmsgs()?.find_map(|c| match c {
        ControlMessageOwned::UdpGroSegments(size) => usize::try_from(size).ok(),
        _ => None,
    });
    Ok((msg.bytes, segment))
}

/// Asks the kernel to poll the device's receive queue for up to `usec`
/// before a blocking receive sleeps (SO_BUSY_POLL; above
/// net.core.busy_read it needs CAP_NET_ADMIN).
pub(crate) fn set_busy_poll(stream: &std::net::TcpStream, usec: u32) -> io::Result<()> {
    let value = usec as libc::c_int;
    // SAFETY: an int option of the size given, read by the kernel only.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_matches_kernel_layout() {
        // busy_time sits at byte 168 of struct tcp_info; sndbuf_limited ends at 192.
        assert_eq!(std::mem::size_of::<RawTcpInfo>(), 192);
    }
}
