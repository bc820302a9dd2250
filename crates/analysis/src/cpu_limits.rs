//! Which CPU held a network probe back, and whose it is (this machine or the
//! server), from the `cpu_load_local` / `cpu_load_remote` figures a net probe
//! carries: a cgroup quota that throttled, time stolen by a hypervisor, a core
//! drowned in softirq, one thread at a full core, or every core the streams
//! could use. Probes without them (stock iperf3 servers, older documents)
//! fall back to `cpu_*_percent`, the percent of one core per stream.
//!
//! Also owns the probe's one-line diagnosis (`details.why`): a CPU limit
//! replaces the TCP_INFO buffer advice, and a stream at its link's ceiling
//! gets no buffer advice at all. Thresholds are documented in docs/verdict.md.
//!
//! Long (about 510 lines): about 330 lines of code, the rest its unit tests.

pub use headroom_result::Side;
use headroom_result::{details, CgroupCpu, CpuLoad, Probe, ProbeSpec, ServingLoad, Warning};
use serde::{Deserialize, Serialize};

/// A cgroup that throttled in this share of its periods or more was held by its quota.
pub const THROTTLED_SHARE: f64 = 0.20;
/// Fewest enforcement periods for the throttled share to mean anything.
pub const MIN_PERIODS: u64 = 5;
/// Time stolen by the hypervisor, percent of all cores, that limits by itself.
pub const STEAL_PERCENT: f64 = 20.0;
/// A core this busy is saturated.
pub const CORE_SATURATED_PERCENT: f64 = 95.0;
/// A saturated core that spent this share of its time in softirq is held by network processing.
pub const SOFTIRQ_SHARE_PERCENT: f64 = 50.0;
/// A thread (or a stream's share of a process) at this percent of one core is CPU-bound.
pub const CPU_BUSY_PERCENT: f64 = 90.0;
/// A serving thread below a full core that wanted the CPU (ran, or was
/// ready to run and waited) this share of the window or more was CPU-bound:
/// below a full core because the rest of its time went to requests arriving.
pub const SHARED_DEMAND_PERCENT: f64 = 75.0;
/// Such a thread that spent this share of its demand waiting for a CPU held
/// by other work shared its core, and lost that much to it.
pub const SHARED_WAIT_SHARE: f64 = 0.25;
/// Most other processes named beside a thread that shared its core.
const OTHERS_NAMED: usize = 2;

/// What kind of CPU limit, strongest evidence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuLimitKind {
    /// A cgroup CPU quota (cpu.cfs_quota_us, cpu.max) throttled the process.
    Quota,
    /// The hypervisor gave the CPU time to other guests (steal).
    Steal,
    /// A core saturated mostly by softirq (packet processing).
    Softirq,
    /// One thread at a full core: the work of one stream cannot spread.
    Thread,
    /// A serving thread wanted a full core and waited for it: other work held the CPU.
    Shared,
    /// The streams kept every core they could use busy.
    Cores,
    /// Only the percent of one core per stream is known, and it was full.
    Busy,
}

impl CpuLimitKind {
    /// A few words for the hop chain: "cgroup quota", "one thread at a full core".
    pub fn words(self) -> &'static str {
        match self {
            CpuLimitKind::Quota => "cgroup quota",
            CpuLimitKind::Steal => "hypervisor steal",
            CpuLimitKind::Softirq => "a core in softirq",
            CpuLimitKind::Thread => "one thread at a full core",
            CpuLimitKind::Shared => "a core shared with other work",
            CpuLimitKind::Cores => "every usable core busy",
            CpuLimitKind::Busy => "busy",
        }
    }
}

/// A CPU limit found in a probe, with the evidence in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuLimit {
    /// Which end's CPU held the stream: the client (local) or the server (remote).
    pub side: Side,
    /// What kind of limit it was; decides the wording of the diagnosis.
    pub kind: CpuLimitKind,
    /// e.g. "the server's CPU: its cgroup /t is held to 2% of one core (...) and was throttled in 81% of 40 periods".
    pub evidence: String,
}

