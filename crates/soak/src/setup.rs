//! Starting a soak session: the flags of `headroom soak` checked into the
//! schedule of a new soak or against the settings of the one being resumed,
//! the database's default name, and opening the store for a fresh or resumed
//! session (the gap since the last sample recorded).
//!
//! The flags arrive as plain values ([`SoakFlags`]); parsing them is the
//! binary's job. Every refusal names the setting ([`Setting`], which the
//! binary spells as its flag) and gives an example that works.
//!
//! Long (about 740 lines): about 510 lines of code (the refusals spelled part by part,
//! each setting typed), the rest its unit tests.

use crate::{now_unix, rfc3339, EventRow, SoakConfig, SoakInfo, Store, StoreError};
use headroom_result::SoakEventKind;
use headroom_units::setting::Message;
use headroom_units::{format_duration, format_size};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Probe names a cycle may hold.
const PROBES: [&str; 7] = ["write", "read", "iops", "net", "remote-write", "remote-read", "remote-iops"];
/// The key in a soak's `extra` of the server's inventory.
const SERVER_INVENTORY: &str = "server_inventory";

/// The prefix of the probes the server runs on its own disk (`--remote-path`):
/// `remote-write` is the `write` test there.
pub(crate) const REMOTE: &str = "remote-";
/// The disk probes' test file when `--size` is not given: 1 GiB.
pub const DEFAULT_SIZE: u64 = 1 << 30;
const DEFAULT_DURATION: Duration = Duration::from_secs(3 * 3600);
const DEFAULT_PROBE_TIME: Duration = Duration::from_secs(30);

/// The flags of `headroom soak` as given; `None` where a flag was not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SoakFlags {
    /// `--duration`: the total to soak (a new soak) or the new total (a resume).
    pub duration: Option<Duration>,
    /// `--probe-time`: each probe's turn.
    pub probe_time: Option<Duration>,
    /// `--cycle`, as split at commas (names not yet trimmed or lowercased).
    pub cycle: Option<Vec<String>>,
    /// `--server`, `HOST[:PORT]`.
    pub server: Option<String>,
    /// `--path`: the directory of the disk probes' test file.
    pub path: Option<PathBuf>,
    /// `--remote-path`: the directory on the server of its disk probes' test file.
    pub remote_path: Option<PathBuf>,
    /// `--size`: the test file's size, bytes.
    pub size: Option<u64>,
    /// `--vmkernel-log`.
    pub vmkernel_log: Option<PathBuf>,
}

/// What a soak is set by; [`FlagError`] names these and the front end spells
/// them (the binary's flags), never this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The total to soak.
    Duration,
    /// Each probe's turn.
    ProbeTime,
    /// The probes of one cycle.
    Cycle,
    /// The `headroom serve` to test against.
    Server,
    /// The directory of the disk probes' test file.
    Path,
    /// The directory on the server of its disk probes' test file.
    RemotePath,
    /// The test file's size.
    Size,
    /// The server's own setting of the directories it allows.
    ServerAllowPath,
    /// The database file the soak is kept in.
    Db,
    /// Continuing the soak a database holds.
    Resume,
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Setting::Duration => "duration",
            Setting::ProbeTime => "probe time",
            Setting::Cycle => "cycle",
            Setting::Server => "server",
            Setting::Path => "path",
            Setting::RemotePath => "remote path",
            Setting::Size => "size",
            Setting::ServerAllowPath => "allow path",
            Setting::Db => "database",
            Setting::Resume => "resume",
        })
    }
}

