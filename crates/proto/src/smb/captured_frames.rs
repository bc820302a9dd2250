//! Decodes what a real Samba (4.17, Debian 12) sent headroom's client on
//! loopback, stored under tests/frames/ by scripts/capture-frames.sh: the
//! wire parsers against a real server's bytes, without root or network.
//! Owns no logic of its own; must not re-implement what wire.rs decodes.

use super::wire::{self, status, Command};

/// Connection 2 of the capture: the I/O connection (negotiate, two session
/// setup legs, tree connect, create, then 4 KiB reads).
const IO_CONNECTION: &[u8] = include_bytes!("../../tests/frames/smb-samba.2.s2c");

/// The whole frames of a direct-TCP byte stream, split on their length
/// prefix as the client does (a capture ends mid-frame: that tail is dropped).
fn frames(mut stream: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some(prefix) = stream.get(..4) {
        let len = wire::frame_len(prefix.try_into().unwrap()).unwrap();
        let Some(frame) = stream.get(4..4 + len) else { break };
        out.push(frame);
        stream = &stream[4 + len..];
    }
    out
}

#[test]
fn samba_negotiate_response_names_dialect_3_0_2_and_its_transfer_limits() {
    let f = frames(IO_CONNECTION);
    let h = wire::parse_header(f[0]).unwrap();
    assert_eq!((h.command, h.status.0, h.message_id), (Command::Negotiate as u16, status::SUCCESS, 0));
    let n = wire::parse_negotiate(&f[0][wire::HEADER..], &[]).unwrap();
    assert_eq!(n.dialect, 0x0302);
    assert_eq!(wire::dialect_name(n.dialect), "3.0.2");
    assert!(!n.signing_required, "the capture's smbd signs only when asked");
    // The capture set three different limits: a field read from its neighbour shows.
    assert_eq!((n.max_transact, n.max_read, n.max_write), (4 << 20, 1 << 20, 2 << 20));
}

#[test]
fn samba_session_setup_legs_carry_the_challenge_then_the_session() {
    let f = frames(IO_CONNECTION);
    let first = wire::parse_header(f[1]).unwrap();
    assert_eq!((first.command, first.status.0), (Command::SessionSetup as u16, status::MORE_PROCESSING_REQUIRED));
    let (flags, token) = wire::parse_session_setup(&f[1][wire::HEADER..]).unwrap();
    assert_eq!(flags, 0);
    // NTLMSSP message type 2: the server's challenge.
    assert_eq!(&token[..12], b"NTLMSSP\0\x02\0\0\0");
    assert_eq!(token.len(), 104);

    let second = wire::parse_header(f[2]).unwrap();
    assert_eq!(
        (second.command, second.status.0, second.message_id),
        (Command::SessionSetup as u16, status::SUCCESS, 2)
    );
    assert_eq!(second.session_id, first.session_id);
    assert_ne!(second.session_id, 0);
    assert_eq!(second.credits, 257);
    let (flags, token) = wire::parse_session_setup(&f[2][wire::HEADER..]).unwrap();
    assert_eq!(flags & wire::SESSION_FLAG_GUEST_OR_NULL, 0, "a user's session, not a guest's");
    assert!(token.is_empty());
}

#[test]
fn samba_create_and_read_responses_give_the_file_and_its_data() {
    let f = frames(IO_CONNECTION);
    let tree = wire::parse_header(f[3]).unwrap();
    assert_eq!(tree.command, Command::TreeConnect as u16);
    assert_ne!(tree.tree_id, 0);

    let create = wire::parse_header(f[4]).unwrap();
    assert_eq!((create.command, create.tree_id), (Command::Create as u16, tree.tree_id));
    let (id, end_of_file) = wire::parse_create(&f[4][wire::HEADER..]).unwrap();
    assert_eq!(end_of_file, 1 << 20, "the 1 MiB test file");
    assert_ne!(id, [0u8; 16]);

    let reads = &f[5..];
    assert!(reads.len() >= 2, "{} read responses", reads.len());
    for (i, r) in reads.iter().enumerate() {
        let h = wire::parse_header(r).unwrap();
        assert_eq!((h.command, h.status.0, h.message_id), (Command::Read as u16, status::SUCCESS, 5 + i as u64));
        assert_eq!(h.flags & wire::FLAG_ASYNC, 0);
        let (offset, len) = wire::parse_read(&r[wire::HEADER..]).unwrap();
        assert_eq!((offset, len), (wire::HEADER + 16, 4096));
        assert_eq!(offset + len, r.len(), "the data ends the frame");
    }
}
