//! The command line: flags, presets and help text, parsed with clap.
//! Owns argument syntax and validation of single values; it runs nothing.

use crate::commands;
use clap::{Args, Parser, Subcommand};

pub const EXIT_CODES: &str = "\
Exit codes:
  0  ok
  1  measured, but a goal (--goal) was missed
  2  usage error (bad flag, spec or value) or runtime error
  130  stopped by Ctrl-C (what was measured is printed, test files are removed)";

#[derive(Parser, Debug)]
#[command(
    name = "headroom",
    version,
    about = "How fast is this storage/network path really, and what is holding it back?",
    long_about = "headroom measures disk, network and the path between them, puts every figure \
next to the physical ceiling of each hop (disk, PCIe, NIC, link, protocol, CPU) and names the \
bottleneck.\n\nSizes accept SI and IEC units with dd's convention: 4k = 4096, 1M = 1048576, \
1MB = 1000000. Rates are printed in decimal units, bits and bytes side by side.",
    after_help = EXIT_CODES,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command accepts.
#[derive(Args, Debug, Clone, Default)]
pub struct GlobalArgs {
    /// Print one JSON document to stdout instead of tables
    #[arg(long, global = true)]
    pub json: bool,
    /// Also print byte rates in IEC units (MiB/s)
    #[arg(long, global = true)]
    pub iec: bool,
    /// Never use colour (NO_COLOR in the environment does the same)
    #[arg(long, global = true)]
    pub no_color: bool,
    /// Hide progress bars
    #[arg(long, global = true)]
    pub quiet: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The main job: inventory, disk and network probes, ceilings per hop, and the bottleneck verdict
    Run(commands::run::RunArgs),
    /// Storage tests on a directory, device or file: MB/s, IOPS, latency percentiles, fio-checked
    Disk(Box<commands::disk::DiskArgs>),
    /// Network path: latency idle and under load, handshake time, throughput, next to the link ceiling
    Net(commands::net::NetArgs),
    /// Serve `headroom net` / `headroom ping` clients (and stock iperf3 clients with --iperf3)
    Serve(commands::serve::ServeArgs),
    /// TCP handshake round trips to any service (HOST:PORT), or UDP echo to a headroom server (HOST)
    Ping(commands::ping::PingArgs),
    /// Ceilings of a link or bus: usable rate, TCP/UDP/iSCSI goodput, frame timing
    Link(commands::link::LinkArgs),
    /// What is in this box: CPU, memory, NICs, disks, filesystems, each with its ceiling
    Sys(commands::sys::SysArgs),
    /// What this CPU pushes through parity, checksums, compression and encryption, next to the link
    Cpu(commands::cpu::CpuArgs),
    /// Compare saved results side by side: ratios to the first and whether they are beyond the noise
    Compare(commands::compare::CompareArgs),
    /// Show saved results: verdict, hop chain, probes; --html writes a self-contained report
    Report(commands::report::ReportArgs),
    /// Hours-long loop of disk and network probes into SQLite: dips, drift, link flaps, outages
    Soak(commands::soak::SoakArgs),
    /// Print shell completions for bash, zsh, fish, elvish or powershell
    Completions(commands::meta::CompletionsArgs),
    /// Print the man page (roff) generated from this CLI
    #[command(name = "manpage")]
    ManPage,
}
