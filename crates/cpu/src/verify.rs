//! Correctness checks run before any kernel is timed, so a broken build
//! cannot report a fantasy speed: parity rebuilds a lost block, checksums
//! match published vectors, compression round-trips, AEAD decrypts (and
//! rejects a tampered message).

use crate::data::fill;
use crate::fletcher::fletcher4;
use crate::xor::xor_parity;
use crate::CpuError;
use crate::{DataKind, Kernel};

/// Checks every kernel.
pub fn verify_all() -> Result<(), CpuError> {
    crate::all_kernels().iter().try_for_each(verify)
}

/// Checks one kernel computes the right answer.
pub fn verify(kernel: &Kernel) -> Result<(), CpuError> {
    check(kernel).map_err(|reason| CpuError::Incorrect { kernel: kernel.id(), reason })
}

fn check(kernel: &Kernel) -> Result<(), String> {
    match *kernel {
        Kernel::Raid5Xor { data } => raid5_rebuilds(data),
        Kernel::Raid6Pq { data } => raid6_rebuilds(data),
        Kernel::Crc32c => expect_eq("crc32c(\"123456789\")", u64::from(crc32c::crc32c(b"123456789")), 0xE306_9283),
        Kernel::Xxh64 => {
            expect_eq("xxh64(\"\")", xxhash_rust::xxh64::xxh64(b"", 0), 0xEF46_DB37_51D8_E999)?;
            expect_eq("xxh64(\"a\")", xxhash_rust::xxh64::xxh64(b"a", 0), 0xD24E_C4F1_A98C_6E5B)
        }
        Kernel::Xxh3 => {
            expect_eq("xxh3_64(\"\")", xxhash_rust::xxh3::xxh3_64(b""), 0x2D06_8005_38D3_94C2)?;
            // Long inputs take the vectorised path: it must agree with the streaming one.
            let mut data = vec![0u8; 100_000];
            fill(&mut data, DataKind::Incompressible, 7);
            let mut stream = xxhash_rust::xxh3::Xxh3::new();
            for part in data.chunks(4099) {
                stream.update(part);
            }
            expect_eq("xxh3_64 one-shot vs streaming", xxhash_rust::xxh3::xxh3_64(&data), stream.digest())
        }
        Kernel::Sha256 => {
            use sha2::Digest;
            expect_hex(
                "sha256(\"abc\")",
                &sha2::Sha256::digest(b"abc"),
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            )
        }
        Kernel::Blake3 => {
            expect_hex(
                "blake3(\"\")",
                blake3::hash(b"").as_bytes(),
                "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
            )?;
            // Inputs above 1 KiB take the SIMD tree path: compare with the incremental hasher.
            let mut data = vec![0u8; 100_000];
            fill(&mut data, DataKind::Incompressible, 8);
            let mut h = blake3::Hasher::new();
            for part in data.chunks(1000) {
                h.update(part);
            }
            expect_eq("blake3 one-shot vs incremental", u64::from(blake3::hash(&data) == h.finalize()), 1)
        }
        Kernel::Fletcher4 => {
            // Words 1, 2, 3, 4: a = 10, b = 1+3+6+10, c = 1+4+10+20, d = 1+5+15+35.
            let words: Vec<u8> = [1u32, 2, 3, 4].iter().flat_map(|w| w.to_le_bytes()).collect();
            let sums = fletcher4(&words);
            if sums != [10, 20, 35, 56] {
                return Err(format!("fletcher4(1,2,3,4) = {sums:?}, expected [10, 20, 35, 56]"));
            }
            Ok(())
        }
        Kernel::Lz4 { data, .. } => round_trip(Codec::Lz4, data),
        Kernel::Zstd { level, data, .. } => round_trip(Codec::Zstd(level), data),
        Kernel::Aes256Gcm => {
            // NIST GCM test case 13 (zero key, zero IV, empty message): tag 530f8afbc74536b9a963b4f1c4cb738b.
            let tag = crate::kernels::aead_key(*kernel, 0)?
                .seal_in_place_separate_tag(
                    ring::aead::Nonce::assume_unique_for_key([0; 12]),
                    ring::aead::Aad::empty(),
                    &mut [],
                )
                .map_err(|_| "encryption failed".to_string())?;
            expect_hex("AES-256-GCM test case 13 tag", tag.as_ref(), "530f8afbc74536b9a963b4f1c4cb738b")?;
            aead_round_trip(kernel)
        }
        Kernel::Aes128Gcm | Kernel::ChaCha20Poly1305 => aead_round_trip(kernel),
        Kernel::Aes128Ccm | Kernel::Aes256Ccm => ccm_known_answer(kernel),
    }
}

