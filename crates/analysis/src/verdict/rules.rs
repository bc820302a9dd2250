//! The rules of docs/verdict.md as a table: (id, rule), in the order they are
//! tried; the first whose conditions hold decides the direction. Each rule
//! reads the [`Facts`] of a direction and says what limits, on which hop and
//! side, in one sentence, with the headroom and what to check.
//!
//! Owns the wording of the verdict; the facts are gathered in `verdict/mod.rs`.
//!
//! Long (about 790 lines) because it is the rule table: one function per rule of docs/verdict.md,
//! read in order beside that document; splitting it would hide the order the rules are tried in.

use super::{level, Facts, Limiting, ABOVE_CEILING, AT_CEILING};
use crate::cpu_limits::{self, CpuLimit, CpuLimitKind};
use headroom_limits::{catalog, Family};
use headroom_result::{Bottleneck, Ceiling, Hop, Probe, ProbeSpec, Rule, Side};
use headroom_units::format_bytes_per_sec;

/// What a rule found: everything of the verdict but the chain and the figure.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Finding {
    pub bottleneck: Bottleneck,
    pub limiting_hop: Option<Hop>,
    pub side: Option<Side>,
    pub percent_of_ceiling: Option<f64>,
    pub explanation: String,
    pub headroom: Option<String>,
    pub headroom_factor: Option<f64>,
    pub checks: Vec<String>,
    /// The CPU limit R5 named, for the chain to show on its side.
    pub cpu_limit: Option<CpuLimit>,
}

impl Finding {
    fn new(bottleneck: Bottleneck, limiting_hop: Option<Hop>, side: Option<Side>, explanation: String) -> Self {
        Finding {
            bottleneck,
            limiting_hop,
            side,
            percent_of_ceiling: None,
            explanation,
            headroom: None,
            headroom_factor: None,
            checks: Vec::new(),
            cpu_limit: None,
        }
    }
}

type RuleFn = fn(&Facts) -> Option<Finding>;

/// Every rule, in the order of docs/verdict.md; the first that matches decides.
pub(super) const RULES: &[(Rule, RuleFn)] = &[
    (Rule::R1, faster_than_a_ceiling),
    (Rule::R5, the_far_ends_cpu),
    (Rule::R9, disk_and_network_level),
    (Rule::R2, disk_fills_its_bus),
    (Rule::R3, the_disk),
    (Rule::R4, link_or_slot_full),
    (Rule::R7, the_storage_protocol),
    (Rule::R5, a_cpu),
    (Rule::R6, loopback),
    (Rule::R8, unexplained),
];

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn factor(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.1}x")
    }
}

fn at_ceiling(m: f64, ceiling: Option<&Ceiling>) -> Option<&Ceiling> {
    ceiling.filter(|c| m >= c.bytes_per_sec * AT_CEILING)
}

/// R1: any figure above 105% of the ceiling that bounds it.
fn faster_than_a_ceiling(f: &Facts) -> Option<Finding> {
    let above = |m: Option<f64>, ceil: Option<&Ceiling>| match (m, ceil) {
        (Some(m), Some(c)) if m > c.bytes_per_sec * ABOVE_CEILING => Some((m, c.clone())),
        _ => None,
    };
    let (m, ceil) =
        above(f.m_disk, f.bus).or_else(|| above(f.m_net, f.net_bound)).or_else(|| above(f.m_client, f.client_bound))?;
    let mut found = Finding::new(
        Bottleneck::Cache,
        None,
        None,
        format!(
            "{} measured {} — {} of the {} ceiling ({}): faster than the hop can carry, so a cache, compression or a wrong ceiling is in play, not the hardware.",
            f.what(),
            format_bytes_per_sec(m),
            pct(m / ceil.bytes_per_sec),
            ceil.name,
            format_bytes_per_sec(ceil.bytes_per_sec)
        ),
    );
    found.percent_of_ceiling = Some(m / ceil.bytes_per_sec * 100.0);
    found.checks = vec![
        "disk: use O_DIRECT (direct=true) and a test file larger than RAM and the controller cache".into(),
        "writes: the device or a RAID controller may have a write-back cache; run longer to see the cliff".into(),
        "network: is the data compressible, or is --link slower than the real link?".into(),
    ];
    Some(found)
}

/// R9: disk alone and network within the noise of each other (no client figure).
fn disk_and_network_level(f: &Facts) -> Option<Finding> {
    if f.m_client.is_some() {
        return None;
    }
    let (d, n) = f.m_disk.zip(f.m_net).filter(|(d, n)| level(*d, *n, f.disk_alone, f.net_probe))?;
    let apart = (d - n).abs() / d.max(n);
    Some(Finding::new(
        Bottleneck::Level,
        None,
        None,
        format!(
            "{}: {} ({}) and the network ({}) are level, {:.0}% apart, within the noise of their samples: neither alone is the bottleneck, and raising one gains little until the other rises too.",
            f.what(),
            f.far_whose().map(|w| format!("{w} own disk")).unwrap_or_else(|| "the disk alone".into()),
            format_bytes_per_sec(d),
            format_bytes_per_sec(n),
            apart * 100.0
        ),
    ))
}

