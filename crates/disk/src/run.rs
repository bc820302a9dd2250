//! Runs one test on a target: worker threads drive engines at the asked queue
//! depth, and the controlling thread turns per-worker counters into
//! per-second samples. Warm-up (ramp) is excluded from every figure.
//!
//! Bookkeeping is kept cheaper than the I/O: one clock read per submitted
//! group and one per reaped batch (not per I/O), counters published once per
//! batch to a cache line only that worker writes, and each latency recorded
//! once, under one uncontended lock per batch, into its worker's HDR
//! histogram of the current second. Each tick the controller takes those
//! (a sample's p99) and adds them to the test's histogram (the summary's
//! percentiles). `disk_overhead` bench measures the cost per I/O.
//!
//! Long (about 650 lines): the worker loop, its per-batch bookkeeping and the
//! sampler that reads it share one memory layout and are kept side by side.

use crate::data::{fill_block, FastRng};
use crate::engine::{open_engine, EngineConfig, IoEngine, IoKind, IoUnit};
use crate::share::{Share, ShareIo};
use crate::storage::Storage;
use crate::target::PreparedTarget;
use crate::{DirectMode, DiskError, EngineChoice, EngineKind, Pattern, Result, Rw, SyncMode, TestDef};
use hdrhistogram::Histogram;
use headroom_result::{Latency, Sample, Summary};
use headroom_units::setting::Message;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Run-wide settings every test shares.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSettings {
    /// Which engine runs the tests.
    pub engine: EngineChoice,
    /// Whether to use O_DIRECT (a test's own `direct` overrides it).
    pub direct: DirectMode,
    /// What written blocks contain.
    pub pattern: Pattern,
    /// Registered io_uring buffers (fio's `--fixedbufs`): auto, on or off.
    pub fixedbufs: crate::FixedBufs,
}

/// What the progress callback sees about once a second.
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    /// Time since the test started (ramp included).
    pub elapsed: Duration,
    /// Ramp + measured time planned.
    pub planned: Duration,
    /// Still in the warm-up.
    pub ramping: bool,
    /// Payload bytes per second over the last interval.
    pub bytes_per_sec: f64,
    /// Operations per second over the last interval.
    pub iops: f64,
}

/// What one test measured.
#[derive(Debug)]
pub struct TestOutcome {
    /// The test as defined.
    pub def: TestDef,
    /// The engine that ran it (auto resolved).
    pub engine: EngineKind,
    /// O_DIRECT was in effect.
    pub direct: bool,
    /// io_uring ran with registered buffers (`--fixedbufs`).
    pub fixedbufs: bool,
    /// io_uring issued reads and writes async (IOSQE_ASYNC), see
    /// `engine::force_async`.
    pub force_async: bool,
    /// Worker threads that ran (jobs, or jobs x queue depth for psync, capped
    /// at [`crate::engine::PSYNC_MAX_THREADS`]).
    pub threads: u32,
    /// The figures over the measured time, as they go into the result document.
    pub summary: Summary,
    /// One sample per `sample_interval` of the measured phase.
    pub samples: Vec<Sample>,
    /// Bytes each worker moved in the measured phase, by worker index (a
    /// share's job: what each source carried).
    pub worker_bytes: Vec<u64>,
    /// The warm-up's samples (same interval), `t_s` counted back from the
    /// start of the measured phase (negative): for charts, never for figures.
    pub warmup_samples: Vec<Sample>,
    /// Merged latency histogram (ns) of the measured phase.
    pub histogram: Histogram<u64>,
    /// Ctrl-C ended the test early.
    pub stopped: bool,
    /// An I/O error ended the test (figures up to then are kept).
    pub error: Option<DiskError>,
}

