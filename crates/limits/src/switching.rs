//! How long one frame takes across a switched Ethernet path: per link the
//! time to clock the frame onto it, and per switch whether it waits for the
//! whole frame (store-and-forward) or forwards once it has read the header
//! (cut-through). A switch between links of different speeds cannot cut
//! through: a faster egress would run out of bits to send (underrun) and a
//! slower one has to buffer the frame anyway, so it stores and forwards.
//!
//! A switch's own port-to-port latency (its lookup and queueing, from a few
//! hundred nanoseconds for a cut-through ASIC to several microseconds for a
//! store-and-forward box) depends on the model: the user gives it from the
//! datasheet (`--switch-latency`), and it is added once per switch.
//! Propagation (about 5 ns per metre of fibre or copper) is not included: it
//! depends on the cable.

use serde::Serialize;

/// Preamble and start-of-frame delimiter, bytes: on the wire before every frame.
pub const PREAMBLE: u32 = 8;
/// Bytes a cut-through switch reads before it forwards: the Ethernet header
/// (destination, source, EtherType). Fragment-free switches wait for 64.
pub const CUT_THROUGH_HEADER: u32 = 14;
/// Frame sizes (header to FCS) Ethernet carries: the 64-byte minimum to a
/// 9216-byte MTU's jumbo frame.
pub const FRAME_SIZE_RANGE: std::ops::RangeInclusive<u32> = 64..=9234;

/// What the switches do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchMode {
    /// Receive the whole frame, check its FCS, then send it on.
    StoreAndForward,
    /// Send on once the header is in (where ingress and egress speeds match).
    CutThrough,
}

/// One link of the path and the frame's time on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HopDelay {
    /// The link's name, e.g. `10GbE`.
    pub link: String,
    /// Its MAC data rate, bits/s.
    pub bits_per_sec: f64,
    /// Seconds to clock preamble and frame onto this link.
    pub serialization_s: f64,
    /// What the switch in front of this link did; None for the first link (the sender).
    pub switch: Option<SwitchMode>,
    /// The switch had to store and forward although cut-through was asked: the speeds differ.
    pub speed_change: bool,
    /// The switch in front of this link's own latency, seconds (what the user
    /// gave; 0 for the sender, or when none was given).
    #[serde(skip_serializing_if = "is_zero")]
    pub switch_latency_s: f64,
    /// Seconds from the first bit sent to the frame's last bit arriving at this link's far end.
    pub arrived_s: f64,
}

fn is_zero(s: &f64) -> bool {
    *s == 0.0
}

/// The longest port-to-port latency a switch is believed to have: store-and-
/// forward boxes with deep buffers quote single-digit microseconds; a figure
/// a thousand times that is a typo (ms for us), not a switch.
pub const MAX_SWITCH_LATENCY_S: f64 = 1e-3;

/// The delay of one frame across `links` (MAC data rates, bits/s, with
/// names), with `mode` at every switch between them, each switch adding its
/// own `switch_latency_s` once it may send.
pub fn path_delay(links: &[(String, f64)], frame_bytes: u32, mode: SwitchMode, switch_latency_s: f64) -> Vec<HopDelay> {
    let on_wire = f64::from(frame_bytes + PREAMBLE) * 8.0;
    let header = f64::from(PREAMBLE + CUT_THROUGH_HEADER) * 8.0;
    let mut hops: Vec<HopDelay> = Vec::with_capacity(links.len());
    let mut started = 0.0;
    for (name, rate) in links {
        let serialization_s = on_wire / rate;
        let (switch, speed_change) = match hops.last() {
            None => (None, false),
            Some(prev) => {
                let speed_change = (prev.bits_per_sec - rate).abs() > f64::EPSILON * rate;
                let cut = mode == SwitchMode::CutThrough && !speed_change;
                let may_send = if cut { started + header / prev.bits_per_sec } else { prev.arrived_s };
                started = may_send + switch_latency_s;
                let used = if cut { SwitchMode::CutThrough } else { SwitchMode::StoreAndForward };
                (Some(used), speed_change && mode == SwitchMode::CutThrough)
            }
        };
        let switch_latency_s = if switch.is_some() { switch_latency_s } else { 0.0 };
        hops.push(HopDelay {
            link: name.clone(),
            bits_per_sec: *rate,
            serialization_s,
            switch,
            speed_change,
            switch_latency_s,
            arrived_s: started + serialization_s,
        });
    }
    hops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gbe(n: f64) -> (String, f64) {
        (format!("{n}GbE"), n * 1e9)
    }

    #[test]
    fn store_and_forward_adds_a_whole_frame_per_hop() {
        // 1518-byte frame + 8 preamble = 12 208 bits: 1.2208 us at 10 Gb/s.
        let hops = path_delay(&[gbe(10.0), gbe(10.0), gbe(10.0)], 1518, SwitchMode::StoreAndForward, 0.0);
        assert!((hops[0].serialization_s - 1.2208e-6).abs() < 1e-12);
        assert!((hops[2].arrived_s - 3.0 * 1.2208e-6).abs() < 1e-12);
    }

    #[test]
    fn cut_through_adds_only_the_header_where_speeds_match() {
        let same = path_delay(&[gbe(10.0), gbe(10.0), gbe(10.0)], 1518, SwitchMode::CutThrough, 0.0);
        // Two switches each wait for 22 bytes (preamble and header) = 17.6 ns.
        assert!((same[2].arrived_s - (1.2208e-6 + 2.0 * 17.6e-9)).abs() < 1e-12, "{same:?}");
        assert!(same.iter().all(|h| !h.speed_change));
        // 10 -> 25 -> 10: both switches change speed and must store and forward.
        let mixed = path_delay(&[gbe(10.0), gbe(25.0), gbe(10.0)], 1518, SwitchMode::CutThrough, 0.0);
        assert!(mixed[1].speed_change && mixed[2].speed_change);
        assert_eq!(mixed[1].switch, Some(SwitchMode::StoreAndForward));
        let sf = path_delay(&[gbe(10.0), gbe(25.0), gbe(10.0)], 1518, SwitchMode::StoreAndForward, 0.0);
        assert!((mixed[2].arrived_s - sf[2].arrived_s).abs() < 1e-15);
        // A 64-byte frame: 72 bytes on the wire, 57.6 ns at 10 Gb/s.
        let small = path_delay(&[gbe(10.0)], 64, SwitchMode::CutThrough, 0.0);
        assert!((small[0].arrived_s - 57.6e-9).abs() < 1e-15);
    }

    #[test]
    fn each_switch_adds_its_own_latency_once() {
        let links = [gbe(10.0), gbe(10.0), gbe(10.0)];
        let none = path_delay(&links, 1518, SwitchMode::CutThrough, 0.0);
        let with = path_delay(&links, 1518, SwitchMode::CutThrough, 600e-9);
        // Two switches: 1.2 us more at the far end, none at the sender.
        assert!((with[2].arrived_s - none[2].arrived_s - 1.2e-6).abs() < 1e-12, "{with:?}");
        assert_eq!(with[0].switch_latency_s, 0.0);
        assert!((with[1].arrived_s - none[1].arrived_s - 600e-9).abs() < 1e-12);
        // Store-and-forward: the same 600 ns per switch on top of the whole frame.
        let sf = path_delay(&links, 1518, SwitchMode::StoreAndForward, 600e-9);
        assert!((sf[2].arrived_s - (3.0 * 1.2208e-6 + 1.2e-6)).abs() < 1e-12, "{sf:?}");
    }
}