/// A client figure this far above the server's own disk (115%) was not
/// read from (or written to) that disk: the server's memory answered.
pub(super) const OUTRAN_THE_DISK: f64 = 1.15;

/// The server's own disk figure when the client's figure outran it
/// ([`OUTRAN_THE_DISK`]): its page cache served the reads, or its write
/// cache absorbed the writes.
pub(super) fn outran_the_far_disk(f: &Facts) -> Option<f64> {
    let (Some(Limiting::Client(m)), Some(_)) = (f.limiting, f.far) else { return None };
    f.m_disk.filter(|d| m > d * OUTRAN_THE_DISK)
}

/// The disk alone's figure when the disk limits: it is the lowest figure,
/// or (the server having measured its own disk) a client's figure reaches
/// 85% of it, but not more than 115%, while the network carries more.
fn limiting_disk(f: &Facts) -> Option<f64> {
    match f.limiting? {
        Limiting::Disk(d) => Some(d),
        Limiting::Client(m) => {
            let d = f.m_disk.filter(|_| f.far.is_some())?;
            if outran_the_far_disk(f).is_some() {
                return None;
            }
            (m >= d * AT_CEILING && f.m_net.is_none_or(|n| d <= n)).then_some(d)
        }
        Limiting::Net(_) => None,
    }
}

/// With the far end measured, what the sentence leads with: the client's
/// figure over its mount, the server's own disk and the network
/// ("reads run at 300.0 MB/s over /mnt/nas; nas's own disk (sda) does
/// 580.0 MB/s, the network carries 1.180 GB/s"); None without a client figure.
fn far_preamble(f: &Facts) -> Option<String> {
    let (Some(Limiting::Client(m)), Some(whose)) = (f.limiting, f.far_whose()) else { return None };
    let over = f.model.mountpoint.clone().or_else(|| f.model.storage_protocol.clone()).unwrap_or_default();
    let mut s = format!("{} run at {} over {over}", f.what(), format_bytes_per_sec(m));
    if let Some(d) = f.m_disk {
        s += &format!("; {whose} own disk{} does {}", device_words(f), format_bytes_per_sec(d));
        if let Some(b) = f.bus {
            s += &format!(" ({} of its {} ceiling)", pct(d / b.bytes_per_sec), b.name);
        }
    }
    if let Some(n) = f.m_net {
        s += &format!(", {} {}", carrier(f), format_bytes_per_sec(n));
    }
    Some(s)
}

/// Reads come "from" a disk, writes go "to" it.
fn from_or_to(f: &Facts) -> &'static str {
    match f.dir {
        headroom_result::Direction::Read => "from",
        headroom_result::Direction::Write => "to",
    }
}

/// " (sda)": the device under the disk alone, when known.
fn device_words(f: &Facts) -> String {
    f.disk_device().map(|d| format!(" ({})", d.name)).unwrap_or_default()
}

/// "loopback TCP carries" / "the network carries".
fn carrier(f: &Facts) -> &'static str {
    if f.net.is_some_and(|n| n.loopback) {
        "loopback TCP carries"
    } else {
        "the network carries"
    }
}

/// ", while the network carries 1.150 GB/s", when a network probe ran.
fn while_the_network(f: &Facts) -> String {
    f.m_net.map(|n| format!(", while {} {}", carrier(f), format_bytes_per_sec(n))).unwrap_or_default()
}

/// R2: the disk alone limits and fills its bus.
fn disk_fills_its_bus(f: &Facts) -> Option<Finding> {
    let m = limiting_disk(f)?;
    let b = at_ceiling(m, f.bus)?;
    let explanation = match (f.far_whose(), far_preamble(f)) {
        (Some(whose), Some(pre)) => format!("{pre}: {whose} bus ({}) is full, not its disk.", b.name),
        (Some(whose), None) => format!(
            "{} {} {whose} own disk{} run at {} of the {} ceiling ({}){}: {whose} bus, not its disk, is full.",
            f.what(),
            from_or_to(f),
            device_words(f),
            pct(m / b.bytes_per_sec),
            b.name,
            format_bytes_per_sec(b.bytes_per_sec),
            while_the_network(f)
        ),
        _ => format!(
            "{} run at {} of the {} ceiling ({}): the bus, not the disk, is full.",
            f.what(),
            pct(m / b.bytes_per_sec),
            b.name,
            format_bytes_per_sec(b.bytes_per_sec)
        ),
    };
    let mut found = Finding::new(Bottleneck::Bus, Some(Hop::Bus), Some(f.disk_side()), explanation);
    found.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
    headroom_beyond_the_disk(f, f.m_client.unwrap_or(m), &mut found);
    Some(found)
}

