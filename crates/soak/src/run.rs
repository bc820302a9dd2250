//! The soak loop: runs each turn of the cycle on the Runner, for
//! `probe_time` each, until the remaining duration is used up or the stop
//! flag is set. The store is the Runner's sink: every sample goes to it as
//! it arrives; at the end of a turn its live samples are replaced by the
//! engine's final ones (which carry latency) and its probe is stored without
//! samples.
//!
//! A turn that needs the server and cannot reach it records a
//! `server_outage` event (once, until the server answers again) and the loop
//! goes on with the other turns. The loop knows probes only as requests
//! ([`Turn`]) run by whatever engines the caller gave the Runner.
//!
//! Long (about 640 lines): about 400 lines of code, the rest its unit tests.

use crate::store::{EventRow, SampleRow, Store, StoreError};
use crate::{now_unix, Metrics};
use headroom_result::Probe;
use headroom_result::SoakEventKind;
pub use headroom_runner::LiveSample;
use headroom_runner::{Plan, ProbeError, ProbeRequest, ProbeRun, Runner, Sink};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

impl From<&LiveSample> for SampleRow {
    fn from(s: &LiveSample) -> SampleRow {
        SampleRow {
            t_unix: s.t_unix,
            bytes_per_sec: s.bytes_per_sec,
            iops: s.iops,
            lat_mean_ns: s.latency_ns_mean,
            lat_p99_ns: s.latency_ns_p99,
        }
    }
}

/// What a probe's turn produced: its result document probe, whose samples'
/// `t_s` count from `measured_start_unix`.
#[derive(Debug, Clone)]
pub struct ProbeOutcome {
    /// The probe, as it goes into the result document (and the cycle's `result`).
    pub probe: Probe,
    /// Unix seconds at which the probe's samples' `t_s` count from.
    pub measured_start_unix: f64,
}

/// Why a probe's turn produced nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeFailure {
    /// The server could not be reached (or was lost): an outage, not an error.
    Unreachable(String),
    /// The probe failed for another reason (an I/O error, a refused target): an error.
    Failed(String),
}

impl ProbeFailure {
    fn of(e: &ProbeError) -> Self {
        match e {
            ProbeError::Unreachable(why) | ProbeError::Lost(why) => ProbeFailure::Unreachable(why.clone()),
            other => ProbeFailure::Failed(other.to_string()),
        }
    }
}

/// What a turn's run on the Runner amounts to for the soak: a probe ended
/// early by a lost server is an outage; by another error, a failure only
/// when it measured nothing.
fn turn_outcome(run: ProbeRun) -> Result<ProbeOutcome, ProbeFailure> {
    let measured = run.result.map_err(|e| ProbeFailure::of(&e))?;
    match &measured.error {
        Some(e @ (ProbeError::Unreachable(_) | ProbeError::Lost(_))) => Err(ProbeFailure::of(e)),
        Some(e) if measured.probe.samples.is_empty() => Err(ProbeFailure::Failed(e.to_string())),
        _ => Ok(ProbeOutcome { probe: measured.probe, measured_start_unix: measured.started_unix }),
    }
}

/// A probe the soak cycles through (write, read, iops, net, remote-*): its name in
/// the cycle and the database, whether it talks to the server (its failures
/// are outages), and the request for a turn of a given length.
pub struct Turn {
    /// The probe's name in the cycle and the database: write, read, iops, net,
    /// remote-write, remote-read or remote-iops.
    pub name: String,
    /// Whether it talks to the server, so that its failures count as outages.
    pub uses_server: bool,
    /// The request for one turn of the given length.
    pub request: Box<dyn Fn(Duration) -> ProbeRequest>,
}

impl Turn {
    /// The plan of a whole cycle at `probe_time` a turn, for the Runner to
    /// prepare before the first turn (the test file is laid out once).
    pub fn cycle_plan(turns: &[Turn], probe_time: Duration) -> Plan {
        Plan::new(turns.iter().map(|t| (t.request)(probe_time)).collect())
    }
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
    /// The word stored as the session's `stop_reason`: duration or interrupted.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Duration => "duration",
            StopReason::Interrupted => "interrupted",
        }
    }
}

