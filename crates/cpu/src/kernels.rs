//! The kernels and their workers. A worker owns one thread's slice of the
//! buffer and processes it one chunk (a stripe, a record, a message) per
//! [`Worker::step`], wrapping around, so a run covers the whole slice again
//! and again; every result goes into `black_box`.
//!
//! Long because each kernel's worker is small and they read best side by side
//! (a dozen kernels, one `Worker` each).

use crate::fletcher::fletcher4;
use crate::xor::xor_parity;
use headroom_result::kernels::{Direction, Kernel};
use std::hint::black_box;

/// Bytes a checksum or compression kernel handles per call: ZFS's default
/// recordsize.
const RECORD: usize = 128 * 1024;
/// Bytes per parity block (md's chunk is larger, but parity is computed per
/// page-sized run of each block; 64 KiB keeps a stripe's blocks in L2).
const PARITY_BLOCK: usize = 64 * 1024;
/// Bytes per AEAD message: SMB3 and TLS encrypt at most a few tens of KiB per
/// record/PDU fragment in practice; 64 KiB amortises the per-message setup as
/// a bulk stream does.
const AEAD_MESSAGE: usize = 64 * 1024;

/// Which crate (or code) computes it, for the record.
#[cfg(not(target_arch = "aarch64"))]
pub fn implementation(kernel: &Kernel) -> String {
    match kernel {
        Kernel::Raid5Xor { .. } => format!("hand-written XOR ({})", crate::xor::xor_implementation()),
        Kernel::Raid6Pq { .. } => "reed-solomon-simd 3 (Leopard RS over GF(2^16), runtime SIMD dispatch)".into(),
        Kernel::Crc32c => "crc32c 0.6 (SSE4.2 crc32 instruction when present)".into(),
        Kernel::Xxh64 => "xxhash-rust 0.8 xxh64".into(),
        Kernel::Xxh3 => "xxhash-rust 0.8 xxh3 (SSE2 build; AVX2 only with target-cpu flags)".into(),
        Kernel::Sha256 => "sha2 0.10 (SHA-NI when present)".into(),
        Kernel::Blake3 => "blake3 1 (SSE4.1/AVX2/AVX-512 runtime dispatch, one thread)".into(),
        Kernel::Fletcher4 => "hand-written ZFS scalar fletcher_4 (no crate has ZFS's variant)".into(),
        Kernel::Lz4 { .. } => "lz4_flex 0.11 block format (unsafe fast paths, checked decode)".into(),
        Kernel::Zstd { .. } => "zstd 0.13 (libzstd)".into(),
        Kernel::Aes128Gcm | Kernel::Aes256Gcm => {
            "ring 0.17 (BoringSSL/OpenSSL assembly: AES-NI + PCLMULQDQ, stitched AVX/VAES paths)".into()
        }
        // No Rust crate offers OpenSSL's AVX-512 ChaCha20 and Poly1305 in a
        // default build: on such a CPU ring does about 0.7x `openssl speed`
        // per CPU-second (docs/performance.md). The bench times the system's
        // libcrypto too where it loads; where it does not, the record says so.
        Kernel::ChaCha20Poly1305 if avx512_chacha() => {
            "ring 0.17 (BoringSSL AVX2 assembly; OpenSSL 3 has a faster AVX-512 path for this CPU)".into()
        }
        Kernel::ChaCha20Poly1305 => "ring 0.17 (BoringSSL assembly, SSSE3/AVX2, as OpenSSL's on this CPU)".into(),
        Kernel::Aes128Ccm | Kernel::Aes256Ccm => {
            "RustCrypto ccm 0.5 + aes 0.8 (AES-NI when present), as headroom's SMB client seals".into()
        }
    }
}

/// Whether OpenSSL would take its AVX-512 ChaCha20 path on this CPU (it
/// wants AVX-512F and AVX-512VL).
#[cfg(target_arch = "x86_64")]
fn avx512_chacha() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vl")
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn avx512_chacha() -> bool {
    false
}

