//! `headroom serve`: the server end of `headroom net` and `headroom ping HOST`,
//! and a stand-in for `iperf3 -s` that serves several clients at once and
//! never gets stuck on a dead client. Its banner and log lines are laid out
//! by `headroom_report::present::net`.

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_job::{ProbeCaps, ServedProbes};
use headroom_net::{check_bind_policy, Server, ServerConfig};
use headroom_report::present;
use headroom_units::DurationArg;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom serve                                  loopback only, for a local test
  headroom serve --bind 0.0.0.0 --token $TOKEN    reachable from the LAN; clients pass --token $TOKEN
  headroom serve --bind 0.0.0.0 --no-auth --iperf3   also serve stock `iperf3 -c` clients
  headroom serve --bind 0.0.0.0 --no-auth --iperf2   also serve stock `iperf -c` clients on port 5001
  headroom serve --once --port 5300               exit after one test
  headroom serve --bind 0.0.0.0 --token-file /etc/headroom/token   the token from a file (mode 600)
  headroom serve --bind 0.0.0.0 --token $TOKEN --allow-path /tank/bench
                                                  clients may also run disk probes in /tank/bench
                                                  (`headroom disk /tank/bench --remote HOST`)
  headroom serve --bind 0.0.0.0 --token $TOKEN --allow-net-to 192.168.1.10
                                                  an agent of `headroom fleet ... net 192.168.1.10`

Make a token with `TOKEN=$(openssl rand -hex 16)`: a short one is warned about
at start-up. One port carries TCP and UDP for both headroom and iperf3 clients; iperf2
clients (--iperf2) have a port of their own: uploads, -R, --full-duplex and -u uploads
are served, -d and -r are refused. Logs one line per test on stdout: peer, protocol,
test, streams, duration, bytes.

Clients with the token may also run CPU kernels here (`headroom cpu --remote`),
read this machine's inventory (`headroom sys --remote`) and, only under an
--allow-path directory, disk probes: headroom creates its own test file there
and removes it when the probe ends, when the client is lost, or (after a kill)
when the server starts again. One remote probe runs at a time.

With --flushcheck-dir DIR it is the listener of `headroom flushcheck write` on
another machine: it records each block that machine's storage acknowledged in
DIR/flushcheck.sqlite (synced before answering), for `flushcheck verify` after
that machine's power cut.")]
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
    /// Read the token from FILE, which no one else may read (mode 600; on Windows its ACL), or from systemd's credentials directory (--token-file %d/token)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["token", "no_auth"])]
    pub token_file: Option<std::path::PathBuf>,
    /// Serve anyone who can reach the port (needed for a non-loopback --bind without --token)
    #[arg(long)]
    pub no_auth: bool,
    /// Also serve stock iperf3 clients (unauthenticated; with --token they get one slot less than --max-clients)
    #[arg(long)]
    pub iperf3: bool,
    /// Also serve stock iperf2 clients (`iperf -c`, `-R`, `--full-duplex`, `-u`) on --iperf2-port (unauthenticated, as --iperf3)
    #[arg(long)]
    pub iperf2: bool,
    /// The TCP and UDP port iperf2 clients connect to, on the same address
    #[arg(long, value_name = "PORT", default_value_t = headroom_net::IPERF2_PORT, requires = "iperf2")]
    pub iperf2_port: u16,
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
    /// Record the blocks `headroom flushcheck write` clients report, durably, in DIR/flushcheck.sqlite
    #[arg(long, value_name = "DIR")]
    pub flushcheck_dir: Option<std::path::PathBuf>,
    /// Let clients run network tests from here towards this address or network (repeatable;
    /// a `headroom fleet ... net SERVER` agent); none by default
    #[arg(long, value_name = "ADDR|CIDR", value_parser = |text: &str| headroom_job::parse_allowed_net(text).map_err(|e| crate::flags::line(&e)))]
    pub allow_net_to: Vec<ipnet::IpNet>,
    /// Most disk jobs or CPU threads one client probe may start [default: 64, or the CPU count if higher]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_jobs: Option<u32>,
    /// Most buffer memory one client probe may allocate (disk: bs x qd x jobs; cpu: its buffers)
    #[arg(long, value_name = "SIZE", default_value = "1G")]
    pub max_buffer_memory: headroom_units::Size,
}

