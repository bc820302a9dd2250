//! Raw drives and volumes on Windows (`\\.\PhysicalDrive1`, `\\.\D:`,
//! `\\?\Volume{...}`): what the Win32 storage calls say about one, for
//! target.rs's safety rules and sizes. Each function is one documented call:
//! DeviceIoControl with IOCTL_DISK_GET_LENGTH_INFO (size),
//! IOCTL_STORAGE_QUERY_PROPERTY / StorageAccessAlignmentProperty (sector;
//! IOCTL_DISK_GET_DRIVE_GEOMETRY_EX for both where those are not answered),
//! IOCTL_DISK_GET_DRIVE_LAYOUT_EX (partitions), FSCTL_IS_VOLUME_MOUNTED and
//! FSCTL_LOCK_VOLUME (volumes) and GetVolumeNameForVolumeMountPointW (which
//! volume a path is on; the filesystem on one is headroom-sys's
//! `volume_information`, GetVolumeInformationW, which `sys` lists too). Reads
//! only, but for the lock; how a refusal is worded is target.rs's and safety.rs's.

use std::fs::File;
use std::io;
use std::os::windows::io::AsRawHandle;
use std::path::{Component, Path, Prefix};
use windows_sys::Win32::Storage::FileSystem::GetVolumeNameForVolumeMountPointW;
use windows_sys::Win32::System::Ioctl::{
    PropertyStandardQuery, StorageAccessAlignmentProperty, DISK_GEOMETRY_EX, DRIVE_LAYOUT_INFORMATION_EX,
    FSCTL_IS_VOLUME_MOUNTED, FSCTL_LOCK_VOLUME, GET_LENGTH_INFORMATION, IOCTL_DISK_GET_DRIVE_GEOMETRY_EX,
    IOCTL_DISK_GET_DRIVE_LAYOUT_EX, IOCTL_DISK_GET_LENGTH_INFO, IOCTL_STORAGE_QUERY_PROPERTY, PARTITION_INFORMATION_EX,
    PARTITION_STYLE_GPT, PARTITION_STYLE_MBR, PARTITION_STYLE_RAW, STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR,
    STORAGE_PROPERTY_QUERY,
};
use windows_sys::Win32::System::IO::DeviceIoControl;

