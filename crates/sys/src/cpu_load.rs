//! CPU counters of this machine and this process, read twice around a test:
//! per-core time from /proc/stat (softirq and steal included), each thread's
//! time from /proc/self/task, and the CFS bandwidth limit of the process's
//! cgroup (v1 cpu.cfs_quota_us + cpu.stat, v2 cpu.max + cpu.stat).
//! [`CpuSnapshot::load_since`] turns two snapshots into a
//! [`headroom_result::CpuLoad`].
//!
//! The cgroup filesystem is looked up in this process's mounts, else in the
//! mounts of its nearest ancestor that has it (through /proc/PID/root), else
//! in kthreadd's or any process's: a process started by `ip netns exec` gets
//! a fresh /sys without the cgroup mounts, yet its cgroup still limits it,
//! and one whose parent exited is PID 1's child, whose root may be closed.

use headroom_result::{CgroupCpu, CoreLoad, CpuLoad, ProcessLoad, ThreadLoad};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Threads listed in a [`CpuLoad`], busiest first.
const THREADS_SHOWN: usize = 8;
/// Processes of the machine listed in a [`CpuLoad`], busiest first.
const PROCESSES_SHOWN: usize = 5;

/// The counters at one moment.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    at: Instant,
    /// Per core: (cpu number, [user, nice, system, idle, iowait, irq, softirq, steal]) in ticks.
    cores: Vec<(u32, [u64; 8])>,
    /// This process's user+system ticks (threads that ended included).
    process_ticks: u64,
    /// tid -> (name, user+system ticks).
    threads: BTreeMap<u32, (String, u64)>,
    /// Every process of the machine: pid -> (name, user+system ticks).
    processes: BTreeMap<u32, (String, u64)>,
    cgroup: Option<CgroupCounters>,
}

#[derive(Debug, Clone)]
pub(crate) struct CgroupCounters {
    version: u8,
    pub(crate) path: String,
    quota_us: u64,
    period_us: u64,
    periods: u64,
    throttled_periods: u64,
    throttled_ns: u64,
}

pub(crate) fn clock_ticks_per_sec() -> f64 {
    let t = rustix::param::clock_ticks_per_second();
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

impl CpuSnapshot {
    /// Reads the counters now; None when /proc/stat cannot be read (not Linux).
    pub fn take() -> Option<CpuSnapshot> {
        let at = Instant::now();
        let cores = parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?);
        let process_ticks =
            std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| stat_ticks(&s)).map_or(0, |(_, t)| t);
        let threads = ticks_under(Path::new("/proc/self/task"));
        let processes = ticks_under(Path::new("/proc"));
        let cgroup = cgroup_counters(Path::new("/proc/self"));
        Some(CpuSnapshot { at, cores, process_ticks, threads, processes, cgroup })
    }

    /// What happened between `earlier` and this snapshot.
    pub fn load_since(&self, earlier: &CpuSnapshot) -> CpuLoad {
        let wall = self.at.duration_since(earlier.at).as_secs_f64().max(1e-9);
        let hz = clock_ticks_per_sec();
        let per_core: Vec<CoreLoad> = self
            .cores
            .iter()
            .filter_map(|(cpu, now)| {
                let (_, then) = earlier.cores.iter().find(|(c, _)| c == cpu)?;
                let d: Vec<u64> = now.iter().zip(then).map(|(a, b)| a.saturating_sub(*b)).collect();
                let total: u64 = d.iter().sum();
                let pct = |x: u64| if total == 0 { 0.0 } else { x as f64 / total as f64 * 100.0 };
                let idle = d[3] + d[4];
                Some(CoreLoad {
                    cpu: *cpu,
                    busy_percent: pct(total - idle),
                    softirq_percent: pct(d[6]),
                    steal_percent: pct(d[7]),
                })
            })
            .collect();
        let mean = |f: fn(&CoreLoad) -> f64| {
            if per_core.is_empty() {
                0.0
            } else {
                per_core.iter().map(f).sum::<f64>() / per_core.len() as f64
            }
        };
        let percent_of_core = |ticks: u64| ticks as f64 / hz / wall * 100.0;
        let threads = busiest(&self.threads, &earlier.threads, THREADS_SHOWN)
            .map(|(tid, name, ticks)| ThreadLoad { name, tid, percent: percent_of_core(ticks) })
            .collect();
        let processes = busiest(&self.processes, &earlier.processes, PROCESSES_SHOWN)
            .map(|(pid, name, ticks)| ProcessLoad { name, pid, percent: percent_of_core(ticks) })
            .collect();
        let cgroup = self.cgroup.as_ref().map(|now| now.since(earlier.cgroup.as_ref()));
        CpuLoad {
            wall_s: wall,
            cores: self.cores.len() as u32,
            process_percent: self.process_ticks.saturating_sub(earlier.process_ticks) as f64 / hz / wall * 100.0,
            threads,
            steal_percent: mean(|c| c.steal_percent),
            softirq_percent: mean(|c| c.softirq_percent),
            per_core,
            cgroup,
            processes,
            serving: Vec::new(),
        }
    }
}

