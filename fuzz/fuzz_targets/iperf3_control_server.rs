//! The iperf3 control protocol as `headroom serve --iperf3` reads it from an
//! untrusted client: the cookie, the parameter JSON and what the server
//! derives from it, the end-of-test state and the client's results.
#![no_main]

use headroom_net::iperf3::{self, Params, Results};
use libfuzzer_sys::fuzz_target;
use std::io::Read;

fuzz_target!(|data: &[u8]| {
    let mut r = data;
    let mut cookie = [0u8; iperf3::COOKIE_LEN];
    if r.read_exact(&mut cookie).is_err() {
        return;
    }
    let _ = iperf3::cookie_is_valid(&cookie);
    let Ok(params) = iperf3::read_json(&mut r, iperf3::MAX_PARAMS) else { return };
    if let Ok(p) = Params::from_json(&params) {
        assert!((1..=2 * iperf3::MAX_STREAMS).contains(&p.total_streams()));
        let _ = p.bytes_per_stream();
        assert_eq!(Params::from_json(&p.to_json()).map(|q| q.total_streams()), Ok(p.total_streams()));
    }
    let _ = iperf3::read_state(&mut r);
    if let Ok(v) = iperf3::read_json(&mut r, iperf3::MAX_RESULTS) {
        let _ = Results::from_json(&v);
    }
});
