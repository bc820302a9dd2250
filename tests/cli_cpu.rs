//! `headroom cpu` end to end: the JSON document holds one cpu probe per
//! kernel and column, figures sit next to the link, bad input exits 2.

use headroom_result::{ProbeKind, ProbeSpec, ResultDoc};
use predicates::prelude::*;
use std::collections::BTreeSet;
mod support;
use support::headroom;

fn run_json(args: &[&str]) -> ResultDoc {
    let output = headroom().arg("cpu").arg("--json").args(args).output().unwrap();
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    ResultDoc::from_json(&String::from_utf8(output.stdout).unwrap()).expect("one headroom.result/v1 document")
}

/// Every kernel the command measures: id plus data kind for compression.
const KERNELS: &[&str] = &[
    "raid5-xor-4+1",
    "raid6-pq-4+2",
    "raid6-pq-8+2",
    "crc32c",
    "xxh64",
    "xxh3-64",
    "fletcher4",
    "sha256",
    "blake3",
    "lz4-compress/incompressible",
    "lz4-compress/compressible-2to1",
    "lz4-decompress/incompressible",
    "lz4-decompress/compressible-2to1",
    "zstd-1-compress/incompressible",
    "zstd-1-compress/compressible-2to1",
    "zstd-1-decompress/incompressible",
    "zstd-1-decompress/compressible-2to1",
    "zstd-3-compress/incompressible",
    "zstd-3-compress/compressible-2to1",
    "zstd-3-decompress/incompressible",
    "zstd-3-decompress/compressible-2to1",
    "aes-128-gcm",
    "aes-256-gcm",
    "chacha20-poly1305",
    "aes-128-ccm",
    "aes-256-ccm",
];

#[test]
fn json_holds_one_cpu_probe_per_kernel_and_column_with_a_positive_rate() {
    let doc = run_json(&["--time", "100ms", "--threads", "1", "--size", "4M", "--link", "10gbe"]);
    let mut seen = BTreeSet::new();
    for probe in &doc.probes {
        assert_eq!(probe.kind(), ProbeKind::Cpu);
        assert!(probe.summary.bytes_per_sec > 0.0, "{}: {:?}", probe.id, probe.summary);
        let ProbeSpec::Cpu(spec) = &probe.spec else { unreachable!() };
        assert_eq!(spec.threads, 1);
        let key = match &spec.data {
            Some(d) => format!("{}/{d}", spec.kernel),
            None => spec.kernel.clone(),
        };
        assert!(seen.insert((key, spec.cache_resident)), "duplicate probe {}", probe.id);
        assert_eq!(probe.details["link"], "10GbE");
        assert!(probe.details.contains_key("fills_link"));
        // Which code ran, typed, so a figure is compared with the user's software.
        let implementation = spec.implementation.as_deref().unwrap_or_default();
        assert!(!implementation.is_empty(), "{}: no implementation", probe.id);
    }
    for cache_resident in [Some(false), Some(true)] {
        for kernel in KERNELS {
            assert!(seen.contains(&(kernel.to_string(), cache_resident)), "no probe for {kernel} {cache_resident:?}");
        }
    }
    assert_eq!(doc.probes.len(), 2 * KERNELS.len());
    // 10 GbE TCP at MTU 1500: 1.1768 GB/s.
    let link = doc.ceilings.iter().find(|c| c.hop == "link").expect("the link is a ceiling");
    assert!((link.bytes_per_sec - 1.1768e9).abs() < 1e6);
    assert!(doc.host.cpu.is_some());
}

#[test]
fn all_threads_column_uses_every_usable_cpu() {
    let usable = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as u32;
    let doc = run_json(&["--time", "10ms", "--threads", "all", "--size", "1M", "--link", "1gbe"]);
    assert!(!doc.probes.is_empty());
    for probe in &doc.probes {
        let ProbeSpec::Cpu(spec) = &probe.spec else { unreachable!() };
        assert_eq!(spec.threads, usable);
    }
}

#[test]
fn table_puts_figures_next_to_the_link() {
    headroom()
        .args(["cpu", "--time", "10ms", "--threads", "1", "--size", "64k", "--link", "25gbe"])
        .assert()
        .success()
        .stdout(predicate::str::contains("fills 25GbE?"))
        .stdout(predicate::str::contains("AES-256-GCM"))
        .stdout(predicate::str::contains("MB/s"))
        .stdout(predicate::str::contains("Gb/s"))
        .stdout(predicate::str::contains("one SMB3-encrypted stream (AES-256-GCM) can fill 25GbE (2.94 GB/s)"));
}

fn bad(args: &[&str], message: &str) {
    headroom()
        .arg("cpu")
        .args(args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(message))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn bad_input_exits_2_with_the_accepted_range() {
    bad(&["--threads", "0"], "--threads 0 is out of range: 1 to");
    bad(&["--threads", "100000"], "--threads 100000 is out of range");
    bad(&["--threads", "lots"], "--threads 'lots' is not a number");
    bad(&["--size", "1k"], "--size 1.000 KiB is out of range: 4 KiB to");
    bad(&["--size", "900T"], "(half the RAM)");
    bad(&["--size", "12parsecs"], "--size");
    bad(&["--link", "11gbe"], "unknown link '11gbe'");
    bad(&["--time", "0s"], "--time 0ns is out of range: 10ms to 1m");
    bad(&["--time", "2h"], "is out of range");
}

#[test]
fn help_has_examples() {
    headroom().args(["cpu", "--help"]).assert().success().stdout(predicate::str::contains("Examples:"));
}
