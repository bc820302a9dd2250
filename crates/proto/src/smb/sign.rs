//! SMB2/3 message signing (MS-SMB2 3.1.4.1): the key from the session's
//! NTLM key (and on 3.1.1 the preauthentication hash), the key derivation
//! encryption shares (`kdf`), and the 16-byte signature over a request. Only what a server
//! that requires signing needs from a client: requests are signed; the
//! server's signatures on its answers are not checked (a benchmark reads
//! them, it does not trust data to them, and checking would double the
//! CPU cost per byte on the client).

use aes::Aes128;
use cmac::Cmac;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// SMB2_FLAGS_SIGNED in the header's Flags.
pub const FLAGS_SIGNED: u32 = 0x8;
/// Where Flags and Signature sit in the 64-byte header.
pub const FLAGS_OFFSET: usize = 16;
pub const SIGNATURE_OFFSET: usize = 48;

/// The key that signs this session's requests, by dialect.
#[derive(Clone)]
pub enum SigningKey {
    /// SMB 2.0.2 and 2.1: HMAC-SHA256 keyed with the session key.
    HmacSha256([u8; 16]),
    /// SMB 3.0 and 3.0.2: AES-128-CMAC with a key derived from it.
    AesCmac([u8; 16]),
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        f.write_str(match self {
            SigningKey::HmacSha256(_) => "SigningKey(HMAC-SHA256)",
            SigningKey::AesCmac(_) => "SigningKey(AES-128-CMAC)",
        })
    }
}

impl SigningKey {
    /// The signing key for `dialect` from the session key (NTLM's
    /// ExportedSessionKey) and, on 3.1.1, the preauthentication hash of the
    /// login's messages (MS-SMB2 3.2.5.3.1).
    pub fn for_dialect(dialect: u16, session_key: [u8; 16], preauth: &[u8; 64]) -> SigningKey {
        if dialect >= 0x0311 {
            SigningKey::AesCmac(kdf(&session_key, b"SMBSigningKey\0", preauth))
        } else if dialect >= 0x0300 {
            SigningKey::AesCmac(kdf(&session_key, b"SMB2AESCMAC\0", b"SmbSign\0"))
        } else {
            SigningKey::HmacSha256(session_key)
        }
    }

    /// The signature over a message made of `parts` (header with Flags
    /// already marked signed and a zero Signature, then body and data).
    pub fn sign(&self, parts: &[&[u8]]) -> [u8; 16] {
        let mut out = [0u8; 16];
        match self {
            SigningKey::HmacSha256(key) => {
                let mut mac = <Hmac<Sha256>>::new_from_slice(key).expect("HMAC takes any key length");
                parts.iter().for_each(|p| mac.update(p));
                out.copy_from_slice(&mac.finalize().into_bytes()[..16]);
            }
            SigningKey::AesCmac(key) => {
                let mut mac = <Cmac<Aes128>>::new_from_slice(key).expect("a 16-byte AES key");
                parts.iter().for_each(|p| mac.update(p));
                out.copy_from_slice(&mac.finalize().into_bytes());
            }
        }
        out
    }

    /// Marks `header` (the 64 bytes, signature zero) signed and writes the
    /// signature over it and `rest`.
    pub fn sign_in_place(&self, header: &mut [u8], rest: &[&[u8]]) {
        let flags = u32::from_le_bytes(header[FLAGS_OFFSET..FLAGS_OFFSET + 4].try_into().expect("4 bytes"));
        header[FLAGS_OFFSET..FLAGS_OFFSET + 4].copy_from_slice(&(flags | FLAGS_SIGNED).to_le_bytes());
        header[SIGNATURE_OFFSET..SIGNATURE_OFFSET + 16].fill(0);
        let mut parts: Vec<&[u8]> = Vec::with_capacity(1 + rest.len());
        parts.push(header);
        parts.extend_from_slice(rest);
        let signature = self.sign(&parts);
        header[SIGNATURE_OFFSET..SIGNATURE_OFFSET + 16].copy_from_slice(&signature);
    }
}

/// SP800-108 in counter mode with HMAC-SHA256, one round, `N` bytes out
/// (MS-SMB2 3.1.4.2): 16 for signing and the 128-bit ciphers, 32 for
/// AES-256 (one round of HMAC-SHA256 covers both).
pub(super) fn kdf<const N: usize>(key: &[u8; 16], label: &[u8], context: &[u8]) -> [u8; N] {
    let mut mac = <Hmac<Sha256>>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(&1u32.to_be_bytes());
    mac.update(label);
    mac.update(&[0]);
    mac.update(context);
    mac.update(&(N as u32 * 8).to_be_bytes());
    let mut out = [0u8; N];
    out.copy_from_slice(&mac.finalize().into_bytes()[..N]);
    out
}

