//! Block devices for tests: loop devices over sparse files, filesystems made on
//! them, LUKS headers and md RAID superblocks written on them, mounts (also
//! tmpfs and ramfs), and cgroup v1 blkio throttles that give a device a known
//! speed. Each is a guard: dropping it detaches,
//! unmounts or removes what it made, also when the test panics. Names carry
//! the process id and a counter so parallel tests never collide.

use crate::sh;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// `headroom-lab-<what>-<pid>-<n>`: unique per process and call.
pub fn unique_name(what: &str) -> String {
    format!("headroom-lab-{what}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A loop device over a sparse backing file in the system temp directory.
#[derive(Debug)]
pub struct LoopDevice {
    /// /dev/loopN
    pub path: PathBuf,
    /// The sparse file behind the device, removed on drop.
    pub backing: PathBuf,
    /// Device major number (7 for loop), for blkio throttle rules.
    pub major: u32,
    /// Device minor number, for blkio throttle rules.
    pub minor: u32,
}

impl LoopDevice {
    /// A loop device of `size` bytes (backing file sparse until written).
    pub fn new(size: u64) -> io::Result<LoopDevice> {
        LoopDevice::new_in(&std::env::temp_dir(), size)
    }

    /// A loop device over a backing file in `dir`; `/dev/shm` gives a device
    /// of memory speed whose figures a throttle sets, not the host disk's noise.
    pub fn new_in(dir: &Path, size: u64) -> io::Result<LoopDevice> {
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(detach_orphaned_loop_devices);
        let backing = dir.join(format!("{}.img", unique_name("loop")));
        let file = std::fs::File::create(&backing)?;
        file.set_len(size)?;
        drop(file);
        let dev = match sh("losetup", &["-f", "--show", &backing.to_string_lossy()]) {
            Ok(out) => PathBuf::from(out.trim()),
            Err(e) => {
                let _ = std::fs::remove_file(&backing);
                return Err(e);
            }
        };
        let rdev = std::fs::metadata(&dev)?.rdev();
        Ok(LoopDevice { path: dev, backing, major: libc_major(rdev), minor: libc_minor(rdev) })
    }

    /// "7:3", as blkio throttle files want it.
    pub fn major_minor(&self) -> String {
        format!("{}:{}", self.major, self.minor)
    }

    /// Makes a filesystem (`ext4`, `xfs`, `btrfs`) on the whole device.
    pub fn mkfs(&self, fstype: &str) -> io::Result<()> {
        let dev = self.path.to_string_lossy().to_string();
        let (program, args): (String, Vec<&str>) = match fstype {
            "ext4" => ("mkfs.ext4".into(), vec!["-q", "-F", &dev]),
            "xfs" => ("mkfs.xfs".into(), vec!["-q", "-f", &dev]),
            "btrfs" => ("mkfs.btrfs".into(), vec!["-q", "-f", &dev]),
            other => (format!("mkfs.{other}"), vec![&dev]),
        };
        sh(&program, &args).map(drop)
    }

    /// Writes a GPT with one partition (sfdisk).
    pub fn write_gpt(&self) -> io::Result<()> {
        let mut child = Command::new("sfdisk")
            .args(["-q", "--label", "gpt", &self.path.to_string_lossy()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        use std::io::Write;
        child.stdin.take().expect("piped").write_all(b",,L\n")?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!("sfdisk: {}", String::from_utf8_lossy(&out.stderr))));
        }
        Ok(())
    }
}

/// Formats `target` (a device or an image file) as LUKS `version` (1 or 2)
/// with cryptsetup, the way a user encrypting a disk would. The key is a
/// throwaway file; PBKDF iterations are forced low so this takes milliseconds.
pub fn luks_format(target: &Path, version: u8) -> io::Result<()> {
    let key = std::env::temp_dir().join(format!("{}.key", unique_name("luks")));
    std::fs::write(&key, b"headroom-lab")?;
    let kind = format!("luks{version}");
    let result = sh(
        "cryptsetup",
        &[
            "luksFormat",
            "--batch-mode",
            "--type",
            &kind,
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            &target.to_string_lossy(),
            &key.to_string_lossy(),
        ],
    );
    let _ = std::fs::remove_file(&key);
    result.map(drop)
}

/// md RAID superblock formats, named as `mdadm --metadata` names them.
pub const MD_METADATA: [&str; 4] = ["0.90", "1.0", "1.1", "1.2"];

const MD_MAGIC: u32 = 0xa92b_4efc;

/// Writes the md RAID member superblock `mdadm --create --metadata=<metadata>`
/// would write, at its offset (0.90: the last 64 KiB-aligned 64 KiB; 1.0: 8 KiB
/// before the 4 KiB-aligned end; 1.1: the start; 1.2: 4 KiB in).
///
/// Written directly because `mdadm --create` needs the kernel's md driver,
/// which the lab kernel lacks; only the fields a probe checks are filled
/// (magic, version, the superblock's own sector for 1.x), as in `md_p.h`.
pub fn write_md_superblock(target: &Path, metadata: &str) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(target)?;
    let size = {
        use std::io::Seek;
        (&file).seek(io::SeekFrom::End(0))?
    };
    let mut sb = vec![0u8; 4096];
    sb[0..4].copy_from_slice(&MD_MAGIC.to_le_bytes());
    let offset = match metadata {
        "0.90" => {
            // major 0, minor 90, patch 0; array size 0 KiB (fits any device).
            sb[8..12].copy_from_slice(&90u32.to_le_bytes());
            (size & !0xffff) - 0x10000
        }
        "1.0" | "1.1" | "1.2" => {
            let offset = match metadata {
                "1.0" => (size & !0xfff) - 0x2000,
                "1.1" => 0,
                _ => 0x1000,
            };
            sb[4..8].copy_from_slice(&1u32.to_le_bytes());
            sb[32..44].copy_from_slice(b"headroom-lab");
            // super_offset: the superblock's own position, in 512-byte sectors.
            sb[144..152].copy_from_slice(&(offset >> 9).to_le_bytes());
            offset
        }
        other => return Err(io::Error::other(format!("unknown md metadata {other}; use one of {MD_METADATA:?}"))),
    };
    file.write_all_at(&sb, offset)?;
    file.sync_all()
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = sh("losetup", &["-d", &self.path.to_string_lossy()]);
        let _ = std::fs::remove_file(&self.backing);
    }
}

