//! `headroom link`: the ceilings of one link or bus as a terminal table or a
//! `headroom.link/v1` document, and the whole catalog as a table or a
//! `headroom.link-catalog/v1` document. The figures are the limits model's;
//! this file only lays them out.

use crate::table::truncate;
use crate::Style;
use headroom_limits::fcoe::{self, FcoeCeiling};
use headroom_limits::framing::{FRAME_OVERHEAD, WIRE_OVERHEAD};
use headroom_limits::protocol::{self, DataDirection, Negotiated, StorageProtocol};
use headroom_limits::switching::{HopDelay, SwitchMode, CUT_THROUGH_HEADER, PREAMBLE};
use headroom_limits::{Family, Framing, IpVersion, Link};
use headroom_units::{format_baud, format_rate_columns, format_span_fine};
use serde_json::{json, Value};

/// The framing a link is shown with, and the frame its delay is given for.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    /// MTU, IP version, timestamps, VLAN tags, iSCSI segment.
    pub framing: Framing,
    /// The frame whose serialization is shown, header to FCS (`--frame-size`).
    pub frame_bytes: u32,
}

impl From<Framing> for Shown {
    fn from(framing: Framing) -> Self {
        Shown { framing, frame_bytes: framing.frame_bytes() }
    }
}

/// One link's ceilings: signalling, usable rate, and for Ethernet the frame
/// at `framing` and the TCP, UDP and iSCSI goodput.
pub fn link(link: &Link, shown: &Shown, style: Style) -> String {
    let framing = &shown.framing;
    let rate = link.usable_bits_per_sec;
    let mut text = format!("{}  ({})\n", style.bold(&link.name), link.family.as_str());
    text += &format!(
        "  signalling     {} over {} lane(s), {}\n",
        format_baud(link.signalling_baud),
        link.lanes,
        link.encoding
    );
    text += &format!("  usable rate   {}\n", format_rate_columns(rate));
    if let Some(nominal) = link.nominal_bytes_per_sec {
        text += &format!(
            "  nominal        {:.0} MB/s as marketed (usable after encoding: {:.0} MB/s)\n",
            nominal / 1e6,
            rate / 8e6
        );
    }
    if let Some(note) = &link.note {
        text += &format!("  note           {note}\n");
    }
    if link.family != Family::Ethernet {
        return text;
    }
    let ip = match framing.ip {
        IpVersion::V4 => "IPv4",
        IpVersion::V6 => "IPv6",
    };
    text += &format!(
        "  frame          MTU {} + {} B on the wire = {} B ({ip}, TCP timestamps {}, {} VLAN tag(s))\n",
        framing.mtu,
        framing.wire_bytes() - framing.mtu,
        framing.wire_bytes(),
        if framing.tcp_timestamps { "on" } else { "off" },
        framing.vlan_tags,
    );
    let frame = shown.frame_bytes;
    text += &format!(
        "  serialization  a {}{frame} B frame takes {} (wire slot with preamble and gap {})\n\n",
        if frame == framing.frame_bytes() { "full " } else { "" },
        format_span_fine(f64::from(frame) * 8.0 / rate),
        format_span_fine(f64::from(frame + WIRE_OVERHEAD - FRAME_OVERHEAD) * 8.0 / rate),
    );
    text += &format!("  {:<8} {:>15}  {}\n", "ceiling", "payload", "goodput");
    let rows = [
        ("TCP", format!("{} B/frame", framing.tcp_payload()), framing.tcp_goodput_bits(rate)),
        ("UDP", format!("{} B/frame", framing.udp_payload()), framing.udp_goodput_bits(rate)),
        ("iSCSI", format!("{} B/PDU", framing.iscsi_segment), framing.iscsi_goodput_bits(rate)),
    ];
    for (name, payload, bits) in rows {
        text += &format!("  {name:<8} {payload:>15} {}\n", format_rate_columns(bits));
    }
    if let Some(fcoe) = fcoe::ceiling(rate) {
        text += &fcoe_row("FCoE", 8, &fcoe);
        text += &format!("  {FCOE_NOTE}\n");
    }
    text
}

/// Said under every FCoE figure: why --mtu does not change it.
const FCOE_NOTE: &str = "FCoE: full FC frames (2180 B with the VLAN tag), so every port needs baby jumbo \
                         frames (2158 B payload) and lossless Ethernet; no IP, --mtu does not apply";

fn fcoe_row(label: &str, width: usize, fcoe: &FcoeCeiling) -> String {
    let payload = format!("{} B/frame", fcoe.payload_bytes_per_frame);
    format!("  {label:<width$} {payload:>15} {}\n", format_rate_columns(fcoe.goodput_bits_per_sec))
}

