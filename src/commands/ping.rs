//! `headroom ping HOST:PORT`: TCP handshake round trips to any TCP service
//! (iSCSI 3260, NFS 2049, SMB 445, SSH 22), closed with RST so nothing piles
//! up in TIME_WAIT. `headroom ping HOST` (no port): UDP echo round trips
//! against a headroom server, with jitter and loss. Lines are laid out by
//! `headroom_report::present::ping`.

use crate::output::{Outcome, Output};
use anyhow::bail;
use headroom_net::{connect_probe, echo_probe, tcp_connect_series, Endpoint, Session};
use headroom_report::present;
use headroom_result::ResultDoc;
use headroom_units::DurationArg;
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom ping nas.lan:3260          iSCSI target handshake time
  headroom ping nas.lan:2049 --count 50 --interval 50ms
  headroom ping nas.lan               UDP echo against `headroom serve` (port 5201)
  headroom ping nas.lan:22 --json
  headroom ping nas.lan:3260 --interface enx0c37   the same target through another NIC

With a port: TCP connect round trips to any service; each connection is reset
(SO_LINGER 0) right after the handshake, so the service sees no request and no
TIME_WAIT piles up. Without a port: UDP echo to a headroom server.")]
pub struct PingArgs {
    /// HOST:PORT for TCP handshakes, or HOST for UDP echo against a headroom server
    pub target: String,
    /// Round trips to measure (1-100000)
    #[arg(long, short = 'c', default_value_t = 10)]
    pub count: u32,
    /// Pause between round trips
    #[arg(long, short = 'i', default_value = "200ms")]
    pub interval: DurationArg,
    /// Give up on one round trip after this long
    #[arg(long, default_value = "2s")]
    pub timeout: DurationArg,
    /// Port of the headroom server, for UDP echo (TARGET without a port)
    #[arg(long, default_value_t = headroom_net::DEFAULT_PORT)]
    pub port: u16,
    /// Token of a `headroom serve --token` server, for UDP echo (also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(flatten)]
    pub source: crate::commands::net::SourceArgs,
}

pub fn run(args: &PingArgs, out: &Output) -> anyhow::Result<Outcome> {
    if args.count == 0 || args.count > 100_000 {
        bail!("--count {} is out of range: 1 to 100000 (example: --count 10)", args.count);
    }
    if args.interval.0 > Duration::from_secs(3600) {
        bail!("--interval {} is too long: at most 1h (example: --interval 200ms)", args.interval);
    }
    if args.timeout.0 > Duration::from_secs(3600) {
        bail!("--timeout {} is too long: at most 1h (example: --timeout 2s)", args.timeout);
    }
    if args.timeout.0 < Duration::from_millis(1) {
        bail!("--timeout {} is too short (example: --timeout 2s)", args.timeout);
    }
    let (host, port) = headroom_net::split_host_port(&args.target).map_err(|e| anyhow::anyhow!("TARGET {e}"))?;
    let source = args.source.source()?;
    let stop = crate::signals::stop_flag();
    let started_at = headroom_result::now_rfc3339();
    let interval_ms = args.interval.0.as_secs_f64() * 1e3;
    let probe = match port {
        Some(port) => {
            let addr =
                *headroom_net::resolve(&host, port).map_err(|e| anyhow::anyhow!("{e}"))?.first().expect("non-empty");
            let target = Endpoint { host: host.clone(), port, token: None, timeout: args.timeout.0, source };
            if !out.json {
                out.print(&present::ping::tcp_heading(
                    &target.display(),
                    addr,
                    args.count,
                    target.source.describe().as_deref(),
                ));
            }
            let r = tcp_connect_series(addr, &target, args.count, args.interval.0, stop, &mut |i, r| {
                if !out.json {
                    out.print(&present::ping::round_trip(i, r));
                }
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            connect_probe(&r, None, interval_ms)
        }
        None => {
            let target = Endpoint { host, port: args.port, token: args.token.clone(), timeout: args.timeout.0, source };
            let session = Session::open(&target).map_err(|e| match e {
                headroom_net::NetError::IsIperf3 => {
                    anyhow::anyhow!("{} is an iperf3 server: UDP echo needs `headroom serve`; give a port for TCP handshakes (HOST:PORT)", target.display())
                }
                e => anyhow::anyhow!(crate::flags::line(&e)),
            })?;
            if !out.json {
                out.print(&present::ping::udp_heading(
                    &target.display(),
                    session.peer,
                    args.count,
                    target.source.describe().as_deref(),
                ));
            }
            let r = session
                .udp_echo(args.count, args.interval.0, 64, stop, &mut |seq, rtt| {
                    if !out.json {
                        out.print(&present::ping::round_trip(seq as u32, rtt.ok_or("no answer")));
                    }
                })
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            session.close();
            echo_probe(&r, &target.display(), interval_ms)
        }
    };
    if out.json {
        let mut doc = ResultDoc::new(started_at);
        doc.probes.push(probe);
        out.print_json(&doc)?;
        return Ok(Outcome::Ok);
    }
    out.print(&present::ping::summary(&probe));
    let ok = probe.summary.ops.unwrap_or(0);
    Ok(if ok == 0 { Outcome::Error } else { Outcome::Ok })
}
