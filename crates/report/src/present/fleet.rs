//! `headroom fleet` on a terminal: the hosts (clock offset, start skew, or
//! why each failed; the machine each agent runs on; its own verdict after
//! `fleet run`), then per test a row per host with its share, the sum and
//! the spread (slowest/fastest, Jain's fairness index).

use crate::Style;
use headroom_result::{Fleet, Host, ResultDoc};
use headroom_units::{format_bytes_per_sec, format_latency_compact};

/// The fleet section of `doc` as text; empty when the document has none.
pub fn render(doc: &ResultDoc, style: Style) -> String {
    let Some(fleet) = &doc.fleet else { return String::new() };
    let mut out = hosts(fleet, style);
    for sum in &fleet.sums {
        let p = &sum.probe;
        let test = p.name.rsplit_once(" (sum of").map_or(p.name.as_str(), |(t, _)| t);
        out += &format!("\n{}\n", style.bold(test));
        out += &format!("  {:<28} {:>12} {:>12} {:>10} {:>9} {:>7}\n", "host", "MB/s", "Mb/s", "IOPS", "p99", "share");
        for r in &sum.rows {
            let probe = doc.probes.iter().find(|x| x.id == r.probe_id);
            let p99 = probe.and_then(|x| x.summary.latency_ns.as_ref()).map(|l| l.p99);
            out += &row(&r.host, r.bytes_per_sec, r.iops, p99, Some(r.share));
        }
        let label = format!("sum of {}", plural(sum.rows.len(), "host"));
        out +=
            &row(&label, p.summary.bytes_per_sec, p.summary.iops, p.summary.latency_ns.as_ref().map(|l| l.p99), None);
        if let Some(s) = &sum.spread {
            out += &format!(
                "  spread: slowest {} / fastest {} = {:.2}, Jain's fairness index {:.3}\n",
                s.slowest, s.fastest, s.slowest_over_fastest, s.jain_index
            );
        }
        if let Some(low) = p.samples.iter().map(|s| s.bytes_per_sec).reduce(f64::min) {
            out += &format!("  per second (sum): {} samples, lowest {}\n", p.samples.len(), format_bytes_per_sec(low));
        }
        if !sum.failed_hosts.is_empty() {
            out += &format!("  not measured on: {}\n", sum.failed_hosts.join(", "));
        }
    }
    out
}

fn hosts(fleet: &Fleet, style: Style) -> String {
    let ok = fleet.hosts.iter().filter(|h| h.status == "ok").count();
    let skew = fleet.hosts.iter().filter_map(|h| h.start_skew_s).fold(0.0, f64::max);
    let mut out = format!(
        "{} {} ok of {}, released together (start skew at most {}, clocks compared over each control connection)\n",
        style.bold("headroom fleet:"),
        ok,
        plural(fleet.hosts.len(), "host"),
        format_latency_compact(skew * 1e9)
    );
    for h in &fleet.hosts {
        match &h.error {
            Some(e) => out += &format!("  {:<28} FAILED: {e}\n", h.name),
            None => {
                let clock = match (h.clock_offset_s, h.clock_rtt_s) {
                    (Some(o), Some(r)) => format!(
                        "clock {}{} (rtt {})",
                        if o < 0.0 { "-" } else { "+" },
                        format_latency_compact(o.abs() * 1e9),
                        format_latency_compact(r * 1e9)
                    ),
                    _ => String::new(),
                };
                let skew = h.start_skew_s.map(|s| format!(", started +{}", format_latency_compact(s * 1e9)));
                out += &format!(
                    "  {:<28} {} {}{}\n",
                    h.name,
                    h.hostname.as_deref().unwrap_or(""),
                    clock,
                    skew.unwrap_or_default()
                );
            }
        }
        if let Some(machine) = h.inventory.as_ref().map(machine).filter(|m| !m.is_empty()) {
            out += &format!("  {:<28} {machine}\n", "");
        }
        if let Some(v) = &h.verdict {
            let figures: Vec<String> = v
                .directions
                .iter()
                .map(|d| {
                    format!(
                        "{} {} ({})",
                        d.direction.plural(),
                        format_bytes_per_sec(d.figure_bytes_per_sec),
                        d.bottleneck
                    )
                })
                .collect();
            let said = if figures.is_empty() { v.bottleneck.to_string() } else { figures.join(", ") };
            out += &format!("  {:<28} verdict: {said}\n", "");
        }
    }
    out
}

/// An agent's machine in one line: CPU, the NICs that carry traffic, the disks.
fn machine(host: &Host) -> String {
    let mut parts = Vec::new();
    if let Some(cpu) = &host.cpu {
        parts.push(format!("cpu {} ({} threads)", cpu.model, cpu.logical_cpus));
    }
    let nics: Vec<String> = host
        .nics
        .iter()
        .filter(|n| {
            n.kind != headroom_result::NicKind::Loopback
                && (n.carrier == Some(true) || n.operstate.as_deref() == Some("up"))
        })
        .map(|n| match n.speed_mbps {
            Some(speed) => format!("{} {speed} Mb/s", n.name),
            None => n.name.clone(),
        })
        .collect();
    if !nics.is_empty() {
        parts.push(format!("nic {}", nics.join(", ")));
    }
    let disks: Vec<String> = host
        .block_devices
        .iter()
        .filter(|d| !matches!(d.transport.as_deref(), Some("loop")) && !d.name.starts_with("loop"))
        .map(|d| match (&d.model, &d.transport) {
            (Some(model), _) => format!("{} {}", d.name, model.trim()),
            (None, Some(transport)) => format!("{} ({transport})", d.name),
            (None, None) => d.name.clone(),
        })
        .collect();
    if !disks.is_empty() {
        parts.push(format!("disk {}", disks.join(", ")));
    }
    parts.join("; ")
}

fn row(name: &str, bytes_per_sec: f64, iops: Option<f64>, p99: Option<f64>, share: Option<f64>) -> String {
    format!(
        "  {:<28} {:>12.1} {:>12.1} {:>10} {:>9} {:>7}\n",
        name,
        bytes_per_sec / 1e6,
        bytes_per_sec * 8.0 / 1e6,
        iops.map_or("-".into(), |i| format!("{i:.0}")),
        p99.map_or("-".into(), format_latency_compact),
        share.map_or(String::new(), |s| format!("{:.1}%", s * 100.0))
    )
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}