/// DeviceIoControl of `code` on `file` with `input`, into `output`; the bytes returned.
fn ioctl<I, O>(file: &File, code: u32, input: Option<&I>, output: &mut O) -> io::Result<u32> {
    let (in_ptr, in_len) = input.map_or((std::ptr::null(), 0), |i| ((i as *const I).cast(), size_of::<I>() as u32));
    let mut returned = 0u32;
    // SAFETY: a valid handle, an input of its size (or none), an output of its size, synchronous (no OVERLAPPED).
    let ok = unsafe {
        DeviceIoControl(
            file.as_raw_handle(),
            code,
            in_ptr,
            in_len,
            (output as *mut O).cast(),
            size_of::<O>() as u32,
            &mut returned,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(returned)
}

/// Bytes of the drive or volume open as `file`: IOCTL_DISK_GET_LENGTH_INFO
/// (drives and volumes alike), else IOCTL_DISK_GET_DRIVE_GEOMETRY_EX's
/// DiskSize, else the end of the device (SetFilePointerEx with FILE_END).
/// Windows answers the first; wine 8 answers none of the ioctls for a
/// Linux block device and takes the end from Linux's lseek. The first
/// ioctl's error when all fail (a regular file fails the ioctls too).
pub fn length(file: &File) -> io::Result<u64> {
    let mut info = GET_LENGTH_INFORMATION::default();
    let error = match ioctl::<(), _>(file, IOCTL_DISK_GET_LENGTH_INFO, None, &mut info) {
        Ok(_) => return u64::try_from(info.Length).map_err(|_| io::Error::other("a negative length")),
        Err(e) => e,
    };
    if let Some(size) = geometry(file).and_then(|g| u64::try_from(g.DiskSize).ok()).filter(|&s| s > 0) {
        return Ok(size);
    }
    match std::io::Seek::seek(&mut &*file, std::io::SeekFrom::End(0)) {
        Ok(end @ 1..) => Ok(end),
        _ => Err(error),
    }
}

/// IOCTL_DISK_GET_DRIVE_GEOMETRY_EX's answer, with room for the partition
/// and detection information Windows may append.
fn geometry(file: &File) -> Option<DISK_GEOMETRY_EX> {
    #[repr(C)]
    struct WithRoom {
        geometry: DISK_GEOMETRY_EX,
        room: [u8; 256],
    }
    // SAFETY: plain data; all zeros is a valid value of every field.
    let mut out: WithRoom = unsafe { std::mem::zeroed() };
    ioctl::<(), _>(file, IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, None, &mut out).ok()?;
    Some(out.geometry)
}

/// The logical sector size unbuffered I/O's offsets, lengths and buffers
/// must be multiples of, and which call said it: IOCTL_STORAGE_QUERY_PROPERTY
/// (StorageAccessAlignmentProperty: BytesPerLogicalSector), else
/// IOCTL_DISK_GET_DRIVE_GEOMETRY_EX (BytesPerSector).
pub fn sector_size(file: &File) -> Option<(u32, &'static str)> {
    let usable = |n: u32| n.is_power_of_two() && n >= 512;
    if let Some(n) = alignment_sector(file).ok().filter(|&n| usable(n)) {
        return Some((n, "StorageAccessAlignmentProperty"));
    }
    let n = geometry(file)?.Geometry.BytesPerSector;
    usable(n).then_some((n, "IOCTL_DISK_GET_DRIVE_GEOMETRY_EX"))
}

/// StorageAccessAlignmentProperty's BytesPerLogicalSector.
fn alignment_sector(file: &File) -> io::Result<u32> {
    let query = STORAGE_PROPERTY_QUERY {
        PropertyId: StorageAccessAlignmentProperty,
        QueryType: PropertyStandardQuery,
        ..Default::default()
    };
    let mut alignment = STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR::default();
    ioctl(file, IOCTL_STORAGE_QUERY_PROPERTY, Some(&query), &mut alignment)?;
    Ok(alignment.BytesPerLogicalSector)
}

/// The drive layout with room for 128 partition entries (GPT's usual table).
#[repr(C)]
struct Layout {
    head: DRIVE_LAYOUT_INFORMATION_EX,
    more: [PARTITION_INFORMATION_EX; 127],
}

/// What IOCTL_DISK_GET_DRIVE_LAYOUT_EX says a physical drive holds: "" when
/// no partition table (PARTITION_STYLE_RAW) or a table without a used entry,
/// else its style and the number of entries with a partition type (an MBR
/// type other than 0, a GPT type GUID other than zero).
pub fn partitions(file: &File) -> io::Result<String> {
    // SAFETY: plain data; all zeros is a valid value of every field.
    let mut layout: Layout = unsafe { std::mem::zeroed() };
    ioctl::<(), _>(file, IOCTL_DISK_GET_DRIVE_LAYOUT_EX, None, &mut layout)?;
    let style = layout.head.PartitionStyle as i32;
    if style == PARTITION_STYLE_RAW {
        return Ok(String::new());
    }
    let count = (layout.head.PartitionCount as usize).min(128);
    // SAFETY: head's one entry and `more` are contiguous in this repr(C) struct.
    let entries = unsafe { std::slice::from_raw_parts(layout.head.PartitionEntry.as_ptr(), count) };
    let used = entries
        .iter()
        .filter(|e| match e.PartitionStyle {
            // SAFETY: the union member the entry's style names.
            PARTITION_STYLE_MBR => (unsafe { e.Anonymous.Mbr.PartitionType }) != 0,
            PARTITION_STYLE_GPT => {
                // SAFETY: as above.
                let t = unsafe { e.Anonymous.Gpt.PartitionType };
                (t.data1, t.data2, t.data3, t.data4) != (0, 0, 0, [0; 8])
            }
            _ => false,
        })
        .count();
    let name = if style == PARTITION_STYLE_GPT { "GPT" } else { "MBR" };
    Ok(if used == 0 { String::new() } else { format!("{name} partition table with {used} partition(s)") })
}

/// Whether a filesystem has the volume mounted (FSCTL_IS_VOLUME_MOUNTED succeeds).
pub fn is_mounted(file: &File) -> bool {
    ioctl::<(), ()>(file, FSCTL_IS_VOLUME_MOUNTED, None, &mut ()).is_ok()
}

/// Locks the volume open as `file` for this handle alone (FSCTL_LOCK_VOLUME):
/// fails while any other handle has it open. Released when `file` closes.
pub fn lock_volume(file: &File) -> io::Result<()> {
    ioctl::<(), ()>(file, FSCTL_LOCK_VOLUME, None, &mut ()).map(|_| ())
}

/// The root a volume's device name stands for (`\\.\D:` and `\\?\D:` ->
/// `D:\`, `\\?\Volume{...}` -> `\\?\Volume{...}\`), NUL-terminated, for the
/// volume-management calls that take a root.
pub fn volume_root_of(device: &Path) -> Option<Vec<u16>> {
    let Some(Component::Prefix(prefix)) = device.components().next() else { return None };
    let root = match prefix.kind() {
        Prefix::VerbatimDisk(letter) => format!("{}:\\", letter as char),
        Prefix::DeviceNS(name) | Prefix::Verbatim(name) => {
            let name = name.to_str()?;
            match name.as_bytes() {
                [letter, b':'] if letter.is_ascii_alphabetic() => format!("{name}\\"),
                _ if name.len() > 7 && name[..7].eq_ignore_ascii_case("Volume{") => format!("\\\\?\\{name}\\"),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(root.encode_utf16().chain(Some(0)).collect())
}

/// The `\\?\Volume{GUID}\` name of the volume whose NUL-terminated root
/// (or mount folder) is `root` (GetVolumeNameForVolumeMountPointW).
pub fn volume_guid(root: &[u16]) -> Option<Vec<u16>> {
    let mut name = [0u16; 64];
    // SAFETY: a NUL-terminated root and a buffer of the 50 characters the documentation asks for, and more.
    let ok = unsafe { GetVolumeNameForVolumeMountPointW(root.as_ptr(), name.as_mut_ptr(), name.len() as u32) };
    let len = name.iter().position(|&c| c == 0).unwrap_or(0);
    (ok != 0 && len > 0).then(|| name[..len].to_vec())
}

/// Whether the device name is a whole physical drive (`\\.\PhysicalDrive1`)
/// rather than a volume.
pub fn is_physical_drive(device: &Path) -> bool {
    let Some(Component::Prefix(prefix)) = device.components().next() else { return false };
    match prefix.kind() {
        Prefix::DeviceNS(name) | Prefix::Verbatim(name) => {
            name.to_str().is_some_and(|n| n.len() > 13 && n[..13].eq_ignore_ascii_case("PhysicalDrive"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(s: &str) -> Option<String> {
        volume_root_of(Path::new(s)).map(|w| String::from_utf16_lossy(&w[..w.len() - 1]))
    }

    #[test]
    fn device_names_map_to_their_volume_roots() {
        assert_eq!(root(r"\\.\D:").as_deref(), Some(r"D:\"));
        assert_eq!(root(r"\\?\D:").as_deref(), Some(r"D:\"));
        assert_eq!(
            root(r"\\?\Volume{1b3b1146-4076-11e1-84aa-806e6f6e6963}").as_deref(),
            Some(r"\\?\Volume{1b3b1146-4076-11e1-84aa-806e6f6e6963}\")
        );
        assert_eq!(root(r"\\.\PhysicalDrive1"), None);
        assert!(is_physical_drive(Path::new(r"\\.\PhysicalDrive1")));
        assert!(is_physical_drive(Path::new(r"\\?\physicaldrive12")));
        assert!(!is_physical_drive(Path::new(r"\\.\D:")));
        assert!(!is_physical_drive(Path::new(r"\\.\PhysicalDrive")));
    }
}