/// What the caller sees as the soak goes.
#[derive(Debug, Clone)]
pub enum SoakEvent<'a> {
    /// A probe's turn begins.
    TurnStarted {
        /// The cycle's number (counting on across sessions).
        cycle: i64,
        /// The probe's name: write, read, iops, net or a remote-* one.
        probe: &'a str,
        /// How long the turn runs (the last turn may be shorter).
        time: Duration,
    },
    /// A live sample of the running turn (warm-up included).
    Sample {
        /// The cycle's number (counting on across sessions).
        cycle: i64,
        /// The probe's name: write, read, iops, net or a remote-* one.
        probe: &'a str,
        /// The sample, as the Runner reported it.
        sample: &'a LiveSample,
    },
    /// A probe's turn ended.
    TurnEnded {
        /// The cycle's number (counting on across sessions).
        cycle: i64,
        /// The probe's name: write, read, iops, net or a remote-* one.
        probe: &'a str,
        /// The measured probe, or why there is none.
        outcome: Result<&'a ProbeOutcome, &'a ProbeFailure>,
    },
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

/// The Runner's sink during one turn: the store, the metrics, the caller.
struct TurnSink<'a> {
    store: &'a Store,
    cycle: i64,
    cycle_row: i64,
    name: &'a str,
    metrics: Option<&'a Metrics>,
    on_progress: &'a mut dyn FnMut(SoakEvent),
    write_error: Option<StoreError>,
    /// Live samples seen: a turn of a second or less may have none (its one
    /// sample arrives only with the outcome), and the metrics must still see it.
    live_samples: usize,
    /// Where the previous sample's interval ended: the metrics count what
    /// each interval moved.
    last_elapsed: Duration,
}

impl Sink for TurnSink<'_> {
    fn sample(&mut self, _index: usize, _request: &ProbeRequest, s: &LiveSample) {
        let interval = s.elapsed.saturating_sub(self.last_elapsed);
        self.last_elapsed = s.elapsed;
        // In a soak every second counts; a warm-up (none is planned) would not.
        if s.ramping {
            return;
        }
        if let Err(e) = self.store.add_sample(self.cycle_row, self.name, &s.into()) {
            self.write_error.get_or_insert(e);
        }
        if let Some(m) = self.metrics {
            m.sample(self.name, interval, s.bytes_per_sec, s.iops);
        }
        self.live_samples += 1;
        (self.on_progress)(SoakEvent::Sample { cycle: self.cycle, probe: self.name, sample: s });
    }
}