/// `headroom link fcoe`: FCoE's goodput over each Ethernet speed it runs on.
pub fn fcoe_over_ethernet(links: &[&Link], style: Style) -> String {
    let mut text = format!(
        "{}  (FC frames in Ethernet frames, FC-BB-5)\n  frame          {} B FC data in a {} B frame, {} B on the wire\n  {FCOE_NOTE}\n\n",
        style.bold("FCoE"),
        fcoe::FC_PAYLOAD,
        fcoe::FRAME_BYTES,
        fcoe::WIRE_BYTES,
    );
    let width = links.iter().map(|l| l.name.len()).max().unwrap_or(0);
    text += &format!("  {:<width$} {:>15}  {}\n", "link", "payload", "goodput");
    for link in links {
        if let Some(fcoe) = fcoe::ceiling(link.usable_bits_per_sec) {
            text += &fcoe_row(&link.name, width, &fcoe);
        }
    }
    text
}

/// The `headroom.link-fcoe/v1` document: [`fcoe_over_ethernet`]'s figures.
pub fn fcoe_document(links: &[&Link]) -> Value {
    let rows: Vec<Value> = links
        .iter()
        .filter_map(|l| {
            fcoe::ceiling(l.usable_bits_per_sec)
                .map(|c| json!({"link": l.name, "usable_bits_per_sec": l.usable_bits_per_sec, "fcoe": c}))
        })
        .collect();
    json!({
        "schema": "headroom.link-fcoe/v1",
        "frame_bytes": fcoe::FRAME_BYTES,
        "wire_bytes_per_frame": fcoe::WIRE_BYTES,
        "ethernet_payload_bytes": fcoe::ETHERNET_PAYLOAD,
        "links": rows,
    })
}

/// The `headroom.link/v1` document.
pub fn link_document(link: &Link, shown: &Shown) -> Value {
    let framing = &shown.framing;
    let mut doc = json!({
        "schema": "headroom.link/v1",
        "link": link,
        "usable_bytes_per_sec": link.usable_bytes_per_sec(),
    });
    if link.family == Family::Ethernet {
        let rate = link.usable_bits_per_sec;
        doc["framing"] = json!(framing);
        let frame = f64::from(shown.frame_bytes);
        doc["frame_bytes"] = json!(shown.frame_bytes);
        doc["frame_serialization_s"] = json!(frame * 8.0 / rate);
        doc["wire_slot_s"] = json!((frame + f64::from(WIRE_OVERHEAD - FRAME_OVERHEAD)) * 8.0 / rate);
        doc["ceilings"] = json!({
            "tcp": {
                "payload_bytes_per_frame": framing.tcp_payload(),
                "wire_bytes_per_frame": framing.wire_bytes(),
                "goodput_bits_per_sec": framing.tcp_goodput_bits(rate),
            },
            "udp": {
                "payload_bytes_per_frame": framing.udp_payload(),
                "wire_bytes_per_frame": framing.wire_bytes(),
                "goodput_bits_per_sec": framing.udp_goodput_bits(rate),
            },
            "iscsi": {
                "segment_bytes": framing.iscsi_segment,
                "goodput_bits_per_sec": framing.iscsi_goodput_bits(rate),
            },
        });
        if let Some(fcoe) = fcoe::ceiling(rate) {
            doc["ceilings"]["fcoe"] = json!(fcoe);
        }
    }
    doc
}

