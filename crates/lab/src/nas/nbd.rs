//! The lab NAS's NBD server: `Nas::serve_nbd` starts nbdkit in the NAS
//! namespace, serving one export by name (other names are refused), from
//! memory or from a file or block device, optionally inside a blkio throttle.
//!
//! nbdkit 1.32's file plugin has no O_DIRECT; `cache=none` evicts every range
//! it read or wrote from the page cache (posix_fadvise DONTNEED) and
//! `fadvise=random` turns read-ahead off, so each read reaches the device and
//! reads exactly what was asked: what a blkio throttle on the device meters.

use super::Nas;
use crate::blockdev::BlkioThrottle;
use crate::netns::ChildGuard;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// What the export serves.
#[derive(Debug, Clone)]
pub enum NbdBacking {
    /// nbdkit's memory plugin, this many bytes (zeros until written).
    Memory(u64),
    /// A file or block device (e.g. a loop device), read through `cache=none`.
    File(PathBuf),
    /// An xz image (`xz --block-size=...`) decompressed block by block on
    /// the server's CPU for every read (nbdkit's xz filter): a server whose
    /// CPU, not its disk or network, sets the pace.
    Xz(PathBuf),
}

/// How to serve it.
#[derive(Debug, Clone, Copy, Default)]
pub struct NbdOptions<'a> {
    /// Export read-only (`nbdkit -r`).
    pub read_only: bool,
    /// Run nbdkit inside this blkio group, so its device I/O is throttled.
    pub throttle: Option<&'a BlkioThrottle>,
    /// Every read takes this long on the server (nbdkit's delay filter; the
    /// server works on several requests at once, so what a client gets is
    /// its queue depth / the delay).
    pub read_delay: Option<Duration>,
    /// Log every request with its flags (nbdkit's log filter) to [`NbdExport::log`].
    pub log: bool,
    /// Block size constraints to advertise, (minimum, preferred, maximum),
    /// enforced (nbdkit's blocksize-policy filter, error policy).
    pub block_sizes: Option<(u32, u32, u32)>,
    /// nbdkit's `--threads`: worker threads per connection (1: one request at a time).
    pub threads: Option<u32>,
}

/// A running export.
#[derive(Debug, Clone)]
pub struct NbdExport {
    /// `nbd://ADDR:PORT/NAME`, as headroom takes it.
    pub url: String,
    /// The TCP port nbdkit listens on in the NAS namespace.
    pub port: u16,
    /// nbdkit's process id (to kill it mid-test).
    pub pid: u32,
    /// The request log, with [`NbdOptions::log`].
    pub log: Option<PathBuf>,
}

/// First port tried; each further export of one NAS takes the next (the
/// namespace is the NAS's own, so no other test shares its ports).
const FIRST_PORT: u16 = 10809;

impl Nas {
    /// Starts nbdkit serving `backing` as export `name` on the NAS's address;
    /// returns once it accepts connections. Killed when the NAS drops.
    pub fn serve_nbd(&mut self, name: &str, backing: &NbdBacking, opts: NbdOptions<'_>) -> io::Result<NbdExport> {
        let port = FIRST_PORT + self.servers.len() as u16;
        let pidfile = self.dir().join(format!("nbdkit-{port}.pid"));
        let addr = self.addr().to_string();
        let port_s = port.to_string();
        let mut args: Vec<String> = vec![
            "--foreground".into(),
            "--ip-addr".into(),
            addr.clone(),
            "--port".into(),
            port_s,
            "--pidfile".into(),
            pidfile.to_string_lossy().into_owned(),
            // Only `name` is served: a wrong name must fail like on a real server.
            "--filter=exportname".into(),
        ];
        let log = opts.log.then(|| self.dir().join(format!("nbdkit-{port}.requests")));
        if log.is_some() {
            args.push("--filter=log".into());
        }
        if opts.read_delay.is_some() {
            args.push("--filter=delay".into());
        }
        if opts.block_sizes.is_some() {
            args.push("--filter=blocksize-policy".into());
        }
        if opts.read_only {
            args.push("--readonly".into());
        }
        if let Some(n) = opts.threads {
            args.extend(["--threads".into(), n.to_string()]);
        }
        if matches!(backing, NbdBacking::Xz(_)) {
            args.push("--filter=xz".into());
        }
        match backing {
            NbdBacking::Memory(bytes) => args.extend(["memory".into(), format!("size={bytes}")]),
            NbdBacking::File(path) => args.extend([
                "file".into(),
                format!("file={}", path.display()),
                "cache=none".into(),
                "fadvise=random".into(),
            ]),
            NbdBacking::Xz(path) => args.extend(["file".into(), format!("file={}", path.display())]),
        }
        args.extend([
            format!("exportname={name}"),
            "exportname-strict=true".into(),
            "exportname-list=explicit".into(),
            format!("default-export={name}"),
        ]);
        if let Some(path) = &log {
            args.push(format!("logfile={}", path.display()));
        }
        if let Some(d) = opts.read_delay {
            args.push(format!("rdelay={}ms", d.as_millis()));
        }
        if let Some((min, preferred, max)) = opts.block_sizes {
            args.extend([
                format!("blocksize-minimum={min}"),
                format!("blocksize-preferred={preferred}"),
                format!("blocksize-maximum={max}"),
                "blocksize-error-policy=error".into(),
            ]);
        }
        let mut full: Vec<&str> = vec!["netns", "exec", &self.server().name, "nbdkit"];
        full.extend(args.iter().map(String::as_str));
        let mut command = match opts.throttle {
            // The shell joins the group before exec'ing `ip netns exec`, which
            // cannot (it mounts its own /sys); nbdkit inherits the group.
            Some(t) => t.command(Path::new("ip"), &full),
            None => {
                let mut c = std::process::Command::new("ip");
                c.args(&full);
                c
            }
        };
        // A file, not a pipe nobody drains: nbdkit reports every refused client.
        let stderr = self.dir().join(format!("nbdkit-{port}.stderr"));
        let child =
            command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(std::fs::File::create(&stderr)?).spawn()?;
        let mut guard = ChildGuard(Some(child));
        if let Err(e) = self.wait_for_port(port, Duration::from_secs(10)) {
            guard.kill();
            let said = std::fs::read_to_string(&stderr).unwrap_or_default();
            return Err(io::Error::other(format!("nbdkit did not start: {e}; it said: {}", said.trim())));
        }
        let pid = guard.id();
        self.keep(guard);
        Ok(NbdExport { url: format!("nbd://{addr}:{port}/{name}"), port, pid, log })
    }
}
