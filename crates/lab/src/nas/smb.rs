//! The lab NAS's SMB server: Samba's smbd in the NAS namespace with a private
//! configuration ([`Nas::serve_smb`]). Every file Samba writes (passdb,
//! locks, state, caches, pid, logs) lives under the NAS scratch directory,
//! so parallel tests never collide and nothing in /etc or /var is touched.
//!
//! Samba has no option for O_DIRECT, so its reads would come from the page
//! cache right after headroom wrote the test file. For a throttled device,
//! smbd therefore runs in a cgroup v1 memory group of its own with a small
//! limit ([`SmbOptions::cache_limit`]): the page cache its writes leave is
//! capped there, so a sequential read of a larger file reaches the device
//! (and its blkio throttle) for all but the last few MiB written. Such an
//! smbd also writes through (`sync always`): a cgroup v1 memory group has no
//! dirty limit of its own and its reclaim cannot write dirty pages back, so
//! the dirty pages of a fast write filled 45 of 64 MiB in the lab and an
//! unlucky run had smbd killed by the group's OOM killer.

use super::Nas;
use crate::blockdev::BlkioThrottle;
use crate::memory::MemoryLimit;
use std::io;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The SMB user the lab server knows (a tdbsam entry for the unix user root:
/// nothing in /etc may change, so no new unix user).
pub const SMB_USER: &str = "root";
/// That user's password.
pub const SMB_PASSWORD: &str = "headroom-lab-pw";
/// The share's name.
pub const SMB_SHARE: &str = "bench";

/// How [`Nas::serve_smb`] runs smbd.
#[derive(Debug, Default)]
pub struct SmbOptions<'a> {
    /// Put smbd in this blkio group (its forked children follow).
    pub throttle: Option<&'a BlkioThrottle>,
    /// Cap smbd's memory (and so its page cache) at this many bytes.
    pub cache_limit: Option<u64>,
    /// Samba's `smb2 max credits` (8192 by default): the window of each connection.
    pub max_credits: Option<u32>,
    /// `server signing = mandatory`: every request must be signed.
    pub signing_required: bool,
    /// `server max protocol` (e.g. `SMB2_10` for 2.1 only; default: Samba's).
    pub max_protocol: Option<&'a str>,
    /// `server min protocol` (e.g. `SMB3_11`; default: `SMB2_10`).
    pub min_protocol: Option<&'a str>,
    /// `server smb encrypt` for the whole server (`required`, `desired`...).
    pub encrypt: Option<&'a str>,
    /// `server smb encrypt` of the share alone.
    pub share_encrypt: Option<&'a str>,
    /// `strict sync = no`: FLUSH and write-through are acknowledged without
    /// an fsync, so acknowledged data sits in the NAS's page cache (a lying
    /// write cache, as a power cut of the NAS shows).
    pub lying_sync: bool,
}

/// A running smbd exporting one directory as [`SMB_SHARE`].
#[derive(Debug)]
pub struct SmbExport {
    /// `smb://ADDR/bench`, without a user.
    pub url: String,
    /// `ADDR` (port 445).
    pub addr: String,
    /// The shared directory on the NAS.
    pub dir: PathBuf,
    /// smbd's pid (the parent; killed with the NAS).
    pub pid: u32,
    /// The memory group smbd runs in, if any.
    memory: Option<MemoryLimit>,
}

impl SmbExport {
    /// `smb://root@ADDR/bench[/sub]`: the URL with the lab user.
    pub fn url_with_user(&self) -> String {
        self.url.replacen("smb://", &format!("smb://{SMB_USER}@"), 1)
    }

    /// Whether smbd still runs.
    pub fn alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists()
    }

    /// Kills smbd and every process it forked (one per client connection):
    /// the server dies as a whole, as in a crash.
    pub fn kill(&self) {
        let mut pids = vec![self.pid];
        let mut i = 0;
        while i < pids.len() {
            pids.extend(children(pids[i]));
            i += 1;
        }
        for pid in pids.iter().filter_map(|p| rustix::process::Pid::from_raw(*p as i32)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }

    /// What smbd's memory group holds ([`MemoryLimit::summary`]; None without one).
    pub fn memory_summary(&self) -> Option<String> {
        self.memory.as_ref().map(MemoryLimit::summary)
    }
}

/// The share's sync settings: lying (FLUSH acknowledged without an fsync),
/// writing through (a capped page cache must hold no dirty pages: see the
/// module's comment), or Samba's defaults.
fn sync_lines(opts: &SmbOptions) -> &'static str {
    if opts.lying_sync {
        "  strict sync = no\n  sync always = no\n"
    } else if opts.cache_limit.is_some() {
        "  strict sync = yes\n  sync always = yes\n"
    } else {
        ""
    }
}

