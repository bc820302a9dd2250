//! `headroom link SPEC`: the ceilings of a link or bus from the limits model.
//! Pure arithmetic; `headroom_report::present::link` lays out the table or
//! the `headroom.link/v1` document.

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_limits::{catalog, lookup, Family, Framing, IpVersion};
use headroom_report::present;
use headroom_units::Size;

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
        if out.json {
            out.print_json(&present::link::catalog_document(catalog()))?;
        } else {
            out.print(&present::link::catalog(catalog()));
        }
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
        out.print_json(&present::link::link_document(link, &framing))?;
    } else {
        out.print(&present::link::link(link, &framing, out.style()));
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
