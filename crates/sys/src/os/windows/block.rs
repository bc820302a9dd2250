//! Disks on Windows, as `sys` lists Linux's /sys/block: each physical drive
//! (`\\.\PhysicalDrive0`, `1`, ...) with its vendor and product, the bus it
//! sits on (IOCTL_STORAGE_QUERY_PROPERTY's StorageDeviceProperty: NVMe,
//! SATA, SAS, USB, iSCSI, a virtual disk), its size
//! (IOCTL_DISK_GET_DRIVE_GEOMETRY_EX) and whether it seeks (the seek-penalty
//! property: a spinning disk). The disk under a path is found through its
//! volume's extents (IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS).
//!
//! The PCIe link under an NVMe drive, and so its bus ceiling, as on Linux:
//! the PCI device above it in the device tree (`pci`). Windows does not tell
//! a SATA link's negotiated rate: a SATA disk's bus is named (`sata`), its
//! link and ceiling stay absent, never guessed.
//!
//! Every handle is opened with no access rights at all: these queries need
//! none, so `sys` lists disks without being run as administrator and can
//! never read or write a sector.

use crate::SysRoot;
use headroom_result::BlockDevice;
use std::path::Path;
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, GetVolumePathNameW, FILE_SHARE_READ, FILE_SHARE_WRITE, IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS,
    OPEN_EXISTING, STORAGE_BUS_TYPE,
};
use windows_sys::Win32::System::Ioctl::{
    PropertyStandardQuery, StorageDeviceProperty, StorageDeviceSeekPenaltyProperty, DEVICE_SEEK_PENALTY_DESCRIPTOR,
    DISK_EXTENT, DISK_GEOMETRY_EX, IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, IOCTL_STORAGE_QUERY_PROPERTY,
    STORAGE_DEVICE_DESCRIPTOR, STORAGE_PROPERTY_QUERY, VOLUME_DISK_EXTENTS,
};
use windows_sys::Win32::System::IO::DeviceIoControl;

mod pci;

/// Drive numbers tried: Windows numbers physical drives from 0 without
/// gaps in the common case, but a removed disk leaves one, so the walk
/// does not stop at the first missing number.
const DRIVES_TRIED: u32 = 64;

/// Every physical drive that opens, in number order.
pub fn block_devices(root: &SysRoot) -> Vec<BlockDevice> {
    if !root.is_live() {
        return Vec::new();
    }
    (0..DRIVES_TRIED).filter_map(physical_drive).collect()
}

/// The physical drive that holds `path` (the first extent of its volume:
/// a volume spanning disks names the one it starts on); None for a share.
pub fn block_device_holding(path: &Path) -> Option<BlockDevice> {
    physical_drive(disk_number_of_volume(&volume_of(path)?)?)
}

/// `\\.\PhysicalDriveN` as a BlockDevice; None when no such drive opens.
fn physical_drive(number: u32) -> Option<BlockDevice> {
    let handle = Handle::open_for_queries(&format!(r"\\.\PhysicalDrive{number}"))?;
    let (model, bus) = descriptor(&handle).unwrap_or((None, None));
    let rotational = seek_penalty(&handle);
    let size_bytes = size(&handle).unwrap_or(0);
    let mut notes = Vec::new();
    if bus.is_some_and(|b| matches!(b, "virtual" | "file-backed virtual" | "spaces")) {
        notes.push("a virtual disk: its speed is that of what backs it".to_string());
    }
    let mut device = BlockDevice {
        name: format!("PhysicalDrive{number}"),
        model,
        rotational,
        size_bytes,
        transport: bus.map(str::to_string),
        notes,
        ..BlockDevice::default()
    };
    // As on Linux, only an NVMe drive's PCI device is its own link: a SATA
    // or USB disk's PCI device is the controller, shared by its ports.
    if bus == Some("nvme") {
        if let Some(link) = pci::pci_link_of_drive(number) {
            crate::pcie::record_nvme_link(&mut device, link);
        }
    }
    Some(device)
}

/// A handle with no access rights (queries only), closed on drop.
struct Handle(HANDLE);

impl Handle {
    fn open_for_queries(path: &str) -> Option<Handle> {
        let wide: Vec<u16> = path.encode_utf16().chain([0]).collect();
        // SAFETY: a NUL-terminated path; access 0 asks for no read or write
        // right; no security attributes, no template.
        let h = unsafe {
            CreateFileW(
                wide.as_ptr(),
                0,
                FILE_SHARE_READ | FILE_SHARE_WRITE,
                std::ptr::null(),
                OPEN_EXISTING,
                0,
                std::ptr::null_mut(),
            )
        };
        (h != INVALID_HANDLE_VALUE && !h.is_null()).then_some(Handle(h))
    }

    /// DeviceIoControl with `input`, into `out`; the bytes returned.
    fn ioctl<I>(&self, code: u32, input: Option<&I>, out: &mut [u64]) -> Option<usize> {
        let (in_ptr, in_len) = match input {
            Some(i) => ((i as *const I).cast(), std::mem::size_of::<I>() as u32),
            None => (std::ptr::null(), 0),
        };
        let mut returned = 0u32;
        // SAFETY: the input is a plain struct of its size (or none); `out`
        // is writable for its length in bytes; synchronous (no OVERLAPPED).
        let ok = unsafe {
            DeviceIoControl(
                self.0,
                code,
                in_ptr,
                in_len,
                out.as_mut_ptr().cast(),
                (out.len() * 8) as u32,
                &mut returned,
                std::ptr::null_mut(),
            )
        };
        (ok != 0).then_some(returned as usize)
    }