/// R3: the disk alone limits.
fn the_disk(f: &Facts) -> Option<Finding> {
    let m = limiting_disk(f)?;
    let what = f.what();
    let device = device_words(f);
    let of_bus = |b: &Ceiling| format!(", {} of its {} bus ceiling", pct(m / b.bytes_per_sec), b.name);
    let explanation = match (f.far_whose(), far_preamble(f)) {
        (Some(whose), Some(pre)) => format!("{pre}: {whose} disk is the bottleneck."),
        (Some(whose), None) => format!(
            "{what} {} {whose} own disk{device} run at {}{}{}: {whose} disk is the bottleneck.",
            from_or_to(f),
            format_bytes_per_sec(m),
            f.bus.map(of_bus).unwrap_or_default(),
            while_the_network(f)
        ),
        _ => match f.bus {
            Some(b) => format!(
                "{what} are limited by the disk{device} at {}, {} of its {} bus ceiling.",
                format_bytes_per_sec(m),
                pct(m / b.bytes_per_sec),
                b.name
            ),
            None => format!("{what} are limited by the disk{device} at {}.", format_bytes_per_sec(m)),
        },
    };
    let mut found = Finding::new(Bottleneck::Disk, Some(Hop::Disk), Some(f.disk_side()), explanation);
    found.percent_of_ceiling = f.bus.map(|b| m / b.bytes_per_sec * 100.0);
    if let Some(limit) = at_ceiling(m, f.disk_limit.as_ref()) {
        found.explanation = format!(
            "{} The disk runs at {} of the {} ({}), set by {}: the limit, not the device, is what was measured.",
            found.explanation,
            pct(m / limit.bytes_per_sec),
            limit.name,
            format_bytes_per_sec(limit.bytes_per_sec),
            limit.source.as_deref().unwrap_or("a cgroup")
        );
        found.percent_of_ceiling = Some(m / limit.bytes_per_sec * 100.0);
        found.checks.push(format!("the cgroup I/O limit ({}): raise or remove it to measure the device", limit.name));
    }
    headroom_beyond_the_disk(f, f.m_client.unwrap_or(m), &mut found);
    also_a_full_quota(f, f.disk_alone, "disk", &mut found);
    Some(found)
}

/// A disk figure from a disk a hypervisor presents may be the host's memory
/// (its page cache under QEMU's cache=writeback or unsafe): the check says
/// how to see the storage under it. Every rule's finding gets it.
pub(super) fn virtual_disk_check(f: &Facts, found: &mut Finding) {
    let Some(dev) = f.disk_device().filter(|d| crate::is_virtual_disk(d)) else { return };
    if f.m_disk.is_none() {
        return;
    }
    let whose = f.far_whose().map(|w| format!("{w} ")).unwrap_or_default();
    let (figure, how) = match f.dir {
        headroom_result::Direction::Read => ("reads", "use a --size over twice the host's RAM"),
        headroom_result::Direction::Write => ("writes", "use --sync fsync, or more data than the host's RAM"),
    };
    found.checks.push(format!(
        "the storage under {whose}{}, a virtual disk: its {figure} may have come from the hypervisor's host memory (cache=writeback or unsafe); {how}",
        dev.name
    ));
}

/// Writes whose disk-alone figure outran the same disk's reads (`reads`,
/// the read direction's disk alone) by [`crate::WRITES_OUTRAN_READS`]:
/// a write-back cache acknowledged them. Says so with both figures, and how
/// to measure what reaches the disk. Stronger evidence than the
/// virtual-disk check's "may", which it replaces (true when it said so).
pub(super) fn writes_outran_reads(f: &Facts, reads: Option<&Probe>, found: &mut Finding) -> bool {
    let (Some(writes), Some(reads)) = (f.disk_alone.filter(|_| f.dir == headroom_result::Direction::Write), reads)
    else {
        return false;
    };
    let (Some(outran), ProbeSpec::Disk(w)) = (crate::writes_outran_reads(reads, writes), &writes.spec) else {
        return false;
    };
    let whose = f.far_whose().map(|w| format!("{w} ")).unwrap_or_default();
    let disk = f.disk_device().map_or_else(|| format!("{whose}disk"), |d| format!("{whose}{}", d.name));
    let caches = if f.disk_device().is_some_and(crate::is_virtual_disk) {
        format!("the hypervisor's host memory, {disk} being a virtual disk")
    } else {
        "a RAID controller's, the drive's own, or a hypervisor's under a virtual disk".into()
    };
    found.explanation += &format!(
        " The writes ({}) outran the same disk's reads ({}) {}: no disk writes faster than it reads, so a write-back cache acknowledged them ({caches}) and what {disk} itself sustains is not known from this run.",
        format_bytes_per_sec(writes.summary.bytes_per_sec),
        format_bytes_per_sec(reads.summary.bytes_per_sec),
        factor(outran),
    );
    found.checks.push(crate::past_the_write_cache(&disk, &w.sync));
    true
}