/// The strongest CPU limit a net probe shows on either end.
pub fn cpu_limit(probe: &Probe) -> Option<CpuLimit> {
    cpu_limit_named(probe, None)
}

/// The strongest CPU limit a probe shows on the ends it ran on, the server
/// named `server` when given ("nas's CPU quota"; else "the server's"). A disk
/// probe the server ran on its own disk (`Probe.host`) is judged by the
/// server's CPU alone (the client only waits for its samples), its jobs
/// counting as streams; a full process of one job is one core at its limit.
pub fn cpu_limit_named(probe: &Probe, server: Option<&str>) -> Option<CpuLimit> {
    let (streams, disk) = match &probe.spec {
        ProbeSpec::Net(n) => (n.streams.max(1), false),
        ProbeSpec::Disk(d) => (d.jobs.max(1), true),
        _ => (1, false),
    };
    let sides: &[Side] = if disk && probe.ran_remotely() { &[Side::Remote] } else { &[Side::Remote, Side::Local] };
    let mut found: Vec<CpuLimit> = Vec::new();
    for &side in sides {
        let whose = match (side, server) {
            (Side::Remote, Some(name)) => format!("{name}'s"),
            _ => side.possessive().to_string(),
        };
        match probe.cpu_load(side) {
            Some(load) => found.extend(limit_of_load(&load, side, &whose, streams, disk)),
            None => {
                let percent = probe.cpu_percent(side);
                if let Some(per_stream) = percent.map(|p| p / streams as f64).filter(|p| *p >= CPU_BUSY_PERCENT) {
                    found.push(CpuLimit {
                        side,
                        kind: CpuLimitKind::Busy,
                        evidence: format!("{whose} CPU: {per_stream:.0}% of one core per stream busy during the test"),
                    });
                }
            }
        }
    }
    found.into_iter().min_by_key(|l| l.kind)
}

/// A quota that throttled in this share of its periods was at its limit the
/// whole test: a hop at its ceiling beside it does not hide it.
pub const FULLY_THROTTLED_SHARE: f64 = 0.90;

/// The CPU limit of a probe when it was a quota at its limit all along
/// (throttled in [`FULLY_THROTTLED_SHARE`] of its periods or more), on
/// either end: what a verdict names beside a hop at its own ceiling.
pub fn fully_held_quota(probe: &Probe, server: Option<&str>) -> Option<CpuLimit> {
    let full = |c: Option<&CgroupCpu>| {
        c.is_some_and(|c| c.periods >= MIN_PERIODS && c.throttled_share() >= FULLY_THROTTLED_SHARE)
    };
    let held = [Side::Remote, Side::Local].into_iter().any(|side| {
        probe
            .cpu_load(side)
            .is_some_and(|l| full(l.cgroup.as_ref()) || l.serving.iter().any(|s| full(s.cgroup.as_ref())))
    });
    cpu_limit_named(probe, server).filter(|l| held && l.kind == CpuLimitKind::Quota)
}

/// Only the limits a loopback test can meet besides copying memory: a quota or steal.
pub fn is_machine_limit(limit: &CpuLimit) -> bool {
    matches!(limit.kind, CpuLimitKind::Quota | CpuLimitKind::Steal)
}

/// A cgroup whose quota held its processes back during the window.
fn held_by_quota(cgroup: Option<&CgroupCpu>) -> Option<&CgroupCpu> {
    cgroup.filter(|c| c.periods >= MIN_PERIODS && c.throttled_share() >= THROTTLED_SHARE)
}

/// The quota as it is set: `cpu.max 5000 100000` (v2) or the v1 pair.
fn quota_setting(cg: &CgroupCpu) -> String {
    if cg.version == 1 {
        format!("cpu.cfs_quota_us {} per cpu.cfs_period_us {}", cg.quota_us, cg.period_us)
    } else {
        format!("cpu.max {} {}", cg.quota_us, cg.period_us)
    }
}

