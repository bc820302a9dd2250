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

/// Every signature libblkid finds on a device of `size` bytes of which only
/// `parts` (offset, bytes) were read: they go into a sparse copy that lives
/// in memory only (memfd, the rest reading as zeros, gone when closed),
/// which libblkid probes as it would the device.
pub fn probe_copy(size: u64, parts: &[(u64, Vec<u8>)]) -> io::Result<Vec<crate::safety::Signature>> {
    let memfd = rustix::fs::memfd_create("headroom-export-head", rustix::fs::MemfdFlags::CLOEXEC)?;
    let file = std::fs::File::from(memfd);
    file.set_len(size)?;
    for (offset, bytes) in parts {
        std::os::unix::fs::FileExt::write_all_at(&file, bytes, *offset)?;
    }
    probe_signatures(&file)
}

/// Whether this kernel lets this process set up an io_uring (it may lack it,
/// or refuse it: seccomp, the io_uring_disabled sysctl).
pub fn uring_available() -> io::Result<()> {
    io_uring::IoUring::new(2).map(|_| ())
}

use std::io;
