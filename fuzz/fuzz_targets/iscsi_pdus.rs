//! What an iSCSI target sends headroom's initiator: login key=value text,
//! R2T, Data-In, SCSI responses with sense, NOP-In, reject and asynchronous
//! messages, processed by a session with commands outstanding.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| headroom_proto::fuzzing::iscsi_target(data));
