//! Which processes of this machine serve a share: those holding a TCP socket
//! on the share's port (the listener and the connections it accepted, found
//! through /proc/net/tcp{,6} and each process's open descriptors), else
//! those with a file-server daemon's name (kernel `nfsd` threads hold no
//! descriptor). A [`ServingWatch`] follows them through a test.
//!
//! The watch samples them a few times a second rather than twice: a server
//! gives each connection a thread or a process (nbdkit, smbd) that may end
//! with the client's connection, before the end of the window, and the
//! last sample still holds its time.
//!
//! Reads /proc only; sockets are looked up in this process's network
//! namespace, where the client's connections arrive.

use super::cpu_load::{busiest, cgroup_counters, clock_ticks_per_sec, stat_ticks, CgroupCounters};
use headroom_result::{ServingLoad, ThreadLoad};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the watch looks at the serving processes.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

pub use crate::os::{ServingProcess, ServingQuery};

/// The most processes followed: a forking server (smbd) has one per client.
const MOST_FOLLOWED: usize = 64;

impl ServingQuery {
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
fn thread_ticks(pid: u32) -> BTreeMap<u32, (String, u64)> {
    super::cpu_load::ticks_under(&Path::new("/proc").join(pid.to_string()).join("task"))
}

/// One serving process as first and last seen.
#[derive(Debug, Clone)]
struct Followed {
    name: String,
    found_by: String,
    /// Process ticks when first seen: zero when it started serving after the
    /// first sample (a child forked for the client's connection).
    first_ticks: u64,
    last_ticks: u64,
    first_threads: BTreeMap<u32, (String, u64)>,
    last_threads: BTreeMap<u32, (String, u64)>,
    cpus_allowed: Option<u32>,
    cgroup: Option<String>,
}

/// What the sampler gathered.
#[derive(Debug, Default)]
struct Seen {
    processes: BTreeMap<u32, Followed>,
    /// Each cgroup's counters when first and last seen, by path: a process
    /// that joins during the test is measured against its group's earlier counters.
    cgroups: BTreeMap<String, (CgroupCounters, CgroupCounters)>,
    /// The processes found serving at the last search, and samples since.
    found: Vec<ServingProcess>,
    samples: u32,
}

/// Search for serving processes (every process's descriptors) once in this
/// many samples; the samples between read only the processes found.
const FIND_EVERY: u32 = 5;

impl Seen {
    fn sample(&mut self, query: &ServingQuery, first: bool) {
        if self.samples.is_multiple_of(FIND_EVERY) {
            self.found = query.find();
        }
        self.samples += 1;
        for found in self.found.clone() {
            let Some((name, ticks)) =
                std::fs::read_to_string(format!("/proc/{}/stat", found.pid)).ok().and_then(|s| stat_ticks(&s))
            else {
                continue;
            };
            let threads = thread_ticks(found.pid);
            let counters = cgroup_counters(&Path::new("/proc").join(found.pid.to_string()));
            let path = counters.as_ref().map(|c| c.path.clone());
            if let Some(c) = counters {
                self.cgroups.entry(c.path.clone()).and_modify(|(_, last)| *last = c.clone()).or_insert((c.clone(), c));
            }
            let start_ticks = if first { ticks } else { 0 };
            let followed = self.processes.entry(found.pid).or_insert_with(|| Followed {
                name: name.clone(),
                found_by: found.found_by.clone(),
                first_ticks: start_ticks,
                last_ticks: ticks,
                first_threads: if first { threads.clone() } else { BTreeMap::new() },
                last_threads: threads.clone(),
                cpus_allowed: cpus_allowed(found.pid),
                cgroup: path.clone(),
            });
            followed.last_ticks = ticks;
            // A thread that ended keeps its last sample: its time counts.
            followed.last_threads.extend(threads);
            followed.cgroup = path.or(followed.cgroup.take());
        }
    }

    fn loads(&self, wall_s: f64) -> Vec<ServingLoad> {
        let percent = |ticks: u64| ticks as f64 / clock_ticks_per_sec() / wall_s.max(1e-9) * 100.0;
        let mut loads: Vec<ServingLoad> = self
            .processes
            .iter()
            .map(|(pid, p)| ServingLoad {
                name: p.name.clone(),
                pid: *pid,
                found_by: p.found_by.clone(),
                percent: percent(p.last_ticks.saturating_sub(p.first_ticks)),
                busiest_thread: busiest(&p.last_threads, &p.first_threads, 1)
                    .next()
                    .map(|(tid, name, ticks)| ThreadLoad { name, tid, percent: percent(ticks) }),
                threads: p.last_threads.len() as u32,
                cpus_allowed: p.cpus_allowed,
                cgroup: p.cgroup.as_ref().and_then(|path| {
                    let (first, last) = self.cgroups.get(path)?;
                    Some(last.since(Some(first)))
                }),
            })
            .filter(|l| l.percent > 0.0 || l.cgroup.is_some())
            .collect();
        loads.sort_by(|a, b| b.percent.total_cmp(&a.percent));
        loads
    }
}

/// The processes serving a share, followed from [`ServingWatch::start`] to
/// [`ServingWatch::finish`] by a sampling thread.
pub struct ServingWatch {
    started: Instant,
    stop: Arc<AtomicBool>,
    sampler: Option<JoinHandle<Seen>>,
}

impl ServingWatch {
    /// Finds the processes `query` names and starts following them.
    pub fn start(query: ServingQuery) -> ServingWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let mut seen = Seen::default();
        seen.sample(&query, true);
        let stopping = stop.clone();
        let sampler = std::thread::Builder::new()
            .name("hr-serving".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    std::thread::sleep(SAMPLE_EVERY);
                    seen.sample(&query, false);
                }
                seen
            })
            .ok();
        ServingWatch { started: Instant::now(), stop, sampler }
    }

    /// What each process used since the start, busiest first.
    pub fn finish(mut self) -> Vec<ServingLoad> {
        let wall = self.started.elapsed().as_secs_f64();
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.sampler.take().and_then(|h| h.join().ok()).unwrap_or_default();
        seen.loads(wall)
    }
}

impl Drop for ServingWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
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

    #[test]
    fn a_thread_that_ends_before_the_watch_still_counts() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let query = ServingQuery { port: Some(listener.local_addr().unwrap().port()), names: vec![] };
        let mut seen = Seen::default();
        seen.sample(&query, true);
        // This process holds the port; a busy thread of it ends before the last sample.
        let spinner = std::thread::Builder::new()
            .name("hr-spin".into())
            .spawn(|| {
                let until = Instant::now() + Duration::from_millis(700);
                let mut x = 0u64;
                while Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                x
            })
            .unwrap();
        for _ in 0..5 {
            std::thread::sleep(SAMPLE_EVERY);
            seen.sample(&query, false);
        }
        spinner.join().unwrap();
        let me = &seen.processes[&std::process::id()];
        let spun = me.last_threads.values().find(|(name, _)| name == "hr-spin");
        assert!(spun.is_some_and(|(_, ticks)| *ticks > 0), "the ended thread kept its last sample: {me:?}");
        let loads = seen.loads(1.0);
        assert!(loads.iter().any(|l| l.pid == std::process::id() && l.percent > 0.0), "{loads:?}");
        drop(listener);
    }
}
