//! The PCIe link above a physical drive, as Linux reads it from the PCI
//! device directory above /sys/block/nvme0n1:
//! 1. the drive's device instance: among the present disk interfaces
//!    (SetupDiGetClassDevsW(GUID_DEVINTERFACE_DISK, DIGCF_PRESENT |
//!    DIGCF_DEVICEINTERFACE), SetupDiEnumDeviceInterfaces,
//!    SetupDiGetDeviceInterfaceDetailW) the one whose path, opened with no
//!    access rights, answers IOCTL_STORAGE_GET_DEVICE_NUMBER with the
//!    drive's number;
//! 2. up the device tree (CM_Get_Parent) to the first device Windows
//!    enumerated on PCI (its instance id, CM_Get_Device_IDW, starts `PCI\`):
//!    for NVMe, the drive's own controller;
//! 3. that device's link (CM_Get_DevNode_PropertyW with pciprop.h's
//!    DEVPKEY_PciDevice_CurrentLinkSpeed, CurrentLinkWidth, MaxLinkSpeed and
//!    MaxLinkWidth, each a DEVPROP_TYPE_UINT32), turned into the record Linux
//!    makes by `crate::pcie::pci_link_of_codes`.
//!
//! Any step that finds nothing leaves the link absent: the first PCI device
//! is the one asked, never one further up, whose link is another one.

use super::super::mounts::text;
use super::Handle;
use headroom_result::PciLink;
use windows_sys::Win32::Devices::DeviceAndDriverInstallation::{
    CM_Get_DevNode_PropertyW, CM_Get_Device_IDW, CM_Get_Parent, SetupDiDestroyDeviceInfoList,
    SetupDiEnumDeviceInterfaces, SetupDiGetClassDevsW, SetupDiGetDeviceInterfaceDetailW, CR_SUCCESS,
    DIGCF_DEVICEINTERFACE, DIGCF_PRESENT, HDEVINFO, MAX_DEVICE_ID_LEN, SP_DEVICE_INTERFACE_DATA,
    SP_DEVICE_INTERFACE_DETAIL_DATA_W, SP_DEVINFO_DATA,
};
use windows_sys::Win32::Devices::Properties::{DEVPROPTYPE, DEVPROP_TYPE_UINT32};
use windows_sys::Win32::Foundation::{DEVPROPKEY, INVALID_HANDLE_VALUE};
// windows-sys files pciprop.h's keys under WiFi.
use windows_sys::Win32::NetworkManagement::WiFi::{
    DEVPKEY_PciDevice_CurrentLinkSpeed, DEVPKEY_PciDevice_CurrentLinkWidth, DEVPKEY_PciDevice_MaxLinkSpeed,
    DEVPKEY_PciDevice_MaxLinkWidth,
};
use windows_sys::Win32::System::Ioctl::{
    GUID_DEVINTERFACE_DISK, IOCTL_STORAGE_GET_DEVICE_NUMBER, STORAGE_DEVICE_NUMBER,
};

/// Levels climbed before giving up: a disk sits one to a few levels below
/// its controller (NVMe: one; behind a RAID or VMD driver: more), and the
/// tree's root is rarely ten levels up.
const LEVELS: usize = 16;

/// The PCIe link above `\\.\PhysicalDrive{number}`; None where any step finds nothing.
pub(super) fn pci_link_of_drive(number: u32) -> Option<PciLink> {
    let pci = first_pci_device_above(device_instance_of_drive(number)?)?;
    let property = |key| u32_property(pci, &key);
    crate::pcie::pci_link_of_codes(
        property(DEVPKEY_PciDevice_CurrentLinkSpeed),
        property(DEVPKEY_PciDevice_CurrentLinkWidth),
        property(DEVPKEY_PciDevice_MaxLinkSpeed),
        property(DEVPKEY_PciDevice_MaxLinkWidth),
    )
}

/// The present disk interfaces, destroyed on drop (SetupDiDestroyDeviceInfoList).
struct DiskInterfaces(HDEVINFO);

impl DiskInterfaces {
    fn present() -> Option<DiskInterfaces> {
        // SAFETY: a GUID that lives for the call; no enumerator, no window.
        let set = unsafe {
            SetupDiGetClassDevsW(
                &GUID_DEVINTERFACE_DISK,
                std::ptr::null(),
                std::ptr::null_mut(),
                DIGCF_PRESENT | DIGCF_DEVICEINTERFACE,
            )
        };
        (set != INVALID_HANDLE_VALUE as HDEVINFO).then_some(DiskInterfaces(set))
    }

    /// Interface `index`: Some(None) when it exists but its path or device
    /// cannot be read; None past the last one.
    fn get(&self, index: u32) -> Option<Option<(String, u32)>> {
        let mut data =
            SP_DEVICE_INTERFACE_DATA { cbSize: size_of::<SP_DEVICE_INTERFACE_DATA>() as u32, ..Default::default() };
        // SAFETY: the set this struct owns; `data` has its cbSize set.
        let found =
            unsafe { SetupDiEnumDeviceInterfaces(self.0, std::ptr::null(), &GUID_DEVINTERFACE_DISK, index, &mut data) };
        if found == 0 {
            return None;
        }
        Some(self.path_and_device(&data))
    }

