//! `headroom cpu`: what this CPU pushes through parity, checksums,
//! compression and encryption, per core and on all cores, next to the link
//! it feeds (`--link`, else the path's NIC: `headroom_analysis::LinkTarget`).
//! Parses and validates arguments, runs the kernel matrix on the Runner's
//! cpu engine with a progress bar, and hands the figures to
//! `headroom_analysis::cpu_link` (the document) or
//! `headroom_report::present::cpu` (the table); measures nothing itself.

use crate::output::{Outcome, Output};
use crate::progress::ProgressSink;
use anyhow::bail;
use headroom_analysis::{LinkSpec, LinkTarget};
use headroom_cpu::{
    all_kernels, BufferSpec, CpuEngine, CpuRequest, Group, Kernel, KernelMatrix, Measurement, CACHE_BUFFER, MIN_BUFFER,
};
use headroom_report::present::cpu::CpuRun;
use headroom_result::Probe;
use headroom_runner::{Plan, Runner};
use headroom_units::{format_duration, format_size, DurationArg, Size};
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom cpu                         every kernel, 1 core and all cores, next to the fastest NIC
  headroom cpu --link 10gbe            can this CPU keep up with 10 GbE?
  headroom cpu --threads 1 --time 1s   one core only, 1 s per figure
  headroom cpu --size 1G --json        a 1 GiB buffer; the result document on stdout
  headroom cpu --kernels encryption,sha256   only AES-GCM, ChaCha20-Poly1305 and SHA-256

Kernels: RAID-5 XOR (4+1), RAID-6 P+Q (4+2, 8+2), CRC32C, xxHash64, XXH3, Fletcher-4,
SHA-256, BLAKE3, LZ4 and zstd -1/-3 (compress and decompress, on incompressible and
2:1 data), AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305. Every kernel is checked for
a correct answer before it is timed.

Columns: a buffer larger than the caches (--size; default the larger of 64 MiB and
twice the last-level cache, shared by the threads) and a 256 KiB buffer per thread
that stays in L2. Figures are payload bytes per second (uncompressed bytes for
compression) in MB/s and Gb/s. Sizes: 4k = 4096, 1M = 1048576, 1MB = 1000000.")]
pub struct CpuArgs {
    /// Worker threads: 1, all, or a number (default: 1 and all, as two columns)
    #[arg(long, value_name = "1|all|N")]
    pub threads: Option<String>,
    /// Out-of-cache buffer (4k to half the RAM; default max(64M, 2 x last-level cache))
    #[arg(long, value_name = "SIZE")]
    pub size: Option<Size>,
    /// Measured time of each figure (10ms to 1m; default 100ms; a warm-up runs before it)
    #[arg(long, value_name = "DURATION", default_value = "100ms")]
    pub time: DurationArg,
    /// Link to compare with, e.g. 1gbe, 10gbe, 25gbe, 16gfc, 940Mb/s (default: fastest local interface)
    #[arg(long, value_name = "SPEC", value_parser = LinkSpec::parse)]
    pub link: Option<LinkSpec>,
    /// Only these kernels: groups (parity, checksum, compression, encryption) or ids
    /// (sha256, aes-256-gcm, zstd-3-compress, ...), comma-separated (default: all)
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub kernels: Vec<String>,
}

/// The kernels `--kernels` names (all when empty).
pub(crate) fn select_kernels(names: &[String]) -> anyhow::Result<Vec<Kernel>> {
    let all = all_kernels();
    if names.is_empty() {
        return Ok(all);
    }
    let group_of = |name: &str| match name {
        "parity" | "raid" => Some(Group::Parity),
        "checksum" | "checksums" | "hash" => Some(Group::Checksum),
        "compression" | "compress" => Some(Group::Compression),
        "encryption" | "crypto" | "aead" => Some(Group::Encryption),
        _ => None,
    };
    let mut chosen = Vec::new();
    for name in names {
        let name = name.trim().to_ascii_lowercase();
        let matched: Vec<Kernel> = match group_of(&name) {
            Some(g) => all.iter().filter(|k| k.group() == g).copied().collect(),
            None => all.iter().filter(|k| k.id() == name).copied().collect(),
        };
        if matched.is_empty() {
            let mut ids: Vec<String> = all.iter().map(|k| k.id()).collect();
            ids.dedup();
            bail!(
                "--kernels: unknown kernel '{name}'; accepted: parity, checksum, compression, encryption or one of {}",
                ids.join(", ")
            );
        }
        chosen.extend(matched);
    }
    // Keep the catalog's order and drop repeats.
    Ok(all.into_iter().filter(|k| chosen.contains(k)).collect())
}

const TIME_RANGE: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(60));

/// `--threads` resolved against this machine.
fn thread_counts(arg: Option<&str>, usable: usize) -> anyhow::Result<Vec<usize>> {
    let range = format!("1 to {usable} (this machine's usable CPUs) or all, e.g. --threads 1");
    let Some(text) = arg else {
        return Ok(if usable > 1 { vec![1, usable] } else { vec![1] });
    };
    if text.eq_ignore_ascii_case("all") {
        return Ok(vec![usable]);
    }
    match text.parse::<usize>() {
        Ok(n) if (1..=usable).contains(&n) => Ok(vec![n]),
        Ok(n) => bail!("--threads {n} is out of range: {range}"),
        Err(_) => bail!("--threads '{text}' is not a number: {range}"),
    }
}

