//! The io_uring engine: a registered file (the kernel skips the fd lookup per
//! I/O), batched submission (one `io_uring_enter` per commit) and batched
//! reaping. Buffers are registered (fio's `--fixedbufs`) when the caller asks,
//! which `FixedBufs::Auto` does for blocks up to 128 KiB: the kernel then
//! skips pinning each buffer's pages per I/O.
//!
//! Why not above 128 KiB: the kernel first tries every I/O without blocking
//! (REQ_NOWAIT), and a bio the device must split (more segments than
//! `max_segments`, or longer than `max_sectors_kb`) fails that attempt with
//! EAGAIN and is retried from a worker thread. blk-throttle (cgroup v1
//! blkio, v2 io.max) has charged the failed attempt already, so such I/Os
//! are charged twice and a throttled device reads and writes at half its
//! rate. A registered buffer reaches the block layer as one bvec per page,
//! so every large I/O past the split limits pays twice;
//! [`FORCE_ASYNC_ABOVE`] avoids the failed attempt in both modes.
//!
//! Completions are waited for one at a time: waiting for several with
//! `min_wait_usec` (6.12+) cost more CPU per I/O in its timer than the
//! sleeps it saved (docs/performance.md).

use crate::engine::{BufferPool, Completion, EngineConfig, IoEngine, IoKind, IoUnit};
use io_uring::{opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::AsRawFd;

/// From linux/io_uring.h (the io-uring crate keeps its copy private).
const IORING_ENTER_GETEVENTS: u32 = 1;
const IORING_ENTER_REGISTERED_RING: u32 = 1 << 4;
const IORING_REGISTER_RING_FDS: libc::c_uint = 20;
const IORING_UNREGISTER_RING_FDS: libc::c_uint = 21;

/// `struct io_uring_rsrc_update` of linux/io_uring.h.
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// How `io_uring_enter` names the ring: by its index among the calling
/// thread's registered rings (5.18+), so the kernel skips looking up and
/// reference-counting the descriptor on every call (0.8% of the CPU per 4K
/// read in `fget` alone), or by its descriptor where registering failed.
///
/// By hand because the io-uring crate keeps a registered index in a
/// `Submitter`, and `IoUring::submitter()` makes a new one per call: its
/// `register_ring_fd` is forgotten at once and every later call passes the
/// descriptor anyway. A registration belongs to the thread that made it; the
/// engine lives and dies on its worker thread.
struct RingEnter {
    /// The ring's own descriptor, which every io_uring_register call takes.
    ring_fd: libc::c_int,
    /// Its index among the thread's registered rings, where registering worked.
    index: Option<u32>,
}

impl RingEnter {
    fn register(ring: &IoUring) -> RingEnter {
        let ring_fd = ring.as_raw_fd();
        let mut update = RsrcUpdate { offset: u32::MAX, resv: 0, data: ring_fd as u64 };
        let done = register_ring_fds(ring_fd, IORING_REGISTER_RING_FDS, &mut update);
        RingEnter { ring_fd, index: (done == 1).then_some(update.offset) }
    }

    /// `io_uring_enter(to_submit, min_complete, flags)` without an argument.
    fn enter(&self, to_submit: u32, min_complete: u32, flags: u32) -> io::Result<()> {
        let (fd, flags) = match self.index {
            Some(index) => (libc::c_long::from(index), flags | IORING_ENTER_REGISTERED_RING),
            None => (libc::c_long::from(self.ring_fd), flags),
        };
        // SAFETY: no extended argument is passed (null, size 0). Every
        // argument goes as a full register (the call is variadic).
        let done = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                fd,
                libc::c_long::from(to_submit),
                libc::c_long::from(min_complete),
                libc::c_long::from(flags),
                std::ptr::null::<libc::c_void>(),
                0 as libc::c_long,
            )
        };
        if done < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Gives the registration back, so the ring is freed with its descriptor
    /// rather than when the thread exits (a thread holds at most 16).
    fn unregister(&self) {
        if let Some(index) = self.index {
            let mut update = RsrcUpdate { offset: index, resv: 0, data: 0 };
            // An error leaves the slot to the thread's exit.
            let _ = register_ring_fds(self.ring_fd, IORING_UNREGISTER_RING_FDS, &mut update);
        }
    }
}