/// Which crate (or code) computes it and, where the crate picks a path
/// at run time, the one this CPU takes (read from the same feature bits
/// the crates test), for the record.
#[cfg(target_arch = "aarch64")]
pub fn implementation(kernel: &Kernel) -> String {
    use std::arch::is_aarch64_feature_detected as has;
    let pick = |feature: bool, with: &str, without: &str| if feature { with } else { without }.to_string();
    match kernel {
        Kernel::Raid5Xor { .. } => format!("hand-written XOR ({})", crate::xor::xor_implementation()),
        Kernel::Raid6Pq { .. } => pick(
            has!("neon"),
            "reed-solomon-simd 3 (Leopard RS over GF(2^16), NEON engine)",
            "reed-solomon-simd 3 (Leopard RS over GF(2^16), scalar engine: no NEON)",
        ),
        Kernel::Crc32c => pick(
            has!("crc"),
            "crc32c 0.6 (ARMv8 CRC32C instructions)",
            "crc32c 0.6 (table-driven: this CPU has no CRC32 extension)",
        ),
        Kernel::Xxh64 => "xxhash-rust 0.8 xxh64 (scalar)".into(),
        Kernel::Xxh3 => "xxhash-rust 0.8 xxh3 (NEON build)".into(),
        Kernel::Sha256 => pick(
            has!("sha2"),
            "sha2 0.10 (ARMv8 SHA-256 instructions)",
            "sha2 0.10 (portable code: this CPU has no SHA2 extension)",
        ),
        Kernel::Blake3 => "blake3 1 (NEON, one thread)".into(),
        Kernel::Fletcher4 => "hand-written ZFS scalar fletcher_4 (no crate has ZFS's variant)".into(),
        Kernel::Lz4 { .. } => "lz4_flex 0.11 block format (scalar, checked decode)".into(),
        Kernel::Zstd { .. } => {
            "zstd 0.13 (libzstd: NEON in its copy loops; levels 1-3 match finders are scalar)".into()
        }
        Kernel::Aes128Gcm | Kernel::Aes256Gcm => pick(
            has!("aes") && has!("pmull"),
            "ring 0.17 (ARMv8 AES + PMULL assembly)",
            "ring 0.17 (NEON vector-permute AES and NEON GHASH: no ARMv8 crypto extensions)",
        ),
        Kernel::ChaCha20Poly1305 => "ring 0.17 (ChaCha20 NEON assembly, Poly1305 portable C)".into(),
        Kernel::Aes128Ccm | Kernel::Aes256Ccm => pick(
            has!("aes"),
            "RustCrypto ccm 0.5 + aes 0.8 (ARMv8 AES), as headroom's SMB client seals",
            "RustCrypto ccm 0.5 + aes 0.8 (bitsliced software AES), as headroom's SMB client seals",
        ),
    }
}

/// Bytes of one step on a slice of `len` bytes: the kernel's natural
/// unit, shrunk to fit small buffers.
fn chunk(kernel: &Kernel, len: usize) -> usize {
    let chunk = match kernel {
        Kernel::Raid5Xor { data } | Kernel::Raid6Pq { data } => {
            let block = (len / data).min(PARITY_BLOCK) / 64 * 64;
            return block.max(64) * data;
        }
        Kernel::Aes128Gcm | Kernel::Aes256Gcm | Kernel::ChaCha20Poly1305 | Kernel::Aes128Ccm | Kernel::Aes256Ccm => {
            AEAD_MESSAGE
        }
        _ => RECORD,
    };
    chunk.min(len) / 64 * 64
}

/// One thread's share of a run.
pub(crate) trait Worker: Send {
    /// Processes the next chunk; returns payload bytes handled.
    fn step(&mut self) -> u64;
    /// Uncompressed / compressed bytes, for compression kernels.
    fn ratio(&self) -> Option<f64> {
        None
    }
}

/// Walks a slice chunk by chunk, wrapping at the end.
struct Cursor {
    pos: usize,
    chunk: usize,
    len: usize,
}

impl Cursor {
    fn new(chunk: usize, len: usize) -> Self {
        Cursor { pos: 0, chunk, len }
    }

    fn next(&mut self) -> std::ops::Range<usize> {
        if self.pos + self.chunk > self.len {
            self.pos = 0;
        }
        let range = self.pos..self.pos + self.chunk;
        self.pos += self.chunk;
        range
    }
}