/// Counters one worker publishes; padded so workers do not share cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Counters {
    /// Everything since the start (per-second samples are differences of these).
    bytes: AtomicU64,
    ops: AtomicU64,
    lat_ns: AtomicU64,
    /// Only the measured phase: the I/Os the histogram holds.
    measured_bytes: AtomicU64,
    measured_ops: AtomicU64,
    measured_lat_ns: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Snapshot {
    bytes: u64,
    ops: u64,
    lat_ns: u64,
}

fn snapshot(counters: &[Counters]) -> Snapshot {
    counters.iter().fold(Snapshot::default(), |s, c| Snapshot {
        bytes: s.bytes + c.bytes.load(Ordering::Relaxed),
        ops: s.ops + c.ops.load(Ordering::Relaxed),
        lat_ns: s.lat_ns + c.lat_ns.load(Ordering::Relaxed),
    })
}

/// Shared between the controller and the workers of one test.
struct Shared {
    counters: Vec<Counters>,
    /// Set when the warm-up ends; cleared when the measured time ends.
    measuring: AtomicBool,
    done: AtomicBool,
    error: Mutex<Option<DiskError>>,
    /// Per worker, the measured latencies since the controller's last tick
    /// (locked once per reaped batch, and once a tick).
    intervals: Vec<Mutex<Histogram<u64>>>,
}

/// The controller's side of the workers' latencies. Each worker records a
/// latency once, into its interval histogram; a tick swaps that for an empty
/// one (so a worker never waits for more than the swap), reads the interval's
/// p99 and adds the interval to the measured phase's histogram. One record
/// per I/O thus serves both the samples and the summary: a second, per-worker
/// histogram of the whole test cost about 5% of headroom's own CPU per 4K read
/// (0.4% of the whole: the rest is the kernel's).
struct LatencyCollector {
    spare: Histogram<u64>,
    interval: Histogram<u64>,
    measured: Histogram<u64>,
}

impl LatencyCollector {
    fn new() -> Self {
        Self { spare: new_histogram(), interval: new_histogram(), measured: new_histogram() }
    }

    /// The p99 of the latencies recorded since the last call, which join the
    /// measured phase's histogram.
    fn take_interval(&mut self, shared: &Shared) -> Option<f64> {
        self.interval.reset();
        for worker in &shared.intervals {
            std::mem::swap(&mut *worker.lock().unwrap_or_else(|p| p.into_inner()), &mut self.spare);
            let _ = self.interval.add(&self.spare);
            self.spare.reset();
        }
        let _ = self.measured.add(&self.interval);
        (!self.interval.is_empty()).then(|| self.interval.value_at_quantile(0.99) as f64)
    }
}

impl Shared {
    fn fail(&self, e: DiskError) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.done.store(true, Ordering::SeqCst);
    }
}

/// The part of the target one worker touches.
#[derive(Debug, Clone, Copy)]
struct Region {
    start: u64,
    blocks: u64,
}

struct Worker {
    index: usize,
    /// What failed when its engine cannot be opened, e.g. `cannot set up the io_uring engine`.
    setup_failed: &'static str,
    open: Arc<EngineOpener>,
    depth: usize,
    def: TestDef,
    region: Region,
    pattern: Pattern,
    seed: u64,
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static histogram bounds")
}

/// Checks that `def` fits `target` (block size aligned for O_DIRECT when
/// `direct`, or to a share's block size; not larger than the region), naming
/// the flag to change. Callers run it for every test before the layout, so
/// mistakes cost no time.
pub fn check_test(target: &Storage, def: &TestDef, direct: bool) -> Result<()> {
    use crate::Setting::{BlockSize, Direct, Size};
    crate::check_test_def(def)?;
    let (align, source) = target.align(direct);
    if !def.block_size.is_multiple_of(align) {
        let message = Message::of(BlockSize)
            .then(format!(
                " {} is not a multiple of {}'s alignment ({align} bytes, from {source}); use e.g. ",
                def.block_size,
                target.display(),
            ))
            .and(BlockSize)
            .then(" 4k");
        let fix = match target.local() {
            Some(_) => message.then(", or ").and(Direct).then(" off"),
            None => message,
        };
        return Err(DiskError::Invalid(fix));
    }
    if def.block_size > target.size() {
        return Err(DiskError::Invalid(
            Message::of(BlockSize)
                .then(format!(
                    " {} is larger than the test region ({} bytes); use a smaller ",
                    def.block_size,
                    target.size()
                ))
                .and(BlockSize)
                .then(" or a larger ")
                .and(Size),
        ));
    }
    Ok(())
}

