//! Runs every kernel briefly through the real measurement path: workers,
//! pinning, warm-up, samples, probes. No wall-clock speed is asserted.

use headroom_cpu::{all_kernels, run, BufferSpec, DataKind, Group, KernelMatrix as Plan};
use headroom_result::{ProbeKind, ProbeSpec};
use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn tiny_plan(threads: Vec<usize>) -> Plan {
    Plan {
        kernels: all_kernels(),
        threads,
        buffers: vec![
            BufferSpec { bytes: 1 << 20, cache_resident: false },
            BufferSpec { bytes: 64 << 10, cache_resident: true },
        ],
        time: Duration::from_millis(15),
        warmup: Duration::from_millis(2),
    }
}

#[test]
fn every_kernel_measures_a_positive_rate_and_becomes_a_cpu_probe() {
    let plan = tiny_plan(vec![1, 2]);
    let mut events = 0;
    let results = run(&plan, &AtomicBool::new(false), |_| events += 1).unwrap();
    assert_eq!(results.len(), plan.len());
    assert_eq!(events, plan.len() + 1, "one event before each measurement and one at the end");
    let mut ids = HashSet::new();
    for m in &results {
        assert!(m.bytes > 0 && m.bytes_per_sec > 0.0, "{m:?}");
        assert!(!m.samples.is_empty(), "{m:?}");
        assert!(m.cpu_share > 0.0 && m.cpu_share <= 1.0, "{m:?}");
        // CPU time never exceeds wall time, so the per-CPU-second rate is at least the wall rate.
        assert!(m.bytes_per_cpu_sec >= 0.95 * m.bytes_per_sec, "{m:?}");
        let probe = m.to_probe();
        assert_eq!(probe.kind(), ProbeKind::Cpu);
        assert!(ids.insert(probe.id.clone()), "duplicate probe id {}", probe.id);
        let ProbeSpec::Cpu(spec) = &probe.spec else { unreachable!() };
        assert_eq!(spec.threads as usize, m.threads);
        assert_eq!(spec.cache_resident, Some(m.cache_resident));
    }
}

#[test]
fn compression_ratios_reflect_the_data() {
    let plan = Plan { threads: vec![1], ..tiny_plan(vec![1]) };
    let results = run(&plan, &AtomicBool::new(false), |_| {}).unwrap();
    for m in results.iter().filter(|m| m.kernel.group() == Group::Compression) {
        let ratio = m.ratio.expect("compression kernels report a ratio");
        match m.kernel.data() {
            DataKind::Compressible2to1 => assert!((1.6..2.4).contains(&ratio), "{} {ratio}", m.kernel.name()),
            DataKind::Incompressible => assert!((0.95..1.05).contains(&ratio), "{} {ratio}", m.kernel.name()),
        }
    }
    assert!(results.iter().filter(|m| m.kernel.group() != Group::Compression).all(|m| m.ratio.is_none()));
}

#[test]
fn a_set_stop_flag_returns_at_once_with_what_was_measured() {
    let results = run(&tiny_plan(vec![1]), &AtomicBool::new(true), |_| {}).unwrap();
    assert!(results.is_empty());
}