/// Detaches the loop devices an earlier, killed test process left behind
/// (its `Drop` never ran) and removes their backing files: a device counts as
/// orphaned when its backing file is one of [`LoopDevice`]'s and the process
/// id in the file's name is gone. Devices of live processes are left alone,
/// and a reused process id only makes the sweep skip a device.
fn detach_orphaned_loop_devices() {
    let Ok(blocks) = std::fs::read_dir("/sys/block") else { return };
    for block in blocks.flatten() {
        let Ok(backing) = std::fs::read_to_string(block.path().join("loop/backing_file")) else { continue };
        let backing = PathBuf::from(backing.trim().trim_end_matches(" (deleted)"));
        if owner_is_gone(&backing) {
            let device = Path::new("/dev").join(block.file_name());
            let _ = sh("losetup", &["-d", &device.to_string_lossy()]);
            let _ = std::fs::remove_file(&backing);
        }
    }
}

/// Whether `backing` is named `headroom-lab-loop-<pid>-<n>.img` for a
/// process id that no longer exists.
fn owner_is_gone(backing: &Path) -> bool {
    let name = backing.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let pid = name.strip_prefix("headroom-lab-loop-").and_then(|rest| rest.split('-').next());
    pid.and_then(|p| p.parse::<u32>().ok()).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

fn libc_major(dev: u64) -> u32 {
    (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)) as u32
}

fn libc_minor(dev: u64) -> u32 {
    (((dev >> 12) & 0xffff_ff00) | (dev & 0xff)) as u32
}

/// A mount on a fresh directory under the system temp directory; unmounted
/// (lazily, so a busy mount never blocks the test) and removed on drop.
#[derive(Debug)]
pub struct Mount {
    /// The mount point, a fresh directory removed on drop.
    pub dir: PathBuf,
}

