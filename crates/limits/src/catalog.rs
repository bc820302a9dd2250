//! The link catalog: every link and bus technology headroom knows, with the
//! names users type for it.
//!
//! Two naming conventions meet here (docs/reference/links.md, "the one rule"): Ethernet is
//! named by its usable data rate (the line rate above it absorbs encoding and
//! FEC), while Fibre Channel, SATA, SAS, PCIe, USB and InfiniBand SDR..FDR are
//! named by their signalling rate, so the line encoding comes off the name.
//!
//! Long because it is a table: most of it is catalog entries with their
//! sources, then the lookup and its tests.

use serde::Serialize;
use std::sync::OnceLock;

/// The family a link belongs to; serialised as in `headroom.link/v1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Ethernet at every speed in the catalog.
    Ethernet,
    /// Fibre Channel (`8GFC`...).
    FibreChannel,
    /// Serial ATA links (SATA I, II, III).
    Sata,
    /// Serial Attached SCSI links.
    Sas,
    /// PCI Express, per generation and width.
    Pcie,
    /// USB ports and their signalling modes.
    Usb,
    /// InfiniBand links.
    Infiniband,
}

impl Family {
    /// The serialised word, e.g. `fibre-channel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Ethernet => "ethernet",
            Family::FibreChannel => "fibre-channel",
            Family::Sata => "sata",
            Family::Sas => "sas",
            Family::Pcie => "pcie",
            Family::Usb => "usb",
            Family::Infiniband => "infiniband",
        }
    }
}

/// One link technology at one speed (and, for PCIe, one width).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// Canonical name, e.g. `10GbE`, `8GFC`, `PCIe 3.0 x4`.
    pub name: String,
    /// The family it belongs to.
    pub family: Family,
    /// Symbols per second summed over all lanes (baud; GT/s for PCIe).
    pub signalling_baud: f64,
    /// Lanes the signalling rate is summed over (PCIe width, 4 for 40GBASE-R...).
    pub lanes: u32,
    /// Line encoding (and FEC where it costs bandwidth).
    pub encoding: String,
    /// Data rate left after encoding, per direction, bits/s. For Ethernet the
    /// rate MAC frames see; for the others the payload rate of the link.
    pub usable_bits_per_sec: f64,
    /// The figure vendors market in MB/s, where it differs from the usable
    /// rate (Fibre Channel's "800 MB/s" for 8GFC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominal_bytes_per_sec: Option<f64>,
    /// Caveats: unconfirmed figures, practical ceilings below the usable rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Names users type for it, normalised (lower case, no spaces, dashes or underscores).
    pub aliases: Vec<String>,
}

impl Link {
    /// `usable_bits_per_sec` in bytes per second.
    pub fn usable_bytes_per_sec(&self) -> f64 {
        self.usable_bits_per_sec / 8.0
    }
}

/// An unknown link name, with the closest known names.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unknown link '{input}'{}; `headroom link --list` shows every known name", did_you_mean(.suggestions))]
pub struct UnknownLink {
    /// The name as the user typed it.
    pub input: String,
    /// Known names closest to it, best first; may be empty.
    pub suggestions: Vec<String>,
}

fn did_you_mean(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", suggestions.join(", "))
    }
}

/// Lower case without spaces, dashes or underscores: `PCIe-Gen3 x16` -> `pciegen3x16`.
pub fn normalize(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, ' ' | '-' | '_')).flat_map(char::to_lowercase).collect()
}

/// Finds a link by any of its names, case-insensitively and forgiving of
/// spaces, dashes and underscores.
pub fn lookup(spec: &str) -> Result<&'static Link, UnknownLink> {
    let key = normalize(spec);
    let links = catalog();
    if let Some(link) = links.iter().find(|l| l.aliases.contains(&key)) {
        return Ok(link);
    }
    Err(UnknownLink { input: spec.to_string(), suggestions: closest_names(&key, links) })
}

/// Keys longer than this get no suggestions: no alias is longer than 20
/// characters, so such a key is not a typo of one, and comparing it with every
/// alias would make a long `--link` (or a hostile spec over the wire) slow.
const LONGEST_SUGGESTIBLE_KEY: usize = 32;

/// Jaro-Winkler similarity above which an alias is suggested.
const SUGGESTION_THRESHOLD: f64 = 0.75;

