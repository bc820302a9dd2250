//! The lab NAS's iSCSI target: tgt's `tgtd` in the NAS namespace, one
//! target with one LUN (LUN 1: tgt puts its controller on LUN 0) backed by
//! a file or a block device with `--bsoflags direct`, so reads reach the
//! device (and its blkio throttle) instead of the NAS's page cache.
//! [`Nas::serve_iscsi_cached`] instead leaves the NAS's page cache in
//! between, as a write cache that SYNCHRONIZE CACHE and FUA flush
//! (fdatasync), or that lies under eatmydata (the flush is a no-op).
//!
//! tgtd keeps its control socket at /var/run/tgtd/socket.N (tgt has no
//! option to move it); N is unique per target so parallel tests never
//! share a daemon, and [`IscsiTarget`] removes the socket files on drop.

use super::Nas;
use crate::blockdev::{unique_name, BlkioThrottle};
use crate::netns::ChildGuard;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static CONTROL_PORTS: AtomicU32 = AtomicU32::new(0);

/// What a client needs to reach the LUN. Dropping it removes tgtd's control
/// socket files (the NAS kills tgtd with SIGKILL, which leaves them behind).
#[derive(Debug)]
pub struct IscsiTarget {
    /// `iscsi://ADDR/IQN/1`.
    pub url: String,
    /// The target's name.
    pub iqn: String,
    /// The LUN backed by the file or device.
    pub lun: u16,
    /// tgtd's control port (`tgtadm -C N`).
    pub control_port: u32,
    /// tgtd's pid (to kill it mid-test).
    pub pid: u32,
}

/// A control port no tgtd here uses: tgt accepts at most 32767, and the
/// socket file of a live daemon (or of one killed without cleanup) marks it taken.
fn free_control_port() -> u32 {
    loop {
        let n = CONTROL_PORTS.fetch_add(1, Ordering::SeqCst);
        let port = 1000 + (std::process::id() % 1900) * 16 + n % 16;
        if !Path::new(&format!("/var/run/tgtd/socket.{port}")).exists() || n > 64 {
            return port;
        }
    }
}

impl Nas {
    /// Starts tgtd serving `backing` (a file or block device) as LUN 1 of a
    /// new target, optionally inside `throttle` (the daemon and its I/O
    /// threads) and with a CHAP account `(user, secret)` required.
    pub fn serve_iscsi(
        &mut self,
        backing: &Path,
        throttle: Option<&BlkioThrottle>,
        chap: Option<(&str, &str)>,
    ) -> io::Result<IscsiTarget> {
        self.start_tgtd(backing, throttle, chap, true, false)
    }

    /// Starts tgtd serving `backing` through the NAS's page cache (no
    /// `--bsoflags direct`): SYNCHRONIZE CACHE and FUA writes are tgt's
    /// fdatasync. `lying`: tgtd runs under eatmydata, which turns that
    /// fdatasync into a no-op, so an acknowledged flush leaves the data in
    /// the page cache, where a power cut of the NAS loses it.
    pub fn serve_iscsi_cached(&mut self, backing: &Path, lying: bool) -> io::Result<IscsiTarget> {
        self.start_tgtd(backing, None, None, false, lying)
    }

    fn start_tgtd(
        &mut self,
        backing: &Path,
        throttle: Option<&BlkioThrottle>,
        chap: Option<(&str, &str)>,
        direct: bool,
        lying: bool,
    ) -> io::Result<IscsiTarget> {
        let port = 3260;
        let control = free_control_port();
        let control_s = control.to_string();
        let portal = format!("portal={}:{port}", self.addr());
        let ns = self.server().name.clone();
        let mut args = vec!["netns", "exec", &ns];
        if lying {
            args.push("eatmydata");
        }
        args.extend(["tgtd", "-f", "--iscsi", &portal, "-C", &control_s]);
        let mut command = match throttle {
            Some(t) => t.command(Path::new("ip"), &args),
            None => {
                let mut c = std::process::Command::new("ip");
                c.args(&args);
                c
            }
        };
        let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
        let guard = ChildGuard(Some(child));
        let pid = guard.id();
        self.keep(guard);
        let tgtadm = |args: &[&str]| -> io::Result<String> {
            let mut all = vec!["-C", &control_s, "--lld", "iscsi"];
            all.extend_from_slice(args);
            self.server().exec("tgtadm", &all)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while tgtadm(&["--op", "show", "--mode", "target"]).is_err() {
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "tgtd did not open its control socket in 10 s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let iqn = format!("iqn.2026-11.dev.headroom.lab:{}", unique_name("t").to_ascii_lowercase());
        let backing_s = backing.to_str().ok_or_else(|| io::Error::other("backing path is not UTF-8"))?;
        tgtadm(&["--op", "new", "--mode", "target", "--tid", "1", "-T", &iqn])?;
        let mut lun = vec!["--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", "1", "-b", backing_s];
        if direct {
            lun.extend(["--bsoflags", "direct"]);
        }
        tgtadm(&lun)?;
        tgtadm(&["--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL"])?;
        if let Some((user, secret)) = chap {
            tgtadm(&["--op", "new", "--mode", "account", "--user", user, "--password", secret])?;
            tgtadm(&["--op", "bind", "--mode", "account", "--tid", "1", "--user", user])?;
        }
        self.wait_for_port(port, Duration::from_secs(10))?;
        Ok(IscsiTarget { url: format!("iscsi://{}/{iqn}/1", self.addr()), iqn, lun: 1, control_port: control, pid })
    }
}

impl Nas {
    /// Sets one of target `t`'s iSCSI keys as tgt offers it at the next login
    /// (`tgtadm --op update --name KEY --value VALUE`), e.g. its
    /// MaxRecvDataSegmentLength, 8192 unless changed.
    pub fn set_iscsi_key(&self, t: &IscsiTarget, key: &str, value: u64) -> io::Result<()> {
        let (control, value) = (t.control_port.to_string(), value.to_string());
        let args = ["-C", &control, "--lld", "iscsi", "--op", "update", "--mode", "target", "--tid", "1"];
        self.server().exec("tgtadm", &[&args[..], &["--name", key, "--value", &value]].concat()).map(drop)
    }
}

impl Drop for IscsiTarget {
    fn drop(&mut self) {
        for suffix in ["", ".lock"] {
            let _ = std::fs::remove_file(format!("/var/run/tgtd/socket.{}{suffix}", self.control_port));
        }
    }
}
