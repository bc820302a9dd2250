//! The bottleneck verdict: for reads and for writes, the chain of hops
//! (disk -> bus -> NIC -> link -> protocol -> client) with each hop's ceiling
//! and measured figure, the hop that limits the path, and the headroom left.
//!
//! Every rule here is written down, in the same order, in docs/verdict.md;
//! each has a test built from a stored result document
//! (tests/fixtures/*.json). Reads only the document and the limits model.

use crate::ceilings::{self, hop, PathHints, PathModel};
use crate::cpu_limits::{self, CpuLimit, CpuLimitKind};
use headroom_limits::{catalog, Family};
use headroom_result::{Ceiling, Probe, ProbeSpec, ResultDoc, Verdict};
use headroom_units::format_bytes_per_sec;
use serde::{Deserialize, Serialize};

/// A measured figure at or above this share of a ceiling runs *at* the ceiling
/// (TLP headers, ACKs and timer slack make 100% unreachable).
pub const AT_CEILING: f64 = 0.85;
/// A measured figure above this multiple of a ceiling is faster than physics:
/// a cache, compression or a wrong ceiling.
pub const ABOVE_CEILING: f64 = 1.05;
/// A protocol ceiling this share of the link's or lower is a hop of its own.
pub const PROTOCOL_NOTICEABLE: f64 = 0.98;
pub use crate::cpu_limits::CPU_BUSY_PERCENT;
/// Disk and network figures closer than this share (or than the spread of
/// their per-second samples, when wider) are level: neither alone limits.
pub const LEVEL_WITHIN: f64 = 0.05;

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Read,
    Write,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }
    fn plural(self) -> &'static str {
        match self {
            Direction::Read => "reads",
            Direction::Write => "writes",
        }
    }
}

/// The hop that limits a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bottleneck {
    Disk,
    Bus,
    Link,
    Protocol,
    Cpu,
    /// Faster than a ceiling allows: a cache, compression or a wrong ceiling.
    Cache,
    /// Disk and network within the noise of each other: no single bottleneck.
    Level,
    Unexplained,
}

impl Bottleneck {
    pub fn as_str(self) -> &'static str {
        match self {
            Bottleneck::Disk => "disk",
            Bottleneck::Bus => "bus",
            Bottleneck::Link => "link",
            Bottleneck::Protocol => "protocol",
            Bottleneck::Cpu => "cpu",
            Bottleneck::Cache => "cache",
            Bottleneck::Level => "level",
            Bottleneck::Unexplained => "unexplained",
        }
    }
}

/// One hop of the chain with what could pass and what did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopFigure {
    /// disk, bus, nic, link, protocol, client or cpu.
    pub hop: String,
    /// What it is: `vda`, `PCIe 3.0 x4 of nvme0n1`, `1GbE TCP (MTU 1500)`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_bytes_per_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_bytes_per_sec: Option<f64>,
    /// The probe that measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
}

/// The verdict for one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionVerdict {
    pub direction: Direction,
    pub hops: Vec<HopFigure>,
    /// What the path delivers end to end, bytes/s.
    pub figure_bytes_per_sec: f64,
    pub bottleneck: Bottleneck,
    /// The rule of docs/verdict.md that decided (R1..R9).
    pub rule: String,
    /// The figure as a share of the bottleneck's ceiling, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_of_ceiling: Option<f64>,
    /// One sentence: what limits, and by how much.
    pub explanation: String,
    /// What lifting the bottleneck would give ("a 10GbE link would raise reads up to 4.9x").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<String>,
    /// Upper bound of the gain from lifting the bottleneck, as a factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_factor: Option<f64>,
    /// What to look at, for unexplained and suspicious results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
}

/// The whole analysis of a document: ceilings and a verdict per direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub model: PathModel,
    pub directions: Vec<DirectionVerdict>,
}