/// What a client figure that outran the server's own disk means, added to
/// whichever rule named the limit: the server's memory answered, what the
/// disk itself gives, and how to measure without the cache.
pub(super) fn served_from_memory(f: &Facts, found: &mut Finding) {
    let (Some(d), Some(far), Some(m)) = (outran_the_far_disk(f), f.far, f.m_client) else { return };
    let host = &far.host;
    let ram = far.memory_bytes.map(|b| format!(" ({} of RAM)", headroom_units::format_size(b))).unwrap_or_default();
    let size_hint = far
        .memory_bytes
        .map(|b| format!("--size {}", headroom_units::format_size(b.saturating_mul(2))))
        .unwrap_or_else(|| "--size twice its RAM".into());
    let (what_happened, gets, check) = match f.dir {
        headroom_result::Direction::Read => (
            format!("{host} served them from its memory (page cache)"),
            "uncached reads",
            format!("uncached reads: a test file larger than {host}'s RAM{ram} ({size_hint}), or drop its page cache before the run (`sync; echo 3 > /proc/sys/vm/drop_caches` on {host})"),
        ),
        headroom_result::Direction::Write => (
            format!("{host}'s memory absorbed them (asynchronous writes or a write-back cache)"),
            "sustained or durable writes",
            format!("durable writes: --sync fsync or dsync, or more data than {host}'s RAM{ram} ({size_hint}) to pass its write cache"),
        ),
    };
    // A far disk probe that fell back to buffered I/O measured the page cache
    // too: its figure is no uncached rate to promise.
    let disk_was_cached = f
        .disk_alone
        .is_some_and(|p| p.warnings.iter().any(|w| w.code == headroom_result::WarningCode::PageCachePossible));
    let so = if disk_was_cached {
        format!("; {host}'s own disk figure went through its page cache as well (O_DIRECT was refused there), so what {gets} get is not known from this run")
    } else {
        format!(", so {gets} get about {}", format_bytes_per_sec(d))
    };
    found.explanation += &format!(
        " The {} outran {host}'s own disk ({}) {}: {what_happened}{so}.",
        f.what(),
        format_bytes_per_sec(d),
        factor(m / d),
    );
    found.checks.push(check);
}

/// R2's and R3's headroom: a faster disk brings its own bus, so the network
/// (when measured) is the next limit; without one, the current bus is.
fn headroom_beyond_the_disk(f: &Facts, m: f64, found: &mut Finding) {
    let what = f.what();
    let next = f
        .m_net
        .or(f.bus.filter(|_| found.bottleneck == Bottleneck::Disk).map(|b| b.bytes_per_sec))
        .unwrap_or(f64::INFINITY);
    if !next.is_finite() || next <= m {
        return;
    }
    let lifted = if found.bottleneck == Bottleneck::Bus { "a faster or wider bus" } else { "a faster disk" };
    let lifted_by = match f.far {
        Some(far) => format!("{lifted} in {}", far.host),
        None => lifted.to_string(),
    };
    found.headroom_factor = Some(next / m);
    let carrier = capitalise(carrier(f));
    found.headroom = Some(match f.m_net {
        Some(n) => {
            format!("{carrier} {}: {lifted_by} would raise {what} up to {}.", format_bytes_per_sec(n), factor(next / m))
        }
        None => format!("{} would raise {what} up to {}.", capitalise(&lifted_by), factor(next / m)),
    });
}

/// R4: the network (or client) figure reaches the lower of the NIC-slot and
/// link ceilings.
fn link_or_slot_full(f: &Facts) -> Option<Finding> {
    let what = f.what();
    match f.limiting? {
        Limiting::Net(m) => {
            let net = f.net?;
            let b = at_ceiling(m, f.net_bound)?;
            let slot = b.hop == Hop::Nic;
            let explanation = if slot {
                let nic_link =
                    net.nic.as_ref().and_then(|n| n.speed_mbps).and_then(headroom_limits::ethernet_by_speed_mbps);
                format!(
                    "{what} run at {} of the {} ({}), narrower than the {} port{}: the NIC's slot is the bottleneck.",
                    pct(m / b.bytes_per_sec),
                    b.name,
                    format_bytes_per_sec(b.bytes_per_sec),
                    nic_link.map(|l| l.name.clone()).unwrap_or_else(|| "network".into()),
                    f.link
                        .map(|l| format!(" (TCP ceiling {})", format_bytes_per_sec(l.bytes_per_sec)))
                        .unwrap_or_default()
                )
            } else {
                format!(
                    "{what} run at {} of the {} ceiling ({}): the link is full.",
                    pct(m / b.bytes_per_sec),
                    b.name,
                    format_bytes_per_sec(b.bytes_per_sec)
                )
            };
            let mut found = slot_or_link(slot, explanation);
            found.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
            headroom_beyond_the_network(f, m, slot, net.framing, &mut found);
            also_a_full_quota(f, f.net_probe, "link", &mut found);
            Some(found)
        }
        Limiting::Client(m) => {
            let b = at_ceiling(m, f.client_bound).filter(|b| b.hop != Hop::Protocol)?;
            let explanation = match far_preamble(f) {
                Some(pre) => format!(
                    "{pre}: the client runs at {} of the {} ceiling ({}), so the {} is the bottleneck.",
                    pct(m / b.bytes_per_sec),
                    b.name,
                    format_bytes_per_sec(b.bytes_per_sec),
                    if b.hop == Hop::Nic { "NIC's slot" } else { "link" }
                ),
                None => format!(
                    "{what} run at {} of the {} ceiling ({}).",
                    pct(m / b.bytes_per_sec),
                    b.name,
                    format_bytes_per_sec(b.bytes_per_sec)
                ),
            };
            let mut found = slot_or_link(b.hop == Hop::Nic, explanation);
            found.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
            also_a_full_quota(f, f.client, "link", &mut found);
            Some(found)
        }
        Limiting::Disk(_) => None,
    }
}

