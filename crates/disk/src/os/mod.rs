//! The platform seam of headroom-disk's I/O: the engines that implement
//! [`crate::engine::IoEngine`] with this platform's system calls, one
//! directory per platform beside this file (`linux/` today). The engine
//! trait, the buffers and the choice between engines (engine/mod.rs) call
//! only these names, so a port adds `windows/` with the same ones and no
//! `cfg` line appears elsewhere. See docs/platform.md.
//!
//! What a platform provides:
//! - `RawFile`: an open file as its engines take it ([`crate::engine::EngineConfig`]);
//! - a synchronous engine: `PsyncEngine`, `psync_threads`, `PSYNC_MAX_THREADS`;
//! - an asynchronous engine: `UringEngine`, `force_async`,
//!   and `uring_available` (whether `Auto` may pick it).
//!
//! Opening a target with O_DIRECT, statx and the safety checks are not here
//! yet: they live in target.rs and safety.rs (listed in docs/platform.md).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;
