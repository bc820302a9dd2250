//! NTLMSSP with NTLMv2 responses (MS-NLMP), the client side of SMB's
//! SESSION_SETUP: the NEGOTIATE message, the server's CHALLENGE parsed
//! (bounds-checked: it comes off the wire), and the AUTHENTICATE message.
//! Sent raw (not wrapped in SPNEGO): Samba and Windows both accept a bare
//! NTLMSSP token. The session key comes out too, for SMB signing; no
//! sealing (SMB encryption is not done).

use super::wire::{le16, le32, le64, utf16};
use hmac::{Hmac, Mac};
use md4::{Digest, Md4};

type HmacMd5 = Hmac<md5::Md5>;

const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";

// NegotiateFlags: unicode, request target, sign, NTLM, always sign, extended
// session security, target info, 128-bit, 56-bit. No key exchange: the
// session key is then NTLMv2's session base key itself (MS-NLMP 3.4.5.1).
const FLAGS: u32 = 0x1 | 0x4 | 0x10 | 0x200 | 0x8000 | 0x8_0000 | 0x80_0000 | 0x2000_0000 | 0x8000_0000;

/// The first token: what the client can do.
pub fn negotiate() -> Vec<u8> {
    let mut m = Vec::with_capacity(32);
    m.extend_from_slice(SIGNATURE);
    m.extend_from_slice(&1u32.to_le_bytes());
    m.extend_from_slice(&FLAGS.to_le_bytes());
    m.extend_from_slice(&[0u8; 16]); // no domain, no workstation
    m
}

/// What the server's CHALLENGE carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The 8-byte server challenge.
    pub server_challenge: [u8; 8],
    /// The AV pairs (echoed inside the NTLMv2 response).
    pub target_info: Vec<u8>,
    /// MsvAvTimestamp, when the server sent one.
    pub timestamp: Option<u64>,
    /// The whole token as received: the MIC covers it.
    pub raw: Vec<u8>,
}

/// Parses the server's CHALLENGE token.
pub fn parse_challenge(token: &[u8]) -> Result<Challenge, String> {
    if token.len() < 48 || &token[0..8] != SIGNATURE || le32(token, 8) != 2 {
        return Err(format!("the server's NTLMSSP challenge is malformed ({} bytes)", token.len()));
    }
    let mut server_challenge = [0u8; 8];
    server_challenge.copy_from_slice(&token[24..32]);
    let (len, off) = (le16(token, 40) as usize, le32(token, 44) as usize);
    let target_info =
        token.get(off..off.saturating_add(len)).ok_or("the NTLMSSP challenge's target info runs past it")?.to_vec();
    // AV pairs: id u16, len u16, value; MsvAvEOL (0) ends them, MsvAvTimestamp is 7.
    let mut timestamp = None;
    let mut at = 0;
    while at + 4 <= target_info.len() {
        let (id, n) = (le16(&target_info, at), le16(&target_info, at + 2) as usize);
        if id == 0 {
            break;
        }
        let value = target_info.get(at + 4..at + 4 + n).ok_or("an NTLMSSP AV pair runs past the target info")?;
        if id == 7 && n == 8 {
            timestamp = Some(le64(value, 0));
        }
        at += 4 + n;
    }
    Ok(Challenge { server_challenge, target_info, timestamp, raw: token.to_vec() })
}

/// Who authenticates. An empty user is an anonymous session.
#[derive(Debug, Clone)]
pub struct Identity<'a> {
    /// User name.
    pub user: &'a str,
    /// Password.
    pub password: &'a str,
    /// NTLM domain (may be empty).
    pub domain: &'a str,
}

/// The NTLMv2 response (NTProofStr + the client blob) and the LMv2 response.
pub fn ntlmv2_responses(
    id: &Identity<'_>,
    challenge: &Challenge,
    client_challenge: [u8; 8],
    now_filetime: u64,
) -> (Vec<u8>, Vec<u8>) {
    let key = response_key_nt(id);
    let mut blob = vec![1u8, 1, 0, 0, 0, 0, 0, 0];
    blob.extend_from_slice(&challenge.timestamp.unwrap_or(now_filetime).to_le_bytes());
    blob.extend_from_slice(&client_challenge);
    blob.extend_from_slice(&[0u8; 4]);
    match challenge.timestamp {
        Some(_) => blob.extend_from_slice(&with_mic_flag(&challenge.target_info)),
        None => blob.extend_from_slice(&challenge.target_info),
    }
    blob.extend_from_slice(&[0u8; 4]);
    let proof = hmac_md5(&key, &[&challenge.server_challenge, &blob]);
    let mut nt = proof.to_vec();
    nt.extend_from_slice(&blob);
    // MS-NLMP 3.1.5.1.2: where the server sent a timestamp, LMv2 is all zeros.
    let lm = if challenge.timestamp.is_some() {
        vec![0u8; 24]
    } else {
        let mut lm = hmac_md5(&key, &[&challenge.server_challenge, &client_challenge]).to_vec();
        lm.extend_from_slice(&client_challenge);
        lm
    };
    (nt, lm)
}

