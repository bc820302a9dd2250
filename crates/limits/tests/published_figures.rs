//! Every catalog entry and formula checked against the figures of
//! docs/reference/links.md and lab.md.

use headroom_limits::*;

fn close(actual: f64, expected: f64, rel: f64) -> bool {
    (actual - expected).abs() <= rel * expected.abs()
}

#[track_caller]
fn assert_close(actual: f64, expected: f64, rel: f64) {
    assert!(close(actual, expected, rel), "{actual} is not within {rel} of {expected}");
}

fn mbytes(spec: &str) -> f64 {
    lookup(spec).unwrap().usable_bytes_per_sec() / 1e6
}

#[test]
fn issue_examples_hold() {
    let gbe = lookup("1gbe").unwrap();
    let f = Framing::default();
    let tcp = f.tcp_goodput_bits(gbe.usable_bits_per_sec);
    assert_close(tcp, 941.48e6, 1e-5);
    assert_close(tcp / 8.0, 117.69e6, 1e-4);
    assert_close(tcp / 8.0 / 1_048_576.0, 112.23, 1e-4);
    let no_ts = Framing { tcp_timestamps: false, ..f };
    assert_close(no_ts.tcp_goodput_bits(1e9), 949.28e6, 1e-5);
    let jumbo = Framing { mtu: 9000, ..f };
    assert_close(jumbo.tcp_goodput_bits(1e9), 990.04e6, 1e-5);
    assert_close(f.udp_goodput_bits(1e9), 957.09e6, 1e-5);
    assert_close(f.iscsi_goodput_bits(1e9), 936.0e6, 1e-4);
    assert_close(mbytes("sata3"), 600.0, 1e-9);
    assert_close(mbytes("pcie3x4"), 3938.0, 2e-4);
    let fc8 = lookup("8gfc").unwrap();
    assert_close(fc8.usable_bytes_per_sec() / 1e6, 850.0, 1e-9);
    assert_eq!(fc8.nominal_bytes_per_sec, Some(800e6));
    assert_close(lookup("ib-fdr").unwrap().usable_bits_per_sec / 1e9, 54.55, 1e-4);
}

#[test]
fn ethernet_is_named_by_its_data_rate() {
    let expected = [
        ("10m", 0.01),
        ("100m", 0.1),
        ("1g", 1.0),
        ("2.5g", 2.5),
        ("5g", 5.0),
        ("10g", 10.0),
        ("25g", 25.0),
        ("40g", 40.0),
        ("50g", 50.0),
        ("100g", 100.0),
        ("200g", 200.0),
        ("400g", 400.0),
        ("800g", 800.0),
    ];
    for (spec, gbps) in expected {
        let link = lookup(spec).unwrap();
        assert_eq!(link.family, Family::Ethernet, "{spec}");
        assert_close(link.usable_bits_per_sec, gbps * 1e9, 1e-12);
    }
    assert_close(lookup("1000base-x").unwrap().signalling_baud, 1.25e9, 1e-12);
    assert_close(lookup("10gbe").unwrap().signalling_baud, 10.3125e9, 1e-12);
    assert_close(lookup("25gbe").unwrap().signalling_baud, 25.78125e9, 1e-12);
    assert!(lookup("800g").unwrap().encoding.contains("106.25"));
}

#[test]
fn fibre_channel_rows() {
    // (name, GBd total (symbols: PAM4 from 64GFC on carries two bits each),
    // encoding contains, nominal MB/s, usable MB/s)
    let rows = [
        ("1gfc", 1.0625, "8b/10b", 100.0, 106.25),
        ("2gfc", 2.125, "8b/10b", 200.0, 212.5),
        ("4gfc", 4.25, "8b/10b", 400.0, 425.0),
        ("8gfc", 8.5, "8b/10b", 800.0, 850.0),
        ("16gfc", 14.025, "64b/66b", 1600.0, 1700.0),
        ("32gfc", 28.05, "256b/257b", 3200.0, 3400.0),
        ("64gfc", 28.9, "256b/257b", 6400.0, 6800.0),
        ("128gfc", 112.2, "256b/257b", 12800.0, 13600.0),
        ("256gfc", 115.6, "256b/257b", 25600.0, 27200.0),
    ];
    for (spec, gbd, enc, nominal, usable) in rows {
        let l = lookup(spec).unwrap();
        assert_eq!(l.family, Family::FibreChannel);
        assert_close(l.signalling_baud, gbd * 1e9, 1e-9);
        assert!(l.encoding.contains(enc), "{spec}: {}", l.encoding);
        assert_close(l.nominal_bytes_per_sec.unwrap(), nominal * 1e6, 1e-12);
        // FEC-coded speeds are estimates (unconfirmed) within 1% of 106.25% nominal.
        assert_close(l.usable_bytes_per_sec(), usable * 1e6, 0.01);
        if ["32", "64", "128", "256"].iter().any(|g| spec.starts_with(g)) {
            assert!(l.note.as_deref().unwrap().contains("unconfirmed"), "{spec}");
        }
    }
}

