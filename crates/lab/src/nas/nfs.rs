//! The lab NAS's NFS server: nfs-ganesha with its VFS backend, exporting one
//! directory over NFSv3 and NFSv4 (TCP only), started by [`Nas::serve_nfs`].
//!
//! NFSv3 clients find the MOUNT service through the portmapper, so an
//! rpcbind runs beside ganesha in the NAS namespace. rpcbind and ganesha
//! meet on the unix socket /run/rpcbind.sock, which would be the host's (and
//! every other test's): both run in a mount namespace of their own with a
//! private tmpfs on /run, so each lab NAS has its own portmapper and nothing
//! in the host's /run, /etc or /var is touched. The same private /run hides
//! the system D-Bus from ganesha, so parallel instances never compete for
//! its bus name. Configuration, log, pid file and the NFSv4 recovery
//! directory live in the NAS scratch directory; the grace period is off, so
//! clients can open files at once.
//!
//! Ganesha's VFS backend has no direct-I/O option: it reads through the
//! NAS's page cache. A test that measures the backing device drops the
//! file's cached pages itself ([`drop_cached_pages`]).

use super::Nas;
use crate::blockdev::BlkioThrottle;
use crate::netns::ChildGuard;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// An export the lab NAS serves over NFS.
#[derive(Debug, Clone)]
pub struct NfsExport {
    /// `nfs://ADDR/DIR`, the directory exported (as the URL's path).
    pub url: String,
    /// The exported directory, as the host sees it.
    pub dir: PathBuf,
    /// ganesha.nfsd's pid (to kill the server mid-test).
    pub pid: u32,
    /// The server's log.
    pub log: PathBuf,
}

/// The programs [`Nas::serve_nfs`] runs (nfs-ls lists the export to see it is up).
pub const NFS_PROGRAMS: [&str; 4] = ["ganesha.nfsd", "rpcbind", "nfs-ls", "unshare"];

/// Whether this machine has [`NFS_PROGRAMS`]; prints SKIPPED naming the first missing one otherwise.
pub fn nfs_lab_ready() -> bool {
    match NFS_PROGRAMS.iter().find(|p| !crate::has_program(p)) {
        Some(program) => {
            eprintln!("SKIPPED: `{program}` is not installed (run scripts/install-deps.sh)");
            false
        }
        None => true,
    }
}

impl Nas {
    /// A new lab NAS serving a fresh directory of its scratch space (`export`) over NFS.
    pub fn with_nfs_export() -> io::Result<(Nas, NfsExport)> {
        let mut nas = Nas::new()?;
        let dir = nas.subdir("export")?;
        let export = nas.serve_nfs(&dir, None)?;
        Ok((nas, export))
    }

    /// Serves `dir` over NFSv3 and NFSv4 from nfs-ganesha (VFS backend), with
    /// root not squashed; inside `throttle`'s blkio group when given (so its
    /// reads of a throttled device run at the throttle). Waits until the
    /// export is listed by MOUNT.
    pub fn serve_nfs(&mut self, dir: &Path, throttle: Option<&BlkioThrottle>) -> io::Result<NfsExport> {
        let state = self.subdir("ganesha")?;
        let recovery = state.join("recovery");
        std::fs::create_dir_all(&recovery)?;
        let conf = state.join("ganesha.conf");
        let log = state.join("ganesha.log");
        let pid_file = state.join("ganesha.pid");
        let dir = dir.canonicalize()?;
        let d = dir.display();
        std::fs::write(
            &conf,
            format!(
                r#"NFS_CORE_PARAM {{
    Protocols = 3, 4;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
}}
NFSV4 {{
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = "{recovery}";
}}
EXPORT {{
    Export_Id = 1;
    Path = "{d}";
    Pseudo = "{d}";
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    Protocols = 3, 4;
    Transports = TCP;
    FSAL {{
        Name = VFS;
    }}
}}
"#,
                recovery = recovery.display()
            ),
        )?;
        // Private /run: rpcbind's socket and ganesha's registration stay in
        // this NAS. `exec` keeps one pid from `ip` to ganesha.
        let script = r#"mount -t tmpfs -o mode=755 headroom-nas-run /run && mkdir -p /run/rpcbind && chown _rpc /run/rpcbind 2>/dev/null
rpcbind -f &
i=0; while [ ! -S /run/rpcbind.sock ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
exec ganesha.nfsd -F -f "$1" -L "$2" -p "$3" -N NIV_EVENT"#;
        let args = [
            "netns",
            "exec",
            &self.server().name,
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "ganesha",
        ];
        let mut args: Vec<&str> = args.to_vec();
        let (conf_s, log_s, pid_s) = (
            conf.to_string_lossy().into_owned(),
            log.to_string_lossy().into_owned(),
            pid_file.to_string_lossy().into_owned(),
        );
        args.extend([conf_s.as_str(), log_s.as_str(), pid_s.as_str()]);
        let mut command = match throttle {
            Some(t) => t.command(Path::new("ip"), &args),
            None => {
                let mut c = Command::new("ip");
                c.args(&args);
                c
            }
        };
        let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
        let guard = ChildGuard(Some(child));
        let pid = guard.id();
        self.keep(guard);
        let started = self
            .wait_for_port(2049, Duration::from_secs(30))
            .and_then(|()| self.wait_for_export(&d.to_string(), Duration::from_secs(20)));
        if let Err(e) = started {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(8).collect();
            return Err(io::Error::other(format!("ganesha did not start: {e}; log: {}", tail.join(" | "))));
        }
        Ok(NfsExport { url: format!("nfs://{}{}", self.addr(), d), dir, pid, log })
    }

    /// Waits until the NAS's MOUNT service lists `export` (ganesha registers
    /// with rpcbind a moment after it listens), asked with libnfs's nfs-ls
    /// from the client namespace.
    fn wait_for_export(&self, export: &str, timeout: Duration) -> io::Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        let url = format!("nfs://{}{}", self.addr(), export);
        loop {
            let out = self.client().command("nfs-ls").arg(&url).stdin(Stdio::null()).output()?;
            if out.status.success() {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{url} not listable: {}", String::from_utf8_lossy(&out.stderr).trim()),
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Drops the NAS's cached pages of `file` (flushed first), so the server's
/// next reads of it go to the device: coreutils dd's `iflag=nocache` with
/// nothing to copy is POSIX_FADV_DONTNEED over the whole file.
pub fn drop_cached_pages(file: &Path) -> io::Result<()> {
    std::fs::File::open(file)?.sync_all()?;
    let arg = format!("if={}", file.display());
    crate::sh("dd", &[&arg, "iflag=nocache", "count=0", "status=none"]).map(|_| ())
}