/// The server's AV pairs with MsvAvFlags (6) saying a MIC is sent (0x2),
/// before MsvAvEOL; parse_challenge has checked the pairs' lengths.
fn with_mic_flag(target_info: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(target_info.len() + 8);
    let mut flags = 0x2u32;
    let mut at = 0;
    while at + 4 <= target_info.len() {
        let (id, n) = (le16(target_info, at), le16(target_info, at + 2) as usize);
        let Some(pair) = target_info.get(at..at + 4 + n) else { break };
        match id {
            0 => break,
            6 if n == 4 => flags |= le32(pair, 4),
            _ => out.extend_from_slice(pair),
        }
        at += 4 + n;
    }
    out.extend_from_slice(&6u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&[0u8; 4]); // MsvAvEOL
    out
}

/// NTOWFv2: the key both NTLMv2 responses and the session key come from.
fn response_key_nt(id: &Identity<'_>) -> [u8; 16] {
    let nt_hash = Md4::digest(utf16(id.password));
    hmac_md5(&nt_hash, &[&utf16(&(id.user.to_uppercase() + id.domain))])
}

/// NTLMv2's session base key, from the NT response's first 16 bytes
/// (NTProofStr): the session key that signs SMB messages.
pub fn session_base_key(id: &Identity<'_>, nt_response: &[u8]) -> [u8; 16] {
    hmac_md5(&response_key_nt(id), &[&nt_response[..16]])
}

fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    let mut mac = HmacMd5::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

/// Where the MIC sits in an AUTHENTICATE message: after the 64-byte header
/// and the 8-byte Version.
const MIC_AT: usize = 72;

/// The AUTHENTICATE token answering `challenge` to our `negotiate` token
/// (anonymous when the user is empty), and the session key (none for an
/// anonymous session). With a server timestamp it carries the MIC over all
/// three messages (MS-NLMP 3.1.5.1.2).
pub fn authenticate(
    id: &Identity<'_>,
    negotiate: &[u8],
    challenge: &Challenge,
    client_challenge: [u8; 8],
    now: u64,
) -> (Vec<u8>, Option<[u8; 16]>) {
    let (nt, lm) = if id.user.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        ntlmv2_responses(id, challenge, client_challenge, now)
    };
    let session_key = (!nt.is_empty()).then(|| session_base_key(id, &nt));
    let fields: [Vec<u8>; 6] = [lm, nt, utf16(id.domain), utf16(id.user), utf16("HEADROOM"), Vec::new()];
    let header = MIC_AT + 16;
    let mut m = Vec::with_capacity(header + fields.iter().map(Vec::len).sum::<usize>());
    m.extend_from_slice(SIGNATURE);
    m.extend_from_slice(&3u32.to_le_bytes());
    let mut offset = header;
    for f in &fields {
        m.extend_from_slice(&(f.len() as u16).to_le_bytes());
        m.extend_from_slice(&(f.len() as u16).to_le_bytes());
        m.extend_from_slice(&(offset as u32).to_le_bytes());
        offset += f.len();
    }
    let flags = if id.user.is_empty() { FLAGS | 0x800 } else { FLAGS }; // NTLMSSP_NEGOTIATE_ANONYMOUS
    m.extend_from_slice(&flags.to_le_bytes());
    m.extend_from_slice(&[0u8; 8 + 16]); // Version (not negotiated), MIC
    for f in &fields {
        m.extend_from_slice(f);
    }
    if let (Some(key), Some(_)) = (session_key, challenge.timestamp) {
        // With no key exchange the exported session key is the session base key.
        let mic = hmac_md5(&key, &[negotiate, &challenge.raw, &m]);
        m[MIC_AT..MIC_AT + 16].copy_from_slice(&mic);
    }
    (m, session_key)
}

