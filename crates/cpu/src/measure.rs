//! Timing kernels: one pinned worker thread per CPU asked for, each over its
//! own slice of a pre-filled buffer; set-up and warm-up before the clock
//! starts, a fixed measured time, per-interval samples, and the rate as the
//! sum over workers of bytes / own elapsed time.

use crate::data::{fill, DataKind};
use crate::kernels::{worker, Kernel};
use crate::{verify, CpuError, MIN_BUFFER};
use headroom_result::{details, CgroupCpu, CpuSpec, Probe, ProbeSpec, Sample, Summary};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The buffer a column runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSpec {
    /// Out of cache: bytes shared out among the threads. Cache-resident:
    /// bytes per thread.
    pub bytes: u64,
    /// True: each thread has `bytes` of its own, sized to stay in cache; false: the threads share one buffer streamed from RAM.
    pub cache_resident: bool,
}

impl BufferSpec {
    /// Bytes to allocate for `threads` workers (each gets at least 4 KiB).
    fn total(&self, threads: usize) -> usize {
        let per_thread_floor = MIN_BUFFER as usize * threads;
        if self.cache_resident {
            self.bytes as usize * threads
        } else {
            (self.bytes as usize).max(per_thread_floor)
        }
    }
}

/// What `headroom cpu` measures: every kernel at every thread count on
/// every buffer.
#[derive(Debug, Clone)]
pub struct KernelMatrix {
    /// The kernels to measure, in order.
    pub kernels: Vec<Kernel>,
    /// Thread counts, e.g. [1, 8].
    pub threads: Vec<usize>,
    /// The buffers each kernel runs on.
    pub buffers: Vec<BufferSpec>,
    /// Measured time of each kernel x threads x buffer.
    pub time: Duration,
    /// Untimed run before each measurement (page faults, caches, clock ramp-up).
    pub warmup: Duration,
}

impl KernelMatrix {
    /// Number of measurements the plan makes.
    pub fn len(&self) -> usize {
        self.kernels.len() * self.threads.len() * self.buffers.len()
    }

    /// True when the plan measures nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Roughly how long the plan runs (set-up not included).
    pub fn expected_duration(&self) -> Duration {
        (self.time + self.warmup) * self.len() as u32
    }
}

/// Where a run is, for a progress bar.
#[derive(Debug, Clone)]
pub struct ProgressEvent {
    /// Measurements finished.
    pub done: usize,
    /// Measurements in all.
    pub total: usize,
    /// The measurement about to run (or "done").
    pub label: String,
    /// The figure of the measurement that just finished.
    pub last_bytes_per_sec: Option<f64>,
}

/// One kernel at one thread count on one buffer.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// The kernel measured.
    pub kernel: Kernel,
    /// Threads that ran it at once.
    pub threads: usize,
    /// Bytes in the buffer the threads shared (cache-resident: per thread).
    pub buffer_bytes: u64,
    /// See [`BufferSpec::cache_resident`].
    pub cache_resident: bool,
    /// Payload bytes processed in the measured time (uncompressed bytes for compression).
    pub bytes: u64,
    /// The measured time, warm-up excluded.
    pub duration: Duration,
    /// `bytes` per second of `duration`, all threads together.
    pub bytes_per_sec: f64,
    /// Uncompressed / compressed, for compression kernels.
    pub ratio: Option<f64>,
    /// (seconds since start, bytes/s in the interval ending then).
    pub samples: Vec<(f64, f64)>,
    /// CPU time the workers got over their wall time, averaged (1.0: each
    /// had its CPU to itself; 0.4: other processes took 60% of it).
    pub cpu_share: f64,
    /// Bytes per second of CPU time the workers got, summed: what the
    /// kernel does when it has the CPUs to itself.
    pub bytes_per_cpu_sec: f64,
    /// The CPU quota of the measuring process's cgroup and what it throttled
    /// during the measurement, when it has one (set by the engine).
    pub quota: Option<CgroupCpu>,
}

/// A quota that throttled in this share of its periods held the workers
/// (the same threshold as the verdict's CPU rules).
const QUOTA_HELD_SHARE: f64 = 0.20;

/// Below this CPU share, a figure says more about the machine's load than the kernel.
pub const CONTENDED_SHARE: f64 = 0.9;

impl Measurement {
    /// Whether other processes took a noticeable share of the workers' CPUs
    /// (the figure is low; the probe carries a `cpu_contended` warning).
    pub fn contended(&self) -> bool {
        self.cpu_share < CONTENDED_SHARE
    }

    /// The cgroup quota that held the workers back, when one throttled.
    pub fn held_by_quota(&self) -> Option<&CgroupCpu> {
        self.quota.as_ref().filter(|q| q.periods > 0 && q.throttled_share() >= QUOTA_HELD_SHARE)
    }

