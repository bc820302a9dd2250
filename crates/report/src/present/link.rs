//! `headroom link`: the ceilings of one link or bus as a terminal table or a
//! `headroom.link/v1` document, and the whole catalog as a table or a
//! `headroom.link-catalog/v1` document. The figures are the limits model's;
//! this file only lays them out.

use crate::table::truncate;
use crate::Style;
use headroom_limits::{Family, Framing, IpVersion, Link};
use headroom_units::{format_baud, format_rate_columns, format_span_fine};
use serde_json::{json, Value};

/// One link's ceilings: signalling, usable rate, and for Ethernet the frame
/// at `framing` and the TCP, UDP and iSCSI goodput.
pub fn link(link: &Link, framing: &Framing, style: Style) -> String {
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
    text += &format!(
        "  serialization  a full {} B frame takes {} (wire slot with preamble and gap {})\n\n",
        framing.frame_bytes(),
        format_span_fine(framing.frame_serialization_s(rate)),
        format_span_fine(framing.wire_slot_s(rate)),
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
    text
}

/// The `headroom.link/v1` document.
pub fn link_document(link: &Link, framing: &Framing) -> Value {
    let mut doc = json!({
        "schema": "headroom.link/v1",
        "link": link,
        "usable_bytes_per_sec": link.usable_bytes_per_sec(),
    });
    if link.family == Family::Ethernet {
        let rate = link.usable_bits_per_sec;
        doc["framing"] = json!(framing);
        doc["frame_serialization_s"] = json!(framing.frame_serialization_s(rate));
        doc["wire_slot_s"] = json!(framing.wire_slot_s(rate));
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
        let text = link(lookup("1gbe").unwrap(), &Framing::default(), Style::default());
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
        let bold = link(lookup("1gbe").unwrap(), &Framing::default(), Style { color: true, iec: false });
        assert!(bold.starts_with("\x1b[1m1GbE\x1b[0m  (ethernet)\n"), "{bold}");
    }

    #[test]
    fn a_bus_has_no_frame_and_its_document_no_ceilings() {
        let sata = lookup("sata3").unwrap();
        let text = link(sata, &Framing::default(), Style::default());
        assert!(!text.contains("frame"), "{text}");
        let doc = link_document(sata, &Framing::default());
        assert_eq!(doc["schema"], "headroom.link/v1");
        assert!(doc.get("ceilings").is_none());
        let eth = link_document(lookup("10gbe").unwrap(), &Framing { mtu: 9000, ..Framing::default() });
        assert_eq!(eth["ceilings"]["tcp"]["payload_bytes_per_frame"], 8948);
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