/// How many times each ASCII character occurs in `text`.
fn ascii_counts(text: &str) -> [u8; 128] {
    let mut counts = [0u8; 128];
    for b in text.bytes().filter(u8::is_ascii) {
        counts[usize::from(b)] = counts[usize::from(b)].saturating_add(1);
    }
    counts
}

/// False when the Jaro-Winkler similarity of the key and the (ASCII) alias
/// cannot exceed `threshold`, from character counts alone; true otherwise.
///
/// Jaro is (m/|k| + m/|a| + (m-t)/m) / 3 with m matching characters, at most
/// the characters the two share; Winkler adds at most 0.4 of what is left.
/// So similarity <= 0.4 + 0.6 * (m/|k| + m/|a| + 1) / 3, and most aliases are
/// ruled out without the quadratic comparison (it made lookups of unknown names
/// cost a millisecond each).
fn may_reach(key_counts: &[u8; 128], key_len: usize, alias: &str, threshold: f64) -> bool {
    let mut left = *key_counts;
    let mut shared = 0usize;
    for b in alias.bytes() {
        let slot = &mut left[usize::from(b & 0x7f)];
        if *slot > 0 {
            *slot -= 1;
            shared += 1;
        }
    }
    let (m, k, a) = (shared as f64, key_len as f64, alias.len() as f64);
    if shared == 0 || key_len == 0 {
        return false;
    }
    // The margin keeps rounding in strsim's arithmetic from ruling out a tie.
    0.4 + 0.6 * (m / k + m / a + 1.0) / 3.0 > threshold - 1e-9
}

/// Up to three canonical names whose aliases are closest to `key`.
fn closest_names(key: &str, links: &[Link]) -> Vec<String> {
    let key_len = key.chars().count();
    if key_len > LONGEST_SUGGESTIBLE_KEY {
        return Vec::new();
    }
    let key_counts = ascii_counts(key);
    let mut scored: Vec<(f64, &str)> = links
        .iter()
        .map(|l| {
            let best = l
                .aliases
                .iter()
                .filter(|a| may_reach(&key_counts, key_len, a, SUGGESTION_THRESHOLD))
                .map(|a| strsim::jaro_winkler(key, a))
                .fold(0.0, f64::max);
            (best, l.aliases[0].as_str())
        })
        .filter(|(score, _)| *score > SUGGESTION_THRESHOLD)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut names: Vec<String> = Vec::new();
    for (_, name) in scored {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
        if names.len() == 3 {
            break;
        }
    }
    names
}

/// The Ethernet entry whose data rate is `speed_mbps` (sysfs `speed`).
pub fn ethernet_by_speed_mbps(speed_mbps: u64) -> Option<&'static Link> {
    catalog()
        .iter()
        .find(|l| l.family == Family::Ethernet && (l.usable_bits_per_sec - speed_mbps as f64 * 1e6).abs() < 1.0)
}

/// The PCIe link at `gt_per_sec` (2.5, 5, 8, 16, 32, 64) and `width` lanes, as
/// sysfs reports a device's current link; any width is accepted.
pub fn pcie_link(gt_per_sec: f64, width: u32) -> Option<Link> {
    let generation = PCIE.iter().position(|g| (g.gt_per_sec - gt_per_sec).abs() < 0.01)?;
    Some(pcie_entry(generation + 1, width))
}

struct PcieGen {
    gt_per_sec: f64,
    /// Symbols per lane per second relative to GT/s (PAM4 carries 2 bits per symbol).
    baud_per_transfer: f64,
    encoding: &'static str,
    efficiency: f64,
}

const PCIE: [PcieGen; 6] = [
    PcieGen { gt_per_sec: 2.5, baud_per_transfer: 1.0, encoding: "8b/10b", efficiency: 0.8 },
    PcieGen { gt_per_sec: 5.0, baud_per_transfer: 1.0, encoding: "8b/10b", efficiency: 0.8 },
    PcieGen { gt_per_sec: 8.0, baud_per_transfer: 1.0, encoding: "128b/130b", efficiency: 128.0 / 130.0 },
    PcieGen { gt_per_sec: 16.0, baud_per_transfer: 1.0, encoding: "128b/130b", efficiency: 128.0 / 130.0 },
    PcieGen { gt_per_sec: 32.0, baud_per_transfer: 1.0, encoding: "128b/130b", efficiency: 128.0 / 130.0 },
    PcieGen {
        gt_per_sec: 64.0,
        baud_per_transfer: 0.5,
        encoding: "PAM4, 256-byte FLIT (236 bytes of TLPs)",
        efficiency: 236.0 / 256.0,
    },
];

