//! Volumes on Windows, as `sys` lists Linux's mounts: each drive letter
//! (GetLogicalDriveStringsW) with its filesystem (GetVolumeInformationW:
//! NTFS, ReFS, FAT32, exFAT), and what it is: the device behind a local
//! volume (QueryDosDeviceW, `\Device\HarddiskVolume2`) or the share behind a
//! mapped network drive (WNetGetConnectionW, `\\nas\bench`, with the type
//! `smb`, so a user who measures `Z:` sees it is a share, not a disk). A
//! drive without media (an empty card reader) is left out.
//!
//! Its GetVolumeInformationW reader ([`volume_information`]) is the one
//! headroom-disk asks too, before it would write to a raw volume.

use crate::SysRoot;
use headroom_result::Filesystem;
use windows_sys::Win32::NetworkManagement::WNet::WNetGetConnectionW;
use windows_sys::Win32::Storage::FileSystem::{
    GetDriveTypeW, GetLogicalDriveStringsW, GetVolumeInformationW, QueryDosDeviceW,
};
use windows_sys::Win32::System::SystemServices::FILE_READ_ONLY_VOLUME;
use windows_sys::Win32::System::WindowsProgramming::DRIVE_REMOTE;

/// Longest text asked of the calls below, in UTF-16 units.
const TEXT: usize = 1024;

/// Every drive letter with media, `C:\` first.
pub fn filesystems(root: &SysRoot) -> Vec<Filesystem> {
    if !root.is_live() {
        return Vec::new();
    }
    drive_roots().iter().filter_map(|drive| volume(drive)).collect()
}

/// `C:\`, `D:\`, ... as NUL-terminated UTF-16 strings.
fn drive_roots() -> Vec<Vec<u16>> {
    let mut buf = vec![0u16; TEXT];
    // SAFETY: the buffer's length in UTF-16 units, less the final NUL.
    let n = unsafe { GetLogicalDriveStringsW(TEXT as u32 - 1, buf.as_mut_ptr()) } as usize;
    if n == 0 || n >= TEXT {
        return Vec::new();
    }
    buf[..n].split(|&c| c == 0).filter(|d| !d.is_empty()).map(|d| d.iter().copied().chain([0]).collect()).collect()
}

/// One drive's filesystem; None without media.
fn volume(drive: &[u16]) -> Option<Filesystem> {
    let info = volume_information(drive)?;
    let mountpoint = text(&drive[..drive.len() - 1]);
    // SAFETY: a NUL-terminated root path.
    let remote = unsafe { GetDriveTypeW(drive.as_ptr()) } == DRIVE_REMOTE;
    let letter: Vec<u16> = mountpoint.trim_end_matches('\\').encode_utf16().chain([0]).collect();
    let filesystem = info.filesystem.unwrap_or_default();
    let (fstype, device) = if remote {
        ("smb".to_string(), share_of(&letter).unwrap_or(filesystem))
    } else {
        (filesystem, device_of(&letter).unwrap_or_default())
    };
    let options = info.read_only.then(|| "ro".to_string());
    Some(Filesystem { mountpoint, fstype, device, options })
}

/// What GetVolumeInformationW says of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInformation {
    /// The filesystem Windows recognises on it (NTFS, ReFS, FAT32, exFAT);
    /// None when it names none.
    pub filesystem: Option<String>,
    /// FILE_READ_ONLY_VOLUME is set.
    pub read_only: bool,
}

/// GetVolumeInformationW of the volume whose NUL-terminated `root` is given
/// (`C:\`, a mount folder, `\\?\Volume{...}\`): the one reader of a
/// volume's filesystem name, for `sys`'s volumes and for headroom-disk's
/// refusal to write over a filesystem. None when Windows does not answer:
/// a drive without media, a RAW volume, a path that is no volume's root.
pub fn volume_information(root: &[u16]) -> Option<VolumeInformation> {
    let mut name = [0u16; 64];
    let mut flags = 0u32;
    // SAFETY: `root` is NUL-terminated; every out-pointer is either null
    // (not asked) or a buffer of the length given.
    let ok = unsafe {
        GetVolumeInformationW(
            root.as_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut flags,
            name.as_mut_ptr(),
            name.len() as u32,
        )
    };
    if ok == 0 {
        return None;
    }
    let filesystem = text(&name);
    Some(VolumeInformation {
        filesystem: (!filesystem.is_empty()).then_some(filesystem),
        read_only: flags & FILE_READ_ONLY_VOLUME != 0,
    })
}

/// `\\server\share` behind a mapped drive (`Z:`).
fn share_of(letter: &[u16]) -> Option<String> {
    let mut buf = [0u16; TEXT];
    let mut len = TEXT as u32;
    // SAFETY: `letter` is NUL-terminated; `len` is the buffer's length in units.
    (unsafe { WNetGetConnectionW(letter.as_ptr(), buf.as_mut_ptr(), &mut len) } == 0).then(|| text(&buf))
}

/// `\Device\HarddiskVolume2` behind a local drive (`C:`).
fn device_of(letter: &[u16]) -> Option<String> {
    let mut buf = [0u16; TEXT];
    // SAFETY: `letter` is NUL-terminated; the buffer's length in units.
    let n = unsafe { QueryDosDeviceW(letter.as_ptr(), buf.as_mut_ptr(), TEXT as u32) };
    (n > 0).then(|| text(&buf))
}

/// UTF-16 up to the first NUL.
pub(crate) fn text(units: &[u16]) -> String {
    let end = units.iter().position(|&c| c == 0).unwrap_or(units.len());
    String::from_utf16_lossy(&units[..end])
}
