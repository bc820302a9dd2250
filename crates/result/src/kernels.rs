//! The CPU kernel catalog and what `headroom cpu` measured with it: the
//! kernels (their ids, names and groups), the matrix of kernels, thread
//! counts and buffers asked for, one measurement, and the instruction-set
//! features shown beside them. Here so presenters read them without the
//! engine; headroom-cpu re-exports them and owns how they are measured (the
//! workers, which crate computes each kernel, feature detection).

use crate::{details, CgroupCpu, Contention, CpuSpec, Probe, ProbeSpec, Sample, Summary};
use std::time::Duration;

/// What the buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataKind {
    /// Pseudo-random bytes: what encrypted or already-compressed data looks like.
    Incompressible,
    /// Half random, half zero in every 256-byte run: compresses about 2:1
    /// with LZ4 and zstd alike (fio's `buffer_compress_percentage=50` idea).
    Compressible2to1,
}

impl DataKind {
    /// As written in the probe spec: `incompressible`, `compressible-2to1`.
    pub fn as_str(self) -> &'static str {
        match self {
            DataKind::Incompressible => "incompressible",
            DataKind::Compressible2to1 => "compressible-2to1",
        }
    }
}

/// What a kernel is for, which decides what "fills the link" means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    /// RAID parity: measured against the disks' throughput.
    Parity,
    /// Checksums, as filesystems and protocols compute them per block.
    Checksum,
    /// Compression, as filesystems (ZFS, btrfs) and protocols apply it.
    Compression,
    /// Encryption, as SMB3, SSH and TLS apply it: measured against the link.
    Encryption,
}

/// Compress or decompress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Raw bytes in, compressed out.
    Compress,
    /// Compressed records in, raw bytes out.
    Decompress,
}

/// One measurable kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// RAID-5: XOR parity over `data` blocks per stripe.
    Raid5Xor {
        /// Data blocks per stripe (4 for a 4+1 array).
        data: usize,
    },
    /// RAID-6: two Reed-Solomon recovery shards over `data` blocks per stripe.
    Raid6Pq {
        /// Data blocks per stripe (8 for an 8+2 array).
        data: usize,
    },
    /// CRC-32C (Castagnoli), the iSCSI, ext4 and btrfs checksum.
    Crc32c,
    /// xxHash64.
    Xxh64,
    /// XXH3 (64-bit).
    Xxh3,
    /// SHA-256, as ZFS and btrfs offer for dedup and integrity.
    Sha256,
    /// BLAKE3.
    Blake3,
    /// Fletcher-4, ZFS's default checksum.
    Fletcher4,
    /// LZ4 block compression (lz4_flex), as ZFS and btrfs use it.
    Lz4 {
        /// Compress or decompress.
        direction: Direction,
        /// What the buffer holds.
        data: DataKind,
    },
    /// Zstandard at `level`.
    Zstd {
        /// Zstandard level (1 fastest; negative levels faster still).
        level: i32,
        /// Compress or decompress.
        direction: Direction,
        /// What the buffer holds.
        data: DataKind,
    },
    /// AES-128-GCM, authenticated encryption.
    Aes128Gcm,
    /// AES-256-GCM, SMB 3.1.1's strongest cipher.
    Aes256Gcm,
    /// ChaCha20-Poly1305, SSH's and WireGuard's cipher on CPUs without AES-NI.
    ChaCha20Poly1305,
    /// AES-128-CCM with SMB3's parameters (11-byte nonce, 16-byte tag): SMB
    /// 3.0's only cipher, still what 3.1.1 servers offer first by default.
    Aes128Ccm,
    /// AES-256-CCM with SMB3's parameters.
    Aes256Ccm,
}

/// Every kernel, in the order they are shown.
pub fn all_kernels() -> Vec<Kernel> {
    let mut kernels = vec![
        Kernel::Raid5Xor { data: 4 },
        Kernel::Raid6Pq { data: 4 },
        Kernel::Raid6Pq { data: 8 },
        Kernel::Crc32c,
        Kernel::Xxh64,
        Kernel::Xxh3,
        Kernel::Fletcher4,
        Kernel::Sha256,
        Kernel::Blake3,
    ];
    for data in [DataKind::Incompressible, DataKind::Compressible2to1] {
        for direction in [Direction::Compress, Direction::Decompress] {
            kernels.push(Kernel::Lz4 { direction, data });
            kernels.push(Kernel::Zstd { level: 1, direction, data });
            kernels.push(Kernel::Zstd { level: 3, direction, data });
        }
    }
    kernels.extend([
        Kernel::Aes128Gcm,
        Kernel::Aes256Gcm,
        Kernel::ChaCha20Poly1305,
        Kernel::Aes128Ccm,
        Kernel::Aes256Ccm,
    ]);
    kernels
}

