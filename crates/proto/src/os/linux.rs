//! Linux: every client headroom speaks itself (iSCSI, SMB), NFS and NBD as
//! this build has them (features `nfs`, `nbd`), and the mode of a file.

use crate::{Credentials, IscsiKeys, IscsiUrl, NbdUrl, NfsUrl, SmbUrl, Source};
use headroom_disk::{DiskError, Share, TargetOptions};
use std::os::unix::fs::MetadataExt;

/// A share on an iSCSI target.
pub(crate) fn open_iscsi(
    url: &IscsiUrl,
    opts: &TargetOptions,
    credentials: &Credentials,
    source: &Source,
    keys: &IscsiKeys,
) -> Result<Box<dyn Share>, DiskError> {
    Ok(crate::iscsi::open(url, opts, credentials, source, keys)?)
}

/// A share on an SMB server.
pub(crate) fn open_smb(
    url: &SmbUrl,
    opts: &TargetOptions,
    credentials: &Credentials,
    source: &Source,
) -> Result<Box<dyn Share>, DiskError> {
    Ok(crate::smb::open(url, opts, credentials, source)?)
}

/// The file's mode bits (st_mode).
pub(crate) fn file_mode(meta: &std::fs::Metadata) -> Result<u32, String> {
    Ok(meta.mode())
}

// The NFS and NBD clients call the C libraries libnfs and libnbd, loaded at
// run time (features `nfs` and `nbd`, on by default); the static build
// leaves them out, since a static binary cannot load them and libnbd's static
// archive needs GnuTLS and libxml2 linked in as well.

#[cfg(feature = "nfs")]
pub(crate) fn open_nfs(url: &NfsUrl, opts: &TargetOptions, source: &Source) -> Result<Box<dyn Share>, DiskError> {
    crate::nfs::open(url, opts, source)
}

#[cfg(not(feature = "nfs"))]
pub(crate) fn open_nfs(_: &NfsUrl, _: &TargetOptions, _: &Source) -> Result<Box<dyn Share>, DiskError> {
    Err(not_built("NFS", "libnfs"))
}

#[cfg(feature = "nbd")]
pub(crate) fn open_nbd(url: &NbdUrl, opts: &TargetOptions, source: &Source) -> Result<Box<dyn Share>, DiskError> {
    Ok(crate::nbd::open(url, opts, source)?)
}

#[cfg(not(feature = "nbd"))]
pub(crate) fn open_nbd(_: &NbdUrl, _: &TargetOptions, _: &Source) -> Result<Box<dyn Share>, DiskError> {
    Err(not_built("NBD", "libnbd"))
}

#[cfg(any(not(feature = "nfs"), not(feature = "nbd")))]
fn not_built(protocol: &str, library: &str) -> DiskError {
    DiskError::Usage(format!(
        "this headroom was built without its {protocol} client (a static build leaves out {library}); \
         use a build from `cargo build --release` or the distribution package"
    ))
}
