//! The link watcher: a background thread that polls the interfaces on the
//! path (their state and carrier changes) every 100 ms and reads new kernel
//! log records (both through `crate::os`: sysfs and /dev/kmsg on Linux), feeds them to the flap
//! trackers of `headroom_analysis::detect` and writes each flap to the store
//! as it opens and closes. It keeps no history: only the trackers' state.
//!
//! Also here: reading a vmkernel.log file. (Which interface leads to the
//! server is `headroom_net::route::interface_to`.)

use crate::store::{EventRow, Store, StoreError};
use crate::{now_unix, Metrics};
use headroom_analysis::detect::{
    parse_kernel_log_line, parse_vmkernel_line, FlapSource, FlapUpdate, LinkEvent, LinkObservation, LinkTracker,
    LogFlapTracker,
};
use headroom_result::SoakEventKind;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often interfaces are polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// One poll of an interface, or `None` when it does not exist.
pub fn observe(iface: &str, t_s: f64) -> Option<LinkObservation> {
    let state = crate::os::link_state(iface)?;
    Some(LinkObservation { t_s, iface: iface.to_string(), up: state.up, carrier_changes: state.carrier_changes })
}

/// Writes tracker updates to the store: an event row when a flap opens,
/// its end when it closes.
struct FlapWriter<'a> {
    store: &'a Store,
    metrics: Option<&'a Metrics>,
    open_rows: BTreeMap<(String, &'static str), i64>,
}

fn source_name(s: FlapSource) -> &'static str {
    match s {
        FlapSource::Sysfs => "sysfs",
        FlapSource::KernelLog => "kernel_log",
        FlapSource::VmkernelLog => "vmkernel_log",
    }
}