/// A switched path: one frame's time on each link, what each switch did,
/// and when the frame has fully arrived.
pub fn path(hops: &[HopDelay], frame_bytes: u32, mode: SwitchMode) -> String {
    let names: Vec<&str> = hops.iter().map(|h| h.link.as_str()).collect();
    let switches = hops.len().saturating_sub(1);
    let latency = switch_latency(hops);
    let mut text = format!(
        "path {}: a {frame_bytes} B frame (+{PREAMBLE} B preamble), {}{}\n",
        names.join(" -> "),
        match mode {
            SwitchMode::StoreAndForward => "store-and-forward switches",
            SwitchMode::CutThrough => "cut-through switches where the speeds match",
        },
        if latency > 0.0 { format!(", each adding {} of its own", format_span_fine(latency)) } else { String::new() }
    );
    text += &format!(
        "  {:<4} {:<10} {:>11}  {:<38} {:>12}\n",
        "hop", "link", "on the link", "switch in front", "arrived at"
    );
    for (i, h) in hops.iter().enumerate() {
        let switch = match (h.switch, h.speed_change) {
            (None, _) => "(the sender)".to_string(),
            (Some(_), true) => "store-and-forward (speed change)".to_string(),
            (Some(SwitchMode::StoreAndForward), false) => "store-and-forward (whole frame)".to_string(),
            (Some(SwitchMode::CutThrough), false) => {
                format!("cut-through ({} B header)", PREAMBLE + CUT_THROUGH_HEADER)
            }
        };
        text += &format!(
            "  {:<4} {:<10} {:>11}  {switch:<38} {:>12}\n",
            i + 1,
            h.link,
            format_span_fine(h.serialization_s),
            format_span_fine(h.arrived_s)
        );
    }
    let total = hops.last().map_or(0.0, |h| h.arrived_s);
    if latency > 0.0 {
        let own = latency * switches as f64;
        text += &format!(
            "  total {} for {switches} switch(es): {} on the links and waiting for frames, {} the switches' own latency; propagation (~5 ns/m) not included\n",
            format_span_fine(total),
            format_span_fine(total - own),
            format_span_fine(own),
        );
    } else {
        text += &format!(
            "  total {} for {switches} switch(es); propagation (~5 ns/m) and the switches' own lookup time not included (--switch-latency adds it)\n",
            format_span_fine(total),
        );
    }
    text
}

/// The one latency every switch of the path was given (0: none).
fn switch_latency(hops: &[HopDelay]) -> f64 {
    hops.iter().map(|h| h.switch_latency_s).fold(0.0, f64::max)
}

/// The `headroom.link-path/v1` document of a switched path.
pub fn path_document(hops: &[HopDelay], frame_bytes: u32, mode: SwitchMode) -> Value {
    json!({
        "schema": "headroom.link-path/v1",
        "frame_bytes": frame_bytes,
        "mode": mode,
        "hops": hops,
        "switch_latency_s": switch_latency(hops),
        "total_s": hops.last().map_or(0.0, |h| h.arrived_s),
    })
}

/// `--protocol`: which protocol, at what I/O size, with what limits.
#[derive(Debug, Clone, Copy)]
pub struct ProtocolChoice {
    /// The protocol.
    pub protocol: StorageProtocol,
    /// Bytes per I/O.
    pub io_size: u64,
    /// Request size limit and iSCSI segment.
    pub negotiated: Negotiated,
}

/// Per direction: header bytes per I/O, requests per I/O, share of the
/// stream that is data, and the goodput left of TCP's.
fn protocol_rows(link: &Link, framing: &Framing, p: &ProtocolChoice) -> [(DataDirection, u64, u64, f64, f64); 2] {
    let tcp = framing.tcp_goodput_bits(link.usable_bits_per_sec);
    [DataDirection::Read, DataDirection::Write].map(|dir| {
        let n = &p.negotiated;
        (
            dir,
            protocol::headers_per_io(p.protocol, dir, p.io_size, n),
            protocol::requests_per_io(p.io_size, n),
            protocol::efficiency(p.protocol, dir, p.io_size, n),
            protocol::goodput_bits(tcp, p.protocol, dir, p.io_size, n),
        )
    })
}

/// The protocol section under a link's table: what its headers leave of TCP.
pub fn protocol(link: &Link, framing: &Framing, p: &ProtocolChoice) -> String {
    let mut text = format!(
        "
  {} over TCP, {} per I/O{}
",
        p.protocol.name(),
        headroom_units::format_size(p.io_size),
        if p.protocol == StorageProtocol::Iscsi {
            format!(", {} per Data PDU", headroom_units::format_size(p.negotiated.segment))
        } else {
            format!(", at most {} per request", headroom_units::format_size(p.negotiated.max_request.min(p.io_size)))
        }
    );
    text += &format!(
        "  {:<8} {:>15} {:>9}  {}
",
        "", "headers/I/O", "of TCP", "goodput"
    );
    for (dir, headers, requests, eff, bits) in protocol_rows(link, framing, p) {
        let name = match dir {
            DataDirection::Read => "read",
            DataDirection::Write => "write",
        };
        let headers = if requests > 1 { format!("{headers} B in {requests}") } else { format!("{headers} B") };
        text += &format!(
            "  {name:<8} {headers:>15} {:>8.2}% {}
",
            eff * 100.0,
            format_rate_columns(bits)
        );
    }
    text
}