/// io_uring_register(ring_fd, opcode, update, 1) for the ring-fd opcodes:
/// the number of entries done, or -1.
fn register_ring_fds(ring_fd: libc::c_int, opcode: libc::c_uint, update: &mut RsrcUpdate) -> libc::c_long {
    // SAFETY: one io_uring_rsrc_update that outlives the call.
    unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            libc::c_long::from(ring_fd),
            libc::c_long::from(opcode),
            update as *mut RsrcUpdate,
            1 as libc::c_long,
        )
    }
}

/// I/Os larger than this are handed straight to the kernel's worker threads
/// (IOSQE_ASYNC; fio's `--force_async=1`) instead of being tried without
/// blocking first. Past 128 KiB a bio may need splitting on common devices
/// (NVMe `max_segments` 33-127 of 4 KiB pages, `max_sectors_kb` 128-1280,
/// loop 128 segments), and a split bio's non-blocking attempt always fails
/// and is retried from a worker anyway, after blk-throttle charged it: 1 MiB
/// I/Os on a throttled loop device measured half the rate, in fio too
/// (its default mode, 1M: 25 or 51 MiB/s at a 50 MiB/s throttle from run to
/// run, depending on how contiguous its buffers happened to be). Sizes up to
/// 128 KiB are never split in practice and keep the cheaper inline issue.
pub const FORCE_ASYNC_ABOVE: u64 = 128 << 10;

/// Whether an I/O of `block_size` bytes is submitted with IOSQE_ASYNC
/// (only O_DIRECT: buffered I/O builds its bios in the kernel).
pub fn force_async(block_size: u64, direct: bool) -> bool {
    direct && block_size > FORCE_ASYNC_ABOVE
}

/// The io_uring engine: one ring per worker thread, at least `depth` entries.
pub struct UringEngine {
    /// How system calls name `ring`; unregistered on drop, before the ring closes.
    enter: RingEnter,
    ring: IoUring,
    buffers: BufferPool,
    /// Registered buffers (ReadFixed/WriteFixed) rather than ordinary ones.
    fixed: bool,
    /// SQE flags of every read and write (IOSQE_ASYNC or none).
    rw_flags: squeue::Flags,
}

impl UringEngine {
    /// A ring and buffers for `config`; fails where the kernel refuses io_uring.
    pub fn new(config: EngineConfig) -> io::Result<Self> {
        let entries = (config.depth.max(1) as u32).next_power_of_two();
        // One thread submits and reaps (the runner's worker): let the kernel
        // run completion work only when that thread asks for events, as fio
        // does on kernels that offer it (6.1+); plain rings elsewhere.
        let ring: IoUring<squeue::Entry> = IoUring::builder()
            .setup_coop_taskrun()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries)
            .or_else(|_| IoUring::builder().build(entries))?;
        let buffers = BufferPool::new(config.depth, config.buf_size, config.buf_align);
        if config.fixedbufs {
            let iovecs: Vec<libc::iovec> = (0..buffers.len())
                .map(|i| libc::iovec { iov_base: buffers.ptr(i).cast(), iov_len: buffers.buf_len() })
                .collect();
            // SAFETY: the buffers live as long as the ring: both are fields of self, and
            // the ring is dropped first (declared first), which unregisters them.
            unsafe { ring.submitter().register_buffers(&iovecs)? };
        }
        ring.submitter().register_files(&[config.fd])?;
        let enter = RingEnter::register(&ring);
        let rw_flags = if config.force_async { squeue::Flags::ASYNC } else { squeue::Flags::empty() };
        Ok(UringEngine { enter, ring, buffers, fixed: config.fixedbufs, rw_flags })
    }

    /// Whether system calls name the ring by its registered index.
    #[cfg(test)]
    fn ring_registered(&self) -> bool {
        self.enter.index.is_some()
    }

    /// Entries in the submission queue the kernel has not taken yet.
    fn queued(&mut self) -> u32 {
        self.ring.submission().len() as u32
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        self.enter.unregister();
    }
}

