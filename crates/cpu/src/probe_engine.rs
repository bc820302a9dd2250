//! headroom-cpu as a Runner engine: a [`CpuRequest`] (one kernel, thread
//! count and buffer, as plain data) runs on a [`KernelBench`] and comes back
//! as a `cpu` probe. Owns the translation between requests, measurements
//! and probes; the timing itself stays in `measure`.

use crate::{all_kernels, BufferSpec, Kernel, KernelBench, Measurement, Setting};
use headroom_result::{details, Contention, Probe, ProbeSpec, Warning};
use headroom_runner::{unix_now, EngineKind, Expected, Measured, ProbeEngine, ProbeError, ProbeRequest};
use headroom_units::setting::Message;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// One kernel at one thread count on one buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuRequest {
    /// The kernel's id, e.g. `aes-256-gcm`, `zstd-3-compress`.
    pub kernel: String,
    /// The data it runs on where that matters (compression): `incompressible`
    /// or `compressible-2to1`.
    pub data: Option<String>,
    /// Threads running the kernel at once.
    pub threads: usize,
    /// Out of cache: bytes the threads share; cache-resident: bytes per thread.
    pub buffer_bytes: u64,
    /// See [`BufferSpec::cache_resident`](crate::BufferSpec::cache_resident).
    pub cache_resident: bool,
    /// Measured time, after `warmup`.
    pub time: Duration,
    /// Untimed run before `time` (page faults, caches, clock ramp-up).
    pub warmup: Duration,
}

impl CpuRequest {
    /// The request that measures `kernel` on `threads` workers over `buffer`.
    pub fn new(kernel: Kernel, threads: usize, buffer: BufferSpec, time: Duration, warmup: Duration) -> Self {
        CpuRequest {
            kernel: kernel.id(),
            data: kernel.data_matters().then(|| kernel.data().as_str().to_string()),
            threads,
            buffer_bytes: buffer.bytes,
            cache_resident: buffer.cache_resident,
            time,
            warmup,
        }
    }

    /// "AES-256-GCM 1t memory": what a progress display shows.
    pub fn label(&self) -> String {
        let place = if self.cache_resident { "cache" } else { "memory" };
        let name = self.resolve().map_or_else(|_| self.kernel.clone(), |k| k.name());
        format!("{name} {}t {place}", self.threads)
    }

    /// As a Runner request.
    pub fn to_request(&self) -> ProbeRequest {
        ProbeRequest::new(EngineKind::Cpu, self.label(), Expected::About(self.time + self.warmup), self)
    }

    /// The kernel the request names.
    pub fn resolve(&self) -> Result<Kernel, ProbeError> {
        kernel_named(&self.kernel, self.data.as_deref())
            .ok_or_else(|| ProbeError::Usage(format!("unknown cpu kernel '{}'", self.kernel)))
    }

    /// Checks every field against the ranges `headroom cpu` accepts (the
    /// kernel known, `--time` in range, a warm-up no longer than the time
    /// range allows, a buffer of at least 4 KiB, at least one thread), so a
    /// request from the wire is held to the command line's rules. How many
    /// threads and how much memory a machine grants is its owner's to cap.
    /// Its settings are named as `spell` spells them (for a far end, the
    /// client's flags).
    pub fn check(&self, spell: fn(Setting) -> &'static str) -> Result<(), ProbeError> {
        self.resolve()?;
        let (shortest, longest) = crate::choice::TIME_RANGE;
        let usage = |text: String| Err(ProbeError::Usage(text));
        if !(shortest..=longest).contains(&self.time) {
            let out_of_range = Message::of(Setting::Time).then(format!(
                " {:.3}s is out of range: {} ms to {} s per figure",
                self.time.as_secs_f64(),
                shortest.as_millis(),
                longest.as_secs()
            ));
            return usage(out_of_range.spelled(spell));
        }
        if self.warmup > longest {
            return usage(format!(
                "a warm-up of {:.3}s is longer than {} s",
                self.warmup.as_secs_f64(),
                longest.as_secs()
            ));
        }
        if self.threads == 0 {
            return usage("0 threads asked: a CPU probe runs on at least 1".into());
        }
        if self.buffer_bytes < crate::MIN_BUFFER {
            return usage(format!("a buffer of {} bytes is below the 4 KiB minimum", self.buffer_bytes));
        }
        Ok(())
    }