/// Which code computes a kernel: the crate headroom is built with, or (for
/// the kernels [`crate::libcrypto::offers`]) the system's OpenSSL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// The crate [`implementation`] names.
    Builtin,
    /// The system's libcrypto, loaded at run time.
    SystemLibcrypto,
}

/// What `code` is for `kernel`, for the record.
pub(crate) fn describe(kernel: &Kernel, code: Code) -> String {
    match code {
        Code::Builtin => implementation(kernel),
        Code::SystemLibcrypto => crate::libcrypto::implementation().unwrap_or_else(|why| why),
    }
}

/// A worker for `kernel` over `slice` (at least 4 KiB), running `code`.
/// Setup work (keys, encoders, the compressed records a decompressor reads)
/// happens here, before the clock starts.
pub(crate) fn worker<'a>(kernel: Kernel, code: Code, slice: &'a mut [u8]) -> Result<Box<dyn Worker + 'a>, String> {
    let chunk = chunk(&kernel, slice.len());
    if chunk == 0 || chunk > slice.len() {
        return Err(format!("a {} byte buffer is too small", slice.len()));
    }
    let cursor = Cursor::new(chunk, slice.len());
    Ok(match kernel {
        Kernel::Raid5Xor { data } => Box::new(XorWorker { slice, cursor, blocks: data, parity: vec![0; chunk / data] }),
        Kernel::Raid6Pq { data } => {
            let encoder =
                reed_solomon_simd::ReedSolomonEncoder::new(data, 2, chunk / data).map_err(|e| e.to_string())?;
            Box::new(PqWorker { slice, cursor, blocks: data, encoder })
        }
        Kernel::Crc32c => Box::new(HashWorker { slice, cursor, hash: |d| u64::from(crc32c::crc32c(d)) }),
        Kernel::Xxh64 => Box::new(HashWorker { slice, cursor, hash: |d| xxhash_rust::xxh64::xxh64(d, 0) }),
        Kernel::Xxh3 => Box::new(HashWorker { slice, cursor, hash: xxhash_rust::xxh3::xxh3_64 }),
        Kernel::Fletcher4 => Box::new(HashWorker { slice, cursor, hash: |d| fletcher4(d)[3] }),
        Kernel::Sha256 => Box::new(HashWorker {
            slice,
            cursor,
            hash: |d| {
                use sha2::Digest;
                let digest = sha2::Sha256::digest(d);
                u64::from_le_bytes(digest[..8].try_into().expect("32-byte digest"))
            },
        }),
        Kernel::Blake3 => Box::new(HashWorker {
            slice,
            cursor,
            hash: |d| u64::from_le_bytes(blake3::hash(d).as_bytes()[..8].try_into().expect("32-byte hash")),
        }),
        Kernel::Lz4 { direction: Direction::Compress, .. } => Box::new(CompressWorker {
            cursor,
            slice,
            out: vec![0; lz4_flex::block::get_maximum_output_size(chunk)],
            codec: Codec::Lz4,
            bytes_in: 0,
            bytes_out: 0,
        }),
        Kernel::Zstd { level, direction: Direction::Compress, .. } => Box::new(CompressWorker {
            cursor,
            slice,
            out: vec![0; zstd::zstd_safe::compress_bound(chunk)],
            codec: Codec::Zstd(Box::new(zstd::bulk::Compressor::new(level).map_err(|e| e.to_string())?)),
            bytes_in: 0,
            bytes_out: 0,
        }),
        Kernel::Lz4 { direction: Direction::Decompress, .. } => {
            DecompressWorker::new(slice, chunk, Codec::Lz4).map(|w| Box::new(w) as Box<dyn Worker>)?
        }
        Kernel::Zstd { level, direction: Direction::Decompress, .. } => {
            let compressor = zstd::bulk::Compressor::new(level).map_err(|e| e.to_string())?;
            DecompressWorker::new(slice, chunk, Codec::Zstd(Box::new(compressor)))
                .map(|w| Box::new(w) as Box<dyn Worker>)?
        }
        Kernel::Aes128Gcm | Kernel::Aes256Gcm | Kernel::ChaCha20Poly1305 => {
            Box::new(AeadWorker { slice, cursor, sealer: AeadSealer::new(kernel, code, 0x42)?, counter: 0 })
        }
        Kernel::Aes128Ccm | Kernel::Aes256Ccm => {
            Box::new(CcmWorker { slice, cursor, cipher: SmbCcm::new(kernel, 0x42)?, counter: 0 })
        }
    })
}

