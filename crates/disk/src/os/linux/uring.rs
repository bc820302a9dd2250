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

/// From linux/io_uring.h (the io-uring crate keeps its copy private).
const IORING_ENTER_GETEVENTS: u32 = 1;

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
    ring: IoUring,
    buffers: BufferPool,
    /// Registered buffers (ReadFixed/WriteFixed) rather than ordinary ones.
    fixed: bool,
    /// SQE flags of every read and write (IOSQE_ASYNC or none).
    rw_flags: squeue::Flags,
    /// Queued but not yet submitted.
    unsubmitted: usize,
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
        // Saves the ring's fd lookup on every io_uring_enter (6.3+); optional.
        let _ = ring.submitter().register_ring_fd();
        let rw_flags = if config.force_async { squeue::Flags::ASYNC } else { squeue::Flags::empty() };
        Ok(UringEngine { ring, buffers, fixed: config.fixedbufs, rw_flags, unsubmitted: 0 })
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
                self.ring.submit()?;
                self.unsubmitted = 0;
                self.ring.submission().push(&entry).map_err(|_| io::Error::other("io_uring submission queue full"))?;
            }
        }
        self.unsubmitted += 1;
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        if self.unsubmitted > 0 {
            // GETEVENTS with min 0 also runs the deferred completion work, so
            // the next getevents usually finds completions without a syscall.
            // SAFETY: no extended argument is passed.
            unsafe {
                self.ring.submitter().enter::<libc::sigset_t>(
                    self.unsubmitted as u32,
                    0,
                    IORING_ENTER_GETEVENTS,
                    None,
                )?
            };
            self.unsubmitted = 0;
        }
        Ok(())
    }

    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        if min > 0 && self.ring.completion().len() < min {
            // Submits anything still queued and waits in one system call.
            match self.ring.submit_and_wait(min) {
                Ok(_) => self.unsubmitted = 0,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        out.extend(
            self.ring.completion().map(|cqe| Completion { tag: cqe.user_data(), result: i64::from(cqe.result()) }),
        );
        Ok(())
    }
}
