//! Which processes of this machine serve a share, and how much CPU they used
//! during a test, the same on every platform: those holding a TCP socket on
//! the share's port (the listener and the connections it accepted), else
//! those with a file-server daemon's name (Linux's kernel `nfsd` threads hold
//! no descriptor). A [`ServingWatch`] follows them through a test.
//!
//! The watch samples them a few times a second rather than twice: a server
//! gives each connection a thread or a process (nbdkit, smbd) that may end
//! with the client's connection, before the end of the window, and the
//! last sample still holds its time.
//!
//! What it reads of a process (who holds a port, who has a name, its times,
//! its threads', the CPUs it may use, its CPU limit) is the platform seam's
//! (`os::serving`); a process the platform cannot read is left out.

use crate::os::serving::{
    cpus_allowed, limit_counters, pids_named, pids_on_port, process_ticks, thread_ticks, thread_waits, ticks_per_sec,
};
use crate::usage::busiest;
use headroom_result::{ServingLoad, ThreadLoad};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the watch looks at the serving processes.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// The most processes followed: a forking server (smbd) has one per client.
const MOST_FOLLOWED: usize = 64;

/// Most names a query may carry (it comes from the network).
const MOST_NAMES: usize = 16;
/// A process name (comm) is at most 15 bytes.
const LONGEST_NAME: usize = 15;

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

/// A process found serving, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingProcess {
    /// Process id.
    pub pid: u32,
    /// How it was found: "port 445" or "name".
    pub found_by: String,
}

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
        if let Some(port) = self.port {
            let by_port = pids_on_port(port);
            if !by_port.is_empty() {
                return by_port
                    .into_iter()
                    .take(MOST_FOLLOWED)
                    .map(|pid| ServingProcess { pid, found_by: format!("port {port}") })
                    .collect();
            }
        }
        if self.names.is_empty() {
            return Vec::new();
        }
        pids_named(&self.names)
            .into_iter()
            .take(MOST_FOLLOWED)
            .map(|pid| ServingProcess { pid, found_by: "name".into() })
            .collect()
    }
}

/// The platform's counters of a process's CPU limit (a cgroup's quota and
/// throttling on Linux).
type LimitCounters = crate::os::cpu_load::CgroupCounters;

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
    /// Each thread's run-queue wait (ns) when first and last seen.
    first_waits: BTreeMap<u32, u64>,
    last_waits: BTreeMap<u32, u64>,
    cpus_allowed: Option<u32>,
    cgroup: Option<String>,
}

impl Followed {
    /// How long a thread waited for a CPU between its first and last sample.
    fn waited_ns(&self, tid: u32) -> Option<u64> {
        let last = self.last_waits.get(&tid)?;
        Some(last.saturating_sub(self.first_waits.get(&tid).copied().unwrap_or(0)))
    }
}

/// What the sampler gathered.
#[derive(Debug, Default)]
struct Seen {
    processes: BTreeMap<u32, Followed>,
    /// Each limit's counters when first and last seen, by path: a process
    /// that joins during the test is measured against its group's earlier counters.
    cgroups: BTreeMap<String, (LimitCounters, LimitCounters)>,
    /// The processes found serving at the last search, and samples since.
    found: Vec<ServingProcess>,
    samples: u32,
}

/// Search for serving processes (every process's sockets) once in this
/// many samples; the samples between read only the processes found.
const FIND_EVERY: u32 = 5;

impl Seen {
    fn sample(&mut self, query: &ServingQuery, first: bool) {
        if self.samples.is_multiple_of(FIND_EVERY) {
            self.found = query.find();
        }
        self.samples += 1;
        for found in self.found.clone() {
            let Some((name, ticks)) = process_ticks(found.pid) else {
                continue;
            };
            let threads = thread_ticks(found.pid);
            let waits = thread_waits(found.pid);
            let counters = limit_counters(found.pid);
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
                first_waits: if first { waits.clone() } else { BTreeMap::new() },
                last_waits: waits.clone(),
                cpus_allowed: cpus_allowed(found.pid),
                cgroup: path.clone(),
            });
            followed.last_ticks = ticks;
            // A thread that ended keeps its last sample: its time counts.
            followed.last_threads.extend(threads);
            followed.last_waits.extend(waits);
            followed.cgroup = path.or(followed.cgroup.take());
        }
    }

    fn loads(&self, wall_s: f64) -> Vec<ServingLoad> {
        let percent = |ticks: u64| ticks as f64 / ticks_per_sec() / wall_s.max(1e-9) * 100.0;
        let mut loads: Vec<ServingLoad> = self
            .processes
            .iter()
            .map(|(pid, p)| ServingLoad {
                name: p.name.clone(),
                pid: *pid,
                found_by: p.found_by.clone(),
                percent: percent(p.last_ticks.saturating_sub(p.first_ticks)),
                busiest_thread: busiest(&p.last_threads, &p.first_threads, 1).next().map(|(tid, name, ticks)| {
                    ThreadLoad {
                        name,
                        tid,
                        percent: percent(ticks),
                        waiting_percent: p.waited_ns(tid).map(|ns| ns as f64 / 1e9 / wall_s.max(1e-9) * 100.0),
                    }
                }),
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
        // Found by its own name (wine, which names no port's owner, finds it so too).
        let name = crate::process_name(std::process::id()).unwrap();
        let query = ServingQuery { port: None, names: vec![name] };
        let mut seen = Seen::default();
        seen.sample(&query, true);
        // A busy thread of this process ends before the last sample.
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
    }
}
