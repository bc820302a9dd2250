//! The link a path runs over: `--link` (one type for `run`, `net` and `cpu`,
//! parsed once by clap), and what the link carries: TCP goodput at the NIC's
//! MTU for a network link, the usable rate for another catalog link.
//!
//! Owns every link ceiling headroom prints or stores: the verdict's, the one
//! `headroom net` holds its figures against ([`LinkCeiling`]) and the one
//! `headroom cpu` compares kernels with ([`LinkTarget`]). Does no I/O: the
//! commands find the NIC and hand it in.

use super::nic::{choose_nic, framing_of, is_virtual};
use crate::Setting;
use headroom_limits::{ethernet_by_speed_mbps, lookup, Family, Framing};
use headroom_result::{Ceiling, Hop, Nic};
use headroom_units::setting::Message;
use std::str::FromStr;

/// Why a `--link` spec could not be used.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLinkSpec {
    /// The `--link` value as typed, quoted back in the message.
    pub input: String,
    /// Why it was refused: the catalog's "unknown link" message, a zero
    /// rate, or a non-Ethernet link where a network link was needed.
    pub reason: String,
}

impl BadLinkSpec {
    /// The line, naming the link setting for the front end to spell.
    pub fn message(&self) -> Message<Setting> {
        Message::of(Setting::Link).then(format!(
            " '{}' is neither a known link nor a rate: {} (examples: 1gbe, 10GbE, 2.5gbe, 25gbe, 940Mb/s)",
            self.input, self.reason
        ))
    }
}

impl std::fmt::Display for BadLinkSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.message().fmt(f)
    }
}

impl std::error::Error for BadLinkSpec {}

/// `--link SPEC`: a catalog link (`10gbe`, `2.5GbE`, `16gfc`) or a rate
/// (`940Mb/s`), the MAC data rate of the narrowest link between the ends.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// As the user typed it, to pass on to another command.
    pub input: String,
    /// Display name: the catalog's (`10GbE`) or `940.0 Mb/s link` for a rate.
    pub name: String,
    /// The catalog family; None for a rate, which is taken as an Ethernet MAC rate.
    pub family: Option<Family>,
    /// Data rate after line encoding, bits/s.
    pub usable_bits_per_sec: f64,
}

impl LinkSpec {
    /// Any catalog link or a rate: what `headroom cpu` compares kernels with.
    pub fn parse(input: &str) -> Result<LinkSpec, BadLinkSpec> {
        let bad = |reason: String| BadLinkSpec { input: input.into(), reason };
        match lookup(input) {
            Ok(link) => Ok(LinkSpec {
                input: input.into(),
                name: link.name.clone(),
                family: Some(link.family),
                usable_bits_per_sec: link.usable_bits_per_sec,
            }),
            // "7gbe" names an Ethernet generation, not a rate: one the catalog
            // does not know is an error, as `headroom link 7gbe` says.
            Err(unknown) if input.trim().to_ascii_lowercase().ends_with("be") => Err(bad(unknown.to_string())),
            Err(unknown) => match headroom_units::parse_rate(input) {
                Ok(bits) if bits > 0.0 => Ok(LinkSpec {
                    input: input.into(),
                    name: format!("{} link", headroom_units::format_bits(bits)),
                    family: None,
                    usable_bits_per_sec: bits,
                }),
                Ok(_) => Err(bad("the rate must be above zero".into())),
                Err(_) => Err(bad(unknown.to_string())),
            },
        }
    }

    /// An Ethernet link or a rate: what `run` and `net` hold TCP figures against.
    pub fn parse_network(input: &str) -> Result<LinkSpec, BadLinkSpec> {
        let spec = Self::parse(input)?;
        match spec.family {
            Some(family) if family != Family::Ethernet => Err(BadLinkSpec {
                input: input.into(),
                reason: format!("{} is a {} link, not a network link", spec.name, family.as_str()),
            }),
            _ => Ok(spec),
        }
    }

    /// Whether TCP runs over it: an Ethernet link or a rate.
    pub fn carries_tcp(&self) -> bool {
        self.family.is_none_or(|f| f == Family::Ethernet)
    }

    /// TCP goodput per direction at `framing`, bytes/s.
    pub fn tcp_bytes_per_sec(&self, framing: &Framing) -> f64 {
        framing.tcp_goodput_bits(self.usable_bits_per_sec) / 8.0
    }
}

impl FromStr for LinkSpec {
    type Err = BadLinkSpec;
    /// As [`LinkSpec::parse_network`]: a path's link.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_network(s)
    }
}

/// "10GbE TCP (MTU 9000)", or "10GbE TCP (MTU 9000, eth0)" naming the interface.
fn tcp_name(link: &str, framing: &Framing, iface: Option<&str>) -> String {
    match iface {
        Some(i) => format!("{link} TCP (MTU {}, {i})", framing.mtu),
        None => format!("{link} TCP (MTU {})", framing.mtu),
    }
}