impl Kernel {
    /// Stable identifier, as in the probe spec: `raid6-pq-8+2`, `zstd-3-compress`.
    pub fn id(&self) -> String {
        match self {
            Kernel::Raid5Xor { data } => format!("raid5-xor-{data}+1"),
            Kernel::Raid6Pq { data } => format!("raid6-pq-{data}+2"),
            Kernel::Crc32c => "crc32c".into(),
            Kernel::Xxh64 => "xxh64".into(),
            Kernel::Xxh3 => "xxh3-64".into(),
            Kernel::Sha256 => "sha256".into(),
            Kernel::Blake3 => "blake3".into(),
            Kernel::Fletcher4 => "fletcher4".into(),
            Kernel::Lz4 { direction, .. } => format!("lz4-{}", direction_str(*direction)),
            Kernel::Zstd { level, direction, .. } => format!("zstd-{level}-{}", direction_str(*direction)),
            Kernel::Aes128Gcm => "aes-128-gcm".into(),
            Kernel::Aes256Gcm => "aes-256-gcm".into(),
            Kernel::ChaCha20Poly1305 => "chacha20-poly1305".into(),
            Kernel::Aes128Ccm => "aes-128-ccm".into(),
            Kernel::Aes256Ccm => "aes-256-ccm".into(),
        }
    }

    /// Human name: `RAID-6 P+Q 8+2`, `zstd -3 compress`.
    pub fn name(&self) -> String {
        match self {
            Kernel::Raid5Xor { data } => format!("RAID-5 XOR {data}+1"),
            Kernel::Raid6Pq { data } => format!("RAID-6 P+Q {data}+2"),
            Kernel::Crc32c => "CRC32C".into(),
            Kernel::Xxh64 => "xxHash64".into(),
            Kernel::Xxh3 => "XXH3-64".into(),
            Kernel::Sha256 => "SHA-256".into(),
            Kernel::Blake3 => "BLAKE3".into(),
            Kernel::Fletcher4 => "Fletcher-4".into(),
            Kernel::Lz4 { direction, .. } => format!("LZ4 {}", direction_str(*direction)),
            Kernel::Zstd { level, direction, .. } => format!("zstd -{level} {}", direction_str(*direction)),
            Kernel::Aes128Gcm => "AES-128-GCM".into(),
            Kernel::Aes256Gcm => "AES-256-GCM".into(),
            Kernel::ChaCha20Poly1305 => "ChaCha20-Poly1305".into(),
            Kernel::Aes128Ccm => "AES-128-CCM".into(),
            Kernel::Aes256Ccm => "AES-256-CCM".into(),
        }
    }

    /// What the kernel is for.
    pub fn group(&self) -> Group {
        match self {
            Kernel::Raid5Xor { .. } | Kernel::Raid6Pq { .. } => Group::Parity,
            Kernel::Crc32c | Kernel::Xxh64 | Kernel::Xxh3 | Kernel::Sha256 | Kernel::Blake3 | Kernel::Fletcher4 => {
                Group::Checksum
            }
            Kernel::Lz4 { .. } | Kernel::Zstd { .. } => Group::Compression,
            Kernel::Aes128Gcm
            | Kernel::Aes256Gcm
            | Kernel::ChaCha20Poly1305
            | Kernel::Aes128Ccm
            | Kernel::Aes256Ccm => Group::Encryption,
        }
    }

    /// The data the kernel runs on.
    pub fn data(&self) -> DataKind {
        match self {
            Kernel::Lz4 { data, .. } | Kernel::Zstd { data, .. } => *data,
            _ => DataKind::Incompressible,
        }
    }

    /// Whether the data kind is part of what the kernel means (compression only).
    pub fn data_matters(&self) -> bool {
        self.group() == Group::Compression
    }
}

