//! `headroom link SPEC`: the ceilings of a link or bus from the limits model.
//! Pure arithmetic; `headroom_report::present::link` lays out the table or
//! the `headroom.link/v1` document.

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_limits::catalog::normalize;
use headroom_limits::protocol::{Negotiated, StorageProtocol};
use headroom_limits::switching::{path_delay, SwitchMode, FRAME_SIZE_RANGE, MAX_SWITCH_LATENCY_S};
use headroom_limits::{catalog, fcoe, lookup, Family, Framing, IpVersion};
use headroom_report::present;
use headroom_units::{format_span_fine, DurationArg, Size};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom link 1gbe                      TCP/UDP/iSCSI ceilings of gigabit Ethernet
  headroom link 10gbe --mtu 9000          the same with jumbo frames
  headroom link 25gbe --ip v6 --vlan-tags 1
  headroom link sata3                     600 MB/s after 8b/10b
  headroom link pcie3x4 --json            a headroom.link/v1 document
  headroom link 10gbe --protocol nfs --io-size 1M    what NFSv3's headers leave of TCP
  headroom link 1gbe --protocol iscsi --io-size 4k --iscsi-segment 256k
  headroom link 10gbe,25gbe,10gbe --hops cut-through       one frame's delay across two switches
  headroom link 10gbe,10gbe --hops cut-through --frame-size 64
  headroom link 10gbe,10gbe,10gbe --hops cut-through --switch-latency 600ns
  headroom link fcoe                      FC over Ethernet: its goodput at 10 to 800 GbE
  headroom link --list                    every link and bus headroom knows

Names are case-insensitive; spaces, dashes and underscores are ignored
(1gbe, 1G, gigabit, 1000BASE-T, sfp+, pcie-gen3-x16, 16gfc, ib-fdr, tb4).")]
pub struct LinkArgs {
    /// The link or bus, e.g. 1gbe, 10gbe, sata3, pcie4x4, 16gfc, ib-fdr, usb3.2gen2, tb4; or a
    /// switched Ethernet path, links in order: 10gbe,25gbe,10gbe; or fcoe
    #[arg(required_unless_present = "list")]
    pub spec: Option<String>,
    /// For a path: what the switches do, store-and-forward or cut-through (a switch between
    /// links of different speeds always stores and forwards)
    #[arg(long, value_name = "MODE", value_parser = ["store-and-forward", "cut-through"])]
    pub hops: Option<String>,
    /// For a path: each switch's own port-to-port latency from its datasheet (e.g. 600ns for
    /// a cut-through ASIC, 3us for a store-and-forward box), added once per switch
    #[arg(long, value_name = "DURATION")]
    pub switch_latency: Option<DurationArg>,
    /// Frame size for the delays, header to FCS: 64 (the minimum) to 9234 (9216 MTU)
    /// [default: MTU + 18, e.g. 1518]
    #[arg(long, value_name = "BYTES")]
    pub frame_size: Option<u32>,
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
    /// A storage protocol's goodput over the link: nfs (v3), nfs4 (4.1), smb, iscsi, nbd
    #[arg(long, value_name = "PROTOCOL", value_parser = ["nfs", "nfs3", "nfs4", "smb", "iscsi", "nbd"])]
    pub protocol: Option<String>,
    /// With --protocol: bytes per I/O (the block size of the test) [default: 1M]
    #[arg(long, value_name = "SIZE", requires = "protocol")]
    pub io_size: Option<Size>,
    /// With --protocol: the most data one request carries (NFS rsize/wsize, SMB
    /// MaxReadSize) [default: the protocol's usual: NFS 1M, SMB 8M, NBD 32M]
    #[arg(long, value_name = "SIZE", requires = "protocol")]
    pub max_request: Option<Size>,
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
        if out.json {
            out.print_json(&present::link::catalog_document(catalog()))?;
        } else {
            out.print(&present::link::catalog(catalog()));
        }
        return Ok(Outcome::Ok);
    }
    let spec = args.spec.as_deref().context("a link SPEC is required, e.g. `headroom link 10gbe`")?;
    let framing = args.framing()?;
    let frame_bytes = args.frame_size.unwrap_or(framing.frame_bytes());
    if !FRAME_SIZE_RANGE.contains(&frame_bytes) {
        bail!("--frame-size {frame_bytes} is out of range: Ethernet frames are 64 to 9234 bytes, header to FCS (e.g. 64, 1518, 9018)");
    }
    if spec.contains(',') {
        return path(args, spec, frame_bytes, out);
    }
    if args.switch_latency.is_some() {
        bail!("--switch-latency is for a path of links: name them in order, e.g. `headroom link 10gbe,10gbe,10gbe --switch-latency 600ns`");
    }
    if args.hops.is_some() {
        bail!("--hops is for a path of links: name them in order, e.g. `headroom link 10gbe,25gbe,10gbe --hops cut-through`");
    }
    if normalize(spec) == "fcoe" {
        return fcoe(args, out);
    }
    let link = lookup(spec)?;
    if link.family != Family::Ethernet && args_change_framing(args) {
        bail!(
            "--mtu, --ip, --tcp-timestamps, --vlan-tags and --iscsi-segment apply to Ethernet links only; {} is {}",
            link.name,
            link.family.as_str()
        );
    }
    let protocol = match &args.protocol {
        Some(name) => {
            if link.family != Family::Ethernet {
                bail!("--protocol needs an Ethernet link (it rides on TCP); {} is {}", link.name, link.family.as_str());
            }
            Some(protocol_choice(args, name, &framing)?)
        }
        None => None,
    };
    let framing_shown = present::link::Shown { framing, frame_bytes };
    if out.json {
        let mut doc = present::link::link_document(link, &framing_shown);
        if let Some(p) = &protocol {
            doc["protocol"] = present::link::protocol_document(link, &framing, p);
        }
        out.print_json(&doc)?;
    } else {
        let mut text = present::link::link(link, &framing_shown, out.style());
        if let Some(p) = &protocol {
            text += &present::link::protocol(link, &framing, p);
        }
        out.print(&text);
    }
    Ok(Outcome::Ok)
}

