//! The engine trait, in the spirit of fio's ioengine ops (`queue`, `commit`,
//! `getevents`), and the buffers engines own.
//!
//! An engine moves bytes between its own aligned buffers and one open file.
//! It knows nothing of tests, timing or statistics: the runner ([`crate::run`])
//! decides what to queue and when, and timestamps completions. Later engines
//! (user-space NFS, iSCSI, NBD clients) implement the same trait. The
//! engines that use this platform's system calls live behind `crate::os`.

pub use crate::os::{force_async, PsyncEngine, UringEngine};

use crate::os::RawFile;
use crate::{EngineChoice, EngineKind};
use std::io;

/// The most threads a psync test runs. jobs x queue depth threads give psync
/// its queue depth, but `--preset nvme`'s Q32T16 would start 512; beyond ~128
/// outstanding synchronous I/Os threads cost more than any device gains.
pub const PSYNC_MAX_THREADS: u32 = 128;

/// Worker threads for a psync test of `jobs` x `queue_depth`: one per
/// outstanding I/O, at most [`PSYNC_MAX_THREADS`] (but never fewer than `jobs`).
pub fn psync_threads(jobs: u32, queue_depth: u32) -> u32 {
    jobs.saturating_mul(queue_depth).min(PSYNC_MAX_THREADS).max(jobs)
}

/// What one I/O does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// Read `len` bytes at `offset` into the buffer.
    Read,
    /// Write `len` bytes from the buffer at `offset`.
    Write,
    /// fsync(2) of the whole file; `offset`, `len` and `buf_index` are ignored.
    Fsync,
}

/// One I/O handed to [`IoEngine::queue`].
#[derive(Debug, Clone, Copy)]
pub struct IoUnit {
    /// Read, write or fsync.
    pub kind: IoKind,
    /// Byte offset in the file or device (aligned for O_DIRECT).
    pub offset: u64,
    /// Bytes to move.
    pub len: u32,
    /// Which of the engine's buffers to read into / write from.
    pub buf_index: u16,
    /// Returned unchanged in the completion (the runner's slot number).
    pub tag: u64,
}

/// A finished I/O.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    /// The [`IoUnit::tag`] the I/O was queued with.
    pub tag: u64,
    /// Bytes moved, or a negative errno.
    pub result: i64,
}

/// fio's ioengine ops, reduced to what headroom needs.
pub trait IoEngine {
    /// Buffer `index` (0..depth), aligned for O_DIRECT.
    fn buffer_mut(&mut self, index: u16) -> &mut [u8];
    /// Queues one I/O; it may not start until [`commit`](Self::commit).
    fn queue(&mut self, io: IoUnit) -> io::Result<()>;
    /// Starts every queued I/O (one system call for the batch where possible).
    fn commit(&mut self) -> io::Result<()>;
    /// Waits until at least `min` I/Os completed (0: do not wait) and appends
    /// every completion available to `out`.
    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()>;
}

/// The largest block for which `--fixedbufs auto` registers buffers. A
/// registered buffer reaches the block layer as one bvec per page, so past
/// this size a bio may exceed a device's `max_segments` (loop: 128, NVMe
/// from 33) and be split, which costs a virtio disk far more than the pages
/// it saves and a throttled device a second charge (docs/performance.md,
/// "1M requests were split by the page allocator"). Up to 128 KiB (32 pages) no common device splits; the
/// saving there is the per-I/O page pinning: 4K QD32 reads on a RAM loop
/// device took 23% less CPU per I/O registered.
pub const REGISTER_AT_MOST: u64 = 128 << 10;

/// What an engine is built for: one file, `depth` buffers of `buf_size` bytes.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// The open file or device every I/O goes to.
    pub fd: RawFile,
    /// I/Os in flight at most; also the number of buffers.
    pub depth: usize,
    /// Bytes per buffer (the block size).
    pub buf_size: usize,
    /// Buffer memory alignment for O_DIRECT, bytes (raised to at least a page).
    pub buf_align: usize,
    /// io_uring only: registered buffers (fio's `--fixedbufs`). Windows'
    /// engine reads neither this nor `force_async` (docs/platform.md).
    #[cfg_attr(windows, allow(dead_code))]
    pub fixedbufs: bool,
    /// io_uring only: reads and writes skip the non-blocking first attempt
    /// (IOSQE_ASYNC, fio's `--force_async=1`); see `FORCE_ASYNC_ABOVE` (os/linux/uring.rs).
    #[cfg_attr(windows, allow(dead_code))]
    pub force_async: bool,
}