/// Opens worker N's engine (its own io_uring, or its own connection).
type EngineOpener = dyn Fn(usize) -> std::io::Result<Box<dyn IoEngine + Send>> + Send + Sync;

/// How a test's workers get their engines, and what ran.
struct EngineSetup {
    kind: EngineKind,
    direct: bool,
    /// Every worker's buffers are registered (a worker whose registration
    /// `--fixedbufs auto` gave up on clears it).
    fixedbufs: Arc<AtomicBool>,
    force_async: bool,
    workers: usize,
    depth: usize,
    open: Arc<EngineOpener>,
    /// Waits until everything written is durable (after a write test).
    flush: Box<dyn Fn() -> std::io::Result<()>>,
}

/// A local target: io_uring or psync on the file opened for this test.
fn local_setup(target: &PreparedTarget, def: &TestDef, settings: RunSettings) -> Result<EngineSetup> {
    use crate::Setting::Engine;
    let engine_kind = crate::engine::resolve_engine(settings.engine).map_err(|e| {
        DiskError::Invalid(
            Message::of(Engine)
                .then(format!(" io_uring: io_uring is not available here ({e}); use "))
                .and(Engine)
                .then(" psync or auto"),
        )
    })?;
    let direct_mode = def.direct.unwrap_or(settings.direct);
    let want_direct = direct_mode != DirectMode::Off;
    let (file, direct) = target.open(def.rw.writes(), want_direct, direct_mode == DirectMode::On, def.sync)?;
    let force_async = crate::engine::force_async(def.block_size, direct);
    let config = EngineConfig {
        fd: crate::os::raw_file(&file),
        depth: def.queue_depth as usize,
        buf_size: def.block_size as usize,
        buf_align: target.mem_align,
        fixedbufs: settings.fixedbufs.wanted(def.block_size),
        force_async,
    };
    let engine_kind = usable_engine(engine_kind, settings.engine, config);
    let uring = engine_kind == EngineKind::IoUring;
    let (fixedbufs, force_async) = (uring && config.fixedbufs, uring && force_async);
    // psync has one I/O in flight per thread: queue depth becomes threads (capped).
    let (workers, depth, choice) = match engine_kind {
        EngineKind::Psync => (crate::engine::psync_threads(def.jobs, def.queue_depth) as usize, 1, EngineChoice::Psync),
        _ => (def.jobs as usize, def.queue_depth as usize, EngineChoice::IoUring),
    };
    let config = EngineConfig { depth, fixedbufs, force_async, ..config };
    let file = Arc::new(file);
    let held = Arc::clone(&file);
    let registered = Arc::new(AtomicBool::new(fixedbufs));
    let cleared = Arc::clone(&registered);
    let may_fall_back = settings.fixedbufs == crate::FixedBufs::Auto;
    let open = move |_job: usize| {
        let _keep_open: &File = &held;
        open_engine(choice, config).or_else(|refused| {
            // Registering can be refused where the ring itself is not
            // (RLIMIT_MEMLOCK without CAP_IPC_LOCK, counted per user):
            // `auto` then runs this worker on ordinary buffers.
            if !config.fixedbufs {
                return Err(refused);
            }
            if !may_fall_back {
                return Err(registering_refused(refused, config));
            }
            cleared.store(false, Ordering::Relaxed);
            open_engine(choice, EngineConfig { fixedbufs: false, ..config })
        })
    };
    Ok(EngineSetup {
        kind: engine_kind,
        direct,
        fixedbufs: registered,
        force_async,
        workers,
        depth,
        open: Arc::new(open),
        flush: Box::new(move || file.sync_all()),
    })
}

