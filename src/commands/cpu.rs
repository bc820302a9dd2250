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
use headroom_cpu::{CpuChoice, CpuEngine, CpuRequest, Measurement};
use headroom_net::RemoteEngine;
use headroom_report::present::cpu::CpuRun;
use headroom_runner::{EngineKind, Plan, Runner};
use headroom_units::{DurationArg, Size};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom cpu                         every kernel, 1 core and all cores, next to the fastest NIC
  headroom cpu --link 10gbe            can this CPU keep up with 10 GbE?
  headroom cpu --threads 1 --time 1s   one core only, 1 s per figure
  headroom cpu --size 1G --json        a 1 GiB buffer; the result document on stdout
  headroom cpu --kernels encryption,sha256   only AES-GCM, ChaCha20-Poly1305 and SHA-256
  headroom cpu --remote nas.lan --token $TOKEN   the NAS's CPU, next to the NAS's fastest NIC

Kernels: RAID-5 XOR (4+1), RAID-6 P+Q (4+2, 8+2), CRC32C, xxHash64, XXH3, Fletcher-4,
SHA-256, BLAKE3, LZ4 and zstd -1/-3 (compress and decompress, on incompressible and
2:1 data), AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305, AES-128/256-CCM. Every kernel
is checked for a correct answer before it is timed. AES-GCM and ChaCha20-Poly1305 run
in ring and, where it loads, in the system's OpenSSL 3 libcrypto (what OpenSSH runs):
the faster gives the figures, the other is named under Implementations.

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
    #[arg(long, value_name = "SPEC", value_parser = |text: &str| LinkSpec::parse(text).map_err(|e| crate::flags::line(&e)))]
    pub link: Option<LinkSpec>,
    /// Only these kernels: groups (parity, checksum, compression, encryption) or ids
    /// (sha256, aes-256-gcm, zstd-3-compress, ...), comma-separated (default: all)
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub kernels: Vec<String>,
    #[command(flatten)]
    pub remote: crate::commands::remote::RemoteArgs,
}

pub fn run(args: &CpuArgs, out: &Output) -> anyhow::Result<Outcome> {
    let server = args.remote.endpoint();
    let (host, usable) = match &server {
        Some(server) => {
            let host = headroom_net::remote_inventory(server)?;
            let usable = host.cpu.as_ref().map_or(1, |c| c.logical_cpus.max(1) as usize);
            (host, usable)
        }
        None => (headroom_sys::inventory_live(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
    };
    let choice =
        CpuChoice { kernels: args.kernels.clone(), threads: args.threads.clone(), size: args.size, time: args.time.0 };
    let plan = choice.resolve(usable, host.memory_bytes)?;
    let link = LinkTarget::choose(args.link.as_ref(), &host.nics);

    let stop = crate::signals::stop_flag();
    let mut runner_plan = Plan::new(headroom_cpu::requests(&plan).iter().map(CpuRequest::to_request).collect());
    let mut runner = match &server {
        Some(server) => {
            runner_plan = runner_plan.placed_at(&server.display());
            Runner::new().with(RemoteEngine::new(EngineKind::Cpu, server.clone()).spelling_settings(crate::flags::net))
        }
        None => Runner::new().with(CpuEngine::new()),
    };
    let mut bars = ProgressSink::new(out.progress && !out.json, out.iec, &runner_plan);
    let mut results: Vec<Measurement> = Vec::new();
    let mut ran_on: Option<String> = None;
    for run in runner.run_all(&runner_plan, stop, &mut [&mut bars]) {
        if let Some(e) = run.error() {
            return Err(anyhow::anyhow!("{e}").context("cpu"));
        }
        ran_on = run.probe().and_then(|p| p.host.clone());
        results.extend(run.probe().and_then(headroom_cpu::measurement_of));
    }
    drop(bars);
    if results.is_empty() {
        bail!("stopped before any kernel was measured");
    }

    if out.json {
        let started_at = headroom_result::now_rfc3339();
        let probes = results
            .iter()
            .map(|m| headroom_job::cpu_probe_with_link(m, &link))
            .map(|p| headroom_result::Probe { host: ran_on.clone(), ..p })
            .collect();
        out.print_json(&headroom_analysis::cpu_document(started_at, host, probes, &link))?;
    } else {
        // The instruction-set features are this machine's: not shown for another's CPU.
        let features = if server.is_some() { Vec::new() } else { headroom_cpu::features() };
        let run = CpuRun { host: &host, plan: &plan, results: &results, link: &link, features: &features };
        out.print(&headroom_report::present::cpu::render(&run, out.style()));
    }
    Ok(Outcome::Ok)
}
