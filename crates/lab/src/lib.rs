//! The test lab: real disks and real networks for headroom's tests, built from
//! what a Linux machine offers (see docs/reference/lab.md). Everything it
//! creates is removed on drop, also when a test fails.
//!
//! Used only by tests, benches and scripts; never by the headroom binary.

pub mod blockdev;
pub mod chromium;
pub mod cpu;
pub mod memory;
pub mod nas;
pub mod netns;

/// Whether this process runs as root (namespaces, loop devices and cgroups need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Skips the calling test with a printed reason unless running as root.
/// Usage: `headroom_lab::require_root!();` at the top of a test.
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::is_root() {
            eprintln!("SKIPPED {}: needs root (namespaces, loop devices or cgroups)", module_path!());
            return;
        }
    };
}

/// Skips the calling test with a printed reason unless running as root with
/// cgroup v1 blkio throttles mounted (the disk labs' ground truth).
#[macro_export]
macro_rules! require_blkio {
    () => {
        $crate::require_root!();
        if !$crate::blockdev::BlkioThrottle::available() {
            eprintln!("SKIPPED {}: cgroup v1 blkio is not mounted at {}", module_path!(), $crate::blockdev::BLKIO_ROOT);
            return;
        }
    };
}

/// Skips the calling test with a printed reason unless `program` is on PATH.
#[macro_export]
macro_rules! require_program {
    ($program:expr) => {
        if !$crate::has_program($program) {
            eprintln!("SKIPPED {}: `{}` is not installed (run scripts/install-deps.sh)", module_path!(), $program);
            return;
        }
    };
}

/// Whether `program` can be found on PATH.
pub fn has_program(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// Runs a command, returning its stdout, or an error with its stderr.
pub fn sh(program: &str, args: &[&str]) -> std::io::Result<String> {
    let out = std::process::Command::new(program).args(args).output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(std::io::Error::other(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Holds the machine for one test that measures speed or loads it: while the
/// guard lives, no other test holding one runs, in this process or another
/// (cargo runs a binary's tests on parallel threads, and two test binaries or
/// two checkouts can run at once). A flock on a file in the temp directory, so
/// a test that crashes releases it with its process.
pub struct MachineGuard {
    _file: std::fs::File,
    _in_process: std::sync::MutexGuard<'static, ()>,
}

thread_local! {
    /// Whether this thread holds the machine: taking it twice would wait forever.
    static HELD_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Drop for MachineGuard {
    fn drop(&mut self) {
        HELD_HERE.with(|held| held.set(false));
    }
}

/// Waits until no other test holds the machine, then holds it (see [`MachineGuard`]).
/// Use it in every test that asserts a speed and every test that loads the
/// disk, the network or the CPUs enough to disturb one.
pub fn hold_machine() -> MachineGuard {
    // flock is per open file description, so threads of one process each open
    // their own; the mutex keeps a poisoned or re-entrant case simple.
    static IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    assert!(
        !HELD_HERE.with(|held| held.replace(true)),
        "hold_machine() called twice on one thread: the test already holds the machine"
    );
    let in_process = IN_PROCESS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let path = std::env::temp_dir().join("headroom-lab-machine.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open the lab lock {}: {e}", path.display()));
    file.lock().unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()));
    MachineGuard { _file: file, _in_process: in_process }
}

/// CPU pressure (PSI, /proc/pressure/cpu) over a span of time: the share of
/// wall time in which at least one runnable task waited for a CPU. A test
/// whose premise is "the machine keeps up" (a throttle, not the CPU, sets the
/// rate) checks it with this when a figure misses: processes outside the test
/// suite (builds, other users) can starve the device's or the peer's threads,
/// and the lock of [`hold_machine`] only keeps tests apart.
pub struct CpuPressure {
    start_stalled_us: u64,
    start: std::time::Instant,
}

impl CpuPressure {
    /// Starts measuring; None when the kernel has no PSI.
    pub fn start() -> Option<CpuPressure> {
        Some(CpuPressure { start_stalled_us: cpu_some_stalled_us()?, start: std::time::Instant::now() })
    }

    /// Share (0..1) of the time since [`CpuPressure::start`] in which some task waited for a CPU.
    pub fn stalled_fraction(&self) -> f64 {
        let elapsed_us = self.start.elapsed().as_secs_f64() * 1e6;
        let stalled = cpu_some_stalled_us().unwrap_or(self.start_stalled_us).saturating_sub(self.start_stalled_us);
        if elapsed_us > 0.0 {
            (stalled as f64 / elapsed_us).min(1.0)
        } else {
            0.0
        }
    }
}

/// The `total=` of the `some` line of /proc/pressure/cpu: microseconds in
/// which at least one task waited for a CPU, since boot.
fn cpu_some_stalled_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    text.lines()
        .find(|l| l.starts_with("some "))?
        .split_whitespace()
        .find_map(|field| field.strip_prefix("total="))?
        .parse()
        .ok()
}

/// Bytes written to the block device under a path over a span of time, from
/// its /sys/dev/block/MAJ:MIN/stat counters: a test that reads a file to
/// compare two tools checks with this that nothing else wrote to the device
/// meanwhile (a build's writeback stalled a virtio disk to a few IOPS while
/// the comparison ran; the machine lock only keeps tests apart).
pub struct DiskWrites {
    stat: std::path::PathBuf,
    start_sectors: u64,
}

impl DiskWrites {
    /// Starts counting for the device holding `path`; None when it has no
    /// block device statistics (tmpfs, overlay without a device).
    pub fn start(path: &std::path::Path) -> Option<DiskWrites> {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(path).ok()?.dev();
        let (major, minor) = (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff), (dev & 0xff) | ((dev >> 12) & !0xff));
        let stat = std::path::PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat"));
        let start_sectors = sectors_written(&stat)?;
        Some(DiskWrites { stat, start_sectors })
    }

    /// Bytes written to the device since [`DiskWrites::start`].
    pub fn bytes(&self) -> u64 {
        sectors_written(&self.stat).unwrap_or(self.start_sectors).saturating_sub(self.start_sectors) * 512
    }
}

