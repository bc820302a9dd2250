//! `headroom serve`: the server end of `headroom net` and `headroom ping HOST`,
//! and a stand-in for `iperf3 -s` that serves several clients at once and
//! never gets stuck on a dead client. Its banner and log lines are laid out
//! by `headroom_report::present::net`.

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_job::ServedProbes;
use headroom_net::{check_bind_policy, Server, ServerConfig};
use headroom_report::present;
use headroom_units::DurationArg;
use std::io::Write;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom serve                                  loopback only, for a local test
  headroom serve --bind 0.0.0.0 --token s3cret    reachable from the LAN; clients pass --token s3cret
  headroom serve --bind 0.0.0.0 --no-auth --iperf3   also serve stock `iperf3 -c` clients
  headroom serve --once --port 5300               exit after one test
  headroom serve --bind 0.0.0.0 --token s3cret --allow-path /tank/bench
                                                  clients may also run disk probes in /tank/bench
                                                  (`headroom disk /tank/bench --remote HOST`)

One port carries TCP and UDP for both headroom and iperf3 clients. Logs one
line per test on stdout: peer, protocol, test, streams, duration, bytes.

Clients with the token may also run CPU kernels here (`headroom cpu --remote`),
read this machine's inventory (`headroom sys --remote`) and, only under an
--allow-path directory, disk probes: headroom creates its own test file there
and removes it when the probe ends, when the client is lost, or (after a kill)
when the server starts again. One remote probe runs at a time.")]
pub struct ServeArgs {
    /// Address to listen on (127.0.0.1 unless told otherwise)
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// TCP and UDP port
    #[arg(long, default_value_t = headroom_net::DEFAULT_PORT)]
    pub port: u16,
    /// Shared secret headroom clients must prove they hold (challenge-response; never sent; also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true, conflicts_with = "no_auth")]
    pub token: Option<String>,
    /// Serve anyone who can reach the port (needed for a non-loopback --bind without --token)
    #[arg(long)]
    pub no_auth: bool,
    /// Also serve stock iperf3 clients (unauthenticated; with --token they get one slot less than --max-clients)
    #[arg(long)]
    pub iperf3: bool,
    /// Clients served at once; more are told the server is busy
    #[arg(long, default_value_t = 4)]
    pub max_clients: usize,
    /// Longest test a client may ask for
    #[arg(long, default_value = "10m")]
    pub max_duration: DurationArg,
    /// A client silent for this long loses its slot (also the pre-authentication deadline, at most 10s)
    #[arg(long, default_value = "10s")]
    pub idle_timeout: DurationArg,
    /// Exit after the first test
    #[arg(long)]
    pub once: bool,
    /// Let clients run disk probes in this directory (repeatable); none by default
    #[arg(long, value_name = "DIR")]
    pub allow_path: Vec<std::path::PathBuf>,
}

pub fn run(args: &ServeArgs, out: &Output) -> anyhow::Result<Outcome> {
    if let Some(t) = &args.token {
        if t.is_empty() || t.len() > 1024 {
            bail!("--token must be 1 to 1024 characters (example: --token s3cret)");
        }
    }
    if args.max_clients == 0 || args.max_clients > 1024 {
        bail!("--max-clients {} is out of range: 1 to 1024 (example: --max-clients 4)", args.max_clients);
    }
    if args.idle_timeout.0.as_millis() < 100 {
        bail!("--idle-timeout {} is too short: at least 100ms (example: --idle-timeout 10s)", args.idle_timeout);
    }
    if args.idle_timeout.0 > Duration::from_secs(86_400) {
        bail!("--idle-timeout {} is too long: at most 24h (example: --idle-timeout 10s)", args.idle_timeout);
    }
    if args.max_duration.0 > Duration::from_secs(7 * 86_400) {
        bail!("--max-duration {} is too long: at most 7d (example: --max-duration 10m)", args.max_duration);
    }
    if args.max_duration.0.is_zero() {
        bail!("--max-duration must be above zero (example: --max-duration 10m)");
    }
    check_bind_policy(args.bind, args.token.as_deref(), args.no_auth).map_err(anyhow::Error::msg)?;
    let probes = ServedProbes::new(&args.allow_path).map_err(anyhow::Error::msg)?;
    let disk_dirs: Vec<String> = probes.allowed().iter().map(|d| d.display().to_string()).collect();
    let json = out.json;
    let log = move |line: &str| {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(present::net::serve_log_line(line, json).as_bytes());
        let _ = o.flush();
    };
    for stale in probes.remove_stale_test_files() {
        log(&format!("removed {}, left by a headroom that was killed", stale.display()));
    }
    let cfg = ServerConfig {
        bind: args.bind,
        port: args.port,
        token: args.token.clone(),
        allow_iperf3: args.iperf3 || args.no_auth,
        max_clients: args.max_clients,
        max_duration: args.max_duration.0,
        idle_timeout: args.idle_timeout.0,
        once: args.once,
        log: Arc::new(log),
        probes: Some(Arc::new(probes)),
    };
    let iperf3 = cfg.allow_iperf3;
    let server = Server::bind(cfg).with_context(|| format!("--bind {} --port {}", args.bind, args.port))?;
    eprint!(
        "{}",
        present::net::serve_banner(&server.local_addr().to_string(), args.token.is_some(), iperf3, &disk_dirs)
    );
    server.run(crate::signals::stop_flag())?;
    Ok(Outcome::Ok)
}