/// The strongest limit on the processes that served the share (smbd,
/// ganesha.nfsd, ...): their cgroup's quota, one thread at a full core, or
/// every CPU their affinity allows. Judged per process, so one
/// single-threaded daemon at a full core of eight is not read as 12.5%.
fn limit_of_serving(load: &CpuLoad, side: Side, whose: &str) -> Option<CpuLimit> {
    let named = |s: &ServingLoad| format!("{} (pid {})", s.name, s.pid);
    if let Some((s, cg)) = load.serving.iter().find_map(|s| Some((s, held_by_quota(s.cgroup.as_ref())?))) {
        return Some(CpuLimit {
            side,
            kind: CpuLimitKind::Quota,
            evidence: format!(
                "{whose} CPU: {} was throttled in {:.0}% of its cgroup's {} periods (quota {} of one core: cgroup {}, {}; {:.2} s stopped)",
                named(s),
                cg.throttled_share() * 100.0,
                cg.periods,
                cores_text(cg.quota_cores()),
                cg.path,
                quota_setting(cg),
                cg.throttled_s
            ),
        });
    }
    if let Some((s, t)) = load
        .serving
        .iter()
        .find_map(|s| Some((s, s.busiest_thread.as_ref().filter(|t| t.percent >= CPU_BUSY_PERCENT)?)))
    {
        let thread = if s.threads <= 1 { "its one thread".to_string() } else { format!("its thread {}", t.name) };
        return Some(CpuLimit {
            side,
            kind: CpuLimitKind::Thread,
            evidence: format!(
                "{whose} CPU: {} kept one core {:.0}% busy with {thread} (one of {} cores; the daemon used {:.0}% of one core in all)",
                named(s),
                t.percent.min(100.0),
                load.cores,
                s.percent
            ),
        });
    }
    if let Some(limit) = shared_core(load, side, whose) {
        return Some(limit);
    }
    let affinity = |s: &&ServingLoad| {
        s.cpus_allowed.filter(|&n| n < load.cores && s.percent >= CPU_BUSY_PERCENT * f64::from(n)).is_some()
    };
    load.serving.iter().find(affinity).map(|s| CpuLimit {
        side,
        kind: CpuLimitKind::Cores,
        evidence: format!(
            "{whose} CPU: {} kept busy the {} of {} cores its CPU affinity allows ({:.0}% of one core)",
            named(s),
            s.cpus_allowed.unwrap_or(0),
            load.cores,
            s.percent
        ),
    })
}

/// A serving thread that was CPU-bound (ran or waited to run most of the
/// window) and spent a good part of that waiting: the CPU was shared with
/// other work, which is named. Only where the kernel counts the wait.
/// (A thread that serves requests runs less than all of the window even at
/// its limit: the time between a reply and the next request.)
fn shared_core(load: &CpuLoad, side: Side, whose: &str) -> Option<CpuLimit> {
    let (s, t, waited) = load.serving.iter().find_map(|s| {
        let t = s.busiest_thread.as_ref()?;
        let waited = t.waiting_percent?;
        let demand = t.percent + waited;
        let bound = demand >= SHARED_DEMAND_PERCENT && waited >= SHARED_WAIT_SHARE * demand;
        (t.percent < CPU_BUSY_PERCENT && bound).then_some((s, t, waited))
    })?;
    let thread = if s.threads <= 1 { "its one thread".to_string() } else { format!("its thread {}", t.name) };
    let others: Vec<String> = load
        .processes
        .iter()
        .filter(|p| load.serving.iter().all(|served| served.pid != p.pid))
        .take(OTHERS_NAMED)
        .map(|p| format!("{} (pid {}) at {:.0}% of one core", p.name, p.pid, p.percent))
        .collect();
    let beside = if others.is_empty() { String::new() } else { format!("; beside it: {}", others.join(", ")) };
    Some(CpuLimit {
        side,
        kind: CpuLimitKind::Shared,
        evidence: format!(
            "{whose} CPU: {} (pid {}) wanted a whole core for {thread} and shared it: the thread ran {:.0}% of the test and waited {:.0}% for a CPU that other work held (one of {} cores{beside})",
            s.name, s.pid, t.percent, waited, load.cores
        ),
    })
}

