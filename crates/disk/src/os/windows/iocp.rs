//! The "iocp" engine: overlapped ReadFile/WriteFile on an I/O completion
//! port, like fio's windowsaio and DiskSpd. One port and one file object per
//! engine, `depth` sector-aligned buffers, one OVERLAPPED per buffer.
//!
//! Win32 rules this file follows (each is in the ReadFile, WriteFile,
//! CreateIoCompletionPort and GetQueuedCompletionStatusEx documentation):
//! - a handle (file object) is bound to one port for good, so each engine
//!   opens its own with ReOpenFile (same access, same NO_BUFFERING /
//!   WRITE_THROUGH mode, plus FILE_FLAG_OVERLAPPED), or a duplicate of the
//!   handle that locked a volume where the lock denies a reopen;
//! - an OVERLAPPED must stay at the same address until its I/O completes:
//!   the slots are one boxed slice, allocated once, and dropping the engine
//!   cancels and waits for every I/O still in flight;
//! - FILE_SKIP_COMPLETION_PORT_ON_SUCCESS is not set, so an I/O that
//!   completes at once still posts a packet: every started I/O is reaped
//!   from the port, in one place;
//! - a failed I/O's error is the Win32 error GetOverlappedResult reports.
//!
//! It knows nothing of tests or timing (see crate::engine).

use super::{as_handle, error_result, owned, win32_result};
use crate::engine::{BufferPool, Completion, EngineConfig, IoEngine, IoKind, IoUnit};
use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle, OwnedHandle};
use windows_sys::Wdk::Storage::FileSystem::{
    FileAccessInformation, FileModeInformation, NtQueryInformationFile, FILE_ACCESS_INFORMATION, FILE_MODE_INFORMATION,
    FILE_NO_INTERMEDIATE_BUFFERING, FILE_SYNCHRONOUS_IO_ALERT, FILE_SYNCHRONOUS_IO_NONALERT, FILE_WRITE_THROUGH,
};
use windows_sys::Win32::Foundation::{GetLastError, ERROR_ACCESS_DENIED, ERROR_IO_PENDING, HANDLE, WAIT_TIMEOUT};
use windows_sys::Win32::Storage::FileSystem::{
    FlushFileBuffers, ReOpenFile, ReadFile, WriteFile, FILE_FLAG_NO_BUFFERING, FILE_FLAG_OVERLAPPED,
    FILE_FLAG_WRITE_THROUGH, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
};
use windows_sys::Win32::System::Threading::INFINITE;
use windows_sys::Win32::System::IO::{
    CancelIoEx, CreateIoCompletionPort, GetOverlappedResult, GetQueuedCompletionStatusEx, IO_STATUS_BLOCK, OVERLAPPED,
    OVERLAPPED_ENTRY,
};

/// One I/O's OVERLAPPED and the runner's tag. `repr(C)` with the OVERLAPPED
/// first: the port hands back the OVERLAPPED's address, which is the slot's.
#[repr(C)]
struct Slot {
    overlapped: OVERLAPPED,
    tag: u64,
}

/// The iocp engine (see the module doc).
pub struct IocpEngine {
    /// Declared before `file`: nothing may be in flight when they close (see Drop).
    port: OwnedHandle,
    file: OwnedHandle,
    buffers: BufferPool,
    slots: Box<[Slot]>,
    /// Slots not in flight.
    free: Vec<usize>,
    /// Fsyncs (synchronous) and I/Os that failed to start: reaped without the port.
    done: Vec<Completion>,
    entries: Vec<OVERLAPPED_ENTRY>,
    in_flight: usize,
}

// SAFETY: the handles and slots are owned by the engine; the OVERLAPPEDs' raw
// pointers are only used by the kernel and by the thread that owns the engine.
unsafe impl Send for IocpEngine {}

