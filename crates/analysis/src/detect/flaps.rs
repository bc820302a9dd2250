//! Link flaps: a link that goes down and comes back, seen three ways:
//! - sysfs observations of an interface (`operstate` and the kernel's
//!   `carrier_changes` counter, which also catches flaps shorter than the
//!   polling interval);
//! - Linux kernel log lines (`/dev/kmsg`, `journalctl -k`): NIC link down/up,
//!   r8152 carrier off/on, cdc_ncm/cdc_ether unregister/register, USB
//!   disconnect / new device / reset;
//! - ESXi `vmkernel.log`: `DMA Engine 'vusb1-dma-engine' destroyed` and
//!   uplink close, then `Uplink: ...: Opening device vusb1`, and vobd's `vmnic vusb0 linkstate down/up`.
//!
//! Everything here is pure: the soak reads sysfs and logs and hands over
//! observations and lines. A flap is one down -> up per device; repeated
//! "down" lines before the "up" (a DMA engine destroyed, then the uplink
//! closed) belong to the same flap.
//!
//! Long only through its unit tests (about 390 lines of code).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// One poll of an interface's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkObservation {
    /// When the poll was taken, seconds on the caller's clock (the soak uses
    /// Unix time); only differences and order matter here.
    pub t_s: f64,
    /// Interface name as in /sys/class/net (eth0, vusb0); polls of different
    /// interfaces are tracked apart.
    pub iface: String,
    /// operstate is up (or unknown, as on links without carrier reporting).
    pub up: bool,
    /// /sys/class/net/IFACE/carrier_changes, when readable.
    pub carrier_changes: Option<u64>,
}

/// Where a flap was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlapSource {
    /// Polls of /sys/class/net/IFACE (`operstate`, `carrier_changes`).
    Sysfs,
    /// A Linux kernel log line (`/dev/kmsg`, `journalctl -k`).
    KernelLog,
    /// An ESXi `vmkernel.log` or vobd line.
    VmkernelLog,
}

/// What a log line says about a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkEventKind {
    /// The link went away: link down, carrier off, unregister, USB disconnect.
    Down,
    /// The link came back: link up, carrier on, register, new USB device.
    Up,
    /// A device reset (e.g. a USB NIC reset): down and up at once.
    Reset,
}

/// A link event parsed from a log line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkEvent {
    /// Seconds on the caller's clock (Unix time for logs with timestamps).
    pub t_s: f64,
    /// Interface or device: eth0, vusb1, usb 2-1.
    pub device: String,
    /// Whether the line says the link went down, came up, or was reset.
    pub kind: LinkEventKind,
    /// Which log the line came from.
    pub source: FlapSource,
    /// The log line, trimmed.
    pub line: String,
}

/// One flap: down at `down_s`, back at `up_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flap {
    /// Interface or device that flapped (eth0, vusb1, usb 2-1).
    pub device: String,
    /// Where the going-down was seen (for a log flap, the Down line's log).
    pub source: FlapSource,
    /// When the link went down, seconds on the clock of the observations or
    /// log events it came from (Unix time in the soak). For a flap hidden
    /// between two polls, the earlier poll.
    pub down_s: f64,
    /// `None`: still down at the end of the observations.
    pub up_s: Option<f64>,
    /// `up_s - down_s`; for flaps between two polls, an upper bound.
    pub duration_s: Option<f64>,
    /// Why this is a flap: the log line, or what sysfs showed.
    pub detail: String,
}

impl Flap {
    fn closed(device: &str, source: FlapSource, down_s: f64, up_s: f64, detail: String) -> Flap {
        Flap {
            device: device.to_string(),
            source,
            down_s,
            up_s: Some(up_s),
            duration_s: Some((up_s - down_s).max(0.0)),
            detail,
        }
    }
}

/// A change a tracker reports as observations or log events arrive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FlapUpdate {
    /// The device went down; the flap is open until a `Closed` of the same device.
    Opened {
        /// Interface or device that went down.
        device: String,
        /// Where it was seen.
        source: FlapSource,
        /// When it went down, seconds on the caller's clock.
        down_s: f64,
        /// The log line or what sysfs showed; the closed [`Flap`] keeps it.
        detail: String,
    },
    /// A complete flap (closing an `Opened`, or one seen whole, e.g. between polls).
    Closed(Flap),
}