impl CgroupCounters {
    /// The group's limit and what it throttled since `earlier` (the same
    /// group's counters then); a group joined during the test has none.
    pub(crate) fn since(&self, earlier: Option<&CgroupCounters>) -> CgroupCpu {
        let then = earlier.filter(|t| t.path == self.path);
        let delta = |now: u64, then_of: fn(&CgroupCounters) -> u64| then.map_or(0, |t| now.saturating_sub(then_of(t)));
        CgroupCpu {
            version: self.version,
            path: self.path.clone(),
            quota_us: self.quota_us,
            period_us: self.period_us,
            periods: delta(self.periods, |t| t.periods),
            throttled_periods: delta(self.throttled_periods, |t| t.throttled_periods),
            throttled_s: delta(self.throttled_ns, |t| t.throttled_ns) as f64 / 1e9,
        }
    }
}

/// id -> (name, user+system ticks) of every `ID/stat` under `dir` (the
/// processes of /proc, the threads of /proc/self/task).
pub(crate) fn ticks_under(dir: &Path) -> BTreeMap<u32, (String, u64)> {
    let mut found = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let Some(id) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if let Some(named) = std::fs::read_to_string(entry.path().join("stat")).ok().and_then(|s| stat_ticks(&s)) {
            found.insert(id, named);
        }
    }
    found
}

/// The `shown` ids that used the most ticks between the two readings, busiest
/// first, as (id, name, ticks); one that started in between counts from zero.
pub(crate) fn busiest(
    now: &BTreeMap<u32, (String, u64)>,
    then: &BTreeMap<u32, (String, u64)>,
    shown: usize,
) -> impl Iterator<Item = (u32, String, u64)> {
    let mut used: Vec<(u32, String, u64)> = now
        .iter()
        .map(|(id, (name, ticks))| (*id, name.clone(), ticks.saturating_sub(then.get(id).map_or(0, |(_, t)| *t))))
        .filter(|(_, _, ticks)| *ticks > 0)
        .collect();
    used.sort_by_key(|u| std::cmp::Reverse(u.2));
    used.truncate(shown);
    used.into_iter()
}

/// The `cpuN` lines of /proc/stat.
fn parse_proc_stat(text: &str) -> Vec<(u32, [u64; 8])> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let mut v = [0u64; 8];
            for slot in v.iter_mut() {
                *slot = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            }
            Some((cpu, v))
        })
        .collect()
}