/// The link ceiling of a path as the verdict holds it: `--link` at the NIC's
/// MTU, else the NIC's reported speed (a virtual or loopback NIC's is none).
/// Returns the name, the TCP goodput in bytes/s and where it came from.
pub(crate) fn path_link(spec: Option<&LinkSpec>, nic: Option<&Nic>) -> Option<(String, f64, String)> {
    let framing = framing_of(nic);
    if let Some(spec) = spec {
        return Some((tcp_name(&spec.name, &framing, None), spec.tcp_bytes_per_sec(&framing), "--link".into()));
    }
    let n = nic.filter(|n| !is_virtual(n) && n.kind != headroom_result::NicKind::Loopback)?;
    let l = n.speed_mbps.and_then(ethernet_by_speed_mbps)?;
    let bytes = framing.tcp_goodput_bits(l.usable_bits_per_sec) / 8.0;
    Some((tcp_name(&l.name, &framing, None), bytes, format!("/sys/class/net/{}/speed", n.name)))
}

/// The link `headroom net` holds its figures against: from `--link`, or the
/// interface that routes to the server.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkCeiling {
    /// What `headroom net` prints on its `link:` line and stores as the
    /// ceiling's name: "10GbE TCP (MTU 1500, eth0)", "loopback", "unknown
    /// link", or the bare interface name when it reports no speed.
    pub name: String,
    /// TCP goodput per direction, bytes/s; None for loopback or an unknown speed.
    pub tcp_bytes_per_sec: Option<f64>,
    /// Where the speed came from, shown in parentheses after the name:
    /// "--link", "/sys/class/net/IFACE", "lo" or "no local route found".
    pub source: String,
    /// The interface is virtual (veth, bridge, tun, loopback...): its speed is
    /// nominal, so `link_share` stores the share but does not let it settle
    /// the CPU diagnosis, and explains a figure above it as no real limit.
    pub is_virtual: bool,
    /// One sentence on why the ceiling may not hold or how to get one
    /// (printed after the `link:` line); None when the ceiling is plain.
    pub note: Option<String>,
}

impl LinkCeiling {
    /// `spec` (at the NIC's MTU) when given, else the NIC's speed; `nic` is
    /// the interface the route to the server leaves through, None when no route was found.
    pub fn of_path(spec: Option<&LinkSpec>, nic: Option<&Nic>) -> LinkCeiling {
        let framing = framing_of(nic);
        if let Some(spec) = spec {
            return LinkCeiling {
                name: tcp_name(&spec.name, &framing, None),
                tcp_bytes_per_sec: Some(spec.tcp_bytes_per_sec(&framing)),
                source: "--link".into(),
                is_virtual: false,
                note: None,
            };
        }
        let Some(i) = nic else {
            return LinkCeiling {
                name: "unknown link".into(),
                tcp_bytes_per_sec: None,
                source: "no local route found".into(),
                is_virtual: false,
                note: Some("give --link SPEC to compare against a ceiling".into()),
            };
        };
        if i.kind == headroom_result::NicKind::Loopback {
            return LinkCeiling {
                name: "loopback".into(),
                tcp_bytes_per_sec: None,
                source: "lo".into(),
                is_virtual: true,
                note: Some("no physical link: memory and CPU set the pace".into()),
            };
        }
        let source = format!("/sys/class/net/{}", i.name);
        let virtual_nic = is_virtual(i);
        match i.speed_mbps.and_then(ethernet_by_speed_mbps) {
            Some(l) => LinkCeiling {
                name: tcp_name(&l.name, &framing, Some(&i.name)),
                tcp_bytes_per_sec: Some(framing.tcp_goodput_bits(l.usable_bits_per_sec) / 8.0),
                source,
                is_virtual: virtual_nic,
                note: virtual_nic.then(|| {
                    format!(
                        "{} is a virtual NIC ({}): its speed is nominal",
                        i.name,
                        i.driver.clone().unwrap_or_else(|| "no hardware device".into())
                    )
                }),
            },
            None => LinkCeiling {
                name: i.name.clone(),
                tcp_bytes_per_sec: None,
                source,
                is_virtual: virtual_nic,
                note: Some("the interface reports no speed; give --link SPEC to compare against a ceiling".into()),
            },
        }
    }

    /// The document's `link` ceiling, when the speed is known.
    pub fn to_ceiling(&self) -> Option<Ceiling> {
        self.tcp_bytes_per_sec.map(|b| Ceiling {
            hop: Hop::Link,
            name: self.name.clone(),
            bytes_per_sec: b,
            source: Some(self.source.clone()),
        })
    }
}