/// The engine `choice` asks for. `Auto` tries io_uring and falls back to psync
/// when the kernel lacks it or refuses it (seccomp, io_uring_disabled sysctl).
pub fn open_engine(choice: EngineChoice, config: EngineConfig) -> io::Result<Box<dyn IoEngine + Send>> {
    match choice {
        EngineChoice::Psync => Ok(Box::new(PsyncEngine::new(config)?)),
        EngineChoice::IoUring => Ok(Box::new(UringEngine::new(config)?)),
        EngineChoice::Auto => match UringEngine::new(config) {
            Ok(engine) => Ok(Box::new(engine)),
            Err(_) => Ok(Box::new(PsyncEngine::new(config)?)),
        },
    }
}

/// Resolves `Auto` to the engine this machine will run, by trying to set up a
/// small io_uring once.
pub fn resolve_engine(choice: EngineChoice) -> Result<EngineKind, io::Error> {
    match choice {
        EngineChoice::Psync => Ok(EngineKind::Psync),
        EngineChoice::IoUring => crate::os::uring_available().map(|_| EngineKind::IoUring),
        EngineChoice::Auto => {
            Ok(if crate::os::uring_available().is_ok() { EngineKind::IoUring } else { EngineKind::Psync })
        }
    }
}

/// Huge-page size the buffer pool aligns to (x86-64 and aarch64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

/// Buffers this large or larger go on huge pages however few there are (a
/// 1M QD1 test has one): 16 ordinary pages and more may exceed a device's
/// segment limit (NVMe from 33, virtio-blk 254, MMC hosts fewer).
const HUGE_FROM: usize = 64 << 10;

/// A heap buffer aligned for O_DIRECT (the memory alignment statx reports,
/// at least a page so every filesystem accepts it).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    layout: std::alloc::Layout,
}

