//! The Linux implementation of headroom-disk's platform seam (see
//! `os/mod.rs`): the psync engine (pread/pwrite/fsync from threads), the
//! io_uring engine, and the safety checks' probe (libblkid) and kernel holders. Each moves bytes through the engine trait only; what to
//! queue and when is the runner's.

mod psync;
mod safety;
mod uring;

pub use psync::PsyncEngine;
pub use safety::{in_use_reason, loop_devices_backed_by, probe_signatures};
pub use uring::{force_async, UringEngine};

/// The asynchronous engine's name in the result document.
pub const ASYNC_ENGINE: &str = "io_uring";

/// fio's name for the same engine (the fio equivalent line).
pub const FIO_ASYNC_ENGINE: &str = "io_uring";

/// The open flag that makes a test unbuffered (`direct`), as the result records it.
pub const DIRECT_FLAG: headroom_result::DirectFlag = headroom_result::DirectFlag::ODirect;

/// An open file as the engines' system calls take it.
pub use std::os::fd::RawFd as RawFile;

/// The descriptor of `file`, as the engines take it.
pub fn raw_file(file: &std::fs::File) -> RawFile {
    std::os::fd::AsRawFd::as_raw_fd(file)
}

/// A file that lives in memory only (memfd), gone when closed.
pub fn memory_file(name: &str) -> io::Result<std::fs::File> {
    let memfd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?;
    Ok(std::fs::File::from(memfd))
}

/// Writes all of `buf` at `offset` (pwrite).
pub fn write_all_at(file: &std::fs::File, buf: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

/// Asks for `len` bytes at `ptr` (huge-page aligned, not yet touched) to be
/// backed by transparent huge pages, so each engine buffer is one physical
/// segment. THP's default mode ("madvise") grants only regions that ask; where
/// THP is off or no huge page is free the region stays on ordinary pages,
/// which is correct, only split more often.
pub fn prefer_huge_pages(ptr: *mut u8, len: usize) {
    // SAFETY: madvise only changes how the kernel backs the range; the range is owned by the caller.
    let _ = unsafe { libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE) };
}

/// Whether this kernel lets this process set up an io_uring (it may lack it,
/// or refuse it: seccomp, the io_uring_disabled sysctl).
pub fn uring_available() -> io::Result<()> {
    io_uring::IoUring::new(2).map(|_| ())
}

use std::io;