    /// `cpu-zstd-3-compress-compressible-2to1-t1-memory`: unique in a run.
    pub fn probe_id(&self) -> String {
        let data = if self.kernel.data_matters() { format!("-{}", self.kernel.data().as_str()) } else { String::new() };
        let place = if self.cache_resident { "cache" } else { "memory" };
        format!("cpu-{}{data}-t{}-{place}", self.kernel.id(), self.threads)
    }

    /// The measurement as a result-document probe of kind `cpu`.
    pub fn to_probe(&self) -> Probe {
        let mut details = std::collections::BTreeMap::new();
        details.insert("implementation".into(), serde_json::json!(self.kernel.implementation()));
        if let Some(r) = self.ratio {
            details.insert("compression_ratio".into(), serde_json::json!(r));
        }
        details.insert("cpu_share".into(), serde_json::json!(self.cpu_share));
        details.insert("bytes_per_cpu_sec".into(), serde_json::json!(self.bytes_per_cpu_sec));
        let mut warnings = Vec::new();
        if let Some(q) = &self.quota {
            details.insert(details::CGROUP.into(), serde_json::to_value(q).expect("plain data"));
        }
        if self.contended() {
            let why = match self.held_by_quota() {
                Some(q) => format!(
                    "its cgroup {}'s CPU quota of {:.0}% of one core throttled it in {:.0}% of {} periods",
                    q.path,
                    q.quota_cores() * 100.0,
                    q.throttled_share() * 100.0,
                    q.periods
                ),
                None => "other processes ran too".into(),
            };
            warnings.push(headroom_result::Warning::new(
                headroom_result::WarningCode::CpuContended,
                format!(
                    "the workers got {:.0}% of their CPUs' time ({why}): the figure is low; \
                     per CPU-second the kernel did {:.0} MB/s",
                    100.0 * self.cpu_share,
                    self.bytes_per_cpu_sec / 1e6
                ),
            ));
        }
        let name = if self.kernel.data_matters() {
            format!("{} ({})", self.kernel.name(), self.kernel.data().as_str())
        } else {
            self.kernel.name()
        };
        Probe {
            host: None,
            id: self.probe_id(),
            name,
            spec: ProbeSpec::Cpu(CpuSpec {
                kernel: self.kernel.id(),
                threads: self.threads as u32,
                buffer_size: self.buffer_bytes,
                data: self.kernel.data_matters().then(|| self.kernel.data().as_str().to_string()),
                cache_resident: Some(self.cache_resident),
            }),
            summary: Summary {
                bytes_per_sec: self.bytes_per_sec,
                duration_s: self.duration.as_secs_f64(),
                bytes: Some(self.bytes),
                ..Summary::default()
            },
            samples: self
                .samples
                .iter()
                .map(|(t, b)| Sample { t_s: *t, bytes_per_sec: *b, ..Sample::default() })
                .collect(),
            histogram: None,
            warnings,
            details,
        }
    }
}

/// Verifies every kernel of the matrix, then measures each; stops early (and
/// returns what it has) when `stop` is set.
pub fn run(
    plan: &KernelMatrix,
    stop: &AtomicBool,
    mut on_progress: impl FnMut(ProgressEvent),
) -> Result<Vec<Measurement>, CpuError> {
    let mut bench = KernelBench::new();
    for kernel in &plan.kernels {
        bench.verify(kernel)?;
    }
    let mut results = Vec::new();
    let total = plan.len();
    let mut last = None;
    for request in plan.requests() {
        if stop.load(Ordering::Relaxed) {
            return Ok(results);
        }
        let kernel = request.resolve().expect("the matrix names catalog kernels");
        on_progress(ProgressEvent { done: results.len(), total, label: request.label(), last_bytes_per_sec: last });
        let buffer = BufferSpec { bytes: request.buffer_bytes, cache_resident: request.cache_resident };
        let m = bench.measure(kernel, request.threads, buffer, plan.time, plan.warmup, stop)?;
        last = Some(m.bytes_per_sec);
        results.push(m);
    }
    on_progress(ProgressEvent { done: results.len(), total, label: "done".into(), last_bytes_per_sec: last });
    Ok(results)
}

/// Measures one kernel at a time, keeping what measurements share: the CPUs
/// this process may use, the filled buffers, and which kernels passed
/// their correctness check (each is checked once, before it is first timed).
#[derive(Default)]
pub struct KernelBench {
    cpus: Vec<usize>,
    buffers: HashMap<(usize, DataKind), Vec<u8>>,
    verified: Vec<Kernel>,
}

impl KernelBench {
    /// A bench on the CPUs this process may run on (its affinity mask).
    pub fn new() -> Self {
        KernelBench { cpus: crate::os::allowed_cpus(), buffers: HashMap::new(), verified: Vec::new() }
    }

    /// Checks `kernel`'s answer, once per bench.
    pub fn verify(&mut self, kernel: &Kernel) -> Result<(), CpuError> {
        if !self.verified.contains(kernel) {
            verify(kernel)?;
            self.verified.push(*kernel);
        }
        Ok(())
    }