/// (comm, utime + stime) from a /proc/PID/stat or /proc/PID/task/TID/stat line.
pub(crate) fn stat_ticks(text: &str) -> Option<(String, u64)> {
    // comm may hold spaces and parentheses: it ends at the last ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After comm: state(0) ppid(1) ... utime(11) stime(12).
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

fn parent_of(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A cgroup mount: (mount root within the hierarchy, where it is reachable).
#[derive(Debug, Clone, PartialEq)]
struct CgroupMount {
    root: String,
    dir: PathBuf,
}

/// The cpu hierarchy's mount in `mountinfo`: v1 `cgroup` with the `cpu`
/// option, or `cgroup2`; `prefix` is prepended to the mount point.
fn find_mount(mountinfo: &str, version: u8, prefix: &Path) -> Option<CgroupMount> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let l: Vec<&str> = left.split_whitespace().collect();
        let r: Vec<&str> = right.split_whitespace().collect();
        let (root, mountpoint) = (*l.get(3)?, *l.get(4)?);
        let (fstype, options) = (*r.first()?, r.get(2).copied().unwrap_or(""));
        let matches = match version {
            1 => fstype == "cgroup" && options.split(',').any(|o| o == "cpu"),
            _ => fstype == "cgroup2",
        };
        matches.then(|| CgroupMount { root: root.to_string(), dir: prefix.join(mountpoint.trim_start_matches('/')) })
    })
}

/// The mount of the cpu hierarchy: this process's, else its nearest ancestor's.
fn locate_mount(version: u8) -> Option<CgroupMount> {
    if let Some(m) =
        std::fs::read_to_string("/proc/self/mountinfo").ok().and_then(|t| find_mount(&t, version, Path::new("/")))
    {
        return Some(m);
    }
    let mut pid = parent_of(std::process::id());
    for _ in 0..16 {
        let Some(p) = pid.filter(|p| *p > 0) else { break };
        if let Some(m) = mount_seen_by(p, version) {
            return Some(m);
        }
        pid = parent_of(p);
    }
    // Re-parented to PID 1 (whose root may be closed even to root): the
    // machine's own mounts are kthreadd's (PID 2), else any process's.
    let others = std::fs::read_dir("/proc").ok()?.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    std::iter::once(2).chain(others).find_map(|p| mount_seen_by(p, version))
}

/// The hierarchy's mount as process `pid` sees it, reachable through its root.
fn mount_seen_by(pid: u32, version: u8) -> Option<CgroupMount> {
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .ok()
        .and_then(|t| find_mount(&t, version, &root))
        .filter(|m| m.dir.is_dir())
}

/// The process's cpu cgroup (version, path) from /proc/self/cgroup: a v1
/// hierarchy with the cpu controller, else the v2 unified one.
fn own_cgroup(text: &str) -> Option<(u8, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        if controllers.split(',').any(|c| c == "cpu") {
            return Some((1, path.to_string()));
        }
        if controllers.is_empty() {
            v2 = Some((2, path.to_string()));
        }
    }
    v2
}

fn read_trim(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// (quota_us, period_us) of one cgroup directory, None when unlimited.
fn quota_of(dir: &Path, version: u8) -> Option<(u64, u64)> {
    if version == 1 {
        let quota: i64 = read_trim(&dir.join("cpu.cfs_quota_us"))?.parse().ok()?;
        let period: u64 = read_trim(&dir.join("cpu.cfs_period_us"))?.parse().ok()?;
        (quota > 0 && period > 0).then_some((quota as u64, period))
    } else {
        let text = read_trim(&dir.join("cpu.max"))?;
        let (quota, period) = text.split_once(' ')?;
        let quota: u64 = quota.parse().ok()?; // "max": no limit
        let period: u64 = period.parse().ok()?;
        (quota > 0 && period > 0).then_some((quota, period))
    }
}

/// nr_periods, nr_throttled and throttled time (ns) from cpu.stat.
fn throttle_counters(dir: &Path) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(dir.join("cpu.stat")).unwrap_or_default();
    let (mut periods, mut throttled, mut ns) = (0, 0, 0);
    for line in text.lines() {
        let Some((k, v)) = line.split_once(' ') else { continue };
        let v: u64 = v.trim().parse().unwrap_or(0);
        match k {
            "nr_periods" => periods = v,
            "nr_throttled" => throttled = v,
            "throttled_time" => ns = v,
            "throttled_usec" => ns = v * 1000,
            _ => {}
        }
    }
    (periods, throttled, ns)
}