/// Streaming flap detection from interface polls, for a soak that must not
/// keep every observation: feed polls in time order, get updates back.
///
/// Between two polls the `carrier_changes` delta counts transitions the poll
/// may have missed: two per hidden flap. A link down at the first poll is not
/// a flap (nothing was seen going down).
#[derive(Debug, Default)]
pub struct LinkTracker {
    last: BTreeMap<String, LinkObservation>,
    open: BTreeMap<String, (f64, String)>,
}

impl LinkTracker {
    /// A tracker that has seen no polls: each interface's first poll only
    /// sets its baseline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one poll of one interface.
    pub fn observe(&mut self, now: LinkObservation) -> Vec<FlapUpdate> {
        let mut updates = Vec::new();
        let iface = now.iface.clone();
        if let Some(prev) = self.last.get(&iface) {
            let seen = u64::from(prev.up != now.up);
            let counted = match (prev.carrier_changes, now.carrier_changes) {
                (Some(a), Some(b)) if b >= a => b - a,
                _ => seen,
            };
            // Transitions beyond the one we saw are hidden down/up pairs.
            let hidden = (counted.max(seen) - seen) / 2;
            for _ in 0..hidden {
                updates.push(FlapUpdate::Closed(Flap::closed(
                    &iface,
                    FlapSource::Sysfs,
                    prev.t_s,
                    now.t_s,
                    format!("carrier_changes rose by {counted} between two polls"),
                )));
            }
            match (prev.up, now.up) {
                (true, false) => {
                    let detail = format!("operstate went down (carrier_changes +{counted})");
                    self.open.insert(iface.clone(), (now.t_s, detail.clone()));
                    updates.push(FlapUpdate::Opened {
                        device: iface.clone(),
                        source: FlapSource::Sysfs,
                        down_s: now.t_s,
                        detail,
                    });
                }
                (false, true) => {
                    if let Some((down_s, detail)) = self.open.remove(&iface) {
                        updates.push(FlapUpdate::Closed(Flap::closed(
                            &iface,
                            FlapSource::Sysfs,
                            down_s,
                            now.t_s,
                            detail,
                        )));
                    }
                }
                _ => {}
            }
        }
        self.last.insert(iface, now);
        updates
    }

    /// Flaps still open (links down at the end).
    pub fn finish(self) -> Vec<Flap> {
        self.open
            .into_iter()
            .map(|(device, (down_s, detail))| Flap {
                device,
                source: FlapSource::Sysfs,
                down_s,
                up_s: None,
                duration_s: None,
                detail: detail + "; still down at the end",
            })
            .collect()
    }
}

/// Streaming flap detection from log events: per device, the first Down
/// opens a flap and the next Up closes it; a Reset is a flap of zero length.
#[derive(Debug, Default)]
pub struct LogFlapTracker {
    open: BTreeMap<String, LinkEvent>,
}

impl LogFlapTracker {
    /// A tracker with no device down.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one parsed log event, in time order. Returns `Opened` for a
    /// device's first Down, `Closed` for the Up that ends it or for a Reset
    /// while up; nothing for repeated Downs, an Up with no open flap, or a
    /// Reset while down.
    pub fn event(&mut self, e: LinkEvent) -> Vec<FlapUpdate> {
        match e.kind {
            LinkEventKind::Down => {
                if self.open.contains_key(&e.device) {
                    return Vec::new();
                }
                let update = FlapUpdate::Opened {
                    device: e.device.clone(),
                    source: e.source,
                    down_s: e.t_s,
                    detail: e.line.clone(),
                };
                self.open.insert(e.device.clone(), e);
                vec![update]
            }
            LinkEventKind::Up => match self.open.remove(&e.device) {
                Some(down) => {
                    vec![FlapUpdate::Closed(Flap::closed(&e.device, down.source, down.t_s, e.t_s, down.line))]
                }
                None => Vec::new(),
            },
            LinkEventKind::Reset if !self.open.contains_key(&e.device) => {
                vec![FlapUpdate::Closed(Flap::closed(&e.device, e.source, e.t_s, e.t_s, e.line))]
            }
            LinkEventKind::Reset => Vec::new(),
        }
    }

    /// Flaps still open (devices down at the end), with `up_s` None.
    pub fn finish(self) -> Vec<Flap> {
        self.open
            .into_values()
            .map(|down| Flap {
                device: down.device,
                source: down.source,
                down_s: down.t_s,
                up_s: None,
                duration_s: None,
                detail: format!("{}; still down at the end", down.line),
            })
            .collect()
    }
}

