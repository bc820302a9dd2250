//! The NBD client: `nbd://HOST[:PORT][/EXPORT]` as a disk target, through
//! libnbd (the NBD project's reference client library, the one qemu-img,
//! nbdcopy and fio's nbd engine use), bound by hand in [`ffi`].
//!
//! What it owns: connecting (with timeouts: TCP connect and handshake here,
//! libnbd's own calls never block), reading what the server granted (export
//! size, block sizes, flush, FUA, structured replies), and one engine per
//! worker whose queue depth is the number of NBD requests outstanding on the
//! wire. Fsync is NBD_CMD_FLUSH; `--sync dsync` sets the FUA flag on every
//! write. The target is the whole export: prepare_share (headroom-disk)
//! keeps writes behind `--destructive` and the signature checks.
//!
//! Why libnbd rather than a Rust crate: no maintained Rust NBD client covers
//! the fixed-newstyle handshake, structured replies and block size
//! negotiation; libnbd does, is LGPL-2.1+ (loaded at run time), and its
//! asynchronous API lets headroom keep `depth` requests in flight on one
//! socket from one thread, with its own poll(2) loop.
//!
//! Long (about 700 lines): every `unsafe` call into libnbd (handshake, share, engine and its
//! completion callbacks) is kept in one file to be read together; about 550 lines of code, the rest
//! its unit tests.

#[cfg(test)]
mod captured_frames;
mod ffi;

use crate::transport::{self, Origin, Spread};
use crate::url::NbdUrl;
use crate::wait;
use crate::ProtoError;
use ffi::{CompletionCallback, Handle};
use headroom_disk::{
    BufferPool, Completion, DiskError, IoEngine, IoKind, IoUnit, Setting, Share, ShareIo, ShareKind, SyncMode,
    TargetOptions,
};
use headroom_result::ProtocolInfo;
use headroom_units::setting::Message;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_int, c_void, CString};
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a TCP connect and the NBD handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long requests may be outstanding with nothing at all coming back
/// before the server counts as gone (a cut link, a hung server).
const REPLY_TIMEOUT: Duration = Duration::from_secs(8);
/// Any one request, from its issue to its reply, however the server
/// trickles its bytes: the SCSI layer's (and Linux nbd's) default.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(if cfg!(test) { 3 } else { 30 });

/// What the server granted in the handshake.
#[derive(Debug, Clone)]
struct Granted {
    size: u64,
    read_only: bool,
    can_flush: bool,
    can_fua: bool,
    structured_replies: bool,
    /// Block size constraints (0: not advertised).
    min_block: u64,
    preferred_block: u64,
    max_block: u64,
    /// Handshake style, e.g. `newstyle-fixed`.
    protocol: Option<String>,
}

impl Granted {
    fn read(h: &Handle) -> Result<Granted, String> {
        Ok(Granted {
            size: h.size()?,
            read_only: h.is_read_only()?,
            can_flush: h.can_flush()?,
            can_fua: h.can_fua()?,
            structured_replies: h.structured_replies()?,
            min_block: h.block_size(ffi::SIZE_MINIMUM)?,
            preferred_block: h.block_size(ffi::SIZE_PREFERRED)?,
            max_block: h.block_size(ffi::SIZE_MAXIMUM)?,
            protocol: h.protocol(),
        })
    }

    fn as_map(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        m.insert("export_size".into(), self.size);
        m.insert("read_only".into(), u64::from(self.read_only));
        m.insert("can_flush".into(), u64::from(self.can_flush));
        m.insert("can_fua".into(), u64::from(self.can_fua));
        m.insert("structured_replies".into(), u64::from(self.structured_replies));
        for (name, v) in [
            ("block_size_minimum", self.min_block),
            ("block_size_preferred", self.preferred_block),
            ("block_size_maximum", self.max_block),
        ] {
            if v > 0 {
                m.insert(name.into(), v);
            }
        }
        m
    }
}

/// The URL as shown and recorded: `nbd://HOST:PORT/EXPORT`.
fn display(url: &NbdUrl) -> String {
    format!("nbd://{}/{}", url.server.addr(), url.export)
}