/// SMB 3.1.1's preauthentication integrity (MS-SMB2 3.2.5.2): the hash
/// chained over the login's messages, which binds the keys to them.
pub(super) fn preauth_chain(hash: &[u8; 64], message: &[&[u8]]) -> [u8; 64] {
    use sha2::{Digest, Sha512};
    let mut h = Sha512::new();
    h.update(hash);
    message.iter().for_each(|p| h.update(p));
    h.finalize().into()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// MS-SMB2's 3.1.1 example (the Open Specifications blog "SMB 3.1.1
    /// Pre-authentication integrity in Windows 10"): the hash after the
    /// NEGOTIATE request, and the signing key from the session key and the
    /// hash after the last SESSION_SETUP request.
    #[test]
    fn smb_311_preauth_and_signing_key_match_the_published_example() {
        let negotiate = hex(concat!(
            "FE534D4240000100000000000000800000000000000000000100000000000000FFFE000000000000",
            "00000000000000000000000000000000000000000000000024000500000000003F000000ECD86F32",
            "6276024F9F7752B89BB33F3A70000000020000000202100200030203110300000100260000000000",
            "010020000100FA49E6578F1F3A9F4CD3E9CC14A67AA884B3D05844E0E5A118225C15887F32FF0000",
            "0200060000000000020002000100"
        ));
        let after = preauth_chain(&[0; 64], &[&negotiate[..40], &negotiate[40..]]);
        assert_eq!(
            after.to_vec(),
            hex(concat!(
                "DD94EFC5321BB618A2E208BA8920D2F422992526947A409B5037DE1E0FE8C7362B8C47122594CDE0",
                "CE26AA9DFC8BCDBDE0621957672623351A7540F1E54A0426"
            ))
        );
        let preauth: [u8; 64] = hex(concat!(
            "0DD13628CC3ED218EF9DF9772D436D0887AB9814BFAE63A80AA845F36909DB7928622DDDAD522D97",
            "51640A459762C5A9D6BB084CBB3CE6BDADEF5D5BCE3C6C01"
        ))
        .try_into()
        .unwrap();
        let session_key: [u8; 16] = hex("270E1BA896585EEB7AF3472D3B4C75A7").try_into().unwrap();
        let SigningKey::AesCmac(key) = SigningKey::for_dialect(0x0311, session_key, &preauth) else { panic!() };
        assert_eq!(key.to_vec(), hex("73FE7A9A77BEF0BDE49C650D8CCB5F76"));
    }

    /// RFC 4493's AES-CMAC example 2 (16-byte message): the CMAC is the
    /// standard one, not a look-alike.
    #[test]
    fn aes_cmac_matches_rfc_4493() {
        let key: [u8; 16] = hex("2b7e151628aed2a6abf7158809cf4f3c").try_into().unwrap();
        let sig = SigningKey::AesCmac(key).sign(&[&hex("6bc1bee2")[..], &hex("2e409f96e93d7e117393172a")[..]]);
        assert_eq!(sig.to_vec(), hex("070a16b46b4d4144f79bdd9dd04a287c"));
    }

    #[test]
    fn signing_marks_the_header_and_depends_on_every_byte() {
        let key = SigningKey::for_dialect(0x0302, [7; 16], &[0; 64]);
        let mut a = [0u8; 64];
        key.sign_in_place(&mut a, &[b"body", b"data"]);
        assert_eq!(a[FLAGS_OFFSET] & 0x8, 0x8);
        assert_ne!(a[SIGNATURE_OFFSET..], [0u8; 16]);
        let mut b = [0u8; 64];
        key.sign_in_place(&mut b, &[b"body", b"datb"]);
        assert_ne!(a[SIGNATURE_OFFSET..], b[SIGNATURE_OFFSET..]);
        // 2.1 and 3.0.2 keys from one session key sign differently.
        let mut c = [0u8; 64];
        SigningKey::for_dialect(0x0210, [7; 16], &[0; 64]).sign_in_place(&mut c, &[b"body", b"data"]);
        assert_ne!(a[SIGNATURE_OFFSET..], c[SIGNATURE_OFFSET..]);
    }
}