fn direction_str(d: Direction) -> &'static str {
    match d {
        Direction::Compress => "compress",
        Direction::Decompress => "decompress",
    }
}

/// One CPU feature and what it speeds up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// As the vendor names it: AES-NI, VAES, AVX2, AVX-512F, SHA-NI, ...
    pub name: &'static str,
    /// Whether this CPU has it (/proc/cpuinfo flags).
    pub present: bool,
    /// Which kernels use it here, and caveats.
    pub used_for: &'static str,
}

/// The buffer a column runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSpec {
    /// Out of cache: bytes shared out among the threads. Cache-resident:
    /// bytes per thread.
    pub bytes: u64,
    /// True: each thread has `bytes` of its own, sized to stay in cache; false: the threads share one buffer streamed from RAM.
    pub cache_resident: bool,
}

/// What `headroom cpu` measures: every kernel at every thread count on
/// every buffer.
#[derive(Debug, Clone)]
pub struct KernelMatrix {
    /// The kernels to measure, in order.
    pub kernels: Vec<Kernel>,
    /// Thread counts, e.g. [1, 8].
    pub threads: Vec<usize>,
    /// The buffers each kernel runs on.
    pub buffers: Vec<BufferSpec>,
    /// Measured time of each kernel x threads x buffer.
    pub time: Duration,
    /// Untimed run before each measurement (page faults, caches, clock ramp-up).
    pub warmup: Duration,
}

impl KernelMatrix {
    /// Number of measurements the plan makes.
    pub fn len(&self) -> usize {
        self.kernels.len() * self.threads.len() * self.buffers.len()
    }

    /// True when the plan measures nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Roughly how long the plan runs (set-up not included).
    pub fn expected_duration(&self) -> Duration {
        (self.time + self.warmup) * self.len() as u32
    }
}

/// One kernel at one thread count on one buffer.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// The kernel measured.
    pub kernel: Kernel,
    /// Threads that ran it at once.
    pub threads: usize,
    /// Bytes in the buffer the threads shared (cache-resident: per thread).
    pub buffer_bytes: u64,
    /// See [`BufferSpec::cache_resident`].
    pub cache_resident: bool,
    /// Payload bytes processed in the measured time (uncompressed bytes for compression).
    pub bytes: u64,
    /// The measured time, warm-up excluded.
    pub duration: Duration,
    /// `bytes` per second of `duration`, all threads together.
    pub bytes_per_sec: f64,
    /// Uncompressed / compressed, for compression kernels.
    pub ratio: Option<f64>,
    /// (seconds since start, bytes/s in the interval ending then).
    pub samples: Vec<(f64, f64)>,
    /// CPU time the workers got over their wall time, averaged (1.0: each
    /// had its CPU to itself; 0.4: other processes took 60% of it).
    pub cpu_share: f64,
    /// Bytes per second of CPU time the workers got, summed: what the
    /// kernel does when it has the CPUs to itself.
    pub bytes_per_cpu_sec: f64,
    /// The CPU quota of the measuring process's cgroup and what it throttled
    /// during the measurement, when it has one (set by the engine).
    pub quota: Option<CgroupCpu>,
    /// The cores other processes kept busy during a memory-resident
    /// measurement (set by the engine where it can read the machine's CPU
    /// counters; None on cache-resident ones and where they cannot be read).
    pub contention: Option<Contention>,
    /// Which crate (or code) computed the kernel, as the engine names it
    /// (`spec.implementation` of the probe).
    pub implementation: String,
    /// The other implementation timed for this kernel, when two were and
    /// this figure is the faster one's (`details.runner_up` of the probe).
    pub runner_up: Option<RunnerUp>,
}

/// An implementation timed beside the one whose figure a measurement
/// shows, and slower than it (ring's ChaCha20-Poly1305 against the
/// system's OpenSSL, on a CPU with AVX-512).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunnerUp {
    /// What it is, as [`Measurement::implementation`] names one.
    pub implementation: String,
    /// Its bytes per second on the same buffer and threads.
    pub bytes_per_sec: f64,
    /// Its bytes per CPU-second, the figure the two were ranked by.
    pub bytes_per_cpu_sec: f64,
}

/// A quota that throttled in this share of its periods held the workers
/// (the same threshold as the verdict's CPU rules).
const QUOTA_HELD_SHARE: f64 = 0.20;