/// Connects (from `source`) and finishes the handshake within
/// [`CONNECT_TIMEOUT`] (or until `stop`); the error is one line naming the
/// server or the export.
fn connect_handle(url: &NbdUrl, source: &crate::Source, stop: &AtomicBool) -> Result<(Handle, Origin), ProtoError> {
    let shown = display(url);
    let addrs = transport::resolve(&url.server.addr())
        .map_err(|e| ProtoError::Unreachable(format!("{shown}: cannot resolve {}: {e}", url.server.host)))?;
    let stream = transport::connect(&addrs, source, CONNECT_TIMEOUT, stop).map_err(|e| {
        ProtoError::of_kind(e.kind(), format!("{shown}: cannot connect to the NBD server {}: {e}", url.server))
    })?;
    let origin = Origin::of(&stream, source);
    let socket_error = |e: io::Error| ProtoError::of_kind(e.kind(), format!("{shown}: {e}"));
    // Requests are small and latency-bound; Nagle would hold a 28-byte read
    // request behind the previous one's unacknowledged segment.
    stream.set_nodelay(true).map_err(socket_error)?;
    stream.set_nonblocking(true).map_err(socket_error)?;
    Ok((handshake(url, stream.into(), stop)?, origin))
}

/// The NBD handshake on a connected, non-blocking socket (libnbd owns it from here).
fn handshake(url: &NbdUrl, sock: std::os::fd::OwnedFd, stop: &AtomicBool) -> Result<Handle, ProtoError> {
    let shown = display(url);
    let libnbd = |e: String| ProtoError::Usage(format!("{shown}: {e}"));
    let h = Handle::new().map_err(libnbd)?;
    let name = CString::new(url.export.as_bytes())
        .map_err(|_| ProtoError::Usage(format!("{shown}: the export name holds a NUL byte")))?;
    h.set_export_name(&name).map_err(libnbd)?;
    h.set_pread_initialize(false).map_err(libnbd)?;
    h.aio_connect_socket(sock.into_raw_fd()).map_err(|e| handshake_error(url, &e))?;
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    while !h.is_ready() {
        if h.is_dead() {
            return Err(handshake_error(url, &ffi::last_error()));
        }
        if stop.load(Ordering::Relaxed) {
            return Err(ProtoError::Stopped(format!("{shown}: {}", wait::stopped("the NBD handshake"))));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ProtoError::Protocol(format!(
                "{shown}: no NBD handshake from {} within {}s (is it an NBD server?)",
                url.server,
                CONNECT_TIMEOUT.as_secs()
            )));
        }
        pump(&h, left.min(wait::SLICE)).map_err(|e| handshake_error(url, &e))?;
    }
    Ok(h)
}

/// One line for a failed handshake: a refused export is named as such (the
/// user's to fix); anything else is the server's.
fn handshake_error(url: &NbdUrl, libnbd: &str) -> ProtoError {
    let shown = display(url);
    // libnbd reports NBD_REP_ERR_UNKNOWN and friends as the server's reply to NBD_OPT_GO.
    if libnbd.contains("opt_go") || libnbd.contains("export") {
        let export = if url.export.is_empty() { "the default export".to_string() } else { format!("'{}'", url.export) };
        ProtoError::Usage(format!(
            "{shown}: the server refused {export} ({libnbd}); check the name after the host, e.g. nbd://{}/disk0",
            url.server
        ))
    } else {
        ProtoError::Protocol(format!("{shown}: NBD handshake with {} failed: {libnbd}", url.server))
    }
}

/// Waits up to `timeout` for the socket to be ready for what libnbd waits
/// for, then lets libnbd read and write. Ok(true) when the socket was ready.
fn pump(h: &Handle, timeout: Duration) -> Result<bool, String> {
    let dir = h.direction();
    let mut events = 0;
    if dir & ffi::AIO_DIRECTION_READ != 0 {
        events |= libc::POLLIN;
    }
    if dir & ffi::AIO_DIRECTION_WRITE != 0 {
        events |= libc::POLLOUT;
    }
    let revents = crate::os::poll(h.fd(), events, timeout).map_err(|e| format!("poll: {e}"))?;
    if revents == 0 {
        return Ok(false);
    }
    // A hang-up or error is seen by reading: libnbd then reports why.
    if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
        h.notify_read()?;
    }
    if revents & libc::POLLOUT != 0 && !h.is_dead() {
        h.notify_write()?;
    }
    Ok(true)
}