impl Analysis {
    /// The document's `verdict` object: the bottleneck of reads (else writes),
    /// both explanations, and the per-direction detail.
    pub fn to_verdict(&self) -> Option<Verdict> {
        let first = self.directions.first()?;
        // One word for the document: the reads' bottleneck (writes when only
        // writes ran); each direction's own is in `directions`.
        let bottleneck = first.bottleneck.as_str().to_string();
        let explanation = self
            .directions
            .iter()
            .map(|d| match &d.headroom {
                Some(h) => format!("{} {}", d.explanation, h),
                None => d.explanation.clone(),
            })
            .collect::<Vec<_>>()
            .join(" ");
        Some(Verdict {
            bottleneck,
            explanation,
            directions: self.directions.iter().map(|d| serde_json::to_value(d).expect("serialisable")).collect(),
        })
    }
}

/// Derives ceilings and the verdict of a document.
pub fn analyse(doc: &ResultDoc, hints: &PathHints) -> Result<Analysis, ceilings::BadLinkSpec> {
    let model = ceilings::derive(doc, hints)?;
    let directions =
        [Direction::Read, Direction::Write].into_iter().filter_map(|d| direction_verdict(doc, &model, d)).collect();
    Ok(Analysis { model, directions })
}

/// Fills `doc.ceilings` and `doc.verdict` from its own content, and settles
/// each TCP probe's one-line diagnosis against the link ceiling
/// ([`cpu_limits::settle_diagnosis`]).
pub fn annotate(doc: &mut ResultDoc, hints: &PathHints) -> Result<Analysis, ceilings::BadLinkSpec> {
    let model = ceilings::derive(doc, hints)?;
    let link = model.ceiling(hop::LINK).map(|c| c.bytes_per_sec);
    for probe in doc.probes.iter_mut().filter(|p| matches!(&p.spec, ProbeSpec::Net(n) if n.test.starts_with("tcp"))) {
        let directions = if matches!(&probe.spec, ProbeSpec::Net(n) if n.test == "tcp_bidir") { 2.0 } else { 1.0 };
        let at_ceiling = link.is_some_and(|l| probe.summary.bytes_per_sec >= l * directions * AT_CEILING);
        cpu_limits::settle_diagnosis(probe, at_ceiling);
    }
    let analysis = analyse(doc, hints)?;
    doc.ceilings = analysis.model.ceilings.clone();
    doc.verdict = analysis.to_verdict();
    Ok(analysis)
}

/// The best sequential disk probe of a direction (the one that shows what the device can do).
fn best_disk_probe(doc: &ResultDoc, dir: Direction) -> Option<&Probe> {
    doc.probes
        .iter()
        .filter(|p| matches!(&p.spec, ProbeSpec::Disk(d) if d.rw == dir.as_str()))
        .max_by(|a, b| a.summary.bytes_per_sec.total_cmp(&b.summary.bytes_per_sec))
}

/// The best TCP probe of a direction: reads are server-to-client (`tcp_reverse`).
fn best_net_probe(doc: &ResultDoc, dir: Direction) -> Option<&Probe> {
    let test = match dir {
        Direction::Read => "tcp_reverse",
        Direction::Write => "tcp",
    };
    doc.probes
        .iter()
        .filter(|p| matches!(&p.spec, ProbeSpec::Net(n) if n.test == test))
        .max_by(|a, b| a.summary.bytes_per_sec.total_cmp(&b.summary.bytes_per_sec))
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn rate(bytes: f64) -> String {
    format_bytes_per_sec(bytes)
}

fn factor(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.1}x")
    }
}