/// The widest stripe the XOR worker handles (RAID-5 arrays rarely exceed 16+1).
const MAX_DATA_BLOCKS: usize = 16;

struct XorWorker<'a> {
    slice: &'a mut [u8],
    cursor: Cursor,
    blocks: usize,
    parity: Vec<u8>,
}

impl Worker for XorWorker<'_> {
    fn step(&mut self) -> u64 {
        let range = self.cursor.next();
        let stripe = &self.slice[range];
        let block = self.parity.len();
        // At most MAX_DATA_BLOCKS blocks: an array avoids allocating per stripe.
        let mut blocks: [&[u8]; MAX_DATA_BLOCKS] = [&[]; MAX_DATA_BLOCKS];
        for (slot, data) in blocks.iter_mut().zip(stripe.chunks_exact(block)) {
            *slot = data;
        }
        xor_parity(&mut self.parity, black_box(&blocks[..self.blocks]));
        black_box(&mut self.parity);
        stripe.len() as u64
    }
}

struct PqWorker<'a> {
    slice: &'a mut [u8],
    cursor: Cursor,
    blocks: usize,
    encoder: reed_solomon_simd::ReedSolomonEncoder,
}

impl Worker for PqWorker<'_> {
    fn step(&mut self) -> u64 {
        let range = self.cursor.next();
        let stripe = &self.slice[range];
        let block = stripe.len() / self.blocks;
        for shard in stripe.chunks_exact(block) {
            if self.encoder.add_original_shard(black_box(shard)).is_err() {
                return 0;
            }
        }
        match self.encoder.encode() {
            Ok(result) => {
                black_box(result.recovery(0));
                black_box(result.recovery(1));
                stripe.len() as u64
            }
            Err(_) => 0,
        }
    }
}

struct HashWorker<'a> {
    slice: &'a mut [u8],
    cursor: Cursor,
    hash: fn(&[u8]) -> u64,
}

impl Worker for HashWorker<'_> {
    fn step(&mut self) -> u64 {
        let range = self.cursor.next();
        let record = black_box(&self.slice[range]);
        black_box((self.hash)(record));
        record.len() as u64
    }
}

enum Codec {
    Lz4,
    Zstd(Box<zstd::bulk::Compressor<'static>>),
}

impl Codec {
    fn compress(&mut self, input: &[u8], out: &mut [u8]) -> Option<usize> {
        match self {
            Codec::Lz4 => lz4_flex::block::compress_into(input, out).ok(),
            Codec::Zstd(c) => c.compress_to_buffer(input, out).ok(),
        }
    }
}

struct CompressWorker<'a> {
    slice: &'a mut [u8],
    cursor: Cursor,
    out: Vec<u8>,
    codec: Codec,
    bytes_in: u64,
    bytes_out: u64,
}

impl Worker for CompressWorker<'_> {
    fn step(&mut self) -> u64 {
        let range = self.cursor.next();
        let record = black_box(&self.slice[range]);
        let Some(n) = self.codec.compress(record, &mut self.out) else { return 0 };
        black_box(&self.out[..n]);
        self.bytes_in += record.len() as u64;
        self.bytes_out += n as u64;
        record.len() as u64
    }

    fn ratio(&self) -> Option<f64> {
        (self.bytes_out > 0).then(|| self.bytes_in as f64 / self.bytes_out as f64)
    }
}