    /// The interface's path (for CreateFileW) and its device instance.
    fn path_and_device(&self, data: &SP_DEVICE_INTERFACE_DATA) -> Option<(String, u32)> {
        let mut required = 0u32;
        // SAFETY: asks only for the size the detail needs (no buffer).
        unsafe {
            SetupDiGetDeviceInterfaceDetailW(self.0, data, std::ptr::null_mut(), 0, &mut required, std::ptr::null_mut())
        };
        let header = size_of::<SP_DEVICE_INTERFACE_DETAIL_DATA_W>();
        if (required as usize) < header {
            return None;
        }
        // u64s: the detail's alignment; its cbSize is the fixed part's size, not the buffer's.
        let mut buf = vec![0u64; (required as usize).div_ceil(8)];
        let detail = buf.as_mut_ptr().cast::<SP_DEVICE_INTERFACE_DETAIL_DATA_W>();
        let mut device = SP_DEVINFO_DATA { cbSize: size_of::<SP_DEVINFO_DATA>() as u32, ..Default::default() };
        // SAFETY: `buf` holds `required` bytes, aligned for the detail; both
        // cbSize fields are set as the documentation asks.
        let ok = unsafe {
            (*detail).cbSize = header as u32;
            SetupDiGetDeviceInterfaceDetailW(self.0, data, detail, required, std::ptr::null_mut(), &mut device)
        };
        if ok == 0 {
            return None;
        }
        let at = std::mem::offset_of!(SP_DEVICE_INTERFACE_DETAIL_DATA_W, DevicePath) / 2;
        // SAFETY: the buffer read as the UTF-16 units it was written as.
        let units = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u16>(), buf.len() * 4) };
        let path = text(&units[at..]);
        (!path.is_empty()).then_some((path, device.DevInst))
    }
}

impl Drop for DiskInterfaces {
    fn drop(&mut self) {
        // SAFETY: a set this struct made and destroys once.
        unsafe { SetupDiDestroyDeviceInfoList(self.0) };
    }
}

/// The device instance of the disk interface that is drive `number`.
fn device_instance_of_drive(number: u32) -> Option<u32> {
    let interfaces = DiskInterfaces::present()?;
    (0..)
        .map_while(|index| interfaces.get(index))
        .flatten()
        .find_map(|(path, device)| (drive_number(&path) == Some(number)).then_some(device))
}

/// The physical drive number of a disk interface's path (IOCTL_STORAGE_GET_DEVICE_NUMBER).
fn drive_number(path: &str) -> Option<u32> {
    let handle = Handle::open_for_queries(path)?;
    let mut buf = [0u64; 2];
    let len = handle.ioctl::<()>(IOCTL_STORAGE_GET_DEVICE_NUMBER, None, &mut buf)?;
    let bytes = super::as_bytes(&buf, len);
    super::u32_at(bytes, std::mem::offset_of!(STORAGE_DEVICE_NUMBER, DeviceNumber))
}

/// The nearest ancestor of `device` that Windows enumerated on PCI.
fn first_pci_device_above(device: u32) -> Option<u32> {
    let mut current = device;
    for _ in 0..LEVELS {
        let mut parent = 0u32;
        // SAFETY: an out-pointer to a u32; no flags.
        if unsafe { CM_Get_Parent(&mut parent, current, 0) } != CR_SUCCESS {
            return None;
        }
        if instance_id(parent).is_some_and(|id| is_pci_instance(&id)) {
            return Some(parent);
        }
        current = parent;
    }
    None
}

/// Whether a device instance id names a device the PCI bus driver
/// enumerated (`PCI\VEN_144D&DEV_A808&...\4&...`).
fn is_pci_instance(id: &str) -> bool {
    id.get(..4).is_some_and(|prefix| prefix.eq_ignore_ascii_case(r"PCI\"))
}

/// A device instance's id (CM_Get_Device_IDW).
fn instance_id(device: u32) -> Option<String> {
    let mut buf = [0u16; MAX_DEVICE_ID_LEN as usize + 1];
    // SAFETY: the buffer's length in UTF-16 units; no flags.
    let rc = unsafe { CM_Get_Device_IDW(device, buf.as_mut_ptr(), buf.len() as u32, 0) };
    (rc == CR_SUCCESS).then(|| text(&buf))
}

/// A DEVPROP_TYPE_UINT32 property of a device instance; None when it has none.
fn u32_property(device: u32, key: &DEVPROPKEY) -> Option<u32> {
    let mut kind: DEVPROPTYPE = 0;
    let mut value = [0u8; 4];
    let mut size = value.len() as u32;
    // SAFETY: a key that lives for the call; the buffer's size in bytes; no flags.
    let rc = unsafe { CM_Get_DevNode_PropertyW(device, key, &mut kind, value.as_mut_ptr(), &mut size, 0) };
    (rc == CR_SUCCESS && kind == DEVPROP_TYPE_UINT32 && size == 4).then(|| u32::from_ne_bytes(value))
}
