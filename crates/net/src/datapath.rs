//! The loops that move test bytes: TCP send/receive and paced UDP
//! send/receive, one thread per stream, blocking sockets with short
//! timeouts so every loop notices a stop request and a stalled peer.
//!
//! Zero copies beyond the kernel's: one pre-filled buffer is written again
//! and again, one buffer is read into and dropped. Counters are atomics the
//! sampler reads once a second.

use crate::socket::{describe, is_timeout, MAX_TCP_LEN, MAX_UDP_LEN, POLL};
use crate::stats::UdpRecvStats;
use crate::udp_header::wall_now;
use crate::udp_header::UdpHeader;
use crate::udp_offload;
use std::io::{self, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Incompressible payload: never zeros, so compression on the path cannot inflate figures.
pub fn payload(len: usize) -> Vec<u8> {
    let mut rng = fastrand::Rng::new();
    let mut buf = vec![0u8; len];
    rng.fill(&mut buf);
    buf
}

/// Writes smaller than this are copied even under `--zerocopy`: below it
/// sendfile(2) cost more CPU per byte than the copy it saves (a C probe on
/// loopback, 2 vCPUs, both ends' CPU per GB against copying, medians of 3:
/// 1.32x at 16 KiB, 0.64x at 64 KiB, 0.98x at 128 KiB; docs/performance.md).
pub const ZEROCOPY_MIN_LEN: usize = 64 * 1024;

/// Where a TCP sender's bytes come from: its buffer, copied into the kernel
/// by each write, or the same bytes in a [`crate::os::PayloadFile`] the
/// kernel sends by reference (`--zerocopy`).
pub struct TcpSource<'a> {
    pub buf: &'a [u8],
    pub by_reference: Option<&'a crate::os::PayloadFile>,
    /// Set false if the kernel refused a send by reference and the stream
    /// went on copying.
    pub sent_by_reference: &'a AtomicBool,
}

impl TcpSource<'_> {
    fn send(&self, mut stream: &TcpStream, len: usize) -> io::Result<usize> {
        let Some(file) = self.by_reference.filter(|_| self.sent_by_reference.load(Ordering::Relaxed)) else {
            return stream.write(&self.buf[..len]);
        };
        match file.send(stream, len) {
            Err(e) if crate::os::is_send_by_reference_refused(&e) => {
                self.sent_by_reference.store(false, Ordering::Relaxed);
                stream.write(&self.buf[..len])
            }
            r => r,
        }
    }
}

/// Sends `source` repeatedly until `stop`, `limit` bytes, or an error. A
/// peer that accepts nothing for `stall` is an error ("stalled").
pub fn tcp_send(
    stream: &TcpStream,
    source: &TcpSource,
    stop: &AtomicBool,
    limit: Option<u64>,
    sent: &AtomicU64,
    stall: Duration,
) -> Result<(), String> {
    let _ = stream.set_write_timeout(Some(POLL));
    let mut total = 0u64;
    let mut last_progress = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let chunk = match limit {
            Some(l) if l <= total => return Ok(()),
            Some(l) => source.buf.len().min((l - total) as usize),
            None => source.buf.len(),
        };
        match source.send(stream, chunk) {
            Ok(0) => return Err("the peer closed the connection".into()),
            Ok(n) => {
                total += n as u64;
                sent.fetch_add(n as u64, Ordering::Relaxed);
                last_progress = Instant::now();
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if last_progress.elapsed() >= stall {
                    return Err(format!(
                        "no data accepted for {:.0} s (link down or peer stalled)",
                        stall.as_secs_f64()
                    ));
                }
            }
            Err(e) if stop.load(Ordering::Relaxed) => {
                let _ = e;
                return Ok(());
            }
            Err(e) => return Err(describe(&e)),
        }
    }
    Ok(())
}

/// Reads and discards until end of stream or `stop`; no data for `stall` is
/// an error. With `skip_copy` (and a kernel that can:
/// [`crate::os::DISCARDS_RECEIVED`]) the bytes are dropped in the kernel
/// instead of copied into a buffer first.
pub fn tcp_recv(
    mut stream: &TcpStream,
    len: usize,
    skip_copy: bool,
    stop: &AtomicBool,
    received: &AtomicU64,
    stall: Duration,
) -> Result<(), String> {
    let _ = stream.set_read_timeout(Some(POLL));
    let read_len = len.max(64 * 1024);
    let mut buf = if skip_copy { Vec::new() } else { vec![0u8; read_len] };
    let mut last_progress = Instant::now();
    loop {
        let got = if skip_copy { crate::os::discard_received(stream, read_len) } else { stream.read(&mut buf) };
        match got {
            Ok(0) => return Ok(()),
            Ok(n) => {
                received.fetch_add(n as u64, Ordering::Relaxed);
                last_progress = Instant::now();
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                if last_progress.elapsed() >= stall {
                    return Err(format!(
                        "no data received for {:.0} s (link down or peer stalled)",
                        stall.as_secs_f64()
                    ));
                }
            }
            Err(_) if stop.load(Ordering::Relaxed) => return Ok(()),
            Err(e) => return Err(describe(&e)),
        }
    }
}