/// The buffer columns: out of cache (`size`) and cache-resident (256 KiB per thread).
fn buffers(size: Option<Size>, ram: Option<u64>) -> anyhow::Result<Vec<BufferSpec>> {
    let max = ram.map(|r| r / 2);
    let range = match max {
        Some(m) => format!("4 KiB to {} (half the RAM), e.g. --size 64M", format_size(m)),
        None => "at least 4 KiB, e.g. --size 64M".to_string(),
    };
    let bytes = match size {
        Some(Size(b)) => {
            if b < MIN_BUFFER || max.is_some_and(|m| b > m) {
                bail!("--size {} is out of range: {range}", format_size(b));
            }
            b
        }
        None => {
            let default = headroom_cpu::default_memory_buffer();
            max.map_or(default, |m| default.min(m))
        }
    };
    Ok(if bytes > CACHE_BUFFER {
        vec![BufferSpec { bytes, cache_resident: false }, BufferSpec { bytes: CACHE_BUFFER, cache_resident: true }]
    } else {
        vec![BufferSpec { bytes, cache_resident: true }]
    })
}

fn check_time(time: Duration) -> anyhow::Result<Duration> {
    if time < TIME_RANGE.0 || time > TIME_RANGE.1 {
        bail!(
            "--time {} is out of range: {} to {} per figure, e.g. --time 100ms",
            format_duration(time),
            format_duration(TIME_RANGE.0),
            format_duration(TIME_RANGE.1)
        );
    }
    Ok(time)
}

pub fn run(args: &CpuArgs, out: &Output) -> anyhow::Result<Outcome> {
    let host = headroom_sys::inventory_live();
    let usable = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = thread_counts(args.threads.as_deref(), usable)?;
    let buffers = buffers(args.size, host.memory_bytes)?;
    let time = check_time(args.time.0)?;
    let link = LinkTarget::choose(args.link.as_ref(), &host.nics);
    let plan = KernelMatrix {
        kernels: select_kernels(&args.kernels)?,
        threads,
        buffers,
        time,
        warmup: (time / 4).clamp(Duration::from_millis(2), Duration::from_millis(50)),
    };

    let stop = crate::signals::stop_flag();
    let runner_plan = Plan::new(plan.requests().iter().map(CpuRequest::to_request).collect());
    let mut bars = ProgressSink::new(out.progress && !out.json, out.iec, &runner_plan);
    let mut results: Vec<Measurement> = Vec::new();
    for run in Runner::new().with(CpuEngine::new()).run_all(&runner_plan, stop, &mut [&mut bars]) {
        if let Some(e) = run.error() {
            return Err(anyhow::anyhow!("{e}").context("cpu"));
        }
        results.extend(run.probe().and_then(headroom_cpu::measurement_of));
    }
    drop(bars);
    if results.is_empty() {
        bail!("stopped before any kernel was measured");
    }

    if out.json {
        let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let probes = results.iter().map(|m| probe_with_link(m, &link)).collect();
        out.print_json(&headroom_analysis::cpu_document(started_at, host, probes, &link))?;
    } else {
        let features = headroom_cpu::features();
        let run = CpuRun { host: &host, plan: &plan, results: &results, link: &link, features: &features };
        out.print(&headroom_report::present::cpu::render(&run, out.style()));
    }
    Ok(Outcome::Ok)
}

/// A kernel's probe held against the link it feeds (`fills_link`, `cpu_below_link`).
pub(crate) fn probe_with_link(m: &Measurement, link: &LinkTarget) -> Probe {
    headroom_analysis::cpu_probe_against_link(m.to_probe(), &m.kernel.name(), link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_select_by_group_or_id_in_catalog_order() {
        let names = |list: &[&str]| {
            let owned: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            select_kernels(&owned).map(|ks| ks.iter().map(|k| k.id()).collect::<Vec<_>>())
        };
        assert_eq!(names(&["aes-256-gcm", "sha256"]).unwrap(), ["sha256", "aes-256-gcm"]);
        assert_eq!(names(&["encryption"]).unwrap(), ["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"]);
        assert_eq!(names(&["zstd-3-compress"]).unwrap().len(), 2, "both data kinds");
        assert_eq!(names(&[]).unwrap().len(), all_kernels().len());
        let err = names(&["md5"]).unwrap_err().to_string();
        assert!(err.contains("unknown kernel 'md5'") && err.contains("aes-256-gcm"), "{err}");
    }

    #[test]
    fn threads_accept_one_all_and_numbers_in_range() {
        assert_eq!(thread_counts(None, 8).unwrap(), [1, 8]);
        assert_eq!(thread_counts(None, 1).unwrap(), [1]);
        assert_eq!(thread_counts(Some("all"), 8).unwrap(), [8]);
        assert_eq!(thread_counts(Some("3"), 8).unwrap(), [3]);
        let err = thread_counts(Some("0"), 8).unwrap_err().to_string();
        assert!(err.contains("--threads 0 is out of range: 1 to 8"), "{err}");
        assert!(thread_counts(Some("9"), 8).is_err());
        assert!(thread_counts(Some("many"), 8).is_err());
    }

    #[test]
    fn sizes_outside_4k_to_half_the_ram_are_refused() {
        let ram = Some(8u64 << 30);
        assert!(buffers(Some(Size(4095)), ram).unwrap_err().to_string().contains("4 KiB to 4.000 GiB"));
        assert!(buffers(Some(Size((4 << 30) + 1)), ram).is_err());
        let b = buffers(Some(Size(1 << 20)), ram).unwrap();
        assert_eq!(b.len(), 2);
        assert!(!b[0].cache_resident && b[1].cache_resident);
        let small = buffers(Some(Size(64 << 10)), ram).unwrap();
        assert_eq!(small, [BufferSpec { bytes: 64 << 10, cache_resident: true }]);
    }
}