/// The pids whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|p| {
            // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
            std::fs::read_to_string(format!("/proc/{p}/stat")).ok().and_then(|s| {
                s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
            }) == Some(pid)
        })
        .collect()
}

impl Nas {
    /// Starts smbd in the NAS namespace sharing `dir` as [`SMB_SHARE`]
    /// (read-write, files owned by root), user [`SMB_USER`] with
    /// [`SMB_PASSWORD`], guests mapped to the same share.
    pub fn serve_smb(&mut self, dir: &Path, opts: SmbOptions<'_>) -> io::Result<SmbExport> {
        // One directory per smbd: a second one (after a kill) gets a fresh passdb.
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = self.subdir(&format!("smb-{}-{n}", std::process::id()))?;
        for sub in ["private", "lock", "state", "cache", "pid", "ncalrpc"] {
            std::fs::create_dir_all(base.join(sub))?;
        }
        let b = base.display();
        let conf = base.join("smb.conf");
        std::fs::write(
            &conf,
            format!(
                "[global]
  netbios name = HRLAB
  workgroup = HRLAB
  server role = standalone server
  security = user
  map to guest = Bad User
  guest account = root
  passdb backend = tdbsam:{b}/private/passdb.tdb
  private dir = {b}/private
  lock directory = {b}/lock
  state directory = {b}/state
  cache directory = {b}/cache
  pid directory = {b}/pid
  ncalrpc dir = {b}/ncalrpc
  log file = {b}/log.smbd
  max log size = 0
  log level = 1
  smb ports = 445
  interfaces = {addr}/32
  bind interfaces only = yes
  server min protocol = {min_protocol}
  disable netbios = yes
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  rpc start on demand helpers = no
  kernel oplocks = no
  smb2 max credits = {credits}
  server signing = {signing}
{max_protocol}{encrypt}
[{SMB_SHARE}]
  path = {dir}
  read only = no
  guest ok = yes
  force user = root
{share_encrypt}{sync}",
                addr = self.addr(),
                dir = dir.display(),
                credits = opts.max_credits.unwrap_or(8192),
                signing = if opts.signing_required { "mandatory" } else { "default" },
                max_protocol = opts.max_protocol.map(|p| format!("  server max protocol = {p}\n")).unwrap_or_default(),
                min_protocol = opts.min_protocol.unwrap_or("SMB2_10"),
                encrypt = opts.encrypt.map(|e| format!("  server smb encrypt = {e}\n")).unwrap_or_default(),
                share_encrypt = opts.share_encrypt.map(|e| format!("  server smb encrypt = {e}\n")).unwrap_or_default(),
                sync = sync_lines(&opts),
            ),
        )?;
        let conf_s = conf.to_string_lossy().to_string();
        // The password twice on stdin (-t), into the private tdbsam.
        let mut pdb = std::process::Command::new("pdbedit")
            .args(["-s", &conf_s, "-a", "-t", "-u", SMB_USER])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        pdb.stdin.take().expect("piped").write_all(format!("{SMB_PASSWORD}\n{SMB_PASSWORD}\n").as_bytes())?;
        let out = pdb.wait_with_output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!("pdbedit: {}", String::from_utf8_lossy(&out.stderr).trim())));
        }
        let memory = opts.cache_limit.map(|limit| MemoryLimit::new("smbd", limit)).transpose()?;
        let server = self.server().spawn("smbd", &["--foreground", "--no-process-group", "-s", &conf_s])?;
        let pid = server.id();
        self.keep(server);
        // `ip netns exec` mounts its own /sys: move smbd into the groups from here.
        if let Some(t) = opts.throttle {
            std::fs::write(t.dir.join("cgroup.procs"), pid.to_string())?;
        }
        if let Some(m) = &memory {
            m.add_pid(pid)?;
        }
        if let Err(e) = self.wait_for_port(445, Duration::from_secs(15)) {
            let log = std::fs::read_to_string(base.join("log.smbd")).unwrap_or_default();
            return Err(io::Error::other(format!("smbd did not start: {e}; log: {}", log.trim())));
        }
        Ok(SmbExport {
            url: format!("smb://{}/{SMB_SHARE}", self.addr()),
            addr: self.addr().to_string(),
            dir: dir.to_path_buf(),
            pid,
            memory,
        })
    }
}
