//! How busy one end's CPU was during a network test: per core (with softirq
//! and steal), the measuring process's own threads, and the cgroup limit with
//! the periods it throttled. Net probes carry one per end in `details`
//! (`cpu_load_local`: this machine, `cpu_load_remote`: the server); an
//! absolute "12% CPU" hides one saturated core among eight, a quota or a
//! hypervisor taking the time, and these figures do not. A cpu probe's
//! memory-resident figure carries its [`Contention`]: the cores other
//! processes kept busy while it was measured.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// CPU time of one end over the wall-clock window of a test.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CpuLoad {
    /// Length of the window the percentages cover, seconds.
    pub wall_s: f64,
    /// Logical CPUs the machine schedules on.
    pub cores: u32,
    /// The process (all its threads, also those that ended), percent of one core.
    pub process_percent: f64,
    /// Its busiest threads, busiest first, each in percent of one core.
    #[serde(default)]
    pub threads: Vec<ThreadLoad>,
    /// Each core's time, whoever used it.
    #[serde(default)]
    pub per_core: Vec<CoreLoad>,
    /// Time the hypervisor gave to others, percent of all cores' time.
    #[serde(default)]
    pub steal_percent: f64,
    /// Time in softirq (network receive and transmit work), percent of all cores' time.
    #[serde(default)]
    pub softirq_percent: f64,
    /// The CPU limit of the process's cgroup, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupCpu>,
    /// The busiest processes of the whole machine over the window, busiest
    /// first (the one serving the data, e.g. `smbd`, `nfsd`, `tgtd`, shows here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessLoad>,
    /// The processes that served the share the client measured (found by the
    /// share's port, else by a file-server daemon's name), busiest first:
    /// each with its busiest thread, the CPUs it may use and its own cgroup
    /// limit, which the measuring process's figures above do not show.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serving: Vec<ServingLoad>,
}

/// A process that served the client's share during the window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ServingLoad {
    /// The process's name (comm): `smbd`, `ganesha.nfsd`, `tgtd`, `nbdkit`, `nfsd`.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// How it was found: `port 445` (it held a socket on the share's port) or `name`.
    pub found_by: String,
    /// All its threads, percent of one core.
    pub percent: f64,
    /// Its busiest thread (a single-threaded daemon at a full core shows here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_thread: Option<ThreadLoad>,
    /// Threads it has.
    pub threads: u32,
    /// CPUs it may run on (its CPU affinity / cpuset), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_allowed: Option<u32>,
    /// The CPU limit of its cgroup, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupCpu>,
}

/// One process of the machine, any owner.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ProcessLoad {
    /// The process's name (comm), e.g. `smbd`; kernel threads too (`nfsd`).
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// Percent of one core (all its threads).
    pub percent: f64,
}

/// One thread of the measuring process.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ThreadLoad {
    /// The thread's name (comm), e.g. `headroom`, `hr-tx-0`.
    pub name: String,
    /// Thread id (Linux TID).
    pub tid: u32,
    /// Percent of one core.
    pub percent: f64,
    /// Time it was ready to run but waited for a CPU that other work held,
    /// percent of the window (Linux schedstat's run delay); absent where the
    /// kernel does not count it. A thread at 50% that waited 45% wanted a
    /// whole core and shared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_percent: Option<f64>,
}

/// One logical CPU, in percent of its time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CoreLoad {
    /// Logical CPU number as the kernel counts it (`cpu3` in /proc/stat is 3).
    pub cpu: u32,
    /// Everything but idle and iowait (user, nice, system, irq, softirq, steal).
    pub busy_percent: f64,
    /// Time in softirq, percent of this core's time.
    pub softirq_percent: f64,
    /// Time taken by the hypervisor for others, percent of this core's time.
    pub steal_percent: f64,
}

/// The block I/O limit of the measuring process's cgroup (or an ancestor)
/// on the tested device: a ceiling the disk figure cannot pass.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct IoLimit {
    /// 1 (blkio.throttle.*) or 2 (io.max).
    pub version: u8,
    /// The cgroup that sets the limit, relative to its hierarchy's root.
    pub cgroup: String,
    /// The device the limit names, "MAJOR:MINOR".
    pub device: String,
    /// Read bytes per second allowed, when limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes_per_sec: Option<u64>,
    /// Write bytes per second allowed, when limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes_per_sec: Option<u64>,
    /// Read operations per second allowed, when limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_iops: Option<u64>,
    /// Write operations per second allowed, when limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_iops: Option<u64>,
}