    /// IOCTL_STORAGE_QUERY_PROPERTY for `property` (the standard query).
    fn property(&self, property: i32, out: &mut [u64]) -> Option<usize> {
        let query = STORAGE_PROPERTY_QUERY {
            PropertyId: property,
            QueryType: PropertyStandardQuery,
            AdditionalParameters: [0],
        };
        self.ioctl(IOCTL_STORAGE_QUERY_PROPERTY, Some(&query), out)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: a handle this struct opened and closes once.
        unsafe { CloseHandle(self.0) };
    }
}

/// The model ("vendor product", trimmed) and the bus's name.
fn descriptor(handle: &Handle) -> Option<(Option<String>, Option<&'static str>)> {
    // 1 KiB holds the descriptor and the strings that follow it.
    let mut buf = [0u64; 128];
    let len = handle.property(StorageDeviceProperty, &mut buf)?.min(buf.len() * 8);
    let bytes = as_bytes(&buf, len);
    // The fields are read by their offsets, not through the struct: its
    // BOOLEAN members are bytes a driver may fill with any value.
    let field = |offset| u32_at(bytes, offset);
    let vendor = ascii_at(bytes, field(std::mem::offset_of!(STORAGE_DEVICE_DESCRIPTOR, VendorIdOffset))?);
    let product = ascii_at(bytes, field(std::mem::offset_of!(STORAGE_DEVICE_DESCRIPTOR, ProductIdOffset))?);
    let bus = field(std::mem::offset_of!(STORAGE_DEVICE_DESCRIPTOR, BusType))?;
    let model = [vendor, product].into_iter().flatten().collect::<Vec<_>>().join(" ");
    Some(((!model.is_empty()).then_some(model), bus_name(bus as STORAGE_BUS_TYPE)))
}

/// The first `len` bytes an ioctl wrote into `buf`.
fn as_bytes(buf: &[u64], len: usize) -> &[u8] {
    // SAFETY: u64s are readable as bytes; `len` is capped at the buffer's size.
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len.min(buf.len() * 8)) }
}

/// The u32 (native order, as the driver wrote it) at `offset`, if the reply reaches that far.
fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(offset..offset + 4)?.try_into().ok()?))
}

/// The NUL-terminated ASCII string at `offset` of the descriptor (0: none), trimmed.
fn ascii_at(bytes: &[u8], offset: u32) -> Option<String> {
    let start = offset as usize;
    if start == 0 || start >= bytes.len() {
        return None;
    }
    let end = bytes[start..].iter().position(|&b| b == 0).map_or(bytes.len(), |n| start + n);
    let text = String::from_utf8_lossy(&bytes[start..end]).trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// ntddstor.h's STORAGE_BUS_TYPE, named as Linux's transports are where one matches.
fn bus_name(bus: STORAGE_BUS_TYPE) -> Option<&'static str> {
    Some(match bus {
        1 => "scsi",
        2 => "atapi",
        3 => "ata",
        4 => "ieee1394",
        5 => "ssa",
        6 => "fibre",
        7 => "usb",
        8 => "raid",
        9 => "iscsi",
        10 => "sas",
        11 => "sata",
        12 => "sd",
        13 => "mmc",
        14 => "virtual",
        15 => "file-backed virtual",
        16 => "spaces",
        17 => "nvme",
        18 => "scm",
        19 => "ufs",
        _ => return None,
    })
}

/// Whether the drive seeks (true: a spinning disk); None when it does not say.
fn seek_penalty(handle: &Handle) -> Option<bool> {
    let mut buf = [0u64; 2];
    let len = handle.property(StorageDeviceSeekPenaltyProperty, &mut buf)?;
    let at = std::mem::offset_of!(DEVICE_SEEK_PENALTY_DESCRIPTOR, IncursSeekPenalty);
    as_bytes(&buf, len).get(at).map(|b| *b != 0)
}

/// The drive's size in bytes.
fn size(handle: &Handle) -> Option<u64> {
    let mut buf = [0u64; 8];
    let len = handle.ioctl::<()>(IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, None, &mut buf)?;
    let at = std::mem::offset_of!(DISK_GEOMETRY_EX, DiskSize);
    let bytes = as_bytes(&buf, len);
    Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// `\\.\C:` for a path on drive C: (its volume's root without the slash);
/// None for a share or a path Windows cannot place.
fn volume_of(path: &Path) -> Option<String> {
    let wide: Vec<u16> = path.as_os_str().to_string_lossy().encode_utf16().chain([0]).collect();
    let mut root = [0u16; 1024];
    // SAFETY: a NUL-terminated path; the buffer's length in UTF-16 units.
    if unsafe { GetVolumePathNameW(wide.as_ptr(), root.as_mut_ptr(), root.len() as u32) } == 0 {
        return None;
    }
    let end = root.iter().position(|&c| c == 0).unwrap_or(root.len());
    let root = String::from_utf16_lossy(&root[..end]);
    let volume = root.trim_end_matches('\\');
    // A drive letter (`C:`); a share (`\\nas\bench`) has no disk here.
    (volume.len() == 2 && volume.ends_with(':')).then(|| format!(r"\\.\{volume}"))
}

/// The number of the physical drive a volume starts on.
fn disk_number_of_volume(volume: &str) -> Option<u32> {
    let handle = Handle::open_for_queries(volume)?;
    let mut buf = [0u64; 16];
    let len = handle.ioctl::<()>(IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS, None, &mut buf)?;
    let bytes = as_bytes(&buf, len);
    let count = u32_at(bytes, std::mem::offset_of!(VOLUME_DISK_EXTENTS, NumberOfDiskExtents))?;
    let first = std::mem::offset_of!(VOLUME_DISK_EXTENTS, Extents) + std::mem::offset_of!(DISK_EXTENT, DiskNumber);
    if count == 0 {
        return None;
    }
    u32_at(bytes, first)
}