const PCIE_WIDTHS: [u32; 5] = [1, 2, 4, 8, 16];

fn pcie_entry(generation: usize, width: u32) -> Link {
    let g = &PCIE[generation - 1];
    let mut aliases = Vec::new();
    for prefix in ["pcie", "pciegen", "pcigen", "gen"] {
        aliases.push(format!("{prefix}{generation}x{width}"));
        aliases.push(format!("{prefix}{generation}.0x{width}"));
    }
    aliases.dedup();
    Link {
        name: format!("PCIe {generation}.0 x{width}"),
        family: Family::Pcie,
        signalling_baud: g.gt_per_sec * 1e9 * g.baud_per_transfer * f64::from(width),
        lanes: width,
        encoding: g.encoding.into(),
        usable_bits_per_sec: g.gt_per_sec * 1e9 * g.efficiency * f64::from(width),
        nominal_bytes_per_sec: None,
        note: Some(if generation == 6 {
            "per direction; ~7.4 GB/s per lane is approximate; TLP headers cost another ~10%".into()
        } else {
            "per direction; TLP headers cost another ~10% (a Gen3 x4 NVMe drive tops out near 3.5 GB/s)".into()
        }),
        aliases,
    }
}

/// Builds a catalog entry; `aliases` are normalised here.
#[allow(clippy::too_many_arguments)]
fn entry(
    name: &str,
    family: Family,
    baud: f64,
    lanes: u32,
    encoding: &str,
    usable_bits: f64,
    nominal_bytes: Option<f64>,
    note: Option<&str>,
    aliases: &[&str],
) -> Link {
    let mut all = vec![normalize(name)];
    all.extend(aliases.iter().map(|a| normalize(a)));
    all.dedup();
    Link {
        name: name.into(),
        family,
        signalling_baud: baud,
        lanes,
        encoding: encoding.into(),
        usable_bits_per_sec: usable_bits,
        nominal_bytes_per_sec: nominal_bytes,
        note: note.map(Into::into),
        aliases: all,
    }
}

const E64B66B: f64 = 64.0 / 66.0;
const E8B10B: f64 = 0.8;
const E128B132B: f64 = 128.0 / 132.0;
/// 256b/257b transcoding with RS(528,514) FEC (32GFC, 128GFC).
const E256B257B_RS528: f64 = 256.0 / 257.0 * 514.0 / 528.0;
/// 256b/257b transcoding with RS(544,514) FEC (64GFC; 50/200/400G Ethernet lanes).
const E256B257B_RS544: f64 = 256.0 / 257.0 * 514.0 / 544.0;

/// Every link headroom knows, built once.
pub fn catalog() -> &'static [Link] {
    static CATALOG: OnceLock<Vec<Link>> = OnceLock::new();
    CATALOG.get_or_init(build_catalog)
}

fn build_catalog() -> Vec<Link> {
    let mut links = ethernet();
    links.extend(fibre_channel());
    links.extend(sata_and_sas());
    for generation in 1..=PCIE.len() {
        for width in PCIE_WIDTHS {
            links.push(pcie_entry(generation, width));
        }
    }
    links.extend(usb_and_thunderbolt());
    links.extend(infiniband());
    links
}

