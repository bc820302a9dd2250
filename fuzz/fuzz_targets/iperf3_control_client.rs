//! The iperf3 control protocol as headroom's iperf3 client reads it from an
//! untrusted server: states, the server's results JSON and what the client
//! derives from them (UDP receive figures, stream lookup by id).
#![no_main]

use headroom_net::iperf3::{self, Results};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = data;
    while let Ok(state) = iperf3::read_state(&mut r) {
        if state == iperf3::EXCHANGE_RESULTS {
            let Ok(v) = iperf3::read_json(&mut r, iperf3::MAX_RESULTS) else { return };
            let Ok(results) = Results::from_json(&v) else { return };
            assert!(results.streams.len() <= 2 * iperf3::MAX_STREAMS as usize);
            let udp = results.udp_received();
            let _ = udp.loss_ratio();
            let _ = results.streams.iter().find(|s| s.id == iperf3::stream_id(1)).map(|s| s.bytes);
            let _ = results.to_json();
        }
    }
});