#[test]
fn sata_sas_rows() {
    for (spec, mbps) in [
        ("sata1", 150.0),
        ("sata2", 300.0),
        ("sata3", 600.0),
        ("sas1", 300.0),
        ("sas2", 600.0),
        ("sas3", 1200.0),
        ("sas4", 2400.0),
    ] {
        assert_close(mbytes(spec), mbps, 1e-9);
    }
    assert_eq!(lookup("sas-24g").unwrap().encoding, "128b/150b");
}

#[test]
fn pcie_every_generation_and_width() {
    let per_lane_gbytes = [0.250, 0.500, 0.985, 1.969, 3.938, 7.375];
    for (i, per_lane) in per_lane_gbytes.iter().enumerate() {
        let generation = i + 1;
        for width in [1u32, 2, 4, 8, 16] {
            let spec = format!("pcie{generation}x{width}");
            let l = lookup(&spec).unwrap();
            assert_eq!(l.family, Family::Pcie);
            assert_eq!(l.lanes, width);
            assert_close(l.usable_bytes_per_sec(), per_lane * 1e9 * f64::from(width), 1e-3);
            assert_eq!(lookup(&format!("pcie-gen{generation}-x{width}")).unwrap().name, l.name);
        }
    }
    let from_sysfs = pcie_link(8.0, 4).unwrap();
    assert_eq!(from_sysfs.name, "PCIe 3.0 x4");
    assert!(pcie_link(3.0, 4).is_none());
}

#[test]
fn usb_thunderbolt_rows() {
    assert_close(mbytes("usb2"), 53.248, 1e-9);
    assert_close(mbytes("usb3.2gen1"), 500.0, 1e-9);
    assert_close(mbytes("usb3.2gen2"), 1212.1, 1e-4);
    assert_close(mbytes("usb3.2gen2x2"), 2424.2, 1e-4);
    assert_close(lookup("usb4").unwrap().signalling_baud, 40e9, 1e-12);
    assert_close(lookup("tb3").unwrap().usable_bits_per_sec, 22e9, 1e-12);
    assert_close(lookup("tb4").unwrap().usable_bits_per_sec, 32e9, 1e-12);
}

#[test]
fn infiniband_rows() {
    for (spec, gbps) in [
        ("ib-sdr", 8.0),
        ("ib-ddr", 16.0),
        ("ib-qdr", 32.0),
        ("ib-fdr10", 40.0),
        ("ib-fdr", 54.545),
        ("ib-edr", 100.0),
        ("ib-hdr", 200.0),
        ("ib-ndr", 400.0),
    ] {
        let l = lookup(spec).unwrap();
        assert_eq!(l.family, Family::Infiniband);
        assert_close(l.usable_bits_per_sec, gbps * 1e9, 1e-4);
    }
}

#[test]
fn aliases_are_forgiving() {
    let same = [
        ("1gbe", "1GbE"),
        ("1G", "1GbE"),
        ("gigabit", "1GbE"),
        ("1000BASE-T", "1GbE"),
        ("10GbE", "10GbE"),
        ("sfp+", "10GbE"),
        ("SFP+", "10GbE"),
        ("2.5GBASE-T", "2.5GbE"),
        ("sata3", "SATA III"),
        ("sata-6g", "SATA III"),
        ("pcie4x4", "PCIe 4.0 x4"),
        ("pcie-gen3-x16", "PCIe 3.0 x16"),
        ("PCIe 3.0 x4", "PCIe 3.0 x4"),
        ("16gfc", "16GFC"),
        ("ib-fdr", "InfiniBand FDR 4x"),
        ("usb3.2gen2", "USB 3.2 Gen 2"),
        ("tb4", "Thunderbolt 4"),
        ("TB4", "Thunderbolt 4"),
    ];
    for (alias, name) in same {
        assert_eq!(lookup(alias).map(|l| l.name.as_str()), Ok(name), "{alias}");
    }
}