/// Prepares `nbd://HOST[:PORT][/EXPORT]`: connects once to learn what the
/// server grants (size, read-only, flush, FUA, block sizes), then lets go;
/// each worker connects on its own.
pub fn open(url: &NbdUrl, opts: &TargetOptions, sources: &[crate::Source]) -> Result<Box<dyn Share>, ProtoError> {
    ffi::load().map_err(ProtoError::Usage)?;
    let shown = display(url);
    let spread = Spread::new(sources);
    let (h, origin) = connect_handle(url, spread.for_job(0), &opts.stop)?;
    let granted = Granted::read(&h).map_err(|e| ProtoError::Protocol(format!("{shown}: {e}")))?;
    h.disconnect();
    drop(h);
    if granted.size == 0 {
        return Err(ProtoError::Usage(format!("{shown}: the export is empty (0 bytes); nothing to test")));
    }
    if opts.writes && granted.read_only {
        return Err(ProtoError::Usage(format!(
            "{shown}: the server exports it read-only and this run writes; run read tests only, \
             e.g. --rw read or --rw randread"
        )));
    }
    let size = opts.size.map_or(granted.size, |s| s.min(granted.size));
    let block = granted.min_block.max(1);
    let size = size - size % block;
    if size == 0 {
        return Err(ProtoError::Invalid(
            Message::text(format!("{shown}: "))
                .and(Setting::Size)
                .then(format!(" is smaller than one block ({block} bytes)")),
        ));
    }
    Ok(Box::new(NbdShare { url: url.clone(), size, granted, spread, origin, stop: Arc::clone(&opts.stop) }))
}

/// One NBD export on a server.
#[derive(Debug)]
struct NbdShare {
    url: NbdUrl,
    size: u64,
    granted: Granted,
    /// Where each job's connection leaves from (`--bind`, `--interface`).
    spread: Spread,
    /// Where the first connection left from.
    origin: Origin,
    /// Ctrl-C: every wait ends at once.
    stop: Arc<AtomicBool>,
}

impl Share for NbdShare {
    fn url(&self) -> String {
        display(&self.url)
    }