/// Runs cycles of `turns` on `runner` into `store` under `session`.
#[allow(clippy::too_many_arguments)]
pub fn run_cycles(
    store: &mut Store,
    session: i64,
    runner: &mut Runner,
    turns: &[Turn],
    settings: LoopSettings,
    stop: &AtomicBool,
    metrics: Option<&Metrics>,
    on_progress: &mut dyn FnMut(SoakEvent),
) -> Result<StopReason, StoreError> {
    let deadline = settings.remaining.map(|r| Instant::now() + r);
    let plan = Turn::cycle_plan(turns, settings.probe_time);
    let mut n = store.next_cycle_number()?;
    let mut last_analysis = None;
    loop {
        let mut any_measured = false;
        for (index, turn) in turns.iter().enumerate() {
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
            let name = turn.name.as_str();
            let started = Instant::now();
            let cycle = store.begin_cycle(session, n, name, now_unix())?;
            on_progress(SoakEvent::TurnStarted { cycle: n, probe: name, time });
            let request = (turn.request)(time);
            // A server runs only the requests of the plan it prepared: a turn
            // there cut short by the end of the soak is the planned one,
            // stopped when its time is up.
            let stop_after = (cut_short && request.at.is_some()).then_some(time);
            let request = if stop_after.is_some() { plan.requests[index].clone() } else { request };
            let mut sink = TurnSink {
                store: &*store,
                cycle: n,
                cycle_row: cycle,
                name,
                metrics,
                on_progress: &mut *on_progress,
                write_error: None,
                live_samples: 0,
                last_elapsed: Duration::ZERO,
            };
            let run =
                stopped_after(stop_after, stop, |stop| runner.run_one(index, &request, &plan, stop, &mut [&mut sink]));
            if let Some(e) = sink.write_error {
                return Err(e);
            }
            let live_samples = sink.live_samples;
            let result = turn_outcome(run);
            any_measured |= result.is_ok() || started.elapsed() >= Duration::from_secs(1);
            let unseen_by_metrics = if live_samples == 0 { metrics } else { None };
            record_turn(store, cycle, name, turn.uses_server, &result, metrics)?;
            if let (Some(m), Ok(outcome)) = (unseen_by_metrics, &result) {
                let mut last_t = 0.0;
                for s in &outcome.probe.samples {
                    let interval = Duration::from_secs_f64((s.t_s - last_t).max(0.0));
                    last_t = s.t_s;
                    m.sample(name, interval, s.bytes_per_sec, s.iops);
                }
            }
            on_progress(SoakEvent::TurnEnded { cycle: n, probe: name, outcome: result.as_ref() });
        }
        n += 1;
        if let Some(m) = metrics {
            if last_analysis.is_none_or(|t: Instant| t.elapsed() >= ANALYSIS_EVERY) {
                publish_findings(store, m);
                last_analysis = Some(Instant::now());
            }
        }
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

/// How often the metrics' findings are redone from the store: the whole
/// analysis (dips, drift, flaps, cliffs) reads every sample, ~0.1 s for a day's.
const ANALYSIS_EVERY: Duration = Duration::from_secs(60);

/// The findings of the soak so far, counted by kind, on the metrics endpoint:
/// what the end-of-soak analysis would report now (periodic dips and a
/// vmkernel.log's flaps are only known from the whole series). A failed
/// analysis leaves the previous figures; the soak goes on.
fn publish_findings(store: &Store, metrics: &Metrics) {
    let Ok(doc) = crate::doc::result_from_store(store, crate::doc::SampleDetail::None) else { return };
    let mut counts = std::collections::BTreeMap::new();
    for d in doc.soak.iter().flat_map(|s| &s.detections) {
        *counts.entry(d.kind.as_str().to_string()).or_insert(0) += 1;
    }
    metrics.findings(&counts);
}

/// Calls `run` with a stop flag that follows `stop` and, with a `limit`, is
/// also set once that much time has passed.
fn stopped_after<T>(limit: Option<Duration>, stop: &AtomicBool, run: impl FnOnce(&AtomicBool) -> T) -> T {
    let Some(limit) = limit else { return run(stop) };
    let (turn_stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let end = Instant::now() + limit;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if stop.load(Ordering::Relaxed) || Instant::now() >= end {
                    turn_stop.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let out = run(&turn_stop);
        done.store(true, Ordering::Relaxed);
        out
    })
}

/// Stores the end of a turn: its final samples and probe, or the outage or
/// error that ended it.
fn record_turn(
    store: &mut Store,
    cycle: i64,
    name: &str,
    uses_server: bool,
    result: &Result<ProbeOutcome, ProbeFailure>,
    metrics: Option<&Metrics>,
) -> Result<(), StoreError> {
    match result {
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
                store.replace_samples(cycle, name, &finals)?;
            }
            if let (Some(m), Some(h)) = (metrics, outcome.probe.histogram.as_ref()) {
                m.latency(name, &h.buckets);
            }
            let mut stored = outcome.probe.clone();
            stored.samples.clear();
            let value = serde_json::to_value(&stored).expect("probes serialise");
            store.end_cycle(cycle, now_unix(), Some(&value), None)?;
            if uses_server {
                if let Some(id) = store.open_event(SoakEventKind::ServerOutage, None)? {
                    store.end_event(id, now_unix(), None)?;
                }
            }
        }
        Err(ProbeFailure::Unreachable(why)) => {
            store.end_cycle(cycle, now_unix(), None, Some(why))?;
            if store.open_event(SoakEventKind::ServerOutage, None)?.is_none() {
                store.add_event(&EventRow {
                    id: 0,
                    t_unix: now_unix(),
                    end_unix: None,
                    kind: SoakEventKind::ServerOutage,
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
                kind: SoakEventKind::ProbeError,
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SoakConfig, SoakInfo};
    use headroom_result::{Sample, Summary};
    use headroom_runner::{EngineKind, Expected, Measured, ProbeEngine};

    /// What the fake engine should do for one turn.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Fake {
        name: String,
        level: f64,
        /// Unreachable with this reason instead of measuring.
        unreachable: Option<String>,
        time: Duration,
    }

    /// An engine that reports `level` bytes/s once per 100 ms "second", or
    /// finds the server unreachable: the loop's bookkeeping without a disk.
    struct FakeEngine;

    impl ProbeEngine for FakeEngine {
        fn kind(&self) -> EngineKind {
            EngineKind::Cpu
        }
        fn run(
            &mut self,
            request: &ProbeRequest,
            stop: &AtomicBool,
            on_sample: &mut dyn FnMut(&LiveSample),
        ) -> Result<Measured, ProbeError> {
            let fake: Fake = request.params()?;
            if let Some(why) = fake.unreachable {
                return Err(ProbeError::Unreachable(why));
            }
            let (time, level) = (fake.time, fake.level);
            let start = now_unix();
            let mut samples = Vec::new();
            let ticks = (time.as_secs_f64() / 0.1).round() as usize;
            for i in 1..=ticks {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
                let elapsed = Duration::from_millis(100 * i as u64);
                let s = LiveSample { t_unix: now_unix(), elapsed, bytes_per_sec: level, ..Default::default() };
                on_sample(&s);
                samples.push(Sample {
                    t_s: i as f64 * 0.1,
                    bytes_per_sec: level,
                    latency_ns_mean: Some(5e4),
                    ..Default::default()
                });
            }
            let probe = Probe {
                id: fake.name.clone(),
                name: String::new(),
                // Through JSON so fields added to the spec types later (with
                // serde defaults) do not break this fake.
                spec: serde_json::from_value(serde_json::json!({
                    "kind": "cpu",
                    "spec": {"kernel": "fake", "threads": 1, "buffer_size": 1}
                }))
                .unwrap(),
                summary: Summary { bytes_per_sec: level, duration_s: time.as_secs_f64(), ..Default::default() },
                samples,
                histogram: None,
                warnings: vec![],
                details: Default::default(),
                host: None,
            };
            Ok(Measured { probe, started_unix: start, error: None })
        }
    }

    /// The fake engine as a server runs it: only the requests of the plan it
    /// was prepared with (a `headroom serve` refuses any other).
    struct FakeServer {
        plan: Vec<ProbeRequest>,
    }

    impl ProbeEngine for FakeServer {
        fn kind(&self) -> EngineKind {
            EngineKind::Cpu
        }
        fn place(&self) -> Option<&str> {
            Some("far")
        }
        fn prepare(
            &mut self,
            requests: &[&ProbeRequest],
            _stop: &AtomicBool,
            _events: &mut dyn FnMut(&headroom_runner::PrepareEvent),
        ) -> Result<Vec<headroom_result::Warning>, ProbeError> {
            self.plan = requests.iter().map(|r| (*r).clone()).collect();
            Ok(Vec::new())
        }
        fn run(
            &mut self,
            request: &ProbeRequest,
            stop: &AtomicBool,
            on_sample: &mut dyn FnMut(&LiveSample),
        ) -> Result<Measured, ProbeError> {
            if !self.plan.contains(request) {
                return Err(ProbeError::Usage("run a request only after sending it in a plan".into()));
            }
            FakeEngine.run(request, stop, on_sample)
        }
    }

    #[test]
    fn a_turn_on_the_server_cut_short_is_the_planned_one_stopped_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = store(dir.path());
        let session = st.begin_session(now_unix()).unwrap();
        let Turn { name, uses_server, request } = turn("remote-write", 1e6, None, true);
        let far = Turn { name, uses_server, request: Box::new(move |time| request(time).placed_at("far")) };
        let mut runner = Runner::new().with(FakeServer { plan: Vec::new() });
        // Turns of 1, 1 and (cut short) about 0.7 s.
        let settings = LoopSettings {
            probe_time: Duration::from_millis(1000),
            remaining: Some(Duration::from_millis(2700)),
            min_turn: Duration::ZERO,
        };
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        run_cycles(&mut st, session, &mut runner, &[far], settings, &stop, None, &mut |_| {}).unwrap();
        let cycles = st.cycles().unwrap();
        assert_eq!(cycles.len(), 3, "{cycles:?}");
        assert!(cycles.iter().all(|c| c.error.is_none() && c.result.is_some()), "{cycles:?}");
        // The last turn stopped at its time, before the planned 1 s (10 samples) was up.
        let samples = st.sample_count(Some("remote-write")).unwrap();
        assert!((21..30).contains(&samples), "{samples}");
        assert!(started.elapsed() < Duration::from_millis(2700 + 300), "{:?}", started.elapsed());
    }

    fn turn(name: &'static str, level: f64, unreachable: Option<&str>, uses_server: bool) -> Turn {
        let unreachable = unreachable.map(String::from);
        Turn {
            name: name.into(),
            uses_server,
            request: Box::new(move |time| {
                let fake = Fake { name: name.into(), level, unreachable: unreachable.clone(), time };
                ProbeRequest::new(EngineKind::Cpu, name, Expected::About(time), &fake)
            }),
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
        let mut turns = vec![turn("write", 1e6, None, false), turn("net", 0.0, Some("connection refused"), true)];
        let mut runner = Runner::new().with(FakeEngine);
        let settings = LoopSettings {
            probe_time: Duration::from_millis(500),
            remaining: Some(Duration::from_millis(1600)),
            min_turn: Duration::ZERO,
        };
        let metrics = Metrics::new();
        let stop = AtomicBool::new(false);
        let reason =
            run_cycles(&mut st, session, &mut runner, &turns, settings, &stop, Some(&metrics), &mut |_| {}).unwrap();
        assert_eq!(reason, StopReason::Duration);
        let cycles = st.cycles().unwrap();
        let writes = cycles.iter().filter(|c| c.probe == "write").count();
        assert_eq!(writes, 3, "{cycles:?}");
        // One outage event however many turns failed, still open.
        let events = st.events().unwrap();
        assert_eq!(events.iter().filter(|e| e.kind == SoakEventKind::ServerOutage).count(), 1);
        assert!(events[0].end_unix.is_none());
        // Final samples (with latency) replaced the live ones.
        let mut lat = 0;
        st.for_each_sample("write", |s| lat += usize::from(s.lat_mean_ns.is_some())).unwrap();
        assert_eq!(lat as u64, st.sample_count(Some("write")).unwrap());
        assert_eq!(lat, 15);
        assert!(metrics.render().contains("headroom_soak_detections_total{kind=\"server_outage\"} 1"));
        // The byte counter holds what the 15 samples of 100 ms at 1 MB/s moved.
        assert!(
            metrics.render().contains("headroom_soak_bytes_total{probe=\"write\"} 1500000\n"),
            "{}",
            metrics.render()
        );

        // The server comes back: the outage closes.
        turns[1] = turn("net", 5e6, None, true);
        let settings = LoopSettings { remaining: Some(Duration::from_millis(1300)), ..settings };
        run_cycles(&mut st, session, &mut runner, &turns, settings, &stop, None, &mut |_| {}).unwrap();
        let outage = st.events().unwrap().into_iter().find(|e| e.kind == SoakEventKind::ServerOutage).unwrap();
        assert!(outage.end_unix.is_some());
    }

    #[test]
    fn stop_flag_ends_the_loop() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = store(dir.path());
        let session = st.begin_session(now_unix()).unwrap();
        let cycle = vec![turn("read", 1e6, None, false)];
        let mut runner = Runner::new().with(FakeEngine);
        let stop = AtomicBool::new(false);
        let settings =
            LoopSettings { probe_time: Duration::from_millis(300), remaining: None, min_turn: Duration::ZERO };
        let mut turns = 0;
        let reason = run_cycles(&mut st, session, &mut runner, &cycle, settings, &stop, None, &mut |p| {
            if let SoakEvent::TurnEnded { .. } = p {
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
