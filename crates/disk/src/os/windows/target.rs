//! The test target on Windows (lib.rs builds it in place of target.rs): a
//! test file headroom creates in a directory (a drive root and a UNC
//! directory are directories), an existing regular file, or a raw physical
//! drive or volume (`\\.\PhysicalDrive1`, `\\.\D:`, `\\?\D:`,
//! `\\?\Volume{...}`), recorded as a block device.
//!
//! Writing over what the user named (a file, drive or volume) needs
//! --destructive, and is let through only where its first and last 4 MiB are
//! zeros (else --force), as safety.rs words it. A physical drive is written
//! only when it holds no partition (IOCTL_DISK_GET_DRIVE_LAYOUT_EX), so none
//! of its volumes can be mounted; a volume never when Windows has it mounted
//! or sees a filesystem on it, nor when it holds Windows or this program,
//! and only after FSCTL_LOCK_VOLUME shows no one else has it open (the lock
//! is kept for the run; it is never dismounted).
//!
//! The rules are Linux's, in Win32 terms: the test file is created with
//! CREATE_NEW (never an existing file, never through a link's target) and
//! registered for removal before anyone else can see it used; every later
//! open goes by path and is checked to be the same file (volume serial and
//! file index) as the handle held since; removal opens the name without
//! following a reparse point, checks the identity on that handle, and
//! deletes through it. Tests open the file with FILE_FLAG_NO_BUFFERING |
//! FILE_FLAG_OVERLAPPED (and FILE_FLAG_WRITE_THROUGH for `--sync dsync`);
//! offsets, lengths and buffers are aligned to the volume's bytes per sector.
//!
//! What every platform shares (the kind of target, the options, the test
//! file's name, the free-space refusal, the layout's data) is storage.rs's.
//!
//! Long (about 750 lines): the Win32 twin of target.rs with the raw-device
//! rules beside the file rules they mirror, kept in one file so that it can
//! be read against the Win32 documentation top to bottom (the device
//! queries themselves are device.rs's).

use crate::os::device;
use crate::safety;
use crate::target_common::{check_space, fill_test_file, space_margin, CreatedTestFile, Registry};
pub use crate::target_common::{filesystem_caveat, test_file_name, FsInfo, RemoteRemoval, TargetKind, TargetOptions};
use crate::{DiskError, Result, Setting, SyncMode};
use headroom_result::Warning;
use headroom_units::setting::Message;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::{Component, Path, PathBuf, Prefix};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
use windows_sys::Win32::Storage::FileSystem::{
    FileDispositionInfo, GetDiskFreeSpaceExW, GetDiskFreeSpaceW, GetFileInformationByHandle, GetFinalPathNameByHandleW,
    GetVolumeInformationByHandleW, GetVolumePathNameW, SetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION, DELETE,
    FILE_DISPOSITION_INFO, FILE_FLAG_NO_BUFFERING, FILE_FLAG_OPEN_REPARSE_POINT, FILE_FLAG_OVERLAPPED,
    FILE_FLAG_WRITE_THROUGH, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
};
use windows_sys::Win32::System::Threading::{GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION};

/// An opened, sized target. Dropping it removes a test file headroom created.
#[derive(Debug)]
pub struct PreparedTarget {
    /// For display, and the name every test opens (checked against the held handle).
    pub path: PathBuf,
    /// Test file or existing file.
    pub kind: TargetKind,
    /// Bytes of the file the tests use, from offset 0.
    pub size: u64,
    /// Filesystem holding the file (GetVolumeInformationByHandleW).
    pub filesystem: Option<FsInfo>,
    /// Unbuffered I/O's offset and length alignment: the volume's bytes per sector.
    pub dio_align: u64,
    /// Unbuffered I/O's buffer alignment.
    pub mem_align: usize,
    /// Where the alignment came from: GetDiskFreeSpaceW, StorageAccessAlignmentProperty or default.
    pub dio_align_source: &'static str,
    /// The test file stays (`--keep`); decided at [`PreparedTarget::prepare`].
    pub keep: bool,
    /// The handle PATH resolved to: the test file from its CREATE_NEW
    /// (read-write, buffered, for the layout), the existing file, or the
    /// drive or volume (unbuffered, overlapped).
    file: File,
    /// Which file `file` is, for every later open by path; None for a drive
    /// or volume, which has no file index (its name is its identity).
    identity: Option<FileId>,
    /// The volume is locked (FSCTL_LOCK_VOLUME) through `file`: only that
    /// handle may reach it, so every test uses a duplicate of it.
    locked: bool,
    /// The registry entry of a test file headroom created and will remove.
    created: Option<u64>,
}