/// Sends datagrams of `len` bytes on a connected socket at `rate_bits` until
/// `stop` or `limit` bytes; counts bytes and packets, and keeps the last
/// sequence number written (a failed send uses one up too). With
/// `segment` (`--gsro`) several datagrams leave in one system call
/// (UDP_SEGMENT), each with its own header, in bursts of what the rate
/// allows ([`udp_offload::datagrams_due`]); a kernel that refuses sends one
/// per call from then on. `counters.offloaded` ends true when bursts were sent.
#[allow(clippy::too_many_arguments)] // the hot loop takes its settings and counters flat
pub fn udp_send(
    sock: &UdpSocket,
    len: usize,
    rate_bits: f64,
    header: UdpHeader,
    segment: bool,
    stop: &AtomicBool,
    limit: Option<u64>,
    counters: &UdpSendCounters,
) -> Result<(), String> {
    let len = len.clamp(header.len(), MAX_UDP_LEN);
    let mut max = if segment { udp_offload::max_burst(len) } else { 1 };
    let mut buf = payload(len * max);
    let bytes_per_sec = (rate_bits / 8.0).max(1.0);
    let mut goal = udp_offload::burst_goal(bytes_per_sec, len, max);
    let start = Instant::now();
    let mut seq = 0u64;
    let mut total = 0u64;
    let mut refused = 0u32;
    while !stop.load(Ordering::Relaxed) {
        if limit.is_some_and(|l| total >= l) {
            return Ok(());
        }
        let owed = start.elapsed().as_secs_f64() * bytes_per_sec - total as f64;
        let left = limit.map(|l| l - total);
        let Some(n) = udp_offload::datagrams_due(owed, len, goal, max, left) else {
            let wait = ((goal - 1) as f64 * len as f64 - owed) / bytes_per_sec;
            std::thread::sleep(Duration::from_secs_f64(wait.clamp(0.0, 0.05)));
            continue;
        };
        let now = wall_now();
        for (i, d) in buf[..n * len].chunks_mut(len).enumerate() {
            header.write(d, seq + 1 + i as u64, now);
        }
        let result =
            if n > 1 { crate::os::send_segments(sock, &buf[..n * len], len as u16) } else { sock.send(&buf[..len]) };
        match result {
            Err(e) if n > 1 && crate::os::is_segmentation_refused(&e) => {
                // Not sent: the same sequence numbers go again, one per call.
                (max, goal) = (1, 1);
                continue;
            }
            Ok(bytes) => {
                total += bytes as u64;
                counters.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
                counters.packets.fetch_add(n as u64, Ordering::Relaxed);
                if n > 1 {
                    counters.offloaded.store(true, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                refused += 1;
                if refused > 10 {
                    return Err("the peer's UDP port is closed (ICMP port unreachable)".into());
                }
            }
            Err(e) if is_timeout(&e) || crate::os::is_no_buffer_space(&e) => {}
            Err(e) => return Err(describe(&e)),
        }
        seq += n as u64;
        counters.last_seq.store(seq, Ordering::Relaxed);
    }
    Ok(())
}

/// What a UDP sender counts as it goes, read by the sampler and at the end.
#[derive(Default)]
pub struct UdpSendCounters {
    pub bytes: std::sync::Arc<AtomicU64>,
    pub packets: std::sync::Arc<AtomicU64>,
    /// The sequence number of the last datagram (iperf2's final datagram carries the next one).
    pub last_seq: std::sync::Arc<AtomicU64>,
    /// At least one burst left in a single send (GSO).
    pub offloaded: std::sync::Arc<AtomicBool>,
}

/// Receives datagrams in `header`'s format until `stop` or `limit` bytes,
/// accounting each. With `coalesce` (`--gsro`) the kernel may hand several
/// datagrams in one receive (UDP_GRO); they are split at the segment size
/// it reports and each is accounted on its own. `coalescing` ends true when
/// the kernel accepted GRO on this socket.
pub fn udp_recv(
    sock: &UdpSocket,
    header: UdpHeader,
    coalesce: bool,
    stop: &AtomicBool,
    limit: Option<u64>,
    received: &AtomicU64,
    coalescing: &AtomicBool,
) -> UdpRecvStats {
    let _ = sock.set_read_timeout(Some(POLL));
    let gro = coalesce && crate::os::enable_gro(sock).is_ok();
    coalescing.store(gro, Ordering::Relaxed);
    // A coalesced receive holds up to 64 KiB of datagrams; room for twice that.
    let mut buf = vec![0u8; if gro { 2 * 65_536 } else { MAX_UDP_LEN }];
    let mut space = crate::os::gro_cmsg_space();
    let mut stats = UdpRecvStats::default();
    while !stop.load(Ordering::Relaxed) && limit.is_none_or(|l| received.load(Ordering::Relaxed) < l) {
        let got = if gro {
            crate::os::recv_segments(sock, &mut buf, &mut space)
        } else {
            sock.recv(&mut buf).map(|n| (n, None))
        };
        let Ok((n, segment)) = got else { continue };
        let arrived = wall_now().as_secs_f64();
        for d in udp_offload::datagrams_in(n, segment) {
            if let Some((seq, sent_s)) = header.parse(&buf[d.clone()]) {
                stats.record(seq, sent_s, arrived, d.len());
                received.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
        }
    }
    stats
}

/// Per-interval throughput from byte counters: call [`Sampler::tick`] on
/// each interval boundary.
pub struct Sampler {
    start: Instant,
    last_t: f64,
    last_bytes: u64,
}

impl Default for Sampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Sampler {
    pub fn new() -> Self {
        Sampler { start: Instant::now(), last_t: 0.0, last_bytes: 0 }
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// A sample for the bytes moved since the previous tick.
    pub fn tick(&mut self, total_bytes: u64) -> headroom_result::Sample {
        let t = self.start.elapsed().as_secs_f64();
        let dt = (t - self.last_t).max(1e-9);
        let rate = total_bytes.saturating_sub(self.last_bytes) as f64 / dt;
        self.last_t = t;
        self.last_bytes = total_bytes;
        headroom_result::Sample { t_s: t, bytes_per_sec: rate, ..Default::default() }
    }
}

/// Applies the asked socket buffer and reads what the kernel granted; None
/// when none was asked (TCP autotunes its buffers during the test then).
fn granted_buffers(sock: &impl crate::os::AsSocket, window: Option<u32>) -> Option<headroom_result::BufferPair> {
    window?;
    let _ = crate::socket::set_window(sock, window);
    crate::socket::buffers_of(sock)
}

/// Sums a set of counters.
pub fn total(counters: &[std::sync::Arc<AtomicU64>]) -> u64 {
    counters.iter().map(|c| c.load(Ordering::Relaxed)).sum()
}

/// Each connection as the streams that run on it, for
/// [`StreamSet::start_tcp`]: one way, the connection itself, sending or
/// not; both ways at once on the same connection (iperf2's
/// `--full-duplex`), a handle of each that writes, and after all of those
/// the connections that read, so the sending streams come first.
pub fn tcp_streams(socks: Vec<TcpStream>, sends: bool, both_ways: bool) -> io::Result<Vec<(TcpStream, bool)>> {
    if !both_ways {
        return Ok(socks.into_iter().map(|s| (s, sends)).collect());
    }
    let writers = socks.iter().map(|s| s.try_clone().map(|w| (w, true))).collect::<io::Result<Vec<_>>>()?;
    Ok(writers.into_iter().chain(socks.into_iter().map(|s| (s, false))).collect())
}

/// One running data stream (TCP or UDP) and its thread.
pub struct RunningStream {
    pub index: u32,
    pub sending: bool,
    pub bytes: std::sync::Arc<AtomicU64>,
    pub packets: std::sync::Arc<AtomicU64>,
    /// UDP senders: the sequence number of the last datagram (iperf2's
    /// final datagram carries the next one).
    pub last_seq: std::sync::Arc<AtomicU64>,
    /// The socket buffers the kernel granted, read when the stream started.
    pub buffers: Option<headroom_result::BufferPair>,
    /// A TCP receiver that dropped its bytes in the kernel (`--skip-rx-copy`).
    pub rx_copy_skipped: bool,
    /// A TCP sender whose every byte the kernel sent by reference (`--zerocopy`).
    pub sent_by_reference: std::sync::Arc<AtomicBool>,
    /// UDP (`--gsro`): a sender that sent bursts in one call (GSO), a
    /// receiver whose kernel coalesced for it (GRO).
    pub udp_offloaded: std::sync::Arc<AtomicBool>,
    tcp: Option<TcpStream>,
    handle: Option<std::thread::JoinHandle<Option<UdpRecvStats>>>,
}

/// What one stream did, once stopped.
#[derive(Debug, Clone, Default)]
pub struct StreamOutcome {
    pub index: u32,
    pub sending: bool,
    pub bytes: u64,
    pub packets: u64,
    pub tcp_info: Option<crate::tcpinfo::TcpInfo>,
    pub udp: Option<UdpRecvStats>,
    pub buffers: Option<headroom_result::BufferPair>,
    /// A TCP receiver that dropped its bytes in the kernel (`--skip-rx-copy`).
    pub rx_copy_skipped: bool,
    /// A TCP sender whose every byte the kernel sent by reference (`--zerocopy`).
    pub sent_by_reference: bool,
    /// UDP (`--gsro`): a sender that sent bursts in one call (GSO), a
    /// receiver whose kernel coalesced for it (GRO).
    pub udp_offloaded: bool,
}

/// A set of data streams running in their own threads, stopped together.
pub struct StreamSet {
    /// Stops everything (receivers too).
    pub stop: std::sync::Arc<AtomicBool>,
    /// Stops the sending streams only; they close their write side.
    pub stop_send: std::sync::Arc<AtomicBool>,
    pub streams: Vec<RunningStream>,
    error: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// Set when any sending stream ends (limit reached or error).
    finished_senders: std::sync::Arc<AtomicU64>,
}

/// How a stream set runs.
#[derive(Debug, Clone, Copy)]
pub struct StreamParams {
    pub len: usize,
    /// Bytes per sending stream before it stops (fixed-size transfer).
    pub limit: Option<u64>,
    /// No progress for this long is an error.
    pub stall: Duration,
    /// UDP: rate per sending stream, bits/s.
    pub udp_rate: f64,
    /// Socket buffer asked for every stream, bytes (the client's were set
    /// before connecting; a server sets its own here).
    pub window: Option<u32>,
    /// TCP receivers drop what arrives in the kernel, without copying it
    /// into user space, where the platform can (`--skip-rx-copy`).
    pub skip_rx_copy: bool,
    /// TCP senders hand the kernel their payload by reference instead of
    /// copying it in, where the platform can and writes are at least
    /// [`ZEROCOPY_MIN_LEN`] (`--zerocopy`).
    pub zerocopy: bool,
    /// UDP senders hand the kernel bursts of datagrams (GSO) and receivers
    /// take them coalesced (GRO), where the kernel can (`--gsro`).
    pub udp_offload: bool,
}

impl StreamParams {
    /// Whether this set's TCP receivers skip the copy: asked, and possible here.
    pub fn skips_rx_copy(&self) -> bool {
        self.skip_rx_copy && crate::os::DISCARDS_RECEIVED
    }

    /// The file this set's TCP senders send `payload` from by reference:
    /// asked, writes large enough to pay, and a platform that can.
    fn payload_file(&self, payload: &[u8]) -> Option<crate::os::PayloadFile> {
        (self.zerocopy && self.len >= ZEROCOPY_MIN_LEN).then(|| crate::os::PayloadFile::new(payload).ok()).flatten()
    }
}

impl StreamSet {
    fn empty() -> Self {
        StreamSet {
            stop: Default::default(),
            stop_send: Default::default(),
            streams: Vec::new(),
            error: Default::default(),
            finished_senders: Default::default(),
        }
    }

    /// Starts TCP streams; `true` in a pair means this side sends on it.
    pub fn start_tcp(socks: Vec<(TcpStream, bool)>, p: StreamParams) -> Self {
        let mut set = Self::empty();
        let buf = std::sync::Arc::new(payload(p.len.clamp(1, MAX_TCP_LEN)));
        let any_sender = socks.iter().any(|(_, sending)| *sending);
        let file = any_sender.then(|| p.payload_file(&buf)).flatten().map(std::sync::Arc::new);
        for (i, (sock, sending)) in socks.into_iter().enumerate() {
            let _ = sock.set_nodelay(false);
            let buffers = granted_buffers(&sock, p.window);
            let bytes = std::sync::Arc::new(AtomicU64::new(0));
            let sent_by_reference = std::sync::Arc::new(AtomicBool::new(sending && file.is_some()));
            let (b, stop, err, fin, buf2, file2, by_ref) = (
                bytes.clone(),
                if sending { set.stop_send.clone() } else { set.stop.clone() },
                set.error.clone(),
                set.finished_senders.clone(),
                buf.clone(),
                file.clone(),
                sent_by_reference.clone(),
            );
            let clone = sock.try_clone().ok();
            let handle = std::thread::Builder::new()
                .name(format!("tcp-{}-{i}", if sending { "send" } else { "recv" }))
                .spawn(move || {
                    let r = if sending {
                        let source =
                            TcpSource { buf: &buf2, by_reference: file2.as_deref(), sent_by_reference: &by_ref };
                        let r = tcp_send(&sock, &source, &stop, p.limit, &b, p.stall);
                        let _ = sock.shutdown(std::net::Shutdown::Write);
                        fin.fetch_add(1, Ordering::Relaxed);
                        r
                    } else {
                        tcp_recv(&sock, p.len, p.skips_rx_copy(), &stop, &b, p.stall)
                    };
                    if let Err(e) = r {
                        err.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                    }
                    None
                })
                .expect("spawn a stream thread");
            set.streams.push(RunningStream {
                index: i as u32,
                sending,
                bytes,
                packets: Default::default(),
                last_seq: Default::default(),
                buffers,
                rx_copy_skipped: !sending && p.skips_rx_copy(),
                sent_by_reference,
                udp_offloaded: Default::default(),
                tcp: clone,
                handle: Some(handle),
            });
        }
        set
    }

    /// Starts UDP streams on connected sockets.
    pub fn start_udp(socks: Vec<(UdpSocket, bool)>, header: UdpHeader, p: StreamParams) -> Self {
        let mut set = Self::empty();
        for (i, (sock, sending)) in socks.into_iter().enumerate() {
            let buffers = granted_buffers(&sock, p.window);
            let counters = UdpSendCounters::default();
            let (stop, err, fin) = (
                if sending { set.stop_send.clone() } else { set.stop.clone() },
                set.error.clone(),
                set.finished_senders.clone(),
            );
            set.streams.push(RunningStream {
                index: i as u32,
                sending,
                bytes: counters.bytes.clone(),
                packets: counters.packets.clone(),
                last_seq: counters.last_seq.clone(),
                buffers,
                rx_copy_skipped: false,
                sent_by_reference: Default::default(),
                udp_offloaded: counters.offloaded.clone(),
                tcp: None,
                handle: None,
            });
            let handle = std::thread::Builder::new()
                .name(format!("udp-{i}"))
                .spawn(move || {
                    if sending {
                        let r = udp_send(&sock, p.len, p.udp_rate, header, p.udp_offload, &stop, p.limit, &counters);
                        if let Err(e) = r {
                            err.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                        }
                        fin.fetch_add(1, Ordering::Relaxed);
                        None
                    } else {
                        let c = &counters;
                        Some(udp_recv(&sock, header, p.udp_offload, &stop, p.limit, &c.bytes, &c.offloaded))
                    }
                })
                .expect("spawn a stream thread");
            set.streams.last_mut().expect("pushed above").handle = Some(handle);
        }
        set
    }

    /// Byte counters of the streams this side sends (true) or receives (false) on.
    pub fn counters(&self, sending: bool) -> Vec<std::sync::Arc<AtomicU64>> {
        self.streams.iter().filter(|s| s.sending == sending).map(|s| s.bytes.clone()).collect()
    }

    /// Each stream's byte count now, in stream order.
    pub fn snapshot(&self) -> Vec<u64> {
        self.streams.iter().map(|s| s.bytes.load(Ordering::Relaxed)).collect()
    }

    /// All bytes moved so far, both directions.
    pub fn total_bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes.load(Ordering::Relaxed)).sum()
    }

    /// The first error any stream hit.
    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether every sending stream has ended (and there is at least one).
    pub fn senders_finished(&self) -> bool {
        let n = self.streams.iter().filter(|s| s.sending).count() as u64;
        n > 0 && self.finished_senders.load(Ordering::Relaxed) >= n
    }

    /// Whether every stream thread has returned.
    pub fn all_finished(&self) -> bool {
        self.streams.iter().all(|s| s.handle.as_ref().is_none_or(|h| h.is_finished()))
    }

    /// Stops every stream: TCP_INFO is read from sending streams first, then
    /// senders stop and receivers get `drain` to read what is in flight.
    pub fn finish(&mut self, drain: Duration) -> Vec<StreamOutcome> {
        let infos: Vec<Option<crate::tcpinfo::TcpInfo>> = self
            .streams
            .iter()
            .map(|s| if s.sending { s.tcp.as_ref().and_then(crate::tcpinfo::read) } else { None })
            .collect();
        // Senders stop now; receivers stop at EOF or after the drain time.
        self.stop_send.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + drain;
        while Instant::now() < deadline && !self.receivers_finished() {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.stop_send.store(true, Ordering::Relaxed);
        let mut out = Vec::with_capacity(self.streams.len());
        for (s, info) in self.streams.iter_mut().zip(infos) {
            if let Some(t) = &s.tcp {
                let _ = t.shutdown(std::net::Shutdown::Both);
            }
            let udp = s.handle.take().and_then(|h| h.join().ok()).flatten();
            out.push(StreamOutcome {
                index: s.index,
                sending: s.sending,
                bytes: s.bytes.load(Ordering::Relaxed),
                packets: s.packets.load(Ordering::Relaxed),
                tcp_info: info,
                udp,
                buffers: s.buffers,
                rx_copy_skipped: s.rx_copy_skipped,
                sent_by_reference: s.sent_by_reference.load(Ordering::Relaxed),
                udp_offloaded: s.udp_offloaded.load(Ordering::Relaxed),
            });
        }
        out
    }

    /// Whether every receiving stream's thread has returned (end of stream, stop or error).
    pub fn receivers_finished(&self) -> bool {
        self.streams.iter().filter(|s| !s.sending).all(|s| s.handle.as_ref().is_none_or(|h| h.is_finished()))
    }

    /// Whether this side sends on any stream.
    pub fn has_senders(&self) -> bool {
        self.streams.iter().any(|s| s.sending)
    }

    /// Whether this side receives on any stream.
    pub fn has_receivers(&self) -> bool {
        self.streams.iter().any(|s| !s.sending)
    }

    /// Tells the sending streams to stop without waiting (the peer's receivers then see EOF).
    pub fn stop_senders(&self) {
        self.stop_send.store(true, Ordering::Relaxed);
    }
}

impl Drop for StreamSet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.stop_send.store(true, Ordering::Relaxed);
        for s in &self.streams {
            if let Some(t) = &s.tcp {
                let _ = t.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn connected_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (client, listener.accept().unwrap().0)
    }

    /// `--zerocopy`: what arrives is the payload itself, byte for byte, and
    /// the stream says every byte went by reference.
    #[test]
    fn a_sender_by_reference_delivers_the_payload_itself() {
        let buf = payload(ZEROCOPY_MIN_LEN * 2);
        let file = crate::os::PayloadFile::new(&buf).unwrap();
        let (tx, mut rx) = connected_pair();
        let by_reference = AtomicBool::new(true);
        let source = TcpSource { buf: &buf, by_reference: Some(&file), sent_by_reference: &by_reference };
        let sent = AtomicU64::new(0);
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            rx.read_to_end(&mut got).map(|_| got)
        });
        let limit = buf.len() as u64;
        tcp_send(&tx, &source, &AtomicBool::new(false), Some(limit), &sent, Duration::from_secs(5)).unwrap();
        tx.shutdown(std::net::Shutdown::Write).unwrap();
        let got = reader.join().unwrap().unwrap();
        assert_eq!(sent.load(Ordering::Relaxed), limit);
        assert!(got == buf, "{} bytes arrived, not the {} of the payload", got.len(), buf.len());
        assert!(by_reference.load(Ordering::Relaxed), "the kernel took every send by reference");
    }

    /// A peer that reads nothing stops a sender by reference as it stops a
    /// copying one: the send times out and the stall is reported.
    #[test]
    fn a_sender_by_reference_to_a_peer_that_reads_nothing_reports_the_stall() {
        let buf = payload(ZEROCOPY_MIN_LEN);
        let file = crate::os::PayloadFile::new(&buf).unwrap();
        let (tx, _silent) = connected_pair();
        let by_reference = AtomicBool::new(true);
        let source = TcpSource { buf: &buf, by_reference: Some(&file), sent_by_reference: &by_reference };
        let r = tcp_send(&tx, &source, &AtomicBool::new(false), None, &AtomicU64::new(0), Duration::from_millis(500));
        let e = r.expect_err("a peer that reads nothing stalls the sender");
        assert!(e.contains("no data accepted"), "{e}");
    }
}
