//! The lab NAS: one network namespace that serves NFS (nfs-ganesha, VFS
//! backend), iSCSI (tgt), NBD (nbdkit) and SMB (Samba) from user-space
//! servers, joined to a client namespace by a veth pair that tbf can shape.
//! The kernel here has no NFS, SMB, iSCSI or NBD client: everything on the
//! client side is headroom's own code, which is the point.
//!
//! Each protocol's server lives in its own file (`nfs.rs`, `iscsi.rs`,
//! `nbd.rs`, `smb.rs`) as `Nas::serve_*` methods; this file owns the
//! namespaces, the scratch directory and the servers' lifetimes. Everything
//! is removed on drop: servers killed, namespaces deleted, files removed.

pub mod iscsi;
pub mod nbd;
pub mod nfs;
pub mod smb;

use crate::netns::{ChildGuard, Netns, TwoHosts};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The NAS namespace (`hosts.a`, servers) and the client namespace (`hosts.b`).
pub struct Nas {
    /// `a` is the NAS, `b` the client that runs headroom.
    pub hosts: TwoHosts,
    /// Scratch directory for configurations, state and exported files.
    dir: PathBuf,
    /// Server processes, killed on drop (before the namespaces go).
    servers: Vec<ChildGuard>,
}

impl Nas {
    /// A NAS namespace and a client namespace, MTU 1500, not shaped.
    pub fn new() -> io::Result<Nas> {
        let hosts = TwoHosts::new(1500)?;
        let dir = std::env::temp_dir().join(crate::blockdev::unique_name("nas"));
        std::fs::create_dir_all(&dir)?;
        Ok(Nas { hosts, dir, servers: Vec::new() })
    }

    /// The NAS's address, as clients reach it.
    pub fn addr(&self) -> Ipv4Addr {
        self.hosts.addr_a
    }

    /// The namespace headroom runs in, as the client.
    pub fn client(&self) -> &Netns {
        &self.hosts.b
    }

    /// The namespace the servers run in.
    pub fn server(&self) -> &Netns {
        &self.hosts.a
    }

    /// Shapes the link both ways with tbf at `rate_bits`.
    pub fn shape(&self, rate_bits: u64) -> io::Result<()> {
        self.hosts.shape(rate_bits)
    }

    /// A fresh subdirectory of the scratch directory, e.g. for an export.
    pub fn subdir(&self, name: &str) -> io::Result<PathBuf> {
        let d = self.dir.join(name);
        std::fs::create_dir_all(&d)?;
        Ok(d)
    }

    /// The scratch directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps a server process alive until the NAS drops.
    pub fn keep(&mut self, server: ChildGuard) {
        self.servers.push(server);
    }

    /// Starts `headroom serve` (the binary `exe`) on the NAS's address, no
    /// token, `--allow-path` each of `allowed`; returns once it listens on
    /// 5201. Killed when the NAS drops.
    pub fn serve_headroom(&mut self, exe: &Path, allowed: &[&Path]) -> io::Result<()> {
        let addr = self.addr().to_string();
        let mut command = self.server().command(&exe.to_string_lossy());
        command.args(["serve", "--bind", &addr, "--no-auth", "--quiet"]);
        for dir in allowed {
            command.arg("--allow-path").arg(dir);
        }
        let serve = command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn()?;
        self.keep(ChildGuard(Some(serve)));
        self.wait_for_port(5201, Duration::from_secs(10))
    }

    /// Waits until something listens on `port` of the NAS, as seen from the
    /// client namespace; fails after `timeout` with what the server printed.
    pub fn wait_for_port(&self, port: u16, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        let target = SocketAddr::from((self.addr(), port));
        loop {
            // Connect from inside the client namespace: a tiny probe with bash's /dev/tcp.
            let probe = self
                .client()
                .command("bash")
                .args(["-c", &format!("exec 3<>/dev/tcp/{}/{}", target.ip(), target.port())])
                .output()?;
            if probe.status.success() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("nothing listens on {target} after {timeout:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Nas {
    fn drop(&mut self) {
        for s in &mut self.servers {
            s.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