/// Field 7 of a block device's stat file: sectors written (always 512 bytes).
fn sectors_written(stat: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(stat).ok()?.split_whitespace().nth(6)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_pressure_sees_a_busy_machine() {
        let Some(pressure) = CpuPressure::start() else {
            eprintln!("SKIPPED: this kernel has no /proc/pressure/cpu");
            return;
        };
        // Three spinners per CPU: some runnable task always waits for one.
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let until = std::time::Instant::now() + std::time::Duration::from_millis(600);
        let spinners: Vec<_> =
            (0..cpus * 3).map(|_| std::thread::spawn(move || while std::time::Instant::now() < until {})).collect();
        spinners.into_iter().for_each(|s| s.join().unwrap());
        let stalled = pressure.stalled_fraction();
        assert!(stalled > 0.5, "cpu pressure {stalled:.2} while 3 spinners per CPU ran");
    }

    #[test]
    fn disk_writes_counts_a_synced_write() {
        let dir = tempfile_dir();
        let Some(writes) = DiskWrites::start(&dir) else {
            eprintln!("SKIPPED: {} is on no block device with statistics", dir.display());
            return;
        };
        let file = dir.join(format!("headroom-lab-disk-writes-{}", std::process::id()));
        std::fs::write(&file, vec![7u8; 8 << 20]).unwrap();
        std::fs::File::open(&file).unwrap().sync_all().unwrap();
        std::fs::remove_file(&file).unwrap();
        assert!(writes.bytes() >= 8 << 20, "{} bytes counted for an 8 MiB synced write", writes.bytes());
    }

    /// A directory on a real disk (not tmpfs): the target directory of the build.
    fn tempfile_dir() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }
}