#[test]
fn every_alias_is_unique() {
    let mut seen = std::collections::HashMap::new();
    for l in catalog() {
        for a in &l.aliases {
            if let Some(other) = seen.insert(a.clone(), l.name.clone()) {
                assert_eq!(other, l.name, "alias {a} names two links");
            }
        }
    }
}

#[test]
fn unknown_links_suggest_close_names() {
    let err = lookup("10gbx").unwrap_err();
    assert!(err.suggestions.iter().any(|s| s == "10gbe"), "{err}");
    assert!(err.to_string().contains("headroom link --list"));
    assert!(lookup("").is_err());
}

#[test]
fn framing_details() {
    let f = Framing::default();
    assert_eq!(f.wire_bytes(), 1538);
    assert_eq!(f.tcp_payload(), 1448);
    let v6 = Framing { ip: IpVersion::V6, vlan_tags: 1, ..f };
    assert_eq!(v6.tcp_payload(), 1428);
    assert_eq!(v6.wire_bytes(), 1542);
    // A full 1518-byte frame takes 12.144 us on 1 GbE.
    assert_close(f.frame_serialization_s(1e9), 12.144e-6, 1e-9);
    assert!(Framing { mtu: 575, ..f }.validate().is_err());
    assert!(Framing { mtu: 9217, ..f }.validate().is_err());
    assert!(Framing { vlan_tags: 3, ..f }.validate().is_err());
    assert!(Framing { iscsi_segment: 100, ..f }.validate().is_err());
    assert!(Framing { mtu: 9216, ..f }.validate().is_ok());
}

#[test]
fn tbf_ceilings_match_lab_measurements() {
    let f = Framing::default();
    assert_close(tbf_tcp_goodput_bits(1e9, &f), 956.4e6, 1e-4);
    // docs/reference/lab.md: stock iperf3 measured 956.5 / 2391 / 992.6 / 2481 Mb/s.
    assert_close(tbf_tcp_goodput_bits(2.5e9, &f), 2391e6, 2e-3);
    let jumbo = Framing { mtu: 9000, ..f };
    assert_close(tbf_tcp_goodput_bits(1e9, &jumbo), 992.6e6, 1e-3);
    assert_close(tbf_tcp_goodput_bits(2.5e9, &jumbo), 2481e6, 1e-3);
    let emulate = tbf_rate_emulating(1e9, &f);
    assert_close(tbf_tcp_goodput_bits(emulate, &f), f.tcp_goodput_bits(1e9), 1e-12);
}

#[test]
fn ethernet_from_sysfs_speed() {
    assert_eq!(ethernet_by_speed_mbps(10000).unwrap().name, "10GbE");
    assert_eq!(ethernet_by_speed_mbps(2500).unwrap().name, "2.5GbE");
    assert!(ethernet_by_speed_mbps(1234).is_none());
}

#[test]
fn four_hundred_gigabit_ethernet_has_its_8_and_4_lane_variants() {
    // 400GBASE-SR8/DR8: 8 x 26.5625 GBd PAM4; DR4/FR4/LR4: 4 x 53.125 GBd PAM4.
    for (spec, lanes, gbd) in [("400gbe", 8, 212.5), ("400gbase-dr4", 4, 212.5), ("400gbe 4-lane", 4, 212.5)] {
        let l = lookup(spec).unwrap();
        assert_eq!((l.family, l.lanes), (Family::Ethernet, lanes), "{spec}");
        assert_close(l.signalling_baud, gbd * 1e9, 1e-12);
        assert_close(l.usable_bits_per_sec, 400e9, 1e-12);
    }
    assert_ne!(lookup("400gbase-fr4").unwrap().name, lookup("400gbase-sr8").unwrap().name);
}
