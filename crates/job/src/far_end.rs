//! The far end: what `headroom serve` runs for its clients besides the
//! network tests they run against it ([`ServedProbes`], the server's
//! [`ProbeHost`]). Disk probes only create test files, only in a directory
//! the operator allowed with `--allow-path` (none by default); network
//! tests towards a third server (a fleet's agents all testing one NAS) only
//! towards addresses the operator allowed with `--allow-net-to` (none by
//! default: a server must not become a traffic cannon pointed wherever a
//! token holder likes); CPU kernels run within the server's duration
//! limit; the inventory is this machine's.

use headroom_cpu::{CpuEngine, CpuRequest};
use headroom_disk::{under_any, DiskEngine, DiskRequest};
use headroom_net::{NetEngine, NetRequest, NetTest, ProbeHost};
use headroom_result::Host;
use headroom_runner::{EngineKind, ProbeError, ProbeRequest, Runner};
use ipnet::IpNet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most bytes a remote CPU probe's buffers may take in all (threads x buffer).
const MAX_CPU_BUFFERS: u64 = 4 << 30;
/// Most threads a remote CPU probe may start.
const MAX_CPU_THREADS: usize = 1024;

/// The probes a `headroom serve` runs on this machine for its clients.
pub struct ServedProbes {
    allowed: Vec<PathBuf>,
    allowed_net: Vec<IpNet>,
    hostname: String,
}

/// `--allow-net-to ADDR|CIDR`: one address (a /32 or /128) or a network.
pub fn parse_allowed_net(text: &str) -> Result<IpNet, String> {
    text.parse::<IpNet>().or_else(|_| text.parse::<IpAddr>().map(IpNet::from)).map_err(|_| {
        format!("'{text}' is neither an address nor a CIDR network (example: --allow-net-to 192.168.1.10 or --allow-net-to 10.0.0.0/24)")
    })
}

impl ServedProbes {
    /// The far end allowing disk probes under `allow_paths` (each an existing
    /// directory; kept as its canonical path, so a symlink given here is
    /// followed once, now, and never again).
    pub fn new(allow_paths: &[PathBuf]) -> Result<Self, String> {
        let allowed = allow_paths.iter().map(|p| allowed_dir(p)).collect::<Result<_, _>>()?;
        let hostname = headroom_sys::hostname(&headroom_sys::SysRoot::live()).unwrap_or_else(|| "unknown".into());
        Ok(ServedProbes { allowed, allowed_net: Vec::new(), hostname })
    }

    /// Also runs network tests for clients, towards servers in `nets` only.
    pub fn allowing_net_to(mut self, nets: Vec<IpNet>) -> Self {
        self.allowed_net = nets;
        self
    }

    /// The networks clients' network tests may go to.
    pub fn allowed_net(&self) -> &[IpNet] {
        &self.allowed_net
    }

    fn admit_net(&self, request: &ProbeRequest, max_duration: Duration) -> Result<(), ProbeError> {
        if self.allowed_net.is_empty() {
            return Err(ProbeError::Refused(format!(
                "{} runs no network tests for clients: start it with `headroom serve --allow-net-to ADDR|CIDR` naming the servers it may test against (e.g. --allow-net-to 192.168.1.10)",
                self.hostname
            )));
        }
        let net: NetRequest = request.params()?;
        let host = net.server.host.trim_start_matches('[').trim_end_matches(']');
        // An address, not a name: what was checked is what is connected to.
        let ip: IpAddr = host.parse().map_err(|_| {
            ProbeError::Usage(format!(
                "a network test run by {} names its server by address, not '{host}' (the client resolves it)",
                self.hostname
            ))
        })?;
        if !self.allowed_net.iter().any(|n| n.contains(&ip)) {
            return Err(ProbeError::Refused(format!(
                "{ip} is outside every --allow-net-to of {} ({})",
                self.hostname,
                self.allowed_net.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            )));
        }
        // Which of its addresses and NICs an agent sends from is its operator's choice.
        if !net.server.source.is_default() {
            return Err(ProbeError::Refused(format!(
                "{} chooses its own source address and interface: a network test run there cannot ask for one",
                self.hostname
            )));
        }
        match &net.test {
            NetTest::Throughput(t) => within(t.duration, max_duration),
            NetTest::Rtt { time } => within(*time, max_duration),
            NetTest::Echo | NetTest::Connect => Ok(()),
        }
    }

