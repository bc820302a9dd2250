//! SMB 3 encryption (MS-SMB2 2.2.41, 3.1.4.3): the TRANSFORM_HEADER that
//! wraps each message once a session or share encrypts, the two keys
//! (client to server, server to client) from the session key (3.0's labels,
//! or 3.1.1's with the preauthentication hash) and the AEAD of the
//! negotiated cipher: AES-128-CCM, AES-256-CCM (RustCrypto's `ccm`: ring
//! has no CCM), AES-128-GCM, AES-256-GCM (ring's assembly, the
//! implementation `headroom cpu` prices).
//!
//! What it owns: the keys, the nonces of sent messages, sealing a message
//! in place and opening (authenticating, then decrypting in place) an
//! answer, with the checks of its header. What it must not do: I/O, or
//! decide when to encrypt (`session`), or parse what was inside (`wire`).

use super::sign::kdf;
use crate::url::SmbCipher;
use aes::{Aes128, Aes256};
use ccm::aead::consts::{U11, U16};
use ccm::aead::{AeadInPlace, KeyInit};
use ccm::Ccm;
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_128_GCM, AES_256_GCM};

/// Bytes of the TRANSFORM_HEADER.
pub const TRANSFORM: usize = 52;
/// Its ProtocolId.
pub const PROTOCOL_ID: &[u8; 4] = b"\xfdSMB";
/// Flags (EncryptionAlgorithm on 3.0): encrypted.
const FLAG_ENCRYPTED: u16 = 1;

type Aes128Ccm = Ccm<Aes128, U16, U11>;
type Aes256Ccm = Ccm<Aes256, U16, U11>;

/// One direction's cipher with its key.
enum Aead {
    Ccm128(Box<Aes128Ccm>),
    Ccm256(Box<Aes256Ccm>),
    /// AES-128-GCM or AES-256-GCM, by the key's algorithm.
    Gcm(Box<LessSafeKey>),
}

impl Aead {
    fn new(cipher: SmbCipher, session_key: &[u8; 16], label: &[u8], context: &[u8]) -> Aead {
        let k16 = || kdf::<16>(session_key, label, context);
        let k32 = || kdf::<32>(session_key, label, context);
        // The key is the algorithm's length by construction.
        let gcm = |algorithm, key: &[u8]| {
            Aead::Gcm(Box::new(LessSafeKey::new(UnboundKey::new(algorithm, key).expect("a GCM key of its length"))))
        };
        match cipher {
            SmbCipher::Aes128Ccm => Aead::Ccm128(Box::new(Aes128Ccm::new(&k16().into()))),
            SmbCipher::Aes128Gcm => gcm(&AES_128_GCM, &k16()),
            SmbCipher::Aes256Ccm => Aead::Ccm256(Box::new(Aes256Ccm::new(&k32().into()))),
            SmbCipher::Aes256Gcm => gcm(&AES_256_GCM, &k32()),
        }
    }

    /// Nonce bytes the cipher uses of the header's 16 (the rest are zero).
    fn nonce_len(&self) -> usize {
        match self {
            Aead::Ccm128(_) | Aead::Ccm256(_) => 11,
            Aead::Gcm(_) => 12,
        }
    }

    fn seal(&self, nonce: &[u8], aad: &[u8], msg: &mut [u8]) -> [u8; 16] {
        let tag = match self {
            Aead::Ccm128(c) => c.encrypt_in_place_detached(nonce.into(), aad, msg),
            Aead::Ccm256(c) => c.encrypt_in_place_detached(nonce.into(), aad, msg),
            Aead::Gcm(key) => {
                let nonce = Nonce::try_assume_unique_for_key(nonce).expect("GCM's 12-byte nonce");
                return key
                    .seal_in_place_separate_tag(nonce, Aad::from(aad), msg)
                    .expect("an SMB message is far below the AEAD's limit")
                    .as_ref()
                    .try_into()
                    .expect("a 16-byte tag");
            }
        };
        // Only a message longer than CCM's 2^64 bytes fails.
        tag.expect("an SMB message is far below the AEAD's limit").into()
    }