/// Two hops at their limit: a link (or slot, or a disk at its I/O limit) at
/// its ceiling wins over a CPU quota, but a quota that throttled the whole
/// test is said beside it, as the level rule says disk and network both:
/// lifting one alone gains nothing. `hop` names the one at its ceiling.
fn also_a_full_quota(f: &Facts, probe: Option<&Probe>, hop: &str, found: &mut Finding) {
    let server = f.far.map(|far| far.host.as_str());
    let Some(limit) = probe.and_then(|p| cpu_limits::fully_held_quota(p, server)) else { return };
    found.explanation = format!(
        "{} At the same time {}: both are at their limit, so a faster {hop} alone would not lift the figure.",
        found.explanation, limit.evidence
    );
    found.checks.extend(cpu_checks(Some(&limit), server, probe));
    found.cpu_limit = Some(limit);
}

/// The NIC's slot (a `bus` bottleneck on this machine's NIC) or the link.
fn slot_or_link(slot: bool, explanation: String) -> Finding {
    if slot {
        Finding::new(Bottleneck::Bus, Some(Hop::Nic), Some(Side::Local), explanation)
    } else {
        Finding::new(Bottleneck::Link, Some(Hop::Link), None, explanation)
    }
}

/// R4's headroom: what a faster link would give, up to the disk alone.
fn headroom_beyond_the_network(f: &Facts, m: f64, slot: bool, framing: headroom_limits::Framing, found: &mut Finding) {
    let what = f.what();
    let Some(disk) = f.m_disk.filter(|d| *d > m) else {
        return;
    };
    // A hostname keeps its case, even leading a sentence.
    let disk_alone = f.far_whose().map(|w| format!("{w} own disk")).unwrap_or_else(|| "The disk alone".into());
    if slot {
        let reach = f.link.map(|l| l.bytes_per_sec.min(disk)).unwrap_or(disk);
        found.headroom_factor = Some(reach / m);
        found.headroom = Some(format!(
            "{disk_alone} does {}: a slot as wide as the port would raise {what} up to {}.",
            format_bytes_per_sec(disk),
            factor(reach / m)
        ));
        return;
    }
    // The smallest Ethernet upgrade whose TCP ceiling reaches the disk, else the fastest.
    let current = f.link.map(|l| l.bytes_per_sec).unwrap_or(m);
    let mut tiers: Vec<(&str, f64)> = catalog()
        .iter()
        .filter(|l| l.family == Family::Ethernet)
        .map(|l| (l.name.as_str(), framing.tcp_goodput_bits(l.usable_bits_per_sec) / 8.0))
        .filter(|(_, goodput)| *goodput > current * 1.01)
        .collect();
    tiers.sort_by(|a, b| a.1.total_cmp(&b.1));
    let Some(&(name, goodput)) = tiers.iter().find(|(_, g)| *g >= disk).or(tiers.last()) else {
        return;
    };
    let reach = goodput.min(disk);
    found.headroom_factor = Some(reach / m);
    found.headroom = Some(format!(
        "{disk_alone} does {}: a {name} link would raise {what} up to {}.",
        format_bytes_per_sec(disk),
        factor(reach / m)
    ));
}

/// R7: the client figure reaches a noticeable protocol ceiling, or is well
/// below what the raw network carries.
fn the_storage_protocol(f: &Facts) -> Option<Finding> {
    let Some(Limiting::Client(m)) = f.limiting else { return None };
    let what = f.what();
    if let Some(b) = at_ceiling(m, f.client_bound) {
        if b.hop != Hop::Protocol {
            return None;
        }
        let mut found = Finding::new(
            Bottleneck::Protocol,
            Some(Hop::Protocol),
            None,
            format!(
                "{what} run at {} of the {} ceiling ({}): the protocol on the link is full.",
                pct(m / b.bytes_per_sec),
                b.name,
                format_bytes_per_sec(b.bytes_per_sec)
            ),
        );
        found.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
        return Some(found);
    }
    let n = f.m_net.filter(|n| m < n * AT_CEILING)?;
    let protocol = f.model.storage_protocol.clone().unwrap_or_default();
    let explanation = match (far_preamble(f), f.far) {
        // The server's own disk was measured and is not it (else R2/R3 spoke).
        // A client that outran it was served by the server's memory, not
        // that disk: no share of it to state (`served_from_memory` says why).
        (Some(pre), Some(_)) if outran_the_far_disk(f).is_some() => format!(
            "{pre}: the client gets {} of what the network carries, so the storage protocol ({protocol}) is the limit.",
            pct(m / n),
        ),
        (Some(pre), Some(far)) => format!(
            "{pre}: the client gets {} of what the network carries and {} of what {}'s disk does, so the storage protocol ({protocol}) is the limit.",
            pct(m / n),
            pct(m / f.m_disk.unwrap_or(f64::INFINITY)),
            far.host,
        ),
        _ => format!(
            "{what} through {protocol} run at {}, {} of what the network alone carries ({}): the storage protocol or the server's disk is the limit.",
            format_bytes_per_sec(m),
            pct(m / n),
            format_bytes_per_sec(n)
        ),
    };
    let mut found = Finding::new(Bottleneck::Protocol, Some(Hop::Protocol), None, explanation);
    found.percent_of_ceiling = f.client_bound.map(|b| m / b.bytes_per_sec * 100.0);
    if f.far.is_none() {
        found.checks.push("the server's disk: run `headroom disk` on the server".into());
    }
    found.checks.extend([
        "sync writes (NFS sync, ZFS sync=always) and the rsize/wsize or MaxRecvDataSegmentLength".into(),
        "protocol encryption or signing (SMB3, krb5p) costs CPU".into(),
    ]);
    found.headroom_factor = Some(n / m);
    found.headroom = Some(format!("Fixing it would raise {what} up to {}.", factor(n / m)));
    Some(found)
}