/// The verdict of one direction, or None when nothing measured it.
fn direction_verdict(doc: &ResultDoc, model: &PathModel, dir: Direction) -> Option<DirectionVerdict> {
    let disk_probe = best_disk_probe(doc, dir);
    let net_probe = best_net_probe(doc, dir);
    if disk_probe.is_none() && net_probe.is_none() {
        return None;
    }
    // A disk probe over NFS/SMB/iSCSI measures the client end of the path; a
    // local one measures the disk alone.
    let over_network = model.storage_protocol.is_some();
    let (disk_alone, client) = if over_network { (None, disk_probe) } else { (disk_probe, None) };
    let bus = model.ceiling(hop::BUS);
    let nic = model.ceiling(hop::NIC);
    let link = model.ceiling(hop::LINK);
    let protocol = model.ceiling(hop::PROTOCOL);
    let cpu = model.ceiling(hop::CPU);
    let net = model.network.as_ref();

    let mut hops = Vec::new();
    let push =
        |hops: &mut Vec<HopFigure>, hop: &str, name: String, ceiling: Option<&Ceiling>, probe: Option<&Probe>| {
            hops.push(HopFigure {
                hop: hop.into(),
                name: ceiling.map(|c| c.name.clone()).unwrap_or(name),
                ceiling_bytes_per_sec: ceiling.map(|c| c.bytes_per_sec),
                measured_bytes_per_sec: probe.map(|p| p.summary.bytes_per_sec),
                probe: probe.map(|p| p.id.clone()),
            });
        };
    if !over_network {
        let device = model.block_device.as_ref().map(|d| d.name.clone());
        if disk_alone.is_some() || device.is_some() {
            push(&mut hops, hop::DISK, device.unwrap_or_else(|| "disk".into()), None, disk_alone);
        }
        if bus.is_some() {
            push(&mut hops, hop::BUS, String::new(), bus, None);
        }
    }
    if let Some(net) = net {
        if net.loopback {
            push(&mut hops, hop::LINK, "loopback (memory copy, no wire)".into(), None, net_probe);
        } else {
            let nic_name = net.nic.as_ref().map(|n| n.name.clone()).unwrap_or_else(|| "NIC".into());
            if nic.is_some() || net.nic.is_some() {
                push(&mut hops, hop::NIC, nic_name, nic, None);
            }
            push(&mut hops, hop::LINK, "link (speed unknown: pass --link)".into(), link, net_probe);
        }
    }
    if over_network {
        push(&mut hops, hop::PROTOCOL, model.storage_protocol.clone().unwrap_or_default(), protocol, None);
        push(&mut hops, "client", "client".into(), None, client);
    }
    if let Some(c) = cpu {
        push(&mut hops, hop::CPU, String::new(), Some(c), None);
    }

    let m_disk = disk_alone.map(|p| p.summary.bytes_per_sec);
    let m_net = net_probe.map(|p| p.summary.bytes_per_sec);
    let m_client = client.map(|p| p.summary.bytes_per_sec);
    let c = |x: Option<&Ceiling>| x.map(|c| c.bytes_per_sec);
    // The lowest physical ceiling of the network part (NIC slot, link).
    let net_bound: Option<&Ceiling> =
        [nic, link].into_iter().flatten().min_by(|a, b| a.bytes_per_sec.total_cmp(&b.bytes_per_sec));
    let figure = m_client.unwrap_or_else(|| [m_disk, m_net].into_iter().flatten().fold(f64::INFINITY, f64::min));

    let mut v = DirectionVerdict {
        direction: dir,
        hops,
        figure_bytes_per_sec: figure,
        bottleneck: Bottleneck::Unexplained,
        rule: String::new(),
        percent_of_ceiling: None,
        explanation: String::new(),
        headroom: None,
        headroom_factor: None,
        checks: Vec::new(),
    };
    let what = dir.plural();

    // R1: faster than a ceiling: a cache (or compression, or a wrong ceiling).
    let above = |m: Option<f64>, ceil: Option<&Ceiling>| match (m, ceil) {
        (Some(m), Some(c)) if m > c.bytes_per_sec * ABOVE_CEILING => Some((m, c.clone())),
        _ => None,
    };
    // The protocol counts as its own hop only when its overhead is noticeable
    // (PROTOCOL_NOTICEABLE below the link); else the link is the limit.
    let protocol_hop =
        protocol.filter(|p| link.is_none_or(|l| p.bytes_per_sec < l.bytes_per_sec * PROTOCOL_NOTICEABLE));
    let client_bound =
        [net_bound, protocol_hop].into_iter().flatten().min_by(|a, b| a.bytes_per_sec.total_cmp(&b.bytes_per_sec));
    if let Some((m, ceil)) =
        above(m_disk, bus).or_else(|| above(m_net, net_bound)).or_else(|| above(m_client, client_bound))
    {
        v.bottleneck = Bottleneck::Cache;
        v.rule = "R1".into();
        v.percent_of_ceiling = Some(m / ceil.bytes_per_sec * 100.0);
        v.explanation = format!(
            "{what} measured {} — {} of the {} ceiling ({}): faster than the hop can carry, so a cache, compression or a wrong ceiling is in play, not the hardware.",
            rate(m),
            pct(m / ceil.bytes_per_sec),
            ceil.name,
            rate(ceil.bytes_per_sec)
        );
        v.checks = vec![
            "disk: use O_DIRECT (direct=true) and a test file larger than RAM and the controller cache".into(),
            "writes: the device or a RAID controller may have a write-back cache; run longer to see the cliff".into(),
            "network: is the data compressible, or is --link slower than the real link?".into(),
        ];
        return Some(v);
    }

    // Which measured figure limits the path: the client figure when there is
    // one, else the lower of disk-alone and network.
    enum Limiting {
        Disk(f64),
        Net(f64),
        Client(f64),
    }
    let limiting = if let Some(m) = m_client {
        Limiting::Client(m)
    } else if let Some((d, n)) = m_disk.zip(m_net).filter(|(d, n)| level(*d, *n, disk_alone, net_probe)) {
        // R9: disk and network within the noise of each other.
        let apart = (d - n).abs() / d.max(n);
        v.bottleneck = Bottleneck::Level;
        v.rule = "R9".into();
        v.explanation = format!(
            "{what}: the disk alone ({}) and the network ({}) are level, {:.0}% apart, within the noise of their samples: neither alone is the bottleneck, and raising one gains little until the other rises too.",
            rate(d),
            rate(n),
            apart * 100.0
        );
        return Some(v);
    } else {
        match (m_disk, m_net) {
            (Some(d), Some(n)) if d <= n => Limiting::Disk(d),
            (Some(d), None) => Limiting::Disk(d),
            (_, Some(n)) => Limiting::Net(n),
            (None, None) => return None,
        }
    };

    // Evidence that a CPU limits a figure: a limit measured on either end
    // during the probe (docs/verdict.md, "CPU limits"), else a CPU (kernel)
    // ceiling the figure reaches. Over loopback every stream is a memory copy
    // at a full core, so only a quota or steal counts there (R6 speaks).
    // A bare percent of one core (CpuLimitKind::Busy) is weaker evidence than a kernel ceiling.
    let cpu_evidence = |m: f64, probe: Option<&Probe>, kernel_ceiling: Option<&Ceiling>, loopback: bool| {
        let found = probe.and_then(cpu_limits::cpu_limit).filter(|l| !loopback || cpu_limits::is_machine_limit(l));
        if let Some(l) = found.clone().filter(|l| l.kind != CpuLimitKind::Busy) {
            return Some((l.evidence.clone(), Some(l)));
        }
        if let Some(cc) = kernel_ceiling.filter(|cc| m >= cc.bytes_per_sec * AT_CEILING) {
            return Some((format!("the CPU: the CPU ceiling {} ({})", cc.name, rate(cc.bytes_per_sec)), None));
        }
        found.map(|l| (l.evidence.clone(), Some(l)))
    };

    match limiting {
        Limiting::Disk(m) => {
            // R2: the disk saturates its bus link.
            if let Some(b) = bus.filter(|b| m >= b.bytes_per_sec * AT_CEILING) {
                v.bottleneck = Bottleneck::Bus;
                v.rule = "R2".into();
                v.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
                v.explanation = format!(
                    "{what} run at {} of the {} ceiling ({}): the bus, not the disk, is full.",
                    pct(m / b.bytes_per_sec),
                    b.name,
                    rate(b.bytes_per_sec)
                );
            } else {
                // R3: the disk itself.
                v.bottleneck = Bottleneck::Disk;
                v.rule = "R3".into();
                v.percent_of_ceiling = bus.map(|b| m / b.bytes_per_sec * 100.0);
                let device = model.block_device.as_ref().map(|d| format!(" ({})", d.name)).unwrap_or_default();
                v.explanation = match bus {
                    Some(b) => format!(
                        "{what} are limited by the disk{device} at {}, {} of its {} bus ceiling.",
                        rate(m),
                        pct(m / b.bytes_per_sec),
                        b.name
                    ),
                    None => format!("{what} are limited by the disk{device} at {}.", rate(m)),
                };
            }
            // A faster disk brings its own bus, so the network (when measured)
            // is the next limit; without one, the current bus is.
            let next = m_net
                .or(bus.filter(|_| v.bottleneck == Bottleneck::Disk).map(|b| b.bytes_per_sec))
                .unwrap_or(f64::INFINITY);
            if next.is_finite() && next > m {
                let lifted_by = if v.bottleneck == Bottleneck::Bus { "a faster or wider bus" } else { "a faster disk" };
                v.headroom_factor = Some(next / m);
                let carrier =
                    if net.is_some_and(|n| n.loopback) { "Loopback TCP carries" } else { "The network carries" };
                v.headroom = Some(match m_net {
                    Some(n) => {
                        format!("{carrier} {}: {lifted_by} would raise {what} up to {}.", rate(n), factor(next / m))
                    }
                    None => format!("{} would raise {what} up to {}.", capitalise(lifted_by), factor(next / m)),
                });
            }
        }
        Limiting::Net(m) => {
            let net = net.expect("a net probe implies a network path");
            match net_bound {
                // R4: the link (or the NIC's slot) is full.
                Some(b) if m >= b.bytes_per_sec * AT_CEILING => {
                    let slot = b.hop == hop::NIC;
                    v.bottleneck = if slot { Bottleneck::Bus } else { Bottleneck::Link };
                    v.rule = "R4".into();
                    v.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
                    v.explanation = if slot {
                        let nic_link = net
                            .nic
                            .as_ref()
                            .and_then(|n| n.speed_mbps)
                            .and_then(headroom_limits::ethernet_by_speed_mbps);
                        format!(
                            "{what} run at {} of the {} ({}), narrower than the {} port{}: the NIC's slot is the bottleneck.",
                            pct(m / b.bytes_per_sec),
                            b.name,
                            rate(b.bytes_per_sec),
                            nic_link.map(|l| l.name.clone()).unwrap_or_else(|| "network".into()),
                            c(link).map(|l| format!(" (TCP ceiling {})", rate(l))).unwrap_or_default()
                        )
                    } else {
                        format!(
                            "{what} run at {} of the {} ceiling ({}): the link is full.",
                            pct(m / b.bytes_per_sec),
                            b.name,
                            rate(b.bytes_per_sec)
                        )
                    };
                    headroom_beyond_network(&mut v, m, m_disk, slot, net.framing, link);
                }
                _ => {
                    // A loopback TCP stream runs no cipher or digest, so a
                    // kernel's ceiling is no evidence against it.
                    let kernel_ceiling = cpu.filter(|_| !net.loopback);
                    if let Some((evidence, limit)) = cpu_evidence(m, net_probe, kernel_ceiling, net.loopback) {
                        // R5: CPU.
                        v.bottleneck = Bottleneck::Cpu;
                        v.rule = "R5".into();
                        v.percent_of_ceiling = net_bound.map(|b| m / b.bytes_per_sec * 100.0);
                        v.explanation = format!(
                            "{what} run at {}{}, limited by {evidence}.",
                            rate(m),
                            net_bound
                                .map(|b| format!(", {} of the {} ceiling", pct(m / b.bytes_per_sec), b.name))
                                .unwrap_or_default()
                        );
                        v.checks = cpu_checks(limit.as_ref());
                    } else if net.loopback {
                        // R6: loopback has no wire; what limits it is memory copies.
                        v.bottleneck = Bottleneck::Cpu;
                        v.rule = "R6".into();
                        v.explanation = format!("{what} over loopback run at {}: no wire is involved, so the CPU copying memory is the limit.", rate(m));
                    } else {
                        unexplained(&mut v, m, net_bound, "network");
                        if net_bound.is_none() && net.nic.as_ref().is_none_or(|n| n.kind == "virtual") {
                            virtual_link(&mut v, m, net.nic.as_ref().map(|n| n.name.as_str()));
                        }
                        if let Some(why) = net_probe.and_then(|p| p.details.get("why")).and_then(|w| w.as_str()) {
                            v.checks.insert(0, format!("the probe's own diagnosis: {why}"));
                        }
                    }
                }
            }
        }
        Limiting::Client(m) => {
            let bound = client_bound;
            match bound {
                // R4/R7: the client figure reaches the link or the protocol ceiling.
                Some(b) if m >= b.bytes_per_sec * AT_CEILING => {
                    v.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
                    if b.hop == hop::PROTOCOL {
                        v.bottleneck = Bottleneck::Protocol;
                        v.rule = "R7".into();
                        v.explanation = format!(
                            "{what} run at {} of the {} ceiling ({}): the protocol on the link is full.",
                            pct(m / b.bytes_per_sec),
                            b.name,
                            rate(b.bytes_per_sec)
                        );
                    } else {
                        v.bottleneck = if b.hop == hop::NIC { Bottleneck::Bus } else { Bottleneck::Link };
                        v.rule = "R4".into();
                        v.explanation = format!(
                            "{what} run at {} of the {} ceiling ({}).",
                            pct(m / b.bytes_per_sec),
                            b.name,
                            rate(b.bytes_per_sec)
                        );
                    }
                }
                _ => {
                    // The raw network does better than the storage protocol over it.
                    if let Some(n) = m_net.filter(|n| m < n * AT_CEILING) {
                        v.bottleneck = Bottleneck::Protocol;
                        v.rule = "R7".into();
                        v.percent_of_ceiling = bound.map(|b| m / b.bytes_per_sec * 100.0);
                        v.explanation = format!(
                            "{what} through {} run at {}, {} of what the network alone carries ({}): the storage protocol or the server's disk is the limit.",
                            model.storage_protocol.clone().unwrap_or_default(),
                            rate(m),
                            pct(m / n),
                            rate(n)
                        );
                        v.checks = vec![
                            "the server's disk: run `headroom disk` on the server".into(),
                            "sync writes (NFS sync, ZFS sync=always) and the rsize/wsize or MaxRecvDataSegmentLength"
                                .into(),
                            "protocol encryption or signing (SMB3, krb5p) costs CPU".into(),
                        ];
                        v.headroom_factor = Some(n / m);
                        v.headroom = Some(format!("Fixing it would raise {what} up to {}.", factor(n / m)));
                    } else if let Some((evidence, limit)) = cpu_evidence(m, client, cpu, false) {
                        v.bottleneck = Bottleneck::Cpu;
                        v.rule = "R5".into();
                        v.explanation = format!("{what} run at {}, limited by {evidence}.", rate(m));
                        v.checks = cpu_checks(limit.as_ref());
                    } else {
                        unexplained(&mut v, m, bound, "client");
                    }
                }
            }
        }
    }
    Some(v)
}