/// A file's identity on Windows: volume serial number and file index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    volume: u32,
    index: u64,
}

fn file_id(file: &File) -> io::Result<FileId> {
    // SAFETY: plain data, filled by the call below.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a valid handle and a structure of the right type.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileId {
        volume: info.dwVolumeSerialNumber,
        index: (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
    })
}

/// Every open shares read, write and delete, as std's default does: the
/// runner's handles, the removal's and another headroom's may coexist.
const SHARE_ALL: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

/// A test file headroom created: removed by name, only while that name still
/// is the file headroom created.
#[derive(Debug)]
struct CreatedFile {
    id: u64,
    path: PathBuf,
    identity: FileId,
}

impl CreatedTestFile for CreatedFile {
    fn id(&self) -> u64 {
        self.id
    }

    fn remove(&self) {
        // DELETE access on the name itself (a reparse point is not followed),
        // the identity checked on that handle, the delete done through it: no
        // window in which the name could change between check and delete.
        let Ok(found) = OpenOptions::new()
            .access_mode(DELETE)
            .share_mode(SHARE_ALL)
            .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
            .open(&self.path)
        else {
            return;
        };
        // Someone renamed or replaced it: the name is theirs now, leave it.
        if file_id(&found).is_ok_and(|id| id == self.identity) {
            let info = FILE_DISPOSITION_INFO { DeleteFile: true };
            // SAFETY: a handle with DELETE access and the structure its class takes.
            unsafe {
                SetFileInformationByHandle(
                    found.as_raw_handle(),
                    FileDispositionInfo,
                    (&raw const info).cast(),
                    size_of::<FILE_DISPOSITION_INFO>() as u32,
                )
            };
        }
    }
}

/// Test files alive in this process (storage.rs's registry).
static CREATED: Mutex<Registry<CreatedFile>> = Mutex::new(Registry::new());

fn registry() -> std::sync::MutexGuard<'static, Registry<CreatedFile>> {
    CREATED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Registers how to remove a test file a share created on a server, for
/// [`remove_test_files_now`]; returns the id [`forget_remote_test_file`]
/// takes once the share removed the file itself.
pub fn register_remote_test_file(removal: RemoteRemoval) -> u64 {
    registry().register_remote(removal)
}

/// The share removed (or kept) its test file itself: nothing left to do at exit.
pub fn forget_remote_test_file(id: u64) {
    registry().forget_remote(id);
}

/// Removes every test file this process created and still holds (not those
/// the user asked to keep), and refuses new ones: for a second Ctrl-C. A file
/// still open in a worker is deleted when the process exits.
pub fn remove_test_files_now() {
    registry().remove_all_now();
}

impl Drop for PreparedTarget {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Whether process `pid` is running (OpenProcess, then its exit code).
fn process_alive(pid: u32) -> bool {
    // SAFETY: plain calls; the handle is closed before returning.
    unsafe {
        let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if process.is_null() {
            return false;
        }
        let mut code = 0u32;
        let running = GetExitCodeProcess(process, &mut code) != 0 && code == STILL_ACTIVE as u32;
        CloseHandle(process);
        running
    }
}

/// Removes the test files a killed headroom left in `dir` (the directory of
/// a `serve --allow-path`, when the server starts): regular files named as
/// headroom names its test files whose process is gone. Returns the paths removed.
pub fn remove_stale_test_files(dir: &Path) -> Vec<PathBuf> {
    crate::target_common::remove_stale_test_files_in(dir, process_alive)
}

/// `path` as a NUL-terminated wide string.
fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str().encode_wide().chain(Some(0)).collect()
}

/// The root of the volume `path` is on (`C:\`, `\\server\share\`, a mount folder).
fn volume_root(path: &Path) -> Option<Vec<u16>> {
    let name = wide(path);
    let mut root = vec![0u16; name.len().max(4) + 1];
    // SAFETY: both buffers are valid; the length is root's.
    let ok = unsafe { GetVolumePathNameW(name.as_ptr(), root.as_mut_ptr(), root.len() as u32) };
    (ok != 0).then_some(root)
}