/// Reads --token-file: a secret must not be readable by others, so the file
/// is taken only when no one else may read it (Linux: mode 600 or 400;
/// Windows: its DACL lets in no one but its owner, SYSTEM and
/// Administrators) or from the credentials directory systemd made for this
/// service (LoadCredential=, mode 400 on a private mount). One trailing line
/// break is not part of the token.
fn read_token_file(path: &Path) -> anyhow::Result<String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("--token-file {shown}: cannot read it"))?;
    let in_credentials_dir = std::env::var_os("CREDENTIALS_DIRECTORY")
        .is_some_and(|dir| !dir.is_empty() && path.starts_with(Path::new(&dir)));
    if !in_credentials_dir {
        if let Some(who) = headroom_sys::secret_file::who_else_may_read(path)
            .map_err(|e| anyhow::anyhow!("--token-file {shown}: {e}"))?
        {
            bail!("--token-file {shown}: {who}");
        }
    }
    if !meta.is_file() || meta.len() > 4096 {
        bail!("--token-file {shown}: not a file of at most 4 KiB holding the token (example: openssl rand -hex 16 > {shown})");
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--token-file {shown}: cannot read it as text"))?;
    let token = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text);
    if token.is_empty() || token.len() > 1024 || token.contains(['\n', '\r']) {
        bail!("--token-file {shown}: the token must be one line of 1 to 1024 characters (example: openssl rand -hex 16 > {shown})");
    }
    Ok(token.to_string())
}

/// Shortest token the server takes without a warning: 16 characters of
/// even a lower-case alphabet hold ~75 bits, out of reach of the guess
/// throttles (a few guesses a second server-wide).
const GOOD_TOKEN_LEN: usize = 16;

/// Why a token is easy to guess, if it is.
fn token_weakness(token: &str) -> Option<String> {
    let distinct = token.chars().collect::<std::collections::BTreeSet<_>>().len();
    if token.chars().count() < GOOD_TOKEN_LEN {
        Some(format!(
            "the token is only {} characters: anyone who can reach this port may guess it; use at least {GOOD_TOKEN_LEN}",
            token.chars().count()
        ))
    } else if distinct < 6 {
        Some(format!("the token uses only {distinct} different characters: it is easy to guess"))
    } else {
        None
    }
}

pub fn run(args: &ServeArgs, out: &Output) -> anyhow::Result<Outcome> {
    if let Some(t) = &args.token {
        if t.is_empty() || t.len() > 1024 {
            bail!("--token must be 1 to 1024 characters (example: --token $TOKEN)");
        }
    }
    let token = match &args.token_file {
        Some(path) => Some(read_token_file(path)?),
        None => args.token.clone(),
    };
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
    check_bind_policy(args.bind, token.as_deref(), args.no_auth)?;
    if let Some(weak) = token.as_deref().and_then(token_weakness) {
        eprintln!("headroom serve: warning: {weak}; make one with `openssl rand -hex 16`");
    }
    let flush = match &args.flushcheck_dir {
        Some(dir) => Some(headroom_flushcheck::SqliteLedger::open(dir)?),
        None => None,
    };
    if args.max_buffer_memory.0 < (1 << 20) {
        bail!(
            "--max-buffer-memory {} is too small: at least 1M (example: --max-buffer-memory 1G)",
            args.max_buffer_memory.0
        );
    }
    let caps = ProbeCaps {
        max_jobs: args.max_jobs.unwrap_or_else(ProbeCaps::default_max_jobs),
        max_buffer_bytes: args.max_buffer_memory.0,
    };
    let probes = ServedProbes::new(&args.allow_path)?
        .allowing_net_to(args.allow_net_to.clone())
        .with_caps(caps)
        .spelling_disk_settings(crate::flags::disk)
        .spelling_serve_settings(crate::flags::far_end)
        .spelling_net_settings(crate::flags::net)
        .spelling_cpu_settings(crate::flags::cpu);
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
        token: token.clone(),
        allow_iperf3: args.iperf3 || args.no_auth,
        iperf2_port: args.iperf2.then_some(args.iperf2_port),
        max_clients: args.max_clients,
        max_duration: args.max_duration.0,
        idle_timeout: args.idle_timeout.0,
        once: args.once,
        log: Arc::new(log),
        probes: Some(Arc::new(probes)),
        flush: flush.map(|l| Arc::new(l) as Arc<dyn headroom_net::FlushLedger>),
        spelling: crate::flags::serve,
    };
    let iperf3 = cfg.allow_iperf3;
    let iperf2 = cfg.iperf2_port;
    let server = Server::bind(cfg).with_context(|| match iperf2 {
        Some(p) => format!("--bind {} --port {} --iperf2-port {p}", args.bind, args.port),
        None => format!("--bind {} --port {}", args.bind, args.port),
    })?;
    let iperf2_port = server.iperf2_addr().map(|a| a.port());
    eprint!(
        "{}",
        present::net::serve_banner(&server.local_addr().to_string(), token.is_some(), iperf3, iperf2_port, &disk_dirs)
    );
    if !args.allow_net_to.is_empty() {
        let nets: Vec<String> = args.allow_net_to.iter().map(ToString::to_string).collect();
        eprintln!("headroom serve: network tests for clients only towards {}", nets.join(", "));
    }
    server.run(crate::signals::stop_flag())?;
    Ok(Outcome::Ok)
}
