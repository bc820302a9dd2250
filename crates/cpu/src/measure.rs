//! Timing kernels: one pinned worker thread per CPU asked for, each over its
//! own slice of a pre-filled buffer; set-up and warm-up before the clock
//! starts, a fixed measured time, per-interval samples, and the rate as the
//! sum over workers of bytes / own elapsed time.

use crate::data::fill;
use crate::kernels::{describe, worker, Code};
use crate::{verify, CpuError, MIN_BUFFER};
use headroom_result::kernels::{BufferSpec, DataKind, Kernel, KernelMatrix, Measurement, RunnerUp};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Bytes to allocate for `threads` workers (each gets at least 4 KiB).
fn buffer_total(buffer: &BufferSpec, threads: usize) -> usize {
    let per_thread_floor = MIN_BUFFER as usize * threads;
    if buffer.cache_resident {
        buffer.bytes as usize * threads
    } else {
        (buffer.bytes as usize).max(per_thread_floor)
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
    for request in crate::requests(plan) {
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
/// this process may use, the filled buffers, which kernels passed their
/// correctness check (each is checked once, before it is first timed) and
/// which code computes each.
///
/// A kernel with two implementations (AES-GCM and ChaCha20-Poly1305: ring,
/// and the system's OpenSSL where it loads and agrees with ring) races them
/// at its first measurement, ranked per CPU-second; the winner computes
/// every later one, so a table's columns come from one implementation.
#[derive(Default)]
pub struct KernelBench {
    cpus: Vec<usize>,
    buffers: HashMap<(usize, DataKind), Vec<u8>>,
    verified: Vec<Kernel>,
    codes: HashMap<Kernel, Code>,
}

impl KernelBench {
    /// A bench on the CPUs this process may run on (its affinity mask).
    pub fn new() -> Self {
        KernelBench { cpus: crate::os::allowed_cpus(), ..KernelBench::default() }
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
        let len = buffer_total(&buffer, threads);
        let data = kernel.data();
        let buf = self.buffers.entry((len, data)).or_insert_with(|| {
            let mut b = vec![0u8; len];
            fill(&mut b, data, 0x5EED);
            b
        });
        let timing = Timing { time, warmup };
        let mut run = |code| measure(Subject { kernel, code }, threads, buf, &buffer, timing, stop, &self.cpus);
        if let Some(code) = self.codes.get(&kernel) {
            return run(*code);
        }
        let builtin = run(Code::Builtin)?;
        let rival = second_implementation(&kernel).and_then(|code| run(code).ok());
        let (winner, code) = match rival {
            Some(other) if other.bytes_per_cpu_sec > builtin.bytes_per_cpu_sec => {
                (with_runner_up(other, &builtin), Code::SystemLibcrypto)
            }
            Some(other) => (with_runner_up(builtin, &other), Code::Builtin),
            None => (builtin, Code::Builtin),
        };
        self.codes.insert(kernel, code);
        Ok(winner)
    }
}

/// The implementation to race against the built-in one for `kernel`: the
/// system's libcrypto, when it offers the kernel, loads, and seals as ring does.
fn second_implementation(kernel: &Kernel) -> Option<Code> {
    (crate::libcrypto::offers(kernel) && crate::verify::libcrypto_agrees(kernel).is_ok())
        .then_some(Code::SystemLibcrypto)
}

/// `winner` with the slower measurement recorded beside it.
fn with_runner_up(mut winner: Measurement, slower: &Measurement) -> Measurement {
    winner.runner_up = Some(RunnerUp {
        implementation: slower.implementation.clone(),
        bytes_per_sec: slower.bytes_per_sec,
        bytes_per_cpu_sec: slower.bytes_per_cpu_sec,
    });
    winner
}

/// A kernel and the code computing it.
#[derive(Clone, Copy)]
struct Subject {
    kernel: Kernel,
    code: Code,
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
    Subject { kernel, code }: Subject,
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
                    let mut w = worker(kernel, code, slice);
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
        contention: None,
        implementation: describe(&kernel, code),
        runner_up: None,
    })
}
