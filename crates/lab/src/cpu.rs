//! A cgroup v1 `cpu` group with a CFS quota: a CPU of known, small capacity
//! for the processes put into it (docs/reference/lab.md "CPU limits").
//! The group's name is unique to the process; on drop whatever is still in
//! it moves back to the root group and the group is removed.

use crate::blockdev::unique_name;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cgroup v1 cpu is mounted on these machines.
pub const CPU_ROOT: &str = "/sys/fs/cgroup/cpu";

/// A cpu group holding its members to `quota_us` of CPU time per `period_us`.
#[derive(Debug)]
pub struct CpuQuota {
    /// The group's directory under [`CPU_ROOT`], removed on drop.
    pub dir: PathBuf,
}

impl CpuQuota {
    /// Whether cgroup v1 cpu bandwidth control is available.
    pub fn available() -> bool {
        Path::new(CPU_ROOT).join("cpu.cfs_quota_us").exists()
    }

    /// A new group: `quota_us` of runtime per `period_us` (2000 per 100000 = 2% of one core).
    pub fn new(quota_us: u64, period_us: u64) -> io::Result<CpuQuota> {
        let dir = Path::new(CPU_ROOT).join(unique_name("cpu"));
        std::fs::create_dir(&dir)?;
        let group = CpuQuota { dir };
        std::fs::write(group.dir.join("cpu.cfs_period_us"), format!("{period_us}\n"))?;
        std::fs::write(group.dir.join("cpu.cfs_quota_us"), format!("{quota_us}\n"))?;
        Ok(group)
    }

    /// Moves a running process (all its threads) into the group, from outside:
    /// a process started by `ip netns exec` sees no cgroup filesystem itself.
    pub fn add_pid(&self, pid: u32) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), format!("{pid}\n"))
    }

    /// `program args...` started inside the group (a shell moves itself in, then execs it).
    pub fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg("echo $$ > \"$0\" && exec \"$@\"").arg(self.dir.join("cgroup.procs")).arg(program).args(args);
        c
    }

    /// (quota_us, period_us) as the kernel holds them.
    pub fn limit(&self) -> io::Result<(u64, u64)> {
        let read = |f: &str| -> io::Result<u64> {
            std::fs::read_to_string(self.dir.join(f))?.trim().parse().map_err(io::Error::other)
        };
        Ok((read("cpu.cfs_quota_us")?, read("cpu.cfs_period_us")?))
    }

    /// (nr_periods, nr_throttled) from the group's cpu.stat: the kernel's own count.
    pub fn throttle_counts(&self) -> io::Result<(u64, u64)> {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat"))?;
        let get = |key: &str| {
            text.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse::<u64>().ok())).unwrap_or(0)
        };
        Ok((get("nr_periods "), get("nr_throttled ")))
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // Members still inside (a test that failed early) go back to the root group.
        if let Ok(pids) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in pids.split_whitespace() {
                let _ = std::fs::write(Path::new(CPU_ROOT).join("cgroup.procs"), format!("{pid}\n"));
            }
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}