/// Now as a Windows FILETIME (100 ns since 1601).
pub fn filetime_now() -> u64 {
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (unix.as_nanos() / 100) as u64 + 116_444_736_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// MS-NLMP 4.2.4: NTLMv2 with User/Domain/Password, server challenge
    /// 0123456789abcdef, client challenge aa..aa, time 0.
    #[test]
    fn ntlmv2_matches_the_specs_example() {
        let pair = |id: u16, v: &str| [&id.to_le_bytes()[..], &(v.len() as u16 * 2).to_le_bytes(), &utf16(v)].concat();
        let target_info = [pair(2, "Domain"), pair(1, "Server"), vec![0; 4]].concat();
        let challenge = Challenge {
            server_challenge: hex("0123456789abcdef").try_into().unwrap(),
            target_info,
            timestamp: None,
            raw: Vec::new(),
        };
        let id = Identity { user: "User", password: "Password", domain: "Domain" };
        let (nt, lm) = ntlmv2_responses(&id, &challenge, [0xaa; 8], 0);
        assert_eq!(nt[..16], hex("68cd0ab851e51c96aabc927bebef6a1c")[..]);
        assert_eq!(lm[..16], hex("86c35097ac9cec102554764a57cccc19")[..]);
        assert_eq!(&lm[16..], &[0xaa; 8]);
        // MS-NLMP 4.2.4.1.3: the session base key of the same example.
        assert_eq!(session_base_key(&id, &nt)[..], hex("8de40ccadbc14a82f15cb0ad0de95ca3")[..]);
    }

    #[test]
    fn the_challenge_is_parsed_and_bad_ones_refused() {
        let mut t = Vec::new();
        t.extend_from_slice(SIGNATURE);
        t.extend_from_slice(&2u32.to_le_bytes());
        t.extend_from_slice(&[0u8; 8]); // target name
        t.extend_from_slice(&FLAGS.to_le_bytes());
        t.extend_from_slice(&[9u8; 8]); // challenge
        t.extend_from_slice(&[0u8; 8]);
        let av = [&7u16.to_le_bytes()[..], &8u16.to_le_bytes(), &42u64.to_le_bytes(), &[0, 0, 0, 0]].concat();
        t.extend_from_slice(&(av.len() as u16).to_le_bytes());
        t.extend_from_slice(&(av.len() as u16).to_le_bytes());
        t.extend_from_slice(&48u32.to_le_bytes());
        t.extend_from_slice(&av);
        let c = parse_challenge(&t).unwrap();
        assert_eq!((c.server_challenge, c.timestamp, c.target_info.len()), ([9; 8], Some(42), 16));
        // Target info pointing past the token; an AV pair longer than the info; not NTLMSSP at all.
        let mut past = t.clone();
        past[44..48].copy_from_slice(&4000u32.to_le_bytes());
        assert!(parse_challenge(&past).unwrap_err().contains("runs past"));
        let mut long = t.clone();
        long[50..52].copy_from_slice(&500u16.to_le_bytes());
        assert!(parse_challenge(&long).unwrap_err().contains("AV pair"));
        assert!(parse_challenge(&[0u8; 60]).is_err());
        assert!(parse_challenge(&t[..20]).is_err());
    }

    #[test]
    fn authenticate_lays_out_its_fields_after_the_header_version_and_mic() {
        let c = Challenge { server_challenge: [1; 8], target_info: vec![0, 0, 0, 0], timestamp: None, raw: vec![] };
        let (m, key) = authenticate(&Identity { user: "bob", password: "pw", domain: "" }, &[], &c, [2; 8], 5);
        assert!(key.is_some());
        assert_eq!(le32(&m, 8), 3);
        let (nt_len, nt_off) = (le16(&m, 20) as usize, le32(&m, 24) as usize);
        assert_eq!(nt_len, 16 + 28 + 4 + 4, "NTProofStr, blob head, target info, trailer");
        assert_eq!(nt_off, 88 + 24);
        assert_eq!(&m[MIC_AT..MIC_AT + 16], &[0; 16], "no timestamp, no MIC");
        let (user_len, user_off) = (le16(&m, 36) as usize, le32(&m, 40) as usize);
        assert_eq!(&m[user_off..user_off + user_len], &utf16("bob")[..]);
        let (anon, no_key) = authenticate(&Identity { user: "", password: "", domain: "" }, &[], &c, [2; 8], 5);
        assert!(no_key.is_none());
        assert_eq!((le16(&anon, 12), le16(&anon, 20)), (0, 0));
    }

    /// MS-NLMP 3.1.5.1.2: a server timestamp brings MsvAvFlags with the MIC
    /// bit into the blob, an all-zero LMv2, and a MIC that is the HMAC-MD5
    /// of the three messages (MIC field zeroed) under the session key.
    #[test]
    fn a_server_timestamp_brings_the_mic_and_zero_lmv2() {
        let pair = |id: u16, v: &[u8]| [&id.to_le_bytes()[..], &(v.len() as u16).to_le_bytes(), v].concat();
        let target_info =
            [pair(2, &utf16("D")), pair(7, &42u64.to_le_bytes()), pair(6, &1u32.to_le_bytes()), vec![0; 4]].concat();
        let c = Challenge { server_challenge: [1; 8], target_info, timestamp: Some(42), raw: b"challenge".to_vec() };
        let id = Identity { user: "bob", password: "pw", domain: "D" };
        let (m, key) = authenticate(&id, b"negotiate", &c, [2; 8], 5);
        let (lm_len, lm_off) = (le16(&m, 12) as usize, le32(&m, 16) as usize);
        assert_eq!(&m[lm_off..lm_off + lm_len], &[0; 24]);
        let (nt_len, nt_off) = (le16(&m, 20) as usize, le32(&m, 24) as usize);
        let blob_info = &m[nt_off + 16 + 28..nt_off + nt_len - 4];
        let flags_pair = [&6u16.to_le_bytes()[..], &4u16.to_le_bytes(), &3u32.to_le_bytes()].concat();
        assert!(blob_info.windows(8).any(|w| w == flags_pair), "MsvAvFlags 0x1|0x2 in the blob: {blob_info:02x?}");
        assert!(blob_info.ends_with(&[0; 4]), "MsvAvEOL last");
        let mut zeroed = m.clone();
        zeroed[MIC_AT..MIC_AT + 16].fill(0);
        let mic = hmac_md5(&key.unwrap(), &[b"negotiate", b"challenge", &zeroed]);
        assert_eq!(&m[MIC_AT..MIC_AT + 16], &mic);
    }
}
