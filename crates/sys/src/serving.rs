//! Which processes of this machine serve a share: those holding a TCP socket
//! on the share's port (the listener and the connections it accepted, found
//! through /proc/net/tcp{,6} and each process's open descriptors), else
//! those with a file-server daemon's name (kernel `nfsd` threads hold no
//! descriptor). [`CpuSnapshot::take_serving`](crate::CpuSnapshot::take_serving)
//! follows them through a test.
//!
//! Reads /proc only; sockets are looked up in this process's network
//! namespace, where the client's connections arrive.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// How to find the processes serving a share here.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ServingQuery {
    /// The share's TCP port (445, 2049, 3260, 10809 or the URL's own).
    #[serde(default)]
    pub port: Option<u16>,
    /// Process names to fall back on when no process holds the port
    /// (`smbd`, `nfsd`, `ganesha.nfsd`, `tgtd`, `nbdkit`, ...).
    #[serde(default)]
    pub names: Vec<String>,
}

/// The most processes followed: a forking server (smbd) has one per client.
const MOST_FOLLOWED: usize = 64;

/// A process found serving, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingProcess {
    /// Process id.
    pub pid: u32,
    /// How it was found: "port 445" or "name".
    pub found_by: String,
}

/// Most names a query may carry (it comes from the network).
const MOST_NAMES: usize = 16;
/// A process name (comm) is at most 15 bytes.
const LONGEST_NAME: usize = 15;

impl ServingQuery {
    /// Refuses a query no file server's names fit (too many or too long
    /// names): it comes from a peer.
    pub fn check(&self) -> Result<(), String> {
        if self.names.len() > MOST_NAMES {
            return Err(format!("{} process names to follow; at most {MOST_NAMES}", self.names.len()));
        }
        match self.names.iter().find(|n| n.is_empty() || n.len() > LONGEST_NAME) {
            Some(n) => Err(format!("process name of {} bytes; names are 1-{LONGEST_NAME} bytes", n.len())),
            None => Ok(()),
        }
    }

    /// The processes serving now, by port first, else by name.
    pub fn find(&self) -> Vec<ServingProcess> {
        let proc_root = Path::new("/proc");
        if let Some(port) = self.port {
            let inodes = socket_inodes_on_port(port);
            let by_port = pids_holding(proc_root, &inodes);
            if !by_port.is_empty() {
                return by_port
                    .into_iter()
                    .take(MOST_FOLLOWED)
                    .map(|pid| ServingProcess { pid, found_by: format!("port {port}") })
                    .collect();
            }
        }
        pids_named(proc_root, &self.names)
            .into_iter()
            .take(MOST_FOLLOWED)
            .map(|pid| ServingProcess { pid, found_by: "name".into() })
            .collect()
    }
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
                std::fs::read_link(fd.path()).ok().and_then(|l| socket_inode(&l.to_string_lossy())).is_some_and(|i| inodes.contains(&i))
            })
        })
        .collect()
}

/// `socket:[12345]` -> 12345.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// Processes whose name (comm) is one of `names`.
fn pids_named(proc_root: &Path, names: &[String]) -> Vec<u32> {
    if names.is_empty() {
        return Vec::new();
    }
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
    crate::cpu_load::ticks_under(&Path::new("/proc").join(pid.to_string()).join("task"))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn this_process_is_found_by_the_port_it_listens_on() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let found = ServingQuery { port: Some(port), names: vec![] }.find();
        assert_eq!(found, vec![ServingProcess { pid: std::process::id(), found_by: format!("port {port}") }]);
        drop(listener);
        let by_name = ServingQuery { port: Some(port), names: vec!["no-such-daemon".into()] }.find();
        assert!(by_name.is_empty(), "{by_name:?}");
        assert!(cpus_allowed(std::process::id()).is_some_and(|n| n >= 1));
    }
}
