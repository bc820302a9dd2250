//! The headroom wire as a server reads it from an untrusted peer: the
//! greeting and hello, the answer to the authentication challenge, control
//! requests; and the same bytes as UDP datagrams of a test (both headers) fed
//! to the receive accounting.
#![no_main]

use headroom_net::wire::{self, AuthAnswer, Hello, Request};
use headroom_net::{UdpHeader, UdpRecvStats};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = data;
    if let Ok(Some(opening)) = wire::read_opening(&mut r) {
        match opening.hello {
            Hello::Control { .. } => {}
            Hello::Stream { session, proof, .. } | Hello::Rr { session, proof, .. } => {
                let _ = wire::key_from_hex(&session);
                let keys = wire::SessionKeys::derived("fuzz-token", &[7; wire::NONCE_LEN], &[8; wire::NONCE_LEN]);
                assert!(!wire::SessionKeys::proves(&keys.stream_proof(1, 0), &proof) || proof.len() == 32);
            }
        }
        if let Ok(answer) = wire::read_frame::<AuthAnswer>(&mut r, wire::MAX_HELLO) {
            if let (Some(theirs), Some(proof)) =
                (wire::from_hex::<{ wire::NONCE_LEN }>(&answer.nonce), wire::from_hex::<32>(&answer.proof))
            {
                assert!(!wire::auth_verify("fuzz-token", &[7; wire::NONCE_LEN], &theirs, &proof));
            }
        }
        while let Ok(req) = wire::read_frame::<Request>(&mut r, wire::MAX_FRAME) {
            let _ = serde_json::to_vec(&req);
        }
    }
    for header in [UdpHeader::Headroom { key: [0; wire::KEY_LEN] }, UdpHeader::Iperf3 { seq64: true }] {
        let mut stats = UdpRecvStats::default();
        for datagram in data.chunks(wire::UDP_HEADER_LEN) {
            if let Some((seq, sent_s)) = header.parse(datagram) {
                stats.record(seq, sent_s, 1.0, datagram.len());
                let _ = stats.summary.loss_ratio();
            }
        }
    }
});
