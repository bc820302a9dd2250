//! What an SMB server answers headroom's client: NEGOTIATE, SESSION_SETUP
//! with an NTLM challenge, CREATE, READ, WRITE and error responses, parsed as
//! one message and received by a worker's engine as a stream of frames.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| headroom_proto::fuzzing::smb_server(data));
