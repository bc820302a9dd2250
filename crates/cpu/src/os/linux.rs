//! The Linux implementation of headroom-cpu's platform seam (see `mod.rs`):
//! sched_{get,set}affinity, the thread CPU clock and the cache sizes sysfs
//! lists. System calls only; which CPUs to use is measure.rs's.

/// The `size` attribute of each cache sysfs lists for CPU 0 ("32768K").
pub(crate) fn cache_sizes() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache") else { return Vec::new() };
    dir.flatten().filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok()).collect()
}

/// CPU time the calling thread has used.
pub(crate) fn thread_cpu_time() -> std::time::Duration {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).map(std::time::Duration::from).unwrap_or_default()
}

/// The CPUs this process may run on.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    use nix::sched::{sched_getaffinity, CpuSet};
    use nix::unistd::Pid;
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count()).filter(|i| set.is_set(*i).unwrap_or(false)).collect(),
        Err(_) => Vec::new(),
    }
}

/// Pins the calling thread to one CPU, so a worker neither migrates mid-run
/// nor shares a core with another worker. Best effort: a refusal (a
/// container's cpuset) leaves the thread where the scheduler put it.
pub(crate) fn pin_to(cpu: usize) {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = sched_setaffinity(Pid::from_raw(0), &set);
    }
}