    fn kind(&self) -> ShareKind {
        ShareKind::Export
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn capacity(&self) -> u64 {
        self.granted.size
    }

    fn block_size(&self) -> u64 {
        self.granted.min_block.max(1)
    }

    fn connect(&self, io: ShareIo) -> io::Result<Box<dyn IoEngine + Send>> {
        let shown = display(&self.url);
        let g = &self.granted;
        // Typed inside the io::Error, so the disk engine names the setting as
        // its front end spells it (DiskError::spelled).
        let refuse = |why: Message<Setting>| {
            let line = Message::text(format!("{shown}: ")).join(why);
            Err(io::Error::new(io::ErrorKind::Unsupported, DiskError::Invalid(line)))
        };
        if io.write && g.read_only {
            return refuse(Message::text("the server exports it read-only; run read tests only"));
        }
        if io.write && io.sync == SyncMode::Dsync && !g.can_fua {
            return refuse(
                Message::text("the server does not offer FUA, so ")
                    .and(Setting::Sync)
                    .then(" dsync cannot make each write stable; use ")
                    .and(Setting::Sync)
                    .then(" fsync"),
            );
        }
        if io.write && io.sync == SyncMode::Fsync && !g.can_flush {
            return refuse(
                Message::text("the server does not offer NBD_CMD_FLUSH, so ")
                    .and(Setting::Sync)
                    .then(" fsync cannot be measured"),
            );
        }
        if g.max_block > 0 && io.buf_size as u64 > g.max_block {
            return refuse(
                Message::text(format!("the server takes at most {} bytes per request; use a ", g.max_block))
                    .and(Setting::BlockSize)
                    .then(" of at most that"),
            );
        }
        let (handle, origin) = connect_handle(&self.url, self.spread.for_job(io.job), &self.stop)
            .map_err(|e| self.spread.named(io.job, io::Error::new(io::ErrorKind::ConnectionRefused, e.to_string())))?;
        self.spread.note(io.job, origin);
        Ok(Box::new(NbdEngine {
            handle: ManuallyDrop::new(handle),
            done: Box::into_raw(Box::default()),
            pool: BufferPool::new(io.depth.max(1), io.buf_size.max(1), 4096),
            queued: Vec::with_capacity(io.depth),
            fua: io.sync == SyncMode::Dsync,
            can_flush: g.can_flush,
            shown,
            issued: HashMap::with_capacity(io.depth),
            stop: Arc::clone(&self.stop),
        }))
    }

    fn info(&self) -> ProtocolInfo {
        let mut info = ProtocolInfo {
            name: "nbd".into(),
            version: self.granted.protocol.clone(),
            server: self.url.server.addr(),
            // NBD announces no limit on requests in flight.
            queue_depth_granted: None,
            granted: self.granted.as_map(),
            ..ProtocolInfo::default()
        };
        self.origin.record(&mut info);
        self.spread.record(&mut info);
        info
    }
}

/// What a command's completion callback needs: where to report, and as what.
struct Pending {
    done: *mut Vec<Completion>,
    tag: u64,
    len: u32,
}

/// Runs inside libnbd (on the engine's thread, within a notify or aio call)
/// when a reply arrives or the command fails.
unsafe extern "C" fn on_complete(user_data: *mut c_void, error: *mut c_int) -> c_int {
    // SAFETY: user_data is the Pending boxed in `issue`, alive until `free_pending`;
    // `done` outlives the handle (the engine closes the handle first).
    let p = unsafe { &*(user_data as *const Pending) };
    let err = unsafe { *error };
    let result = if err != 0 { -i64::from(err) } else { i64::from(p.len) };
    unsafe { (*p.done).push(Completion { tag: p.tag, result }) };
    // 1: retire the command now; nothing polls for it by cookie.
    1
}

/// libnbd is done with a command's closure (also when it could not be issued).
unsafe extern "C" fn free_pending(user_data: *mut c_void) {
    // SAFETY: boxed in `issue`, freed exactly once by libnbd's contract.
    drop(unsafe { Box::from_raw(user_data as *mut Pending) });
}

/// One worker's connection: `depth` NBD requests in flight on one socket.
struct NbdEngine {
    /// Closed by hand in Drop, before `done` and the buffers it may point into.
    handle: ManuallyDrop<Handle>,
    /// Completions the callbacks report, drained by getevents. A raw box:
    /// libnbd writes through it from inside its calls.
    done: *mut Vec<Completion>,
    pool: BufferPool,
    queued: Vec<IoUnit>,
    /// `--sync dsync`: every write carries FUA.
    fua: bool,
    can_flush: bool,
    shown: String,
    /// When each request in flight was issued, by tag.
    issued: HashMap<u64, Instant>,
    stop: Arc<AtomicBool>,
}

// SAFETY: the handle and the completion list are used only by the thread
// that owns the engine; libnbd touches `done` only inside calls made from it.
unsafe impl Send for NbdEngine {}

impl NbdEngine {
    fn dead(&self, libnbd: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            format!("{}: the connection to the NBD server broke ({libnbd})", self.shown),
        )
    }