fn limit_of_load(load: &CpuLoad, side: Side, whose: &str, streams: u32, disk: bool) -> Option<CpuLimit> {
    if let Some(limit) = limit_of_serving(load, side, whose) {
        return Some(limit);
    }
    if let Some(cg) = held_by_quota(load.cgroup.as_ref()) {
        let setting = quota_setting(cg);
        return Some(CpuLimit {
            side,
            kind: CpuLimitKind::Quota,
            evidence: format!(
                "{whose} CPU quota: its cgroup {} is held to {} of one core ({setting}) and was throttled in {:.0}% of {} periods ({:.2} s stopped)",
                cg.path,
                cores_text(cg.quota_cores()),
                cg.throttled_share() * 100.0,
                cg.periods,
                cg.throttled_s
            ),
        });
    }
    // Steal and softirq are the machine's, not the process's: a disk test
    // that used a tenth of a core is not held by them, a network stream
    // (whose work is packets) is.
    if !disk && load.steal_percent >= STEAL_PERCENT {
        return Some(CpuLimit {
            side,
            kind: CpuLimitKind::Steal,
            evidence: format!(
                "{whose} CPU: the hypervisor took {:.0}% of its CPU time for others (steal)",
                load.steal_percent
            ),
        });
    }
    if let Some(core) = load
        .per_core
        .iter()
        .filter(|c| !disk && c.busy_percent >= CORE_SATURATED_PERCENT && c.softirq_percent >= SOFTIRQ_SHARE_PERCENT)
        .max_by(|a, b| a.softirq_percent.total_cmp(&b.softirq_percent))
    {
        return Some(CpuLimit {
            side,
            kind: CpuLimitKind::Softirq,
            evidence: format!(
                "{whose} CPU: core {} was {:.0}% busy, {:.0}% of it in softirq (network packet processing; spread it with RSS/RPS or more queues)",
                core.cpu, core.busy_percent, core.softirq_percent
            ),
        });
    }
    let usable = streams.min(load.cores.max(1));
    if streams == 1 {
        if let Some(t) = load.busiest_thread().filter(|t| t.percent >= CPU_BUSY_PERCENT) {
            return Some(CpuLimit {
                side,
                kind: CpuLimitKind::Thread,
                evidence: format!(
                    "{whose} CPU: thread {} kept one core {:.0}% busy (one of {} cores; {:.0}% of the machine's CPU time in all)",
                    t.name,
                    t.percent.min(100.0),
                    load.cores,
                    load.machine_busy_percent()
                ),
            });
        }
    }
    // A disk probe's workers may have ended before their CPU time was read
    // (they are counted in the process, not listed), so its whole process
    // stands for its jobs; a network test lists its streams' threads.
    if disk && load.process_percent >= CPU_BUSY_PERCENT * f64::from(usable) {
        return Some(CpuLimit {
            side,
            kind: CpuLimitKind::Cores,
            evidence: format!(
                "{whose} CPU: the disk test kept {:.1} core(s) busy, all that its {streams} job(s) can use ({:.0}% of the machine's {} cores in all)",
                load.process_percent / 100.0,
                load.machine_busy_percent(),
                load.cores
            ),
        });
    }
    if streams > 1 && !disk && load.process_percent >= CPU_BUSY_PERCENT * f64::from(usable) {
        return Some(CpuLimit {
            side,
            kind: CpuLimitKind::Cores,
            evidence: format!(
                "{whose} CPU: the {streams} streams kept {:.1} of the {usable} cores they can use busy",
                load.process_percent / 100.0
            ),
        });
    }
    None
}

fn cores_text(cores: f64) -> String {
    if cores < 1.0 {
        format!("{:.0}%", cores * 100.0)
    } else {
        format!("{cores:.2} cores")
    }
}

/// Whether a net probe's `why` is TCP_INFO's advice to tune the system's
/// socket buffers (Linux's sysctls or Windows' autotuning, whichever platform
/// the sender ran on), not the advice about a `--window` the user asked for.
fn is_buffer_tuning_advice(why: &str) -> bool {
    (why.starts_with("receive window limited") || why.starts_with("send buffer limited")) && !why.contains("--window")
}