    fn open(&self, nonce: &[u8], aad: &[u8], msg: &mut [u8], tag: &[u8]) -> bool {
        match self {
            Aead::Ccm128(c) => c.decrypt_in_place_detached(nonce.into(), aad, msg, tag.into()).is_ok(),
            Aead::Ccm256(c) => c.decrypt_in_place_detached(nonce.into(), aad, msg, tag.into()).is_ok(),
            Aead::Gcm(key) => {
                let (Ok(nonce), Ok(tag)) = (Nonce::try_assume_unique_for_key(nonce), Tag::try_from(tag)) else {
                    return false;
                };
                key.open_in_place_separate_tag(nonce, Aad::from(aad), tag, msg, 0..).is_ok()
            }
        }
    }
}

/// One session's encryption: what seals requests and opens answers.
pub struct Sealer {
    cipher: SmbCipher,
    /// Client to server.
    enc: Aead,
    /// Server to client.
    dec: Aead,
    session_id: u64,
    /// Nonces are this random prefix and a counter: unique per key without
    /// remembering any (MS-SMB2 3.2.4.1.8 asks only uniqueness).
    salt: [u8; 4],
    sent: u64,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys.
        write!(f, "Sealer({})", self.cipher.name())
    }
}

impl Sealer {
    /// The keys of session `session_id` on `dialect` (3.0 and 3.0.2: 3.0's
    /// labels and AES-128-CCM; 3.1.1: its labels with the preauthentication
    /// hash of the login, and the negotiated `cipher`).
    pub fn new(
        dialect: u16,
        cipher: SmbCipher,
        session_key: &[u8; 16],
        preauth: &[u8; 64],
        session_id: u64,
        salt: [u8; 4],
    ) -> Sealer {
        let (enc, dec) = if dialect >= 0x0311 {
            (
                Aead::new(cipher, session_key, b"SMBC2SCipherKey\0", preauth),
                Aead::new(cipher, session_key, b"SMBS2CCipherKey\0", preauth),
            )
        } else {
            (
                Aead::new(cipher, session_key, b"SMB2AESCCM\0", b"ServerIn \0"),
                Aead::new(cipher, session_key, b"SMB2AESCCM\0", b"ServerOut\0"),
            )
        };
        Sealer { cipher, enc, dec, session_id, salt, sent: 0 }
    }

    /// The server's side of the same session (its keys swapped): what the
    /// hostile-server tests seal their answers with.
    #[cfg(test)]
    pub fn peer(mut self) -> Sealer {
        std::mem::swap(&mut self.enc, &mut self.dec);
        self
    }

    /// The cipher.
    pub fn cipher(&self) -> SmbCipher {
        self.cipher
    }