enum Decoder {
    Lz4,
    Zstd(Box<zstd::bulk::Decompressor<'static>>),
}

struct DecompressWorker {
    records: Vec<Vec<u8>>,
    next: usize,
    record_len: usize,
    out: Vec<u8>,
    decoder: Decoder,
    ratio: f64,
}

impl DecompressWorker {
    /// Compresses the slice record by record (not timed); the run decompresses them.
    fn new(slice: &[u8], record_len: usize, mut codec: Codec) -> Result<Self, String> {
        let bound = match codec {
            Codec::Lz4 => lz4_flex::block::get_maximum_output_size(record_len),
            Codec::Zstd(_) => zstd::zstd_safe::compress_bound(record_len),
        };
        let mut scratch = vec![0; bound];
        let mut records = Vec::new();
        let (mut total_in, mut total_out) = (0usize, 0usize);
        for record in slice.chunks_exact(record_len) {
            let n = codec.compress(record, &mut scratch).ok_or("compression failed")?;
            records.push(scratch[..n].to_vec());
            total_in += record.len();
            total_out += n;
        }
        let decoder = match codec {
            Codec::Lz4 => Decoder::Lz4,
            Codec::Zstd(_) => Decoder::Zstd(Box::new(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?)),
        };
        Ok(DecompressWorker {
            records,
            next: 0,
            record_len,
            out: vec![0; record_len],
            decoder,
            ratio: total_in as f64 / total_out.max(1) as f64,
        })
    }
}

impl Worker for DecompressWorker {
    fn step(&mut self) -> u64 {
        let record = black_box(&self.records[self.next]);
        self.next = (self.next + 1) % self.records.len();
        let n = match &mut self.decoder {
            Decoder::Lz4 => lz4_flex::block::decompress_into(record, &mut self.out).ok(),
            Decoder::Zstd(d) => d.decompress_to_buffer(record, &mut self.out).ok(),
        };
        match n {
            Some(n) if n == self.record_len => {
                black_box(&self.out);
                n as u64
            }
            _ => 0,
        }
    }

    fn ratio(&self) -> Option<f64> {
        Some(self.ratio)
    }
}

/// A ring AEAD key for one of the encryption kernels, every byte `fill`.
pub(crate) fn aead_key(kernel: Kernel, fill: u8) -> Result<ring::aead::LessSafeKey, String> {
    use ring::aead::{UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};
    let algorithm = match kernel {
        Kernel::Aes128Gcm => &AES_128_GCM,
        Kernel::Aes256Gcm => &AES_256_GCM,
        Kernel::ChaCha20Poly1305 => &CHACHA20_POLY1305,
        _ => return Err(format!("{} is not an AEAD", kernel.id())),
    };
    let key_bytes = vec![fill; algorithm.key_len()];
    let key = UnboundKey::new(algorithm, &key_bytes).map_err(|_| "bad key length".to_string())?;
    Ok(ring::aead::LessSafeKey::new(key))
}

/// One AEAD kernel's key in either implementation.
// One per worker, made once before the clock starts: the size of the
// unboxed ring key costs nothing, a box would cost a pointer chase per seal.
#[allow(clippy::large_enum_variant)]
pub(crate) enum AeadSealer {
    Ring(ring::aead::LessSafeKey),
    Libcrypto(crate::libcrypto::Sealer),
}

impl AeadSealer {
    /// `kernel`'s sealer in `code`, keyed with every byte `fill`.
    pub(crate) fn new(kernel: Kernel, code: Code, fill: u8) -> Result<AeadSealer, String> {
        let ring_key = aead_key(kernel, fill)?;
        Ok(match code {
            Code::Builtin => AeadSealer::Ring(ring_key),
            Code::SystemLibcrypto => {
                let key = vec![fill; ring_key.algorithm().key_len()];
                AeadSealer::Libcrypto(crate::libcrypto::Sealer::new(kernel, &key)?)
            }
        })
    }

    /// Encrypts `message` in place under `nonce`, no associated data; the tag.
    pub(crate) fn seal(&mut self, nonce: [u8; 12], message: &mut [u8]) -> Result<[u8; 16], String> {
        match self {
            AeadSealer::Ring(key) => key
                .seal_in_place_separate_tag(
                    ring::aead::Nonce::assume_unique_for_key(nonce),
                    ring::aead::Aad::empty(),
                    message,
                )
                .map(|tag| tag.as_ref().try_into().expect("16-byte tag"))
                .map_err(|_| "ring's seal failed".to_string()),
            AeadSealer::Libcrypto(sealer) => sealer.seal(&nonce, message),
        }
    }
}

struct AeadWorker<'a> {
    slice: &'a mut [u8],
    cursor: Cursor,
    sealer: AeadSealer,
    counter: u64,
}