    /// The bytes of buffers the request allocates: shared out of cache, per thread in cache.
    pub fn buffer_bytes_total(&self) -> u64 {
        if self.cache_resident {
            self.buffer_bytes.saturating_mul(self.threads as u64)
        } else {
            self.buffer_bytes
        }
    }

    fn buffer(&self) -> BufferSpec {
        BufferSpec { bytes: self.buffer_bytes, cache_resident: self.cache_resident }
    }
}

/// The matrix as requests, in the order `measure::run` measures it:
/// buffer, then thread count, then kernel.
pub fn requests(plan: &crate::KernelMatrix) -> Vec<CpuRequest> {
    let mut requests = Vec::with_capacity(plan.len());
    for buffer in &plan.buffers {
        for &threads in &plan.threads {
            for kernel in &plan.kernels {
                requests.push(CpuRequest::new(*kernel, threads, *buffer, plan.time, plan.warmup));
            }
        }
    }
    requests
}

/// The kernel with `id` (and data kind, for kernels where the data matters).
fn kernel_named(id: &str, data: Option<&str>) -> Option<Kernel> {
    all_kernels()
        .into_iter()
        .find(|k| k.id() == id && (!k.data_matters() || data.is_none_or(|d| k.data().as_str() == d)))
}

/// A `cpu` probe read back as the measurement it came from (presenters
/// that show kernels, not probes).
pub fn measurement_of(probe: &Probe) -> Option<Measurement> {
    let ProbeSpec::Cpu(spec) = &probe.spec else { return None };
    let number = |key: &str| probe.details.get(key).and_then(|v| v.as_f64());
    Some(Measurement {
        kernel: kernel_named(&spec.kernel, spec.data.as_deref())?,
        threads: spec.threads as usize,
        buffer_bytes: spec.buffer_size,
        cache_resident: spec.cache_resident.unwrap_or(false),
        bytes: probe.summary.bytes.unwrap_or(0),
        duration: Duration::from_secs_f64(probe.summary.duration_s.max(0.0)),
        bytes_per_sec: probe.summary.bytes_per_sec,
        ratio: number("compression_ratio"),
        samples: probe.samples.iter().map(|s| (s.t_s, s.bytes_per_sec)).collect(),
        cpu_share: number("cpu_share").unwrap_or(1.0),
        bytes_per_cpu_sec: number("bytes_per_cpu_sec").unwrap_or(0.0),
        contention: probe.summary.contention.clone(),
        quota: probe.details.get(details::CGROUP).and_then(|v| serde_json::from_value(v.clone()).ok()),
        // Documents written before the field was typed kept it in details.
        implementation: spec
            .implementation
            .clone()
            .or_else(|| probe.details.get("implementation").and_then(|v| v.as_str()).map(str::to_string))
            .unwrap_or_default(),
        runner_up: probe.details.get(details::RUNNER_UP).and_then(|v| serde_json::from_value(v.clone()).ok()),
    })
}

/// The cpu engine: kernels are checked in `prepare`, before any is timed.
#[derive(Default)]
pub struct CpuEngine {
    bench: Option<KernelBench>,
}

impl CpuEngine {
    /// An engine that builds its kernel bench on first use.
    pub fn new() -> Self {
        CpuEngine { bench: None }
    }

    fn bench(&mut self) -> &mut KernelBench {
        self.bench.get_or_insert_with(KernelBench::new)
    }
}

