//! headroom-cpu: what this machine's CPU can push through the work storage
//! stacks do — RAID-5/6 parity, checksums (CRC32C, xxHash, SHA-256, BLAKE3,
//! Fletcher-4), compression (LZ4, zstd) and encryption (AES-GCM,
//! ChaCha20-Poly1305) — per core and on all cores, on a buffer larger than
//! the caches and on a cache-sized one.
//!
//! The algorithms come from well-kept crates (and, for AES-GCM and
//! ChaCha20-Poly1305, also from the system's OpenSSL where it is faster:
//! `libcrypto`); this crate's job is measuring
//! them honestly: every kernel passes a correctness check before it is timed
//! ([`verify`]), workers are pinned to CPUs, warm up before the clock starts,
//! run for a fixed time over enough bytes, and feed every output into
//! `std::hint::black_box` so the optimiser cannot drop the work.
//!
//! Owns kernels, their measurement and CPU feature detection. Knows nothing
//! of links, output or progress bars: callers get [`Measurement`]s (and
//! [`Measurement::to_probe`]) and a progress callback.

mod choice;
mod data;
mod features;
mod fletcher;
mod kernels;
mod libcrypto;
mod measure;
mod os;
mod probe_engine;
mod verify;
mod xor;

pub use choice::{select_kernels, BadChoice, CpuChoice, Setting};
pub use features::features;
pub use fletcher::fletcher4;
/// The kernel catalog and the measurement documents live in headroom-result
/// (presenters read them there); this crate measures them.
pub use headroom_result::kernels::{
    all_kernels, BufferSpec, DataKind, Direction, Feature, Group, Kernel, KernelMatrix, Measurement, RunnerUp,
    CONTENDED_SHARE,
};
pub use kernels::implementation;

/// The system's OpenSSL 3 libcrypto that the AES-GCM and ChaCha20-Poly1305
/// kernels are raced against ("OpenSSL 3.0.22 ... (the system's
/// libcrypto.so.3)"), or why it cannot be loaded here.
pub fn system_libcrypto() -> Result<String, String> {
    libcrypto::implementation()
}
pub use measure::{run, KernelBench, ProgressEvent};
pub use probe_engine::{measurement_of, requests, CpuEngine, CpuRequest};
pub use verify::{verify, verify_all};

/// Why a CPU run could not produce figures.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    /// A kernel computed a wrong answer: its speed would be a fantasy.
    #[error("kernel {kernel} failed its correctness check ({reason}); refusing to time it")]
    Incorrect {
        /// The kernel's id, e.g. `crc32c`.
        kernel: String,
        /// What the check found.
        reason: String,
    },
    /// A kernel could not be set up or run on its buffer.
    #[error("kernel {kernel} could not be set up: {reason}")]
    Setup {
        /// The kernel's id, e.g. `zstd-3-compress`.
        kernel: String,
        /// What failed.
        reason: String,
    },
    /// A measurement thread could not be spawned (the OS's message).
    #[error("could not start a measurement thread: {0}")]
    Thread(String),
}

/// The smallest buffer a run accepts (one 4 KiB page).
pub const MIN_BUFFER: u64 = 4096;

/// The cache-resident buffer: 256 KiB fits the L2 of practically every core
/// made this century, so the second column shows the kernel without memory
/// bandwidth in the way.
pub const CACHE_BUFFER: u64 = 256 * 1024;

/// The default out-of-cache buffer: the larger of 64 MiB and twice the
/// last-level cache this machine reports, so the data streams from RAM.
pub fn default_memory_buffer() -> u64 {
    let llc = last_level_cache_bytes().unwrap_or(0);
    (64 << 20).max(2 * llc)
}

/// Size of the largest cache this platform lists for CPU 0, bytes.
pub fn last_level_cache_bytes() -> Option<u64> {
    os::cache_sizes().iter().filter_map(|s| parse_cache_size(s.trim())).max()
}

/// "32768K" -> 33554432; "2M" -> 2097152.
fn parse_cache_size(text: &str) -> Option<u64> {
    let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "" => n,
        "K" => n << 10,
        "M" => n << 20,
        "G" => n << 30,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn cache_sizes_parse() {
        assert_eq!(super::parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(super::parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(super::parse_cache_size("x"), None);
    }
}
