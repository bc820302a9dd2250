//! The Windows implementation of headroom-cpu's platform seam (see `mod.rs`):
//! process and thread affinity masks and the thread's CPU times. System
//! calls only; which CPUs to use is measure.rs's.

use windows_sys::Win32::Foundation::FILETIME;
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetCurrentThread, GetProcessAffinityMask, GetThreadTimes, SetThreadAffinityMask,
};

/// Empty: the cache sizes are not read on Windows yet.
pub(crate) fn cache_sizes() -> Vec<String> {
    Vec::new()
}

/// CPU time (kernel + user) the calling thread has used.
pub(crate) fn thread_cpu_time() -> std::time::Duration {
    let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: the pseudo-handle of the calling thread, four valid FILETIMEs.
    if unsafe { GetThreadTimes(GetCurrentThread(), &mut created, &mut exited, &mut kernel, &mut user) } == 0 {
        return std::time::Duration::ZERO;
    }
    let hundred_ns = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    std::time::Duration::from_nanos((hundred_ns(kernel) + hundred_ns(user)) * 100)
}

/// The CPUs this process may run on (its affinity mask; the first 64 CPUs,
/// the processor group Windows starts a process in).
pub(crate) fn allowed_cpus() -> Vec<usize> {
    let (mut process, mut system) = (0usize, 0usize);
    // SAFETY: the pseudo-handle of this process, two valid masks.
    if unsafe { GetProcessAffinityMask(GetCurrentProcess(), &mut process, &mut system) } == 0 {
        return Vec::new();
    }
    (0..usize::BITS as usize).filter(|i| process & (1 << i) != 0).collect()
}

/// Pins the calling thread to one CPU, so a worker neither migrates mid-run
/// nor shares a core with another worker. Best effort: a refusal leaves the
/// thread where the scheduler put it.
pub(crate) fn pin_to(cpu: usize) {
    if cpu < usize::BITS as usize {
        // SAFETY: the pseudo-handle of the calling thread and a one-CPU mask.
        unsafe { SetThreadAffinityMask(GetCurrentThread(), 1 << cpu) };
    }
}
