//! A network probe held against the link it ran over, as `net` and `run`
//! store it: its share of the link's TCP ceiling (`details.ceiling_share`),
//! the CPU diagnosis settled with that share in mind, and a
//! `faster_than_ceiling` warning when it beat the ceiling. Round trips and
//! handshakes carry no throughput and are left as measured.
//!
//! The link ceiling itself comes from [`crate::ceilings::LinkCeiling`]; the
//! presenters show the share and the judgement made here.

use crate::ceilings::LinkCeiling;
use crate::cpu_limits;
use crate::verdict::AT_CEILING;
use headroom_result::{NetProbeKind, Probe, ProbeSpec, Warning, WarningCode};
use headroom_units::format_rate;

/// The `details` key of a throughput probe's share of its link ceiling.
pub const CEILING_SHARE: &str = "ceiling_share";

/// A share of the link ceiling above this is faster than the link: the
/// reported speed is not the real one (a virtual NIC's is nominal). Tighter
/// than the verdict's `ABOVE_CEILING` because the ceiling here is the exact
/// TCP goodput of the link the probe went over, not a modelled hop.
pub const FASTER_THAN_CEILING: f64 = 1.02;

/// Whether a probe at `share` of its link ceiling ran faster than the link can carry.
pub fn faster_than_ceiling(share: f64) -> bool {
    share > FASTER_THAN_CEILING
}

/// A probe as `net` and `run` report it: throughput probes held against the
/// link (`hold_throughput`), round trips and handshakes as measured.
pub fn net_probe_against_link(p: Probe, ceiling: &LinkCeiling) -> Probe {
    let throughput = matches!(&p.spec, ProbeSpec::Net(s) if !s.test.is_latency());
    if throughput {
        hold_throughput(p, ceiling)
    } else {
        p
    }
}

/// A throughput probe held against the link: its share of the ceiling
/// (both directions' for bidir), what the CPU diagnosis settles to, and
/// `faster_than_ceiling`.
fn hold_throughput(mut p: Probe, ceiling: &LinkCeiling) -> Probe {
    let kind = match &p.spec {
        ProbeSpec::Net(s) => Some(s.test.clone()),
        _ => None,
    };
    let directions = if kind == Some(NetProbeKind::TcpBidir) { 2.0 } else { 1.0 };
    // A virtual NIC's nominal speed is no ceiling a stream could be at.
    let share = ceiling.tcp_bytes_per_sec.map(|c| p.summary.bytes_per_sec / (c * directions));
    if kind != Some(NetProbeKind::Udp) {
        let at_ceiling = !ceiling.is_virtual && share.is_some_and(|s| s >= AT_CEILING);
        cpu_limits::settle_diagnosis(&mut p, at_ceiling);
    }
    if let Some(share) = share {
        p.details.insert(CEILING_SHARE.into(), serde_json::json!(share));
        if faster_than_ceiling(share) {
            p.warnings.push(Warning::new(
                WarningCode::FasterThanCeiling,
                format!(
                    "measured {} is above the {} ceiling: {}",
                    format_rate(p.summary.bytes_per_sec * 8.0, false),
                    ceiling.name,
                    if ceiling.is_virtual {
                        "the interface is virtual and its reported speed is nominal, not a limit"
                    } else {
                        "the reported link speed is not the real one (check the peer's route)"
                    }
                ),
            ));
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::{NetSpec, Summary};

    fn probe(test: &str, bytes_per_sec: f64) -> Probe {
        Probe {
            id: format!("{test}-1"),
            name: String::new(),
            spec: ProbeSpec::Net(NetSpec {
                test: test.into(),
                streams: 1,
                protocol: "headroom".into(),
                peer: "198.18.1.1:5201".into(),
                rate_bits_per_sec: None,
                bytes: None,
                ..Default::default()
            }),
            summary: Summary { bytes_per_sec, duration_s: 3.0, ..Summary::default() },
            samples: vec![],
            histogram: None,
            warnings: vec![],
            details: Default::default(),
            host: None,
        }
    }

    fn gigabit(is_virtual: bool) -> LinkCeiling {
        LinkCeiling {
            name: "1GbE TCP (MTU 1500)".into(),
            tcp_bytes_per_sec: Some(117.69e6),
            source: "--link".into(),
            is_virtual,
            note: None,
        }
    }

    fn share(p: &Probe) -> Option<f64> {
        p.details.get(CEILING_SHARE).and_then(|v| v.as_f64())
    }

    #[test]
    fn the_judgement_starts_just_above_the_ceiling() {
        assert!(!faster_than_ceiling(1.0));
        assert!(!faster_than_ceiling(FASTER_THAN_CEILING));
        assert!(faster_than_ceiling(1.03));
    }

    #[test]
    fn a_stream_gets_its_share_and_bidir_counts_both_directions() {
        let up = net_probe_against_link(probe("tcp", 117.69e6 / 2.0), &gigabit(false));
        assert!((share(&up).unwrap() - 0.5).abs() < 1e-9);
        assert!(up.warnings.is_empty(), "{:?}", up.warnings);
        let bidir = net_probe_against_link(probe("tcp_bidir", 117.69e6), &gigabit(false));
        assert!((share(&bidir).unwrap() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn faster_than_the_link_is_a_warning_that_says_why() {
        let p = net_probe_against_link(probe("tcp", 2.0 * 117.69e6), &gigabit(false));
        let w = p.warnings.iter().find(|w| w.code == "faster_than_ceiling").expect("a warning");
        assert!(w.message.contains("above the 1GbE TCP (MTU 1500) ceiling"), "{}", w.message);
        assert!(w.message.contains("check the peer's route"), "{}", w.message);
        let v = net_probe_against_link(probe("tcp", 2.0 * 117.69e6), &gigabit(true));
        assert!(v.warnings.iter().any(|w| w.message.contains("nominal, not a limit")), "{:?}", v.warnings);
    }

    #[test]
    fn round_trips_and_unknown_links_carry_no_share() {
        let rr = net_probe_against_link(probe("rr", 1e6), &gigabit(false));
        assert_eq!(share(&rr), None);
        let unknown = LinkCeiling { tcp_bytes_per_sec: None, ..gigabit(false) };
        assert_eq!(share(&net_probe_against_link(probe("tcp", 1e6), &unknown)), None);
    }
}
