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

/// The encrypted capture (`server smb encrypt = required`, `server min
/// protocol = SMB3_11`): what headroom sent, and what Samba answered.
const ENCRYPTED_C2S: &[u8] = include_bytes!("../../tests/frames/smb-samba-encrypted.0.c2s");
const ENCRYPTED_S2C: &[u8] = include_bytes!("../../tests/frames/smb-samba-encrypted.0.s2c");

/// From the capture's bytes and the lab password alone: the preauthentication
/// hash over the login, the session key from the NTLMv2 response, the 3.1.1
/// signing key that checks Samba's signature on its last SESSION_SETUP
/// answer, and the cipher keys that open Samba's encrypted answers and our
/// own encrypted requests.
#[test]
fn samba_encrypted_311_session_opens_with_keys_from_the_password() {
    use super::seal::Sealer;
    use super::sign::{preauth_chain, SigningKey, FLAGS_OFFSET, SIGNATURE_OFFSET};
    let (c2s, s2c) = (frames(ENCRYPTED_C2S), frames(ENCRYPTED_S2C));
    let offered = crate::url::SmbCipher::ALL;
    let neg = wire::parse_negotiate(&s2c[0][wire::HEADER..], &offered).unwrap();
    assert_eq!(neg.dialect, wire::SMB_311);
    let cipher = neg.cipher.expect("Samba picked a cipher");
    let mut preauth = [0u8; 64];
    for m in [c2s[0], s2c[0], c2s[1], s2c[1], c2s[2]] {
        preauth = preauth_chain(&preauth, &[m]);
    }
    // The NTLMv2 response inside our AUTHENTICATE (its NtChallengeResponse fields at 20).
    let req = &c2s[2][wire::HEADER..];
    let (off, len) = (wire::le16(req, 12) as usize - wire::HEADER, wire::le16(req, 14) as usize);
    let auth = &req[off..off + len];
    let (nt_len, nt_off) = (wire::le16(auth, 20) as usize, wire::le32(auth, 24) as usize);
    let id = super::ntlm::Identity { user: "root", password: "frames-pw", domain: "" };
    let key = super::ntlm::session_base_key(&id, &auth[nt_off..nt_off + nt_len]);

    let done = wire::parse_header(s2c[2]).unwrap();
    assert_eq!((done.command, done.status.0), (Command::SessionSetup as u16, status::SUCCESS));
    let (flags, _) = wire::parse_session_setup(&s2c[2][wire::HEADER..]).unwrap();
    assert_ne!(flags & wire::SESSION_FLAG_ENCRYPT_DATA, 0, "Samba encrypts the session");
    let mut signed = s2c[2].to_vec();
    let theirs: [u8; 16] = signed[SIGNATURE_OFFSET..SIGNATURE_OFFSET + 16].try_into().unwrap();
    assert_ne!(wire::le32(&signed, FLAGS_OFFSET) & super::sign::FLAGS_SIGNED, 0);
    let (header, body) = signed.split_at_mut(wire::HEADER);
    SigningKey::for_dialect(wire::SMB_311, key, &preauth).sign_in_place(header, &[body]);
    assert_eq!(header[SIGNATURE_OFFSET..SIGNATURE_OFFSET + 16], theirs, "Samba's signature, with our key");

    let ours = Sealer::new(wire::SMB_311, cipher, &key, &preauth, done.session_id, [0; 4]);
    // Everything after the login is sealed both ways: TREE_CONNECT on.
    assert!(c2s[3..].iter().chain(&s2c[3..]).all(|f| &f[..4] == super::seal::PROTOCOL_ID));
    let mut tree = s2c[3].to_vec();
    let answer = ours.open(&mut tree).expect("Samba's TREE_CONNECT answer opens");
    let h = wire::parse_header(answer).unwrap();
    assert_eq!((h.command, h.status.0), (Command::TreeConnect as u16, status::SUCCESS));
    let mut create = s2c[4].to_vec();
    let h = wire::parse_header(ours.open(&mut create).unwrap()).unwrap();
    assert_eq!((h.command, h.status.0), (Command::Create as u16, status::SUCCESS));
    let theirs = Sealer::new(wire::SMB_311, cipher, &key, &preauth, done.session_id, [0; 4]).peer();
    let mut request = c2s[3].to_vec();
    let request = theirs.open(&mut request).expect("our TREE_CONNECT request opens with the server's key");
    assert!(request[wire::HEADER..].windows(10).any(|w| w == wire::utf16("bench")), "the share's name inside");
    // A byte flipped in Samba's answer: refused.
    let mut tampered = s2c[3].to_vec();
    tampered[60] ^= 1;
    assert!(ours.open(&mut tampered).unwrap_err().contains("does not authenticate"));
}
