//! Windows: headroom's own iSCSI and SMB clients wait on sockets with
//! poll(2) and answer in errno numbers, so they are not built for Windows
//! yet; the NFS and NBD clients call libnfs and libnbd, Linux libraries.
//! Each scheme is refused in one line. A file has no Unix mode here.

use crate::{Credentials, IscsiKeys, IscsiUrl, NbdUrl, NfsUrl, SmbUrl, Source};
use headroom_disk::{DiskError, Share, TargetOptions};

fn not_yet(scheme: &str) -> DiskError {
    DiskError::Usage(format!("{scheme}:// targets are not available on Windows yet; run headroom on Linux for them"))
}

/// Refused: not available on Windows yet.
pub(crate) fn open_iscsi(
    _: &IscsiUrl,
    _: &TargetOptions,
    _: &Credentials,
    _: &Source,
    _: &IscsiKeys,
) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("iscsi"))
}

/// Refused: not available on Windows yet.
pub(crate) fn open_smb(
    _: &SmbUrl,
    _: &TargetOptions,
    _: &Credentials,
    _: &Source,
) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("smb"))
}

/// Refused: headroom's NFS client calls libnfs.
pub(crate) fn open_nfs(_: &NfsUrl, _: &TargetOptions, _: &Source) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("nfs"))
}

/// Refused: headroom's NBD client calls libnbd.
pub(crate) fn open_nbd(_: &NbdUrl, _: &TargetOptions, _: &Source) -> Result<Box<dyn Share>, DiskError> {
    Err(not_yet("nbd"))
}

/// Refused: Windows keeps who may read a file in its ACL, which is not read yet.
pub(crate) fn file_mode(_meta: &std::fs::Metadata) -> Result<u32, String> {
    Err("who may read a file is not checked on Windows yet; give the credentials in the environment".into())
}