fn expect_eq(what: &str, got: u64, want: u64) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what} = {got:#x}, expected {want:#x}"))
    }
}

fn expect_hex(what: &str, got: &[u8], want: &str) -> Result<(), String> {
    let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
    if hex == want {
        Ok(())
    } else {
        Err(format!("{what} = {hex}, expected {want}"))
    }
}

fn stripe(blocks: usize, block_len: usize) -> Vec<Vec<u8>> {
    (0..blocks)
        .map(|i| {
            let mut b = vec![0u8; block_len];
            fill(&mut b, DataKind::Incompressible, 100 + i as u64);
            b
        })
        .collect()
}

/// XOR parity, then lose each block in turn and rebuild it from the rest.
fn raid5_rebuilds(data: usize) -> Result<(), String> {
    let blocks = stripe(data, 4096 + 64);
    let refs: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
    let mut parity = vec![0u8; blocks[0].len()];
    xor_parity(&mut parity, &refs);
    for (lost, original) in blocks.iter().enumerate() {
        let mut survivors: Vec<&[u8]> = refs.iter().enumerate().filter(|(i, _)| *i != lost).map(|(_, b)| *b).collect();
        survivors.push(&parity);
        let mut rebuilt = vec![0u8; parity.len()];
        xor_parity(&mut rebuilt, &survivors);
        if rebuilt != *original {
            return Err(format!("block {lost} rebuilt from parity differs"));
        }
    }
    Ok(())
}

/// P+Q, then lose two data blocks and rebuild them from the rest.
fn raid6_rebuilds(data: usize) -> Result<(), String> {
    let blocks = stripe(data, 4096);
    let recovery = reed_solomon_simd::encode(data, 2, &blocks).map_err(|e| e.to_string())?;
    let (lost_a, lost_b) = (0, data - 1);
    let survivors = blocks.iter().enumerate().filter(|(i, _)| *i != lost_a && *i != lost_b);
    let restored =
        reed_solomon_simd::decode(data, 2, survivors, recovery.iter().enumerate()).map_err(|e| e.to_string())?;
    for lost in [lost_a, lost_b] {
        if restored.get(&lost) != Some(&blocks[lost]) {
            return Err(format!("block {lost} rebuilt from P+Q differs"));
        }
    }
    Ok(())
}

enum Codec {
    Lz4,
    Zstd(i32),
}

/// Compresses a few records of `data` and decompresses them back.
fn round_trip(codec: Codec, data: DataKind) -> Result<(), String> {
    let mut input = vec![0u8; 3 * 128 * 1024 + 17];
    fill(&mut input, data, 9);
    let (compressed, restored) = match codec {
        Codec::Lz4 => {
            let c = lz4_flex::block::compress(&input);
            let r = lz4_flex::block::decompress(&c, input.len()).map_err(|e| e.to_string())?;
            (c, r)
        }
        Codec::Zstd(level) => {
            let c = zstd::bulk::compress(&input, level).map_err(|e| e.to_string())?;
            let r = zstd::bulk::decompress(&c, input.len()).map_err(|e| e.to_string())?;
            (c, r)
        }
    };
    if restored != input {
        return Err("decompressed data differs from the original".into());
    }
    let ratio = input.len() as f64 / compressed.len() as f64;
    if data == DataKind::Compressible2to1 && !(1.6..2.4).contains(&ratio) {
        return Err(format!("2:1 data compressed {ratio:.2}:1"));
    }
    Ok(())
}

