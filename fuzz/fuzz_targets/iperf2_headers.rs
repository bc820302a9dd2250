//! What stock iperf 2 peers send headroom: a client's TCP settings header
//! and UDP datagram as `serve --iperf2` reads them, and a server's UDP report
//! as `net --protocol iperf2 --udp` reads it, held against what was sent.
#![no_main]

use headroom_net::iperf2::{self, UdpSent};
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 4 {
        let flags = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        if let Ok(len) = iperf2::header_len(flags) {
            assert!(len <= iperf2::MAX_HEADER_LEN);
        }
    }
    if let Ok(ask) = iperf2::parse_header(data) {
        assert!(ask.streams >= 1);
        // What was read, written as this side's client writes it, reads back the same.
        let again = iperf2::client_header(ask.streams, 5001, ask.amount, ask.direction);
        let back = iperf2::parse_header(&again).expect("a header written here reads back");
        assert_eq!((back.streams, back.direction, back.amount), (ask.streams, ask.direction, ask.amount));
    }
    let _ = iperf2::udp_datagram_id(data);
    // What this side sent, from the first 12 bytes: a window of at most a day,
    // as long as a test can run.
    let Some((sent, report)) = data.split_at_checked(12) else { return };
    let word = |i: usize| u32::from_be_bytes([sent[i], sent[i + 1], sent[i + 2], sent[i + 3]]);
    let sent = UdpSent {
        datagrams: u64::from(word(0)),
        bytes: u64::from(word(4)) << 8,
        window: Duration::from_millis(u64::from(word(8) % 86_400_000)),
    };
    if let Ok(r) = iperf2::parse_udp_report(report, &sent) {
        assert!(r.datagrams <= sent.datagrams && r.bytes <= sent.bytes);
        assert!(r.out_of_order <= r.datagrams && r.lost <= r.datagrams as i64);
        // What a server would answer with these figures reads back the same.
        let again = iperf2::udp_report(&r, 128).expect("room for a report");
        let back = iperf2::parse_udp_report(&again, &sent).expect("a report written here reads back");
        assert_eq!(
            (back.bytes, back.datagrams, back.lost, back.out_of_order),
            (r.bytes, r.datagrams, r.lost, r.out_of_order)
        );
    }
});
