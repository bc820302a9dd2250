//! The bottleneck verdict: for reads and for writes, the chain of hops
//! (disk -> bus -> NIC -> link -> protocol -> client) with each hop's ceiling
//! and measured figure, the hop that limits the path, and the headroom left.
//! With a far end (a server that measured its own disk), the chain starts on
//! the server and the disk alone is the server's (docs/verdict.md, "The far end").
//!
//! This file gathers the facts of a direction ([`Facts`]: the probes, the
//! ceilings, which part limits) and assembles the verdict; the rules that
//! read the facts are a table in [`rules`], in the order of docs/verdict.md,
//! where the first that matches decides. Each rule has a test built from a
//! stored result document (tests/fixtures/*.json). Reads only the document
//! and the limits model; the verdict's types live in `headroom-result`.

mod rules;

use crate::ceilings::{self, FarEnd, NetworkPath, PathHints, PathModel};
use crate::cpu_limits;
use crate::per_second::per_second;
use headroom_result::{BlockDevice, Ceiling, Hop, HopFigure, NetProbeKind, Probe, ProbeSpec, ResultDoc, Side, Verdict};
pub use headroom_result::{Bottleneck, Direction, DirectionVerdict};

/// A measured figure at or above this share of a ceiling runs *at* the ceiling
/// (TLP headers, ACKs and timer slack make 100% unreachable).
pub const AT_CEILING: f64 = 0.85;
/// A measured figure above this multiple of a ceiling is faster than physics:
/// a cache, compression or a wrong ceiling.
pub const ABOVE_CEILING: f64 = 1.05;
/// A protocol ceiling this share of the link's or lower is a hop of its own.
pub const PROTOCOL_NOTICEABLE: f64 = 0.98;
/// Disk and network figures closer than this share (or than the spread of
/// their per-second samples, when wider) are level: neither alone limits.
pub const LEVEL_WITHIN: f64 = 0.05;

/// The whole analysis of a document: ceilings and a verdict per direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The ceilings and the path they were derived from (`ceilings::derive`).
    pub model: PathModel,
    /// One verdict per direction with a sequential disk or TCP probe (reads
    /// are `tcp_reverse`, writes `tcp`), reads first; empty when neither has one.
    pub directions: Vec<DirectionVerdict>,
}

impl Analysis {
    /// The document's `verdict` object: the bottleneck of reads (else writes),
    /// both explanations, and the per-direction detail.
    pub fn to_verdict(&self) -> Option<Verdict> {
        let first = self.directions.first()?;
        let explanation = self
            .directions
            .iter()
            .map(|d| match &d.headroom {
                Some(h) => format!("{} {}", d.explanation, h),
                None => d.explanation.clone(),
            })
            .collect::<Vec<_>>()
            .join(" ");
        // One word for the document: the reads' bottleneck (writes when only
        // writes ran); each direction's own is in `directions`.
        Some(Verdict { bottleneck: first.bottleneck, explanation, directions: self.directions.clone() })
    }
}

/// Where a document's per-direction verdict comes from, for every reader
/// of stored documents (`report`, `compare`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VerdictSource<'a> {
    /// None is judged: a soak's probes take turns over hours (its findings
    /// are its detections), and a fleet's ran on many machines (each host
    /// has its own verdict in the fleet section; judged as one machine they
    /// would read as one host with many far ends).
    NotJudged,
    /// The verdict stored when the document was written (with the hints,
    /// e.g. `--link`, it was judged under then).
    Stored(&'a [DirectionVerdict]),
    /// No stored verdict: judge it now ([`analyse`] or [`annotate`]).
    ToJudge,
}

/// Where `doc`'s verdict comes from.
pub fn verdict_source(doc: &ResultDoc) -> VerdictSource<'_> {
    match &doc.verdict {
        _ if doc.soak.is_some() || doc.fleet.is_some() => VerdictSource::NotJudged,
        Some(v) if !v.directions.is_empty() => VerdictSource::Stored(&v.directions),
        _ => VerdictSource::ToJudge,
    }
}

