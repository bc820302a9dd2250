//! The io_uring engine: registered buffers and a registered file (the kernel
//! skips page pinning and fd lookups per I/O), batched submission (one
//! `io_uring_enter` per commit) and batched reaping.

use super::{BufferPool, Completion, EngineConfig, IoEngine, IoKind, IoUnit};
use crate::EngineKind;
use io_uring::{opcode, squeue, types, IoUring};
use std::io;

/// From linux/io_uring.h (the io-uring crate keeps its copy private).
const IORING_ENTER_GETEVENTS: u32 = 1;

pub struct UringEngine {
    ring: IoUring,
    buffers: BufferPool,
    /// Queued but not yet submitted.
    unsubmitted: usize,
}

impl UringEngine {
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
        let iovecs: Vec<libc::iovec> = (0..buffers.len())
            .map(|i| libc::iovec { iov_base: buffers.ptr(i).cast(), iov_len: buffers.buf_len() })
            .collect();
        // SAFETY: the buffers live as long as the ring: both are fields of self, and
        // the ring is dropped first (declared first), which unregisters them.
        unsafe { ring.submitter().register_buffers(&iovecs)? };
        ring.submitter().register_files(&[config.fd])?;
        // Saves the ring's fd lookup on every io_uring_enter (6.3+); optional.
        let _ = ring.submitter().register_ring_fd();
        Ok(UringEngine { ring, buffers, unsubmitted: 0 })
    }
}

impl IoEngine for UringEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::IoUring
    }

    fn depth(&self) -> usize {
        self.buffers.len()
    }

    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.buffers.slice_mut(usize::from(index))
    }

    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        let file = types::Fixed(0);
        let entry = match io.kind {
            IoKind::Read => {
                let buf = self.buffers.ptr(usize::from(io.buf_index));
                opcode::ReadFixed::new(file, buf, io.len.min(self.buffers.buf_len() as u32), io.buf_index)
                    .offset(io.offset)
                    .build()
            }
            IoKind::Write => {
                let buf = self.buffers.ptr(usize::from(io.buf_index));
                opcode::WriteFixed::new(file, buf, io.len.min(self.buffers.buf_len() as u32), io.buf_index)
                    .offset(io.offset)
                    .build()
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
