//! CPU counters of this machine and this process on Windows, read twice
//! around a test, as Linux's /proc gives them:
//! - per processor: `NtQuerySystemInformation(SystemProcessorPerformanceInformation)`,
//!   idle, kernel (idle included) and user time, plus DPC time (the DDK's
//!   layout of the structure's first reserved field), which stands where
//!   Linux reports softirq; Windows has no steal time to report;
//! - this process: `GetProcessTimes`; its threads: a Toolhelp snapshot of the
//!   machine's threads, then `GetThreadTimes` and `GetThreadDescription` (the
//!   name Rust gives a thread) for those of this process;
//! - every process: a Toolhelp snapshot, then `GetProcessTimes` where
//!   `PROCESS_QUERY_LIMITED_INFORMATION` is granted (others are skipped).
//!
//! - the CPU rate limit of this process's job object (`super::job`), where
//!   Linux gives its cgroup's quota.
//!
//! All times are in 100 ns units.

pub(crate) use super::job::CgroupCounters;
use crate::usage::busiest;
use headroom_result::{CoreLoad, CpuLoad, ProcessLoad, ThreadLoad};
use std::collections::BTreeMap;
use std::time::Instant;
use windows_sys::Wdk::System::SystemInformation::{NtQuerySystemInformation, SystemProcessorPerformanceInformation};
use windows_sys::Win32::Foundation::{CloseHandle, LocalFree, FILETIME, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, Thread32First, Thread32Next, PROCESSENTRY32W,
    TH32CS_SNAPPROCESS, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetCurrentProcessId, GetProcessTimes, GetThreadDescription, GetThreadTimes, OpenProcess,
    OpenThread, PROCESS_QUERY_LIMITED_INFORMATION, THREAD_QUERY_LIMITED_INFORMATION,
};
use windows_sys::Win32::System::WindowsProgramming::SYSTEM_PROCESSOR_PERFORMANCE_INFORMATION;

/// Threads listed in a [`CpuLoad`], busiest first (as on Linux).
const THREADS_SHOWN: usize = 8;
/// Processes of the machine listed in a [`CpuLoad`], busiest first.
const PROCESSES_SHOWN: usize = 5;
/// Windows' time unit: 100 ns.
pub(crate) const UNITS_PER_SEC: f64 = 10_000_000.0;
/// Most processors asked of NtQuerySystemInformation (one processor group).
const MOST_PROCESSORS: usize = 64;

/// One processor's times, in 100 ns units.
#[derive(Debug, Clone, Copy, Default)]
struct CoreTimes {
    idle: u64,
    /// Kernel time without idle.
    system: u64,
    user: u64,
    dpc: u64,
}

/// The counters at one moment.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    at: Instant,
    cores: Vec<CoreTimes>,
    process_units: u64,
    /// tid -> (name, user+kernel units).
    threads: BTreeMap<u32, (String, u64)>,
    /// pid -> (executable, user+kernel units).
    processes: BTreeMap<u32, (String, u64)>,
    /// The job object's CPU rate limit, when it has one.
    cgroup: Option<CgroupCounters>,
}

impl CpuSnapshot {
    /// Reads the counters now; None when the processors' times cannot be read.
    pub fn take() -> Option<CpuSnapshot> {
        let at = Instant::now();
        let cores = processor_times()?;
        // SAFETY: the pseudo-handle of this process needs no closing.
        let process_units = times_of(|c, e, k, u| unsafe { GetProcessTimes(GetCurrentProcess(), c, e, k, u) })?;
        let (threads, processes) = (own_threads(), all_processes());
        let cgroup = super::job::own_job_limit();
        Some(CpuSnapshot { at, cores, process_units, threads, processes, cgroup })
    }