/// Settles a net probe's one-line diagnosis (`details.why` and its warning):
/// a CPU limit replaces the TCP_INFO buffer advice (a starved sender or
/// receiver fills its buffers, but bigger ones would not help); a stream at
/// its link's ceiling gets no buffer advice (the link, not a buffer, is full).
/// Returns the CPU limit it found.
pub fn settle_diagnosis(probe: &mut Probe, at_link_ceiling: bool) -> Option<CpuLimit> {
    let limit = if at_link_ceiling { None } else { cpu_limit(probe) };
    let buffer_advice = probe.why().is_some_and(is_buffer_tuning_advice);
    if limit.is_some() || (at_link_ceiling && buffer_advice) {
        probe.details.remove(details::WHY);
        probe.warnings.retain(|w| w.code != "single_stream_limited");
    }
    if let Some(l) = &limit {
        probe.details.insert(details::WHY.into(), serde_json::Value::String(format!("limited by {}", l.evidence)));
        probe.details.insert(details::CPU_LIMIT.into(), serde_json::to_value(l).expect("serialisable"));
        if !probe.warnings.iter().any(|w| w.code == "cpu_limited") {
            probe
                .warnings
                .push(Warning::new(headroom_result::WarningCode::CpuLimited, format!("limited by {}", l.evidence)));
        }
    }
    limit
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::{CgroupCpu, CoreLoad, NetSpec, ServingLoad, Summary, ThreadLoad};
    use serde_json::json;

    fn net_probe(streams: u32) -> Probe {
        Probe {
            id: "tcp-up-1".into(),
            name: String::new(),
            spec: ProbeSpec::Net(NetSpec {
                test: "tcp".into(),
                streams,
                protocol: "headroom".into(),
                peer: "198.18.1.1:5201".into(),
                rate_bits_per_sec: None,
                bytes: None,
                ..Default::default()
            }),
            summary: Summary { bytes_per_sec: 100e6, duration_s: 3.0, ..Summary::default() },
            samples: vec![],
            histogram: None,
            warnings: vec![],
            details: Default::default(),
            host: None,
        }
    }

    fn idle_load(cores: u32) -> CpuLoad {
        CpuLoad {
            wall_s: 3.0,
            cores,
            process_percent: 20.0,
            threads: vec![ThreadLoad { name: "tcp-send-0".into(), tid: 7, percent: 20.0, waiting_percent: None }],
            per_core: (0..cores)
                .map(|cpu| CoreLoad { cpu, busy_percent: 20.0, softirq_percent: 2.0, steal_percent: 0.0 })
                .collect(),
            ..CpuLoad::default()
        }
    }

    #[test]
    fn a_throttled_server_quota_is_named_and_replaces_the_buffer_advice() {
        let mut p = net_probe(1);
        let mut server = idle_load(2);
        server.cgroup = Some(CgroupCpu {
            version: 1,
            path: "/hr-cpu-1".into(),
            quota_us: 2000,
            period_us: 100_000,
            periods: 40,
            throttled_periods: 32,
            throttled_s: 2.5,
        });
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        p.details.insert("cpu_load_local".into(), serde_json::to_value(idle_load(2)).unwrap());
        p.details.insert("why".into(), json!("send buffer limited 80% of the time: raise net.core.wmem_max"));
        p.warnings.push(Warning::new(headroom_result::WarningCode::SingleStreamLimited, "send buffer ... wmem"));
        let l = settle_diagnosis(&mut p, false).expect("a limit");
        assert_eq!((l.side, l.kind), (Side::Remote, CpuLimitKind::Quota));
        assert!(l.evidence.contains("2% of one core") && l.evidence.contains("80% of 40 periods"), "{}", l.evidence);
        let why = p.details["why"].as_str().unwrap();
        assert!(why.contains("the server's CPU quota") && !why.contains("wmem"), "{why}");
        assert!(p.warnings.iter().all(|w| w.code != "single_stream_limited"));
        assert!(p.warnings.iter().any(|w| w.code == "cpu_limited"));
    }

    #[test]
    fn one_saturated_core_of_eight_is_found_where_the_average_hides_it() {
        let mut p = net_probe(1);
        let mut local = idle_load(8);
        local.process_percent = 101.0;
        local.threads = vec![ThreadLoad { name: "smbd".into(), tid: 9, percent: 99.0, waiting_percent: None }];
        p.details.insert("cpu_load_local".into(), serde_json::to_value(&local).unwrap());
        // The old figure, one core of eight, reads as 12.5% of the machine.
        p.details.insert("cpu_local_percent".into(), json!(101.0 / 8.0));
        let l = cpu_limit(&p).expect("a limit");
        assert_eq!((l.side, l.kind), (Side::Local, CpuLimitKind::Thread));
        assert!(l.evidence.contains("thread smbd kept one core 99% busy (one of 8 cores"), "{}", l.evidence);
    }

    #[test]
    fn many_streams_need_every_usable_core_busy_and_softirq_and_steal_are_named() {
        let mut p = net_probe(4);
        let mut server = idle_load(2);
        server.process_percent = 150.0;
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        assert!(cpu_limit(&p).is_none(), "1.5 of 2 cores is not saturated");
        server.process_percent = 195.0;
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        assert_eq!(cpu_limit(&p).unwrap().kind, CpuLimitKind::Cores);
        server.per_core[1] = CoreLoad { cpu: 1, busy_percent: 99.0, softirq_percent: 70.0, steal_percent: 0.0 };
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        let l = cpu_limit(&p).unwrap();
        assert_eq!(l.kind, CpuLimitKind::Softirq);
        assert!(l.evidence.contains("core 1 was 99% busy, 70% of it in softirq"), "{}", l.evidence);
        server.steal_percent = 30.0;
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        assert_eq!(cpu_limit(&p).unwrap().kind, CpuLimitKind::Steal);
    }

    fn smbd(percent: f64, thread_percent: f64, threads: u32) -> ServingLoad {
        ServingLoad {
            name: "smbd".into(),
            pid: 4242,
            found_by: "port 445".into(),
            percent,
            busiest_thread: Some(ThreadLoad {
                name: "smbd".into(),
                tid: 4242,
                percent: thread_percent,
                waiting_percent: None,
            }),
            threads,
            cpus_allowed: Some(8),
            cgroup: None,
        }
    }

    #[test]
    fn the_daemon_serving_the_share_is_named_by_its_own_cgroup_and_threads() {
        // The server's own process (headroom serve) idles: only smbd's figures show the limit.
        let mut p = net_probe(1);
        let mut server = idle_load(8);
        server.process_percent = 1.0;
        server.threads.clear();
        let mut starved = smbd(5.0, 5.0, 1);
        starved.cgroup = Some(CgroupCpu {
            version: 2,
            path: "/nas/smbd".into(),
            quota_us: 5000,
            period_us: 100_000,
            periods: 302,
            throttled_periods: 296,
            throttled_s: 27.1,
        });
        server.serving = vec![starved];
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        let l = cpu_limit_named(&p, Some("nas")).expect("smbd's quota");
        assert_eq!((l.side, l.kind), (Side::Remote, CpuLimitKind::Quota));
        assert!(
            l.evidence.starts_with(
                "nas's CPU: smbd (pid 4242) was throttled in 98% of its cgroup's 302 periods (quota 5% of one core"
            ) && l.evidence.contains("cpu.max 5000 100000"),
            "{}",
            l.evidence
        );

        // A single-threaded daemon at a full core of eight: 12.5% of the machine, and the limit.
        server.serving = vec![smbd(99.0, 99.0, 1)];
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        let l = cpu_limit_named(&p, Some("nas")).expect("one core");
        assert_eq!(l.kind, CpuLimitKind::Thread);
        assert!(
            l.evidence.contains("smbd (pid 4242) kept one core 99% busy with its one thread (one of 8 cores"),
            "{}",
            l.evidence
        );

        // Busy but spread over threads, below a core each: no limit.
        server.serving = vec![smbd(150.0, 40.0, 4)];
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        assert!(cpu_limit(&p).is_none());

        // Pinned to 2 of 8 cores and using both.
        let mut pinned = smbd(190.0, 60.0, 4);
        pinned.cpus_allowed = Some(2);
        server.serving = vec![pinned];
        p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
        let l = cpu_limit(&p).expect("its affinity");
        assert_eq!(l.kind, CpuLimitKind::Cores);
        assert!(l.evidence.contains("the 2 of 8 cores its CPU affinity allows"), "{}", l.evidence);
    }

    #[test]
    fn a_daemon_thread_that_waited_for_its_core_is_named_with_what_held_it() {
        let mut p = net_probe(1);
        let mut server = idle_load(2);
        server.processes = vec![
            headroom_result::ProcessLoad { name: "smbd".into(), pid: 4242, percent: 52.0 },
            headroom_result::ProcessLoad { name: "backup".into(), pid: 77, percent: 49.0 },
        ];
        let mut with_wait = |ran: f64, waited: Option<f64>| {
            let mut shared = smbd(ran, ran, 1);
            shared.busiest_thread.as_mut().unwrap().waiting_percent = waited;
            server.serving = vec![shared];
            p.details.insert("cpu_load_remote".into(), serde_json::to_value(&server).unwrap());
            cpu_limit_named(&p, Some("nas"))
        };
        // Half a core and no wait known (Windows): nothing to say.
        assert!(with_wait(52.0, None).is_none());
        // Half a core with the CPU free the rest of the time: the daemon was not held.
        assert!(with_wait(52.0, Some(3.0)).is_none());
        // Busy most of the time, but the wait a small part of it: not held by the sharing.
        assert!(with_wait(80.0, Some(10.0)).is_none());
        // Half a core run and 45% waited: it wanted the whole core.
        let l = with_wait(52.0, Some(45.0)).expect("a shared core");
        assert_eq!((l.side, l.kind), (Side::Remote, CpuLimitKind::Shared));
        assert!(
            l.evidence.contains("nas's CPU: smbd (pid 4242) wanted a whole core for its one thread and shared it")
                && l.evidence.contains("ran 52% of the test and waited 45%")
                && l.evidence.contains("beside it: backup (pid 77) at 49% of one core"),
            "{}",
            l.evidence
        );
    }

    #[test]
    fn at_the_link_ceiling_no_buffer_advice_and_no_cpu_blame() {
        let mut p = net_probe(1);
        p.details.insert("why".into(), json!("receive window limited 60% of the time: raise net.core.rmem_max"));
        p.warnings.push(Warning::new(headroom_result::WarningCode::SingleStreamLimited, "receive window ... rmem"));
        p.details.insert("cpu_remote_percent".into(), json!(99.0));
        assert!(settle_diagnosis(&mut p, true).is_none());
        assert!(!p.details.contains_key("why") && p.warnings.is_empty());
        // A Windows sender's advice speaks of autotuning, not sysctls: the same rule.
        let mut w = net_probe(1);
        w.details.insert(
            "why".into(),
            json!("send buffer limited 70% of the time: check on the sender that TCP autotuning is on (netsh int tcp show global)"),
        );
        assert!(settle_diagnosis(&mut w, true).is_none());
        assert!(!w.details.contains_key("why"));
        // The --window advice is the user's cap, not the system's: it stays.
        let mut c = net_probe(1);
        c.details
            .insert("why".into(), json!("receive window limited 60% of the time by the --window 12.00 KiB asked for"));
        settle_diagnosis(&mut c, true);
        assert!(c.details.contains_key("why"));
        // Below the ceiling the legacy percent still speaks.
        let mut q = net_probe(1);
        q.details.insert("cpu_remote_percent".into(), json!(99.0));
        assert_eq!(settle_diagnosis(&mut q, false).unwrap().kind, CpuLimitKind::Busy);
    }
}
