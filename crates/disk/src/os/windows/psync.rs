//! The synchronous engine on Windows: one positioned ReadFile/WriteFile at a
//! time on the calling thread (fio's psync). The offset travels in an
//! OVERLAPPED with an event of the engine's own, which works on the shared
//! handle whether it was opened overlapped or not: the call either finishes
//! or returns ERROR_IO_PENDING, and GetOverlappedResult waits for it. The
//! runner gives it queue depth with threads, as on Linux.

use super::{as_handle, owned, win32_result};
use crate::engine::{BufferPool, Completion, EngineConfig, IoEngine, IoKind, IoUnit};
use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use windows_sys::Win32::Foundation::{GetLastError, ERROR_IO_PENDING, HANDLE};
use windows_sys::Win32::Storage::FileSystem::{FlushFileBuffers, ReadFile, WriteFile};
use windows_sys::Win32::System::Threading::CreateEventW;
use windows_sys::Win32::System::IO::{GetOverlappedResult, OVERLAPPED};

/// The psync engine: positioned ReadFile/WriteFile, one I/O at a time per worker.
pub struct PsyncEngine {
    file: HANDLE,
    /// Signalled when this engine's I/O completes (manual reset, as the docs ask).
    event: OwnedHandle,
    buffers: BufferPool,
    done: Vec<Completion>,
}

// SAFETY: the handle values are only used by the thread that owns the engine;
// the file stays open for the engine's lifetime (the runner holds it).
unsafe impl Send for PsyncEngine {}

impl PsyncEngine {
    /// An engine over `config.fd` with `config.depth` buffers; its I/Os still run one at a time.
    pub fn new(config: EngineConfig) -> io::Result<Self> {
        // SAFETY: no attributes, no name; the result is checked.
        let event = owned(unsafe { CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) })?;
        let buffers = BufferPool::new(config.depth, config.buf_size, config.buf_align);
        Ok(PsyncEngine { file: as_handle(config.fd), event, buffers, done: Vec::with_capacity(config.depth) })
    }
}

/// One positioned read or write of `len` bytes at `buf`, waited for: bytes
/// moved or a negative Win32 error (end of file reads 0 bytes).
///
/// # Safety
/// `buf` must be valid for `len` bytes and `file` an open handle.
pub unsafe fn io_at(file: HANDLE, event: HANDLE, write: bool, buf: *mut u8, len: u32, offset: u64) -> i64 {
    // SAFETY: OVERLAPPED is plain data; all-zero is its documented initial state.
    let mut ov: OVERLAPPED = unsafe { std::mem::zeroed() };
    ov.Anonymous.Anonymous.Offset = offset as u32;
    ov.Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
    ov.hEvent = event;
    let mut bytes = 0u32;
    // SAFETY: the caller vouches for buf and file; ov lives until the I/O is waited for below.
    unsafe {
        let ok = if write {
            WriteFile(file, buf, len, &mut bytes, &mut ov)
        } else {
            ReadFile(file, buf, len, &mut bytes, &mut ov)
        };
        if ok == 0 && GetLastError() == ERROR_IO_PENDING {
            let ok = GetOverlappedResult(file, &ov, &mut bytes, 1);
            return win32_result(ok, bytes);
        }
        win32_result(ok, bytes)
    }
}

impl IoEngine for PsyncEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.buffers.slice_mut(usize::from(index))
    }

    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        let buf = self.buffers.ptr(usize::from(io.buf_index));
        let len = io.len.min(self.buffers.buf_len() as u32);
        let write = io.kind == IoKind::Write;
        let result = match io.kind {
            // SAFETY: a valid handle; FlushFileBuffers is synchronous.
            IoKind::Fsync => win32_result(unsafe { FlushFileBuffers(self.file) }, 0),
            // SAFETY: buf is one of ours, valid for len bytes; the file is open.
            _ => unsafe { io_at(self.file, self.event.as_raw_handle(), write, buf, len, io.offset) },
        };
        self.done.push(Completion { tag: io.tag, result });
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