/// ReOpenFile of `shared` with its own access and unbuffered/write-through
/// mode (NtQueryInformationFile reads both), plus FILE_FLAG_OVERLAPPED.
fn reopen_overlapped(shared: HANDLE) -> io::Result<OwnedHandle> {
    // SAFETY: IO_STATUS_BLOCK is plain data, written by the calls below.
    let mut iosb: IO_STATUS_BLOCK = unsafe { std::mem::zeroed() };
    let mut access = FILE_ACCESS_INFORMATION { AccessFlags: 0 };
    let mut mode = FILE_MODE_INFORMATION { Mode: 0 };
    // SAFETY: each buffer is the structure its information class fills, with its size.
    let status = unsafe {
        let a = NtQueryInformationFile(
            shared,
            &mut iosb,
            (&raw mut access).cast(),
            size_of::<FILE_ACCESS_INFORMATION>() as u32,
            FileAccessInformation,
        );
        if a < 0 {
            a
        } else {
            NtQueryInformationFile(
                shared,
                &mut iosb,
                (&raw mut mode).cast(),
                size_of::<FILE_MODE_INFORMATION>() as u32,
                FileModeInformation,
            )
        }
    };
    if status < 0 {
        // SAFETY: plain conversion of a status code.
        let code = unsafe { windows_sys::Win32::Foundation::RtlNtStatusToDosError(status) };
        return Err(io::Error::from_raw_os_error(code as i32));
    }
    let mut flags = FILE_FLAG_OVERLAPPED;
    if mode.Mode & FILE_NO_INTERMEDIATE_BUFFERING != 0 {
        flags |= FILE_FLAG_NO_BUFFERING;
    }
    if mode.Mode & FILE_WRITE_THROUGH != 0 {
        flags |= FILE_FLAG_WRITE_THROUGH;
    }
    let share = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;
    // SAFETY: shared is an open file handle; the result is checked.
    match owned(unsafe { ReOpenFile(shared, access.AccessFlags, share, flags) }) {
        // A volume locked with FSCTL_LOCK_VOLUME (os/windows/target.rs) is
        // reached only through the locking handle's file object, which is
        // overlapped (no FILE_SYNCHRONOUS_IO_* mode): a duplicate of it binds
        // this engine's port, which one engine (one job) may do.
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) && mode.Mode & SYNCHRONOUS_IO == 0 => {
            // SAFETY: shared is an open handle for the duration of this call.
            unsafe { BorrowedHandle::borrow_raw(shared) }.try_clone_to_owned()
        }
        reopened => reopened,
    }
}

/// The modes of a handle opened without FILE_FLAG_OVERLAPPED.
const SYNCHRONOUS_IO: u32 = FILE_SYNCHRONOUS_IO_ALERT | FILE_SYNCHRONOUS_IO_NONALERT;

impl IocpEngine {
    /// Its own file object and completion port for `config.fd`, and `depth` buffers.
    pub fn new(config: EngineConfig) -> io::Result<Self> {
        let file = reopen_overlapped(as_handle(config.fd))?;
        // One thread (the runner's worker) reaps, hence concurrency 1.
        // SAFETY: a valid file handle, no existing port: creates one and binds the file.
        let port = owned(unsafe { CreateIoCompletionPort(file.as_raw_handle(), std::ptr::null_mut(), 0, 1) })?;
        let depth = config.depth.max(1);
        let buffers = BufferPool::new(depth, config.buf_size, config.buf_align);
        // SAFETY: OVERLAPPED is plain data; all-zero is its documented initial state.
        let slots = (0..depth).map(|_| Slot { overlapped: unsafe { std::mem::zeroed() }, tag: 0 }).collect();
        Ok(IocpEngine {
            port,
            file,
            buffers,
            slots,
            free: (0..depth).rev().collect(),
            done: Vec::with_capacity(depth),
            entries: Vec::with_capacity(depth),
            in_flight: 0,
        })
    }

