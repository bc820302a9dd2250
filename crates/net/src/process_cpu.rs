//! CPU time of this process over a test (getrusage), the figure that shows a
//! NAS whose CPU, not its link, is the bottleneck; with it, the per-core,
//! per-thread and cgroup figures of [`headroom_sys::CpuSnapshot`] that show
//! *which* CPU limit it met (a quota, one saturated core, softirq, steal).

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// CPU used over a wall-clock interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    /// User-mode CPU, seconds.
    pub user_s: f64,
    /// Kernel-mode CPU, seconds.
    pub system_s: f64,
    /// Wall-clock time over which it was measured, seconds.
    pub wall_s: f64,
}

impl CpuUse {
    /// User plus system time as a percentage of one core (iperf3's convention).
    pub fn percent_total(&self) -> f64 {
        if self.wall_s > 0.0 {
            (self.user_s + self.system_s) / self.wall_s * 100.0
        } else {
            0.0
        }
    }
    /// User time as a percentage of one core.
    pub fn percent_user(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.user_s / self.wall_s * 100.0
        } else {
            0.0
        }
    }
    /// System time as a percentage of one core.
    pub fn percent_system(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.system_s / self.wall_s * 100.0
        } else {
            0.0
        }
    }
}

/// A starting point; [`CpuMeter::stop`] gives the use since.
pub struct CpuMeter {
    start: Instant,
    user: Duration,
    system: Duration,
    counters: Option<headroom_sys::CpuSnapshot>,
}

impl CpuMeter {
    pub fn start() -> Self {
        let (user, system) = crate::os::process_times();
        CpuMeter { start: Instant::now(), user, system, counters: headroom_sys::CpuSnapshot::take() }
    }

    /// Per core, per thread and cgroup figures since the start. Call it while
    /// the test's threads still live: a thread that ended is in the process
    /// total only.
    pub fn load(&self) -> Option<headroom_result::CpuLoad> {
        let before = self.counters.as_ref()?;
        Some(headroom_sys::CpuSnapshot::take()?.load_since(before))
    }

    pub fn stop(&self) -> CpuUse {
        let (user, system) = crate::os::process_times();
        CpuUse {
            user_s: user.saturating_sub(self.user).as_secs_f64(),
            system_s: system.saturating_sub(self.system).as_secs_f64(),
            wall_s: self.start.elapsed().as_secs_f64(),
        }
    }
}
