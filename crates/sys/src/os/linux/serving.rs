//! What the serving-process watch (crate::serving) reads of Linux: the
//! processes holding a TCP socket on a port (through /proc/net/tcp{,6} and
//! each process's open descriptors), those with a name (comm), a process's
//! and its threads' CPU ticks, its allowed CPUs and its cgroup's counters.
//!
//! Reads /proc only; sockets are looked up in this process's network
//! namespace, where the client's connections arrive.

use super::cpu_load::{cgroup_counters, stat_ticks, CgroupCounters};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub(crate) use super::cpu_load::clock_ticks_per_sec as ticks_per_sec;

/// The processes holding a TCP socket whose local port is `port`.
pub(crate) fn pids_on_port(port: u16) -> Vec<u32> {
    pids_holding(Path::new("/proc"), &socket_inodes_on_port(port))
}

/// Inodes of this namespace's TCP sockets whose local port is `port`.
fn socket_inodes_on_port(port: u16) -> BTreeSet<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|text| inodes_on_port(&text, port))
        .collect()
}

/// The inode column of the /proc/net/tcp lines whose local port is `port`.
fn inodes_on_port(text: &str, port: u16) -> Vec<u64> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit_once(':')?.1;
            let inode: u64 = f.get(9)?.parse().ok()?;
            (u16::from_str_radix(local_port, 16).ok()? == port && inode != 0).then_some(inode)
        })
        .collect()
}

/// Processes with a descriptor on one of the sockets `inodes`.
fn pids_holding(proc_root: &Path, inodes: &BTreeSet<u64>) -> Vec<u32> {
    if inodes.is_empty() {
        return Vec::new();
    }
    pids(proc_root)
        .filter(|pid| {
            let Ok(fds) = std::fs::read_dir(proc_root.join(pid.to_string()).join("fd")) else { return false };
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .ok()
                    .and_then(|l| socket_inode(&l.to_string_lossy()))
                    .is_some_and(|i| inodes.contains(&i))
            })
        })
        .collect()
}

/// `socket:[12345]` -> 12345.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// Processes whose name (comm) is one of `names`.
pub(crate) fn pids_named(names: &[String]) -> Vec<u32> {
    let proc_root = Path::new("/proc");
    pids(proc_root)
        .filter(|pid| {
            std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm"))
                .is_ok_and(|comm| names.iter().any(|n| n == comm.trim()))
        })
        .collect()
}

fn pids(proc_root: &Path) -> impl Iterator<Item = u32> {
    let mut found: Vec<u32> = std::fs::read_dir(proc_root)
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())).collect())
        .unwrap_or_default();
    found.sort_unstable();
    found.into_iter()
}

/// How many CPUs a process may run on (`Cpus_allowed_list` of its status).
pub(crate) fn cpus_allowed(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    count_cpu_list(list.trim())
}

/// `0-3,6` -> 5.
fn count_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => b.parse::<u32>().ok()?.checked_sub(a.parse().ok()?)? + 1,
            None => {
                part.parse::<u32>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// tid -> (name, user+system ticks) of one process's threads.
pub(crate) fn thread_ticks(pid: u32) -> BTreeMap<u32, (String, u64)> {
    super::cpu_load::ticks_under(&Path::new("/proc").join(pid.to_string()).join("task"))
}

/// tid -> nanoseconds each thread of a process waited on a run queue, ready
/// to run while other work held the CPU (the second field of
/// /proc/PID/task/TID/schedstat). Empty on a kernel built without schedstats.
pub(crate) fn thread_waits(pid: u32) -> BTreeMap<u32, u64> {
    super::cpu_load::read_each_under(&Path::new("/proc").join(pid.to_string()).join("task"), "schedstat", run_delay_ns)
}

/// The run delay of a schedstat line: "on-CPU ns, waiting ns, timeslices".
fn run_delay_ns(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(1)?.parse().ok()
}

/// (comm, user+system ticks) of a process; None when it is gone or unreadable.
pub(crate) fn process_ticks(pid: u32) -> Option<(String, u64)> {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|s| stat_ticks(&s))
}

/// The counters of the tightest CPU quota on the process's cgroup.
pub(crate) fn limit_counters(pid: u32) -> Option<CgroupCounters> {
    cgroup_counters(&Path::new("/proc").join(pid.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedstat_line_gives_its_run_delay() {
        assert_eq!(run_delay_ns("1006312 4242 17\n"), Some(4242));
        assert_eq!(run_delay_ns("1006312"), None);
        // This thread has a schedstat of its own (the kernel counts them here).
        assert!(thread_waits(std::process::id()).contains_key(&std::process::id()));
    }

    #[test]
    fn two_threads_on_one_cpu_each_wait_while_the_other_runs() {
        use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
        use nix::unistd::{gettid, Pid};
        let allowed = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cpu = (0..CpuSet::count()).find(|&c| allowed.is_set(c).unwrap_or(false)).unwrap();
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let spinner = |start: std::sync::Arc<std::sync::Barrier>| {
            move || {
                let mut one = CpuSet::new();
                one.set(cpu).unwrap();
                sched_setaffinity(Pid::from_raw(0), &one).unwrap();
                start.wait();
                let until = std::time::Instant::now() + std::time::Duration::from_millis(600);
                let mut x = 0u64;
                while std::time::Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                // Read before the thread ends: its task directory goes with it.
                let tid = gettid().as_raw() as u32;
                thread_waits(std::process::id()).get(&tid).copied()
            }
        };
        let a = std::thread::spawn(spinner(start.clone()));
        let b = std::thread::spawn(spinner(start));
        // Sharing one CPU for 600 ms, each ran about half of it and waited
        // the rest (more when other tests load the machine, never less).
        for waited in [a.join().unwrap(), b.join().unwrap()] {
            assert!(waited.is_some_and(|ns| ns >= 100_000_000), "waited {waited:?} ns");
        }
    }

    #[test]
    fn the_sockets_on_a_port_are_found_by_inode() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000:01BD 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000 100 0 0 10 0\n\
   1: 0100007F:01BD 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000 20 4 30 10 -1\n\
   2: 0100007F:D431 0100007F:01BD 01 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000 20 4 30 10 -1\n";
        // 0x01BD is 445: the listener and the accepted connection, not the client's end.
        assert_eq!(inodes_on_port(text, 445), vec![4242, 4343]);
        assert_eq!(socket_inode("socket:[4343]"), Some(4343));
        assert_eq!(socket_inode("/dev/null"), None);
    }

    #[test]
    fn cpu_lists_count() {
        assert_eq!(count_cpu_list("0-3,6"), Some(5));
        assert_eq!(count_cpu_list("2"), Some(1));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list(""), None);
    }
}