    /// What happened between `earlier` and this snapshot.
    pub fn load_since(&self, earlier: &CpuSnapshot) -> CpuLoad {
        let wall = self.at.duration_since(earlier.at).as_secs_f64().max(1e-9);
        let per_core: Vec<CoreLoad> = self
            .cores
            .iter()
            .zip(&earlier.cores)
            .enumerate()
            .map(|(cpu, (now, then))| {
                let d = |f: fn(&CoreTimes) -> u64| f(now).saturating_sub(f(then));
                let total = d(|c| c.idle) + d(|c| c.system) + d(|c| c.user);
                let pct = |x: u64| if total == 0 { 0.0 } else { x as f64 / total as f64 * 100.0 };
                CoreLoad {
                    cpu: cpu as u32,
                    busy_percent: pct(total - d(|c| c.idle)),
                    softirq_percent: pct(d(|c| c.dpc)),
                    steal_percent: 0.0,
                }
            })
            .collect();
        let percent_of_core = |units: u64| units as f64 / UNITS_PER_SEC / wall * 100.0;
        let softirq = if per_core.is_empty() {
            0.0
        } else {
            per_core.iter().map(|c| c.softirq_percent).sum::<f64>() / per_core.len() as f64
        };
        CpuLoad {
            wall_s: wall,
            cores: self.cores.len() as u32,
            process_percent: percent_of_core(self.process_units.saturating_sub(earlier.process_units)),
            threads: busiest(&self.threads, &earlier.threads, THREADS_SHOWN)
                .map(|(tid, name, units)| ThreadLoad {
                    name,
                    tid,
                    percent: percent_of_core(units),
                    waiting_percent: None,
                })
                .collect(),
            steal_percent: 0.0,
            softirq_percent: softirq,
            per_core,
            cgroup: self.cgroup.as_ref().map(|now| now.since(earlier.cgroup.as_ref())),
            processes: busiest(&self.processes, &earlier.processes, PROCESSES_SHOWN)
                .map(|(pid, name, units)| ProcessLoad { name, pid, percent: percent_of_core(units) })
                .collect(),
            serving: Vec::new(),
        }
    }
}

/// Each processor's times (the first processor group's).
fn processor_times() -> Option<Vec<CoreTimes>> {
    let mut info = [SYSTEM_PROCESSOR_PERFORMANCE_INFORMATION::default(); MOST_PROCESSORS];
    let mut returned = 0u32;
    // SAFETY: the buffer and its length in bytes describe `info`; the call
    // writes at most that many bytes and says how many in `returned`.
    let status = unsafe {
        NtQuerySystemInformation(
            SystemProcessorPerformanceInformation,
            info.as_mut_ptr().cast(),
            std::mem::size_of_val(&info) as u32,
            &mut returned,
        )
    };
    let count = returned as usize / std::mem::size_of::<SYSTEM_PROCESSOR_PERFORMANCE_INFORMATION>();
    if status < 0 || count == 0 {
        return None;
    }
    let units = |v: i64| u64::try_from(v).unwrap_or(0);
    Some(
        info[..count.min(MOST_PROCESSORS)]
            .iter()
            .map(|p| CoreTimes {
                idle: units(p.IdleTime),
                system: units(p.KernelTime).saturating_sub(units(p.IdleTime)),
                user: units(p.UserTime),
                // The DDK's layout: Reserved1 is DpcTime, then InterruptTime.
                dpc: units(p.Reserved1[0]),
            })
            .collect(),
    )
}

/// User plus kernel time from one of the Get*Times calls (creation, exit,
/// kernel, user), in 100 ns units; None when the call fails.
fn times_of(call: impl FnOnce(*mut FILETIME, *mut FILETIME, *mut FILETIME, *mut FILETIME) -> i32) -> Option<u64> {
    let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    if call(&mut created, &mut exited, &mut kernel, &mut user) == 0 {
        return None;
    }
    let units = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    Some(units(kernel) + units(user))
}

/// A handle closed when dropped.
pub(crate) struct Owned(pub(crate) HANDLE);

impl Owned {
    fn new(h: HANDLE) -> Option<Owned> {
        (!h.is_null() && h != INVALID_HANDLE_VALUE).then_some(Owned(h))
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: a handle this module opened and nothing else closes.
        unsafe { CloseHandle(self.0) };
    }
}

/// This process's threads: tid -> (description or "tid N", time).
fn own_threads() -> BTreeMap<u32, (String, u64)> {
    // SAFETY: no arguments.
    threads_of(unsafe { GetCurrentProcessId() })
}

