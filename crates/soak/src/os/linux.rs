//! The Linux implementation of headroom-soak's platform seam (see `mod.rs`):
//! `operstate` and `carrier_changes` under /sys/class/net, and /dev/kmsg.
//! Reads only; what a flap is belongs to `headroom_analysis::detect`.

use super::LinkState;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The interface's state from sysfs, or `None` when it does not exist.
pub(crate) fn link_state(iface: &str) -> Option<LinkState> {
    let dir = Path::new("/sys/class/net").join(iface);
    let operstate = std::fs::read_to_string(dir.join("operstate")).ok()?;
    let carrier_changes = std::fs::read_to_string(dir.join("carrier_changes")).ok().and_then(|s| s.trim().parse().ok());
    Some(LinkState { up: matches!(operstate.trim(), "up" | "unknown"), carrier_changes })
}

/// /dev/kmsg, read from where it was opened on.
pub(crate) struct KernelLog(File);

impl KernelLog {
    /// Opens /dev/kmsg positioned after the newest record, non-blocking.
    pub(crate) fn open() -> Option<KernelLog> {
        const O_NONBLOCK: i32 = 0o4000; // Linux, all architectures headroom builds for
        let mut f = std::fs::OpenOptions::new().read(true).custom_flags(O_NONBLOCK).open("/dev/kmsg").ok()?;
        f.seek(SeekFrom::End(0)).ok()?;
        Some(KernelLog(f))
    }

    /// New kernel log messages (text after the `prio,seq,ts,flags;` header).
    pub(crate) fn read_new(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let record = String::from_utf8_lossy(&buf[..n]);
                    let first = record.lines().next().unwrap_or_default();
                    if let Some((_, message)) = first.split_once(';') {
                        out.push(message.to_string());
                    }
                }
                // EPIPE: records were overwritten before we read them; go on.
                Err(e) if e.raw_os_error() == Some(32) => continue,
                Err(_) => break, // WouldBlock: nothing new
            }
        }
        out
    }
}