fn ethernet() -> Vec<Link> {
    use Family::Ethernet as E;
    let pam4 = "256b/257b + RS(544,514) FEC, PAM4";
    vec![
        entry(
            "10MbE",
            E,
            20e6,
            1,
            "Manchester (10BASE-T)",
            10e6,
            None,
            None,
            &["10m", "10mb", "10mbit", "10base-t", "10mbps"],
        ),
        entry(
            "100MbE",
            E,
            125e6,
            1,
            "4B5B + MLT-3 (100BASE-TX)",
            100e6,
            None,
            None,
            &["100m", "100mb", "100mbit", "100mbps", "100base-tx", "fast-ethernet", "fe"],
        ),
        entry(
            "1GbE",
            E,
            1.25e9,
            1,
            "8b/10b (1000BASE-X; 1000BASE-T: PAM-5 on 4 pairs)",
            1e9,
            None,
            None,
            &[
                "1g",
                "1gb",
                "1gbe",
                "1gbit",
                "1gbps",
                "1gige",
                "gige",
                "gigabit",
                "gigabit-ethernet",
                "1000m",
                "1000mb",
                "1000base-t",
                "1000base-sx",
                "1000base-lx",
                "1000base-x",
            ],
        ),
        entry(
            "2.5GbE",
            E,
            3.125e9,
            1,
            "8b/10b (2500BASE-X; 2.5GBASE-T: 64b/65b + LDPC, PAM-16)",
            2.5e9,
            None,
            None,
            &[
                "2.5g",
                "2.5gb",
                "2.5gbe",
                "2.5gbit",
                "2.5gbps",
                "2.5gbase-t",
                "2500base-t",
                "2500base-x",
                "nbase-t",
                "2.5gige",
            ],
        ),
        entry(
            "5GbE",
            E,
            5.15625e9,
            1,
            "64b/66b (5GBASE-R; 5GBASE-T: 64b/65b + LDPC)",
            5e9,
            None,
            None,
            &["5g", "5gb", "5gbit", "5gbps", "5gbase-t", "5gige"],
        ),
        entry(
            "10GbE",
            E,
            10.3125e9,
            1,
            "64b/66b (10GBASE-R)",
            10e9,
            None,
            None,
            &[
                "10g",
                "10gb",
                "10gbit",
                "10gbps",
                "10gige",
                "10gbase-t",
                "10gbase-sr",
                "10gbase-lr",
                "10gbase-r",
                "sfp+",
                "sfpplus",
            ],
        ),
        entry(
            "25GbE",
            E,
            25.78125e9,
            1,
            "64b/66b (25GBASE-R)",
            25e9,
            None,
            None,
            &["25g", "25gb", "25gbit", "25gbps", "25gbase-sr", "sfp28"],
        ),
        entry(
            "40GbE",
            E,
            4.0 * 10.3125e9,
            4,
            "64b/66b, 4 lanes",
            40e9,
            None,
            None,
            &["40g", "40gb", "40gbit", "40gbps", "40gbase-sr4", "qsfp+", "qsfpplus"],
        ),
        entry("50GbE", E, 26.5625e9, 1, pam4, 50e9, None, None, &["50g", "50gb", "50gbit", "50gbps", "sfp56"]),
        entry(
            "100GbE",
            E,
            4.0 * 25.78125e9,
            4,
            "64b/66b (+ RS(528,514) FEC), 4 lanes",
            100e9,
            None,
            None,
            &["100g", "100gb", "100gbit", "100gbps", "100gbase-sr4", "qsfp28"],
        ),
        entry(
            "200GbE",
            E,
            4.0 * 26.5625e9,
            4,
            pam4,
            200e9,
            None,
            None,
            &["200g", "200gb", "200gbit", "200gbps", "qsfp56"],
        ),
        entry(
            "400GbE",
            E,
            8.0 * 26.5625e9,
            8,
            pam4,
            400e9,
            None,
            None,
            &["400g", "400gb", "400gbit", "400gbps", "400gbase-sr8", "400gbase-dr8", "qsfp-dd", "qsfpdd", "osfp"],
        ),
        entry(
            "400GbE 4-lane",
            E,
            4.0 * 53.125e9,
            4,
            "256b/257b + RS(544,514) FEC, 4 x 106.25 Gb/s PAM4",
            400e9,
            None,
            Some("the same 400 Gb/s as the 8-lane 400GbE, over 4 x 100G lanes"),
            &["400gbe4", "400g4", "400gbe4x100g", "400g4x100g", "400gbase-dr4", "400gbase-fr4", "400gbase-lr4"],
        ),
        entry(
            "800GbE",
            E,
            8.0 * 53.125e9,
            8,
            "256b/257b + RS(544,514) FEC, 8 x 106.25 Gb/s PAM4",
            800e9,
            None,
            None,
            &["800g", "800gb", "800gbit", "800gbps", "osfp800", "800g-osfp"],
        ),
    ]
}

