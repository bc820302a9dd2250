//! What the serving-process watch (crate::serving) reads of Windows:
//! - who holds a TCP port: GetExtendedTcpTable (TCP_TABLE_OWNER_PID_ALL,
//!   AF_INET and AF_INET6), whose rows name the owning process;
//! - who has a name: the Toolhelp process list (`smbd` matches smbd.exe,
//!   in any case, as Windows compares names);
//! - a process's time: GetProcessTimes; its threads': a Toolhelp thread
//!   snapshot, OpenThread(THREAD_QUERY_LIMITED_INFORMATION), GetThreadTimes
//!   and GetThreadDescription (`super::cpu_load`'s helpers);
//! - the CPUs it may use: GetProcessAffinityMask (its processor group's);
//! - its CPU limit: only this process's own job object is readable
//!   (QueryInformationJobObject takes a job handle, which another process's
//!   job does not give), so another process has none recorded.
//!
//! A process that denies PROCESS_QUERY_LIMITED_INFORMATION is left out, as
//! Linux leaves out one whose /proc files it cannot read. Windows' own SMB
//! server is the kernel's (srv2.sys): port 445 is held by System (pid 4),
//! whose threads carry no description, so they show as "tid N".

use super::cpu_load::{open_process, process_name, process_time, processes, program_name, threads_of, UNITS_PER_SEC};
use super::job::{own_job_limit, CgroupCounters};
use std::collections::BTreeMap;
use windows_sys::Win32::NetworkManagement::IpHelper::{
    GetExtendedTcpTable, MIB_TCP6ROW_OWNER_PID, MIB_TCPROW_OWNER_PID, TCP_TABLE_OWNER_PID_ALL,
};
use windows_sys::Win32::Networking::WinSock::{AF_INET, AF_INET6};
use windows_sys::Win32::System::Threading::GetProcessAffinityMask;

/// winerror.h's ERROR_INSUFFICIENT_BUFFER: the table needs a larger buffer.
const ERROR_INSUFFICIENT_BUFFER: u32 = 122;

/// Process times are in 100 ns units.
pub(crate) fn ticks_per_sec() -> f64 {
    UNITS_PER_SEC
}

/// The processes with a TCP socket (listening or connected) whose local
/// port is `port`, IPv4 or IPv6, in pid order.
pub(crate) fn pids_on_port(port: u16) -> Vec<u32> {
    let v4 = tcp_table(AF_INET).map(|t| owners::<MIB_TCPROW_OWNER_PID>(&t, |r| (r.dwLocalPort, r.dwOwningPid)));
    let v6 = tcp_table(AF_INET6).map(|t| owners::<MIB_TCP6ROW_OWNER_PID>(&t, |r| (r.dwLocalPort, r.dwOwningPid)));
    let mut pids: Vec<u32> = v4
        .into_iter()
        .chain(v6)
        .flatten()
        .filter(|(local_port, pid)| local_port_number(*local_port) == port && *pid != 0)
        .map(|(_, pid)| pid)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// A row's dwLocalPort: the port in network byte order in its low 16 bits.
fn local_port_number(dw_local_port: u32) -> u16 {
    u16::from_be(dw_local_port as u16)
}

/// GetExtendedTcpTable's table of `family` with owning pids, as u32s (the
/// rows' alignment); None when the call fails.
fn tcp_table(family: u16) -> Option<Vec<u32>> {
    let mut buf: Vec<u32> = vec![0; 4096];
    for _ in 0..4 {
        let mut bytes = (buf.len() * 4) as u32;
        // SAFETY: `buf` holds `bytes` writable, 4-byte aligned bytes.
        let rc = unsafe {
            GetExtendedTcpTable(buf.as_mut_ptr().cast(), &mut bytes, 0, u32::from(family), TCP_TABLE_OWNER_PID_ALL, 0)
        };
        match rc {
            0 => return Some(buf),
            // Connections come and go between the two calls: some room more.
            ERROR_INSUFFICIENT_BUFFER => buf = vec![0; (bytes as usize).div_ceil(4) + 256],
            _ => return None,
        }
    }
    None
}

/// (dwLocalPort, dwOwningPid) of each row of a MIB_TCP*TABLE_OWNER_PID:
/// dwNumEntries, then that many `Row`s.
fn owners<Row: Copy>(table: &[u32], port_and_pid: fn(&Row) -> (u32, u32)) -> Vec<(u32, u32)> {
    let Some((&count, rows)) = table.split_first() else { return Vec::new() };
    let fits = std::mem::size_of_val(rows) / std::mem::size_of::<Row>();
    let rows = rows.as_ptr() as *const Row;
    (0..(count as usize).min(fits))
        // SAFETY: row `i` lies within `table` (counted above); the rows are
        // plain u32s and bytes, 4-byte aligned as `table` is.
        .map(|i| port_and_pid(unsafe { &*rows.add(i) }))
        .collect()
}

/// The processes whose program is one of `names` (without `.exe`), in pid order.
pub(crate) fn pids_named(names: &[String]) -> Vec<u32> {
    let mut pids: Vec<u32> = processes()
        .into_iter()
        .filter(|(_, exe)| names.iter().any(|n| n.eq_ignore_ascii_case(program_name(exe))))
        .map(|(pid, _)| pid)
        .collect();
    pids.sort_unstable();
    pids
}

/// (program, user+kernel time) of a process; None when it is gone or denies access.
pub(crate) fn process_ticks(pid: u32) -> Option<(String, u64)> {
    let time = process_time(pid)?;
    Some((process_name(pid)?, time))
}

/// tid -> (description or "tid N", user+kernel time) of a process's threads.
pub(crate) fn thread_ticks(pid: u32) -> BTreeMap<u32, (String, u64)> {
    threads_of(pid)
}

/// tid -> time waited for a CPU: Windows keeps no per-thread run-queue
/// delay that a process outside the thread can read, so none is known.
pub(crate) fn thread_waits(_pid: u32) -> BTreeMap<u32, u64> {
    BTreeMap::new()
}

/// How many processors of its group the process may run on.
pub(crate) fn cpus_allowed(pid: u32) -> Option<u32> {
    let process = open_process(pid)?;
    let (mut mask, mut system) = (0usize, 0usize);
    // SAFETY: an open process handle and two masks to fill.
    let ok = unsafe { GetProcessAffinityMask(process.0, &mut mask, &mut system) } != 0;
    (ok && mask != 0).then_some(mask.count_ones())
}

/// The job object's CPU rate limit: this process's own only (see the module's comment).
pub(crate) fn limit_counters(pid: u32) -> Option<CgroupCounters> {
    (pid == std::process::id()).then(own_job_limit).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_port_is_in_network_byte_order() {
        // 445 = 0x01BD, stored as the bytes 01 BD: 0xBD01 read little-endian.
        assert_eq!(local_port_number(u32::from(u16::from_ne_bytes([0x01, 0xBD]))), 445);
        let rows = [2u32, 0, 0, u32::from(u16::from_ne_bytes([0x01, 0xBD])), 0, 0, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(owners::<MIB_TCPROW_OWNER_PID>(&rows, |r| (r.dwLocalPort, r.dwOwningPid)).len(), 2);
        assert_eq!(owners::<MIB_TCPROW_OWNER_PID>(&rows, |r| (r.dwLocalPort, r.dwOwningPid))[0].1, 4);
    }
}