/// Evidence that a CPU limits a figure: a limit measured on either end during
/// the probe (docs/verdict.md, "CPU limits"), else a CPU (kernel) ceiling the
/// figure reaches. Over loopback every stream is a memory copy at a full
/// core, so only a quota or steal counts there (R6 speaks). A bare percent of
/// one core (CpuLimitKind::Busy) is weaker evidence than a kernel ceiling.
fn cpu_evidence(
    m: f64,
    probe: Option<&Probe>,
    kernel_ceiling: Option<&Ceiling>,
    loopback: bool,
    server: Option<&str>,
) -> Option<(String, Option<CpuLimit>)> {
    let found = probe
        .and_then(|p| cpu_limits::cpu_limit_named(p, server))
        .filter(|l| !loopback || cpu_limits::is_machine_limit(l));
    if let Some(l) = found.clone().filter(|l| l.kind != CpuLimitKind::Busy) {
        return Some((l.evidence.clone(), Some(l)));
    }
    if let Some(cc) = at_ceiling(m, kernel_ceiling) {
        return Some((
            format!("the CPU: the CPU ceiling {} ({})", cc.name, format_bytes_per_sec(cc.bytes_per_sec)),
            None,
        ));
    }
    found.map(|l| (l.evidence.clone(), Some(l)))
}

/// R5: below its physical ceiling, and a CPU on either end shows the limit.
fn a_cpu(f: &Facts) -> Option<Finding> {
    let what = f.what();
    let server = f.far.map(|far| far.host.as_str());
    let (m, probe, share, loopback) = match f.limiting? {
        Limiting::Net(m) => (m, f.net_probe, f.net_bound, f.net.is_some_and(|n| n.loopback)),
        Limiting::Client(m) => (m, f.client, None, false),
        Limiting::Disk(_) => return None,
    };
    // A loopback TCP stream runs no cipher or digest, so a kernel's ceiling
    // is no evidence against it.
    let kernel_ceiling = f.cpu.filter(|_| !loopback);
    let (evidence, limit) = cpu_evidence(m, probe, kernel_ceiling, loopback, server)?;
    let of_ceiling =
        share.map(|b| format!(", {} of the {} ceiling", pct(m / b.bytes_per_sec), b.name)).unwrap_or_default();
    let side = limit.as_ref().map_or(Side::Local, |l| l.side);
    let mut found = Finding::new(
        Bottleneck::Cpu,
        Some(Hop::Cpu),
        Some(side),
        format!("{what} run at {}{of_ceiling}, limited by {evidence}.", format_bytes_per_sec(m)),
    );
    found.percent_of_ceiling = share.map(|b| m / b.bytes_per_sec * 100.0);
    found.checks = cpu_checks(limit.as_ref(), f.far.map(|far| far.host.as_str()), probe);
    found.cpu_limit = limit;
    Some(found)
}