impl IoLimit {
    /// Each limit the tighter of the two; the group and device named are
    /// those of the tighter byte rate.
    pub fn tightest(self, other: IoLimit) -> IoLimit {
        let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        let bytes =
            |l: &IoLimit| l.read_bytes_per_sec.into_iter().chain(l.write_bytes_per_sec).min().unwrap_or(u64::MAX);
        let (named, rest) = if bytes(&other) < bytes(&self) { (other, self) } else { (self, other) };
        IoLimit {
            read_bytes_per_sec: min(named.read_bytes_per_sec, rest.read_bytes_per_sec),
            write_bytes_per_sec: min(named.write_bytes_per_sec, rest.write_bytes_per_sec),
            read_iops: min(named.read_iops, rest.read_iops),
            write_iops: min(named.write_iops, rest.write_iops),
            ..named
        }
    }

    /// The byte rate allowed in one direction (`read` or `write`).
    pub fn bytes_per_sec(&self, read: bool) -> Option<u64> {
        if read {
            self.read_bytes_per_sec
        } else {
            self.write_bytes_per_sec
        }
    }

    /// Where the limit is set, as its file names it.
    pub fn setting(&self, read: bool) -> String {
        match (self.version, read) {
            (1, true) => format!("blkio.throttle.read_bps_device {}", self.device),
            (1, false) => format!("blkio.throttle.write_bps_device {}", self.device),
            (_, true) => format!("io.max {} rbps", self.device),
            (_, false) => format!("io.max {} wbps", self.device),
        }
    }
}

/// The tightest CFS bandwidth limit on the process's cgroup or its ancestors
/// (on Windows: the CPU rate limit of its job object).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CgroupCpu {
    /// 1 (cpu.cfs_quota_us, cpu.cfs_period_us) or 2 (cpu.max); 0 for a
    /// Windows job object's CPU rate (JobObjectCpuRateControlInformation):
    /// `path` names it, quota_us/period_us is the rate in cores and Windows
    /// counts no periods.
    pub version: u8,
    /// The cgroup that holds the limit, relative to its hierarchy's root.
    pub path: String,
    /// Runtime allowed per period, microseconds.
    pub quota_us: u64,
    /// Length of one enforcement period, microseconds.
    pub period_us: u64,
    /// Enforcement periods that elapsed during the test (cpu.stat nr_periods).
    pub periods: u64,
    /// Periods in which the group used its quota and was stopped (nr_throttled).
    pub throttled_periods: u64,
    /// Time the group spent stopped, seconds (throttled_time / throttled_usec).
    pub throttled_s: f64,
}

impl CgroupCpu {
    /// The quota in cores (0.02 = 2% of one core).
    pub fn quota_cores(&self) -> f64 {
        if self.period_us == 0 {
            0.0
        } else {
            self.quota_us as f64 / self.period_us as f64
        }
    }
    /// Share of the periods that were throttled (0..1).
    pub fn throttled_share(&self) -> f64 {
        if self.periods == 0 {
            0.0
        } else {
            (self.throttled_periods as f64 / self.periods as f64).min(1.0)
        }
    }
}

impl CpuLoad {
    /// The busiest thread of the process.
    pub fn busiest_thread(&self) -> Option<&ThreadLoad> {
        self.threads.iter().max_by(|a, b| a.percent.total_cmp(&b.percent))
    }
    /// The busiest core.
    pub fn busiest_core(&self) -> Option<&CoreLoad> {
        self.per_core.iter().max_by(|a, b| a.busy_percent.total_cmp(&b.busy_percent))
    }
    /// Busy time of all cores, percent of all cores' time.
    pub fn machine_busy_percent(&self) -> f64 {
        if self.per_core.is_empty() {
            0.0
        } else {
            self.per_core.iter().map(|c| c.busy_percent).sum::<f64>() / self.per_core.len() as f64
        }
    }
}

/// Other processes kept more than this many cores busy on average during a
/// memory-resident figure: the figure is marked. Half a core is a streaming
/// process running half the time, and one core streaming memory can draw
/// most of a desktop's or a small VM's DRAM bandwidth; an idle machine's
/// daemons and kernel threads, and the 10 ms tick resolution of /proc/stat
/// over a 100 ms figure (about 0.1 core per core read), stay well below it.
pub const OTHERS_BUSY_CORES: f64 = 0.5;