// SAFETY: the buffer is plain owned memory; access goes through &/&mut.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes aligned to `align` (at least 4096, rounded up to a power of two).
    pub fn new(len: usize, align: usize) -> Self {
        let align = align.max(4096).next_power_of_two();
        let layout = std::alloc::Layout::from_size_align(len.max(1), align).expect("buffer layout");
        // SAFETY: layout has non-zero size. Zeroed so reads of untouched bytes are defined.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len, layout }
    }

    /// A zeroed buffer of `len` bytes on huge-page boundaries (and at least
    /// `align`), backed by huge pages where the platform grants them.
    fn new_huge(len: usize, align: usize) -> Self {
        let align = align.max(HUGE_PAGE).next_power_of_two();
        let layout = std::alloc::Layout::from_size_align(len.max(1), align).expect("buffer layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        crate::os::prefer_huge_pages(ptr, len);
        // SAFETY: ptr is valid for len bytes. Zeroed so reads of untouched bytes are defined
        // where the platform discarded nothing, and so every page is faulted in before the
        // test starts rather than on its first I/O.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        AlignedBuf { ptr, len, layout }
    }

    /// The whole buffer, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and uniquely borrowed through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Start of the buffer, for system calls that fill it.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

/// The buffers of one engine, carved out of one region.
///
/// A region of 2 MiB or more, or of buffers of 64 KiB or more, is backed by
/// transparent huge pages where the kernel has them (`os::prefer_huge_pages`),
/// so a buffer is one physically contiguous segment and an I/O of any block
/// size reaches the device whole.
/// On ordinary pages a 1 MiB buffer is ~240-256 separate 4 KiB pages on a
/// machine whose memory is fragmented, against 254 segments per request on
/// virtio-blk (33-127 on NVMe): whether a 1 MiB I/O went out as one request
/// or two then depended on the page allocator, not on the tool, and moved
/// the mean request from 512 to 1024 KiB between runs (fio's as much as
/// headroom's; measured with /proc/PID/pagemap and the block_split
/// tracepoint, docs/performance.md "Disk").
pub struct BufferPool {
    region: AlignedBuf,
    stride: usize,
    buf_len: usize,
    count: usize,
}

impl BufferPool {
    /// `count` buffers of `buf_len` bytes, each starting on an `align` boundary.
    pub fn new(count: usize, buf_len: usize, align: usize) -> Self {
        let align = align.max(4096).next_power_of_two();
        let stride = buf_len.max(1).div_ceil(align) * align;
        let len = stride * count.max(1);
        let region = if buf_len >= HUGE_FROM || len >= HUGE_PAGE {
            AlignedBuf::new_huge(len.div_ceil(HUGE_PAGE) * HUGE_PAGE, align)
        } else {
            AlignedBuf::new(len, align)
        };
        BufferPool { region, stride, buf_len, count }
    }

    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the pool has no buffers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Start of buffer `i`.
    pub fn ptr(&self, i: usize) -> *mut u8 {
        assert!(i < self.count, "buffer index out of range");
        // SAFETY: i < count, so the offset is inside the region.
        unsafe { self.region.as_ptr().add(i * self.stride) }
    }

    /// Bytes per buffer.
    pub fn buf_len(&self) -> usize {
        self.buf_len
    }

    /// Buffer `i`, writable.
    pub fn slice_mut(&mut self, i: usize) -> &mut [u8] {
        let (start, len) = (i * self.stride, self.buf_len);
        &mut self.region.as_mut_slice()[start..start + len]
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    fn roundtrip(choice: EngineChoice, fixedbufs: bool, force_async: bool) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&vec![7u8; 64 * 1024]).unwrap();
        file.flush().unwrap();
        let fd = file.as_file().as_raw_fd();
        let mut engine =
            open_engine(choice, EngineConfig { fd, depth: 4, buf_size: 4096, buf_align: 4096, fixedbufs, force_async })
                .unwrap();
        engine.buffer_mut(0).fill(0xab);
        engine.queue(IoUnit { kind: IoKind::Write, offset: 8192, len: 4096, buf_index: 0, tag: 10 }).unwrap();
        engine.commit().unwrap();
        let mut out = Vec::new();
        while out.is_empty() {
            engine.getevents(1, &mut out).unwrap();
        }
        assert_eq!(out[0].tag, 10);
        assert_eq!(out[0].result, 4096);
        out.clear();
        for (i, offset) in [0u64, 8192].into_iter().enumerate() {
            let io = IoUnit { kind: IoKind::Read, offset, len: 4096, buf_index: 1 + i as u16, tag: i as u64 };
            engine.queue(io).unwrap();
        }
        engine.queue(IoUnit { kind: IoKind::Fsync, offset: 0, len: 0, buf_index: 0, tag: 99 }).unwrap();
        engine.commit().unwrap();
        while out.len() < 3 {
            engine.getevents(1, &mut out).unwrap();
        }
        assert!(out.iter().all(|c| c.result >= 0), "{out:?}");
        assert!(engine.buffer_mut(1).iter().all(|&b| b == 7));
        assert!(engine.buffer_mut(2).iter().all(|&b| b == 0xab));
    }

    #[test]
    fn psync_reads_back_what_it_wrote() {
        roundtrip(EngineChoice::Psync, false, false);
    }

    #[test]
    fn io_uring_reads_back_what_it_wrote() {
        if resolve_engine(EngineChoice::IoUring).is_err() {
            eprintln!("SKIPPED: io_uring is not available here");
            return;
        }
        // Ordinary and registered buffers, inline and forced-async issue.
        for (fixedbufs, force_async) in [(false, false), (true, false), (false, true), (true, true)] {
            roundtrip(EngineChoice::IoUring, fixedbufs, force_async);
        }
    }

    #[test]
    fn errors_come_back_as_negative_errno() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let fd = std::fs::File::open(file.path()).unwrap(); // read-only: writes fail with EBADF
        for choice in [EngineChoice::Psync, EngineChoice::Auto] {
            let mut engine = open_engine(
                choice,
                EngineConfig {
                    fd: fd.as_raw_fd(),
                    depth: 1,
                    buf_size: 4096,
                    buf_align: 4096,
                    fixedbufs: false,
                    force_async: false,
                },
            )
            .unwrap();
            engine.queue(IoUnit { kind: IoKind::Write, offset: 0, len: 4096, buf_index: 0, tag: 1 }).unwrap();
            engine.commit().unwrap();
            let mut out = Vec::new();
            while out.is_empty() {
                engine.getevents(1, &mut out).unwrap();
            }
            assert_eq!(out[0].result, -i64::from(libc::EBADF));
        }
    }
}