/// Below this CPU share, a figure says more about the machine's load than the kernel.
pub const CONTENDED_SHARE: f64 = 0.9;

impl Measurement {
    /// Whether other processes took a noticeable share of the workers' CPUs
    /// (the figure is low; the probe carries a `cpu_contended` warning).
    pub fn contended(&self) -> bool {
        self.cpu_share < CONTENDED_SHARE
    }

    /// What other processes did during the measurement, when they kept
    /// enough cores busy to share its memory bandwidth (the probe carries a
    /// `memory_shared` warning).
    pub fn memory_shared(&self) -> Option<&Contention> {
        self.contention.as_ref().filter(|c| c.shares_memory())
    }

    /// The cgroup quota that held the workers back, when one throttled.
    pub fn held_by_quota(&self) -> Option<&CgroupCpu> {
        self.quota.as_ref().filter(|q| q.periods > 0 && q.throttled_share() >= QUOTA_HELD_SHARE)
    }

    /// `cpu-zstd-3-compress-compressible-2to1-t1-memory`: unique in a run.
    pub fn probe_id(&self) -> String {
        let data = if self.kernel.data_matters() { format!("-{}", self.kernel.data().as_str()) } else { String::new() };
        let place = if self.cache_resident { "cache" } else { "memory" };
        format!("cpu-{}{data}-t{}-{place}", self.kernel.id(), self.threads)
    }

    /// The measurement as a result-document probe of kind `cpu`.
    pub fn to_probe(&self) -> Probe {
        let mut details = std::collections::BTreeMap::new();
        if let Some(r) = self.ratio {
            details.insert("compression_ratio".into(), serde_json::json!(r));
        }
        details.insert("cpu_share".into(), serde_json::json!(self.cpu_share));
        details.insert("bytes_per_cpu_sec".into(), serde_json::json!(self.bytes_per_cpu_sec));
        if let Some(r) = &self.runner_up {
            details.insert(details::RUNNER_UP.into(), serde_json::to_value(r).expect("plain data"));
        }
        let mut warnings = Vec::new();
        if let Some(q) = &self.quota {
            details.insert(details::CGROUP.into(), serde_json::to_value(q).expect("plain data"));
        }
        if self.contended() {
            let why = match self.held_by_quota() {
                Some(q) => format!(
                    "its cgroup {}'s CPU quota of {:.0}% of one core throttled it in {:.0}% of {} periods",
                    q.path,
                    q.quota_cores() * 100.0,
                    q.throttled_share() * 100.0,
                    q.periods
                ),
                None => "other processes ran too".into(),
            };
            warnings.push(crate::Warning::new(
                crate::WarningCode::CpuContended,
                format!(
                    "the workers got {:.0}% of their CPUs' time ({why}): the figure is low; \
                     per CPU-second the kernel did {:.0} MB/s",
                    100.0 * self.cpu_share,
                    self.bytes_per_cpu_sec / 1e6
                ),
            ));
        }
        if let Some(c) = self.memory_shared() {
            warnings.push(crate::Warning::new(crate::WarningCode::MemoryShared, c.sentence()));
        }
        let name = if self.kernel.data_matters() {
            format!("{} ({})", self.kernel.name(), self.kernel.data().as_str())
        } else {
            self.kernel.name()
        };
        Probe {
            host: None,
            id: self.probe_id(),
            name,
            spec: ProbeSpec::Cpu(CpuSpec {
                kernel: self.kernel.id(),
                threads: self.threads as u32,
                buffer_size: self.buffer_bytes,
                data: self.kernel.data_matters().then(|| self.kernel.data().as_str().to_string()),
                cache_resident: Some(self.cache_resident),
                implementation: Some(self.implementation.clone()),
            }),
            summary: Summary {
                bytes_per_sec: self.bytes_per_sec,
                duration_s: self.duration.as_secs_f64(),
                bytes: Some(self.bytes),
                contention: self.contention.clone(),
                ..Summary::default()
            },
            samples: self
                .samples
                .iter()
                .map(|(t, b)| Sample { t_s: *t, bytes_per_sec: *b, ..Sample::default() })
                .collect(),
            histogram: None,
            warnings,
            details,
        }
    }
}