/// Derives ceilings and the verdict of a document.
pub fn analyse(doc: &ResultDoc, hints: &PathHints) -> Result<Analysis, ceilings::BadLinkSpec> {
    Ok(judge_against(doc, ceilings::derive(doc, hints)?))
}

/// The verdict of each direction against a model already derived from `doc`.
fn judge_against(doc: &ResultDoc, model: PathModel) -> Analysis {
    let directions =
        [Direction::Read, Direction::Write].into_iter().filter_map(|d| direction_verdict(doc, &model, d)).collect();
    Analysis { model, directions }
}

/// Fills `doc.ceilings` and `doc.verdict` from its own content, and settles
/// each TCP probe's one-line diagnosis against the link ceiling
/// ([`cpu_limits::settle_diagnosis`]).
pub fn annotate(doc: &mut ResultDoc, hints: &PathHints) -> Result<Analysis, ceilings::BadLinkSpec> {
    let model = ceilings::derive(doc, hints)?;
    let link = model.ceiling(Hop::Link).map(|c| c.bytes_per_sec);
    for probe in doc.probes.iter_mut().filter(|p| matches!(&p.spec, ProbeSpec::Net(n) if n.test.is_tcp_throughput())) {
        let directions =
            if matches!(&probe.spec, ProbeSpec::Net(n) if n.test == NetProbeKind::TcpBidir) { 2.0 } else { 1.0 };
        let at_ceiling = link.is_some_and(|l| probe.summary.bytes_per_sec >= l * directions * AT_CEILING);
        cpu_limits::settle_diagnosis(probe, at_ceiling);
    }
    // Settling a diagnosis changes probe details only, which the model is not
    // derived from: the model holds, and the ceilings are derived once.
    let analysis = judge_against(doc, model);
    doc.ceilings = analysis.model.ceilings.clone();
    doc.verdict = analysis.to_verdict();
    Ok(analysis)
}

/// The best sequential disk probe of a direction (the one that shows what
/// the device can do) that ran on this machine (`far` false) or on the far
/// end (`far` true: a server measured its own disk).
fn best_disk_probe(doc: &ResultDoc, dir: Direction, far: bool) -> Option<&Probe> {
    doc.probes
        .iter()
        .filter(|p| p.ran_remotely() == far && matches!(&p.spec, ProbeSpec::Disk(d) if d.rw == dir.as_str()))
        .max_by(|a, b| a.summary.bytes_per_sec.total_cmp(&b.summary.bytes_per_sec))
}

/// The best TCP probe of a direction: reads are server-to-client (`tcp_reverse`).
fn best_net_probe(doc: &ResultDoc, dir: Direction) -> Option<&Probe> {
    let test = match dir {
        Direction::Read => NetProbeKind::TcpReverse,
        Direction::Write => NetProbeKind::Tcp,
    };
    doc.probes
        .iter()
        .filter(|p| matches!(&p.spec, ProbeSpec::Net(n) if n.test == test))
        .max_by(|a, b| a.summary.bytes_per_sec.total_cmp(&b.summary.bytes_per_sec))
}

/// Which measured figure limits the path: the client figure when there is
/// one, else the lower of disk-alone and network.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Limiting {
    Disk(f64),
    Net(f64),
    Client(f64),
}

/// What the rules of one direction read: its probes, the ceilings of the
/// path and the figures measured against them.
struct Facts<'a> {
    dir: Direction,
    model: &'a PathModel,
    net: Option<&'a NetworkPath>,
    /// The disk alone: the server's own disk when it measured one (the far
    /// end), else a disk probe on a local filesystem.
    disk_alone: Option<&'a Probe>,
    /// The server whose own disk is the disk alone, when it is.
    far: Option<&'a FarEnd>,
    /// A disk probe over NFS/SMB/iSCSI: what a client of the path gets.
    client: Option<&'a Probe>,
    net_probe: Option<&'a Probe>,
    bus: Option<&'a Ceiling>,
    /// The cgroup I/O limit on the disk alone's device in this direction:
    /// a ceiling its figure provably cannot pass.
    disk_limit: Option<Ceiling>,
    link: Option<&'a Ceiling>,
    cpu: Option<&'a Ceiling>,
    /// The lowest physical ceiling of the network part (NIC slot, link).
    net_bound: Option<&'a Ceiling>,
    /// The lowest ceiling a client figure can reach: NIC slot, link and a noticeable protocol.
    client_bound: Option<&'a Ceiling>,
    m_disk: Option<f64>,
    m_net: Option<f64>,
    m_client: Option<f64>,
    limiting: Option<Limiting>,
}

