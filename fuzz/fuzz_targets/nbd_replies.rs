//! What an NBD server says to headroom's client through libnbd: the fixed
//! newstyle negotiation, then simple and structured replies to a read and a
//! write, served over a socketpair.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| headroom_proto::fuzzing::nbd_server(data));