impl IoEngine for UringEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.buffers.slice_mut(usize::from(index))
    }

    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        let file = types::Fixed(0);
        let len = io.len.min(self.buffers.buf_len() as u32);
        let (index, fixed) = (io.buf_index, self.fixed);
        let entry = match io.kind {
            IoKind::Read => {
                let buf = self.buffers.ptr(usize::from(index));
                if fixed {
                    opcode::ReadFixed::new(file, buf, len, index).offset(io.offset).build()
                } else {
                    opcode::Read::new(file, buf, len).offset(io.offset).build()
                }
                .flags(self.rw_flags)
            }
            IoKind::Write => {
                let buf = self.buffers.ptr(usize::from(index));
                if fixed {
                    opcode::WriteFixed::new(file, buf, len, index).offset(io.offset).build()
                } else {
                    opcode::Write::new(file, buf, len).offset(io.offset).build()
                }
                .flags(self.rw_flags)
            }
            IoKind::Fsync => opcode::Fsync::new(file).build(),
        }
        .user_data(io.tag);
        // SAFETY: the buffer referenced by the entry stays valid until its completion
        // is reaped (it is owned by self and the runner reuses a slot only after that).
        unsafe {
            if self.ring.submission().push(&entry).is_err() {
                // Full submission queue: hand the batch to the kernel and retry once.
                let queued = self.queued();
                self.enter.enter(queued, 0, 0)?;
                self.ring.submission().push(&entry).map_err(|_| io::Error::other("io_uring submission queue full"))?;
            }
        }
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        let queued = self.queued();
        if queued > 0 {
            // GETEVENTS with min 0 also runs the deferred completion work, so
            // the next getevents usually finds completions without a syscall.
            self.enter.enter(queued, 0, IORING_ENTER_GETEVENTS)?;
        }
        Ok(())
    }

    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        if min > 0 && self.ring.completion().len() < min {
            // Submits anything still queued and waits in one system call.
            let queued = self.queued();
            match self.enter.enter(queued, min as u32, IORING_ENTER_GETEVENTS) {
                Err(e) if e.raw_os_error() != Some(libc::EINTR) => return Err(e),
                _ => {}
            }
        }
        out.extend(
            self.ring.completion().map(|cqe| Completion { tag: cqe.user_data(), result: i64::from(cqe.result()) }),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_ring_is_named_by_its_registered_index_and_given_back_on_drop() {
        let file = tempfile::tempfile().unwrap();
        let config = EngineConfig {
            fd: file.as_raw_fd(),
            depth: 4,
            buf_size: 4096,
            buf_align: 4096,
            fixedbufs: false,
            force_async: false,
        };
        if let Err(e) = UringEngine::new(config) {
            eprintln!("SKIPPED {}: this kernel refuses io_uring ({e})", module_path!());
            return;
        }
        // Descriptors 3-19 held, so no ring's descriptor equals a registered
        // index (0-15): an unregister that passed the index where the call
        // takes a ring descriptor found this engine's ring by chance.
        let _held: Vec<std::fs::File> = (0..17).map(|_| std::fs::File::open("/dev/null").unwrap()).collect();
        // A thread may hold 16 registered rings: engines made one after
        // another all get one only if each gives its registration back.
        for i in 0..40 {
            let mut engine = UringEngine::new(config).unwrap();
            assert!(engine.ring_registered(), "engine {i} names its ring by descriptor");
            engine.queue(IoUnit { kind: IoKind::Fsync, offset: 0, len: 0, buf_index: 0, tag: 7 }).unwrap();
            engine.commit().unwrap();
            let mut out = Vec::new();
            while out.is_empty() {
                engine.getevents(1, &mut out).unwrap();
            }
            assert_eq!((out[0].tag, out[0].result), (7, 0));
        }
    }
}