/// Below this window the counters hold too few clock ticks (10 per core at
/// 100 Hz) for the cores busy with other work to mean anything: no mark.
pub const MIN_CONTENTION_WINDOW_S: f64 = 0.1;

/// Busiest other processes kept in a [`Contention`].
const OTHERS_SHOWN: usize = 3;

/// What other processes did with the machine while one memory-resident
/// figure was measured: they share the memory bandwidth its workers stream
/// through, without taking the workers' CPU (so `cpu_share` stays 1.0).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Contention {
    /// Cores kept busy by everything but the measuring process, averaged
    /// over the window: the machine's busy cores (user, system, irq, softirq;
    /// steal left out) less the process's own CPU time, never below 0.
    pub other_busy_cores: f64,
    /// The window the figure covers (set-up, warm-up and measured time), seconds.
    pub window_s: f64,
    /// The busiest other processes over the window, busiest first (at most three).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busiest: Vec<ProcessLoad>,
}

impl Contention {
    /// Other work during `load`, the measuring process being `own_pid`.
    pub fn of(load: &CpuLoad, own_pid: u32) -> Contention {
        let machine: f64 = load.per_core.iter().map(|c| c.busy_percent - c.steal_percent).sum::<f64>() / 100.0;
        let own = load.process_percent / 100.0;
        Contention {
            other_busy_cores: (machine - own).max(0.0),
            window_s: load.wall_s,
            busiest: load.processes.iter().filter(|p| p.pid != own_pid).take(OTHERS_SHOWN).cloned().collect(),
        }
    }

    /// Whether the figure is marked: more than [`OTHERS_BUSY_CORES`] over a
    /// window long enough to tell.
    pub fn shares_memory(&self) -> bool {
        self.window_s >= MIN_CONTENTION_WINDOW_S && self.other_busy_cores > OTHERS_BUSY_CORES
    }

    /// "measured while other processes kept 1.0 cores busy (busiest: dd 98%
    /// of a core): memory bandwidth is shared; rerun on a quiet machine".
    pub fn sentence(&self) -> String {
        let busiest = match self.busiest.first() {
            Some(p) => format!(" (busiest: {} {:.0}% of a core)", p.name, p.percent),
            None => String::new(),
        };
        format!(
            "measured while other processes kept {:.1} cores busy{busiest}: memory bandwidth is shared; \
             rerun on a quiet machine",
            self.other_busy_cores
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two cores: the measuring process (pid 10) on one, dd (pid 20) and the hypervisor's steal on the other.
    fn load(others_percent: f64, steal_percent: f64, wall_s: f64) -> CpuLoad {
        let core = |cpu, busy, steal_percent| CoreLoad { cpu, busy_percent: busy, softirq_percent: 0.0, steal_percent };
        CpuLoad {
            wall_s,
            cores: 2,
            process_percent: 100.0,
            per_core: vec![core(0, 100.0, 0.0), core(1, others_percent + steal_percent, steal_percent)],
            processes: vec![
                ProcessLoad { name: "headroom".into(), pid: 10, percent: 100.0 },
                ProcessLoad { name: "dd".into(), pid: 20, percent: others_percent },
            ],
            ..CpuLoad::default()
        }
    }

    #[test]
    fn others_are_the_machine_less_the_process_and_steal() {
        let c = Contention::of(&load(80.0, 0.0, 0.6), 10);
        assert!((c.other_busy_cores - 0.8).abs() < 1e-9, "{c:?}");
        assert_eq!(c.busiest.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![20], "the process itself is not 'other'");
        assert!(c.shares_memory());
        assert_eq!(
            c.sentence(),
            "measured while other processes kept 0.8 cores busy (busiest: dd 80% of a core): \
             memory bandwidth is shared; rerun on a quiet machine"
        );
        // A hypervisor's steal is not a process of this machine.
        let stolen = Contention::of(&load(10.0, 30.0, 0.6), 10);
        assert!((stolen.other_busy_cores - 0.1).abs() < 1e-9 && !stolen.shares_memory(), "{stolen:?}");
        // Half a core is not more than half a core; a window of a few ticks tells nothing.
        assert!(!Contention::of(&load(50.0, 0.0, 0.6), 10).shares_memory());
        assert!(!Contention::of(&load(100.0, 0.0, 0.05), 10).shares_memory());
        // Tick rounding can put the process above the machine: never below zero.
        let mut idle = load(0.0, 0.0, 0.6);
        idle.process_percent = 110.0;
        assert_eq!(Contention::of(&idle, 10).other_busy_cores, 0.0);
    }
}
