//! Which NIC a path leaves through, and what the NIC's own slot carries.
//!
//! One rule for every command (docs/verdict.md, "The hop chain"): the
//! interface named (the one the route to the server leaves through, when a
//! command resolved it), else the fastest interface with carrier: physical
//! and USB NICs before virtual ones, then the highest TCP ceiling after the
//! bus the NIC hangs off, then the highest speed. Loopback is never chosen
//! unless named. Does no I/O: `headroom-sys` finds routes and interfaces.

use headroom_limits::{pcie_link, Framing};
use headroom_result::{Ceiling, Hop, Nic};

/// The interface named, else the fastest with carrier (see the module's rule).
/// A name that is not in `nics` chooses none.
pub fn choose_nic<'a>(nics: &'a [Nic], named: Option<&str>) -> Option<&'a Nic> {
    if let Some(name) = named {
        return nics.iter().find(|n| n.name == name);
    }
    let rank = |n: &Nic| {
        (
            n.kind == headroom_result::NicKind::Physical || n.kind == headroom_result::NicKind::Usb,
            n.effective_ceiling().unwrap_or(0.0),
            n.speed_mbps.unwrap_or(0),
        )
    };
    nics.iter().filter(|n| n.kind != headroom_result::NicKind::Loopback && n.carrier != Some(false)).max_by(|a, b| {
        let (a, b) = (rank(a), rank(b));
        a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2))
    })
}

/// A paravirtual or software NIC: its reported speed is a label, not a limit.
pub(crate) fn is_virtual(nic: &Nic) -> bool {
    nic.kind == headroom_result::NicKind::Virtual
}

/// The framing of a path through `nic`: its MTU when it is one Ethernet
/// carries (576 to 9216; loopback's 65536 is not), else 1500.
pub(crate) fn framing_of(nic: Option<&Nic>) -> Framing {
    let mtu = nic.map(|n| n.mtu).filter(|m| (576..=9216).contains(m)).unwrap_or(1500);
    Framing { mtu, ..Framing::default() }
}

/// "PCIe 3.0 x4", or the raw figures when the catalog has no such link.
pub(crate) fn pcie_name(gt_per_sec: f64, width: u32) -> String {
    pcie_link(gt_per_sec, width).map(|l| l.name).unwrap_or_else(|| format!("PCIe {gt_per_sec} GT/s x{width}"))
}

/// The NIC's PCIe slot as a ceiling of the `nic` hop (a 10 GbE card in a
/// PCIe 2.0 x1 slot carries 500 MB/s).
pub(crate) fn slot_ceiling(nic: &Nic) -> Option<Ceiling> {
    let pci = nic.pci_link.as_ref()?;
    let bytes = if pci.bytes_per_sec > 0.0 {
        pci.bytes_per_sec
    } else {
        pcie_link(pci.gt_per_sec, pci.width).map(|l| l.usable_bytes_per_sec()).unwrap_or(0.0)
    };
    (bytes > 0.0).then(|| Ceiling {
        hop: Hop::Nic,
        name: format!("{} slot of {}", pcie_name(pci.gt_per_sec, pci.width), nic.name),
        bytes_per_sec: bytes,
        source: Some(format!("/sys/class/net/{}/device/current_link_speed", nic.name)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(name: &str, kind: &str, speed: u64, ceiling: Option<f64>) -> Nic {
        Nic {
            name: name.into(),
            kind: kind.parse().unwrap(),
            speed_mbps: Some(speed),
            ceiling_bytes_per_sec: ceiling,
            ..Default::default()
        }
    }

    #[test]
    fn physical_before_virtual_then_the_slot_capped_ceiling_and_a_name_wins() {
        let mut slow_slot = nic("enp2s0", "physical", 10000, Some(1.19e9));
        slow_slot.bus_ceiling_bytes_per_sec = Some(500e6);
        let usb = {
            let mut n = nic("enx0", "usb", 1000, Some(117e6));
            n.bus_ceiling_bytes_per_sec = Some(53e6);
            n
        };
        let nics = [nic("lo", "loopback", 0, None), nic("virbr0", "virtual", 40000, Some(4.7e9)), usb, slow_slot];
        assert_eq!(choose_nic(&nics, None).unwrap().name, "enp2s0");
        assert_eq!(choose_nic(&nics, Some("lo")).unwrap().name, "lo");
        assert!(choose_nic(&nics, Some("eth9")).is_none());
        assert_eq!(choose_nic(&nics[..2], None).unwrap().name, "virbr0", "a virtual NIC when there is no other");
    }
}