    /// Times `kernel` on `threads` workers over `buffer` for `time`, after `warmup`.
    pub fn measure(
        &mut self,
        kernel: Kernel,
        threads: usize,
        buffer: BufferSpec,
        time: Duration,
        warmup: Duration,
        stop: &AtomicBool,
    ) -> Result<Measurement, CpuError> {
        self.verify(&kernel)?;
        let len = buffer.total(threads);
        let data = kernel.data();
        let buf = self.buffers.entry((len, data)).or_insert_with(|| {
            let mut b = vec![0u8; len];
            fill(&mut b, data, 0x5EED);
            b
        });
        measure(kernel, threads, buf, &buffer, Timing { time, warmup }, stop, &self.cpus)
    }
}

/// Measured time and the untimed warm-up before it.
#[derive(Clone, Copy)]
struct Timing {
    time: Duration,
    warmup: Duration,
}

/// Bytes, wall time, CPU time, compression ratio of one worker.
type WorkerOutcome = Result<(u64, Duration, Duration, Option<f64>), String>;

fn measure(
    kernel: Kernel,
    threads: usize,
    buf: &mut [u8],
    buffer: &BufferSpec,
    plan: Timing,
    stop: &AtomicBool,
    cpus: &[usize],
) -> Result<Measurement, CpuError> {
    // Slices start on 64-byte boundaries so no two threads share a cache line.
    let per_thread = (buf.len() / threads) / 64 * 64;
    let counter = AtomicU64::new(0);
    let finish = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let interval = (plan.time / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut samples = Vec::new();

    let outcomes: Vec<WorkerOutcome> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, slice) in buf.chunks_mut(per_thread).take(threads).enumerate() {
            let (counter, finish, barrier) = (&counter, &finish, &barrier);
            let cpu = cpus.get(i % cpus.len().max(1)).copied();
            let warmup = plan.warmup;
            let handle =
                std::thread::Builder::new().name(format!("cpu-{i}")).spawn_scoped(scope, move || -> WorkerOutcome {
                    if let Some(cpu) = cpu {
                        crate::os::pin_to(cpu);
                    }
                    let mut w = worker(kernel, slice);
                    barrier.wait(); // everyone set up
                    if let Ok(w) = &mut w {
                        let until = Instant::now() + warmup;
                        loop {
                            w.step();
                            if Instant::now() >= until {
                                break;
                            }
                        }
                    }
                    barrier.wait(); // everyone warm: the clock starts
                    let mut w = w?;
                    let start = Instant::now();
                    let cpu_start = crate::os::thread_cpu_time();
                    let mut bytes = 0u64;
                    loop {
                        let n = w.step();
                        bytes += n;
                        counter.fetch_add(n, Ordering::Relaxed);
                        if finish.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    Ok((bytes, start.elapsed(), crate::os::thread_cpu_time().saturating_sub(cpu_start), w.ratio()))
                });
            match handle {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Release the threads already waiting, then report.
                    finish.store(true, Ordering::Relaxed);
                    return vec![Err(format!("spawn: {e}"))];
                }
            }
        }
        barrier.wait();
        barrier.wait();
        let start = Instant::now();
        let mut seen = 0u64;
        let mut last_t = 0.0;
        loop {
            let left = plan.time.saturating_sub(start.elapsed());
            std::thread::sleep(interval.min(left).max(Duration::from_millis(1)));
            let t = start.elapsed().as_secs_f64();
            let now = counter.load(Ordering::Relaxed);
            if t > last_t {
                samples.push((t, (now - seen) as f64 / (t - last_t)));
            }
            seen = now;
            last_t = t;
            if start.elapsed() >= plan.time || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        finish.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("worker panicked".into()))).collect()
    });

    let mut bytes = 0;
    let mut rate = 0.0;
    let mut longest = Duration::ZERO;
    let mut ratios = Vec::new();
    let mut shares = Vec::new();
    let mut cpu_rate = 0.0;
    for outcome in outcomes {
        let (b, elapsed, cpu, ratio) = outcome.map_err(|reason| CpuError::Setup { kernel: kernel.id(), reason })?;
        bytes += b;
        rate += b as f64 / elapsed.as_secs_f64().max(1e-9);
        cpu_rate += b as f64 / cpu.as_secs_f64().max(1e-9);
        shares.push((cpu.as_secs_f64() / elapsed.as_secs_f64().max(1e-9)).min(1.0));
        longest = longest.max(elapsed);
        ratios.extend(ratio);
    }
    Ok(Measurement {
        kernel,
        threads,
        buffer_bytes: if buffer.cache_resident { buffer.bytes } else { buf.len() as u64 },
        cache_resident: buffer.cache_resident,
        bytes,
        duration: longest,
        bytes_per_sec: rate,
        ratio: (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64),
        samples,
        cpu_share: shares.iter().sum::<f64>() / shares.len().max(1) as f64,
        bytes_per_cpu_sec: cpu_rate,
        quota: None,
    })
}