/// R5's checks: what lifts the CPU limit that was found.
fn cpu_checks(limit: Option<&CpuLimit>) -> Vec<String> {
    let spread = "more streams (--streams 4) spread the work over more cores".to_string();
    let offloads = "NIC offloads (ethtool -k: tso, gso, gro) and interrupt coalescing".to_string();
    match limit {
        Some(l) if l.kind == CpuLimitKind::Quota => vec![format!(
            "raise or remove the CPU quota of {}'s cgroup (cpu.cfs_quota_us or cpu.max; a container's --cpus, a systemd CPUQuota=)",
            l.side.owner()
        )],
        Some(l) if l.kind == CpuLimitKind::Steal => vec![format!(
            "the hypervisor under {}: other guests on the host, the VM's CPU limit or reservation",
            l.side.owner()
        )],
        Some(l) if l.kind == CpuLimitKind::Softirq => vec![
            format!(
                "spread {}'s packet processing over more cores: NIC queues and RSS (ethtool -L), RPS/RFS, irqbalance",
                l.side.owner()
            ),
            offloads,
        ],
        Some(l) => vec![format!("{} CPU: {spread}", capitalise(l.side.owner())), offloads],
        None => vec![spread, offloads, "a CPU with AES-NI/VAES for encrypted protocols".into()],
    }
}

