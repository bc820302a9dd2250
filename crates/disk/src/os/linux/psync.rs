//! The portable engine: pread/pwrite/fsync, one I/O at a time on the calling
//! thread (fio's `psync`). The runner gives it queue depth by running one
//! worker thread per outstanding I/O ([`crate::engine::psync_threads`]).

use crate::engine::{BufferPool, Completion, EngineConfig, IoEngine, IoKind, IoUnit};
use std::io;
use std::os::fd::RawFd;

/// The psync engine: pread/pwrite, one I/O at a time per worker.
pub struct PsyncEngine {
    fd: RawFd,
    buffers: BufferPool,
    done: Vec<Completion>,
}

impl PsyncEngine {
    /// An engine over `config.fd` with `config.depth` buffers; its I/Os still run one at a time.
    pub fn new(config: EngineConfig) -> io::Result<Self> {
        let buffers = BufferPool::new(config.depth, config.buf_size, config.buf_align);
        Ok(PsyncEngine { fd: config.fd, buffers, done: Vec::with_capacity(config.depth) })
    }
}

fn errno_result(ret: isize) -> i64 {
    if ret < 0 {
        -i64::from(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    } else {
        ret as i64
    }
}

impl IoEngine for PsyncEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.buffers.slice_mut(usize::from(index))
    }

    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        let buf = self.buffers.ptr(usize::from(io.buf_index));
        let len = (io.len as usize).min(self.buffers.buf_len());
        // SAFETY: buf is valid for len bytes; fd is open for the engine's lifetime.
        let ret = unsafe {
            match io.kind {
                IoKind::Read => libc::pread(self.fd, buf.cast(), len, io.offset as libc::off_t),
                IoKind::Write => libc::pwrite(self.fd, buf.cast(), len, io.offset as libc::off_t),
                IoKind::Fsync => libc::fsync(self.fd) as isize,
            }
        };
        self.done.push(Completion { tag: io.tag, result: errno_result(ret) });
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn getevents(&mut self, _min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        out.append(&mut self.done);
        Ok(())
    }
}
