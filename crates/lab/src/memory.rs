//! A cgroup v1 `memory` group with a limit: a server whose page cache is
//! smaller than a test file, so its reads reach the disk (and its blkio
//! throttle) instead of its memory (docs/reference/lab.md). The group's name
//! is unique to the process; on drop the processes still inside (servers the
//! test started and put there) are killed and the group is removed. Owns
//! nothing else: the servers themselves are started by `nas`.

use crate::blockdev::unique_name;
use std::io;
use std::path::{Path, PathBuf};

/// Where cgroup v1 memory is mounted on these machines.
pub const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";

/// A memory group holding its members (and the page cache they fill) to a limit.
#[derive(Debug)]
pub struct MemoryLimit {
    /// The group's directory under [`MEMORY_ROOT`], removed on drop.
    pub dir: PathBuf,
}

impl MemoryLimit {
    /// Whether cgroup v1 memory limits are available.
    pub fn available() -> bool {
        Path::new(MEMORY_ROOT).join("memory.limit_in_bytes").exists()
    }

    /// A new group of `limit` bytes; `what` names it (`smbd`, `ganesha`).
    pub fn new(what: &str, limit: u64) -> io::Result<MemoryLimit> {
        let dir = Path::new(MEMORY_ROOT).join(unique_name(&format!("{what}-mem")));
        std::fs::create_dir(&dir)?;
        let group = MemoryLimit { dir };
        std::fs::write(group.dir.join("memory.limit_in_bytes"), format!("{limit}\n"))?;
        Ok(group)
    }

    /// Moves a running process (all its threads) into the group, from outside:
    /// a process started by `ip netns exec` sees no cgroup filesystem itself.
    /// Pages it touched before stay charged where they were.
    pub fn add_pid(&self, pid: u32) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), format!("{pid}\n"))
    }

    /// What the group holds after a run, for a test's log: page cache,
    /// dirty pages, the peak against the limit and the OOM kills (a server
    /// killed by its own group ends a run with a connection error).
    pub fn summary(&self) -> String {
        let read = |file: &str| std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        let field = |text: &str, name: &str| {
            text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
        };
        let stat = read("memory.stat");
        let mib = |v: Option<u64>| v.map_or("?".to_string(), |b| format!("{:.1} MiB", b as f64 / 1048576.0));
        format!(
            "page cache {}, dirty {}, peak {} of {}, OOM kills {}",
            mib(field(&stat, "cache")),
            mib(field(&stat, "dirty")),
            mib(read("memory.max_usage_in_bytes").trim().parse().ok()),
            mib(read("memory.limit_in_bytes").trim().parse().ok()),
            field(&read("memory.oom_control"), "oom_kill").map_or("?".to_string(), |n| n.to_string()),
        )
    }
}

impl Drop for MemoryLimit {
    fn drop(&mut self) {
        // Only servers a test started are inside; a forked child (smbd's one
        // per connection) would otherwise outlive the test.
        if let Ok(pids) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in pids.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
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