/// Whether disk and network figures are within the noise of each other: closer
/// than [`LEVEL_WITHIN`], or than the wider spread (coefficient of variation)
/// of the two probes' per-second samples.
fn level(disk: f64, net: f64, disk_probe: Option<&Probe>, net_probe: Option<&Probe>) -> bool {
    let spread = |p: Option<&Probe>| {
        let xs: Vec<f64> = p.map(|p| p.samples.iter().map(|s| s.bytes_per_sec).collect()).unwrap_or_default();
        if xs.len() < 3 {
            return 0.0;
        }
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
        if mean > 0.0 {
            var.sqrt() / mean
        } else {
            0.0
        }
    };
    let noise = LEVEL_WITHIN.max(spread(disk_probe)).max(spread(net_probe));
    (disk - net).abs() / disk.max(net) <= noise
}

/// R8 over a virtual NIC (veth, virtio, a bridge) with no `--link`: there is
/// no physical ceiling to hold the figure against, so the cable checklist
/// does not apply; say how to give one.
fn virtual_link(v: &mut DirectionVerdict, m: f64, nic: Option<&str>) {
    let what = v.direction.plural();
    let over = nic.map(|n| format!(" over {n}")).unwrap_or_default();
    v.explanation = format!(
        "{what} run at {}{over}, a virtual link (veth, virtio, a bridge) with no physical ceiling here: nothing can be held against it. Pass --link with the slowest physical link between the two ends (e.g. --link 10gbe, --link 2.5gbe, --link 940Mb/s) for a verdict.",
        rate(m)
    );
    v.checks = vec![
        "--link SPEC: the physical link the traffic crosses (the host's NIC, the switch port)".into(),
        "CPU of both ends: a virtual link runs as fast as the CPUs copy (headroom net shows each end's cores and threads)".into(),
        "the server side: is its disk or its CPU busy?".into(),
    ];
}

