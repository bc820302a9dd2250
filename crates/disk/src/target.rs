//! The test target: a test file headroom creates in a directory (and removes
//! again), a block device, or an existing file; how it is opened (O_DIRECT
//! with the filesystem's alignment, or buffered), laid out with real data, and
//! what the filesystem under it is.
//!
//! A path is resolved once: the target holds the descriptor it got then (the
//! test file's from its exclusive create), and every later open goes through
//! that descriptor (`/proc/self/fd/N`), never through the path again, so a
//! file swapped for a symlink mid-run cannot redirect a write.
//!
//! The test file is removed when the [`PreparedTarget`] is dropped: at the end of a
//! run, on error, and on Ctrl-C (the stop flag ends the run, the guard drops),
//! unless the user asked to keep it; [`remove_test_files_now`] removes every
//! live one at once (a second Ctrl-C).
//!
//! Long (about 530 lines): the three kinds of target share the held-descriptor
//! rules above, and splitting them would spread those rules over files.

use crate::safety;
use crate::target_common::{check_space, fill_test_file, space_margin, CreatedTestFile, Registry};
pub use crate::target_common::{filesystem_caveat, test_file_name, FsInfo, RemoteRemoval, TargetKind, TargetOptions};
use crate::{DiskError, Result, Setting, SyncMode};
use headroom_result::Warning;
use headroom_units::setting::Message;
use rustix::fs::{self, Access, AtFlags, Mode, OFlags, StatxFlags};
use rustix::io::Errno;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

/// An opened, sized target. Dropping it removes a test file headroom created.
#[derive(Debug)]
pub struct PreparedTarget {
    /// For display and sysfs look-ups only; never opened again.
    pub path: PathBuf,
    /// Test file, block device or existing file.
    pub kind: TargetKind,
    /// Bytes of the file or device the tests use, from offset 0.
    pub size: u64,
    /// Filesystem holding the file (fstatfs); None for a block device or when fstatfs failed.
    pub filesystem: Option<FsInfo>,
    /// O_DIRECT offset and length alignment (statx STATX_DIOALIGN, else the
    /// device's logical block size, else 4096).
    pub dio_align: u64,
    /// O_DIRECT buffer alignment.
    pub mem_align: usize,
    /// Where the alignment came from: statx, logical_block_size or default.
    pub dio_align_source: &'static str,
    /// The test file stays (`--keep`); decided at [`PreparedTarget::prepare`].
    pub keep: bool,
    /// The descriptor PATH resolved to: the test file from its O_EXCL create
    /// (read-write), a device (read-write and exclusive when the run writes,
    /// so nothing mounts or assembles it meanwhile) or an existing file.
    file: File,
    /// The registry entry of a test file headroom created and will remove.
    created: Option<u64>,
}

/// A test file headroom created: removed by its directory descriptor and
/// name, and only while that name still is the file headroom created.
#[derive(Debug)]
struct CreatedFile {
    id: u64,
    dir: OwnedFd,
    name: CString,
    dev: u64,
    ino: u64,
}

impl CreatedTestFile for CreatedFile {
    fn id(&self) -> u64 {
        self.id
    }