/// `refused` with what registering asked for and what to do, when the
/// kernel's answer (ENOMEM) alone would not say.
fn registering_refused(refused: std::io::Error, config: EngineConfig) -> std::io::Error {
    if refused.kind() != std::io::ErrorKind::OutOfMemory {
        return refused;
    }
    let kib = config.depth * config.buf_size / 1024;
    std::io::Error::new(
        refused.kind(),
        format!(
            "{refused}: registering {kib} KiB of buffers counts against the locked-memory limit \
             (ulimit -l, RLIMIT_MEMLOCK) without CAP_IPC_LOCK; raise it, or use registered buffers \
             only where they fit (fixedbufs auto) or not at all (off)"
        ),
    )
}

/// The engine this test can have: `auto` must also survive a ring that
/// sets up and then fails (seccomp filters, io_uring_disabled): try the real
/// thing once, on ordinary buffers (registering is the workers' fallback).
fn usable_engine(kind: EngineKind, choice: EngineChoice, config: EngineConfig) -> EngineKind {
    if choice != EngineChoice::Auto || kind != EngineKind::IoUring {
        return kind;
    }
    match crate::engine::UringEngine::new(EngineConfig { fixedbufs: false, ..config }) {
        Ok(_) => EngineKind::IoUring,
        Err(_) => EngineKind::Psync,
    }
}

/// A share: one connection per job, the queue depth as the protocol's pipelining.
fn share_setup(share: &Arc<dyn Share>, def: &TestDef) -> EngineSetup {
    let io = ShareIo {
        write: def.rw.writes(),
        sync: def.sync,
        depth: def.queue_depth as usize,
        buf_size: def.block_size as usize,
        job: 0,
    };
    let for_workers = Arc::clone(share);
    let for_flush = Arc::clone(share);
    EngineSetup {
        kind: EngineKind::Share,
        direct: true,
        fixedbufs: Arc::new(AtomicBool::new(false)),
        force_async: false,
        workers: def.jobs as usize,
        depth: io.depth,
        open: Arc::new(move |job| for_workers.connect(ShareIo { job, ..io })),
        flush: Box::new(move || {
            let mut engine = for_flush.connect(ShareIo { depth: 1, ..io })?;
            crate::share::one_io(
                engine.as_mut(),
                IoUnit { kind: IoKind::Fsync, offset: 0, len: 0, buf_index: 0, tag: 0 },
            )
        }),
    }
}

