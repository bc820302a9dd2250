//! The Windows implementation of headroom-disk's platform seam (see
//! `os/mod.rs`): the iocp engine (overlapped I/O on a completion port,
//! iocp.rs), the psync engine (positioned ReadFile/WriteFile, psync.rs) and
//! the small Win32 helpers both use. `target.rs` here is the Windows target
//! lib.rs builds instead of the Linux one; `device.rs` asks Windows about raw
//! drives and volumes for it. Without libblkid, a write over existing data
//! (a drive, volume or file) is let through only where its first and last
//! 4 MiB are zeros ([`probe_signatures`], [`probe_copy`]).

pub mod device;
mod iocp;
mod psync;

pub use psync::{io_at, PsyncEngine};

/// The seam's asynchronous engine keeps Linux's name (engine/mod.rs and the
/// runner call it that); on Windows it is the iocp engine.
pub use iocp::IocpEngine as UringEngine;

/// The asynchronous engine's name in the result document.
pub const ASYNC_ENGINE: &str = "iocp";

/// fio's name for the same engine (the fio equivalent line).
pub const FIO_ASYNC_ENGINE: &str = "windowsaio";

/// The open flag that makes a test unbuffered (`direct`), as the result records it.
pub const DIRECT_FLAG: headroom_result::DirectFlag = headroom_result::DirectFlag::FileFlagNoBuffering;

use std::io;
use std::os::windows::io::{FromRawHandle, OwnedHandle};
use windows_sys::Win32::Foundation::{GetLastError, ERROR_HANDLE_EOF, HANDLE, INVALID_HANDLE_VALUE};

/// An open file as the engines' system calls take it: its HANDLE's value
/// (a number, so that an engine's configuration may cross to its threads).
pub type RawFile = usize;

/// The handle of `file`, as the engines take it.
pub fn raw_file(file: &std::fs::File) -> RawFile {
    std::os::windows::io::AsRawHandle::as_raw_handle(file) as usize
}

/// The signature check of a share's export from the `parts` (offset, bytes)
/// read through the protocol: its first and last 4 MiB, where every
/// signature libblkid finds there on Linux lies. libblkid is a Linux library
/// and a hand-kept list of magic numbers misses formats (safety.rs), so
/// headroom.exe names nothing: parts that are all zeros hold no signature
/// (nothing, as Linux would find too); any other byte, a filesystem or old
/// test data alike, fails with NotFound, so the write is refused unless
/// --force.
pub fn probe_copy(_size: u64, parts: &[(u64, Vec<u8>)]) -> io::Result<Vec<crate::safety::Signature>> {
    for (offset, bytes) in parts {
        if let Some(at) = bytes.iter().position(|&b| b != 0) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "a byte other than zero at offset {} of its first or last 4 MiB, and headroom.exe cannot \
                     tell a filesystem from old test data (it has no libblkid); add --force to write over it",
                    offset + at as u64
                ),
            ));
        }
    }
    Ok(Vec::new())
}

/// Writes all of `buf` at `offset`.
pub fn write_all_at(file: &std::fs::File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Only io_uring has a forced-asynchronous mode.
pub fn force_async(_block_size: u64, _direct: bool) -> bool {
    false
}

/// Large pages on Windows need a privilege (SeLockMemoryPrivilege) users
/// rarely hold: buffers stay on ordinary pages.
pub fn prefer_huge_pages(_ptr: *mut u8, _len: usize) {}

/// The iocp engine needs nothing the system may refuse.
pub fn uring_available() -> io::Result<()> {
    Ok(())
}

/// The handle a [`RawFile`] carries.
fn as_handle(file: RawFile) -> HANDLE {
    file as HANDLE
}

/// Owns `handle`, or the last error when it is null or INVALID_HANDLE_VALUE
/// (CreateFile-like and CreateEvent-like calls fail differently).
fn owned(handle: HANDLE) -> io::Result<OwnedHandle> {
    if handle.is_null() || handle == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle the caller just got and gives away.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
}

/// An engine result from a Win32 call's BOOL: bytes moved, or the negative
/// Win32 error (GetLastError), which `io::Error::from_raw_os_error` turns
/// back into Windows' message where the runner reports it. Reading at or past
/// the end of a file is 0 bytes, as pread returns on Linux.
fn win32_result(ok: i32, bytes: u32) -> i64 {
    if ok != 0 {
        return i64::from(bytes);
    }
    // SAFETY: reads the calling thread's last error, set by the failed call.
    error_result(unsafe { GetLastError() })
}

/// [`win32_result`] of a call that failed with Win32 error `code`.
fn error_result(code: u32) -> i64 {
    match code {
        ERROR_HANDLE_EOF => 0,
        code => -i64::from(code),
    }
}

/// The signature check of a raw drive, volume or existing file open as
/// `file`: its first and last 4 MiB ([`crate::safety::edge_reads`]) read
/// and held to the rule a share's export is held to ([`probe_copy`]): all
/// zeros, or NotFound (the write is refused unless --force). A drive or
/// volume is sized by IOCTL_DISK_GET_LENGTH_INFO and read in whole sectors
/// into sector-aligned buffers, as a FILE_FLAG_NO_BUFFERING handle needs.
pub fn probe_signatures(file: &std::fs::File) -> io::Result<Vec<crate::safety::Signature>> {
    let (size, align) = match device::length(file) {
        Ok(size) => (size, device::sector_size(file).map_or(4096, |(bytes, _)| u64::from(bytes))),
        Err(_) => (file.metadata()?.len(), 1),
    };
    let parts = read_parts(file, &crate::safety::edge_reads(size, align))?;
    probe_copy(size, &parts)
}

/// The bytes of `reads` (offset, length) of `file`, through [`io_at`] (which
/// waits for an overlapped handle's I/O as for a synchronous one's).
fn read_parts(file: &std::fs::File, reads: &[(u64, u32)]) -> io::Result<Vec<(u64, Vec<u8>)>> {
    let mut buf = crate::engine::AlignedBuf::new(crate::safety::EDGE_READ, 4096);
    // SAFETY: a manual-reset event for these waits, owned (and closed) by `event`.
    let event = owned(unsafe {
        windows_sys::Win32::System::Threading::CreateEventW(std::ptr::null(), 1, 0, std::ptr::null())
    })?;
    let handle = std::os::windows::io::AsRawHandle::as_raw_handle(file);
    let event_handle = std::os::windows::io::AsRawHandle::as_raw_handle(&event);
    let mut parts = Vec::with_capacity(reads.len());
    for &(offset, len) in reads {
        // SAFETY: buf holds EDGE_READ bytes, at least len; file and event are open.
        let n = unsafe { io_at(handle, event_handle, false, buf.as_ptr(), len, offset) };
        if n < 0 {
            return Err(io::Error::from_raw_os_error(-n as i32));
        }
        if n as u64 != u64::from(len) {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{n} of {len} bytes at offset {offset}")));
        }
        parts.push((offset, buf.as_mut_slice()[..len as usize].to_vec()));
    }
    Ok(parts)
}