impl ProbeEngine for CpuEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Cpu
    }

    fn prepare(
        &mut self,
        requests: &[&ProbeRequest],
        _stop: &AtomicBool,
        _events: &mut dyn FnMut(&headroom_runner::PrepareEvent),
    ) -> Result<Vec<Warning>, ProbeError> {
        for request in requests {
            let asked = request.params::<CpuRequest>()?;
            // Checked already where a request comes from (the flags, or a far
            // end's admission in the client's words): plain names suffice here.
            asked.check(Setting::name)?;
            let kernel = asked.resolve()?;
            self.bench().verify(&kernel).map_err(|e| ProbeError::Failed(e.to_string()))?;
        }
        Ok(Vec::new())
    }

    fn run(
        &mut self,
        request: &ProbeRequest,
        stop: &AtomicBool,
        on_sample: &mut dyn FnMut(&headroom_runner::LiveSample),
    ) -> Result<Measured, ProbeError> {
        let req: CpuRequest = request.params()?;
        let kernel = req.resolve()?;
        let started_unix = unix_now();
        let before = headroom_sys::CpuSnapshot::take();
        let mut m = self
            .bench()
            .measure(kernel, req.threads, req.buffer(), req.time, req.warmup, stop)
            .map_err(|e| ProbeError::Failed(e.to_string()))?;
        let load = before.and_then(|b| Some(headroom_sys::CpuSnapshot::take()?.load_since(&b)));
        m.quota = load.as_ref().and_then(|l| l.cgroup.clone());
        // Other processes streaming memory share the bandwidth an
        // out-of-cache figure depends on, yet leave the workers their CPUs
        // (cpu_share stays 1): the machine's counters tell.
        m.contention = load.filter(|_| !req.cache_resident).map(|l| Contention::of(&l, std::process::id()));
        // The workers count bytes without a clock of their own; the series
        // reaches sinks when the figure is final.
        for (t, rate) in &m.samples {
            on_sample(&headroom_runner::LiveSample {
                t_unix: started_unix + req.warmup.as_secs_f64() + t,
                elapsed: req.warmup + Duration::from_secs_f64(*t),
                bytes_per_sec: *rate,
                ..Default::default()
            });
        }
        Ok(Measured { probe: m.to_probe(), started_unix: started_unix + req.warmup.as_secs_f64(), error: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_runner::{Plan, Runner, SampleLog, Sink};

    fn request(kernel: Kernel, threads: usize) -> ProbeRequest {
        let buffer = BufferSpec { bytes: 1 << 20, cache_resident: false };
        CpuRequest::new(kernel, threads, buffer, Duration::from_millis(30), Duration::from_millis(5)).to_request()
    }

    #[test]
    fn a_plan_of_kernels_comes_back_as_the_probes_measure_makes() {
        let kernels: Vec<Kernel> =
            all_kernels().into_iter().filter(|k| ["crc32c", "zstd-1-compress"].contains(&k.id().as_str())).collect();
        assert_eq!(kernels.len(), 3, "crc32c and both data kinds of zstd -1");
        let plan = Plan::new(kernels.iter().map(|k| request(*k, 1)).collect());
        let stop = AtomicBool::new(false);
        let mut log = SampleLog::default();
        let runs = Runner::new().with(CpuEngine::new()).run_all(&plan, &stop, &mut [&mut log as &mut dyn Sink]);
        assert_eq!(runs.len(), 3);
        for (run, kernel) in runs.iter().zip(&kernels) {
            let probe = run.probe().expect("measured");
            assert!(probe.summary.bytes_per_sec > 0.0, "{}", probe.id);
            let m = measurement_of(probe).expect("a cpu probe reads back");
            assert_eq!(m.kernel, *kernel);
            assert_eq!(m.to_probe(), *probe, "probe -> measurement -> probe is lossless");
        }
        assert_eq!(log.finished, 3);
        // Every interval of every probe reached the sink, in order.
        let series: Vec<(usize, f64)> = runs
            .iter()
            .enumerate()
            .flat_map(|(i, r)| r.probe().unwrap().samples.iter().map(move |s| (i, s.bytes_per_sec)))
            .collect();
        assert!(!series.is_empty());
        assert_eq!(log.samples.iter().map(|(i, s)| (*i, s.bytes_per_sec)).collect::<Vec<_>>(), series);
        // The request is data: it survives JSON, as it would on its way to another machine.
        let text = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&text).unwrap(), plan);
    }

    #[test]
    fn an_unknown_kernel_is_refused_before_anything_runs() {
        let mut bad = CpuRequest::new(
            all_kernels()[0],
            1,
            BufferSpec { bytes: 4096, cache_resident: true },
            Duration::from_millis(10),
            Duration::ZERO,
        );
        bad.kernel = "md5".into();
        let plan = Plan::new(vec![request(all_kernels()[0], 1), bad.to_request()]);
        let runs = Runner::new().with(CpuEngine::new()).run_all(&plan, &AtomicBool::new(false), &mut []);
        assert_eq!(runs.len(), 1, "prepare checks every request first");
        assert!(matches!(runs[0].error(), Some(ProbeError::Usage(m)) if m.contains("md5")));
    }
}