/// Runs one test on `target`; `on_tick` is called about once a second; `stop`
/// (Ctrl-C) ends it within ~50 ms, keeping what was measured.
pub fn run_test(
    target: &Storage,
    def: &TestDef,
    settings: RunSettings,
    stop: &AtomicBool,
    on_tick: &mut dyn FnMut(&Tick),
) -> Result<TestOutcome> {
    let setup = match target {
        Storage::Local(local) => local_setup(local, def, settings)?,
        Storage::Share(share) => share_setup(share, def),
    };
    check_test(target, def, setup.direct)?;
    let EngineSetup { kind: engine_kind, direct, fixedbufs, force_async, workers, depth, .. } = setup;
    let shared = Arc::new(Shared {
        counters: (0..workers).map(|_| Counters::default()).collect(),
        measuring: AtomicBool::new(false),
        done: AtomicBool::new(false),
        error: Mutex::new(None),
        intervals: (0..workers).map(|_| Mutex::new(new_histogram())).collect(),
    });
    let bs = def.block_size;
    let total_blocks = target.size() / bs;
    let seed = FastRng::seed_from_time(def.id.len() as u64);
    let mut handles = Vec::with_capacity(workers);
    for index in 0..workers {
        // Sequential workers each stream through their own slice of the file
        // (fio's offset_increment); random workers roam the whole file.
        let region = if def.rw.is_random() {
            Region { start: 0, blocks: total_blocks }
        } else {
            let per = (total_blocks / workers as u64).max(1);
            Region { start: (index as u64 * per).min(total_blocks - 1) * bs, blocks: per }
        };
        let worker = Worker {
            index,
            setup_failed: match engine_kind {
                EngineKind::IoUring => "cannot set up the io_uring engine",
                EngineKind::Psync => "cannot set up the psync engine",
                EngineKind::Share => "cannot connect",
            },
            open: Arc::clone(&setup.open),
            depth,
            def: def.clone(),
            region,
            pattern: settings.pattern,
            seed: seed ^ (index as u64).wrapping_mul(0x9e37_79b9),
        };
        let shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name(format!("headroom-disk-{index}"))
            .spawn(move || worker_loop(worker, &shared))
            .map_err(|e| DiskError::io("cannot start a worker thread", e))?;
        handles.push(handle);
    }

    // The controller: ramp, then one sample per interval until time, stop, error or max_bytes.
    let started = Instant::now();
    let planned = def.ramp + def.time;
    let mut stopped = false;
    let mut last_tick = started;
    let mut last_snap = Snapshot::default();
    let mut base: Option<(Instant, Snapshot)> = None;
    let mut samples = Vec::new();
    let mut warmup_samples = Vec::new();
    let mut latencies = LatencyCollector::new();
    let tick_every = def.sample_interval;
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) {
            stopped = true;
            break;
        }
        if shared.done.load(Ordering::Relaxed) {
            break;
        }
        if base.is_none() && now >= started + def.ramp {
            // Workers record latencies only from here on.
            shared.measuring.store(true, Ordering::Relaxed);
            let snap = snapshot(&shared.counters);
            base = Some((now, snap));
            last_tick = now;
            last_snap = snap;
        }
        if let Some((t0, b)) = base {
            if now >= t0 + def.time {
                break;
            }
            if def.max_bytes.is_some_and(|max| last_snap.bytes.saturating_sub(b.bytes) >= max) {
                break;
            }
        }
        if now >= last_tick + tick_every {
            let snap = snapshot(&shared.counters);
            let mut sample = interval_sample(last_snap, snap, now - last_tick, base.map(|(t0, _)| now - t0));
            sample.latency_ns_p99 = latencies.take_interval(&shared);
            on_tick(&Tick {
                elapsed: now - started,
                planned,
                ramping: base.is_none(),
                bytes_per_sec: sample.bytes_per_sec,
                iops: sample.iops.unwrap_or(0.0),
            });
            if base.is_some() {
                samples.push(sample);
            } else {
                let before = (started + def.ramp).saturating_duration_since(now).as_secs_f64();
                warmup_samples.push(Sample { t_s: -(before * 1000.0).round() / 1000.0, ..sample });
            }
            last_tick = now;
            last_snap = snap;
        }
        let next = [last_tick + tick_every, base.map_or(started + def.ramp, |(t0, _)| t0 + def.time)]
            .into_iter()
            .min()
            .unwrap_or(now);
        std::thread::sleep(next.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)));
    }
    shared.measuring.store(false, Ordering::SeqCst);
    let end = Instant::now();
    let end_snap = snapshot(&shared.counters);
    shared.done.store(true, Ordering::SeqCst);
    for h in handles {
        let _ = h.join();
    }
    let last_p99 = latencies.take_interval(&shared);
    let histogram = latencies.measured;
    let mut error = shared.error.lock().unwrap_or_else(|p| p.into_inner()).take();
    // Written data still in the page cache (or a device cache) would be
    // written back during the next test and slow it down: a buffered write
    // test's writeback once held the next O_DSYNC test's only I/O for longer
    // than it ran. fsync waits for all of it, outside any measured time.
    if def.rw.writes() && !stopped {
        if let Err(e) = (setup.flush)() {
            error.get_or_insert(DiskError::io(format!("flushing the test file after {}", def.name), e));
        }
    }

    let measured = shared.counters.iter().fold(Snapshot::default(), |s, c| Snapshot {
        bytes: s.bytes + c.measured_bytes.load(Ordering::Relaxed),
        ops: s.ops + c.measured_ops.load(Ordering::Relaxed),
        lat_ns: s.lat_ns + c.measured_lat_ns.load(Ordering::Relaxed),
    });
    let (mut summary, samples) = match base {
        Some((t0, _)) => {
            let dt = end - last_tick;
            // A last partial interval counts when it is a quarter of one or more.
            if dt >= tick_every / 4 && !samples.is_empty() || samples.is_empty() && dt > Duration::ZERO {
                let mut last = interval_sample(last_snap, end_snap, dt, Some(end - t0));
                last.latency_ns_p99 = last_p99;
                samples.push(last);
            }
            (summarise(Snapshot::default(), measured, end - t0, &histogram), samples)
        }
        None => (Summary::default(), Vec::new()),
    };
    summary.sample_interval_s = Some(tick_every.as_secs_f64());
    Ok(TestOutcome {
        def: def.clone(),
        engine: engine_kind,
        direct,
        fixedbufs: fixedbufs.load(Ordering::Relaxed),
        force_async,
        threads: workers as u32,
        summary,
        samples,
        worker_bytes: shared.counters.iter().map(|c| c.measured_bytes.load(Ordering::Relaxed)).collect(),
        warmup_samples,
        histogram,
        stopped,
        error,
    })
}