/// R5 with the far end measured, tried before the level and disk rules:
/// the lowest figure's own probe shows a CPU limit on its end. The server's
/// own disk figure with the server's CPU at a limit (a quota, steal, a full
/// core); a network figure with either end's CPU at a limit (not a bare
/// percent, nor a kernel ceiling: those keep R5's place after R4 and R7); a
/// client's figure over the share, below every ceiling, with a CPU limit on
/// either end. The CPU, not the disk or the link it drives, is named, even
/// when disk and network are level (one quota can hold both).
fn the_far_ends_cpu(f: &Facts) -> Option<Finding> {
    let Some(far) = f.far else { return a_share_servers_cpu(f) };
    let what = f.what();
    if let Limiting::Net(m) = f.limiting? {
        // A link at its ceiling is full whatever the CPUs did (R4).
        if at_ceiling(m, f.net_bound).is_some() {
            return None;
        }
        let mut found = a_cpu(f)?;
        let limit = found.cpu_limit.clone().filter(|l| l.kind != CpuLimitKind::Busy)?;
        let whose = match limit.side {
            Side::Remote => format!("{}'s CPU", far.host),
            Side::Local => "this machine's CPU".to_string(),
        };
        found.explanation = format!(
            "{}; {}'s own disk{} does {}: {whose} is the bottleneck.",
            found.explanation.trim_end_matches('.'),
            far.host,
            device_words(f),
            format_bytes_per_sec(f.m_disk?)
        );
        return Some(found);
    }
    let (limit, explanation, probe) = match f.limiting? {
        Limiting::Disk(d) => {
            // A disk that fills its bus is the bus's (R2), one at its cgroup
            // I/O limit the limit's (R3), however throttled the CPU was.
            if at_ceiling(d, f.bus).is_some() || at_ceiling(d, f.disk_limit.as_ref()).is_some() {
                return None;
            }
            let limit = f.disk_alone.and_then(|p| cpu_limits::cpu_limit_named(p, Some(&far.host)))?;
            let explanation = format!(
                "{what} {} {}'s own disk{} run at {}, limited by {}{}: {}'s CPU is the bottleneck.",
                from_or_to(f),
                far.host,
                device_words(f),
                format_bytes_per_sec(d),
                limit.evidence,
                while_the_network(f),
                far.host
            );
            (Some(limit), explanation, f.disk_alone)
        }
        Limiting::Client(m) => {
            if at_ceiling(m, f.client_bound).is_some() {
                return None;
            }
            let (evidence, limit) = cpu_evidence(m, f.client, f.cpu, false, Some(&far.host))?;
            let whose = match &limit {
                Some(l) if l.side == Side::Remote => format!("{}'s CPU", far.host),
                Some(_) => "this machine's CPU".to_string(),
                None => "the CPU".to_string(),
            };
            let pre = far_preamble(f)?;
            (limit, format!("{pre}, and {evidence}: {whose} is the bottleneck."), f.client)
        }
        Limiting::Net(_) => return None,
    };
    let side = limit.as_ref().map_or(Side::Local, |l| l.side);
    let mut found = Finding::new(Bottleneck::Cpu, Some(Hop::Cpu), Some(side), explanation);
    found.checks = cpu_checks(limit.as_ref(), f.far.map(|far| far.host.as_str()), probe);
    found.cpu_limit = limit;
    Some(found)
}

/// R5 without the server's own disk: a share whose server (a headroom serve,
/// watched during the share's probes) was held by a CPU limit of its own (a
/// quota, steal, or a daemon's thread at a full core; not a bare busy
/// figure) while the network carried more. Named before the storage
/// protocol (R7), which would otherwise take the blame.
fn a_share_servers_cpu(f: &Facts) -> Option<Finding> {
    let Some(Limiting::Client(m)) = f.limiting else { return None };
    if at_ceiling(m, f.client_bound).is_some() {
        return None;
    }
    let n = f.m_net.filter(|n| m < n * AT_CEILING)?;
    let server = f.net_probe.and_then(|p| match &p.spec {
        ProbeSpec::Net(spec) => Some(crate::ceilings::peer_host(&spec.peer).to_string()),
        _ => None,
    })?;
    let limit = f
        .client
        .and_then(|p| cpu_limits::cpu_limit_named(p, Some(&server)))
        .filter(|l| l.side == Side::Remote && l.kind != CpuLimitKind::Busy)?;
    let protocol = f.model.storage_protocol.clone().unwrap_or_default();
    let explanation = format!(
        "{} through {protocol} run at {}, {} of what the network alone carries ({}), limited by {}: {server}'s CPU is the bottleneck.",
        f.what(),
        format_bytes_per_sec(m),
        pct(m / n),
        format_bytes_per_sec(n),
        limit.evidence
    );
    let mut found = Finding::new(Bottleneck::Cpu, Some(Hop::Cpu), Some(Side::Remote), explanation);
    found.checks = cpu_checks(Some(&limit), Some(&server), f.client);
    found.checks.push("the server's disk: add --remote-path DIR to measure it too".into());
    found.cpu_limit = Some(limit);
    Some(found)
}

/// R6: loopback has no wire; what limits it is memory copies.
fn loopback(f: &Facts) -> Option<Finding> {
    let Some(Limiting::Net(m)) = f.limiting else { return None };
    f.net.filter(|n| n.loopback)?;
    Some(Finding::new(
        Bottleneck::Cpu,
        Some(Hop::Cpu),
        Some(Side::Local),
        format!(
            "{} over loopback run at {}: no wire is involved, so the CPU copying memory is the limit.",
            f.what(),
            format_bytes_per_sec(m)
        ),
    ))
}

