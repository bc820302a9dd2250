//! The platform seam of headroom-result: the one thing this crate asks of the
//! operating system, implemented once per platform beside this file
//! (`linux.rs`, `windows.rs`; docs/platform.md has the rule).
//!
//! - `open_input`: opens a file the user named as input for reading without
//!   waiting for a writer, so a FIFO nobody writes to reads as empty instead
//!   of blocking for ever.
//!
//! Must not read or parse: that stays in lib.rs.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::open_input;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::open_input;
