//! `headroom sys`: what is in this box and what each part can carry — CPU,
//! memory, every NIC with its TCP ceiling and bus, every disk with its bus
//! ceiling, mounted filesystems — with the flags that cap a part highlighted.
//! `--json` prints the `host` object of the result document; the table is
//! `headroom_report::present::sys`'s.

use crate::output::{Outcome, Output};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom sys                  CPU, memory, NICs, disks and filesystems with their ceilings
  headroom sys --json           the `host` object of the result document
  headroom sys --json | jq '.nics[] | select(.flags)'   only the NICs with a problem
  headroom sys --remote nas.lan --token $TOKEN           the inventory of the machine serving there

Flags (marked !) name what caps a part: a 10 GbE NIC in a PCIe 2.0 x1 slot, a
USB NIC, an SSD on a 3 Gb/s SATA link, an NVMe drive trained down to fewer lanes,
a link that flaps. Read from /proc and /sys; needs no root.")]
pub struct SysArgs {
    #[command(flatten)]
    pub remote: crate::commands::remote::RemoteArgs,
}

pub fn run(args: &SysArgs, out: &Output) -> anyhow::Result<Outcome> {
    let host = match args.remote.endpoint() {
        Some(server) => headroom_net::remote_inventory(&server)?,
        None => headroom_sys::inventory_live(),
    };
    if out.json {
        out.print_json(&host)?;
    } else {
        out.print(&headroom_report::present::sys::render(&host, out.style()));
    }
    Ok(Outcome::Ok)
}
