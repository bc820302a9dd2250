//! `headroom soak`: loops write, read, IOPS and network probes (and the
//! server's own disk probes, `--remote-path`) for hours into
//! a SQLite database, watches the links on the path, and at the end names
//! what it found (periodic dips, latency drift, link flaps, outages).
//!
//! This file parses the flags into `headroom_soak::SoakFlags` and wires the
//! pieces: the schedule, the store, the turns, the loop, the watcher and
//! the detectors live in crates/soak and crates/analysis; what is printed,
//! in crates/report/src/present/soak.rs.

use crate::output::{Outcome, Output};
use anyhow::Context;
use headroom_report::present::soak::{self as present, LeftFile};
use headroom_soak::{Metrics, ProbeFailure, SoakEvent, SoakFlags};
use headroom_units::{DurationArg, Size};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom soak --duration 3h --path /mnt/nas              write, read, iops for 3 hours
  headroom soak --duration 24h --path /mnt/nas --server nas.lan --metrics 0.0.0.0   Prometheus on port 10120
  headroom soak --duration 24h --path /mnt/nas --server nas.lan --remote-path /tank/bench
                                                  the NAS's own disk next to the share and the network
  headroom soak --cycle write --probe-time 60s --db cache.sqlite    write only, one-minute turns
  headroom soak --db nas.sqlite --resume                   continue an interrupted soak
  headroom soak --duration 10m --vmkernel-log vmkernel.log --json
  headroom soak --duration 1h --cycle write --goal write=200MB/s   exit 1 when the mean falls short
  headroom report nas.sqlite --html nas.html               draw a soak

Every per-second sample is committed to the database as it arrives: a killed
soak loses at most the last second, and --resume continues it (the gap is
recorded). Detectors and their thresholds: docs/detectors.md.")]
pub struct SoakArgs {
    /// How long to soak in total (e.g. 30m, 3h, 2d); Ctrl-C stops earlier [default: 3h]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<DurationArg>,
    /// A `headroom serve` to include network probes (HOST or HOST:PORT)
    #[arg(long, value_name = "HOST")]
    pub server: Option<String>,
    /// Token of a `headroom serve` that requires one
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Directory for the disk probes' test file [default: .]
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// Directory on the --server (one it allows with `serve --allow-path`) for
    /// its own disk probes remote-write, remote-read, remote-iops
    #[arg(long, value_name = "DIR")]
    pub remote_path: Option<PathBuf>,
    /// Probes of one cycle, in order: write, read, iops, net, remote-write,
    /// remote-read, remote-iops [default: write,read,iops, plus the remote ones
    /// with --remote-path (then write,read,iops only with --path), plus net with --server]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cycle: Option<Vec<String>>,
    /// Time each probe runs per cycle [default: 30s]
    #[arg(long, value_name = "DURATION")]
    pub probe_time: Option<DurationArg>,
    /// Size of the disk probes' test file [default: 1G]
    #[arg(long, value_name = "SIZE")]
    pub size: Option<Size>,
    /// The SQLite database to write [default: headroom-soak-TIME.sqlite]
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Continue the interrupted soak in --db (same cycle, paths and server)
    #[arg(long, requires = "db")]
    pub resume: bool,
    /// Serve Prometheus metrics on ADDR[:PORT] (port 10120 unless given; e.g. 0.0.0.0, 127.0.0.1:9500)
    #[arg(long, value_name = "ADDR[:PORT]")]
    pub metrics: Option<String>,
    /// A label on every metric, NAME=VALUE (repeatable) [default: host=this machine's hostname]
    #[arg(long, value_name = "NAME=VALUE", requires = "metrics")]
    pub metrics_label: Vec<String>,
    /// An ESXi vmkernel.log to read for vusb uplink reconnects (link flaps)
    #[arg(long, value_name = "FILE")]
    pub vmkernel_log: Option<PathBuf>,
    /// Thresholds the soak's means must meet (read=RATE, write=RATE, iops=COUNT,
    /// latency-p99=DURATION, as `disk --goal`); a missed goal exits 1
    #[arg(long, value_name = "LIST")]
    pub goal: Option<String>,
}

impl SoakArgs {
    fn flags(&self) -> SoakFlags {
        SoakFlags {
            duration: self.duration.map(|d| d.0),
            probe_time: self.probe_time.map(|d| d.0),
            cycle: self.cycle.clone(),
            server: self.server.clone(),
            path: self.path.clone(),
            remote_path: self.remote_path.clone(),
            size: self.size.map(|s| s.0),
            vmkernel_log: self.vmkernel_log.clone(),
        }
    }
}

/// `--metrics ADDR[:PORT]`; without a port, headroom_soak::DEFAULT_PORT.
fn parse_metrics_addr(spec: &str) -> anyhow::Result<SocketAddr> {
    let port = headroom_soak::DEFAULT_PORT;
    let host = spec.trim_start_matches('[').trim_end_matches(']');
    let given = spec.to_socket_addrs().ok().and_then(|mut a| a.next());
    given.or_else(|| (host, port).to_socket_addrs().ok().and_then(|mut a| a.next())).with_context(|| {
        format!("--metrics '{spec}' is not ADDR[:PORT]; use e.g. --metrics 127.0.0.1 or --metrics 0.0.0.0:{port}")
    })
}

