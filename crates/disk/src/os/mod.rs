//! The platform seam of headroom-disk's I/O: the engines that implement
//! [`crate::engine::IoEngine`] with this platform's system calls, one
//! directory per platform beside this file (`linux/` today). The engine
//! trait, the buffers and the choice between engines (engine/mod.rs) call
//! only these names, so a port adds a directory with the same ones
//! (`windows/`) and no `cfg` line appears elsewhere. See docs/platform.md.
//!
//! What a platform provides:
//! - `RawFile`: an open file as its engines take it ([`crate::engine::EngineConfig`]),
//!   and `raw_file` to get it from a `File`;
//! - a synchronous engine: `PsyncEngine`;
//! - an asynchronous engine: `UringEngine` (named after Linux's io_uring; on
//!   Windows it is the iocp engine), `force_async`, `uring_available`
//!   (whether `Auto` may pick it), and its names: `ASYNC_ENGINE` in the
//!   result document, `FIO_ASYNC_ENGINE` in the fio equivalent;
//! - `DIRECT_FLAG`: the open flag an unbuffered test used (O_DIRECT,
//!   FILE_FLAG_NO_BUFFERING), recorded in the result and its warnings;
//! - `prefer_huge_pages`: backs the engines' buffer region with huge pages
//!   where the platform grants them (a no-op where it does not);
//!
//! - `probe_signatures`: every signature (filesystem, RAID, partition table)
//!   on an open device or file, for safety.rs; failing with NotFound when
//!   the probe itself is missing (the write is then refused);
//! - `probe_copy`: the same for a share's export from the parts of it that
//!   were read through the protocol (Windows, without libblkid, lets only
//!   zeros through; NotFound otherwise, so the write is refused).
//!
//! Opening a local target is not behind this seam: target.rs does it with
//! Linux's calls (O_DIRECT, statx, /proc/self/fd; listed in docs/platform.md),
//! and Windows builds its own from its directory instead (`windows/target.rs`,
//! named in lib.rs), sharing what is the same through storage.rs.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;