fn interval_sample(a: Snapshot, b: Snapshot, dt: Duration, t: Option<Duration>) -> Sample {
    let secs = dt.as_secs_f64().max(1e-9);
    let ops = b.ops.saturating_sub(a.ops);
    Sample {
        t_s: t.map_or(0.0, |t| (t.as_secs_f64() * 1000.0).round() / 1000.0),
        bytes_per_sec: b.bytes.saturating_sub(a.bytes) as f64 / secs,
        iops: Some(ops as f64 / secs),
        latency_ns_mean: (ops > 0).then(|| b.lat_ns.saturating_sub(a.lat_ns) as f64 / ops as f64),
        latency_ns_p99: None,
    }
}

fn summarise(base: Snapshot, end: Snapshot, dur: Duration, hist: &Histogram<u64>) -> Summary {
    let secs = dur.as_secs_f64().max(1e-9);
    let bytes = end.bytes.saturating_sub(base.bytes);
    let ops = end.ops.saturating_sub(base.ops);
    let latency = (!hist.is_empty()).then(|| Latency {
        // The exact mean from the counters; percentiles from the histogram.
        mean: if ops > 0 { end.lat_ns.saturating_sub(base.lat_ns) as f64 / ops as f64 } else { hist.mean() },
        p50: hist.value_at_quantile(0.5) as f64,
        p99: hist.value_at_quantile(0.99) as f64,
        p999: hist.value_at_quantile(0.999) as f64,
        max: hist.max() as f64,
        min: Some(hist.min() as f64),
        stddev: Some(hist.stdev()),
    });
    Summary {
        bytes_per_sec: bytes as f64 / secs,
        iops: Some(ops as f64 / secs),
        latency_ns: latency,
        duration_s: secs,
        bytes: Some(bytes),
        ops: Some(ops),
        sample_interval_s: None,
        contention: None,
    }
}

/// Converts the histogram into (upper edge ns, count) buckets for the result document.
pub fn histogram_buckets(hist: &Histogram<u64>) -> Vec<(u64, u64)> {
    // Log buckets (8 per doubling from 1 us) keep documents small yet redrawable.
    hist.iter_log(1000, 2f64.powf(0.125))
        .filter(|v| v.count_since_last_iteration() > 0)
        .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
        .collect()
}