/// R8: nothing reaches a ceiling and nothing explains why.
fn unexplained(f: &Facts) -> Option<Finding> {
    let (m, bound, part) = match f.limiting? {
        Limiting::Net(m) => (m, f.net_bound, "network"),
        Limiting::Client(m) => (m, f.client_bound, "client"),
        Limiting::Disk(_) => return None,
    };
    let what = f.what();
    let mut found = match bound {
        Some(b) => {
            let mut found = Finding::new(
                Bottleneck::Unexplained,
                None,
                None,
                format!(
                    "unexplained: {what} run at {}, {:.0}% below the lowest ceiling ({}, {}) — here is what to check.",
                    format_bytes_per_sec(m),
                    (1.0 - m / b.bytes_per_sec) * 100.0,
                    b.name,
                    format_bytes_per_sec(b.bytes_per_sec)
                ),
            );
            found.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
            found
        }
        None => Finding::new(
            Bottleneck::Unexplained,
            None,
            None,
            format!(
                "unexplained: {what} run at {} and no ceiling is known for the {part} path (pass --link SPEC) — here is what to check.",
                format_bytes_per_sec(m)
            ),
        ),
    };
    found.checks = vec![
        "duplex and negotiated speed (ethtool IFACE): a half-duplex or 100 Mb/s port".into(),
        "errors, drops and carrier changes (ip -s link; headroom sys)".into(),
        "retransmits and TCP windows: a small receive window or a lossy path".into(),
        "a USB NIC, a switch port or a cable that negotiated lower".into(),
        "CPU: run `headroom cpu` and watch one core during the test (top -H)".into(),
        "the server side: is its disk or its CPU busy?".into(),
    ];
    if let (Limiting::Net(_), Some(net)) = (f.limiting?, f.net) {
        if bound.is_none() && net.nic.as_ref().is_none_or(|n| n.kind == headroom_result::NicKind::Virtual) {
            virtual_link(&mut found, what, m, net.nic.as_ref().map(|n| n.name.as_str()));
        }
        if let Some(why) = f.net_probe.and_then(Probe::why) {
            found.checks.insert(0, format!("the probe's own diagnosis: {why}"));
        }
    }
    Some(found)
}

/// R8 over a virtual NIC (veth, virtio, a bridge) with no `--link`: there is
/// no physical ceiling to hold the figure against, so the cable checklist
/// does not apply; say how to give one.
fn virtual_link(found: &mut Finding, what: &str, m: f64, nic: Option<&str>) {
    let over = nic.map(|n| format!(" over {n}")).unwrap_or_default();
    found.explanation = format!(
        "{what} run at {}{over}, a virtual link (veth, virtio, a bridge) with no physical ceiling here: nothing can be held against it. Pass --link with the slowest physical link between the two ends (e.g. --link 10gbe, --link 2.5gbe, --link 940Mb/s) for a verdict.",
        format_bytes_per_sec(m)
    );
    found.checks = vec![
        "--link SPEC: the physical link the traffic crosses (the host's NIC, the switch port)".into(),
        "CPU of both ends: a virtual link runs as fast as the CPUs copy (headroom net shows each end's cores and threads)".into(),
        "the server side: is its disk or its CPU busy?".into(),
    ];
}

/// R5's checks: what lifts the CPU limit that was found in `probe`; the
/// server by its hostname when the far end is known. A disk test spreads
/// over more jobs, a network test over more streams; NIC offloads matter
/// only where a network is crossed.
fn cpu_checks(limit: Option<&CpuLimit>, server: Option<&str>, probe: Option<&Probe>) -> Vec<String> {
    let owner = |l: &CpuLimit| match (l.side, server) {
        (Side::Remote, Some(name)) => name.to_string(),
        (side, _) => side.owner().to_string(),
    };
    let (spread, crosses_a_network) = match probe.map(|p| &p.spec) {
        Some(ProbeSpec::Disk(d)) => {
            ("more jobs (headroom disk --jobs 4) spread the I/O over more cores", d.protocol.is_some())
        }
        _ => ("more streams (--streams 4) spread the work over more cores", true),
    };
    let spread = spread.to_string();
    let offloads =
        crosses_a_network.then(|| "NIC offloads (ethtool -k: tso, gso, gro) and interrupt coalescing".to_string());
    match limit {
        Some(l) if l.kind == CpuLimitKind::Quota => vec![format!(
            "raise or remove the CPU quota of {}'s cgroup (cpu.cfs_quota_us or cpu.max; a container's --cpus, a systemd CPUQuota=)",
            owner(l)
        )],
        Some(l) if l.kind == CpuLimitKind::Steal => vec![format!(
            "the hypervisor under {}: other guests on the host, the VM's CPU limit or reservation",
            owner(l)
        )],
        Some(l) if l.kind == CpuLimitKind::Shared => vec![format!(
            "what else runs on {} (top -H; the processes named above): move it, or give the file-server daemon a core of its own (taskset, a cpuset, CPUAffinity= in its systemd unit)",
            owner(l)
        )],
        Some(l) if l.kind == CpuLimitKind::Softirq => [
            Some(format!(
                "spread {}'s packet processing over more cores: NIC queues and RSS (ethtool -L), RPS/RFS, irqbalance",
                owner(l)
            )),
            offloads,
        ]
        .into_iter()
        .flatten()
        .collect(),
        Some(l) => {
            let whose = match (l.side, server) {
                (Side::Remote, Some(name)) => format!("{name}'s"),
                (side, _) => capitalise(side.owner()),
            };
            [Some(format!("{whose} CPU: {spread}")), offloads].into_iter().flatten().collect()
        }
        None => [Some(spread), offloads, Some("a CPU with AES-NI/VAES for encrypted protocols".into())]
            .into_iter()
            .flatten()
            .collect(),
    }
}