/// The constant labels of the metrics: --metrics-label's, plus host= with
/// this machine's hostname unless given, so a fleet's agents stay apart.
fn metrics_labels(specs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut labels = headroom_soak::parse_labels(specs)
        .map_err(|e| anyhow::anyhow!("--metrics-label: {e} (example: --metrics-label host=nas1)"))?;
    if !labels.iter().any(|(n, _)| n == "host") {
        let host = headroom_sys::hostname(&headroom_sys::SysRoot::live()).unwrap_or_else(|| "unknown".into());
        labels.insert(0, ("host".into(), host));
    }
    Ok(labels)
}

pub fn run(args: &SoakArgs, out: &Output) -> anyhow::Result<Outcome> {
    let stop = crate::signals::stop_flag();
    let goals = crate::output::parse_goal_flag(args.goal.as_deref())?;
    let metrics_addr = args.metrics.as_deref().map(parse_metrics_addr).transpose()?;
    if let Some(log) = &args.vmkernel_log {
        std::fs::File::open(log).with_context(|| format!("--vmkernel-log {}: cannot read it", log.display()))?;
    }
    let db = args.db.clone().unwrap_or_else(headroom_soak::default_db);
    let flags = args.flags();
    let schedule = if args.resume { None } else { Some(headroom_soak::Schedule::new(&flags)?) };
    // Everything that can be checked is, before the database is created or
    // touched: a busy --metrics port must not leave a half-started soak.
    let metrics = Metrics::with_labels(metrics_labels(&args.metrics_label)?);
    if let Some(addr) = metrics_addr {
        let bound = metrics.serve(addr).with_context(|| format!("--metrics {addr}: cannot listen there"))?;
        if !out.json {
            eprintln!("headroom: Prometheus metrics on http://{bound}/metrics");
        }
    }

    let session = headroom_soak::Session::open(&db, &flags, schedule.as_ref())?
        .spelling_settings(crate::flags::disk, crate::flags::net);
    if let (Some(gap), false) = (session.gap_s(), out.json) {
        eprintln!("headroom: resuming {} after a gap of {:.1} s", db.display(), gap);
    }
    if args.resume {
        let left = session.remove_left_test_files()?;
        let left = left.iter().map(|l| match l {
            headroom_soak::LeftFile::Removed(p) => LeftFile::Removed(p),
            headroom_soak::LeftFile::InUse(p, pid) => LeftFile::InUse(p, *pid),
            headroom_soak::LeftFile::Failed(p, e) => LeftFile::Failed(p, e),
        });
        present::left_file_lines(left, out.json).iter().for_each(|l| eprintln!("{l}"));
    }

    let vmkernel_log = args.vmkernel_log.clone().or_else(|| session.config().vmkernel_log.as_ref().map(PathBuf::from));
    let import_log = |store: &headroom_soak::Store| -> anyhow::Result<()> {
        if let Some(log) = &vmkernel_log {
            headroom_soak::import_vmkernel_log(store, log)
                .with_context(|| format!("--vmkernel-log {}", log.display()))?;
        }
        Ok(())
    };
    import_log(session.store())?;

    let progress = |plan: &_| crate::progress::ProgressSink::new(out.progress && !out.json, out.iec, plan);
    let Some(ready) = session.prepare(args.token.clone(), stop, progress)? else {
        return Ok(Outcome::Error); // stopped: session ended
    };
    let show = !out.json;
    let finished = ready.run(stop, &metrics, &mut |p| {
        if let (SoakEvent::TurnEnded { cycle, probe, outcome }, true) = (p, show) {
            let turn = match outcome {
                Ok(o) => present::Turn::Measured(&o.probe),
                Err(ProbeFailure::Unreachable(why)) => present::Turn::Unreachable(why),
                Err(ProbeFailure::Failed(why)) => present::Turn::Failed(why),
            };
            eprint!("{}", headroom_report::terminal_safe(&present::turn_line(cycle, probe, turn), false));
        }
    })?;
    import_log(finished.store())?; // the log may have grown while the soak ran

    let mut doc = finished.finish()?;
    // Held against each probe's mean over the whole soak (every stored sample).
    let goal_results = headroom_job::hold_goals(&mut doc, &goals, None);
    if out.json {
        out.print_json(&doc)?;
    } else {
        out.print(&present::summary(&doc, &db.display().to_string(), out.style()));
    }
    Ok(crate::output::goal_outcome(&goal_results, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_port_defaults_off_opentelemetrys() {
        let port = headroom_soak::DEFAULT_PORT;
        assert_eq!(parse_metrics_addr("127.0.0.1").unwrap(), SocketAddr::from(([127, 0, 0, 1], port)));
        assert_eq!(parse_metrics_addr("[::1]").unwrap(), format!("[::1]:{port}").parse().unwrap());
        assert_eq!(parse_metrics_addr("::1").unwrap(), format!("[::1]:{port}").parse().unwrap());
        assert_eq!(parse_metrics_addr("0.0.0.0:9500").unwrap(), "0.0.0.0:9500".parse().unwrap());
        assert!(parse_metrics_addr("127.0.0.1:http").is_err());
        // Prometheus's exporter range is full; OpenTelemetry's exporter has 9464.
        assert!(!(9090..=9999).contains(&port));
    }
}
