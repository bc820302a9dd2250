//! The platform seam of headroom-proto: which protocol clients this
//! platform has, and the one file attribute credentials.rs checks,
//! implemented once per platform beside this file (`linux.rs`,
//! `windows.rs`; docs/platform.md has the rule). lib.rs and credentials.rs
//! call only these names.
//!
//! What a platform provides:
//! - `open_iscsi`, `open_smb`, `open_nfs`, `open_nbd`: a share through each
//!   client, or the one-line refusal where this platform (or this build)
//!   has no such client;
//! - `file_mode`: a file's Unix permission bits, or why they cannot be read.
//!
//! Must not hold a protocol: the clients are their own modules.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
