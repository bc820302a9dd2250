//! What a CPU kernel's figure means next to the link it feeds (`headroom
//! cpu`, the CPU hop of `headroom run`): whether one stream of it fills the
//! link, what share of the link it reaches, the `fills_link` detail and the
//! `cpu_below_link` warning of its probe, and the `headroom cpu` result
//! document with the link as its ceiling. The figures come from
//! headroom-cpu; the link from [`LinkTarget`].

use crate::ceilings::LinkTarget;
use headroom_result::{Ceiling, Hop, Host, Probe, ProbeSpec, ResultDoc, Warning, WarningCode};
use headroom_units::format_bytes_per_sec_short;

/// Whether a kernel at `bytes_per_sec` keeps up with the link.
pub fn fills_link(bytes_per_sec: f64, link: &LinkTarget) -> bool {
    bytes_per_sec >= link.bytes_per_sec
}

/// The kernel's figure as a share of the link (1.0 = exactly the link).
pub fn share_of_link(bytes_per_sec: f64, link: &LinkTarget) -> f64 {
    bytes_per_sec / link.bytes_per_sec
}

/// A kernel's probe held against the link it feeds: `details.link`,
/// `link_bytes_per_sec`, `fills_link`, and a `cpu_below_link` warning when it
/// does not fill it. `kernel` is the kernel's name without its data kind.
pub fn cpu_probe_against_link(mut probe: Probe, kernel: &str, link: &LinkTarget) -> Probe {
    let bytes_per_sec = probe.summary.bytes_per_sec;
    let fills = fills_link(bytes_per_sec, link);
    probe.details.insert("link".into(), serde_json::json!(link.name));
    probe.details.insert("link_bytes_per_sec".into(), serde_json::json!(link.bytes_per_sec));
    probe.details.insert("fills_link".into(), serde_json::json!(fills));
    if !fills {
        let threads = match &probe.spec {
            ProbeSpec::Cpu(c) => c.threads,
            _ => 1,
        };
        probe.warnings.push(Warning::new(
            WarningCode::CpuBelowLink,
            format!(
                "{kernel} on {threads} thread(s) reaches {:.0}% of {} ({})",
                100.0 * share_of_link(bytes_per_sec, link),
                link.name,
                format_bytes_per_sec_short(link.bytes_per_sec)
            ),
        ));
    }
    probe
}

/// The `headroom cpu` document: the host, the kernels' probes (already held
/// [`cpu_probe_against_link`]), the link as the ceiling and, when the link was assumed,
/// a `link_assumed` warning.
pub fn cpu_document(started_at: String, host: Host, probes: Vec<Probe>, link: &LinkTarget) -> ResultDoc {
    let mut doc = ResultDoc::new(started_at);
    doc.host = host;
    doc.ceilings.push(Ceiling {
        hop: Hop::Link,
        name: format!("{} {}", link.name, link.basis),
        bytes_per_sec: link.bytes_per_sec,
        source: Some(if link.caveat.is_some() { "default (no interface speed)".into() } else { "headroom cpu".into() }),
    });
    if let Some(caveat) = &link.caveat {
        doc.warnings.push(Warning::new(WarningCode::LinkAssumed, caveat.clone()));
    }
    doc.probes = probes;
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::{CpuSpec, Summary};

    fn ten_gbe() -> LinkTarget {
        LinkTarget { name: "10GbE".into(), bytes_per_sec: 1.177e9, basis: "TCP at MTU 1500".into(), caveat: None }
    }

    fn kernel_probe(bytes_per_sec: f64, threads: u32) -> Probe {
        Probe {
            id: "cpu-sha256".into(),
            name: "SHA-256".into(),
            spec: ProbeSpec::Cpu(CpuSpec {
                kernel: "sha256".into(),
                threads,
                buffer_size: 64 << 20,
                data: None,
                cache_resident: Some(false),
                implementation: None,
            }),
            summary: Summary { bytes_per_sec, ..Summary::default() },
            samples: vec![],
            histogram: None,
            warnings: vec![],
            details: Default::default(),
            host: None,
        }
    }

    #[test]
    fn a_kernel_below_the_link_gets_the_warning_and_one_above_does_not() {
        let link = ten_gbe();
        let slow = cpu_probe_against_link(kernel_probe(631e6, 1), "SHA-256", &link);
        assert_eq!(slow.details["fills_link"], serde_json::json!(false));
        assert_eq!(slow.details["link"], serde_json::json!("10GbE"));
        assert_eq!(slow.warnings.len(), 1);
        assert_eq!(slow.warnings[0].code, WarningCode::CpuBelowLink);
        assert_eq!(slow.warnings[0].message, "SHA-256 on 1 thread(s) reaches 54% of 10GbE (1.18 GB/s)");
        let fast = cpu_probe_against_link(kernel_probe(4.8e9, 2), "SHA-256", &link);
        assert_eq!(fast.details["fills_link"], serde_json::json!(true));
        assert!(fast.warnings.is_empty());
        assert!(fills_link(link.bytes_per_sec, &link), "exactly the link fills it");
        assert!((share_of_link(2.354e9, &link) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_document_names_the_link_as_ceiling_and_warns_when_it_was_assumed() {
        let mut link = ten_gbe();
        let doc = cpu_document("t".into(), Host::default(), vec![kernel_probe(1e9, 1)], &link);
        assert_eq!(doc.ceilings[0].name, "10GbE TCP at MTU 1500");
        assert_eq!(doc.ceilings[0].source.as_deref(), Some("headroom cpu"));
        assert!(doc.warnings.is_empty());
        link.caveat = Some("no local interface reports a link speed".into());
        let doc = cpu_document("t".into(), Host::default(), vec![], &link);
        assert_eq!(doc.warnings[0].code, WarningCode::LinkAssumed);
        assert_eq!(doc.ceilings[0].source.as_deref(), Some("default (no interface speed)"));
    }
}