impl FlapWriter<'_> {
    fn apply(&mut self, update: FlapUpdate) -> Result<(), StoreError> {
        match update {
            FlapUpdate::Opened { device, source, down_s, detail } => {
                let id = self.store.add_event(&EventRow {
                    id: 0,
                    t_unix: down_s,
                    end_unix: None,
                    kind: SoakEventKind::Flap,
                    source: source_name(source).into(),
                    device: Some(device.clone()),
                    message: format!("{device} went down: {detail}"),
                    details: None,
                })?;
                self.open_rows.insert((device, source_name(source)), id);
                if let Some(m) = self.metrics {
                    m.detection("flap");
                }
            }
            FlapUpdate::Closed(flap) => {
                let message =
                    format!("{} down for {:.1} s: {}", flap.device, flap.duration_s.unwrap_or(0.0), flap.detail);
                match self.open_rows.remove(&(flap.device.clone(), source_name(flap.source))) {
                    Some(id) => self.store.end_event(id, flap.up_s.unwrap_or(flap.down_s), Some(&message))?,
                    None => {
                        self.store.add_event(&EventRow {
                            id: 0,
                            t_unix: flap.down_s,
                            end_unix: flap.up_s,
                            kind: SoakEventKind::Flap,
                            source: source_name(flap.source).into(),
                            device: Some(flap.device.clone()),
                            message,
                            details: None,
                        })?;
                        if let Some(m) = self.metrics {
                            m.detection("flap");
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// A running link watcher; stops and closes still-open flaps' trackers on drop.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Watches `interfaces` (sysfs and kernel log) and writes flaps to `store`.
    /// Kernel log lines about other devices are ignored, except USB devices
    /// (a USB NIC reset names the USB port, not the interface).
    pub fn start(store: Store, interfaces: Vec<String>, metrics: Option<Metrics>) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("soak-link-watch".into())
            .spawn(move || {
                let mut writer = FlapWriter { store: &store, metrics: metrics.as_ref(), open_rows: BTreeMap::new() };
                let mut sysfs = LinkTracker::new();
                let mut logs = LogFlapTracker::new();
                let mut kmsg = crate::os::KernelLog::open();
                while !flag.load(Ordering::Relaxed) {
                    let now = now_unix();
                    for iface in &interfaces {
                        if let Some(o) = observe(iface, now) {
                            for u in sysfs.observe(o) {
                                let _ = writer.apply(u);
                            }
                        }
                    }
                    if let Some(f) = kmsg.as_mut() {
                        for message in f.read_new() {
                            let Some((device, kind)) = parse_kernel_log_line(&message) else { continue };
                            if !(interfaces.contains(&device) || device.starts_with("usb ")) {
                                continue;
                            }
                            let event =
                                LinkEvent { t_s: now, device, kind, source: FlapSource::KernelLog, line: message };
                            for u in logs.event(event) {
                                let _ = writer.apply(u);
                            }
                        }
                    }
                    std::thread::sleep(POLL_INTERVAL);
                }
            })
            .expect("spawning a thread");
        Watcher { stop, thread: Some(thread) }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Longest vmkernel.log line kept whole; the rest of a longer one is skipped
/// (ESXi lines are a few hundred bytes; a file without newlines must not grow
/// memory without bound).
const MAX_LOG_LINE: u64 = 64 * 1024;

/// Calls `each` with every line of `reader`, decoded lossily (one bad byte must
/// not end the import) and cut at [`MAX_LOG_LINE`] bytes.
fn for_each_log_line(mut reader: impl BufRead, mut each: impl FnMut(&str)) -> std::io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader).take(MAX_LOG_LINE).read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && read as u64 == MAX_LOG_LINE {
            // Skip the rest of an overlong line.
            let mut sink = Vec::new();
            loop {
                sink.clear();
                let more = (&mut reader).take(MAX_LOG_LINE).read_until(b'\n', &mut sink)?;
                if more == 0 || sink.last() == Some(&b'\n') {
                    break;
                }
            }
        }
        each(String::from_utf8_lossy(&line).trim_end_matches(['\n', '\r']));
    }
}

/// Reads an ESXi vmkernel.log and records its flaps in the store (replacing
/// those of an earlier read); returns how many.
pub fn import_vmkernel_log(store: &Store, path: &Path) -> std::io::Result<usize> {
    let file = File::open(path)?;
    let mut tracker = LogFlapTracker::new();
    let mut updates = Vec::new();
    for_each_log_line(std::io::BufReader::new(file), |line| {
        if let Some(event) = parse_vmkernel_line(line) {
            updates.extend(tracker.event(event));
        }
    })?;
    let still_open = tracker.finish();
    store.delete_events_from("vmkernel_log").map_err(std::io::Error::other)?;
    let mut writer = FlapWriter { store, metrics: None, open_rows: BTreeMap::new() };
    let mut count = 0;
    for u in updates {
        if matches!(u, FlapUpdate::Closed(_)) {
            count += 1;
        }
        writer.apply(u).map_err(std::io::Error::other)?;
    }
    Ok(count + still_open.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_observable() {
        let o = observe("lo", 1.0).expect("lo exists");
        assert!(o.up);
        assert!(observe("no-such-if0", 1.0).is_none());
    }

    #[test]
    fn log_lines_survive_bad_bytes_and_overlong_lines() {
        let mut input = b"first\n\xff\xfe bad bytes\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 3 * MAX_LOG_LINE as usize));
        input.extend_from_slice(b"\nlast\r\n");
        let mut seen = Vec::new();
        for_each_log_line(&input[..], |l| seen.push(l.to_string())).unwrap();
        assert_eq!(seen.len(), 4, "{:?}", seen.iter().map(|l| l.len()).collect::<Vec<_>>());
        assert_eq!(seen[0], "first");
        assert!(seen[1].ends_with(" bad bytes"), "{}", seen[1]);
        assert_eq!(seen[2].len(), MAX_LOG_LINE as usize, "an overlong line is cut, its rest skipped");
        assert_eq!(seen[3], "last");
    }
}
