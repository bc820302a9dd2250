//! The platform seam of headroom-flushcheck: opening the file past the page
//! cache or with durable writes, and positioned reads and writes,
//! implemented once per platform beside this file (`linux.rs`,
//! `windows.rs`; docs/platform.md has the rule). io.rs and writer.rs call
//! only these names.
//!
//! What a platform provides:
//! - `open_direct`: the file for reading past the page cache, and whether
//!   that worked (a filesystem may refuse: buffered reads then);
//! - `open_for_writes`: the file for writing, each write durable when it
//!   returns if `dsync` is asked;
//! - `read_at`, `write_all_at`: positioned I/O.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