impl Facts<'_> {
    /// "reads" / "writes".
    fn what(&self) -> &'static str {
        self.dir.plural()
    }

    /// The end the disk alone sits on.
    fn disk_side(&self) -> Side {
        if self.far.is_some() {
            Side::Remote
        } else {
            Side::Local
        }
    }

    /// The device under the disk alone.
    fn disk_device(&self) -> Option<&BlockDevice> {
        match self.far {
            Some(far) => far.block_device.as_ref(),
            None => self.model.block_device.as_ref(),
        }
    }

    /// "nas's" for the far end, by its hostname.
    fn far_whose(&self) -> Option<String> {
        self.far.map(|f| format!("{}'s", f.host))
    }
}

/// The cgroup I/O limit a disk probe recorded, as the disk's ceiling in `dir`.
fn io_limit_ceiling(probe: &Probe, dir: Direction) -> Option<Ceiling> {
    let limit = probe.io_limit()?;
    let read = dir == Direction::Read;
    Some(Ceiling {
        hop: Hop::Disk,
        name: format!("cgroup I/O limit ({})", limit.setting(read)),
        bytes_per_sec: limit.bytes_per_sec(read)? as f64,
        source: Some(format!("cgroup {}", limit.cgroup)),
    })
}

fn lowest<'a>(ceilings: impl IntoIterator<Item = Option<&'a Ceiling>>) -> Option<&'a Ceiling> {
    ceilings.into_iter().flatten().min_by(|a, b| a.bytes_per_sec.total_cmp(&b.bytes_per_sec))
}

fn facts<'a>(doc: &'a ResultDoc, model: &'a PathModel, dir: Direction) -> Option<Facts<'a>> {
    let here = best_disk_probe(doc, dir, false);
    let far_probe = best_disk_probe(doc, dir, true);
    let net_probe = best_net_probe(doc, dir);
    // A disk probe over NFS/SMB/iSCSI measures the client end of the path; a
    // local one measures the disk alone. When the server measured its own
    // disk, that is the disk alone, and a disk probe here on a local
    // filesystem is this machine's own disk: off the path (docs/verdict.md).
    let over_network = model.storage_protocol.is_some();
    let client = here.filter(|_| over_network);
    let disk_alone = far_probe.or(here.filter(|_| !over_network && model.far_end.is_none()));
    let far = far_probe.and(model.far_end.as_ref());
    if disk_alone.is_none() && client.is_none() && net_probe.is_none() {
        return None;
    }
    let link = model.ceiling(Hop::Link);
    // The protocol counts as its own hop only when its overhead is noticeable
    // (PROTOCOL_NOTICEABLE below the link); else the link is the limit.
    let protocol_hop = model
        .ceiling(Hop::Protocol)
        .filter(|p| link.is_none_or(|l| p.bytes_per_sec < l.bytes_per_sec * PROTOCOL_NOTICEABLE));
    let net_bound = lowest([model.ceiling(Hop::Nic), link]);
    let figure = |p: Option<&Probe>| p.map(|p| p.summary.bytes_per_sec);
    let (m_disk, m_net, m_client) = (figure(disk_alone), figure(net_probe), figure(client));
    let limiting = match (m_client, m_disk, m_net) {
        (Some(m), _, _) => Some(Limiting::Client(m)),
        (None, Some(d), Some(n)) if d <= n => Some(Limiting::Disk(d)),
        (None, Some(d), None) => Some(Limiting::Disk(d)),
        (None, _, Some(n)) => Some(Limiting::Net(n)),
        (None, None, None) => None,
    };
    Some(Facts {
        dir,
        model,
        net: model.network.as_ref(),
        disk_alone,
        far,
        client,
        net_probe,
        bus: match far {
            Some(far) => far.bus.as_ref(),
            None => model.ceiling(Hop::Bus),
        },
        disk_limit: disk_alone.and_then(|p| io_limit_ceiling(p, dir)),
        link,
        cpu: model.ceiling(Hop::Cpu),
        net_bound,
        client_bound: lowest([net_bound, protocol_hop]),
        m_disk,
        m_net,
        m_client,
        limiting,
    })
}