/// The `protocol` member of a `headroom.link/v1` document.
pub fn protocol_document(link: &Link, framing: &Framing, p: &ProtocolChoice) -> Value {
    let mut doc = json!({
        "name": p.protocol,
        "io_size": p.io_size,
        "max_request": p.negotiated.max_request.min(p.io_size),
    });
    if p.protocol == StorageProtocol::Iscsi {
        doc["segment_bytes"] = json!(p.negotiated.segment);
    }
    for (dir, headers, requests, eff, bits) in protocol_rows(link, framing, p) {
        let key = match dir {
            DataDirection::Read => "read",
            DataDirection::Write => "write",
        };
        doc[key] = json!({
            "header_bytes_per_io": headers,
            "requests_per_io": requests,
            "efficiency": eff,
            "goodput_bits_per_sec": bits,
        });
    }
    doc
}

/// Every link and bus, one line each, with a few of its aliases.
pub fn catalog(links: &[Link]) -> String {
    let mut text = format!(
        "{:<22} {:<14} {:>12} {:>11} {:>11}  {:<40} aliases\n",
        "name", "family", "signalling", "usable Gb/s", "MB/s", "encoding"
    );
    for l in links {
        let aliases: Vec<&str> = l.aliases.iter().skip(1).take(4).map(String::as_str).collect();
        text += &format!(
            "{:<22} {:<14} {:>12} {:>11.3} {:>11.1}  {:<40} {}\n",
            l.name,
            l.family.as_str(),
            format_baud(l.signalling_baud),
            l.usable_bits_per_sec / 1e9,
            l.usable_bytes_per_sec() / 1e6,
            truncate(&l.encoding, 40),
            aliases.join(", ")
        );
    }
    text
}

/// The `headroom.link-catalog/v1` document.
pub fn catalog_document(links: &[Link]) -> Value {
    json!({ "schema": "headroom.link-catalog/v1", "links": links })
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_limits::lookup;

    #[test]
    fn gigabit_shows_the_figures_users_know() {
        let text = link(lookup("1gbe").unwrap(), &Framing::default().into(), Style::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "1GbE  (ethernet)");
        assert!(lines[1].starts_with("  signalling     1.25 GBd over 1 lane(s), 8b/10b"), "{}", lines[1]);
        assert_eq!(lines[2], "  usable rate        1000.00 Mb/s     125.00 MB/s     119.21 MiB/s");
        assert!(
            text.contains(
                "  serialization  a full 1518 B frame takes 12.144 us (wire slot with preamble and gap 12.304 us)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  TCP         1448 B/frame       941.48 Mb/s     117.69 MB/s     112.23 MiB/s\n"),
            "{text}"
        );
        let bold = link(lookup("1gbe").unwrap(), &Framing::default().into(), Style { color: true, iec: false });
        assert!(bold.starts_with("\x1b[1m1GbE\x1b[0m  (ethernet)\n"), "{bold}");
    }

    #[test]
    fn a_bus_has_no_frame_and_its_document_no_ceilings() {
        let sata = lookup("sata3").unwrap();
        let text = link(sata, &Framing::default().into(), Style::default());
        assert!(!text.contains("frame"), "{text}");
        let doc = link_document(sata, &Framing::default().into());
        assert_eq!(doc["schema"], "headroom.link/v1");
        assert!(doc.get("ceilings").is_none());
        let eth = link_document(lookup("10gbe").unwrap(), &Framing { mtu: 9000, ..Framing::default() }.into());
        assert_eq!(eth["ceilings"]["tcp"]["payload_bytes_per_frame"], 8948);
    }

    #[test]
    fn a_protocol_section_shows_its_headers_and_goodput() {
        let gbe = lookup("1gbe").unwrap();
        let p = ProtocolChoice {
            protocol: StorageProtocol::Nfs3,
            io_size: 4096,
            negotiated: Negotiated::defaults(StorageProtocol::Nfs3),
        };
        let text = protocol(gbe, &Framing::default(), &p);
        // 941.48 Mb/s of TCP x 4096 / (4096 + 132) = 912.09 Mb/s.
        assert!(text.contains("  read               132 B    96.88%       912.09 Mb/s"), "{text}");
        let doc = protocol_document(gbe, &Framing::default(), &p);
        assert_eq!(doc["read"]["header_bytes_per_io"], 132);
        assert_eq!(doc["name"], "nfs3");
    }

    #[test]
    fn the_catalog_is_one_line_a_link_with_long_encodings_cut() {
        let links = headroom_limits::catalog();
        let text = catalog(links);
        assert_eq!(text.lines().count(), links.len() + 1);
        assert!(text.contains("\n1GbE                   ethernet           1.25 GBd       1.000       125.0  8b/10b (1000BASE-X; 1000BASE-T: PAM-5 o… 1g, 1gb, 1gbe, 1gbit\n"), "{text}");
        assert_eq!(catalog_document(links)["links"].as_array().unwrap().len(), links.len());
    }
}