/// Encrypts, decrypts back, and checks a flipped bit is rejected.
fn aead_round_trip(kernel: &Kernel) -> Result<(), String> {
    use ring::aead::{Aad, Nonce};
    let key = crate::kernels::aead_key(*kernel, 7)?;
    let nonce = || Nonce::assume_unique_for_key([9; 12]);
    let mut plain = vec![0u8; 70_000];
    fill(&mut plain, DataKind::Incompressible, 11);
    let mut sealed = plain.clone();
    key.seal_in_place_append_tag(nonce(), Aad::from(b"hdr"), &mut sealed).map_err(|_| "encryption failed")?;
    if sealed[..plain.len()] == plain[..] {
        return Err("ciphertext equals plaintext".into());
    }
    let mut tampered = sealed.clone();
    tampered[1234] ^= 1;
    if key.open_in_place(nonce(), Aad::from(b"hdr"), &mut tampered).is_ok() {
        return Err("a tampered message decrypted without error".into());
    }
    let opened = key.open_in_place(nonce(), Aad::from(b"hdr"), &mut sealed).map_err(|_| "decryption failed")?;
    if opened != &plain[..] {
        return Err("decrypted data differs from the original".into());
    }
    Ok(())
}

/// Whether the system's libcrypto loads and seals as ring does (ring is
/// checked against published vectors first): two messages under two nonces,
/// one of a length no SIMD block size divides, must give ring's ciphertext
/// and tag to the byte. Err says why it will not be timed.
pub(crate) fn libcrypto_agrees(kernel: &Kernel) -> Result<(), String> {
    use crate::kernels::{AeadSealer, Code};
    verify(kernel).map_err(|e| e.to_string())?;
    let mut ring = AeadSealer::new(*kernel, Code::Builtin, 7)?;
    let mut libcrypto = AeadSealer::new(*kernel, Code::SystemLibcrypto, 7)?;
    for (len, nonce) in [(70_001, [9u8; 12]), (4096, [3; 12])] {
        let mut by_ring = vec![0u8; len];
        fill(&mut by_ring, DataKind::Incompressible, 12);
        let mut by_libcrypto = by_ring.clone();
        let ring_tag = ring.seal(nonce, &mut by_ring)?;
        let libcrypto_tag = libcrypto.seal(nonce, &mut by_libcrypto)?;
        if by_ring != by_libcrypto || ring_tag != libcrypto_tag {
            return Err(format!("libcrypto's {} of {len} bytes differs from ring's", kernel.id()));
        }
    }
    Ok(())
}

/// Key bytes 0, 1, 2, ..., a zero nonce, AAD "smb3": ciphertext and tag as
/// OpenSSL computes them (Python's cryptography AESCCM, tag_length=16), then
/// a flipped bit must be rejected and the message must open again.
fn ccm_known_answer(kernel: &Kernel) -> Result<(), String> {
    let key: [u8; 32] = std::array::from_fn(|i| i as u8);
    let want = match kernel {
        Kernel::Aes128Ccm => {
            "0e3decb60e43f09300c19ce9ca89b15fe82116d3266108368127b9e61f611532b3870d4c5700f2c669b4b03ba0ff9d18"
        }
        _ => "7a8de5780dbeefe6091feb6857d2bfd0e7e278f8372245bd8a16a18abcf828e7017ee9ff45c7c4d7e0270fd52b8f1324",
    };
    let cipher = crate::kernels::SmbCcm::with_key(*kernel, &key)?;
    let plain = *b"headroom CCM known answer.......";
    let mut msg = plain;
    let tag = cipher.seal(&[0; 11], b"smb3", &mut msg).ok_or("encryption failed")?;
    let sealed: Vec<u8> = msg.iter().chain(tag.iter()).copied().collect();
    expect_hex(&format!("{} known answer", kernel.name()), &sealed, want)?;
    let mut tampered = msg;
    tampered[3] ^= 1;
    if cipher.open(&[0; 11], b"smb3", &mut tampered, &tag) {
        return Err("a tampered message decrypted without error".into());
    }
    if !cipher.open(&[0; 11], b"smb3", &mut msg, &tag) || msg != plain {
        return Err("the sealed message did not open to the original".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_kernel_passes() {
        super::verify_all().unwrap();
    }
}