/// The chain of a direction: each hop with its ceiling and measured figure,
/// from the server's disk (when it measured one) to this machine. `far_cpu`
/// is the server's CPU limit the verdict named, shown on the server's side.
fn hop_chain(f: &Facts, far_cpu: Option<&cpu_limits::CpuLimit>) -> Vec<HopFigure> {
    let mut hops = Vec::new();
    let far_host = f.far.map(|far| far.host.clone());
    let mut push = |hop: Hop, name: String, ceiling: Option<&Ceiling>, probe: Option<&Probe>, far: bool| {
        hops.push(HopFigure {
            hop,
            name: ceiling.map(|c| c.name.clone()).unwrap_or(name),
            ceiling_bytes_per_sec: ceiling.map(|c| c.bytes_per_sec),
            measured_bytes_per_sec: probe.map(|p| p.summary.bytes_per_sec),
            probe: probe.map(|p| p.id.clone()),
            host: far_host.clone().filter(|_| far),
        });
    };
    let model = f.model;
    let over_network = model.storage_protocol.is_some();
    if f.far.is_some() || !over_network {
        let far = f.far.is_some();
        let device = f.disk_device().map(|d| d.name.clone());
        if f.disk_alone.is_some() || device.is_some() {
            let name = device.unwrap_or_else(|| "disk".into());
            let limited = f.disk_limit.as_ref().map(|c| Ceiling { name: format!("{name}, {}", c.name), ..c.clone() });
            push(Hop::Disk, name, limited.as_ref(), f.disk_alone, far);
        }
        if f.bus.is_some() {
            push(Hop::Bus, String::new(), f.bus, None, far);
        }
        if let Some(l) = far_cpu {
            push(Hop::Cpu, format!("CPU ({})", l.kind.words()), None, None, true);
        }
    }
    if let Some(net) = f.net {
        if net.loopback {
            push(Hop::Link, "loopback (memory copy, no wire)".into(), None, f.net_probe, false);
        } else {
            let nic = model.ceiling(Hop::Nic);
            if nic.is_some() || net.nic.is_some() {
                let name = net.nic.as_ref().map_or_else(|| "NIC".into(), |n| nic_hop_name(n, nic.is_some()));
                push(Hop::Nic, name, nic, None, false);
            }
            push(Hop::Link, "link (speed unknown: pass --link)".into(), f.link, f.net_probe, false);
        }
    }
    if over_network {
        let protocol = model.storage_protocol.clone().unwrap_or_default();
        push(Hop::Protocol, protocol, model.ceiling(Hop::Protocol), None, false);
        push(Hop::Client, "client".into(), None, f.client, false);
    }
    if let Some(c) = f.cpu {
        push(Hop::Cpu, String::new(), Some(c), None, false);
    }
    hops
}

/// The verdict of one direction, or None when nothing measured it.
fn direction_verdict(doc: &ResultDoc, model: &PathModel, dir: Direction) -> Option<DirectionVerdict> {
    let f = facts(doc, model, dir)?;
    let (rule, mut finding) = rules::RULES.iter().find_map(|(id, rule)| rule(&f).map(|found| (*id, found)))?;
    rules::served_from_memory(&f, &mut finding);
    // Only writes are held against the same disk's reads.
    let reads =
        (dir == Direction::Write).then(|| facts(doc, model, Direction::Read)).flatten().and_then(|r| r.disk_alone);
    if !rules::writes_outran_reads(&f, reads, &mut finding) {
        rules::virtual_disk_check(&f, &mut finding);
    }
    let figure = f.m_client.unwrap_or_else(|| [f.m_disk, f.m_net].into_iter().flatten().fold(f64::INFINITY, f64::min));
    // The server's CPU gets a row on its side of the chain when it is the limit.
    let far_cpu = finding.cpu_limit.as_ref().filter(|l| f.far.is_some() && l.side == Side::Remote);
    Some(DirectionVerdict {
        direction: dir,
        hops: hop_chain(&f, far_cpu),
        figure_bytes_per_sec: figure,
        bottleneck: finding.bottleneck,
        rule,
        percent_of_ceiling: finding.percent_of_ceiling,
        explanation: finding.explanation,
        headroom: finding.headroom,
        headroom_factor: finding.headroom_factor,
        checks: finding.checks,
        limiting_hop: finding.limiting_hop,
        side: finding.side,
    })
}