    fn remove(&self) {
        let found = fs::statat(&self.dir, self.name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW);
        // Someone renamed or replaced it: the name is theirs now, leave it.
        if found.is_ok_and(|st| st.st_dev == self.dev && st.st_ino == self.ino) {
            let _ = fs::unlinkat(&self.dir, self.name.as_c_str(), AtFlags::empty());
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
/// the user asked to keep), and refuses new ones: for a second Ctrl-C, which
/// exits at once but must not leave the files behind. Workers may still be
/// writing to a removed file; the space is freed when the process exits.
pub fn remove_test_files_now() {
    registry().remove_all_now();
}

impl Drop for PreparedTarget {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes the test files a killed headroom left in `dir` (the directory of
/// a `serve --allow-path`, when the server starts): regular files named as
/// headroom names its test files whose process is gone. Nothing else is
/// touched. Returns the paths removed.
pub fn remove_stale_test_files(dir: &Path) -> Vec<PathBuf> {
    crate::target_common::remove_stale_test_files_in(dir, |pid| Path::new(&format!("/proc/{pid}")).exists())
}

/// Opens what `path` names (following symlinks: the user chose the path)
/// without reading or writing it, so a FIFO or device cannot block or react.
fn open_path(path: &Path) -> io::Result<File> {
    Ok(File::from(fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?))
}

/// Opens the inode `held` refers to again with `flags` (O_DIRECT, O_DSYNC,
/// read-write...), through `/proc/self/fd`: the kernel follows the
/// descriptor, not a path, so a rename or symlink swap cannot change what is
/// opened. The identity is checked anyway.
pub fn reopen(held: &File, flags: OFlags) -> io::Result<File> {
    let proc = format!("/proc/self/fd/{}", held.as_raw_fd());
    let file = match fs::open(proc.as_str(), flags | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT) => return Err(io::Error::other("cannot reopen through /proc/self/fd: is /proc mounted?")),
        Err(e) => return Err(e.into()),
    };
    let (a, b) = (held.metadata()?, file.metadata()?);
    if a.dev() != b.dev() || a.ino() != b.ino() {
        return Err(io::Error::other("the reopened file is not the one headroom holds"));
    }
    Ok(file)
}

impl PreparedTarget {
    /// Resolves PATH, runs the safety checks and, for a directory, creates the
    /// (empty) test file. Call [`PreparedTarget::layout`] next to fill it.
    pub fn prepare(path: &Path, opts: &TargetOptions) -> Result<PreparedTarget> {
        let held = open_path(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => DiskError::Usage(format!(
                "PATH '{}' does not exist; give a directory (headroom creates its own test file there), e.g. `headroom disk /mnt/nas`",
                path.display()
            )),
            _ => DiskError::Usage(format!("PATH '{}' cannot be examined: {e}", path.display())),
        })?;
        let meta = held.metadata().map_err(|e| DiskError::io(format!("fstat {}", path.display()), e))?;
        let ft = meta.file_type();
        if ft.is_dir() {
            Self::prepare_dir(path, held, opts)
        } else if ft.is_block_device() || ft.is_file() {
            Self::prepare_existing(path, &held, opts, ft.is_block_device(), meta.len())
        } else {
            Err(DiskError::Usage(format!(
                "PATH '{}' is neither a directory, a regular file nor a block device",
                path.display()
            )))
        }
    }

    fn prepare_dir(dir: &Path, dir_fd: File, opts: &TargetOptions) -> Result<PreparedTarget> {
        if !access_ok(dir, Access::WRITE_OK | Access::EXEC_OK) {
            return Err(DiskError::Usage(format!(
                "PATH '{}' is not writable by this user; pick a directory you can write to, e.g. `headroom disk ~/`",
                dir.display()
            )));
        }
        let size = opts.size.unwrap_or(opts.default_size);
        let (free, margin) = wait_for_space(&dir_fd, dir, size)?;
        check_space(size, dir, free, margin)?;
        let name = test_file_name();
        let path = dir.join(&name);
        let cname = CString::new(name).expect("no NUL in the test file name");
        let (file, created) = {
            let mut reg = registry();
            if reg.closed {
                return Err(DiskError::Usage("stopping: no new test file is created".into()));
            }
            // O_EXCL never follows a symlink and never opens an existing file:
            // this descriptor is the new file, whatever the directory's other
            // writers do to its name later.
            let flags = OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let file = fs::openat(&dir_fd, cname.as_c_str(), flags, Mode::from_raw_mode(0o600))
                .map(File::from)
                .map_err(|e| DiskError::io(format!("cannot create the test file {}", path.display()), e.into()))?;
            let meta = file.metadata().map_err(|e| DiskError::io("fstat test file", e))?;
            let id = Registry::<CreatedFile>::next_id();
            let entry = CreatedFile { id, dir: OwnedFd::from(dir_fd), name: cname, dev: meta.dev(), ino: meta.ino() };
            if opts.keep {
                (file, None)
            } else {
                reg.files.push(entry);
                (file, Some(id))
            }
        };
        let filesystem = statfs_info(&file);
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
            created,
        };
        target.detect_alignment();
        Ok(target)
    }

    fn prepare_existing(
        path: &Path,
        held: &File,
        opts: &TargetOptions,
        block: bool,
        file_len: u64,
    ) -> Result<PreparedTarget> {
        let what = if block { "a block device" } else { "an existing file" };
        let shown = path.display().to_string();
        let refused_by = |reason: Message<Setting>| DiskError::Refused { path: shown.clone(), reason };
        if opts.writes && !opts.destructive {
            return Err(refused_by(safety::writes_destroy(what)));
        }
        // Writing to a device: an exclusive open, which fails while the device
        // is mounted, an md/dm/LVM member, swap, or claimed by another
        // program, and keeps it that way (no mount or assembly) during the run.
        let flags = match (opts.writes, block) {
            (false, _) => OFlags::RDONLY,
            (true, true) => OFlags::RDWR | OFlags::EXCL,
            (true, false) => OFlags::RDWR,
        };
        let file = reopen(held, flags).map_err(|e| {
            let in_use =
                |why: String| refused_by(Message::text(format!("it is in use{why}; ")).join(safety::never_in_use()));
            match e.raw_os_error() {
                Some(libc::EBUSY) if block => {
                    let rdev = held.metadata().map(|m| m.rdev()).unwrap_or(0);
                    in_use(format!(": {}", crate::os::in_use_reason(rdev)))
                }
                Some(libc::ETXTBSY) => in_use(" (an active swap file)".into()),
                _ => DiskError::io(format!("cannot open {shown}"), e),
            }
        })?;
        if opts.writes {
            if !block {
                let loops = crate::os::loop_devices_backed_by(&file);
                if !loops.is_empty() {
                    return Err(refused_by(
                        Message::text(format!("it is in use: the backing file of {}; ", loops.join(", ")))
                            .join(safety::never_in_use())
                            .then(" (detach it with losetup -d first)"),
                    ));
                }
            }
            if !opts.force {
                let found = safety::probe_signatures(&file).map_err(|e| safety::probe_failed(&shown, e))?;
                if !found.is_empty() {
                    return Err(refused_by(safety::holds_signatures(&found)));
                }
            }
        }
        let whole = if block { block_device_size(&file)? } else { file_len };
        let size = opts.size.map_or(whole, |s| s.min(whole));
        if size == 0 {
            return Err(DiskError::Usage(format!("PATH '{}' is empty; nothing to test", path.display())));
        }
        let filesystem = if block { None } else { statfs_info(&file) };
        let mut target = PreparedTarget {
            path: path.to_path_buf(),
            kind: if block { TargetKind::BlockDevice } else { TargetKind::ExistingFile },
            size,
            filesystem,
            dio_align: 4096,
            mem_align: 4096,
            dio_align_source: "default",
            keep: true,
            file,
            created: None,
        };
        target.detect_alignment();
        Ok(target)
    }

    /// O_DIRECT alignment from statx(STATX_DIOALIGN) where the kernel and
    /// filesystem report it, else the block device's logical block size, else 4096.
    fn detect_alignment(&mut self) {
        if let Some((mem, offset)) = statx_dioalign(&self.file) {
            self.dio_align = offset;
            self.mem_align = mem as usize;
            self.dio_align_source = "statx";
            return;
        }
        if self.kind == TargetKind::BlockDevice {
            if let Ok(lbs @ 1..) = fs::ioctl_blksszget(&self.file) {
                self.dio_align = u64::from(lbs);
                self.mem_align = lbs as usize;
                self.dio_align_source = "logical_block_size";
            }
        }
    }

    /// Where the held descriptor really is, every symlink resolved (the
    /// kernel's name for it), whatever PATH leads to now.
    pub fn resolved_path(&self) -> io::Result<PathBuf> {
        std::fs::read_link(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }

    /// Whether the test file must be written before tests run (a new test file).
    pub fn needs_layout(&self) -> bool {
        self.kind == TargetKind::TestFile
    }

    /// Fills the new test file with `size` bytes of incompressible data (never
    /// fallocate or holes: reads must read what was really written), syncs it,
    /// drops it from the page cache and checks st_blocks. `progress(done, total)`
    /// is called per MiB. Returns warnings (e.g. the filesystem compressed it).
    pub fn layout(&self, stop: &AtomicBool, progress: impl FnMut(u64, u64)) -> Result<Vec<Warning>> {
        if !self.needs_layout() {
            return Ok(Vec::new());
        }
        // The descriptor from the exclusive create, never the path.
        let file = &self.file;
        fill_test_file(&self.path, self.size, stop, progress, |buf, offset| write_all_at(file, buf, offset))?;
        file.sync_all().map_err(|e| DiskError::io(format!("fsync {}", self.path.display()), e))?;
        drop_from_page_cache(file);
        let meta = file.metadata().map_err(|e| DiskError::io("fstat test file", e))?;
        let allocated = meta.blocks() * 512;
        let mut warnings = Vec::new();
        if allocated < self.size / 100 * 99 {
            warnings.push(Warning::new(
                headroom_result::WarningCode::LayoutNotAllocated,
                format!(
                    "the filesystem allocated only {} for the {} test file (compression, dedupe or holes): reads may \
                     not touch the device",
                    headroom_units::format_size(allocated),
                    headroom_units::format_size(self.size)
                ),
            ));
        }
        Ok(warnings)
    }

    /// Opens the target for one test. With `direct`, tries O_DIRECT and checks
    /// that an aligned read works; returns the file and whether O_DIRECT is in
    /// effect (false when `direct_required` is false and the filesystem refused it).
    pub fn open(&self, write: bool, direct: bool, direct_required: bool, sync: SyncMode) -> Result<(File, bool)> {
        let (file, direct) = self.open_inner(write, direct, direct_required, sync)?;
        // Like fio's `invalidate=1`: start every test with none of the target in
        // the page cache, so buffered reads are not answered from an earlier
        // test's pages and O_DIRECT reads are not pushed to kernel workers.
        drop_from_page_cache(&file);
        Ok((file, direct))
    }

    fn open_inner(&self, write: bool, direct: bool, direct_required: bool, sync: SyncMode) -> Result<(File, bool)> {
        let mut flags = if write { OFlags::RDWR } else { OFlags::RDONLY };
        if sync == SyncMode::Dsync {
            flags |= OFlags::DSYNC;
        }
        // Through the held descriptor, never the path (see the module doc).
        // O_NOATIME where the kernel allows it (the file's owner, or root):
        // a test leaves the access time of what it read as it was, and reads
        // skip the kernel's atime check (2% of the CPU per 4K read of a
        // block device). Another user's file refuses it: plain open then.
        let open = |extra: OFlags| match reopen(&self.file, flags | extra | OFlags::NOATIME) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => reopen(&self.file, flags | extra),
            other => other,
        };
        if direct {
            match open(OFlags::DIRECT) {
                Ok(f) if self.direct_read_works(&f) => return Ok((f, true)),
                Ok(_) | Err(_) if !direct_required => {}
                Ok(_) => return Err(safety::direct_refused(format!("{} refuses O_DIRECT reads", self.path.display()))),
                Err(e) => {
                    return Err(safety::direct_refused(format!(
                        "{} cannot be opened with O_DIRECT ({e})",
                        self.path.display()
                    )))
                }
            }
        }
        let f = open(OFlags::empty()).map_err(|e| DiskError::io(format!("open {}", self.path.display()), e))?;
        Ok((f, false))
    }

    fn direct_read_works(&self, f: &File) -> bool {
        let len = self.dio_align.max(512) as usize;
        let mut buf = crate::engine::AlignedBuf::new(len, self.mem_align);
        rustix::io::pread(f, buf.as_mut_slice(), 0).is_ok()
    }

    /// Removes the test file now (also done on drop).
    pub fn remove(&mut self) {
        if let Some(id) = self.created.take() {
            registry().remove(id);
        }
    }
}

fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    while !buf.is_empty() {
        let n = file.write_at(buf, offset)?;
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Advises the kernel to drop the file's pages from the page cache (like
/// fio's `invalidate=1`); advisory, so a refusal changes nothing.
fn drop_from_page_cache(file: &File) {
    let _ = fs::fadvise(file, 0, None, fs::Advice::DontNeed);
}

fn access_ok(path: &Path, access: Access) -> bool {
    fs::access(path, access).is_ok()
}

/// Free bytes on the filesystem of `dir_fd` and the margin kept spare (64
/// MiB, or an eighth on small filesystems). When `size` does not fit, waits
/// up to [`SPACE_SETTLE`] for it to: ext4 and XFS free a just-deleted file's
/// blocks a moment after the unlink (a test run right after another would
/// be refused for space the filesystem is still releasing).
fn wait_for_space(dir_fd: &File, dir: &Path, size: u64) -> Result<(u64, u64)> {
    let started = std::time::Instant::now();
    loop {
        let free = free_bytes(dir_fd).map_err(|e| DiskError::io(format!("statvfs {}", dir.display()), e))?;
        // ramfs (and some FUSE filesystems) report no size at all: nothing to check.
        let free = free.unwrap_or(u64::MAX);
        let margin = space_margin(free);
        if size.saturating_add(margin) <= free || started.elapsed() >= SPACE_SETTLE {
            return Ok((free, margin));
        }
        let _ = rustix::fs::syncfs(dir_fd);
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// How long a test file that does not fit waits for space being freed.
const SPACE_SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// Bytes an unprivileged user may still write on the filesystem of `fd`;
/// None when the filesystem reports no size (ramfs).
pub fn free_bytes(fd: impl AsFd) -> io::Result<Option<u64>> {
    let st = fs::fstatvfs(fd)?;
    if st.f_blocks == 0 {
        return Ok(None);
    }
    Ok(Some(st.f_bavail.saturating_mul(st.f_frsize)))
}

/// Size of the block device open as `file` in bytes (seeking to its end works
/// on every block device; all I/O here is positioned, so the offset is unused).
pub fn block_device_size(mut file: &File) -> Result<u64> {
    use std::io::Seek;
    file.seek(io::SeekFrom::End(0)).map_err(|e| DiskError::io("size of the block device", e))
}

/// (memory alignment, offset alignment) for O_DIRECT, when statx reports them.
fn statx_dioalign(file: &File) -> Option<(u32, u64)> {
    // An empty path with AT_EMPTY_PATH names the descriptor itself.
    let stx = fs::statx(file, c"", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN).ok()?;
    if !StatxFlags::from_bits_retain(stx.stx_mask).contains(StatxFlags::DIOALIGN) || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some((stx.stx_dio_mem_align.max(1), u64::from(stx.stx_dio_offset_align)))
}

/// statfs magic numbers of the filesystems whose behaviour matters here.
const FS_MAGICS: &[(i64, &str)] = &[
    (0xEF53, "ext4"),
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0x0102_1994, "tmpfs"),
    (0x8584_58f6, "ramfs"),
    (0x6969, "nfs"),
    (0x2fc1_2fc1, "zfs"),
    (0x6573_5546, "fuse"),
    (0xFF53_4D42, "cifs"),
    (0xFE53_4D42, "smb2"),
    (0x794c_7630, "overlay"),
    (0xF2F5_2010, "f2fs"),
    (0xca45_1a4e, "bcachefs"),
    (0x2011_BAB0, "exfat"),
    (0x4d44, "vfat"),
    (0x7366_746e, "ntfs3"),
    (0x6e73_6673, "nsfs"),
];

/// The filesystem `fd` is on (fstatfs).
pub fn statfs_info(fd: impl AsFd) -> Option<FsInfo> {
    let st = fs::fstatfs(fd).ok()?;
    let magic = st.f_type as i64;
    let name = FS_MAGICS.iter().find(|(m, _)| *m == magic).map(|(_, n)| n.to_string()).unwrap_or(format!("{magic:#x}"));
    Some(FsInfo { name, magic })
}

/// Total RAM in bytes (sysconf), for the page-cache check.
pub fn ram_bytes() -> u64 {
    let info = rustix::system::sysinfo();
    // totalram is a C unsigned long: u64 here, u32 on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    u64::from(info.totalram).saturating_mul(u64::from(info.mem_unit))
}

#[cfg(test)]
mod stale_tests {
    use super::*;
    use crate::target_common::test_file_owner;

    #[test]
    fn only_test_file_names_have_an_owner() {
        assert_eq!(test_file_owner("headroom-disk-123.tmp"), Some(123));
        for other in [
            "headroom-disk-.tmp",
            "headroom-disk-12x.tmp",
            "headroom-disk-123.tmp.bak",
            "data.tmp",
            "headroom-disk-99999999999.tmp",
        ] {
            assert_eq!(test_file_owner(other), None, "{other}");
        }
    }

    #[test]
    fn stale_test_files_go_and_everything_else_stays() {
        let dir = std::env::temp_dir().join(format!("headroom-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // pid 2^22+1 is above the kernel's pid_max limit: never alive.
        let dead = dir.join("headroom-disk-4194305.tmp");
        let ours = dir.join(test_file_name());
        let theirs = dir.join("headroom-disk-notes.txt");
        for f in [&dead, &ours, &theirs] {
            std::fs::write(f, b"x").unwrap();
        }
        assert_eq!(remove_stale_test_files(&dir), vec![dead.clone()]);
        assert!(!dead.exists() && ours.exists() && theirs.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