fn fibre_channel() -> Vec<Link> {
    // `baud` is symbols per second over all lanes; PAM4 (64GFC and up) carries
    // two bits per symbol, so 64GFC's 28.9 GBd is a 57.8 Gb/s line rate.
    let fc =
        |gfc: u32, baud: f64, bits_per_symbol: f64, lanes: u32, encoding: &str, efficiency: f64, note: Option<&str>| {
            let name = format!("{gfc}GFC");
            let aliases = [format!("{gfc}g-fc"), format!("fc{gfc}"), format!("{gfc}gfc"), format!("fc-{gfc}g")];
            let alias_refs: Vec<&str> = aliases.iter().map(String::as_str).collect();
            let nominal = f64::from(gfc) * 100e6;
            let usable = baud * bits_per_symbol * efficiency;
            entry(&name, Family::FibreChannel, baud, lanes, encoding, usable, Some(nominal), note, &alias_refs)
        };
    let unconfirmed = Some("encoding and FEC unconfirmed: usable rate is an estimate; vendors quote the nominal MB/s");
    vec![
        fc(1, 1.0625e9, 1.0, 1, "8b/10b", E8B10B, None),
        fc(2, 2.125e9, 1.0, 1, "8b/10b", E8B10B, None),
        fc(4, 4.25e9, 1.0, 1, "8b/10b", E8B10B, None),
        fc(8, 8.5e9, 1.0, 1, "8b/10b", E8B10B, None),
        fc(16, 14.025e9, 1.0, 1, "64b/66b", E64B66B, Some("vendors often quote the full-duplex sum: 3,200 MB/s")),
        fc(32, 28.05e9, 1.0, 1, "256b/257b + RS(528,514) FEC", E256B257B_RS528, unconfirmed),
        fc(64, 28.9e9, 2.0, 1, "256b/257b + RS(544,514) FEC, PAM4: 57.8 Gb/s", E256B257B_RS544, unconfirmed),
        fc(128, 4.0 * 28.05e9, 1.0, 4, "256b/257b + RS(528,514) FEC, 4 lanes", E256B257B_RS528, unconfirmed),
        fc(
            256,
            4.0 * 28.9e9,
            2.0,
            4,
            "256b/257b + RS(544,514) FEC, 4 lanes of PAM4: 231.2 Gb/s",
            E256B257B_RS544,
            unconfirmed,
        ),
    ]
}

fn sata_and_sas() -> Vec<Link> {
    use Family::{Sas, Sata};
    vec![
        entry(
            "SATA I",
            Sata,
            1.5e9,
            1,
            "8b/10b",
            1.2e9,
            None,
            None,
            &["sata1", "sata-i", "sata-1.5g", "sata150", "sata-1.5gbps", "sata1.0"],
        ),
        entry(
            "SATA II",
            Sata,
            3e9,
            1,
            "8b/10b",
            2.4e9,
            None,
            None,
            &["sata2", "sata-ii", "sata-3g", "sata300", "sata-3gbps", "sata2.0"],
        ),
        entry(
            "SATA III",
            Sata,
            6e9,
            1,
            "8b/10b",
            4.8e9,
            None,
            None,
            &["sata3", "sata-iii", "sata-6g", "sata600", "sata-6gbps", "sata3.0", "sata"],
        ),
        entry("SAS-1", Sas, 3e9, 1, "8b/10b", 2.4e9, None, None, &["sas1", "sas-3g", "sas3g", "sas-i"]),
        entry("SAS-2", Sas, 6e9, 1, "8b/10b", 4.8e9, None, None, &["sas2", "sas-6g", "sas6g", "sas-ii"]),
        entry("SAS-3", Sas, 12e9, 1, "8b/10b", 9.6e9, None, None, &["sas3", "sas-12g", "sas12g", "sas-iii"]),
        entry(
            "SAS-4",
            Sas,
            22.5e9,
            1,
            "128b/150b",
            22.5e9 * 128.0 / 150.0,
            None,
            Some("marketed as 24G SAS"),
            &["sas4", "sas-24g", "sas24g", "24g-sas", "sas-iv"],
        ),
    ]
}