fn closed_flaps(updates: Vec<FlapUpdate>) -> impl Iterator<Item = Flap> {
    updates.into_iter().filter_map(|u| match u {
        FlapUpdate::Closed(f) => Some(f),
        FlapUpdate::Opened { .. } => None,
    })
}

/// Flaps from polls of interface state (see [`LinkTracker`]).
pub fn flaps_from_observations(observations: &[LinkObservation]) -> Vec<Flap> {
    let mut obs: Vec<&LinkObservation> = observations.iter().collect();
    obs.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut tracker = LinkTracker::new();
    let mut flaps: Vec<Flap> = obs.into_iter().flat_map(|o| closed_flaps(tracker.observe(o.clone()))).collect();
    flaps.extend(tracker.finish());
    flaps.sort_by(|a, b| a.down_s.total_cmp(&b.down_s));
    flaps
}

/// Flaps from parsed log events (see [`LogFlapTracker`]).
pub fn flaps_from_link_events(events: &[LinkEvent]) -> Vec<Flap> {
    let mut events: Vec<&LinkEvent> = events.iter().collect();
    events.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut tracker = LogFlapTracker::new();
    let mut flaps: Vec<Flap> = events.into_iter().flat_map(|e| closed_flaps(tracker.event(e.clone()))).collect();
    flaps.extend(tracker.finish());
    flaps.sort_by(|a, b| a.down_s.total_cmp(&b.down_s));
    flaps
}

/// Joins flaps from several sources: a log flap of the same device that
/// starts within `window_s` of a sysfs flap is the same flap (sysfs kept).
pub fn merge_flaps(sysfs: Vec<Flap>, logs: Vec<Flap>, window_s: f64) -> Vec<Flap> {
    let mut merged = sysfs;
    let known = merged.clone();
    merged.extend(
        logs.into_iter()
            .filter(|l| !known.iter().any(|s| s.device == l.device && (s.down_s - l.down_s).abs() <= window_s)),
    );
    merged.sort_by(|a, b| a.down_s.total_cmp(&b.down_s));
    merged
}