/// Per-slot state of an in-flight I/O.
#[derive(Clone, Copy)]
struct Slot {
    start: Instant,
    kind: IoKind,
}

/// Chooses what each next I/O does and where: fio's rw, rwmixread and
/// offset generation for one worker.
struct IoPicker {
    rng: FastRng,
    next_seq_block: u64,
    region: Region,
    rw: Rw,
    read_pct: u64,
    block_size: u64,
}

impl IoPicker {
    fn next(&mut self) -> (IoKind, u64) {
        let block = if self.rw.is_random() {
            self.rng.below(self.region.blocks)
        } else {
            let b = self.next_seq_block;
            self.next_seq_block = (self.next_seq_block + 1) % self.region.blocks;
            b
        };
        let kind = match self.rw {
            Rw::Read | Rw::RandRead => IoKind::Read,
            Rw::Write | Rw::RandWrite => IoKind::Write,
            Rw::RandRw if self.rng.below(100) < self.read_pct => IoKind::Read,
            Rw::RandRw => IoKind::Write,
        };
        (kind, self.region.start + block * self.block_size)
    }
}

/// Queues `group` (slot, kind, offset) with one start time and submits it.
fn submit_group(
    engine: &mut dyn crate::engine::IoEngine,
    group: &[(u16, IoKind, u64)],
    slots: &mut [Slot],
    bs: usize,
) -> Result<()> {
    let start = Instant::now();
    for &(slot, kind, offset) in group {
        slots[usize::from(slot)] = Slot { start, kind };
        let io = IoUnit { kind, offset, len: bs as u32, buf_index: slot, tag: u64::from(slot) };
        engine.queue(io).map_err(|e| DiskError::io("queueing an I/O", e))?;
    }
    engine.commit().map_err(|e| DiskError::io("submitting I/O", e))
}