fn usb_and_thunderbolt() -> Vec<Link> {
    use Family::Usb;
    // 13 bulk packets of 512 bytes per 125 us microframe.
    let usb2_bulk = 13.0 * 512.0 * 8000.0 * 8.0;
    vec![
        entry(
            "USB 2.0",
            Usb,
            480e6,
            1,
            "NRZI + bit stuffing",
            usb2_bulk,
            None,
            Some("480 Mb/s signalling; the bulk ceiling is ~53 MB/s and drives reach 30-42 MB/s"),
            &["usb2", "usb2.0", "usb-hs", "hi-speed-usb", "usb-high-speed"],
        ),
        entry(
            "USB 3.2 Gen 1",
            Usb,
            5e9,
            1,
            "8b/10b",
            4e9,
            None,
            Some("also sold as USB 3.0 / USB 3.1 Gen 1, \"5Gbps\""),
            &["usb3", "usb3.0", "usb3.1gen1", "usb3.2gen1", "usb3gen1", "usb-5g", "usb5gbps", "usb-ss"],
        ),
        entry(
            "USB 3.2 Gen 2",
            Usb,
            10e9,
            1,
            "128b/132b",
            10e9 * E128B132B,
            None,
            Some("also sold as USB 3.1 Gen 2, \"10Gbps\""),
            &["usb3.1", "usb3.1gen2", "usb3.2gen2", "usb3gen2", "usb-10g", "usb10gbps", "usb-ss+"],
        ),
        entry(
            "USB 3.2 Gen 2x2",
            Usb,
            20e9,
            2,
            "128b/132b, 2 lanes",
            20e9 * E128B132B,
            None,
            Some("\"20Gbps\""),
            &["usb3.2gen2x2", "usb3.2", "usb-20g", "usb20gbps", "usb3gen2x2"],
        ),
        entry(
            "USB4 20",
            Usb,
            20e9,
            2,
            "128b/132b, 2 lanes",
            20e9 * E128B132B,
            None,
            Some("USB4 Gen 2x2; tunnelled PCIe carries less"),
            &["usb4-20", "usb4gen2", "usb4-20g", "usb4gen2x2"],
        ),
        entry(
            "USB4 40",
            Usb,
            40e9,
            2,
            "128b/132b, 2 lanes",
            40e9 * E128B132B,
            None,
            Some("USB4 Gen 3x2; tunnelled PCIe ~32 Gb/s at best"),
            &["usb4", "usb4-40", "usb4gen3", "usb4-40g", "usb4gen3x2"],
        ),
        entry(
            "Thunderbolt 3",
            Usb,
            2.0 * 20.625e9,
            2,
            "64b/66b, 2 lanes; PCIe tunnel",
            22e9,
            None,
            Some(
                "40 Gb/s link; the PCIe tunnel (what NVMe enclosures use) carries ~22 Gb/s; real enclosures ~2800 MB/s",
            ),
            &["tb3", "thunderbolt3", "thunderbolt-3"],
        ),
        entry(
            "Thunderbolt 4",
            Usb,
            2.0 * 20.625e9,
            2,
            "64b/66b, 2 lanes; PCIe tunnel",
            32e9,
            None,
            Some("40 Gb/s link; the PCIe tunnel carries up to 32 Gb/s; real enclosures ~2800-3000 MB/s"),
            &["tb4", "thunderbolt4", "thunderbolt-4"],
        ),
    ]
}