fn regex(cell: &'static OnceLock<regex::Regex>, pattern: &str) -> &'static regex::Regex {
    cell.get_or_init(|| regex::Regex::new(pattern).expect("patterns here are valid"))
}

/// What a Linux kernel log message says about a link, if anything: the
/// device and the kind. Accepts bare messages, `/dev/kmsg` records' text and
/// `journalctl -k` / dmesg lines (the prefix is ignored).
pub fn parse_kernel_log_line(line: &str) -> Option<(String, LinkEventKind)> {
    static LINK: OnceLock<regex::Regex> = OnceLock::new();
    static CARRIER: OnceLock<regex::Regex> = OnceLock::new();
    static REGISTER: OnceLock<regex::Regex> = OnceLock::new();
    static USB: OnceLock<regex::Regex> = OnceLock::new();
    static READY: OnceLock<regex::Regex> = OnceLock::new();
    // e1000e "eno1: NIC Link is Down", igb "igb: eno1 NIC Link is Up 1000 Mbps",
    // r8169/tg3 "enp3s0: Link is Down", "eth0: Link is up at 1000 Mbps".
    let link = regex(&LINK, r"(?i)(\S+?):?\s+(?:NIC\s+)?Link is (up|down)\b");
    if let Some(c) = link.captures(line) {
        let kind = if c[2].eq_ignore_ascii_case("up") { LinkEventKind::Up } else { LinkEventKind::Down };
        return Some((c[1].to_string(), kind));
    }
    // r8152 / ax88179 USB NICs: "r8152 2-1:1.0 enx00e04c680001: carrier off".
    let carrier = regex(&CARRIER, r"(\S+): carrier (on|off)\b");
    if let Some(c) = carrier.captures(line) {
        let kind = if &c[2] == "on" { LinkEventKind::Up } else { LinkEventKind::Down };
        return Some((c[1].to_string(), kind));
    }
    // usbnet drivers (cdc_ncm, cdc_ether, r8152 as usbnet): "eth1: unregister 'cdc_ncm' ..."
    // when the device vanishes, "eth1: register 'cdc_ncm' at usb-..." when it is back.
    let register = regex(&REGISTER, r"(\S+): (unregister|register) '[\w-]+'");
    if let Some(c) = register.captures(line) {
        let kind = if &c[2] == "register" { LinkEventKind::Up } else { LinkEventKind::Down };
        return Some((c[1].to_string(), kind));
    }
    // USB core: "usb 2-1: USB disconnect, device number 3",
    // "usb 2-1: new SuperSpeed USB device number 4 using xhci_hcd",
    // "usb 2-1: reset SuperSpeed USB device number 4 using xhci_hcd".
    let usb = regex(&USB, r"usb (\d+-[\d.]+): (USB disconnect|new \S+ USB device|reset \S+ USB device)");
    if let Some(c) = usb.captures(line) {
        let kind = match &c[2] {
            "USB disconnect" => LinkEventKind::Down,
            s if s.starts_with("new") => LinkEventKind::Up,
            _ => LinkEventKind::Reset,
        };
        return Some((format!("usb {}", &c[1]), kind));
    }
    // "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready"
    let ready = regex(&READY, r"ADDRCONF\(NETDEV_CHANGE\): (\S+): link becomes ready");
    if let Some(c) = ready.captures(line) {
        return Some((c[1].to_string(), LinkEventKind::Up));
    }
    None
}

/// An ESXi vmkernel.log (or vobd.log) line about a link, with its time from
/// the leading `2026-11-21T21:30:00.123Z` stamp. Lines without a stamp are
/// skipped: a flap without a time says nothing.
pub fn parse_vmkernel_line(line: &str) -> Option<LinkEvent> {
    static DMA: OnceLock<regex::Regex> = OnceLock::new();
    static UPLINK: OnceLock<regex::Regex> = OnceLock::new();
    static LINKSTATE: OnceLock<regex::Regex> = OnceLock::new();
    // The DMA engine is created again before the uplink opens: "created" is
    // not "back", "Opening device" is.
    let dma = regex(&DMA, r"DMA Engine '([\w.-]+?)-dma-engine' destroyed");
    let uplink = regex(&UPLINK, r"Uplink: \d+: (Opening|Closing) device (\S+?)\.?$");
    let linkstate = regex(&LINKSTATE, r"(?:vmnic|Physical NIC) (\S+) linkstate (?:is )?(up|down)");
    let text = line.trim();
    let (device, kind) = if let Some(c) = dma.captures(text) {
        (c[1].to_string(), LinkEventKind::Down)
    } else if let Some(c) = uplink.captures(text) {
        (c[2].to_string(), if &c[1] == "Opening" { LinkEventKind::Up } else { LinkEventKind::Down })
    } else if let Some(c) = linkstate.captures(text) {
        (c[1].to_string(), if &c[2] == "up" { LinkEventKind::Up } else { LinkEventKind::Down })
    } else {
        return None;
    };
    let stamp = text.split_whitespace().next()?.trim_end_matches(':');
    let t_s = parse_utc_stamp(stamp)?;
    Some(LinkEvent { t_s, device, kind, source: FlapSource::VmkernelLog, line: text.to_string() })
}

/// Unix seconds of `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
pub fn parse_utc_stamp(stamp: &str) -> Option<f64> {
    let t = humantime::parse_rfc3339_weak(stamp.trim_end_matches('Z')).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

/// Mean of a series before, during and after a flap (windows of `window_s`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AroundFlap {
    /// Mean over `window_s` seconds up to `down_s`; None when no point falls in it.
    pub before: Option<f64>,
    /// Mean from `down_s` to `up_s` (at least one second, so a zero-length
    /// reset still catches its sample); None when no point falls in it.
    pub during: Option<f64>,
    /// Mean over `window_s` seconds from `up_s`; None when the flap never
    /// closed or no point falls in it.
    pub after: Option<f64>,
}

/// The series around a flap: means over `window_s` before `down_s`, between
/// down and up, and `window_s` after `up_s`.
pub fn around_flap(flap: &Flap, points: &[super::Point], window_s: f64) -> AroundFlap {
    let up = flap.up_s.unwrap_or(f64::INFINITY);
    let mean = |lo: f64, hi: f64| {
        let v: Vec<f64> = points.iter().filter(|p| p.t_s > lo && p.t_s <= hi).map(|p| p.value).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    AroundFlap {
        before: mean(flap.down_s - window_s, flap.down_s),
        during: mean(flap.down_s, up.max(flap.down_s + 1.0)),
        after: if up.is_finite() { mean(up, up + window_s) } else { None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VMKERNEL: &str = include_str!("../../tests/fixtures/vmkernel-vusb-three-reconnects.log");

    #[test]
    fn vmkernel_fixture_has_three_reconnects() {
        let events: Vec<LinkEvent> = VMKERNEL.lines().filter_map(parse_vmkernel_line).collect();
        let flaps = flaps_from_link_events(&events);
        assert_eq!(flaps.len(), 3, "{flaps:#?}");
        for f in &flaps {
            assert_eq!(f.device, "vusb1");
            assert_eq!(f.source, FlapSource::VmkernelLog);
            assert!(f.detail.contains("destroyed"), "{}", f.detail);
        }
        // First reconnect: destroyed at 03:12:44.518, opened at 03:12:51.302.
        let first = &flaps[0];
        assert_eq!(first.down_s, parse_utc_stamp("2026-11-18T03:12:44.518Z").unwrap());
        assert!((first.duration_s.unwrap() - 6.784).abs() < 1e-6);
    }

    #[test]
    fn vmkernel_lines_parse() {
        let e = parse_vmkernel_line(
            "2026-11-18T03:12:44.518Z cpu1:2097700)DMA: 733: DMA Engine 'vusb1-dma-engine' destroyed.",
        )
        .unwrap();
        assert_eq!((e.device.as_str(), e.kind), ("vusb1", LinkEventKind::Down));
        let e =
            parse_vmkernel_line("2026-11-18T03:12:51.302Z cpu0:2097701)Uplink: 14291: Opening device vusb1").unwrap();
        assert_eq!((e.device.as_str(), e.kind), ("vusb1", LinkEventKind::Up));
        let e = parse_vmkernel_line(
            "2026-11-18T03:12:52.000Z: [netCorrelator] 1960335078949us: [vob.net.vmnic.linkstate.up] vmnic vusb0 linkstate up",
        )
        .unwrap();
        assert_eq!((e.device.as_str(), e.kind), ("vusb0", LinkEventKind::Up));
        assert!(parse_vmkernel_line("2026-11-18T03:12:44.518Z cpu1:2097700)NetPort: 1632: disabled port").is_none());
        assert!(parse_vmkernel_line("DMA: 733: DMA Engine 'vusb1-dma-engine' destroyed.").is_none());
    }

    #[test]
    fn kernel_log_lines_parse() {
        let cases = [
            ("[ 12.3] e1000e 0000:00:1f.6 eno1: NIC Link is Down", "eno1", LinkEventKind::Down),
            ("igb 0000:01:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex", "eno1", LinkEventKind::Up),
            ("r8169 0000:03:00.0 enp3s0: Link is Down", "enp3s0", LinkEventKind::Down),
            ("tg3 0000:02:00.0 eth0: Link is up at 1000 Mbps, full duplex", "eth0", LinkEventKind::Up),
            ("r8152 2-1:1.0 enx00e04c680001: carrier off", "enx00e04c680001", LinkEventKind::Down),
            ("r8152 2-1:1.0 enx00e04c680001: carrier on", "enx00e04c680001", LinkEventKind::Up),
            ("cdc_ncm 2-1:2.0 eth1: unregister 'cdc_ncm' usb-0000:00:14.0-1, CDC NCM", "eth1", LinkEventKind::Down),
            ("cdc_ncm 2-1:2.0 eth1: register 'cdc_ncm' at usb-0000:00:14.0-1, CDC NCM", "eth1", LinkEventKind::Up),
            ("usb 2-1: USB disconnect, device number 3", "usb 2-1", LinkEventKind::Down),
            ("usb 2-1: new SuperSpeed USB device number 4 using xhci_hcd", "usb 2-1", LinkEventKind::Up),
            ("usb 4-1.2: reset SuperSpeed USB device number 2 using xhci_hcd", "usb 4-1.2", LinkEventKind::Reset),
            (
                "Nov 21 10:00:00 host kernel: IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
                "eth0",
                LinkEventKind::Up,
            ),
        ];
        for (line, device, kind) in cases {
            assert_eq!(parse_kernel_log_line(line), Some((device.to_string(), kind)), "{line}");
        }
        for quiet in
            ["EXT4-fs (vda1): mounted filesystem", "usb 2-1: Product: USB 10/100/1000 LAN", "eth0: renamed from veth12"]
        {
            assert_eq!(parse_kernel_log_line(quiet), None, "{quiet}");
        }
    }

    fn event(t: f64, device: &str, kind: LinkEventKind) -> LinkEvent {
        LinkEvent {
            t_s: t,
            device: device.into(),
            kind,
            source: FlapSource::KernelLog,
            line: format!("{device} {kind:?}"),
        }
    }

    #[test]
    fn log_events_pair_per_device() {
        use LinkEventKind::*;
        let flaps = flaps_from_link_events(&[
            event(10.0, "eth0", Down),
            event(11.0, "eth1", Down),
            event(12.0, "eth0", Down), // repeated down: same flap
            event(14.0, "eth0", Up),
            event(15.0, "eth0", Up), // repeated up: nothing
            event(20.0, "usb 2-1", Reset),
            event(30.0, "eth1", Up),
            event(40.0, "eth0", Down), // never back
        ]);
        assert_eq!(flaps.len(), 4, "{flaps:#?}");
        assert_eq!((flaps[0].device.as_str(), flaps[0].duration_s), ("eth0", Some(4.0)));
        assert_eq!((flaps[1].device.as_str(), flaps[1].duration_s), ("eth1", Some(19.0)));
        assert_eq!(flaps[2].duration_s, Some(0.0));
        assert_eq!(flaps[3].up_s, None);
    }

    fn obs(t: f64, up: bool, cc: Option<u64>) -> LinkObservation {
        LinkObservation { t_s: t, iface: "vA".into(), up, carrier_changes: cc }
    }

    #[test]
    fn sysfs_polls_give_flaps_with_durations() {
        let flaps = flaps_from_observations(&[
            obs(0.0, true, Some(2)),
            obs(0.1, true, Some(2)),
            obs(0.2, false, Some(3)),
            obs(0.3, false, Some(3)),
            obs(0.7, true, Some(4)),
            obs(0.8, true, Some(4)),
            obs(0.9, false, Some(5)),
            obs(1.5, true, Some(6)),
        ]);
        assert_eq!(flaps.len(), 2, "{flaps:#?}");
        assert!((flaps[0].down_s - 0.2).abs() < 1e-9 && (flaps[0].duration_s.unwrap() - 0.5).abs() < 1e-9);
        assert!((flaps[1].duration_s.unwrap() - 0.6).abs() < 1e-9);
    }

    #[test]
    fn carrier_counter_catches_flaps_between_polls() {
        let flaps =
            flaps_from_observations(&[obs(0.0, true, Some(2)), obs(1.0, true, Some(6)), obs(2.0, true, Some(6))]);
        assert_eq!(flaps.len(), 2);
        assert!(flaps.iter().all(|f| f.detail.contains("between two polls")));
    }

    #[test]
    fn steady_link_has_no_flaps() {
        let steady: Vec<LinkObservation> = (0..1000).map(|i| obs(i as f64 * 0.1, true, Some(7))).collect();
        assert!(flaps_from_observations(&steady).is_empty());
        let down_from_start: Vec<LinkObservation> = (0..10).map(|i| obs(i as f64, false, None)).collect();
        assert!(flaps_from_observations(&down_from_start).is_empty());
        // Kernel chatter that is not about links.
        let noise = ["EXT4-fs (loop3): mounted filesystem", "audit: type=1400", "loop0: detected capacity change"];
        assert!(noise.iter().all(|l| parse_kernel_log_line(l).is_none()));
    }

    #[test]
    fn merge_keeps_one_flap_per_event() {
        let sysfs = vec![Flap::closed("eth0", FlapSource::Sysfs, 10.0, 12.0, "sysfs".into())];
        let logs = vec![
            Flap::closed("eth0", FlapSource::KernelLog, 10.4, 12.1, "log".into()),
            Flap::closed("usb 2-1", FlapSource::KernelLog, 10.4, 12.1, "usb".into()),
        ];
        let merged = merge_flaps(sysfs, logs, 5.0);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].source, FlapSource::Sysfs);
    }

    #[test]
    fn throughput_around_a_flap() {
        let points: Vec<super::super::Point> = (1..=30)
            .map(|i| super::super::Point::new(i as f64, if (11..=15).contains(&i) { 0.0 } else { 100.0 }))
            .collect();
        let flap = Flap::closed("eth0", FlapSource::Sysfs, 10.0, 15.0, String::new());
        let around = around_flap(&flap, &points, 5.0);
        assert_eq!(around.before, Some(100.0));
        assert_eq!(around.during, Some(0.0));
        assert_eq!(around.after, Some(100.0));
    }
}
