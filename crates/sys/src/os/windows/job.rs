//! The CPU rate limit of the job object this process is in, Windows' place
//! for what a cgroup's CFS quota is on Linux: QueryInformationJobObject with
//! a NULL handle (the calling process's job) and
//! JobObjectCpuRateControlInformation.
//!
//! Windows counts the rate in 1/100 % of all the machine's processors per
//! scheduling interval, and publishes neither the interval nor how often it
//! held the job back; so the limit is recorded as a [`CgroupCpu`] of
//! version 0 whose quota_us/period_us is the rate in cores (CpuRate ×
//! logical CPUs / 10 000, period_us 10 000), with no periods counted.

use headroom_result::CgroupCpu;
use windows_sys::Win32::System::JobObjects::{
    JobObjectCpuRateControlInformation, QueryInformationJobObject, JOBOBJECT_CPU_RATE_CONTROL_INFORMATION,
    JOB_OBJECT_CPU_RATE_CONTROL_ENABLE, JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP, JOB_OBJECT_CPU_RATE_CONTROL_MIN_MAX_RATE,
    JOB_OBJECT_CPU_RATE_CONTROL_WEIGHT_BASED,
};
use windows_sys::Win32::System::Threading::{GetActiveProcessorCount, ALL_PROCESSOR_GROUPS};

/// CpuRate's unit: 1/100 of a percent of all processors.
const RATE_OF_ALL: u64 = 10_000;

/// A job's CPU rate limit, as [`super::cpu_load`] and the serving watch
/// carry a Linux cgroup's counters.
#[derive(Debug, Clone)]
pub(crate) struct CgroupCounters {
    /// What names the limit: "job object (CpuRate 2500, hard cap)".
    pub(crate) path: String,
    limit: CgroupCpu,
}

impl CgroupCounters {
    /// The limit; Windows counts no throttled intervals, so none are given.
    pub(crate) fn since(&self, _earlier: Option<&CgroupCounters>) -> CgroupCpu {
        self.limit.clone()
    }
}

/// The CPU rate limit of this process's job; None outside a job, without
/// rate control, or with a weight (a share among jobs, not a ceiling).
pub(crate) fn own_job_limit() -> Option<CgroupCounters> {
    let mut info = JOBOBJECT_CPU_RATE_CONTROL_INFORMATION::default();
    // SAFETY: a NULL job handle asks about the caller's job; the buffer and
    // its length describe `info`.
    let ok = unsafe {
        QueryInformationJobObject(
            std::ptr::null_mut(),
            JobObjectCpuRateControlInformation,
            (&mut info as *mut JOBOBJECT_CPU_RATE_CONTROL_INFORMATION).cast(),
            std::mem::size_of_val(&info) as u32,
            std::ptr::null_mut(),
        )
    } != 0;
    // SAFETY: no arguments.
    let cpus = unsafe { GetActiveProcessorCount(ALL_PROCESSOR_GROUPS) };
    // SAFETY: CpuRate, Weight and MinRate/MaxRate share one u32; which it
    // holds is what ControlFlags says, and cpu_rate_limit reads it so.
    let word = unsafe { info.Anonymous.CpuRate };
    ok.then(|| cpu_rate_limit(info.ControlFlags, word, cpus)).flatten()
}

/// The limit JobObjectCpuRateControlInformation's `flags` and its union's
/// `word` set on a machine of `cpus` logical CPUs.
fn cpu_rate_limit(flags: u32, word: u32, cpus: u32) -> Option<CgroupCounters> {
    if flags & JOB_OBJECT_CPU_RATE_CONTROL_ENABLE == 0 || flags & JOB_OBJECT_CPU_RATE_CONTROL_WEIGHT_BASED != 0 {
        return None;
    }
    let (rate, path) = if flags & JOB_OBJECT_CPU_RATE_CONTROL_MIN_MAX_RATE != 0 {
        // MinRate is the low half, MaxRate the high one; MaxRate is a hard cap.
        let max = word >> 16;
        (max, format!("job object (MaxRate {max}, hard cap)"))
    } else if flags & JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP != 0 {
        (word, format!("job object (CpuRate {word}, hard cap)"))
    } else {
        // Without the hard cap the job may run past its rate while processors idle.
        (word, format!("job object (CpuRate {word}, soft cap)"))
    };
    if rate == 0 || u64::from(rate) > RATE_OF_ALL || cpus == 0 {
        return None;
    }
    let limit = CgroupCpu {
        version: 0,
        path: path.clone(),
        quota_us: u64::from(rate) * u64::from(cpus),
        period_us: RATE_OF_ALL,
        ..CgroupCpu::default()
    };
    Some(CgroupCounters { path, limit })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_a_share_of_all_cpus_in_cores() {
        // 25% of 8 CPUs: two cores, hard.
        let hard = cpu_rate_limit(1 | 4, 2500, 8).unwrap();
        assert_eq!(hard.path, "job object (CpuRate 2500, hard cap)");
        assert_eq!(hard.since(None).quota_cores(), 2.0);
        assert_eq!(hard.since(None).periods, 0, "Windows counts no throttled intervals");
        // Without the hard-cap flag it is soft.
        assert_eq!(cpu_rate_limit(1, 500, 4).unwrap().path, "job object (CpuRate 500, soft cap)");
        // MaxRate 50% of 2 CPUs (MinRate 10% below it): one core.
        let min_max = cpu_rate_limit(1 | 16, (5000 << 16) | 1000, 2).unwrap();
        assert_eq!(
            (min_max.path.as_str(), min_max.since(None).quota_cores()),
            ("job object (MaxRate 5000, hard cap)", 1.0)
        );
        // A weight caps nothing; nor does a disabled control or a rate out of range.
        assert!(cpu_rate_limit(1 | 2, 5, 8).is_none());
        assert!(cpu_rate_limit(4, 2500, 8).is_none());
        assert!(cpu_rate_limit(1, 0, 8).is_none());
        assert!(cpu_rate_limit(1, 10_001, 8).is_none());
    }
}