/// `link A,B,C [--hops MODE]`: one frame's delay across the switched path.
fn path(args: &LinkArgs, spec: &str, frame_bytes: u32, out: &Output) -> anyhow::Result<Outcome> {
    if args.protocol.is_some() {
        bail!("--protocol applies to one link; for a path, run it on the narrowest link (e.g. `headroom link 10gbe --protocol nfs`)");
    }
    let mut links = Vec::new();
    for name in spec.split(',') {
        let link = lookup(name.trim())?;
        if link.family != Family::Ethernet {
            bail!("a path is of Ethernet links (switch hops); {} is {}", link.name, link.family.as_str());
        }
        links.push((link.name.clone(), link.usable_bits_per_sec));
    }
    let mode = match args.hops.as_deref() {
        Some("cut-through") => SwitchMode::CutThrough,
        _ => SwitchMode::StoreAndForward,
    };
    let latency = args.switch_latency.map_or(0.0, |d| d.0.as_secs_f64());
    if latency > MAX_SWITCH_LATENCY_S {
        bail!(
            "--switch-latency {}: no switch takes that long port to port (datasheets give nanoseconds to microseconds); did you mean us? e.g. --switch-latency 600ns",
            format_span_fine(latency)
        );
    }
    let hops = path_delay(&links, frame_bytes, mode, latency);
    if out.json {
        out.print_json(&present::link::path_document(&hops, frame_bytes, mode))?;
    } else {
        out.print(&present::link::path(&hops, frame_bytes, mode));
    }
    Ok(Outcome::Ok)
}

/// `link fcoe`: FCoE's goodput over every Ethernet speed it is defined for.
/// FCoE is not a link of its own, so it is no catalog entry: its frames are
/// fixed by FC, so none of the IP framing flags apply.
fn fcoe(args: &LinkArgs, out: &Output) -> anyhow::Result<Outcome> {
    if args_change_framing(args) || args.protocol.is_some() || args.frame_size.is_some() {
        bail!("FCoE carries whole FC frames without IP: --mtu, --ip, --tcp-timestamps, --vlan-tags, --iscsi-segment, --frame-size and --protocol do not apply; run `headroom link fcoe` alone");
    }
    let links: Vec<_> = catalog()
        .iter()
        .filter(|l| l.family == Family::Ethernet && fcoe::ceiling(l.usable_bits_per_sec).is_some())
        .collect();
    if out.json {
        out.print_json(&present::link::fcoe_document(&links))?;
    } else {
        out.print(&present::link::fcoe_over_ethernet(&links, out.style()));
    }
    Ok(Outcome::Ok)
}

/// `--protocol` with its I/O size and request limit, checked.
fn protocol_choice(args: &LinkArgs, name: &str, framing: &Framing) -> anyhow::Result<present::link::ProtocolChoice> {
    let protocol = StorageProtocol::parse(name).context("checked by clap")?;
    let io_size = args.io_size.map_or(1 << 20, |s| s.0);
    if !(512..=(1u64 << 30)).contains(&io_size) {
        bail!("--io-size {io_size} is out of range: 512 bytes to 1G (e.g. 4k or 1M)");
    }
    let mut negotiated = Negotiated::defaults(protocol);
    negotiated.segment = u64::from(framing.iscsi_segment);
    if let Some(max) = args.max_request {
        if protocol == StorageProtocol::Iscsi {
            bail!("--max-request is for NFS, SMB and NBD; iSCSI splits I/O by --iscsi-segment");
        }
        if !(4096..=(1u64 << 30)).contains(&max.0) {
            bail!("--max-request {} is out of range: 4k to 1G (e.g. 64k, 1M)", max.0);
        }
        negotiated.max_request = max.0;
    }
    Ok(present::link::ProtocolChoice { protocol, io_size, negotiated })
}

fn args_change_framing(args: &LinkArgs) -> bool {
    args.mtu != 1500
        || matches!(args.ip, IpArg::V6)
        || matches!(args.tcp_timestamps, OnOff::Off)
        || args.vlan_tags != 0
        || args.iscsi_segment.0 != 8192
}