    /// Encrypts `msg` (an SMB2 header and what follows it) in place and
    /// returns the TRANSFORM_HEADER that goes before it.
    pub fn seal(&mut self, msg: &mut [u8]) -> [u8; TRANSFORM] {
        self.sent += 1;
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&self.sent.to_le_bytes());
        let n = self.enc.nonce_len();
        nonce[8..n].copy_from_slice(&self.salt[..n - 8]);
        self.seal_with(nonce, msg)
    }

    fn seal_with(&self, nonce: [u8; 16], msg: &mut [u8]) -> [u8; TRANSFORM] {
        let mut t = [0u8; TRANSFORM];
        t[..4].copy_from_slice(PROTOCOL_ID);
        t[20..36].copy_from_slice(&nonce);
        t[36..40].copy_from_slice(&(msg.len() as u32).to_le_bytes());
        t[42..44].copy_from_slice(&FLAG_ENCRYPTED.to_le_bytes());
        t[44..52].copy_from_slice(&self.session_id.to_le_bytes());
        let tag = self.enc.seal(&nonce[..self.enc.nonce_len()], &t[20..], msg);
        t[4..20].copy_from_slice(&tag);
        t
    }

    /// Authenticates and decrypts in place an answer's `frame` (the
    /// TRANSFORM_HEADER and what follows it): the message inside, or what
    /// was wrong with it.
    pub fn open<'a>(&self, frame: &'a mut [u8]) -> Result<&'a mut [u8], String> {
        if frame.len() < TRANSFORM + super::wire::HEADER {
            return Err(format!("an encrypted message of {} bytes, shorter than its headers", frame.len()));
        }
        let (t, msg) = frame.split_at_mut(TRANSFORM);
        if &t[..4] != PROTOCOL_ID {
            return Err(format!("a TRANSFORM_HEADER starting {:02x?}", &t[..4]));
        }
        let size = u32::from_le_bytes(t[36..40].try_into().expect("4 bytes")) as usize;
        if size != msg.len() {
            return Err(format!("an encrypted message of {} bytes that says it holds {size}", msg.len()));
        }
        let flags = u16::from_le_bytes([t[42], t[43]]);
        if flags != FLAG_ENCRYPTED {
            return Err(format!("a TRANSFORM_HEADER with Flags 0x{flags:04x}, not encrypted (1)"));
        }
        let session = u64::from_le_bytes(t[44..52].try_into().expect("8 bytes"));
        if session != self.session_id {
            return Err(format!("an encrypted message for session 0x{session:x}, not ours (0x{:x})", self.session_id));
        }
        // Only the cipher's first bytes of the nonce count: Windows 8 left
        // others in the rest of the field (the 3.0 example below).
        let n = self.dec.nonce_len();
        if !self.dec.open(&t[20..20 + n], &t[20..], msg, &t[4..20]) {
            return Err(format!(
                "an encrypted message that does not authenticate with {} (tampered, or keys that differ)",
                self.cipher.name()
            ));
        }
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::super::sign::tests::hex;
    use super::*;

    fn arr<const N: usize>(s: &str) -> [u8; N] {
        hex(s).try_into().unwrap()
    }

    const PREAUTH_311: &str = concat!(
        "B23F3CBFD69487D9832B79B1594A367CDD950909B774C3A4C412B4FCEA9EDDDBA7DB256BA2EA30E9",
        "77F11F9B113247578E0E915C6D2A513B8F2FCA5707DC8770"
    );

    /// The Open Specifications blog's "Encryption in SMB 3.0: a protocol
    /// perspective" example: 3.0's keys from its session key, and its
    /// encrypted READ answer opened with AES-128-CCM.
    #[test]
    fn smb_30_ccm_opens_the_published_example() {
        let key = arr::<16>("B4546771B515F766A86735532DD6C4F0");
        assert_eq!(kdf::<16>(&key, b"SMB2AESCCM\0", b"ServerIn \0").to_vec(), hex("261B72350558F2E9DCF613070383EDBF"));
        assert_eq!(kdf::<16>(&key, b"SMB2AESCCM\0", b"ServerOut\0").to_vec(), hex("8FE2B57EC34D2DB5B1A9727F526BBDB5"));
        let s = Sealer::new(0x0300, SmbCipher::Aes128Ccm, &key, &[0; 64], 0x8E40014000011, [0; 4]);
        let mut frame = hex(concat!(
            "FD534D42A6015530A18F6D9AFFE22AFAE8E66484860000000000000011000014",
            "00E4080050000000000001001100001400E40800DBF46435C5F14169293CE079",
            "E344479BF670227E49873F458672C3098DAC467DD5809F369D67409166515787",
            "1483E01F7BECD02064EAC3E235F913668BBC2F097980D4B378F1993EFF6E60D1",
            "77309E5B"
        ));
        let plain = s.open(&mut frame).unwrap();
        assert_eq!(
            plain.to_vec(),
            hex(concat!(
                "FE534D4240000100000000000900210009000000000000000400000000000000",
                "FFFE0000010000001100001400E4080000000000000000000000000000000000",
                "11000000170000000000000000000000"
            ))
        );
    }

    /// The blog's "SMB 3.1.1 Encryption in Windows 10" example with
    /// AES-128-GCM: its WRITE sealed byte for byte with its nonce, and its
    /// answer opened.
    #[test]
    fn smb_311_gcm_seals_and_opens_the_published_example() {
        let key = arr::<16>("419FDDF34C1E001909D362AE7FB6AF79");
        let preauth = arr::<64>(PREAUTH_311);
        assert_eq!(kdf::<16>(&key, b"SMBC2SCipherKey\0", &preauth).to_vec(), hex("A2F5E80E5D59103034F32E52F698E5EC"));
        assert_eq!(kdf::<16>(&key, b"SMBS2CCipherKey\0", &preauth).to_vec(), hex("748C50868C90F302962A5C35F5F9A8BF"));
        let s = Sealer::new(0x0311, SmbCipher::Aes128Gcm, &key, &preauth, 0x100000000025, [0; 4]);
        let mut write = hex(concat!(
            "FE534D4240000100000000000900010008000000000000000500000000000000FFFE000001000000",
            "25000000001000000000000000000000000000000000000031007000170000000000000000000000",
            "0600000004000000010000000400000000000000000000007000000000000000536D623320656E63",
            "72797074696F6E2074657374696E67"
        ));
        let t = s.seal_with(arr("C7D6822D269CAF48904C664C00000000"), &mut write);
        let mut wire = t.to_vec();
        wire.extend_from_slice(&write);
        assert_eq!(
            wire,
            hex(concat!(
                "FD534D42BD73D97D2BC9001BCAFAC0FDFF5FEEBCC7D6822D269CAF48904C664C0000000087000000",
                "0000010025000000001000006ECDD2A7AFC7B47763057A041B8FD4DAFFE990B70C9E09D36C084E02",
                "D14EF247F8BDE38ACF6256F8B1D3B56F77FBDEB312FEA5E92CBCC1ED8FB2EBBFAA75E49A4A394BB4",
                "4576545567C24D4C014D47C9FBDFDAFD2C4F9B72F8D256452620A299F48E29E53D6B61D1C13A19E9",
                "1AF013F00D17E3ABC2FC3D36C8C1B6B93973253852DBD442E46EE8"
            ))
        );
        let mut answer = hex(concat!(
            "FD534D42ACBE1CB7ED343ADF1725EF144D90D4B0E06831DD2E8EB7B4000000000000000050000000",
            "00000100250000000010000026BBBF949983A6C1C796559D0F2C510CB651D1F7B6AC8DED32A2A0B8",
            "F2D793A815C6F6B848D69767A215841A42D400AE6DDB5F0B44173A014973321FDD7950DA6179159B",
            "82E03C9E18A050FF0EA1C967"
        ));
        let good = answer.clone();
        assert_eq!(
            s.open(&mut answer).unwrap().to_vec(),
            hex(concat!(
                "FE534D4240000100000000000900010001000000000000000500000000000000FFFE000001000000",
                "25000000001000000000000000000000000000000000000011000000170000000000000000000000"
            ))
        );
        // Tampered, short, for another session, or lying about its size:
        // refused in words, never a panic.
        let mut bad = good.clone();
        bad[70] ^= 1;
        assert!(s.open(&mut bad).unwrap_err().contains("does not authenticate"));
        assert!(s.open(&mut good[..60].to_vec()).unwrap_err().contains("shorter"));
        let mut other = good.clone();
        other[44] ^= 1;
        assert!(s.open(&mut other).unwrap_err().contains("not ours"));
        let mut size = good.clone();
        size[36] = 0x51;
        assert!(s.open(&mut size).unwrap_err().contains("says it holds"));
        let mut nonce = good;
        nonce[31] ^= 1;
        assert!(s.open(&mut nonce).unwrap_err().contains("does not authenticate"), "the nonce is authenticated");
    }

    /// Each cipher opens what it sealed, with fresh nonces, and the two
    /// directions' keys differ (an answer is not our own request echoed).
    #[test]
    fn every_cipher_round_trips_and_directions_differ() {
        for cipher in SmbCipher::ALL {
            let mut client = Sealer::new(0x0311, cipher, &[9; 16], &[3; 64], 77, [1, 2, 3, 4]);
            let server = Sealer::new(0x0311, cipher, &[9; 16], &[3; 64], 77, [0; 4]).peer();
            let msg = vec![0x5a; 200];
            let (mut a, mut b) = (msg.clone(), msg.clone());
            let (ta, tb) = (client.seal(&mut a), client.seal(&mut b));
            assert_ne!(ta[20..36], tb[20..36], "{}: a nonce repeated", cipher.name());
            let mut frame = ta.to_vec();
            frame.extend_from_slice(&a);
            assert!(client.open(&mut frame.clone()).is_err(), "{}: one key both ways", cipher.name());
            assert_eq!(server.open(&mut frame).unwrap(), &msg[..], "{}", cipher.name());
        }
    }
}