/// A setting refused, with today's wording (tests and users rely on it);
/// [`FlagError::message`] names the settings for the front end to spell.
#[derive(Debug)]
pub enum FlagError {
    /// The duration under one second (the value as given).
    DurationTooShort(String),
    /// The probe time under one second.
    ProbeTimeTooShort(String),
    /// The probe time over a day.
    ProbeTimeTooLong(String),
    /// A cycle with no probe in it.
    EmptyCycle,
    /// A cycle entry that is no probe.
    NotAProbe(String),
    /// A probe named twice in the cycle.
    Twice(String),
    /// A server that is not `HOST[:PORT]` (the reason, with an example).
    Server(String),
    /// A cycle with net but no server.
    NetNeedsServer,
    /// A remote path without a server.
    RemotePathNeedsServer,
    /// A remote path that is not absolute (the value as given).
    RemotePathNotAbsolute(String),
    /// A server's disk probe in the cycle without a remote path (the probe).
    RemoteNeedsRemotePath(String),
    /// A setting given with a resume that would change the stored soak.
    ChangesResumed {
        /// The setting, e.g. the cycle.
        setting: Setting,
        /// Its value as given, formatted.
        given: String,
        /// What the soak runs, as stored, formatted.
        kept: String,
        /// The database.
        db: PathBuf,
    },
}

impl FlagError {
    /// The refusal, naming each setting for the front end to spell.
    pub fn message(&self) -> Message<Setting> {
        use Setting::*;
        let remote_example = |m: Message<Setting>| m.then(" nas.lan ").and(RemotePath).then(" /tank/bench");
        match self {
            FlagError::DurationTooShort(d) => Message::of(Duration)
                .then(format!(" {d} is too short for a soak; use e.g. "))
                .and(Duration)
                .then(" 30m or ")
                .and(Duration)
                .then(" 3h"),
            FlagError::ProbeTimeTooShort(t) => Message::of(ProbeTime)
                .then(format!(" {t} is shorter than one sample; use at least 1s, e.g. "))
                .and(ProbeTime)
                .then(" 30s"),
            FlagError::ProbeTimeTooLong(t) => Message::of(ProbeTime)
                .then(format!(" {t} is too long: at most 24h per probe, e.g. "))
                .and(ProbeTime)
                .then(" 30s"),
            FlagError::EmptyCycle => Message::of(Cycle)
                .then(
                    " is empty; name probes from write, read, iops, net, remote-write, remote-read, remote-iops \
                     (e.g. ",
                )
                .and(Cycle)
                .then(" write,read)"),
            FlagError::NotAProbe(p) => Message::of(Cycle)
                .then(format!(
                    ": '{p}' is not a probe; use write, read, iops, net, remote-write, remote-read or remote-iops \
                     (e.g. "
                ))
                .and(Cycle)
                .then(" write,read,net)"),
            FlagError::Twice(p) => Message::of(Cycle)
                .then(format!(" names '{p}' twice; name each probe once (e.g. "))
                .and(Cycle)
                .then(" write,read)"),
            FlagError::Server(why) => Message::of(Server).then(format!(" {why}")),
            FlagError::NetNeedsServer => Message::of(Cycle)
                .then(" net needs ")
                .and(Server)
                .then(" HOST (a `headroom serve`); e.g. ")
                .and(Server)
                .then(" nas.lan"),
            FlagError::RemotePathNeedsServer => remote_example(
                Message::of(RemotePath)
                    .then(" needs ")
                    .and(Server)
                    .then(" HOST, the `headroom serve ")
                    .and(ServerAllowPath)
                    .then(" DIR` whose disk it names; e.g. ")
                    .and(Server),
            ),
            FlagError::RemotePathNotAbsolute(dir) => Message::of(RemotePath)
                .then(format!(" {dir} is not absolute: it names a directory on the server, e.g. "))
                .and(RemotePath)
                .then(" /tank/bench"),
            FlagError::RemoteNeedsRemotePath(p) => remote_example(
                Message::of(Cycle)
                    .then(format!(" {p} needs "))
                    .and(RemotePath)
                    .then(" DIR, a directory the server allows with `headroom serve ")
                    .and(ServerAllowPath)
                    .then(" DIR`; e.g. ")
                    .and(Server),
            ),
            FlagError::ChangesResumed { setting, given, kept, db } => Message::of(*setting)
                .then(format!(
                    " {given} cannot change a soak being resumed: it runs {kept} (stored in {}); drop ",
                    db.display()
                ))
                .and(*setting)
                .then(" or give the same value"),
        }
    }
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.message().fmt(f)
    }
}

impl std::error::Error for FlagError {}