impl Worker for AeadWorker<'_> {
    fn step(&mut self) -> u64 {
        let range = self.cursor.next();
        // A fresh nonce per message, as a real stream uses.
        self.counter += 1;
        let mut nonce = [0u8; 12];
        nonce[..8].copy_from_slice(&self.counter.to_le_bytes());
        let message = &mut self.slice[range];
        match self.sealer.seal(nonce, black_box(message)) {
            Ok(tag) => {
                let _ = black_box(tag);
                message.len() as u64
            }
            Err(_) => 0,
        }
    }
}

type Aes128Ccm = ccm::Ccm<aes::Aes128, ccm::consts::U16, ccm::consts::U11>;
type Aes256Ccm = ccm::Ccm<aes::Aes256, ccm::consts::U16, ccm::consts::U11>;

/// AES-CCM as SMB3 parameterises it (MS-SMB2 3.1.4.3: 11-byte nonce,
/// 16-byte signature), on the crates headroom-proto's sealing uses.
pub(crate) enum SmbCcm {
    Aes128(Box<Aes128Ccm>),
    Aes256(Box<Aes256Ccm>),
}

impl SmbCcm {
    /// The cipher of a CCM kernel, every key byte `fill`.
    pub(crate) fn new(kernel: Kernel, fill: u8) -> Result<SmbCcm, String> {
        Self::with_key(kernel, &[fill; 32])
    }

    /// The cipher of a CCM kernel with the first 16 or 32 bytes of `key`.
    pub(crate) fn with_key(kernel: Kernel, key: &[u8; 32]) -> Result<SmbCcm, String> {
        use ccm::aead::KeyInit;
        Ok(match kernel {
            Kernel::Aes128Ccm => SmbCcm::Aes128(Box::new(Aes128Ccm::new(key[..16].into()))),
            Kernel::Aes256Ccm => SmbCcm::Aes256(Box::new(Aes256Ccm::new(key.into()))),
            _ => return Err(format!("{} is not AES-CCM", kernel.id())),
        })
    }

    /// Encrypts `msg` in place; the tag.
    pub(crate) fn seal(&self, nonce: &[u8; 11], aad: &[u8], msg: &mut [u8]) -> Option<[u8; 16]> {
        use ccm::aead::AeadInPlace;
        let tag = match self {
            SmbCcm::Aes128(c) => c.encrypt_in_place_detached(nonce.into(), aad, msg),
            SmbCcm::Aes256(c) => c.encrypt_in_place_detached(nonce.into(), aad, msg),
        };
        tag.ok().map(Into::into)
    }

    /// Authenticates and decrypts `msg` in place.
    pub(crate) fn open(&self, nonce: &[u8; 11], aad: &[u8], msg: &mut [u8], tag: &[u8; 16]) -> bool {
        use ccm::aead::AeadInPlace;
        match self {
            SmbCcm::Aes128(c) => c.decrypt_in_place_detached(nonce.into(), aad, msg, tag.into()),
            SmbCcm::Aes256(c) => c.decrypt_in_place_detached(nonce.into(), aad, msg, tag.into()),
        }
        .is_ok()
    }
}

struct CcmWorker<'a> {
    slice: &'a mut [u8],
    cursor: Cursor,
    cipher: SmbCcm,
    counter: u64,
}

impl Worker for CcmWorker<'_> {
    fn step(&mut self) -> u64 {
        let range = self.cursor.next();
        self.counter += 1;
        let mut nonce = [0u8; 11];
        nonce[..8].copy_from_slice(&self.counter.to_le_bytes());
        let message = &mut self.slice[range];
        match self.cipher.seal(&nonce, &[], black_box(message)) {
            Some(tag) => {
                black_box(tag);
                message.len() as u64
            }
            None => 0,
        }
    }
}
