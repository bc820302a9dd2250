//! `headroom link SPEC`: the ceilings of a link or bus from the limits model.
//! Pure arithmetic; prints a table or a `headroom.link/v1` document.

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_limits::{catalog, lookup, Family, Framing, IpVersion, Link};
use headroom_units::Size;
use serde_json::json;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom link 1gbe                      TCP/UDP/iSCSI ceilings of gigabit Ethernet
  headroom link 10gbe --mtu 9000          the same with jumbo frames
  headroom link 25gbe --ip v6 --vlan-tags 1
  headroom link sata3                     600 MB/s after 8b/10b
  headroom link pcie3x4 --json            a headroom.link/v1 document
  headroom link --list                    every link and bus headroom knows

Names are case-insensitive; spaces, dashes and underscores are ignored
(1gbe, 1G, gigabit, 1000BASE-T, sfp+, pcie-gen3-x16, 16gfc, ib-fdr, tb4).")]
pub struct LinkArgs {
    /// The link or bus, e.g. 1gbe, 10gbe, sata3, pcie4x4, 16gfc, ib-fdr, usb3.2gen2, tb4
    #[arg(required_unless_present = "list")]
    pub spec: Option<String>,
    /// Print the whole catalog as a table
    #[arg(long)]
    pub list: bool,
    /// Ethernet MTU in bytes (576-9216)
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// IP version of the payload
    #[arg(long, value_enum, default_value = "v4")]
    pub ip: IpArg,
    /// TCP timestamps option (12 bytes per segment; on is Linux's default)
    #[arg(long, value_enum, default_value = "on")]
    pub tcp_timestamps: OnOff,
    /// Number of 802.1Q VLAN tags (0, 1, or 2 for QinQ)
    #[arg(long, default_value_t = 0)]
    pub vlan_tags: u32,
    /// iSCSI MaxRecvDataSegmentLength (bytes of data per PDU; 8k = 8192)
    #[arg(long, default_value = "8192")]
    pub iscsi_segment: Size,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum IpArg {
    V4,
    V6,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum OnOff {
    On,
    Off,
}

impl LinkArgs {
    fn framing(&self) -> anyhow::Result<Framing> {
        let iscsi_segment = u32::try_from(self.iscsi_segment.0).unwrap_or(u32::MAX);
        let framing = Framing {
            mtu: self.mtu,
            ip: match self.ip {
                IpArg::V4 => IpVersion::V4,
                IpArg::V6 => IpVersion::V6,
            },
            tcp_timestamps: matches!(self.tcp_timestamps, OnOff::On),
            vlan_tags: self.vlan_tags,
            iscsi_segment,
        };
        framing.validate()?;
        Ok(framing)
    }
}

pub fn run(args: &LinkArgs, out: &Output) -> anyhow::Result<Outcome> {
    if args.list {
        print_catalog(out)?;
        return Ok(Outcome::Ok);
    }
    let spec = args.spec.as_deref().context("a link SPEC is required, e.g. `headroom link 10gbe`")?;
    let framing = args.framing()?;
    let link = lookup(spec)?;
    if link.family != Family::Ethernet && args_change_framing(args) {
        bail!(
            "--mtu, --ip, --tcp-timestamps, --vlan-tags and --iscsi-segment apply to Ethernet links only; {} is {}",
            link.name,
            link.family.as_str()
        );
    }
    if out.json {
        out.print_json(&link_document(link, &framing))?;
    } else {
        print!("{}", render_link(link, &framing, out));
    }
    Ok(Outcome::Ok)
}

fn args_change_framing(args: &LinkArgs) -> bool {
    args.mtu != 1500
        || matches!(args.ip, IpArg::V6)
        || matches!(args.tcp_timestamps, OnOff::Off)
        || args.vlan_tags != 0
        || args.iscsi_segment.0 != 8192
}

/// The `headroom.link/v1` document.
pub fn link_document(link: &Link, framing: &Framing) -> serde_json::Value {
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

/// "941.48 Mb/s   117.69 MB/s   112.23 MiB/s": the precise figures of a ceiling.
fn three_units(bits: f64) -> String {
    format!("{:>12.2} Mb/s {:>10.2} MB/s {:>10.2} MiB/s", bits / 1e6, bits / 8e6, bits / 8.0 / 1_048_576.0)
}

fn baud(b: f64) -> String {
    if b >= 1e9 {
        format!("{} GBd", trim_float(b / 1e9))
    } else {
        format!("{} MBd", trim_float(b / 1e6))
    }
}

/// 10.3125 -> "10.3125", 1.25 -> "1.25", 8.0 -> "8".
fn trim_float(v: f64) -> String {
    let s = format!("{v:.5}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Frame times are nanoseconds to microseconds: print them with three decimals.
fn seconds(s: f64) -> String {
    if s < 1e-6 {
        format!("{:.3} ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{:.3} us", s * 1e6)
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

fn render_link(link: &Link, framing: &Framing, out: &Output) -> String {
    let rate = link.usable_bits_per_sec;
    let mut text = format!("{}  ({})\n", out.bold(&link.name), link.family.as_str());
    text +=
        &format!("  signalling     {} over {} lane(s), {}\n", baud(link.signalling_baud), link.lanes, link.encoding);
    text += &format!("  usable rate   {}\n", three_units(rate));
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
        seconds(framing.frame_serialization_s(rate)),
        seconds(framing.wire_slot_s(rate)),
    );
    text += &format!("  {:<8} {:>15}  {}\n", "ceiling", "payload", "goodput");
    let rows = [
        ("TCP", format!("{} B/frame", framing.tcp_payload()), framing.tcp_goodput_bits(rate)),
        ("UDP", format!("{} B/frame", framing.udp_payload()), framing.udp_goodput_bits(rate)),
        ("iSCSI", format!("{} B/PDU", framing.iscsi_segment), framing.iscsi_goodput_bits(rate)),
    ];
    for (name, payload, bits) in rows {
        text += &format!("  {name:<8} {payload:>15} {}\n", three_units(bits));
    }
    text
}

fn print_catalog(out: &Output) -> anyhow::Result<()> {
    let links = catalog();
    if out.json {
        return out.print_json(&json!({ "schema": "headroom.link-catalog/v1", "links": links }));
    }
    println!(
        "{:<22} {:<14} {:>12} {:>11} {:>11}  {:<40} aliases",
        "name", "family", "signalling", "usable Gb/s", "MB/s", "encoding"
    );
    for l in links {
        let aliases: Vec<&str> = l.aliases.iter().skip(1).take(4).map(String::as_str).collect();
        println!(
            "{:<22} {:<14} {:>12} {:>11.3} {:>11.1}  {:<40} {}",
            l.name,
            l.family.as_str(),
            baud(l.signalling_baud),
            l.usable_bits_per_sec / 1e9,
            l.usable_bytes_per_sec() / 1e6,
            truncate(&l.encoding, 40),
            aliases.join(", ")
        );
    }
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}