/// Why a soak session could not start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A flag was refused.
    #[error(transparent)]
    Flag(#[from] FlagError),
    /// The database could not be used.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The test file could not be laid out.
    #[error(transparent)]
    Probe(#[from] headroom_runner::ProbeError),
}

/// The validated schedule of a new soak.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Probes of one cycle, in order, trimmed and lowercased.
    pub cycle: Vec<String>,
    /// Each probe's turn.
    pub probe_time: Duration,
    /// The total to soak.
    pub duration: Duration,
}

impl Schedule {
    /// Checks the flags of a new soak and fills in the defaults: 3 h, 30 s
    /// turns, write,read,iops (plus the server's remote-write,remote-read,
    /// remote-iops with `--remote-path`, and net with a server). With
    /// `--remote-path` and no `--path` the client's disk probes are left out:
    /// the only disk they could test is the working directory, which is not on
    /// the path in question (and would get a test file nobody asked for).
    pub fn new(flags: &SoakFlags) -> Result<Schedule, FlagError> {
        let duration = flags.duration.unwrap_or(DEFAULT_DURATION);
        if duration < Duration::from_secs(1) {
            return Err(FlagError::DurationTooShort(format_duration(duration)));
        }
        let probe_time = flags.probe_time.unwrap_or(DEFAULT_PROBE_TIME);
        if probe_time < Duration::from_secs(1) {
            return Err(FlagError::ProbeTimeTooShort(format_duration(probe_time)));
        }
        if probe_time > Duration::from_secs(86_400) {
            return Err(FlagError::ProbeTimeTooLong(format_duration(probe_time)));
        }
        let cycle = match &flags.cycle {
            Some(list) => cycle_names(list),
            None => {
                let disk = ["write", "read", "iops"];
                let here = (flags.path.is_some() || flags.remote_path.is_none()).then_some(disk);
                let there = flags.remote_path.is_some().then_some(disk.map(|p| format!("{REMOTE}{p}")));
                let with_net = flags.server.is_some().then_some("net".to_string());
                let here = here.into_iter().flatten().map(String::from);
                here.chain(there.into_iter().flatten()).chain(with_net).collect()
            }
        };
        if cycle.is_empty() {
            return Err(FlagError::EmptyCycle);
        }
        if let Some(p) = cycle.iter().find(|p| !PROBES.contains(&p.as_str())) {
            return Err(FlagError::NotAProbe(p.clone()));
        }
        if let Some((_, p)) = cycle.iter().enumerate().find(|(i, p)| cycle[..*i].contains(p)) {
            return Err(FlagError::Twice(p.clone()));
        }
        if let Some(server) = &flags.server {
            headroom_net::split_host_port(server).map_err(FlagError::Server)?;
        }
        if cycle.iter().any(|p| p == "net") && flags.server.is_none() {
            return Err(FlagError::NetNeedsServer);
        }
        if let Some(dir) = &flags.remote_path {
            if flags.server.is_none() {
                return Err(FlagError::RemotePathNeedsServer);
            }
            // The server's system, not this one's, decides what is absolute:
            // headroom.exe soaks against a Linux server's /tank/bench.
            if !headroom_net::is_absolute_on_far_end(dir) {
                return Err(FlagError::RemotePathNotAbsolute(dir.display().to_string()));
            }
        } else if let Some(p) = cycle.iter().find(|p| p.starts_with(REMOTE)) {
            return Err(FlagError::RemoteNeedsRemotePath(p.clone()));
        }
        Ok(Schedule { cycle, probe_time, duration })
    }
}

/// `--cycle` entries as a cycle's probe names: trimmed, lowercased, empty ones dropped.
fn cycle_names(list: &[String]) -> Vec<String> {
    list.iter().map(|p| p.trim().to_lowercase()).filter(|p| !p.is_empty()).collect()
}

