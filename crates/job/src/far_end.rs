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
use headroom_units::setting::Message;
use ipnet::IpNet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What one remote probe may take of this machine, on top of the ranges
/// the command line allows (`headroom serve --max-jobs`,
/// `--max-buffer-memory`): a token holder can ask for no more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeCaps {
    /// Most disk jobs (each a worker thread; psync's threads are capped at
    /// 128 besides) or CPU threads of one probe.
    pub max_jobs: u32,
    /// Most bytes of I/O or kernel buffers one probe allocates (disk:
    /// block size x queue depth x jobs; CPU: the buffers of its threads).
    pub max_buffer_bytes: u64,
}

impl ProbeCaps {
    /// `--max-jobs`'s default: 64, or this machine's CPU count when it has
    /// more (`cpu --remote --threads all` asks for one thread per CPU).
    pub fn default_max_jobs() -> u32 {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        64.max(u32::try_from(cpus).unwrap_or(u32::MAX))
    }
    /// `--max-buffer-memory`'s default: 1 GiB.
    pub const DEFAULT_MAX_BUFFER_BYTES: u64 = 1 << 30;
}

impl Default for ProbeCaps {
    fn default() -> Self {
        ProbeCaps { max_jobs: Self::default_max_jobs(), max_buffer_bytes: Self::DEFAULT_MAX_BUFFER_BYTES }
    }
}

/// The probes a `headroom serve` runs on this machine for its clients.
pub struct ServedProbes {
    allowed: Vec<PathBuf>,
    allowed_net: Vec<IpNet>,
    hostname: String,
    caps: ProbeCaps,
    disk_spelling: Option<fn(headroom_disk::Setting) -> &'static str>,
    /// How a refusal names this server's own settings (the operator's
    /// `serve` flags, given by the binary); by default their own names.
    serve_spelling: fn(ServeSetting) -> &'static str,
    /// How a refusal of a client's network test names its settings (the
    /// client's `net` flags, given by the binary); by default their names.
    net_spelling: headroom_net::NetSpelling,
    /// How a refusal of a client's CPU probe names its settings (the
    /// client's `cpu` flags, given by the binary); by default their names.
    cpu_spelling: fn(headroom_cpu::Setting) -> &'static str,
}

/// What an operator starts a far end with; a refusal at start-up names
/// these and the front end spells them (the binary's `serve` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeSetting {
    /// A directory disk probes may use.
    AllowPath,
    /// An address or network clients' network tests may go to.
    AllowNetTo,
    /// Most jobs or threads of one probe.
    MaxJobs,
    /// Most buffer memory of one probe.
    MaxBufferMemory,
    /// The longest probe a client may ask for.
    MaxDuration,
}

impl ServeSetting {
    /// The setting's own name, for a far end whose front end gives none.
    pub fn name(self) -> &'static str {
        match self {
            ServeSetting::AllowPath => "allowed directory",
            ServeSetting::AllowNetTo => "allowed network",
            ServeSetting::MaxJobs => "job limit",
            ServeSetting::MaxBufferMemory => "buffer memory limit",
            ServeSetting::MaxDuration => "duration limit",
        }
    }
}

impl std::fmt::Display for ServeSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A far end's setting that cannot work, naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ServeSettingError(pub Message<ServeSetting>);

/// An allowed network: one address (a /32 or /128) or a network.
pub fn parse_allowed_net(text: &str) -> Result<IpNet, ServeSettingError> {
    text.parse::<IpNet>().or_else(|_| text.parse::<IpAddr>().map(IpNet::from)).map_err(|_| {
        ServeSettingError(
            Message::text(format!("'{text}' is neither an address nor a CIDR network (example: "))
                .and(ServeSetting::AllowNetTo)
                .then(" 192.168.1.10 or ")
                .and(ServeSetting::AllowNetTo)
                .then(" 10.0.0.0/24)"),
        )
    })
}