fn infiniband() -> Vec<Link> {
    use Family::Infiniband as I;
    let ib = |name: &str, lane_baud: f64, encoding: &str, efficiency: f64, note: Option<&str>, aliases: &[&str]| {
        entry(name, I, 4.0 * lane_baud, 4, encoding, 4.0 * lane_baud * efficiency, None, note, aliases)
    };
    // PAM4 generations: the usable rate is taken as the marketed figure.
    let ib_pam4 = |name: &str, lane_baud: f64, marketed_bits: f64, aliases: &[&str]| {
        let approx = Some("PAM4 + FEC: usable rate is the marketed figure (unconfirmed)");
        ib(name, lane_baud, "PAM4 + RS FEC", marketed_bits / (4.0 * lane_baud), approx, aliases)
    };
    vec![
        ib("InfiniBand SDR 4x", 2.5e9, "8b/10b", E8B10B, None, &["ib-sdr", "sdr", "ibsdr", "ib-10g"]),
        ib("InfiniBand DDR 4x", 5e9, "8b/10b", E8B10B, None, &["ib-ddr", "ddr-ib", "ibddr", "ib-20g"]),
        ib("InfiniBand QDR 4x", 10e9, "8b/10b", E8B10B, None, &["ib-qdr", "qdr", "ibqdr", "ib-40g"]),
        ib("InfiniBand FDR10 4x", 10.3125e9, "64b/66b", E64B66B, None, &["ib-fdr10", "fdr10", "ibfdr10"]),
        ib(
            "InfiniBand FDR 4x",
            14.0625e9,
            "64b/66b",
            E64B66B,
            Some("marketed as 56 Gb/s"),
            &["ib-fdr", "fdr", "ibfdr", "ib-56g"],
        ),
        ib("InfiniBand EDR 4x", 25.78125e9, "64b/66b", E64B66B, None, &["ib-edr", "edr", "ibedr", "ib-100g"]),
        ib_pam4("InfiniBand HDR 4x", 26.5625e9, 200e9, &["ib-hdr", "hdr-ib", "ibhdr", "ib-200g"]),
        ib_pam4("InfiniBand NDR 4x", 53.125e9, 400e9, &["ib-ndr", "ndr", "ibndr", "ib-400g"]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_miss_gets_suggestions() {
        let err = lookup("10gbee").unwrap_err();
        assert!(err.suggestions.iter().any(|s| s == "10gbe"), "{err}");
    }

    #[test]
    fn a_key_far_longer_than_any_alias_gets_none() {
        let longest = catalog().iter().flat_map(|l| &l.aliases).map(|a| a.chars().count()).max().unwrap();
        assert!(longest * 3 / 2 <= LONGEST_SUGGESTIBLE_KEY, "an alias of {longest} characters: raise the bound");
        let err = lookup(&format!("10gbe{}", "x".repeat(40))).unwrap_err();
        assert!(err.suggestions.is_empty(), "{err}");
    }

    /// Every alias scored, no shortcut: what `closest_names` must return.
    fn closest_by_brute_force(key: &str) -> Vec<String> {
        let mut scored: Vec<(f64, &str)> = catalog()
            .iter()
            .map(|l| {
                (l.aliases.iter().map(|a| strsim::jaro_winkler(key, a)).fold(0.0, f64::max), l.aliases[0].as_str())
            })
            .filter(|(score, _)| *score > SUGGESTION_THRESHOLD)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut names: Vec<String> = Vec::new();
        for (_, name) in scored {
            if !names.iter().any(|n| n == name) && names.len() < 3 {
                names.push(name.to_string());
            }
        }
        names
    }

    #[test]
    fn the_character_count_shortcut_never_changes_a_suggestion() {
        let aliases: Vec<&String> = catalog().iter().flat_map(|l| &l.aliases).collect();
        assert!(aliases.iter().all(|a| a.is_ascii()), "may_reach assumes ASCII aliases");
        let mut keys: Vec<String> = vec![String::new(), "x".into(), "gbe".into(), "10".into(), "é10gbe".into()];
        for alias in &aliases {
            let chars: Vec<char> = alias.chars().collect();
            for i in [0, chars.len() / 2, chars.len() - 1] {
                let mut dropped = chars.clone();
                dropped.remove(i);
                keys.push(dropped.iter().collect());
                let mut swapped = chars.clone();
                swapped.swap(i, (i + 1) % chars.len());
                keys.push(swapped.iter().collect());
                let mut replaced = chars.clone();
                replaced[i] = 'q';
                keys.push(replaced.iter().collect());
            }
            keys.push(format!("{alias}s"));
            keys.push(format!("x{alias}"));
        }
        let shortcut_matters = keys.iter().filter(|k| !closest_by_brute_force(k).is_empty()).count();
        assert!(shortcut_matters > 500, "only {shortcut_matters} keys with suggestions: the test proves little");
        for key in &keys {
            assert_eq!(closest_names(key, catalog()), closest_by_brute_force(key), "key {key:?}");
        }
    }

    #[test]
    fn the_shortcut_rules_out_most_aliases_of_an_unrelated_name() {
        let key = "zfs-raidz";
        let counts = ascii_counts(key);
        let aliases: Vec<&String> = catalog().iter().flat_map(|l| &l.aliases).collect();
        let compared = aliases.iter().filter(|a| may_reach(&counts, key.len(), a, SUGGESTION_THRESHOLD)).count();
        assert!(compared * 10 < aliases.len(), "{compared} of {} aliases still compared", aliases.len());
    }
}