impl SoakFlags {
    /// `--resume` keeps the stored settings: a flag given again must say the
    /// same (it is then accepted); only a real change is refused. `db` is
    /// named in the refusal.
    pub fn check_resume(&self, stored: &SoakConfig, db: &Path) -> Result<(), FlagError> {
        let refuse =
            |setting, given, kept| Err(FlagError::ChangesResumed { setting, given, kept, db: db.to_path_buf() });
        if let Some(list) = &self.cycle {
            let given = cycle_names(list);
            if given != stored.cycle {
                return refuse(Setting::Cycle, given.join(","), stored.cycle.join(","));
            }
        }
        if let Some(path) = &self.path {
            let kept = stored.dir();
            let same = match (path.canonicalize(), kept.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => *path == kept,
            };
            if !same {
                return refuse(Setting::Path, path.display().to_string(), kept.display().to_string());
            }
        }
        if let Some(server) = &self.server {
            if Some(server) != stored.server.as_ref() {
                return refuse(
                    Setting::Server,
                    server.clone(),
                    stored.server.clone().unwrap_or_else(|| "no server".into()),
                );
            }
        }
        if let Some(dir) = &self.remote_path {
            // A directory on the server: compared by its components, as this
            // machine cannot resolve it.
            if stored.remote_path().as_deref() != Some(dir.as_path()) {
                let kept = stored.remote_path().map_or_else(|| "no remote path".into(), |d| d.display().to_string());
                return refuse(Setting::RemotePath, dir.display().to_string(), kept);
            }
        }
        if let Some(t) = self.probe_time {
            if (t.as_secs_f64() - stored.probe_s).abs() > 1e-3 {
                return refuse(Setting::ProbeTime, format_duration(t), format!("{} s turns", stored.probe_s));
            }
        }
        if let Some(size) = self.size {
            if size != stored.size() {
                return refuse(Setting::Size, format_size(size), format!("a {} file", format_size(stored.size())));
            }
        }
        Ok(())
    }
}

impl SoakConfig {
    /// The directory of the disk probes' test file (`.` when none was stored).
    pub fn dir(&self) -> PathBuf {
        PathBuf::from(self.path.clone().unwrap_or_else(|| ".".into()))
    }

    /// The disk probes' test file size, bytes ([`DEFAULT_SIZE`] when none was stored).
    pub fn size(&self) -> u64 {
        self.extra.get("size").and_then(|s| s.as_u64()).unwrap_or(DEFAULT_SIZE)
    }

    /// The directory on the server of its disk probes' test file
    /// (`--remote-path`); None for a soak without the server's disk (and for
    /// every soak stored before there was one). Kept in `extra`, like the
    /// size, so the settings' fields stay as older programs wrote them.
    pub fn remote_path(&self) -> Option<PathBuf> {
        self.extra.get("remote_path").and_then(|s| s.as_str()).map(PathBuf::from)
    }

    /// The block device that held the disk probes' directory when the soak
    /// started (its inventory is the soak's recorded `host`); None for a soak
    /// without disk probes here, where no block device holds the directory,
    /// and for soaks stored before it was recorded. Kept in `extra`.
    pub fn disk_device(&self) -> Option<&str> {
        self.extra.get("disk_device").and_then(|s| s.as_str())
    }

    /// The server's inventory as it sent it when a session of the soak first
    /// reached it (its disks, CPU and NICs, for the document's `peers`);
    /// None without a server, before one answered, and for soaks stored
    /// before it was recorded. Kept in `extra`.
    pub fn server_inventory(&self) -> Option<headroom_result::Host> {
        self.extra.get(SERVER_INVENTORY).and_then(|h| serde_json::from_value(h.clone()).ok())
    }

    /// Records the server's inventory (see [`SoakConfig::server_inventory`]).
    pub fn set_server_inventory(&mut self, inventory: &headroom_result::Host) {
        if !self.extra.is_object() {
            self.extra = serde_json::json!({});
        }
        self.extra[SERVER_INVENTORY] = serde_json::to_value(inventory).unwrap_or_default();
    }

    /// Whether a turn of the cycle measures this machine's disk.
    pub fn has_local_disk_turns(&self) -> bool {
        self.cycle.iter().any(|name| name != "net" && !name.starts_with(REMOTE))
    }

    /// Each probe's turn; at least a second, whatever the store says.
    pub fn probe_time(&self) -> Duration {
        Duration::from_secs_f64(self.probe_s.max(1.0))
    }
}

/// The database of a soak started without `--db`: `headroom-soak-YYYYMMDD-HHMMSS.sqlite`
/// in the working directory, UTC.
pub fn default_db() -> PathBuf {
    let stamp = rfc3339(now_unix()).replace([':', '-'], "").replace('T', "-").trim_end_matches('Z').to_string();
    PathBuf::from(format!("headroom-soak-{stamp}.sqlite"))
}