impl ServedProbes {
    /// The far end allowing disk probes under `allow_paths` (each an existing
    /// directory; kept as its canonical path, so a symlink given here is
    /// followed once, now, and never again).
    pub fn new(allow_paths: &[PathBuf]) -> Result<Self, ServeSettingError> {
        let allowed = allow_paths.iter().map(|p| allowed_dir(p)).collect::<Result<_, _>>()?;
        let hostname = headroom_sys::hostname(&headroom_sys::SysRoot::live()).unwrap_or_else(|| "unknown".into());
        Ok(ServedProbes {
            allowed,
            allowed_net: Vec::new(),
            hostname,
            caps: ProbeCaps::default(),
            disk_spelling: None,
            serve_spelling: ServeSetting::name,
            net_spelling: headroom_net::NetSetting::name,
            cpu_spelling: headroom_cpu::Setting::name,
        })
    }

    /// Names a CPU probe's setting in a refusal as the client's command line
    /// spells it (the binary's table).
    pub fn spelling_cpu_settings(mut self, spell: fn(headroom_cpu::Setting) -> &'static str) -> Self {
        self.cpu_spelling = spell;
        self
    }

    /// Names a network test's setting in a refusal or warning as the
    /// client's command line spells it (the binary's table).
    pub fn spelling_net_settings(mut self, spell: headroom_net::NetSpelling) -> Self {
        self.net_spelling = spell;
        self
    }

    /// Names this server's own settings in a refusal as the operator's
    /// command line spells them (the binary's `serve` flags).
    pub fn spelling_serve_settings(mut self, spell: fn(ServeSetting) -> &'static str) -> Self {
        self.serve_spelling = spell;
        self
    }

    /// A disk setting as the client's command line spells it, else by name.
    fn disk_flag(&self, setting: headroom_disk::Setting) -> String {
        self.disk_spelling.map_or_else(|| setting.to_string(), |spell| spell(setting).to_string())
    }

    /// Names a disk setting in a refusal as the client's command line spells
    /// it (the binary's table); without it, by the setting's own name.
    pub fn spelling_disk_settings(mut self, spell: fn(headroom_disk::Setting) -> &'static str) -> Self {
        self.disk_spelling = Some(spell);
        self
    }

    /// Holds every probe to `caps` instead of the defaults.
    pub fn with_caps(mut self, caps: ProbeCaps) -> Self {
        self.caps = caps;
        self
    }