fn worker_loop(w: Worker, shared: &Shared) {
    let bs = w.def.block_size as usize;
    let mut engine = match (w.open)(w.index) {
        Ok(e) => e,
        Err(e) => {
            shared.fail(DiskError::io(w.setup_failed, e));
            return;
        }
    };
    let counters = &shared.counters[w.index];
    let mut picker = IoPicker {
        rng: FastRng::new(w.seed),
        next_seq_block: 0,
        region: w.region,
        rw: w.def.rw,
        read_pct: u64::from(w.def.rwmix_read.unwrap_or(50)),
        block_size: w.def.block_size,
    };
    let mut data_rng = FastRng::new(w.seed.rotate_left(17) ^ 0xdead_beef);
    let now = Instant::now();
    let mut slots = vec![Slot { start: now, kind: IoKind::Read }; w.depth];
    let mut free: Vec<u16> = (0..w.depth as u16).rev().collect();
    let mut batch: Vec<(u16, IoKind, u64)> = Vec::with_capacity(w.depth);
    let mut completions = Vec::with_capacity(w.depth * 2);
    let mut batch_lats: Vec<u64> = Vec::with_capacity(w.depth * 2);
    let mut inflight = 0usize;
    let (mut bytes_total, mut ops_total, mut lat_total) = (0u64, 0u64, 0u64);
    let (mut m_bytes, mut m_ops, mut m_lat) = (0u64, 0u64, 0u64);
    let fsync_each = w.def.sync == SyncMode::Fsync;
    // Refilled slots go to the kernel a few at a time, not as one batch: one
    // big submission per reap turns the queue into convoys (half the I/Os
    // complete together, then wait together), which cost 6-16% of fio's 4K
    // QD32 IOPS on a virtio disk. fio submits one per system call; groups of
    // depth/8 matched its IOPS here with ~30% less CPU per I/O (1, 2, 4, 8
    // and 32 per call were compared, 8 interleaved rounds each).
    let submit_every = w.depth.div_ceil(8);

    while !shared.done.load(Ordering::Relaxed) {
        // Fill each write buffer before its group's start time is taken, so
        // data generation never counts as latency, and hand each group to the
        // kernel as soon as it is ready rather than after the whole refill.
        while let Some(slot) = free.pop() {
            let (kind, offset) = picker.next();
            if kind == IoKind::Write {
                fill_block(&mut data_rng, w.pattern, &mut engine.buffer_mut(slot)[..bs]);
            }
            batch.push((slot, kind, offset));
            if batch.len() == submit_every || free.is_empty() {
                if let Err(e) = submit_group(engine.as_mut(), &batch, &mut slots, bs) {
                    shared.fail(e);
                    return;
                }
                inflight += batch.len();
                batch.clear();
            }
        }
        completions.clear();
        if let Err(e) = engine.getevents(1, &mut completions) {
            // A protocol client gives up its wait on Ctrl-C (ErrorKind::Interrupted;
            // signals never reach this thread): the test ends, with no error.
            if e.kind() == std::io::ErrorKind::Interrupted {
                shared.done.store(true, Ordering::SeqCst);
            } else {
                shared.fail(DiskError::io("waiting for I/O", e));
            }
            return;
        }
        let now = Instant::now();
        let measuring = shared.measuring.load(Ordering::Relaxed);
        let mut chained_fsync = false;
        for c in &completions {
            let slot = c.tag as u16;
            let s = slots[slot as usize];
            inflight -= 1;
            if c.result < 0 {
                let err = std::io::Error::from_raw_os_error((-c.result) as i32);
                let what = match s.kind {
                    IoKind::Read => "reading",
                    IoKind::Write => "writing",
                    IoKind::Fsync => "fsync",
                };
                shared.fail(DiskError::io(format!("{what} during {}", w.def.name), err));
                continue;
            }
            if s.kind != IoKind::Fsync && (c.result as usize) < bs {
                shared.fail(DiskError::Io {
                    context: format!("{}: short transfer", w.def.name),
                    source: std::io::Error::other(format!("{} of {bs} bytes", c.result)),
                });
                continue;
            }
            if fsync_each && s.kind == IoKind::Write {
                // The write counts once its fsync returns: durable-write latency.
                slots[slot as usize].kind = IoKind::Fsync;
                let io = IoUnit { kind: IoKind::Fsync, offset: 0, len: 0, buf_index: slot, tag: c.tag };
                if let Err(e) = engine.queue(io) {
                    shared.fail(DiskError::io("queueing fsync", e));
                    return;
                }
                inflight += 1;
                chained_fsync = true;
                continue;
            }
            let lat = now.saturating_duration_since(s.start).as_nanos() as u64;
            bytes_total += bs as u64;
            ops_total += 1;
            lat_total += lat;
            if measuring {
                batch_lats.push(lat.max(1));
                m_bytes += bs as u64;
                m_ops += 1;
                m_lat += lat;
            }
            free.push(slot);
        }
        if chained_fsync {
            if let Err(e) = engine.commit() {
                shared.fail(DiskError::io("submitting fsync", e));
                return;
            }
        }
        if !batch_lats.is_empty() {
            let mut h = shared.intervals[w.index].lock().unwrap_or_else(|p| p.into_inner());
            for lat in batch_lats.drain(..) {
                h.saturating_record(lat);
            }
        }
        counters.bytes.store(bytes_total, Ordering::Relaxed);
        counters.ops.store(ops_total, Ordering::Relaxed);
        counters.lat_ns.store(lat_total, Ordering::Relaxed);
        if measuring {
            counters.measured_bytes.store(m_bytes, Ordering::Relaxed);
            counters.measured_ops.store(m_ops, Ordering::Relaxed);
            counters.measured_lat_ns.store(m_lat, Ordering::Relaxed);
        }
    }
    // Drain what is still in flight so buffers are not freed under the kernel.
    while inflight > 0 {
        completions.clear();
        if engine.getevents(1, &mut completions).is_err() {
            break;
        }
        inflight = inflight.saturating_sub(completions.len());
    }
}