/// Bytes the caller may still write on the volume of `dir`; None when the
/// volume reports no size.
fn free_bytes(dir: &Path) -> io::Result<Option<u64>> {
    let (mut available, mut total, mut free) = (0u64, 0u64, 0u64);
    // SAFETY: a NUL-terminated name and three out-parameters.
    if unsafe { GetDiskFreeSpaceExW(wide(dir).as_ptr(), &mut available, &mut total, &mut free) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((total != 0).then_some(available))
}

/// The volume's bytes per sector, which unbuffered I/O's offsets, lengths and
/// buffers must be multiples of (the FILE_FLAG_NO_BUFFERING documentation).
fn bytes_per_sector(path: &Path) -> Option<u32> {
    let root = volume_root(path)?;
    let (mut sectors_per_cluster, mut bytes, mut free, mut total) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: a NUL-terminated root and four out-parameters.
    let ok = unsafe { GetDiskFreeSpaceW(root.as_ptr(), &mut sectors_per_cluster, &mut bytes, &mut free, &mut total) };
    (ok != 0 && bytes.is_power_of_two()).then_some(bytes)
}

/// The filesystem `file` is on, as Windows names it (NTFS, ReFS, exFAT, FAT32...).
fn filesystem_info(file: &File) -> Option<FsInfo> {
    let mut name = [0u16; 64];
    // SAFETY: only the filesystem name is asked for, into a buffer of its length.
    let ok = unsafe {
        GetVolumeInformationByHandleW(
            file.as_raw_handle(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            name.as_mut_ptr(),
            name.len() as u32,
        )
    };
    if ok == 0 {
        return None;
    }
    let len = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    // Windows has no statfs magic number.
    Some(FsInfo { name: String::from_utf16_lossy(&name[..len]), magic: 0 })
}

/// Whether PATH names a raw disk or volume rather than a place in a
/// filesystem: the device namespace (`\\.\PhysicalDrive0`, `\\.\C:`) or a
/// `\\?\` name with nothing after it (`\\?\C:`, `\\?\PhysicalDrive0`,
/// `\\?\Volume{...}`; with a trailing `\` each is that volume's root
/// directory, which is a directory like any other).
fn is_raw_device(path: &Path) -> bool {
    let Some(Component::Prefix(prefix)) = path.components().next() else { return false };
    // Compared as text: after a `\\.\` prefix std's components() adds an
    // implicit root even where the path has none.
    matches!(prefix.kind(), Prefix::DeviceNS(_) | Prefix::Verbatim(_) | Prefix::VerbatimDisk(_))
        && prefix.as_os_str().len() == path.as_os_str().len()
}

/// A device reached some other way than the names [`is_raw_device`] knows
/// (`\\?\GLOBALROOT\Device\...`): not opened, since which drive or volume it
/// is (and so which rules hold) cannot be told from its name.
fn other_device_refusal(path: &Path) -> DiskError {
    DiskError::Usage(format!(
        "PATH '{}' is neither a directory, a regular file, nor a drive or volume named as \\\\.\\PhysicalDriveN, \
         \\\\.\\D: or \\\\?\\Volume{{...}}; give one of those, or a directory (headroom creates its own test file there)",
        path.display()
    ))
}

/// Why a drive or volume could not be opened, in one line.
fn device_unopenable(path: &Path, e: io::Error) -> DiskError {
    match e.kind() {
        io::ErrorKind::NotFound => DiskError::Usage(format!(
            "PATH '{}' does not exist: no such drive or volume (`headroom sys` lists them)",
            path.display()
        )),
        io::ErrorKind::PermissionDenied => DiskError::Usage(format!(
            "PATH '{}' cannot be opened: Windows opens raw drives and volumes for administrators only; run headroom \
             from an elevated prompt",
            path.display()
        )),
        _ => DiskError::io(format!("cannot open {}", path.display()), e),
    }
}

/// Why the physical drive open as `file` may not be written, if it may not:
/// it holds partitions (IOCTL_DISK_GET_DRIVE_LAYOUT_EX), whose volumes
/// Windows may have mounted, or its layout cannot be read. No leave
/// overrides this: the partitions must be deleted first.
fn drive_writable(file: &File) -> std::result::Result<(), Message<Setting>> {
    let held = match device::partitions(file) {
        Ok(held) if held.is_empty() => return Ok(()),
        Ok(held) => format!("it holds a {held}"),
        Err(e) => format!("its partitions cannot be read (IOCTL_DISK_GET_DRIVE_LAYOUT_EX: {e})"),
    };
    Err(Message::text(format!(
        "{held}, and headroom writes only to a drive with no partition, whose volumes cannot be in use, even with "
    ))
    .and(Setting::Force)
    .then(" (delete them first if that is what you want: diskpart, select disk, clean)"))
}

/// Why the volume named `path` may not be written, before it is opened: it
/// holds a filesystem (GetVolumeInformationW names one), Windows, or this
/// program. No leave overrides this; headroom never dismounts a filesystem.
fn volume_refusal(path: &Path) -> Option<Message<Setting>> {
    let root = device::volume_root_of(path)?;
    if let Some(fs) = headroom_sys::volume_information(&root).and_then(|v| v.filesystem) {
        return Some(
            Message::text(format!(
                "it holds a {fs} filesystem (GetVolumeInformationW), which headroom never writes over or dismounts, \
                 even with "
            ))
            .and(Setting::Force)
            .then("; give a directory on it (e.g. D:\\) and headroom creates its own test file there"),
        );
    }
    let guid = device::volume_guid(&root)?;
    let holds = |place: Option<PathBuf>| {
        place.and_then(|p| volume_root(&p)).and_then(|r| device::volume_guid(&r)).is_some_and(|g| g == guid)
    };
    let what = if holds(windows_dir()) {
        "Windows"
    } else if holds(std::env::current_exe().ok()) {
        "this program"
    } else {
        return None;
    };
    Some(Message::text(format!("it is the volume holding {what}; ")).join(safety::never_in_use()))
}

/// Whether a filesystem has the volume open as `file` mounted
/// (FSCTL_IS_VOLUME_MOUNTED): then it is in use, whatever it holds.
fn volume_unmounted(file: &File) -> std::result::Result<(), Message<Setting>> {
    if device::is_mounted(file) {
        return Err(Message::text("it is mounted (FSCTL_IS_VOLUME_MOUNTED); ").join(safety::never_in_use()));
    }
    Ok(())
}

/// The Windows directory (GetSystemWindowsDirectoryW).
fn windows_dir() -> Option<PathBuf> {
    let mut buf = [0u16; 512];
    // SAFETY: a buffer and its length in characters.
    let n = unsafe {
        windows_sys::Win32::System::SystemInformation::GetSystemWindowsDirectoryW(buf.as_mut_ptr(), buf.len() as u32)
    } as usize;
    (n > 0 && n < buf.len()).then(|| PathBuf::from(std::ffi::OsString::from_wide(&buf[..n])))
}

/// `\\server\share` of a UNC path (`\\server\share\dir`, `\\?\UNC\server\share\dir`).
fn unc_share(path: &Path) -> Option<String> {
    let Some(Component::Prefix(prefix)) = path.components().next() else { return None };
    match prefix.kind() {
        Prefix::UNC(server, share) | Prefix::VerbatimUNC(server, share) => {
            Some(format!("\\\\{}\\{}", server.to_string_lossy(), share.to_string_lossy()))
        }
        _ => None,
    }
}

/// Why PATH could not be examined, in one line: a share that cannot be
/// reached (or has no such directory) is named as a share, since "does not
/// exist" would send the user looking in the wrong place.
fn unexaminable(path: &Path, e: &io::Error) -> DiskError {
    if let Some(share) = unc_share(path) {
        return DiskError::Usage(format!(
            "PATH '{}' cannot be reached: {e}; check that the server answers, that the share {share} and the \
             directory exist and that this user may open them (net use {share})",
            path.display()
        ));
    }
    match e.kind() {
        io::ErrorKind::NotFound => DiskError::Usage(format!(
            "PATH '{}' does not exist; give a directory (headroom creates its own test file there), e.g. \
             `headroom disk D:\\`",
            path.display()
        )),
        _ => DiskError::Usage(format!("PATH '{}' cannot be examined: {e}", path.display())),
    }
}

impl PreparedTarget {
    /// Resolves PATH, runs the safety checks and, for a directory, creates the
    /// (empty) test file. Call [`PreparedTarget::layout`] next to fill it.
    pub fn prepare(path: &Path, opts: &TargetOptions) -> Result<PreparedTarget> {
        if is_raw_device(path) {
            return Self::prepare_device(path, opts);
        }
        let meta = std::fs::metadata(path).map_err(|e| unexaminable(path, &e))?;
        if meta.is_dir() {
            Self::prepare_dir(path, opts)
        } else if meta.is_file() {
            Self::prepare_existing(path, opts)
        } else {
            // Neither: a device reached some other way (`\\?\GLOBALROOT\Device\...`).
            Err(other_device_refusal(path))
        }
    }

    fn prepare_dir(dir: &Path, opts: &TargetOptions) -> Result<PreparedTarget> {
        let size = opts.size.unwrap_or(opts.default_size);
        let free = free_bytes(dir).map_err(|e| DiskError::io(format!("free space on {}", dir.display()), e))?;
        // A volume that reports no size: nothing to check.
        let free = free.unwrap_or(u64::MAX);
        check_space(size, dir, free, space_margin(free))?;
        let path = dir.join(test_file_name());
        let (file, identity, created) = {
            let mut reg = registry();
            if reg.closed {
                return Err(DiskError::Usage("stopping: no new test file is created".into()));
            }
            // CREATE_NEW never opens an existing file or a link's target: this
            // handle is the new file, whatever the directory's other writers do.
            let file =
                OpenOptions::new().read(true).write(true).create_new(true).share_mode(SHARE_ALL).open(&path).map_err(
                    |e| match e.kind() {
                        io::ErrorKind::PermissionDenied => DiskError::Usage(format!(
                            "PATH '{}' is not writable by this user; pick a directory you can write to",
                            dir.display()
                        )),
                        _ => DiskError::io(format!("cannot create the test file {}", path.display()), e),
                    },
                )?;
            let identity = file_id(&file).map_err(|e| DiskError::io("identify the test file", e))?;
            let id = Registry::<CreatedFile>::next_id();
            if opts.keep {
                (file, identity, None)
            } else {
                reg.files.push(CreatedFile { id, path: path.clone(), identity });
                (file, identity, Some(id))
            }
        };
        let filesystem = filesystem_info(&file);
        let mut target = PreparedTarget {
            path,
            kind: TargetKind::TestFile,
            size,
            filesystem,
            dio_align: 4096,
            mem_align: 4096,
            dio_align_source: "default",
            keep: opts.keep,
            file,
            identity: Some(identity),
            locked: false,
            created,
        };
        target.detect_alignment();
        Ok(target)
    }

    fn prepare_existing(path: &Path, opts: &TargetOptions) -> Result<PreparedTarget> {
        let shown = path.display().to_string();
        let refused = |reason| DiskError::Refused { path: shown.clone(), reason };
        if opts.writes && !opts.destructive {
            return Err(refused(safety::writes_destroy("an existing file")));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(opts.writes)
            .share_mode(SHARE_ALL)
            .open(path)
            .map_err(|e| DiskError::io(format!("cannot open {shown}"), e))?;
        if opts.writes && !opts.force {
            let found = safety::probe_signatures(&file).map_err(|e| safety::probe_failed(&shown, e))?;
            if !found.is_empty() {
                return Err(refused(safety::holds_signatures(&found)));
            }
        }
        let whole = file.metadata().map_err(|e| DiskError::io(format!("size of {shown}"), e))?.len();
        let size = opts.size.map_or(whole, |s| s.min(whole));
        if size == 0 {
            return Err(DiskError::Usage(format!("PATH '{}' is empty; nothing to test", path.display())));
        }
        let identity = file_id(&file).map_err(|e| DiskError::io(format!("identify {shown}"), e))?;
        let mut target = PreparedTarget {
            path: path.to_path_buf(),
            kind: TargetKind::ExistingFile,
            size,
            filesystem: filesystem_info(&file),
            dio_align: 4096,
            mem_align: 4096,
            dio_align_source: "default",
            keep: true,
            file,
            identity: Some(identity),
            locked: false,
            created: None,
        };
        target.detect_alignment();
        Ok(target)
    }

    /// A raw physical drive or volume: opened unbuffered and overlapped,
    /// GENERIC_READ (and GENERIC_WRITE for writes), sharing read and write
    /// as Windows' own tools do; sized and aligned by the device; written
    /// only under the rules in this file's heading.
    fn prepare_device(path: &Path, opts: &TargetOptions) -> Result<PreparedTarget> {
        let shown = path.display().to_string();
        let refused = |reason| DiskError::Refused { path: shown.clone(), reason };
        let physical = device::is_physical_drive(path);
        let what = if physical { "a physical drive" } else { "a volume" };
        if opts.writes && !opts.destructive {
            return Err(refused(safety::writes_destroy(what)));
        }
        if opts.writes && !physical {
            if let Some(reason) = volume_refusal(path) {
                return Err(refused(reason));
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(opts.writes)
            .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
            .custom_flags(FILE_FLAG_NO_BUFFERING | FILE_FLAG_OVERLAPPED)
            .open(path)
            .map_err(|e| device_unopenable(path, e))?;
        // Unknown where Windows answers no size query (wine for a Linux block
        // device): a read of the --size the user gives; never a write, whose
        // check needs the device's last 4 MiB.
        let whole = device::length(&file).map_err(|e| {
            let why = format!("its size cannot be read (IOCTL_DISK_GET_LENGTH_INFO: {e})");
            if opts.writes {
                refused(
                    Message::text(format!(
                        "{why}, so its last 4 MiB cannot be checked, and headroom does not write, even with "
                    ))
                    .and(Setting::Force),
                )
            } else {
                DiskError::Usage(format!("PATH '{shown}': {why}; give --size to read that much of it"))
            }
        });
        let whole = match (whole, opts.size) {
            (Ok(whole), _) => whole,
            (Err(_), Some(size)) if !opts.writes => size,
            (Err(e), _) => return Err(e),
        };
        let mut locked = false;
        if opts.writes {
            if physical {
                drive_writable(&file).map_err(refused)?;
            } else {
                volume_unmounted(&file).map_err(refused)?;
            }
            if !opts.force {
                let found = safety::probe_signatures(&file).map_err(|e| safety::probe_failed(&shown, e))?;
                if !found.is_empty() {
                    return Err(refused(safety::holds_signatures(&found)));
                }
            }
            if !physical {
                // Last, so nothing above runs under the lock: it fails while
                // any other handle (a program, Explorer, a scan) has the
                // volume open, and keeps all of them out during the run.
                device::lock_volume(&file).map_err(|e| {
                    refused(
                        Message::text(format!("it is in use: another program has it open (FSCTL_LOCK_VOLUME: {e}); "))
                            .join(safety::never_in_use()),
                    )
                })?;
                locked = true;
            }
        }
        let size = opts.size.map_or(whole, |s| s.min(whole));
        if size == 0 {
            return Err(DiskError::Usage(format!("PATH '{shown}' is empty; nothing to test")));
        }
        let (dio_align, dio_align_source) =
            device::sector_size(&file).map_or((4096, "default"), |(bytes, source)| (u64::from(bytes), source));
        Ok(PreparedTarget {
            path: path.to_path_buf(),
            kind: TargetKind::BlockDevice,
            size,
            filesystem: None,
            dio_align,
            mem_align: dio_align as usize,
            dio_align_source,
            keep: true,
            file,
            identity: None,
            locked,
            created: None,
        })
    }

    /// Unbuffered alignment from the volume's bytes per sector, else 4096.
    fn detect_alignment(&mut self) {
        if self.kind == TargetKind::BlockDevice {
            return;
        }
        if let Some(bytes) = bytes_per_sector(&self.path) {
            self.dio_align = u64::from(bytes);
            self.mem_align = bytes as usize;
            self.dio_align_source = "GetDiskFreeSpaceW";
        }
    }

    /// Where the held handle really is, every link resolved (the
    /// `\\?\C:\...` form std::fs::canonicalize also gives), whatever PATH
    /// leads to now.
    pub fn resolved_path(&self) -> io::Result<PathBuf> {
        let mut buf = vec![0u16; 512];
        loop {
            // SAFETY: a valid handle and a buffer of the length given.
            let n =
                unsafe { GetFinalPathNameByHandleW(self.file.as_raw_handle(), buf.as_mut_ptr(), buf.len() as u32, 0) }
                    as usize;
            match n {
                0 => return Err(io::Error::last_os_error()),
                // Too small: n is the length needed, with its NUL.
                n if n >= buf.len() => buf.resize(n, 0),
                n => return Ok(PathBuf::from(std::ffi::OsString::from_wide(&buf[..n]))),
            }
        }
    }

    /// Whether the test file must be written before tests run (a new test file).
    pub fn needs_layout(&self) -> bool {
        self.kind == TargetKind::TestFile
    }

    /// Fills the new test file with `size` bytes of incompressible data
    /// through the handle from its CREATE_NEW, then flushes it to the device
    /// (FlushFileBuffers). `progress(done, total)` is called per MiB.
    pub fn layout(&self, stop: &AtomicBool, progress: impl FnMut(u64, u64)) -> Result<Vec<Warning>> {
        if !self.needs_layout() {
            return Ok(Vec::new());
        }
        let file = &self.file;
        fill_test_file(&self.path, self.size, stop, progress, |buf, offset| {
            crate::os::write_all_at(file, buf, offset)
        })?;
        file.sync_all().map_err(|e| DiskError::io(format!("flush {}", self.path.display()), e))?;
        Ok(Vec::new())
    }

    /// Opens the target for one test: with `direct`, FILE_FLAG_NO_BUFFERING,
    /// checked with one aligned read; returns the file and whether unbuffered
    /// I/O is in effect (false when `direct_required` is false and it failed).
    pub fn open(&self, write: bool, direct: bool, direct_required: bool, sync: SyncMode) -> Result<(File, bool)> {
        let mut flags = FILE_FLAG_OVERLAPPED;
        if sync == SyncMode::Dsync {
            flags |= FILE_FLAG_WRITE_THROUGH;
        }
        if self.locked {
            return self.open_locked(direct, sync);
        }
        let open = |extra: u32| self.reopen(write, flags | extra);
        if direct {
            match open(FILE_FLAG_NO_BUFFERING) {
                Ok(f) if self.direct_read_works(&f) => return Ok((f, true)),
                Ok(_) | Err(_) if !direct_required => {}
                Ok(_) => {
                    return Err(safety::direct_refused(format!("{} refuses unbuffered reads", self.path.display())))
                }
                Err(e) => {
                    return Err(safety::direct_refused(format!(
                        "{} cannot be opened with FILE_FLAG_NO_BUFFERING ({e})",
                        self.path.display()
                    )))
                }
            }
        }
        let f = open(0).map_err(|e| DiskError::io(format!("open {}", self.path.display()), e))?;
        Ok((f, false))
    }

    /// A test's handle to a locked volume: a duplicate of the handle that
    /// locked it (DuplicateHandle, through File::try_clone), unbuffered and
    /// overlapped as it was opened. Buffered I/O and FILE_FLAG_WRITE_THROUGH
    /// would need another open, which the lock refuses.
    fn open_locked(&self, direct: bool, sync: SyncMode) -> Result<(File, bool)> {
        if !direct || sync == SyncMode::Dsync {
            return Err(DiskError::Usage(format!(
                "{} is locked for the writes through one unbuffered handle: run it with the default --direct and \
                 without --sync dsync",
                self.path.display()
            )));
        }
        let f = self
            .file
            .try_clone()
            .map_err(|e| DiskError::io(format!("duplicate the handle of {}", self.path.display()), e))?;
        Ok((f, true))
    }

    /// Opens the path again with `flags`, and checks it is still the held file.
    fn reopen(&self, write: bool, flags: u32) -> io::Result<File> {
        let Some(identity) = self.identity else {
            // A drive or volume: the same sharing it was first opened with.
            let share = FILE_SHARE_READ | FILE_SHARE_WRITE;
            return OpenOptions::new().read(true).write(write).share_mode(share).custom_flags(flags).open(&self.path);
        };
        let file =
            OpenOptions::new().read(true).write(write).share_mode(SHARE_ALL).custom_flags(flags).open(&self.path)?;
        if file_id(&file)? != identity {
            return Err(io::Error::other("the reopened file is not the one headroom holds"));
        }
        Ok(file)
    }

    fn direct_read_works(&self, f: &File) -> bool {
        let len = self.dio_align.max(512) as usize;
        let buf = crate::engine::AlignedBuf::new(len, self.mem_align);
        // SAFETY: a manual-reset event for one wait, closed below.
        let event =
            unsafe { windows_sys::Win32::System::Threading::CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) };
        if event.is_null() {
            return false;
        }
        // SAFETY: buf is valid for len bytes and f is open.
        let result = unsafe { crate::os::io_at(f.as_raw_handle(), event, false, buf.as_ptr(), len as u32, 0) };
        // SAFETY: the event is ours.
        unsafe { CloseHandle(event) };
        result >= 0
    }

    /// Removes the test file now (also done on drop).
    pub fn remove(&mut self) {
        if let Some(id) = self.created.take() {
            registry().remove(id);
        }
    }
}

/// Total RAM in bytes, for the page-cache check.
pub fn ram_bytes() -> u64 {
    headroom_sys::memory_bytes(&headroom_sys::SysRoot::live()).unwrap_or(0)
}
