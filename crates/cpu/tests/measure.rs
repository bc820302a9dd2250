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

#[test]
fn ciphers_are_raced_against_the_systems_openssl_and_the_faster_one_is_named() {
    let openssl = match headroom_cpu::system_libcrypto() {
        Ok(version) => version,
        Err(why) => {
            println!("skipped: the system's OpenSSL 3 libcrypto is not available here ({why})");
            return;
        }
    };
    let mut bench = headroom_cpu::KernelBench::new();
    let buffer = BufferSpec { bytes: 1 << 20, cache_resident: false };
    let (time, warmup) = (Duration::from_millis(40), Duration::from_millis(5));
    let stop = AtomicBool::new(false);
    for kernel in all_kernels().into_iter().filter(|k| k.group() == Group::Encryption) {
        let first = bench.measure(kernel, 1, buffer, time, warmup, &stop).unwrap();
        let id = kernel.id();
        if id.ends_with("ccm") {
            assert!(first.runner_up.is_none(), "OpenSSL is not timed for {id}: {first:?}");
            continue;
        }
        // Both implementations ran (libcrypto sealed as ring does, or it
        // would not have been timed); the figure is the faster one's.
        let slower = first.runner_up.clone().unwrap_or_else(|| panic!("{id}: no runner-up beside {first:?}"));
        let names = [first.implementation.as_str(), slower.implementation.as_str()];
        assert!(names.iter().any(|n| n.starts_with("ring")) && names.contains(&openssl.as_str()), "{id}: {names:?}");
        assert!(first.bytes_per_cpu_sec >= slower.bytes_per_cpu_sec, "{id}: {first:?}");
        let probe = first.to_probe();
        assert_eq!(headroom_cpu::measurement_of(&probe).unwrap().runner_up, Some(slower), "{id}: details.runner_up");
        // Later figures of the kernel come from the winner alone.
        let again = bench.measure(kernel, 1, BufferSpec { bytes: 64 << 10, cache_resident: true }, time, warmup, &stop);
        let again = again.unwrap();
        assert_eq!((again.implementation.as_str(), again.runner_up.is_none()), (first.implementation.as_str(), true));
    }
}