/// R4's headroom: what a faster link would give, up to the disk alone.
fn headroom_beyond_network(
    v: &mut DirectionVerdict,
    m: f64,
    m_disk: Option<f64>,
    slot: bool,
    framing: headroom_limits::Framing,
    link: Option<&Ceiling>,
) {
    let what = v.direction.plural();
    let Some(disk) = m_disk else {
        return;
    };
    if disk <= m {
        return;
    }
    if slot {
        let reach = link.map(|l| l.bytes_per_sec.min(disk)).unwrap_or(disk);
        v.headroom_factor = Some(reach / m);
        v.headroom = Some(format!(
            "The disk alone does {}: a slot as wide as the port would raise {what} up to {}.",
            rate(disk),
            factor(reach / m)
        ));
        return;
    }
    // The smallest Ethernet upgrade whose TCP ceiling reaches the disk, else the fastest.
    let current = link.map(|l| l.bytes_per_sec).unwrap_or(m);
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
    v.headroom_factor = Some(reach / m);
    v.headroom = Some(format!(
        "The disk alone does {}: a {name} link would raise {what} up to {}.",
        rate(disk),
        factor(reach / m)
    ));
}

/// R8: nothing reaches a ceiling and nothing explains why.
fn unexplained(v: &mut DirectionVerdict, m: f64, bound: Option<&Ceiling>, part: &str) {
    let what = v.direction.plural();
    v.bottleneck = Bottleneck::Unexplained;
    v.rule = "R8".into();
    match bound {
        Some(b) => {
            v.percent_of_ceiling = Some(m / b.bytes_per_sec * 100.0);
            v.explanation = format!(
                "unexplained: {what} run at {}, {:.0}% below the lowest ceiling ({}, {}) — here is what to check.",
                rate(m),
                (1.0 - m / b.bytes_per_sec) * 100.0,
                b.name,
                rate(b.bytes_per_sec)
            );
        }
        None => {
            v.explanation = format!(
                "unexplained: {what} run at {} and no ceiling is known for the {part} path (pass --link SPEC) — here is what to check.",
                rate(m)
            );
        }
    }
    v.checks = vec![
        "duplex and negotiated speed (ethtool IFACE): a half-duplex or 100 Mb/s port".into(),
        "errors, drops and carrier changes (ip -s link; headroom sys)".into(),
        "retransmits and TCP windows: a small receive window or a lossy path".into(),
        "a USB NIC, a switch port or a cable that negotiated lower".into(),
        "CPU: run `headroom cpu` and watch one core during the test (top -H)".into(),
        "the server side: is its disk or its CPU busy?".into(),
    ];
}
