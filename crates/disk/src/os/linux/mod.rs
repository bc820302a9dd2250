//! The Linux implementation of headroom-disk's platform seam (see
//! `os/mod.rs`): the psync engine (pread/pwrite/fsync from threads) and the
//! io_uring engine. Each moves bytes through the engine trait only; what to
//! queue and when is the runner's.

mod psync;
mod uring;

pub use psync::{psync_threads, PsyncEngine, PSYNC_MAX_THREADS};
pub use uring::{force_async, UringEngine};

/// An open file as the engines' system calls take it.
pub use std::os::fd::RawFd as RawFile;

/// Whether this kernel lets this process set up an io_uring (it may lack it,
/// or refuse it: seccomp, the io_uring_disabled sysctl).
pub fn uring_available() -> io::Result<()> {
    io_uring::IoUring::new(2).map(|_| ())
}

use std::io;