    /// The allowed directories, canonical.
    pub fn allowed(&self) -> &[PathBuf] {
        &self.allowed
    }

    /// Removes the test files a killed server left in the allowed
    /// directories; returns what it removed.
    pub fn remove_stale_test_files(&self) -> Vec<PathBuf> {
        self.allowed.iter().flat_map(|d| headroom_disk::remove_stale_test_files(d)).collect()
    }

    fn admit_disk(&self, request: &ProbeRequest, max_duration: Duration) -> Result<(), ProbeError> {
        if self.allowed.is_empty() {
            return Err(ProbeError::Refused(format!(
                "{} does not allow disk probes: start it with `headroom serve --allow-path DIR` (e.g. --allow-path /tank/bench)",
                self.hostname
            )));
        }
        let disk: DiskRequest = request.params()?;
        let target = &disk.target;
        if target.destructive || target.force || target.keep {
            return Err(ProbeError::Usage(
                "--destructive, --force and --keep are for local runs: a server only creates and removes its own test files"
                    .into(),
            ));
        }
        within(disk.test.ramp + disk.test.time, max_duration)?;
        let path = &target.path;
        let real = std::fs::canonicalize(path)
            .map_err(|e| ProbeError::Usage(format!("'{}' cannot be used on {}: {e}", path.display(), self.hostname)))?;
        if !under_any(&real, &self.allowed) {
            return Err(ProbeError::Usage(format!(
                "'{}'{} is outside every --allow-path of {} ({})",
                path.display(),
                if real != *path { format!(" (it leads to {})", real.display()) } else { String::new() },
                self.hostname,
                self.allowed.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            )));
        }
        if !real.is_dir() {
            return Err(ProbeError::Usage(format!(
                "'{}' is not a directory: remote disk probes only create test files in an allowed directory",
                path.display()
            )));
        }
        Ok(())
    }

    fn admit_cpu(request: &ProbeRequest, max_duration: Duration) -> Result<(), ProbeError> {
        let cpu: CpuRequest = request.params()?;
        within(cpu.warmup + cpu.time, max_duration)?;
        if cpu.threads == 0 || cpu.threads > MAX_CPU_THREADS {
            return Err(ProbeError::Usage(format!(
                "{} threads asked; a server runs 1 to {MAX_CPU_THREADS}",
                cpu.threads
            )));
        }
        let buffers = cpu.buffer_bytes.saturating_mul(cpu.threads as u64);
        if buffers > MAX_CPU_BUFFERS {
            return Err(ProbeError::Usage(format!(
                "buffers of {} in all asked; a server allocates at most {}",
                headroom_units::format_size(buffers),
                headroom_units::format_size(MAX_CPU_BUFFERS)
            )));
        }
        Ok(())
    }
}

fn allowed_dir(path: &Path) -> Result<PathBuf, String> {
    let real = std::fs::canonicalize(path).map_err(|e| {
        format!("--allow-path {}: {e} (give an existing directory, e.g. --allow-path /tank/bench)", path.display())
    })?;
    if !real.is_dir() {
        return Err(format!("--allow-path {}: not a directory (give the directory test files go in)", path.display()));
    }
    Ok(real)
}

fn within(asked: Duration, max_duration: Duration) -> Result<(), ProbeError> {
    if asked > max_duration {
        return Err(ProbeError::Refused(format!(
            "a {:.0} s probe exceeds this server's --max-duration of {:.0} s",
            asked.as_secs_f64(),
            max_duration.as_secs_f64()
        )));
    }
    Ok(())
}

impl ProbeHost for ServedProbes {
    fn runner(&self) -> Runner<'static> {
        Runner::new().with(DiskEngine::confined_to(self.allowed.clone())).with(CpuEngine::new()).with(NetEngine::new())
    }

    fn admit(&self, request: &ProbeRequest, max_duration: Duration) -> Result<(), ProbeError> {
        match request.engine {
            EngineKind::Disk => self.admit_disk(request, max_duration),
            EngineKind::Cpu => Self::admit_cpu(request, max_duration),
            EngineKind::Net => self.admit_net(request, max_duration),
        }
    }

    fn inventory(&self) -> Host {
        headroom_sys::inventory_live()
    }

    fn hostname(&self) -> String {
        self.hostname.clone()
    }
}
