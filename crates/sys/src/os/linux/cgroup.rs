//! Where a process's cgroup is, for one controller (cpu, blkio/io): its
//! line in /proc/PID/cgroup (a v1 hierarchy with the controller, else the v2
//! unified one) and the hierarchy's mount. The mount is looked up in this
//! process's mounts, else in the mounts of its nearest ancestor that has it
//! (through /proc/PID/root), else in kthreadd's or any process's: a process
//! started by `ip netns exec` gets a fresh /sys without the cgroup mounts,
//! yet its cgroup still limits it, and one whose parent exited is PID 1's
//! child, whose root may be closed even to root.
//!
//! Finds directories only; what a controller's files mean is its reader's.

use std::path::{Path, PathBuf};

/// A cgroup controller whose files headroom reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Controller {
    /// CPU bandwidth (cpu.cfs_quota_us, cpu.max).
    Cpu,
    /// Block I/O limits (blkio.throttle.*, io.max).
    Io,
}

impl Controller {
    fn v1_name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Io => "blkio",
        }
    }
}

/// A process's cgroup of one controller, found on this machine.
#[derive(Debug, Clone)]
pub(crate) struct Cgroup {
    /// 1 or 2.
    pub version: u8,
    mount: CgroupMount,
    /// The group's path below the mount's root.
    relative: PathBuf,
}

impl Cgroup {
    /// The cgroup of the process whose /proc directory is `proc_dir`.
    pub fn of(proc_dir: &Path, controller: Controller) -> Option<Cgroup> {
        let (version, path) = own_cgroup(&std::fs::read_to_string(proc_dir.join("cgroup")).ok()?, controller)?;
        let mount = locate_mount(controller, version)?;
        let relative = path.strip_prefix(mount.root.trim_end_matches('/')).unwrap_or(&path);
        let relative = PathBuf::from(relative.trim_start_matches('/'));
        Some(Cgroup { version, mount, relative })
    }

    /// The group and each ancestor up to the hierarchy's root, innermost
    /// first, as (path as the hierarchy names it, directory to read).
    pub fn up_to_root(&self) -> Vec<(String, PathBuf)> {
        let mut rel = self.relative.clone();
        let mut chain = Vec::new();
        loop {
            chain.push((format!("/{}", rel.display()), self.mount.dir.join(&rel)));
            if !rel.pop() {
                return chain;
            }
        }
    }
}

fn parent_of(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A cgroup mount: (mount root within the hierarchy, where it is reachable).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CgroupMount {
    root: String,
    dir: PathBuf,
}

/// The controller's hierarchy's mount in `mountinfo`: v1 `cgroup` with the
/// controller's option, or `cgroup2`; `prefix` is prepended to the mount point.
fn find_mount(mountinfo: &str, controller: Controller, version: u8, prefix: &Path) -> Option<CgroupMount> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let l: Vec<&str> = left.split_whitespace().collect();
        let r: Vec<&str> = right.split_whitespace().collect();
        let (root, mountpoint) = (*l.get(3)?, *l.get(4)?);
        let (fstype, options) = (*r.first()?, r.get(2).copied().unwrap_or(""));
        let matches = match version {
            1 => fstype == "cgroup" && options.split(',').any(|o| o == controller.v1_name()),
            _ => fstype == "cgroup2",
        };
        matches.then(|| CgroupMount { root: root.to_string(), dir: prefix.join(mountpoint.trim_start_matches('/')) })
    })
}

/// The mount of the controller's hierarchy: this process's, else its
/// nearest ancestor's, else kthreadd's or any process's.
fn locate_mount(controller: Controller, version: u8) -> Option<CgroupMount> {
    // Found once per process: the fallbacks read every process's mountinfo,
    // and the serving watch asks five times a second.
    type Found = Vec<((Controller, u8), Option<CgroupMount>)>;
    static FOUND: std::sync::Mutex<Found> = std::sync::Mutex::new(Vec::new());
    let mut found = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, m)) = found.iter().find(|(k, _)| *k == (controller, version)) {
        return m.clone();
    }
    let m = search_mount(controller, version);
    found.push(((controller, version), m.clone()));
    m
}

fn search_mount(controller: Controller, version: u8) -> Option<CgroupMount> {
    if let Some(m) = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|t| find_mount(&t, controller, version, Path::new("/")))
    {
        return Some(m);
    }
    let mut pid = parent_of(std::process::id());
    for _ in 0..16 {
        let Some(p) = pid.filter(|p| *p > 0) else { break };
        if let Some(m) = mount_seen_by(p, controller, version) {
            return Some(m);
        }
        pid = parent_of(p);
    }
    // Re-parented to PID 1 (whose root may be closed even to root): the
    // machine's own mounts are kthreadd's (PID 2), else any process's.
    let others = std::fs::read_dir("/proc").ok()?.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    std::iter::once(2).chain(others).find_map(|p| mount_seen_by(p, controller, version))
}

/// The hierarchy's mount as process `pid` sees it, reachable through its root.
fn mount_seen_by(pid: u32, controller: Controller, version: u8) -> Option<CgroupMount> {
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .ok()
        .and_then(|t| find_mount(&t, controller, version, &root))
        .filter(|m| m.dir.is_dir())
}

/// A process's cgroup (version, path) of `controller` from its
/// /proc/PID/cgroup: a v1 hierarchy with the controller, else the v2 unified one.
fn own_cgroup(text: &str, controller: Controller) -> Option<(u8, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        if controllers.split(',').any(|c| c == controller.v1_name()) {
            return Some((1, path.to_string()));
        }
        if controllers.is_empty() {
            v2 = Some((2, path.to_string()));
        }
    }
    v2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_lines_and_mounts() {
        let v1 = "9:name=systemd:/\n3:blkio:/hr-blkio-2\n2:cpuacct:/\n1:cpu:/hr-cpu-1\n0::/\n";
        assert_eq!(own_cgroup(v1, Controller::Cpu), Some((1, "/hr-cpu-1".into())));
        assert_eq!(own_cgroup(v1, Controller::Io), Some((1, "/hr-blkio-2".into())));
        assert_eq!(own_cgroup("0::/user.slice/a.scope\n", Controller::Cpu), Some((2, "/user.slice/a.scope".into())));
        let mi = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                  33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
                  34 31 0:31 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n\
                  40 31 0:40 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let m = find_mount(mi, Controller::Cpu, 1, Path::new("/proc/7/root")).unwrap();
        assert_eq!(m.dir, PathBuf::from("/proc/7/root/sys/fs/cgroup/cpu"));
        let m = find_mount(mi, Controller::Io, 1, Path::new("/")).unwrap();
        assert_eq!(m.dir, PathBuf::from("/sys/fs/cgroup/blkio"));
        assert_eq!(
            find_mount(mi, Controller::Cpu, 2, Path::new("/")).unwrap().dir,
            PathBuf::from("/sys/fs/cgroup/unified")
        );
    }

    #[test]
    fn the_chain_runs_from_the_group_to_the_root() {
        let group = Cgroup {
            version: 1,
            mount: CgroupMount { root: "/".into(), dir: PathBuf::from("/sys/fs/cgroup/cpu") },
            relative: PathBuf::from("a/b"),
        };
        let paths: Vec<String> = group.up_to_root().into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, ["/a/b", "/a", "/"]);
    }
}