    /// Takes the completions the port has, waiting up to `timeout_ms` for the first.
    fn reap(&mut self, timeout_ms: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        let mut removed = 0u32;
        self.entries.clear();
        // SAFETY: entries has capacity for depth entries, and at most depth are asked for.
        let ok = unsafe {
            GetQueuedCompletionStatusEx(
                self.port.as_raw_handle(),
                self.entries.as_mut_ptr(),
                self.entries.capacity() as u32,
                &mut removed,
                timeout_ms,
                0,
            )
        };
        if ok == 0 {
            // SAFETY: reads the calling thread's last error.
            return match unsafe { GetLastError() } {
                WAIT_TIMEOUT => Ok(()),
                code => Err(io::Error::from_raw_os_error(code as i32)),
            };
        }
        // SAFETY: the call filled `removed` entries.
        unsafe { self.entries.set_len(removed as usize) };
        let base = self.slots.as_ptr() as usize;
        for entry in &self.entries {
            let index = (entry.lpOverlapped as usize - base) / size_of::<Slot>();
            let mut bytes = 0u32;
            // SAFETY: the OVERLAPPED is one of ours and its I/O is complete (it came from
            // the port), so this only reads its status, without waiting.
            let ok = unsafe { GetOverlappedResult(self.file.as_raw_handle(), entry.lpOverlapped, &mut bytes, 0) };
            out.push(Completion { tag: self.slots[index].tag, result: win32_result(ok, bytes) });
            self.free.push(index);
            self.in_flight -= 1;
        }
        Ok(())
    }
}

impl IoEngine for IocpEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.buffers.slice_mut(usize::from(index))
    }

    /// Starts the I/O at once: ReadFile and WriteFile are the submission.
    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        if io.kind == IoKind::Fsync {
            // SAFETY: a valid handle; FlushFileBuffers is synchronous.
            let ok = unsafe { FlushFileBuffers(self.file.as_raw_handle()) };
            self.done.push(Completion { tag: io.tag, result: win32_result(ok, 0) });
            return Ok(());
        }
        let index = self.free.pop().ok_or_else(|| io::Error::other("iocp: more I/Os queued than the queue depth"))?;
        let slot = &mut self.slots[index];
        // SAFETY: OVERLAPPED is plain data; zeroed, then the offset set, as ReadFile asks.
        slot.overlapped = unsafe { std::mem::zeroed() };
        slot.overlapped.Anonymous.Anonymous.Offset = io.offset as u32;
        slot.overlapped.Anonymous.Anonymous.OffsetHigh = (io.offset >> 32) as u32;
        slot.tag = io.tag;
        let ov: *mut OVERLAPPED = &mut slot.overlapped;
        let buf = self.buffers.ptr(usize::from(io.buf_index));
        let len = io.len.min(self.buffers.buf_len() as u32);
        // SAFETY: the buffer and the OVERLAPPED are owned by self and stay put until
        // the completion is reaped (or Drop has waited for it).
        let ok = unsafe {
            match io.kind {
                IoKind::Read => ReadFile(self.file.as_raw_handle(), buf, len, std::ptr::null_mut(), ov),
                _ => WriteFile(self.file.as_raw_handle(), buf, len, std::ptr::null_mut(), ov),
            }
        };
        // SAFETY: reads the calling thread's last error.
        let error = if ok == 0 { unsafe { GetLastError() } } else { 0 };
        if ok != 0 || error == ERROR_IO_PENDING {
            // Done at once or pending: either way a packet reaches the port.
            self.in_flight += 1;
        } else {
            self.free.push(index);
            self.done.push(Completion { tag: io.tag, result: error_result(error) });
        }
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let start = out.len();
        out.append(&mut self.done);
        // Whatever is ready without waiting, then block only while fewer than `min`.
        self.reap(0, out)?;
        while out.len() - start < min && self.in_flight > 0 {
            self.reap(INFINITE, out)?;
        }
        Ok(())
    }
}

impl Drop for IocpEngine {
    fn drop(&mut self) {
        if self.in_flight == 0 {
            return;
        }
        // The kernel still owns some OVERLAPPEDs and buffers: cancel, then wait
        // until each has posted its packet before the memory goes.
        // SAFETY: a valid handle; null cancels every I/O this handle started.
        unsafe { CancelIoEx(self.file.as_raw_handle(), std::ptr::null()) };
        let mut sink = Vec::new();
        while self.in_flight > 0 {
            if self.reap(INFINITE, &mut sink).is_err() {
                // The port failed: leaking the memory is the only safe choice left.
                std::mem::forget(std::mem::take(&mut self.slots));
                std::mem::forget(std::mem::replace(&mut self.buffers, BufferPool::new(0, 0, 1)));
                return;
            }
        }
    }
}