impl Mount {
    /// Mounts `source` (a device, or `tmpfs`/`ramfs`) of type `fstype` with `options`.
    pub fn new(source: &str, fstype: &str, options: Option<&str>) -> io::Result<Mount> {
        let dir = std::env::temp_dir().join(unique_name("mnt"));
        std::fs::create_dir(&dir)?;
        let dir_s = dir.to_string_lossy().to_string();
        let mut args = vec!["-t", fstype];
        if let Some(o) = options {
            args.extend(["-o", o]);
        }
        args.extend([source, dir_s.as_str()]);
        if let Err(e) = sh("mount", &args) {
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        Ok(Mount { dir })
    }

    /// A tmpfs of `size` bytes.
    pub fn tmpfs(size: u64) -> io::Result<Mount> {
        Mount::new("tmpfs", "tmpfs", Some(&format!("size={size}")))
    }

    /// A ramfs: memory that refuses O_DIRECT (the fallback path).
    pub fn ramfs() -> io::Result<Mount> {
        Mount::new("ramfs", "ramfs", None)
    }

    /// The filesystem of `dev` mounted here.
    pub fn device(dev: &Path, fstype: &str) -> io::Result<Mount> {
        Mount::new(&dev.to_string_lossy(), fstype, None)
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Unmounts now, not lazily, for a test that mounts the same filesystem
    /// again: after a lazy unmount the next mount would share the old
    /// superblock instead of replaying the journal. "Busy" is retried for up
    /// to 10 s, because a process that another test thread is spawning
    /// holds a copy of this process's descriptors until it execs; a retry is
    /// reported with the processes that held the mount, and a mount still
    /// busy after that is an error naming them.
    pub fn unmount(self) -> io::Result<()> {
        let t0 = std::time::Instant::now();
        let mut held_by = None;
        loop {
            match rustix::mount::unmount(&self.dir, rustix::mount::UnmountFlags::empty()) {
                Ok(()) => break,
                Err(rustix::io::Errno::BUSY) if t0.elapsed() < std::time::Duration::from_secs(10) => {
                    held_by.get_or_insert_with(|| holders_of(&self.dir));
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => {
                    return Err(io::Error::other(format!(
                        "umount {}: {e} after {:.1} s; held by {}",
                        self.dir.display(),
                        t0.elapsed().as_secs_f64(),
                        holders_of(&self.dir)
                    )))
                }
            }
        }
        if let Some(held_by) = held_by {
            eprintln!(
                "umount {} ({}): busy for {} ms, held at first by {held_by}",
                self.dir.display(),
                std::thread::current().name().unwrap_or("a test"),
                t0.elapsed().as_millis()
            );
        }
        Ok(())
    }
}

/// The processes with a file, a working directory or a mapping under
/// `dir`, as "pid (name)" (from /proc, as `fuser -m` finds them), or
/// "no process" when the kernel itself holds it.
fn holders_of(dir: &Path) -> String {
    let under = |p: &Path| p.starts_with(dir);
    let holds = |pid: &Path| {
        let links = ["cwd", "root"].iter().map(|l| pid.join(l));
        let fds = std::fs::read_dir(pid.join("fd")).into_iter().flatten().flatten().map(|e| e.path());
        let by_link = links.chain(fds).any(|l| std::fs::read_link(l).is_ok_and(|t| under(&t)));
        let by_map = std::fs::read_to_string(pid.join("maps"))
            .is_ok_and(|m| m.lines().any(|l| l.split_whitespace().nth(5).is_some_and(|f| under(Path::new(f)))));
        by_link || by_map
    };
    let holders: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|e| holds(&e.path()))
        .map(|e| {
            let name = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            format!("{} ({})", e.file_name().to_string_lossy(), name.trim())
        })
        .collect();
    if holders.is_empty() {
        "no process".to_string()
    } else {
        holders.join(", ")
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = sh("umount", &["-l", &self.dir.to_string_lossy()]);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A cgroup v1 blkio group with throttles on one device: processes started
/// through [`BlkioThrottle::command`] run at the configured rate.
#[derive(Debug)]
pub struct BlkioThrottle {
    /// The group's directory under [`BLKIO_ROOT`], removed on drop.
    pub dir: PathBuf,
}

/// Where cgroup v1 blkio is mounted on these machines.
pub const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";

impl BlkioThrottle {
    /// Whether cgroup v1 blkio throttling is available.
    pub fn available() -> bool {
        Path::new(BLKIO_ROOT).join("blkio.throttle.read_bps_device").exists()
    }

    /// A new group throttling `major_minor` ("7:3"). Each limit is optional.
    pub fn new(
        major_minor: &str,
        read_bps: Option<u64>,
        write_bps: Option<u64>,
        read_iops: Option<u64>,
        write_iops: Option<u64>,
    ) -> io::Result<BlkioThrottle> {
        let dir = Path::new(BLKIO_ROOT).join(unique_name("blkio"));
        std::fs::create_dir(&dir)?;
        let throttle = BlkioThrottle { dir };
        for (file, value) in [
            ("blkio.throttle.read_bps_device", read_bps),
            ("blkio.throttle.write_bps_device", write_bps),
            ("blkio.throttle.read_iops_device", read_iops),
            ("blkio.throttle.write_iops_device", write_iops),
        ] {
            if let Some(v) = value {
                std::fs::write(throttle.dir.join(file), format!("{major_minor} {v}\n"))?;
            }
        }
        Ok(throttle)
    }

    /// Sets (or changes, while processes run) one throttle file, e.g.
    /// `blkio.throttle.write_bps_device`, for `major_minor`.
    pub fn set(&self, file: &str, major_minor: &str, value: u64) -> io::Result<()> {
        std::fs::write(self.dir.join(file), format!("{major_minor} {value}\n"))
    }

    /// `program args...` started inside this group (via a shell that moves
    /// itself into the group and then execs the program).
    pub fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg("echo $$ > \"$0\" && exec \"$@\"").arg(self.dir.join("cgroup.procs")).arg(program).args(args);
        c
    }
}

impl Drop for BlkioThrottle {
    fn drop(&mut self) {
        // rmdir fails while a process is still inside: retry briefly.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loop device named for a process id that is gone, attached the way
    /// a killed test leaves one.
    fn attach_as(pid: u32, dir: &Path) -> (PathBuf, PathBuf) {
        let backing = dir.join(format!("headroom-lab-loop-{pid}-0.img"));
        std::fs::File::create(&backing).unwrap().set_len(1 << 20).unwrap();
        let device = PathBuf::from(sh("losetup", &["-f", "--show", &backing.to_string_lossy()]).unwrap().trim());
        (device, backing)
    }

    /// Whether `device` is attached over `backing` (a detached number is
    /// soon reused by the next device attached).
    fn attached(device: &Path, backing: &Path) -> bool {
        let name = device.file_name().unwrap().to_string_lossy().into_owned();
        std::fs::read_to_string(Path::new("/sys/block").join(name).join("loop/backing_file"))
            .is_ok_and(|b| Path::new(b.trim()) == backing)
    }

    #[test]
    fn a_killed_tests_loop_device_is_detached_and_a_live_ones_is_kept() {
        crate::require_root!();
        let dir = std::env::temp_dir().join(unique_name("sweep"));
        std::fs::create_dir(&dir).unwrap();
        let mut child = Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let (orphan, orphan_file) = attach_as(gone, &dir);
        let live = LoopDevice::new_in(&dir, 1 << 20).unwrap();
        // Another test in this process may have run the sweep already.
        detach_orphaned_loop_devices();
        // The kernel detaches at the last close, and udev may still be
        // probing the fresh device.
        let t0 = std::time::Instant::now();
        while attached(&orphan, &orphan_file) && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (orphan_left, orphan_file_left) = (attached(&orphan, &orphan_file), orphan_file.exists());
        if orphan_left {
            let _ = sh("losetup", &["-d", &orphan.to_string_lossy()]);
        }
        let _ = std::fs::remove_file(&orphan_file);
        assert!(!orphan_left && !orphan_file_left, "{} over {} was left", orphan.display(), orphan_file.display());
        assert!(
            attached(&live.path, &live.backing) && live.backing.exists(),
            "the live device {} was swept",
            live.path.display()
        );
        drop(live);
        std::fs::remove_dir(&dir).unwrap();
    }
}