/// The NIC hop's words: its name, and for a virtual one without a ceiling
/// (veth, bridge, tun) why none is shown, so no reader waits for one.
fn nic_hop_name(nic: &headroom_result::Nic, has_ceiling: bool) -> String {
    if nic.kind != headroom_result::NicKind::Virtual || has_ceiling {
        return nic.name.clone();
    }
    match &nic.driver {
        Some(driver) => format!("{} ({driver}: virtual, no line rate)", nic.name),
        None => format!("{} (virtual, no line rate)", nic.name),
    }
}

/// Whether disk and network figures are within the noise of each other: closer
/// than [`LEVEL_WITHIN`], or than the wider spread (coefficient of variation)
/// of the two probes' per-second samples.
pub(super) fn level(disk: f64, net: f64, disk_probe: Option<&Probe>, net_probe: Option<&Probe>) -> bool {
    let spread = |p: Option<&Probe>| {
        let xs: Vec<f64> =
            p.map(|p| per_second(&p.samples).iter().map(|s| s.bytes_per_sec).collect()).unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::{level, nic_hop_name};
    use headroom_result::{CpuSpec, Nic, Probe, ProbeSpec, Sample, Summary};

    /// A probe sampled every 100 ms for `seconds`, alternating `low` and `high`.
    fn probe_in_tenths(seconds: usize, low: f64, high: f64) -> Probe {
        let samples = (1..=seconds * 10)
            .map(|k| Sample {
                t_s: k as f64 / 10.0,
                bytes_per_sec: if k % 2 == 0 { high } else { low },
                iops: None,
                latency_ns_mean: None,
                latency_ns_p99: None,
            })
            .collect();
        Probe {
            id: "p".into(),
            name: "p".into(),
            spec: ProbeSpec::Cpu(CpuSpec {
                kernel: "sha256".into(),
                threads: 1,
                buffer_size: 1 << 20,
                data: None,
                cache_resident: None,
                implementation: None,
            }),
            summary: Summary { bytes_per_sec: (low + high) / 2.0, ..Summary::default() },
            samples,
            histogram: None,
            warnings: vec![],
            details: Default::default(),
            host: None,
        }
    }

    #[test]
    fn level_takes_its_noise_from_seconds_not_from_tenths() {
        // Tenths swing 80-120 (a spread of 20%), every second averages 100.
        let disk = probe_in_tenths(5, 80e6, 120e6);
        let net = probe_in_tenths(5, 85e6, 85e6);
        assert!(!level(100e6, 85e6, Some(&disk), Some(&net)), "15% apart over steady seconds");
        assert!(level(100e6, 97e6, Some(&disk), Some(&net)), "within the 5% floor");
    }

    #[test]
    fn a_virtual_nic_without_a_ceiling_says_why_it_has_none() {
        let veth = Nic {
            name: "hv1a".into(),
            kind: headroom_result::NicKind::Virtual,
            driver: Some("veth".into()),
            ..Default::default()
        };
        assert_eq!(nic_hop_name(&veth, false), "hv1a (veth: virtual, no line rate)");
        assert_eq!(nic_hop_name(&veth, true), "hv1a", "a ceiling (the host's, a --link) needs no excuse");
        let eth = Nic { name: "eno1".into(), kind: headroom_result::NicKind::Physical, ..Default::default() };
        assert_eq!(nic_hop_name(&eth, false), "eno1");
    }
}
