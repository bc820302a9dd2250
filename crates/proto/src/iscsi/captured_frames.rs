//! Decodes what a real tgt (1.0.85, Debian 12) sent headroom's iSCSI client
//! on loopback, stored under tests/frames/ by scripts/capture-frames.sh: the
//! PDU, login-text and SCSI parsers against a real target's bytes, without
//! root or network. Owns no logic of its own; must not re-implement what
//! pdu.rs and scsi.rs decode.

use super::pdu::{self, op, Header, BHS};
use super::scsi::{self, key, status};

/// Connection 0 of the capture: the setup connection (login, REPORT LUNS,
/// TEST UNIT READY answered with a unit attention and again, INQUIRY,
/// READ CAPACITY(16), logout).
const SETUP_CONNECTION: &[u8] = include_bytes!("../../tests/frames/iscsi-tgt.0.s2c");
/// Connection 1: the I/O connection (login, then 4 KiB READ(16)s).
const IO_CONNECTION: &[u8] = include_bytes!("../../tests/frames/iscsi-tgt.1.s2c");

/// The whole PDUs of a byte stream as (header, data segment), cut by the
/// header's own lengths as the session does (a capture ends mid-PDU: that tail is dropped).
fn pdus(mut stream: &[u8]) -> Vec<(Header, &[u8])> {
    let mut out = Vec::new();
    while let Some(bhs) = stream.get(..BHS) {
        let h = Header::parse(bhs.try_into().unwrap()).unwrap();
        let Some(rest) = stream.get(BHS..BHS + h.rest_len()) else { break };
        out.push((h, &rest[h.ahs_len..h.ahs_len + h.data_len]));
        stream = &stream[BHS + h.rest_len()..];
    }
    out
}

#[test]
fn tgt_login_response_moves_to_full_feature_with_its_operational_keys() {
    let p = pdus(SETUP_CONNECTION);
    let (h, data) = p[0];
    assert_eq!(h.opcode, op::LOGIN_RESP);
    // Transit, from operational negotiation (1) to full feature phase (3).
    assert_eq!((h.flags & 0x80, (h.flags >> 2) & 3, h.flags & 3), (0x80, 1, 3));
    assert_eq!(pdu::login_status((h.word36 >> 24) as u8, (h.word36 >> 16) as u8), pdu::login_status(0, 0));
    assert_eq!(h.word36 >> 16, 0, "login status class and detail: success");
    assert!(h.carries_window());
    assert!(pdu::sn_gt(h.max_cmd_sn, h.exp_cmd_sn) || h.max_cmd_sn == h.exp_cmd_sn);
    let pairs = pdu::parse_text(data).unwrap();
    let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert_eq!(pairs.len(), 14, "{pairs:?}");
    assert_eq!(get("HeaderDigest"), Some("None"));
    assert_eq!(get("MaxBurstLength").and_then(pdu::number), Some(262_144));
    assert_eq!(get("FirstBurstLength").and_then(pdu::number), Some(65_536));
    assert_eq!((get("ImmediateData"), get("InitialR2T")), (Some("Yes"), Some("Yes")));
}

#[test]
fn tgt_report_luns_inquiry_and_read_capacity_16_decode_to_its_64_mib_lun() {
    let p = pdus(SETUP_CONNECTION);
    let ops: Vec<u8> = p.iter().map(|(h, _)| h.opcode).collect();
    assert_eq!(
        ops,
        [op::LOGIN_RESP, op::DATA_IN, op::SCSI_RESP, op::SCSI_RESP, op::DATA_IN, op::DATA_IN, op::LOGOUT_RESP]
    );
    // The initiator task tags headroom chose come back in order.
    let itts: Vec<u32> = p.iter().map(|(h, _)| h.itt).collect();
    assert_eq!(itts, [0, 1, 2, 3, 4, 5, 6]);

    let (luns, _) = p[1];
    assert_eq!(luns.flags & 0x81, 0x81, "final, with status");
    // LUN 0 is tgt's controller, LUN 1 the backing file.
    assert_eq!(scsi::parse_report_luns(p[1].1), [0, 1]);

    let (inquiry, data) = p[4];
    assert_eq!(inquiry.byte3, status::GOOD);
    assert_eq!(data[0] & scsi::PERIPHERAL_TYPE_MASK, scsi::DIRECT_ACCESS);
    assert_eq!(&data[8..16], b"IET     ");

    let (capacity, data) = p[5];
    assert_eq!((capacity.byte3, capacity.data_len), (status::GOOD, 32));
    assert_eq!(scsi::parse_capacity(data), Some((131_072, 512)), "64 MiB of 512-byte blocks");
}

#[test]
fn tgt_unit_attention_sense_is_named() {
    let p = pdus(SETUP_CONNECTION);
    let (h, data) = p[2];
    assert_eq!((h.opcode, h.byte2, h.byte3), (op::SCSI_RESP, 0, status::CHECK_CONDITION));
    // The data segment is SenseLength then the sense bytes.
    let len = usize::from(u16::from_be_bytes([data[0], data[1]]));
    let sense = &data[2..2 + len];
    let s = scsi::parse_sense(sense).unwrap();
    assert_eq!((s.key, s.asc, s.ascq), (key::UNIT_ATTENTION, 0x29, 0));
    assert_eq!(
        scsi::describe_status(h.byte3, sense),
        "SCSI status CHECK CONDITION: UNIT ATTENTION, power on, reset or bus device reset occurred (ASC/ASCQ 0x29/0x00)"
    );
    // TEST UNIT READY again: GOOD, no sense.
    assert_eq!((p[3].0.byte3, p[3].0.data_len), (status::GOOD, 0));
}

#[test]
fn tgt_read_data_in_pdus_carry_4_kib_with_status() {
    let p = pdus(IO_CONNECTION);
    assert_eq!((p[0].0.opcode, p[0].0.flags & 3), (op::LOGIN_RESP, 3));
    let reads: Vec<&(Header, &[u8])> = p.iter().filter(|(h, _)| h.opcode == op::DATA_IN).collect();
    assert!(reads.len() >= 2, "{} reads", reads.len());
    for (h, data) in reads {
        assert_eq!((h.data_len, data.len(), h.flags & 0x81, h.byte3), (4096, 4096, 0x81, status::GOOD));
        assert_eq!(h.word40, 0, "buffer offset: one PDU per read");
    }
}