/// An opened soak, ready to run a session.
pub struct Opened {
    /// The database, open for writing.
    pub store: Store,
    /// This session's row id.
    pub session: i64,
    /// The soak row as stored: start, plan, settings.
    pub info: SoakInfo,
    /// Time left to soak (`None`: until stopped).
    pub remaining: Option<Duration>,
    /// For a resume: seconds between the last stored sample (or the end of
    /// the last session) and now.
    pub gap_s: Option<f64>,
}

/// Opens the soak in `db` for a session: a new soak on `schedule` (the
/// database must not hold one yet), or with `None` the soak stored there,
/// resumed once `flags` are checked against its settings (nothing is written
/// before that). `flags.duration` given to a resume replaces the stored total.
pub fn open(db: &Path, flags: &SoakFlags, schedule: Option<&Schedule>) -> Result<Opened, SetupError> {
    let Some(schedule) = schedule else {
        let store = open_to_resume(db)?;
        flags.check_resume(&store.info()?.config, db)?;
        return Ok(resume(store, flags.duration)?);
    };
    let now = now_unix();
    let mut config = SoakConfig {
        cycle: schedule.cycle.clone(),
        probe_s: schedule.probe_time.as_secs_f64(),
        path: Some(flags.path.clone().unwrap_or_else(|| PathBuf::from(".")).display().to_string()),
        server: flags.server.clone(),
        vmkernel_log: flags.vmkernel_log.as_ref().map(|p| p.display().to_string()),
        extra: settings_extra(flags),
    };
    // Named beside the inventory, so a report read later can tell what kind
    // of disk the figures came from (a virtual one carries a warning).
    if let Some(device) =
        config.has_local_disk_turns().then(|| headroom_sys::block_device_holding(&config.dir())).flatten()
    {
        config.extra["disk_device"] = device.name.into();
    }
    let info = SoakInfo {
        started_at: rfc3339(now),
        started_unix: now,
        planned_s: Some(schedule.duration.as_secs_f64()),
        config,
        // Recorded once, here: a report read later (or on another machine) names this host.
        host: serde_json::to_value(headroom_sys::inventory_live()).ok(),
    };
    let store = Store::create(db, &info)?;
    let session = store.begin_session(now)?;
    Ok(Opened { store, session, remaining: Some(schedule.duration), gap_s: None, info })
}

/// The settings stored in `extra`: the test files' size, and the server's directory.
fn settings_extra(flags: &SoakFlags) -> serde_json::Value {
    let mut extra = serde_json::json!({"size": flags.size.unwrap_or(DEFAULT_SIZE)});
    if let Some(dir) = &flags.remote_path {
        extra["remote_path"] = dir.display().to_string().into();
    }
    extra
}