/// The threads of process `pid` whose times this user may read: tid ->
/// (description or "tid N", user+kernel time); others are left out.
pub(crate) fn threads_of(pid: u32) -> BTreeMap<u32, (String, u64)> {
    let mut found = BTreeMap::new();
    // SAFETY: a snapshot handle, closed by Owned.
    let Some(snap) = Owned::new(unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) }) else { return found };
    // SAFETY: plain data; dwSize is set as the API asks.
    let mut entry =
        THREADENTRY32 { dwSize: std::mem::size_of::<THREADENTRY32>() as u32, ..unsafe { std::mem::zeroed() } };
    // SAFETY: `entry` is a THREADENTRY32 with its size set; the snapshot is open.
    let mut more = unsafe { Thread32First(snap.0, &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            let tid = entry.th32ThreadID;
            // SAFETY: a thread handle, closed by Owned.
            if let Some(h) = Owned::new(unsafe { OpenThread(THREAD_QUERY_LIMITED_INFORMATION, 0, tid) }) {
                // SAFETY: an open thread handle and four FILETIMEs to fill.
                if let Some(t) = times_of(|c, e, k, u| unsafe { GetThreadTimes(h.0, c, e, k, u) }) {
                    found.insert(tid, (thread_name(&h).unwrap_or_else(|| format!("tid {tid}")), t));
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snap.0, &mut entry) } != 0;
    }
    found
}

/// The thread's description (what Rust's `Builder::name` sets), if any.
fn thread_name(thread: &Owned) -> Option<String> {
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: an open thread handle; on success `text` is a NUL-terminated
    // string the system allocated, freed below with LocalFree.
    if unsafe { GetThreadDescription(thread.0, &mut text) } < 0 || text.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated, as the call promises.
    let len = (0..).take_while(|&i| unsafe { *text.add(i) } != 0).count();
    // SAFETY: `len` u16s before the NUL.
    let name = String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, len) });
    // SAFETY: the string GetThreadDescription allocated.
    unsafe { LocalFree(text.cast()) };
    (!name.is_empty()).then_some(name)
}

/// Every process whose times this user may read: pid -> (executable, time).
fn all_processes() -> BTreeMap<u32, (String, u64)> {
    let mut found = BTreeMap::new();
    for (pid, exe) in processes() {
        if let Some(t) = process_time(pid) {
            found.insert(pid, (exe, t));
        }
    }
    found
}

/// User plus kernel time of process `pid`; None when it is gone or denies
/// PROCESS_QUERY_LIMITED_INFORMATION (pid 0, the idle process, is refused).
pub(crate) fn process_time(pid: u32) -> Option<u64> {
    let h = open_process(pid)?;
    // SAFETY: an open process handle and four FILETIMEs to fill.
    times_of(|c, e, k, u| unsafe { GetProcessTimes(h.0, c, e, k, u) })
}

/// Process `pid` opened for PROCESS_QUERY_LIMITED_INFORMATION; None when
/// it is gone or denies it.
pub(crate) fn open_process(pid: u32) -> Option<Owned> {
    // SAFETY: a process handle, closed by Owned.
    Owned::new(unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) })
}

/// Every process the system lists (a Toolhelp snapshot, which needs no
/// access to the processes themselves): (pid, executable's file name).
pub(crate) fn processes() -> Vec<(u32, String)> {
    let mut found = Vec::new();
    // SAFETY: a snapshot handle, closed by Owned.
    let Some(snap) = Owned::new(unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) }) else { return found };
    // SAFETY: plain data; dwSize is set as the API asks.
    let mut entry =
        PROCESSENTRY32W { dwSize: std::mem::size_of::<PROCESSENTRY32W>() as u32, ..unsafe { std::mem::zeroed() } };
    // SAFETY: `entry` is a PROCESSENTRY32W with its size set; the snapshot is open.
    let mut more = unsafe { Process32FirstW(snap.0, &mut entry) } != 0;
    while more {
        let len = entry.szExeFile.iter().position(|&c| c == 0).unwrap_or(entry.szExeFile.len());
        found.push((entry.th32ProcessID, String::from_utf16_lossy(&entry.szExeFile[..len])));
        // SAFETY: as for Process32FirstW.
        more = unsafe { Process32NextW(snap.0, &mut entry) } != 0;
    }
    found
}

/// The program a running process runs, without `.exe` (`headroom` for
/// headroom.exe, as Linux's comm names it); None when no such process runs.
pub fn process_name(pid: u32) -> Option<String> {
    let (_, exe) = processes().into_iter().find(|(p, _)| *p == pid)?;
    Some(program_name(&exe).to_string())
}

/// An executable's file name without `.exe` (`smbd` for smbd.exe).
pub(crate) fn program_name(exe: &str) -> &str {
    let stem = exe.len().checked_sub(4).filter(|&n| exe.is_char_boundary(n) && exe[n..].eq_ignore_ascii_case(".exe"));
    stem.map_or(exe, |n| &exe[..n])
}