    fn issue(&mut self, io: IoUnit) -> io::Result<()> {
        if io.kind == IoKind::Fsync && !self.can_flush {
            // Nothing to flush that the server lets the client ask for; only
            // reached by a layout or end-of-test flush (connect refuses
            // --sync fsync on such a server).
            // SAFETY: `done` is live and not borrowed elsewhere.
            unsafe { (*self.done).push(Completion { tag: io.tag, result: 0 }) };
            return Ok(());
        }
        let pending = Box::into_raw(Box::new(Pending { done: self.done, tag: io.tag, len: io.len }));
        let cb =
            CompletionCallback { callback: Some(on_complete), user_data: pending.cast(), free: Some(free_pending) };
        let h = self.handle.raw();
        let buf = self.pool.ptr(usize::from(io.buf_index)).cast::<c_void>();
        let len = io.len as usize;
        assert!(io.kind == IoKind::Fsync || len <= self.pool.buf_len(), "I/O larger than its buffer");
        // SAFETY: the buffer lives in the pool, which outlives the handle; the
        // runner does not touch a buffer while its I/O is in flight.
        let cookie = unsafe {
            match io.kind {
                IoKind::Read => ffi::nbd_aio_pread(h, buf, len, io.offset, cb, 0),
                IoKind::Write => {
                    let flags = if self.fua { ffi::CMD_FLAG_FUA } else { 0 };
                    ffi::nbd_aio_pwrite(h, buf, len, io.offset, cb, flags)
                }
                IoKind::Fsync => ffi::nbd_aio_flush(h, cb, 0),
            }
        };
        if cookie >= 0 {
            self.issued.insert(io.tag, Instant::now());
        }
        if cookie < 0 {
            let why = ffi::last_error();
            if self.handle.is_dead() {
                return Err(self.dead(&why));
            }
            return Err(io::Error::from_raw_os_error(match ffi::last_errno() {
                0 => libc::EIO,
                e => e,
            }));
        }
        Ok(())
    }
}

impl IoEngine for NbdEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.pool.slice_mut(usize::from(index))
    }

    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        self.queued.push(io);
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        // libnbd sends each request as it is issued (or queues it while the
        // socket is full and sends it on notify_write).
        let queued = std::mem::take(&mut self.queued);
        for io in &queued {
            self.issue(*io)?;
        }
        self.queued = queued;
        self.queued.clear();
        Ok(())
    }

    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let mut got = 0usize;
        let mut last_progress = Instant::now();
        if min == 0 && self.handle.in_flight() > 0 {
            // "Do not wait" still means "take what has arrived": one look at the socket.
            pump(&self.handle, Duration::ZERO).map_err(|e| self.dead(&e))?;
        }
        loop {
            // SAFETY: no libnbd call runs now, so nothing else touches `done`.
            let done = unsafe { &mut *self.done };
            // A dead connection fails what was in flight (ENOTCONN): say the
            // connection broke, naming the server, not a bare errno.
            if self.handle.is_dead() && done.iter().any(|c| c.result < 0) {
                return Err(self.dead(&ffi::last_error()));
            }
            got += done.len();
            for c in done.iter() {
                self.issued.remove(&c.tag);
            }
            out.append(done);
            if got >= min {
                return Ok(());
            }
            if self.handle.is_dead() {
                return Err(self.dead(&ffi::last_error()));
            }
            if self.handle.in_flight() == 0 {
                return Err(io::Error::other(format!("{}: waiting for replies with no request in flight", self.shown)));
            }
            if self.stop.load(Ordering::Relaxed) {
                return Err(wait::stopped("an NBD request"));
            }
            if self.issued.values().min().is_some_and(|t| t.elapsed() >= REQUEST_TIMEOUT) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{}: the NBD server did not complete a request within {}s",
                        self.shown,
                        REQUEST_TIMEOUT.as_secs()
                    ),
                ));
            }
            let left = REPLY_TIMEOUT.saturating_sub(last_progress.elapsed());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{}: no reply from the NBD server for {}s with {} requests outstanding (server gone or link down)",
                        self.shown,
                        REPLY_TIMEOUT.as_secs(),
                        self.handle.in_flight()
                    ),
                ));
            }
            match pump(&self.handle, left.min(wait::SLICE)) {
                Ok(true) => last_progress = Instant::now(),
                Ok(false) => {}
                Err(e) => return Err(self.dead(&e)),
            }
        }
    }
}