    /// Refuses more jobs or buffer memory than the operator grants.
    fn within_caps(&self, jobs: u64, buffer_bytes: u64, what: &str) -> Result<(), ProbeError> {
        if jobs > u64::from(self.caps.max_jobs) {
            return Err(ProbeError::Refused(format!(
                "{jobs} {what} asked; {} runs at most {} (its {})",
                self.hostname,
                self.caps.max_jobs,
                (self.serve_spelling)(ServeSetting::MaxJobs)
            )));
        }
        if buffer_bytes > self.caps.max_buffer_bytes {
            return Err(ProbeError::Refused(format!(
                "buffers of {} asked; {} allocates at most {} per probe (its {})",
                headroom_units::format_size(buffer_bytes),
                self.hostname,
                headroom_units::format_size(self.caps.max_buffer_bytes),
                (self.serve_spelling)(ServeSetting::MaxBufferMemory)
            )));
        }
        Ok(())
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
        let allow_net_to = (self.serve_spelling)(ServeSetting::AllowNetTo);
        if self.allowed_net.is_empty() {
            return Err(ProbeError::Refused(format!(
                "{} runs no network tests for clients: start it with `headroom serve {allow_net_to} ADDR|CIDR` naming the servers it may test against (e.g. {allow_net_to} 192.168.1.10)",
                self.hostname
            )));
        }
        let net: NetRequest = request.params()?;
        net.check(self.net_spelling)?;
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
                "{ip} is outside every {allow_net_to} of {} ({})",
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
            NetTest::Throughput(t) => {
                let streams = if t.direction == headroom_net::TrafficDirection::Bidir { 2 } else { 1 } * t.streams;
                self.within_caps(u64::from(streams), 0, "streams")?;
                self.within(t.duration, max_duration)
            }
            NetTest::Rtt { time, .. } => self.within(*time, max_duration),
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
        let allow_path = (self.serve_spelling)(ServeSetting::AllowPath);
        if self.allowed.is_empty() {
            return Err(ProbeError::Refused(format!(
                "{} does not allow disk probes: start it with `headroom serve {allow_path} DIR` (e.g. {allow_path} /tank/bench)",
                self.hostname
            )));
        }
        let disk: DiskRequest = request.params()?;
        let target = &disk.target;
        if target.destructive || target.force || target.keep {
            use headroom_disk::Setting::{Destructive, Force, Keep};
            return Err(ProbeError::Usage(format!(
                "{}, {} and {} are for local runs: a server only creates and removes its own test files",
                self.disk_flag(Destructive),
                self.disk_flag(Force),
                self.disk_flag(Keep)
            )));
        }
        // Every field within the command line's ranges first: the arithmetic
        // below, and the engine, may then trust them.
        headroom_disk::check_test_def(&disk.test).map_err(|e| {
            ProbeError::Usage(match (e, self.disk_spelling) {
                (headroom_disk::DiskError::Invalid(m), Some(spell)) => m.spelled(spell),
                (e, _) => e.to_string(),
            })
        })?;
        self.within_caps(u64::from(disk.test.jobs), headroom_disk::buffer_bytes(&disk.test), "jobs")?;
        self.within(disk.test.ramp.saturating_add(disk.test.time), max_duration)?;
        let path = &target.path;
        let real = std::fs::canonicalize(path)
            .map_err(|e| ProbeError::Usage(format!("'{}' cannot be used on {}: {e}", path.display(), self.hostname)))?;
        if !under_any(&real, &self.allowed) {
            return Err(ProbeError::Usage(format!(
                "'{}'{} is outside every {allow_path} of {} ({})",
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

    fn admit_cpu(&self, request: &ProbeRequest, max_duration: Duration) -> Result<(), ProbeError> {
        let cpu: CpuRequest = request.params()?;
        cpu.check(self.cpu_spelling)?;
        self.within_caps(cpu.threads as u64, cpu.buffer_bytes_total(), "threads")?;
        self.within(cpu.warmup.saturating_add(cpu.time), max_duration)
    }

    /// Refuses a probe longer than the server's duration limit.
    fn within(&self, asked: Duration, max_duration: Duration) -> Result<(), ProbeError> {
        if asked > max_duration {
            return Err(ProbeError::Refused(format!(
                "a {:.0} s probe exceeds this server's {} of {:.0} s",
                asked.as_secs_f64(),
                (self.serve_spelling)(ServeSetting::MaxDuration),
                max_duration.as_secs_f64()
            )));
        }
        Ok(())
    }
}

fn allowed_dir(path: &Path) -> Result<PathBuf, ServeSettingError> {
    let named = || Message::of(ServeSetting::AllowPath).then(format!(" {}: ", path.display()));
    let real = std::fs::canonicalize(path).map_err(|e| {
        ServeSettingError(
            named()
                .then(format!("{e} (give an existing directory, e.g. "))
                .and(ServeSetting::AllowPath)
                .then(" /tank/bench)"),
        )
    })?;
    if !real.is_dir() {
        return Err(ServeSettingError(named().then("not a directory (give the directory test files go in)")));
    }
    Ok(real)
}

impl ProbeHost for ServedProbes {
    fn runner(&self) -> Runner<'static> {
        let disk = DiskEngine::confined_to(self.allowed.clone());
        let disk = match self.disk_spelling {
            Some(spell) => disk.spelling_settings(spell),
            None => disk,
        };
        Runner::new().with(disk).with(CpuEngine::new()).with(NetEngine::new().spelling_settings(self.net_spelling))
    }

    fn admit(&self, request: &ProbeRequest, max_duration: Duration) -> Result<(), ProbeError> {
        match request.engine {
            EngineKind::Disk => self.admit_disk(request, max_duration),
            EngineKind::Cpu => self.admit_cpu(request, max_duration),
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