/// The tightest limit between a process's cgroup (`proc_dir`: /proc/self,
/// /proc/PID) and its hierarchy's root.
pub(crate) fn cgroup_counters(proc_dir: &Path) -> Option<CgroupCounters> {
    let (version, path) = own_cgroup(&std::fs::read_to_string(proc_dir.join("cgroup")).ok()?)?;
    let mount = locate_mount(version)?;
    let relative = path.strip_prefix(mount.root.trim_end_matches('/')).unwrap_or(&path);
    let mut rel = PathBuf::from(relative.trim_start_matches('/'));
    let mut best: Option<(f64, PathBuf, u64, u64)> = None;
    loop {
        if let Some((quota, period)) = quota_of(&mount.dir.join(&rel), version) {
            let cores = quota as f64 / period as f64;
            if best.as_ref().is_none_or(|b| cores < b.0) {
                best = Some((cores, rel.clone(), quota, period));
            }
        }
        if !rel.pop() {
            break;
        }
    }
    let (_, rel, quota_us, period_us) = best?;
    let (periods, throttled_periods, throttled_ns) = throttle_counters(&mount.dir.join(&rel));
    Some(CgroupCounters {
        version,
        path: format!("/{}", rel.display()),
        quota_us,
        period_us,
        periods,
        throttled_periods,
        throttled_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_process_of_the_machine_is_named() {
        // `yes` spins on one core: another process than this one, as a NAS's smbd is.
        let mut spinner = std::process::Command::new("yes")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("yes (coreutils) runs");
        let before = CpuSnapshot::take().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(600));
        let load = CpuSnapshot::take().unwrap().load_since(&before);
        let _ = spinner.kill();
        let _ = spinner.wait();
        let yes = load.processes.iter().find(|p| p.pid == spinner.id());
        assert!(yes.is_some_and(|p| p.name == "yes" && p.percent > 0.0), "{:?}", load.processes);
        assert!(load.processes.windows(2).all(|w| w[0].percent >= w[1].percent), "busiest first");
    }

    #[test]
    fn proc_stat_and_task_stat_parse() {
        let stat = "cpu  10 0 5 100 0 0 0 0 0 0\ncpu0 4 0 2 50 0 0 1 3 0 0\ncpu1 6 0 3 50 0 0 0 0 0 0\nintr 1 2\n";
        let cores = parse_proc_stat(stat);
        assert_eq!(cores.len(), 2, "the aggregate line is not a core");
        assert_eq!(cores[0], (0, [4, 0, 2, 50, 0, 0, 1, 3]));
        let task = "1234 (hr tx (0)) R 1 2 3 4 5 6 7 8 9 10 250 40 0 0 20 0 3 0";
        assert_eq!(stat_ticks(task), Some(("hr tx (0)".into(), 290)));
    }

    #[test]
    fn cgroup_lines_and_mounts() {
        let v1 = "9:name=systemd:/\n2:cpuacct:/\n1:cpu:/hr-cpu-1\n0::/\n";
        assert_eq!(own_cgroup(v1), Some((1, "/hr-cpu-1".into())));
        assert_eq!(own_cgroup("0::/user.slice/a.scope\n"), Some((2, "/user.slice/a.scope".into())));
        let mi = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                  33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
                  40 31 0:40 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let m = find_mount(mi, 1, Path::new("/proc/7/root")).unwrap();
        assert_eq!(m.dir, PathBuf::from("/proc/7/root/sys/fs/cgroup/cpu"));
        assert_eq!(find_mount(mi, 2, Path::new("/")).unwrap().dir, PathBuf::from("/sys/fs/cgroup/unified"));
    }
}
