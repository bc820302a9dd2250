//! The soak loop: runs each probe of the cycle in turn, for `probe_time`
//! each, until the remaining duration is used up or the stop flag is set.
//! Every sample goes to the store as it arrives; at the end of a probe's turn
//! its live samples are replaced by the engine's final ones (which carry
//! latency) and its result is stored without samples.
//!
//! A probe that needs the server and cannot reach it records a
//! `server_outage` event (once, until the server answers again) and the loop
//! goes on with the other probes. The loop knows probes only through
//! [`CycleProbe`]; the binary adapts the disk and net engines to it.

use crate::store::{EventRow, SampleRow, Store, StoreError};
use crate::{now_unix, Metrics};
use headroom_result::Probe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One per-second sample as a probe reports it, on the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LiveSample {
    pub t_unix: f64,
    pub bytes_per_sec: f64,
    pub iops: Option<f64>,
    pub lat_mean_ns: Option<f64>,
    pub lat_p99_ns: Option<f64>,
}

impl From<&LiveSample> for SampleRow {
    fn from(s: &LiveSample) -> SampleRow {
        SampleRow {
            t_unix: s.t_unix,
            bytes_per_sec: s.bytes_per_sec,
            iops: s.iops,
            lat_mean_ns: s.lat_mean_ns,
            lat_p99_ns: s.lat_p99_ns,
        }
    }
}

/// What a probe's turn produced: its result document probe, whose samples'
/// `t_s` count from `measured_start_unix`.
#[derive(Debug, Clone)]
pub struct ProbeOutcome {
    pub probe: Probe,
    pub measured_start_unix: f64,
}

/// Why a probe's turn produced nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeFailure {
    /// The server could not be reached (or was lost): an outage, not an error.
    Unreachable(String),
    Failed(String),
}

/// A probe the soak cycles through (write, read, iops, net).
pub trait CycleProbe {
    /// Name in the cycle and the database: write, read, iops, net.
    fn name(&self) -> &str;
    /// Whether the probe talks to the server (its failures are outages).
    fn uses_server(&self) -> bool {
        false
    }
    /// Runs for about `time`, calling `on_sample` about once a second, and
    /// returns early (with what it measured) when `stop` is set.
    fn run(
        &mut self,
        time: Duration,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&LiveSample),
    ) -> Result<ProbeOutcome, ProbeFailure>;
}

/// How the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The planned duration is used up.
    Duration,
    /// The stop flag (Ctrl-C) was set.
    Interrupted,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Duration => "duration",
            StopReason::Interrupted => "interrupted",
        }
    }
}

/// What the caller sees as the soak goes.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    TurnStarted { cycle: i64, probe: &'a str, time: Duration },
    Sample { cycle: i64, probe: &'a str, sample: &'a LiveSample },
    TurnEnded { cycle: i64, probe: &'a str, outcome: Result<&'a ProbeOutcome, &'a ProbeFailure> },
}

/// Settings of the loop.
#[derive(Debug, Clone, Copy)]
pub struct LoopSettings {
    /// Time per probe per cycle.
    pub probe_time: Duration,
    /// Time left to soak; `None`: until stopped.
    pub remaining: Option<Duration>,
    /// Turns shorter than this are not started (the duration is used up).
    pub min_turn: Duration,
}