impl Drop for NbdEngine {
    fn drop(&mut self) {
        if !self.handle.is_dead() && self.handle.is_ready() {
            self.handle.disconnect();
        }
        // Close first: libnbd may still hold closures pointing at `done` and
        // buffers of the pool until nbd_close frees them.
        // SAFETY: dropped once, here; never used after.
        unsafe { ManuallyDrop::drop(&mut self.handle) };
        // SAFETY: allocated in connect with Box::into_raw, freed once, after the handle.
        drop(unsafe { Box::from_raw(self.done) });
    }
}

/// Fuzzing: `data` is everything a server says on one connection (fixed
/// newstyle negotiation, then replies), served to libnbd over a socketpair;
/// headroom's handshake, what-was-granted reading and one engine's read and
/// write are driven as for a real server. Never panics nor hangs.
#[cfg(feature = "fuzzing")]
pub fn fuzz_server(data: &[u8]) {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let Ok((mut server, client)) = UnixStream::pair() else { return };
    let _ = server.write_all(data);
    let _ = server.shutdown(std::net::Shutdown::Write);
    let _ = client.set_nonblocking(true);
    let url = NbdUrl { server: crate::url::Server { host: "fuzz".into(), port: 10809 }, export: String::new() };
    let stop = AtomicBool::new(false);
    let Ok(h) = handshake(&url, client.into(), &stop) else { return };
    let Ok(granted) = Granted::read(&h) else { return };
    let _ = granted.as_map();
    let mut engine = NbdEngine {
        handle: ManuallyDrop::new(h),
        done: Box::into_raw(Box::default()),
        pool: BufferPool::new(2, 4096, 4096),
        queued: Vec::new(),
        fua: false,
        can_flush: granted.can_flush,
        shown: display(&url),
        issued: HashMap::new(),
        stop: Arc::default(),
    };
    let _ = engine.queue(IoUnit { kind: IoKind::Read, offset: 0, len: 4096, buf_index: 0, tag: 0 });
    let _ = engine.queue(IoUnit { kind: IoKind::Write, offset: 4096, len: 512, buf_index: 1, tag: 1 });
    if engine.commit().is_ok() {
        let mut out = Vec::new();
        let _ = engine.getevents(2, &mut out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(export: &str) -> NbdUrl {
        NbdUrl { server: crate::url::Server { host: "127.0.0.1".into(), port: 1 }, export: export.into() }
    }

    #[test]
    fn a_refused_export_is_named() {
        let e = handshake_error(&url("disk9"), "handshake: server replied with error to opt_go request");
        assert!(matches!(e, ProtoError::Usage(_)), "a wrong export is the user's: {e:?}");
        let e = e.to_string();
        assert!(e.contains("refused 'disk9'") && e.contains("nbd://127.0.0.1:1/disk9"), "{e}");
        let e = handshake_error(&url(""), "handshake: server replied with error to opt_go request").to_string();
        assert!(e.contains("the default export"), "{e}");
        let e = handshake_error(&url("x"), "handshake: server did not send expected NBD magic");
        assert!(matches!(e, ProtoError::Protocol(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("handshake with 127.0.0.1:1 failed") && !e.contains("refused"), "{e}");
    }

    #[test]
    fn granted_values_carry_their_names() {
        let g = Granted {
            size: 1 << 30,
            read_only: false,
            can_flush: true,
            can_fua: true,
            structured_replies: true,
            min_block: 1,
            preferred_block: 4096,
            max_block: 0,
            protocol: Some("newstyle-fixed".into()),
        };
        let m = g.as_map();
        assert_eq!(m["export_size"], 1 << 30);
        assert_eq!((m["can_flush"], m["can_fua"], m["read_only"]), (1, 1, 0));
        assert_eq!(m["block_size_preferred"], 4096);
        assert!(!m.contains_key("block_size_maximum"), "not advertised: not recorded");
    }

    /// A fixed-newstyle server that grants a 1 MiB export to NBD_OPT_GO
    /// (refusing every other option), then answers each request with its
    /// first byte and trickles the rest, a byte every 200 ms, for ever.
    fn trickling_server() -> NbdUrl {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            // The share's first connection only learns the export; a worker's then asks.
            for c in l.incoming() {
                serve(c.unwrap());
            }
        });
        fn serve(mut c: std::net::TcpStream) {
            use std::io::{Read, Write};
            let reply = |opt: u32, kind: u32, data: &[u8]| {
                let mut r = 0x0003_e889_0455_65a9_u64.to_be_bytes().to_vec();
                r.extend_from_slice(&opt.to_be_bytes());
                r.extend_from_slice(&kind.to_be_bytes());
                r.extend_from_slice(&(data.len() as u32).to_be_bytes());
                r.extend_from_slice(data);
                r
            };
            c.write_all(b"NBDMAGICIHAVEOPT\0\x03").unwrap();
            let mut flags = [0u8; 4];
            c.read_exact(&mut flags).unwrap();
            loop {
                let mut head = [0u8; 16];
                if c.read_exact(&mut head).is_err() {
                    return;
                }
                let opt = u32::from_be_bytes(head[8..12].try_into().unwrap());
                let mut data = vec![0; u32::from_be_bytes(head[12..16].try_into().unwrap()) as usize];
                c.read_exact(&mut data).unwrap();
                if opt != 7 {
                    c.write_all(&reply(opt, 0x8000_0001, &[])).unwrap(); // NBD_REP_ERR_UNSUP
                    continue;
                }
                let mut info = vec![0, 0];
                info.extend_from_slice(&(1u64 << 20).to_be_bytes());
                info.extend_from_slice(&(1u16 | 4).to_be_bytes()); // HAS_FLAGS | SEND_FLUSH
                c.write_all(&reply(7, 3, &info)).unwrap(); // NBD_REP_INFO
                c.write_all(&reply(7, 1, &[])).unwrap(); // NBD_REP_ACK
                break;
            }
            let mut req = [0u8; 28];
            if c.read_exact(&mut req).is_err() || req[6..8] != [0, 0] {
                return; // gone, or NBD_CMD_DISC
            }
            let mut answer = 0x6744_6698u32.to_be_bytes().to_vec();
            answer.extend_from_slice(&[0; 4]);
            answer.extend_from_slice(&req[8..16]);
            answer.extend_from_slice(&[0; 4096]);
            for b in answer {
                if c.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        NbdUrl { server: crate::url::Server { host: "127.0.0.1".into(), port }, export: String::new() }
    }

    fn read_one(url: NbdUrl, stop: Arc<AtomicBool>) -> std::sync::mpsc::Receiver<io::Result<()>> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let opts = TargetOptions { default_size: 1 << 20, stop, ..TargetOptions::default() };
            let share = open(&url, &opts, &[]).expect("the handshake works");
            let mut e = share
                .connect(ShareIo { write: false, sync: SyncMode::None, depth: 1, buf_size: 4096, job: 0 })
                .unwrap();
            let r = e
                .queue(IoUnit { kind: IoKind::Read, offset: 0, len: 4096, buf_index: 0, tag: 0 })
                .and_then(|()| e.commit())
                .and_then(|()| e.getevents(1, &mut Vec::new()));
            let _ = tx.send(r);
        });
        rx
    }

    #[test]
    fn a_server_trickling_its_reply_cannot_hold_a_request_for_ever() {
        let r = read_one(trickling_server(), Arc::default());
        let e = r.recv_timeout(Duration::from_secs(20)).expect("the request's deadline ends it").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("did not complete a request within 3s"), "{e}");
    }

    #[test]
    fn ctrl_c_ends_a_wait_for_a_reply_at_once() {
        let stop = Arc::new(AtomicBool::new(false));
        let r = read_one(trickling_server(), Arc::clone(&stop));
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
        let e = r.recv_timeout(Duration::from_secs(2)).expect("Ctrl-C ends it within 2 s").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
    }

    #[test]
    fn nothing_listening_is_one_line_naming_the_server() {
        // Port 1 on loopback: refused at once.
        let e =
            connect_handle(&url("x"), &Default::default(), &AtomicBool::new(false)).err().expect("no server on port 1");
        assert!(matches!(e, ProtoError::Refused(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("cannot connect to the NBD server 127.0.0.1:1") && !e.contains('\n'), "{e}");
    }
}