/// Removes the database of a soak this run created whose first session could
/// not start (the test file could not be laid out, the server refused its
/// probes): it holds nothing measured, and left in place it would make the
/// same command, once corrected, refuse to overwrite it.
pub fn discard_new(store: Store) {
    let path = store.path().to_path_buf();
    drop(store); // closes it: SQLite folds the WAL back in
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut file = path.clone().into_os_string();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

/// Opens the soak in `db` to resume it, writing nothing yet.
fn open_to_resume(db: &Path) -> Result<Store, StoreError> {
    Store::open(db).map_err(|e| match e {
        StoreError::NoSoak { path } => StoreError::NothingToResume { path },
        e => e,
    })
}

/// Continues the soak in `store`. The stored settings are kept (the cycle,
/// path, server); a `planned` duration given again replaces the stored total.
/// A soak whose total is used up is refused before anything is written. The
/// gap since the last sample is recorded as a `gap` event.
fn resume(store: Store, planned: Option<Duration>) -> Result<Opened, StoreError> {
    let now = now_unix();
    let info = store.info()?;
    let elapsed = store.elapsed_s()?;
    let total = planned.map(|p| p.as_secs_f64()).or(info.planned_s);
    if let Some(total) = total {
        // Under a second left is no turn at all (the loop would start none).
        if total - elapsed < 1.0 {
            let span = |s: f64| format_duration(Duration::from_secs_f64(s.max(0.0).round()));
            return Err(StoreError::UsedUp {
                path: store.path().to_path_buf(),
                planned: span(total),
                elapsed: span(elapsed),
                example: span((elapsed * 2.0).max(elapsed + 3600.0).ceil()),
            });
        }
    }
    store.migrate()?;
    if let Some(p) = planned {
        store.set_planned(Some(p.as_secs_f64()))?;
    }
    let info = store.info()?;
    let last = store.sessions()?.last().map(|s| s.ended_unix.unwrap_or(s.started_unix));
    let last_sample = store.last_sample_unix()?;
    let since = last_sample.into_iter().chain(last).fold(f64::NEG_INFINITY, f64::max).min(now);
    let gap_s = since.is_finite().then(|| (now - since).max(0.0));
    if let Some(gap) = gap_s {
        store.add_event(&EventRow {
            id: 0,
            t_unix: since,
            end_unix: Some(now),
            kind: SoakEventKind::Gap,
            source: "soak".into(),
            device: None,
            message: format!("no samples for {gap:.1} s: the soak was not running; resumed"),
            details: None,
        })?;
    }
    let session = store.begin_session(now)?;
    let remaining = info.planned_s.map(|p| Duration::from_secs_f64((p - elapsed).max(0.0)));
    Ok(Opened { store, session, info, remaining, gap_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycle(list: &str) -> Option<Vec<String>> {
        Some(list.split(',').map(String::from).collect())
    }

    /// The wording with each setting spelled as a flag of its name, the way
    /// a command line would (the binary keeps the real table).
    fn spelled(e: &FlagError) -> String {
        e.message().spelled(|s| format!("--{}", s.to_string().replace(' ', "-")))
    }

    fn refused(flags: SoakFlags) -> String {
        spelled(&Schedule::new(&flags).expect_err("refused"))
    }

    #[test]
    fn defaults_are_three_hours_of_thirty_second_turns_with_net_only_with_a_server() {
        let s = Schedule::new(&SoakFlags::default()).unwrap();
        assert_eq!((s.duration, s.probe_time), (Duration::from_secs(10_800), Duration::from_secs(30)));
        assert_eq!(s.cycle, ["write", "read", "iops"]);
        let s = Schedule::new(&SoakFlags { server: Some("nas.lan".into()), ..Default::default() }).unwrap();
        assert_eq!(s.cycle, ["write", "read", "iops", "net"]);
        let s = Schedule::new(&SoakFlags { cycle: cycle(" Read ,,WRITE"), ..Default::default() }).unwrap();
        assert_eq!(s.cycle, ["read", "write"]);
    }

    #[test]
    fn remote_path_adds_the_servers_disk_and_without_path_only_that() {
        let far =
            SoakFlags { server: Some("nas.lan".into()), remote_path: Some("/tank/bench".into()), ..Default::default() };
        let s = Schedule::new(&far).unwrap();
        assert_eq!(s.cycle, ["remote-write", "remote-read", "remote-iops", "net"]);
        let both = SoakFlags { path: Some("/mnt/nas".into()), ..far.clone() };
        let s = Schedule::new(&both).unwrap();
        assert_eq!(s.cycle, ["write", "read", "iops", "remote-write", "remote-read", "remote-iops", "net"]);
        // Named explicitly, the client's disk runs in the working directory as ever.
        let s = Schedule::new(&SoakFlags { cycle: cycle("remote-write,write"), ..far }).unwrap();
        assert_eq!(s.cycle, ["remote-write", "write"]);
    }

    #[test]
    fn each_bad_schedule_is_refused_naming_its_flag() {
        let secs = |s: f64| Some(Duration::from_secs_f64(s));
        let cases = [
            (
                SoakFlags { duration: secs(0.5), ..Default::default() },
                "--duration 500ms is too short for a soak; use e.g. --duration 30m or --duration 3h",
            ),
            (
                SoakFlags { probe_time: secs(0.5), ..Default::default() },
                "--probe-time 500ms is shorter than one sample; use at least 1s, e.g. --probe-time 30s",
            ),
            (
                SoakFlags { probe_time: secs(25.0 * 3600.0), ..Default::default() },
                "--probe-time 25h is too long: at most 24h per probe, e.g. --probe-time 30s",
            ),
            (
                SoakFlags { cycle: cycle(" , "), ..Default::default() },
                "--cycle is empty; name probes from write, read, iops, net, remote-write, remote-read, remote-iops \
                 (e.g. --cycle write,read)",
            ),
            (
                SoakFlags { cycle: cycle("write,fio"), ..Default::default() },
                "--cycle: 'fio' is not a probe; use write, read, iops, net, remote-write, remote-read or remote-iops \
                 (e.g. --cycle write,read,net)",
            ),
            (
                SoakFlags { cycle: cycle("write,read,WRITE"), ..Default::default() },
                "--cycle names 'write' twice; name each probe once (e.g. --cycle write,read)",
            ),
            (
                SoakFlags { server: Some("nas.lan:99999".into()), ..Default::default() },
                "--server 'nas.lan:99999': port '99999' is not a number from 1 to 65535 (example: nas.lan:5201)",
            ),
            (
                SoakFlags { cycle: cycle("write,net"), ..Default::default() },
                "--cycle net needs --server HOST (a `headroom serve`); e.g. --server nas.lan",
            ),
            (
                SoakFlags { remote_path: Some("/tank/bench".into()), ..Default::default() },
                "--remote-path needs --server HOST, the `headroom serve --allow-path DIR` whose disk it names; \
                 e.g. --server nas.lan --remote-path /tank/bench",
            ),
            (
                SoakFlags {
                    server: Some("nas.lan".into()),
                    remote_path: Some("tank/bench".into()),
                    ..Default::default()
                },
                "--remote-path tank/bench is not absolute: it names a directory on the server, \
                 e.g. --remote-path /tank/bench",
            ),
            (
                SoakFlags { server: Some("nas.lan".into()), cycle: cycle("write,Remote-Read"), ..Default::default() },
                "--cycle remote-read needs --remote-path DIR, a directory the server allows with \
                 `headroom serve --allow-path DIR`; e.g. --server nas.lan --remote-path /tank/bench",
            ),
        ];
        for (flags, message) in cases {
            assert_eq!(refused(flags), message);
        }
        // A day per turn is still allowed; a second soak is the shortest.
        let edge = SoakFlags { duration: secs(1.0), probe_time: secs(86_400.0), ..Default::default() };
        assert!(Schedule::new(&edge).is_ok());
    }

    fn stored(dir: &Path) -> SoakConfig {
        SoakConfig {
            cycle: vec!["write".into(), "read".into()],
            probe_s: 1.0,
            path: Some(dir.display().to_string()),
            server: None,
            vmkernel_log: None,
            extra: serde_json::json!({"size": 8 << 20, "remote_path": "/tank/bench"}),
        }
    }

    #[test]
    fn a_resume_accepts_the_same_flags_in_another_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let same = SoakFlags {
            duration: Some(Duration::from_secs(60)), // a new total is no change of settings
            probe_time: Some(Duration::from_secs(1)),
            cycle: cycle(" Write,READ"),
            path: Some(dir.path().join(".")),
            size: Some(8 << 20),
            remote_path: Some("/tank/bench/".into()),
            ..Default::default()
        };
        same.check_resume(&stored(dir.path()), Path::new("s.sqlite")).unwrap();
    }

    #[test]
    fn a_resume_refuses_each_changed_setting_naming_the_stored_one() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let cases = [
            (SoakFlags { cycle: cycle("read"), ..Default::default() }, "--cycle read", "write,read".to_string()),
            (
                SoakFlags { path: Some(other.path().to_path_buf()), ..Default::default() },
                &*format!("--path {}", other.path().display()),
                d.to_string(),
            ),
            (
                SoakFlags { server: Some("nas.lan".into()), ..Default::default() },
                "--server nas.lan",
                "no server".into(),
            ),
            (
                SoakFlags { probe_time: Some(Duration::from_secs(2)), ..Default::default() },
                "--probe-time 2s",
                "1 s turns".into(),
            ),
            (SoakFlags { size: Some(16 << 20), ..Default::default() }, "--size 16.00 MiB", "a 8.000 MiB file".into()),
            (
                SoakFlags { remote_path: Some("/tank/other".into()), ..Default::default() },
                "--remote-path /tank/other",
                "/tank/bench".into(),
            ),
        ];
        for (flags, given, kept) in cases {
            let flag = given.split(' ').next().unwrap();
            let e = spelled(&flags.check_resume(&stored(dir.path()), Path::new("s.sqlite")).expect_err(given));
            assert_eq!(
                e,
                format!(
                    "{given} cannot change a soak being resumed: it runs {kept} (stored in s.sqlite); \
                     drop {flag} or give the same value"
                )
            );
        }
    }

    #[test]
    fn the_default_database_is_named_for_the_time_it_starts() {
        let name = default_db().display().to_string();
        let stamp = name.strip_prefix("headroom-soak-").and_then(|s| s.strip_suffix(".sqlite")).expect(&name);
        assert!(
            stamp.len() == 15
                && stamp.chars().enumerate().all(|(i, c)| if i == 8 { c == '-' } else { c.is_ascii_digit() }),
            "{name}"
        );
    }

    #[test]
    fn open_starts_a_soak_then_resumes_it_only_with_its_own_settings() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.sqlite");
        let flags = SoakFlags {
            duration: Some(Duration::from_secs(60)),
            cycle: cycle("write"),
            path: Some(dir.path().to_path_buf()),
            size: Some(8 << 20),
            ..Default::default()
        };
        let nothing = open(&db, &flags, None).err().expect("nothing to resume").to_string();
        assert!(nothing.contains("no soak to resume here"), "{nothing}");
        assert!(!db.exists(), "a refused resume creates no database");

        let schedule = Schedule::new(&flags).unwrap();
        let first = open(&db, &flags, Some(&schedule)).unwrap();
        assert_eq!(first.info.config.cycle, ["write"]);
        assert_eq!(first.info.config.size(), 8 << 20);
        assert_eq!(first.info.config.dir(), dir.path());
        assert_eq!((first.remaining, first.gap_s), (Some(Duration::from_secs(60)), None));
        let first_config = first.info.config.clone();
        drop(first);
        let again = open(&db, &flags, Some(&schedule)).err().expect("an existing soak is not overwritten");
        assert!(matches!(again, SetupError::Store(_)), "{again}");

        let changed = SoakFlags { cycle: cycle("read"), ..flags.clone() };
        let e = open(&db, &changed, None).err().expect("refused");
        assert!(matches!(e, SetupError::Flag(FlagError::ChangesResumed { setting: Setting::Cycle, .. })), "{e}");
        // A soak stored without the server's disk (as every older one) keeps running without it.
        assert_eq!(first_config.remote_path(), None);
        let far = SoakFlags { remote_path: Some("/tank/bench".into()), ..flags.clone() };
        let Some(SetupError::Flag(e)) = open(&db, &far, None).err() else { panic!("refused") };
        let e = spelled(&e);
        assert!(
            e.starts_with("--remote-path /tank/bench cannot change a soak being resumed: it runs no remote path"),
            "{e}"
        );
        let store = Store::open(&db).unwrap();
        assert_eq!(store.sessions().unwrap().len(), 1, "a refused resume writes nothing");
        drop(store);

        let resumed = open(&db, &flags, None).unwrap();
        assert!(resumed.gap_s.is_some());
        assert_eq!(resumed.store.sessions().unwrap().len(), 2);
    }

    /// A new soak records this machine's inventory, so its report names the
    /// host (the kernel's hostname) rather than "unknown host".
    #[test]
    fn a_new_soak_records_its_host() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.sqlite");
        let flags = SoakFlags {
            duration: Some(Duration::from_secs(60)),
            cycle: cycle("write"),
            path: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let opened = open(&db, &flags, Some(&Schedule::new(&flags).unwrap())).unwrap();
        let doc = crate::doc::result_from_store(&opened.store, crate::doc::SampleDetail::None).unwrap();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(doc.host.hostname.as_deref(), Some(kernel.trim()));
    }
}