/// The link `headroom cpu` compares a kernel's throughput with.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkTarget {
    /// e.g. "10GbE".
    pub name: String,
    /// What payload the link carries: TCP goodput for Ethernet, usable rate otherwise.
    pub bytes_per_sec: f64,
    /// e.g. "TCP at MTU 1500", "eth0, TCP at MTU 9000".
    pub basis: String,
    /// Why this link, when the user did not name one and none was found.
    pub caveat: Option<String>,
}

impl LinkTarget {
    /// `--link`, else the path's NIC ([`choose_nic`]) when it reports a
    /// catalog speed, else 10 GbE with a caveat.
    pub fn choose(spec: Option<&LinkSpec>, nics: &[Nic]) -> LinkTarget {
        if let Some(spec) = spec {
            return if spec.carries_tcp() {
                let framing = Framing::default();
                LinkTarget {
                    name: spec.name.clone(),
                    bytes_per_sec: spec.tcp_bytes_per_sec(&framing),
                    basis: format!("TCP at MTU {}", framing.mtu),
                    caveat: None,
                }
            } else {
                LinkTarget {
                    name: spec.name.clone(),
                    bytes_per_sec: spec.usable_bits_per_sec / 8.0,
                    basis: "usable rate after line encoding".into(),
                    caveat: None,
                }
            };
        }
        let nic = choose_nic(nics, None).filter(|n| n.link.is_some());
        if let Some((nic, ceiling)) = nic.and_then(|n| n.effective_ceiling().map(|c| (n, c))) {
            let slot = match nic.bus_ceiling_bytes_per_sec {
                Some(bus) if bus < nic.ceiling_bytes_per_sec.unwrap_or(f64::MAX) => ", capped by its bus",
                _ => "",
            };
            return LinkTarget {
                name: nic.link.clone().unwrap_or_else(|| nic.name.clone()),
                bytes_per_sec: ceiling,
                basis: format!("{}, TCP at MTU {}{slot}", nic.name, nic.mtu),
                caveat: None,
            };
        }
        let spec = LinkSpec::parse("10gbe").expect("10GbE is in the catalog");
        LinkTarget {
            caveat: Some(
                "no local interface reports a link speed (virtual NICs do not); compared with 10GbE — name one with --link"
                    .into(),
            ),
            ..LinkTarget::choose(Some(&spec), &[])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_spec_accepts_catalog_names_and_rates_and_rejects_buses() {
        assert_eq!(LinkSpec::parse_network("10gbe").unwrap().usable_bits_per_sec, 10e9);
        assert_eq!(LinkSpec::parse_network("200Mb/s").unwrap().usable_bits_per_sec, 200e6);
        assert!(LinkSpec::parse_network("sata3").unwrap_err().reason.contains("not a network link"));
        assert!(LinkSpec::parse("16gfc").is_ok(), "cpu compares with any catalog link");
        assert!(LinkSpec::parse_network("fastest").is_err());
        // An Ethernet name the catalog lacks is not taken for a rate (it was 7 Gb/s).
        let e = LinkSpec::parse("7gbe").unwrap_err();
        assert!(e.reason.contains("10gbe"), "{e:?}");
    }

    #[test]
    fn an_ethernet_link_or_a_rate_is_compared_by_its_tcp_ceiling() {
        let t = LinkTarget::choose(Some(&LinkSpec::parse("10gbe").unwrap()), &[]);
        // 10e9 * 1448 / 1538 / 8 = 1.1768 GB/s, the "1.18 GB/s" users know.
        assert!((t.bytes_per_sec - 1.1768e9).abs() < 1e6, "{}", t.bytes_per_sec);
        let rate = LinkTarget::choose(Some(&LinkSpec::parse("10Gb/s").unwrap()), &[]);
        assert_eq!(rate.bytes_per_sec, t.bytes_per_sec);
        assert_eq!(rate.basis, "TCP at MTU 1500");
        let fallback = LinkTarget::choose(None, &[]);
        assert_eq!(fallback.name, "10GbE");
        assert!(fallback.caveat.is_some());
    }

    #[test]
    fn net_names_the_interface_and_takes_a_rate_at_its_mtu() {
        let eth = Nic {
            name: "eth0".into(),
            kind: headroom_result::NicKind::Physical,
            speed_mbps: Some(1000),
            mtu: 9000,
            ..Default::default()
        };
        let c = LinkCeiling::of_path(None, Some(&eth));
        assert_eq!(c.name, "1GbE TCP (MTU 9000, eth0)");
        let spec = LinkSpec::parse_network("940Mb/s").unwrap();
        let c = LinkCeiling::of_path(Some(&spec), Some(&eth));
        assert_eq!((c.name.as_str(), c.source.as_str()), ("940.0 Mb/s link TCP (MTU 9000)", "--link"));
        assert_eq!(LinkCeiling::of_path(None, None).name, "unknown link");
    }
}