/// Runs cycles of `probes` into `store` under `session`.
pub fn run_cycles(
    store: &mut Store,
    session: i64,
    probes: &mut [Box<dyn CycleProbe>],
    settings: LoopSettings,
    stop: &AtomicBool,
    metrics: Option<&Metrics>,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<StopReason, StoreError> {
    let deadline = settings.remaining.map(|r| Instant::now() + r);
    let mut n = store.next_cycle_number()?;
    loop {
        let mut any_measured = false;
        for probe in probes.iter_mut() {
            if stop.load(Ordering::Relaxed) {
                return Ok(StopReason::Interrupted);
            }
            let time = match deadline {
                Some(d) => settings.probe_time.min(d.saturating_duration_since(Instant::now())),
                None => settings.probe_time,
            };
            let cut_short = time < settings.probe_time;
            if time.is_zero() || (cut_short && time < settings.min_turn.max(Duration::from_millis(500))) {
                return Ok(StopReason::Duration);
            }
            if let Some(m) = metrics {
                m.cycle(n);
            }
            let name = probe.name().to_string();
            let started = Instant::now();
            let cycle = store.begin_cycle(session, n, &name, now_unix())?;
            on_progress(Progress::TurnStarted { cycle: n, probe: &name, time });
            let mut write_error = None;
            let result = probe.run(time, stop, &mut |s| {
                if let Err(e) = store.add_sample(cycle, &name, &s.into()) {
                    write_error.get_or_insert(e);
                }
                if let Some(m) = metrics {
                    m.sample(&name, s.bytes_per_sec, s.iops);
                }
                on_progress(Progress::Sample { cycle: n, probe: &name, sample: s });
            });
            if let Some(e) = write_error {
                return Err(e);
            }
            any_measured |= result.is_ok() || started.elapsed() >= Duration::from_secs(1);
            match &result {
                Ok(outcome) => {
                    let finals: Vec<SampleRow> = outcome
                        .probe
                        .samples
                        .iter()
                        .map(|s| SampleRow {
                            t_unix: outcome.measured_start_unix + s.t_s,
                            bytes_per_sec: s.bytes_per_sec,
                            iops: s.iops,
                            lat_mean_ns: s.latency_ns_mean,
                            lat_p99_ns: s.latency_ns_p99,
                        })
                        .collect();
                    if !finals.is_empty() {
                        store.replace_samples(cycle, &name, &finals)?;
                    }
                    if let (Some(m), Some(h)) = (metrics, outcome.probe.histogram.as_ref()) {
                        m.latency(&name, &h.buckets);
                    }
                    let mut stored = outcome.probe.clone();
                    stored.samples.clear();
                    let value = serde_json::to_value(&stored).expect("probes serialise");
                    store.end_cycle(cycle, now_unix(), Some(&value), None)?;
                    if probe.uses_server() {
                        if let Some(id) = store.open_event("server_outage", None)? {
                            store.end_event(id, now_unix(), None)?;
                        }
                    }
                }
                Err(ProbeFailure::Unreachable(why)) => {
                    store.end_cycle(cycle, now_unix(), None, Some(why))?;
                    if store.open_event("server_outage", None)?.is_none() {
                        store.add_event(&EventRow {
                            id: 0,
                            t_unix: now_unix(),
                            end_unix: None,
                            kind: "server_outage".into(),
                            source: "soak".into(),
                            device: None,
                            message: format!("server unreachable: {why}; the other probes go on"),
                            details: None,
                        })?;
                        if let Some(m) = metrics {
                            m.detection("server_outage");
                        }
                    }
                }
                Err(ProbeFailure::Failed(why)) => {
                    store.end_cycle(cycle, now_unix(), None, Some(why))?;
                    store.add_event(&EventRow {
                        id: 0,
                        t_unix: now_unix(),
                        end_unix: None,
                        kind: "probe_error".into(),
                        source: "soak".into(),
                        device: None,
                        message: format!("{name}: {why}"),
                        details: None,
                    })?;
                    if let Some(m) = metrics {
                        m.detection("probe_error");
                    }
                }
            }
            on_progress(Progress::TurnEnded { cycle: n, probe: &name, outcome: result.as_ref() });
        }
        n += 1;
        if !any_measured {
            // Every probe failed at once (e.g. only `net`, server down):
            // wait a second before trying again rather than spin.
            let until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SoakConfig, SoakInfo};
    use headroom_result::{Sample, Summary};

    /// A probe that reports `level` bytes/s once per 100 ms "second", or fails.
    struct Fake {
        name: &'static str,
        level: f64,
        fail: Option<ProbeFailure>,
        uses_server: bool,
    }

    impl CycleProbe for Fake {
        fn name(&self) -> &str {
            self.name
        }
        fn uses_server(&self) -> bool {
            self.uses_server
        }
        fn run(
            &mut self,
            time: Duration,
            stop: &AtomicBool,
            on_sample: &mut dyn FnMut(&LiveSample),
        ) -> Result<ProbeOutcome, ProbeFailure> {
            if let Some(f) = &self.fail {
                return Err(f.clone());
            }
            let start = now_unix();
            let mut samples = Vec::new();
            let ticks = (time.as_secs_f64() / 0.1).round() as usize;
            for i in 1..=ticks {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
                let s = LiveSample { t_unix: now_unix(), bytes_per_sec: self.level, ..Default::default() };
                on_sample(&s);
                samples.push(Sample {
                    t_s: i as f64 * 0.1,
                    bytes_per_sec: self.level,
                    latency_ns_mean: Some(5e4),
                    ..Default::default()
                });
            }
            let probe = Probe {
                id: self.name.into(),
                name: String::new(),
                // Through JSON so fields added to the spec types later (with
                // serde defaults) do not break this fake.
                spec: serde_json::from_value(serde_json::json!({
                    "kind": "cpu",
                    "spec": {"kernel": "fake", "threads": 1, "buffer_size": 1}
                }))
                .unwrap(),
                summary: Summary { bytes_per_sec: self.level, duration_s: time.as_secs_f64(), ..Default::default() },
                samples,
                histogram: None,
                warnings: vec![],
                details: Default::default(),
            };
            Ok(ProbeOutcome { probe, measured_start_unix: start })
        }
    }

    fn store(dir: &std::path::Path) -> Store {
        let info = SoakInfo {
            started_at: "2026-11-21T22:00:00Z".into(),
            started_unix: now_unix(),
            planned_s: None,
            config: SoakConfig {
                cycle: vec![],
                probe_s: 1.0,
                path: None,
                server: None,
                vmkernel_log: None,
                extra: Default::default(),
            },
            host: None,
        };
        Store::create(&dir.join("s.sqlite"), &info).unwrap()
    }

    #[test]
    fn cycles_until_the_duration_is_used_up_and_outages_are_events() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = store(dir.path());
        let session = st.begin_session(now_unix()).unwrap();
        let mut probes: Vec<Box<dyn CycleProbe>> = vec![
            Box::new(Fake { name: "write", level: 1e6, fail: None, uses_server: false }),
            Box::new(Fake {
                name: "net",
                level: 0.0,
                fail: Some(ProbeFailure::Unreachable("connection refused".into())),
                uses_server: true,
            }),
        ];
        let settings = LoopSettings {
            probe_time: Duration::from_millis(500),
            remaining: Some(Duration::from_millis(1600)),
            min_turn: Duration::ZERO,
        };
        let metrics = Metrics::new();
        let stop = AtomicBool::new(false);
        let reason = run_cycles(&mut st, session, &mut probes, settings, &stop, Some(&metrics), &mut |_| {}).unwrap();
        assert_eq!(reason, StopReason::Duration);
        let cycles = st.cycles().unwrap();
        let writes = cycles.iter().filter(|c| c.probe == "write").count();
        assert_eq!(writes, 3, "{cycles:?}");
        // One outage event however many turns failed, still open.
        let events = st.events().unwrap();
        assert_eq!(events.iter().filter(|e| e.kind == "server_outage").count(), 1);
        assert!(events[0].end_unix.is_none());
        // Final samples (with latency) replaced the live ones.
        let mut lat = 0;
        st.for_each_sample("write", |s| lat += usize::from(s.lat_mean_ns.is_some())).unwrap();
        assert_eq!(lat as u64, st.sample_count(Some("write")).unwrap());
        assert_eq!(lat, 15);
        assert!(metrics.render().contains("headroom_soak_detections_total{kind=\"server_outage\"} 1"));

        // The server comes back: the outage closes.
        probes[1] = Box::new(Fake { name: "net", level: 5e6, fail: None, uses_server: true });
        let settings = LoopSettings { remaining: Some(Duration::from_millis(1300)), ..settings };
        run_cycles(&mut st, session, &mut probes, settings, &stop, None, &mut |_| {}).unwrap();
        let outage = st.events().unwrap().into_iter().find(|e| e.kind == "server_outage").unwrap();
        assert!(outage.end_unix.is_some());
    }

    #[test]
    fn stop_flag_ends_the_loop() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = store(dir.path());
        let session = st.begin_session(now_unix()).unwrap();
        let mut probes: Vec<Box<dyn CycleProbe>> =
            vec![Box::new(Fake { name: "read", level: 1e6, fail: None, uses_server: false })];
        let stop = AtomicBool::new(false);
        let settings =
            LoopSettings { probe_time: Duration::from_millis(300), remaining: None, min_turn: Duration::ZERO };
        let mut turns = 0;
        let reason = run_cycles(&mut st, session, &mut probes, settings, &stop, None, &mut |p| {
            if let Progress::TurnEnded { .. } = p {
                turns += 1;
                if turns == 2 {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        })
        .unwrap();
        assert_eq!(reason, StopReason::Interrupted);
        assert_eq!(st.cycles().unwrap().len(), 2);
    }
}
