//! The result document, `headroom.result/v1`: the spine of headroom.
//!
//! Engines (disk, net, cpu, sys) fill it; analysis, presenters, `compare` and
//! `report` read only it. Field names are fixed by docs/design.md: add fields freely
//! (optional, with serde defaults so old files keep loading), never rename or
//! drop one without bumping [`SCHEMA`]. The JSON Schema in
//! `docs/schema/result-v1.json` is generated from these types and a test fails
//! when the two disagree (`UPDATE_SCHEMA=1 cargo test -p headroom-result`
//! rewrites it).
//!
//! Documents from outside are read through [`ResultDoc::from_reader`] (at
//! most [`MAX_DOCUMENT_BYTES`]) or [`ResultDoc::from_json`], which check the
//! schema, then the content, then every figure ([`ResultDoc::validate`]).
//! [`read_input_file`] is the one way a file the user names as input is
//! read (documents, a fleet's hosts file): capped, and never blocked on a FIFO.
//!
//! This crate does no I/O beyond reading such files and (de)serialising
//! documents, and knows nothing of how figures were measured.
//!
//! Long (about 670 lines) because it is the document's type definitions: the schema is generated
//! from them, so they stay together where a reader sees the whole document at once.

#[macro_use]
mod words;
mod os;

mod cpu_load;
pub mod details;
mod fleet;
pub mod flushcheck;
mod host;
pub mod kernels;
mod soak;
mod validate;
mod verdict;
mod warning;

pub use cpu_load::*;
pub use fleet::*;
pub use host::*;
pub use soak::*;
pub use validate::*;
pub use verdict::*;
pub use warning::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;

/// The schema identifier written into every result document.
pub const SCHEMA: &str = "headroom.result/v1";

/// One run of headroom: what was measured, on what, and what it means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResultDoc {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The program and version that wrote the document.
    pub tool: Tool,
    /// The user's name for this run (`--label`), used as a column in `compare`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// RFC 3339 UTC time the run started.
    pub started_at: String,
    /// Inventory of the machine that ran the probes.
    #[serde(default)]
    pub host: Host,
    /// Every measurement of the run.
    #[serde(default)]
    pub probes: Vec<Probe>,
    /// Physical ceilings of each hop on the path.
    #[serde(default)]
    pub ceilings: Vec<Ceiling>,
    /// The bottleneck verdict, when analysis ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Run-level warnings not tied to one probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// What a `headroom soak` found over its run (gaps, events, detections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<Soak>,
    /// The inventories of the other machines that ran probes of this
    /// document (`headroom serve` at the far end), matched to probes by
    /// `Probe.host` = `Host.hostname`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<Host>,
    /// What `headroom fleet` gathered: its hosts, their clocks and starts,
    /// and per test the sum over hosts with its spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<Fleet>,
}

/// The program that wrote the document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    /// Program name, always `headroom` for documents headroom writes.
    pub name: String,
    /// The writer's version (its Cargo package version), e.g. `0.1.0`.
    pub version: String,
}

impl Default for Tool {
    fn default() -> Self {
        Tool { name: "headroom".into(), version: env!("CARGO_PKG_VERSION").into() }
    }
}

/// One measurement: a disk test, a network test, a ping series, a CPU kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Probe {
    /// Unique within the document, e.g. `seq1m-q8t1-read`.
    pub id: String,
    /// Human name, e.g. `SEQ1M Q8T1 read`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `kind` and `spec`: what was asked, resolved.
    #[serde(flatten)]
    pub spec: ProbeSpec,
    /// The probe's figures as a whole.
    pub summary: Summary,
    /// One per interval (`summary.sample_interval_s`); warm-up excluded
    /// (a disk probe keeps its warm-up's samples in `details.warmup_samples`,
    /// at negative `t_s`, for charts only).
    #[serde(default)]
    pub samples: Vec<Sample>,
    /// Latency histogram, when the probe measured latency per operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<Histogram>,
    /// Honesty and sanity warnings about this probe's figures (cache hits, compressible data, a throttled CPU...).
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// Probe-specific figures that have no field of their own yet
    /// (e.g. TCP_INFO counters, the equivalent fio command line).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub details: BTreeMap<String, serde_json::Value>,
    /// The hostname of the machine the probe ran on, when it is not the
    /// document's `host`: a `headroom serve` that ran it for this client (its
    /// inventory is in `peers`). Absent: it ran on `host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Probe {
    /// Whether the probe ran on another machine than the document's host.
    pub fn ran_remotely(&self) -> bool {
        self.host.is_some()
    }

    /// The probe's kind as written in the document: disk, net, ping or cpu.
    pub fn kind(&self) -> ProbeKind {
        match self.spec {
            ProbeSpec::Disk(_) => ProbeKind::Disk,
            ProbeSpec::Net(_) => ProbeKind::Net,
            ProbeSpec::Ping(_) => ProbeKind::Ping,
            ProbeSpec::Cpu(_) => ProbeKind::Cpu,
        }
    }
}

/// The kinds of probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// A storage probe (`headroom disk`, the disk half of `headroom run`).
    Disk,
    /// A throughput or request/response probe (`headroom net`).
    Net,
    /// A latency-only series (`headroom ping`): TCP connect or UDP echo times.
    Ping,
    /// A CPU kernel probe (`headroom cpu`).
    Cpu,
}

/// What a probe was asked to do, by kind. Serialised as `"kind": ..., "spec": {...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "spec", rename_all = "lowercase")]
pub enum ProbeSpec {
    /// Serialised as `"kind": "disk"`.
    Disk(DiskSpec),
    /// Serialised as `"kind": "net"`.
    Net(NetSpec),
    /// Serialised as `"kind": "ping"`.
    Ping(PingSpec),
    /// Serialised as `"kind": "cpu"`.
    Cpu(CpuSpec),
}

/// A disk probe's resolved parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiskSpec {
    /// read, write, randread, randwrite or randrw.
    pub rw: String,
    /// Bytes per I/O.
    pub block_size: u64,
    /// Operations in flight per job (fio's `iodepth`).
    pub queue_depth: u32,
    /// Workers issuing I/O at once, each with its own queue (fio's `numjobs`).
    pub jobs: u32,
    /// Whether O_DIRECT was in effect (FILE_FLAG_NO_BUFFERING on Windows: `direct_flag`).
    pub direct: bool,
    /// The open flag that made the I/O unbuffered on the system that ran the
    /// test; absent for O_DIRECT (Linux, and every document before Windows).
    #[serde(default, skip_serializing_if = "DirectFlag::is_o_direct")]
    pub direct_flag: DirectFlag,
    /// none, fsync or dsync.
    pub sync: String,
    /// io_uring or psync.
    pub engine: String,
    /// The file or device tested, as given by the user (a directory holds headroom's test file).
    pub path: String,
    /// Percentage of reads in randrw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwmix_read: Option<u32>,
    /// Size of the test file or region, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Filesystem type under `path` (statfs), e.g. ext4, xfs, tmpfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<String>,
    /// The fio command line that runs the same test, for cross-checking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fio_equivalent: Option<String>,
    /// io_uring with registered buffers (fio's `--fixedbufs`); false: ordinary
    /// buffers, as fio's default and applications use.
    #[serde(default)]
    pub fixedbufs: bool,
    /// io_uring issued reads and writes straight to kernel workers (IOSQE_ASYNC,
    /// fio's `--force_async=1`) rather than trying them without blocking first.
    #[serde(default)]
    pub force_async: bool,
    /// The protocol client that reached `path` (an `nfs://`, `iscsi://`,
    /// `nbd://` or `smb://` URL) and what its server granted; absent for a
    /// local path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolInfo>,
}

/// How a disk test asked its system to bypass the cache: `direct` names the
/// fact, this the system's own flag, which the presenters print.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DirectFlag {
    /// Linux's open(2) flag O_DIRECT.
    #[default]
    ODirect,
    /// Windows' CreateFile flag FILE_FLAG_NO_BUFFERING.
    FileFlagNoBuffering,
}

impl DirectFlag {
    /// The flag as its system's documentation spells it.
    pub fn word(self) -> &'static str {
        match self {
            DirectFlag::ODirect => "O_DIRECT",
            DirectFlag::FileFlagNoBuffering => "FILE_FLAG_NO_BUFFERING",
        }
    }

    /// Whether this is O_DIRECT, which documents leave out.
    pub fn is_o_direct(&self) -> bool {
        *self == DirectFlag::ODirect
    }
}

/// A disk probe that ran through one of headroom's own protocol clients.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProtocolInfo {
    /// nfs, iscsi, nbd or smb.
    pub name: String,
    /// Version or dialect in use, e.g. `3`, `4.1`, `3.1.1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The cipher every message was encrypted with (SMB 3: `aes-128-gcm`,
    /// `aes-128-ccm`, `aes-256-gcm`, `aes-256-ccm`); absent: not encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher: Option<String>,
    /// HOST:PORT of the server.
    pub server: String,
    /// I/Os in flight the server allows per connection (iSCSI command
    /// window, SMB credits, NFS session slots); absent when the protocol
    /// announces no limit (NBD, NFSv3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth_granted: Option<u32>,
    /// Other parameters the server granted, by the protocol's own names
    /// (e.g. rsize, wsize, MaxRecvDataSegmentLength, MaxBurstLength,
    /// MaxOutstandingR2T, max_read_size, credits).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub granted: BTreeMap<String, u64>,
    /// This machine's address of the connection to the server (the
    /// `--bind` address when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_address: Option<String>,
    /// The interface the connection left through: `--interface` when given,
    /// else the one holding `source_address`; the verdict's NIC hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// One entry per source when `--bind` or `--interface` named several
    /// (jobs take them round robin): which jobs left from it and what they
    /// moved. Empty with one source (`source_address` says it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceShare>,
}

/// The jobs whose connections left from one source, and their part of a
/// disk probe's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SourceShare {
    /// This machine's address the connections left from (the `--bind` entry,
    /// else what the socket got; absent where the client hides its socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_address: Option<String>,
    /// The interface they left through (the `--interface` entry, else the
    /// one holding `source_address`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// The jobs (0-based, as `--jobs` numbers them) that connected from here.
    pub jobs: Vec<u32>,
    /// Bytes these jobs moved in the measured time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Those bytes over the measured time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_sec: Option<f64>,
}

words_enum! {
    /// What a network probe measured; the verdict and the presenters pick
    /// probes by it. Open: a newer headroom's kind loads as `Other`.
    #[derive(Default)]
    open NetProbeKind {
        /// TCP from this machine to the server (an upload; the write direction).
        #[default]
        Tcp = "tcp",
        /// TCP from the server to this machine (a download; the read direction).
        TcpReverse = "tcp_reverse",
        /// TCP both ways at once.
        TcpBidir = "tcp_bidir",
        /// UDP at a target rate: loss and jitter.
        Udp = "udp",
        /// Request/response round trips.
        Rr = "rr",
        /// Connection setup time.
        Connect = "connect",
    }
}

words_enum! {
    /// The protocol a network probe spoke to its server. Open: a newer
    /// headroom's protocol loads as `Other`.
    #[derive(Default)]
    open NetProtocol {
        /// headroom's own (`headroom serve`).
        #[default]
        Headroom = "headroom",
        /// iperf3's (`iperf3 -s`, or `headroom serve --iperf3`).
        Iperf3 = "iperf3",
        /// iperf2's (`iperf -s`): TCP streams that carry their own settings.
        Iperf2 = "iperf2",
    }
}

impl NetProbeKind {
    /// A TCP throughput probe, in any direction.
    pub fn is_tcp_throughput(&self) -> bool {
        matches!(self, NetProbeKind::Tcp | NetProbeKind::TcpReverse | NetProbeKind::TcpBidir)
    }

    /// A probe that times messages rather than moving bulk data.
    pub fn is_latency(&self) -> bool {
        matches!(self, NetProbeKind::Rr | NetProbeKind::Connect)
    }
}

/// A network probe's resolved parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NetSpec {
    /// tcp, tcp_reverse, tcp_bidir, udp, rr or connect.
    #[schemars(with = "String")]
    pub test: NetProbeKind,
    /// Parallel TCP connections or UDP flows.
    pub streams: u32,
    /// headroom or iperf3.
    #[schemars(with = "String")]
    pub protocol: NetProtocol,
    /// HOST:PORT of the server.
    pub peer: String,
    /// Target rate for UDP, bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bits_per_sec: Option<f64>,
    /// Fixed amount to transfer (`--bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Where this end's sockets left from (`--bind`, `--interface`), e.g.
    /// `via eth1` or `from 192.0.2.7`; absent when the routing table chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The interface the test's connections left through, on the machine
    /// that ran it (the chosen one, else the route's): the verdict's NIC hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// The socket buffers asked (`--window`) and what each end's kernel
    /// granted; absent when none was asked (TCP autotunes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_buffers: Option<SocketBuffers>,
}

/// Socket buffers asked for each data stream, and what the kernels granted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SocketBuffers {
    /// Bytes asked for each stream's send and receive buffer (iperf3's -w).
    pub asked: u64,
    /// This machine's grant, as getsockopt reports it (Linux doubles the
    /// request for its bookkeeping, after capping it at net.core.wmem_max /
    /// rmem_max).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<BufferPair>,
    /// The server's grant (headroom servers report it; iperf3 servers do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<BufferPair>,
}

/// SO_SNDBUF and SO_RCVBUF of one socket, bytes as getsockopt reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BufferPair {
    /// SO_SNDBUF.
    pub send: u64,
    /// SO_RCVBUF.
    pub recv: u64,
}

impl BufferPair {
    /// Whether the kernel gave less than `asked` in either direction (it
    /// reports twice what it grants, so less than 2 x asked is a cap).
    pub fn capped_below(&self, asked: u64) -> bool {
        self.send.min(self.recv) < asked.saturating_mul(2)
    }
}

/// A ping probe's resolved parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PingSpec {
    /// tcp_connect or udp_echo.
    pub method: String,
    /// HOST:PORT probed.
    pub peer: String,
    /// Echo requests sent (udp_echo) or connections attempted (tcp_connect).
    pub count: u32,
    /// Pause between two attempts, milliseconds.
    pub interval_ms: f64,
    /// Where this end's sockets left from (`--bind`, `--interface`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A CPU kernel probe's resolved parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuSpec {
    /// e.g. raid6-pq-8+2, crc32c, aes-256-gcm, zstd-1-compress.
    pub kernel: String,
    /// Threads running the kernel at once (1: one core's figure).
    pub threads: u32,
    /// Bytes in the working buffer.
    pub buffer_size: u64,
    /// incompressible or compressible-2to1, for compression kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Whether the buffer fits the caches (true: each thread has `buffer_size`
    /// bytes of its own) or streams from RAM (false: the threads share it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_resident: Option<bool>,
    /// Which code computed the kernel: crate, version and the path this CPU
    /// took (e.g. `ring 0.17 (BoringSSL/OpenSSL assembly, SSSE3/AVX2)`), so
    /// a figure is compared with what the user's software runs. Absent in
    /// documents written before it was typed (they have it in
    /// `details.implementation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
}

/// The figures of a probe as a whole.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// Payload bytes per second (decimal units derive from it).
    pub bytes_per_sec: f64,
    /// Operations per second (disk; requests per second for rr).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// Latency per operation in nanoseconds: per I/O (disk), per request/response
    /// round trip (rr), per connect or echo (ping); absent when the probe timed no
    /// single operation (e.g. bulk TCP throughput).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<Latency>,
    /// Measured time, warm-up excluded.
    pub duration_s: f64,
    /// Payload bytes moved in `duration_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Operations completed in `duration_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<u64>,
    /// Length of each of the probe's `samples`, seconds (the last may be
    /// shorter); absent in documents written before it was recorded, which
    /// sampled once a second unless `--sample-interval` said otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_interval_s: Option<f64>,
    /// Cores other processes kept busy while the figure was measured, on a
    /// cpu probe's memory-resident figure (they share its memory bandwidth);
    /// absent on cache-resident figures, other probe kinds, platforms whose
    /// CPU counters headroom cannot read (Windows) and older documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Contention>,
}

/// Latency statistics in nanoseconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Latency {
    /// Mean, ns.
    pub mean: f64,
    /// Median, ns.
    pub p50: f64,
    /// 99th percentile, ns.
    pub p99: f64,
    /// 99.9th percentile, ns.
    pub p999: f64,
    /// Largest latency seen, ns.
    pub max: f64,
    /// Smallest latency seen, ns; absent in documents that did not record it (soak cycles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Standard deviation, ns; absent where it was not recorded (soak cycles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stddev: Option<f64>,
}

/// A latency histogram: bucket upper bounds (ns) and counts, enough to
/// redraw the distribution and merge runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Histogram {
    /// Pairs of (value_ns, count); values are the upper edge of each bucket.
    pub buckets: Vec<(u64, u64)>,
}

impl Histogram {
    /// Several histograms as one: counts of equal bucket edges added. The
    /// engines record HdrHistograms of one precision, whose bucket edges
    /// coincide, so this is the histogram of all the operations together
    /// (what HdrHistogram's `add` gives); None when there are no counts.
    pub fn merged<'a>(histograms: impl IntoIterator<Item = &'a Histogram>) -> Option<Histogram> {
        let mut merged: BTreeMap<u64, u64> = BTreeMap::new();
        for (v, c) in histograms.into_iter().flat_map(|h| h.buckets.iter()) {
            *merged.entry(*v).or_default() += c;
        }
        merged.retain(|_, c| *c > 0);
        (!merged.is_empty()).then(|| Histogram { buckets: merged.into_iter().collect() })
    }

    /// Mean, percentiles, min and max read off the buckets (each operation
    /// counted at its bucket's upper edge); None when empty.
    pub fn latency(&self) -> Option<Latency> {
        let total: u64 = self.buckets.iter().map(|b| b.1).sum();
        if total == 0 {
            return None;
        }
        let at = |q: f64| {
            let rank = (q * total as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (v, c) in &self.buckets {
                seen += c;
                if seen >= rank {
                    return *v as f64;
                }
            }
            self.buckets.last().map_or(0.0, |b| b.0 as f64)
        };
        let mean = self.buckets.iter().map(|(v, c)| *v as f64 * *c as f64).sum::<f64>() / total as f64;
        Some(Latency {
            mean,
            p50: at(0.5),
            p99: at(0.99),
            p999: at(0.999),
            max: self.buckets.iter().map(|b| b.0).max().unwrap_or(0) as f64,
            min: self.buckets.iter().filter(|b| b.1 > 0).map(|b| b.0).min().map(|v| v as f64),
            stddev: None,
        })
    }
}

/// One interval of a probe.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Sample {
    /// Seconds since the measured phase began, at the end of the interval.
    pub t_s: f64,
    /// Payload bytes per second over the interval.
    pub bytes_per_sec: f64,
    /// Operations per second over the interval, when the probe counts operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// Mean latency over the interval, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns_mean: Option<f64>,
    /// 99th-percentile latency over the interval, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns_p99: Option<f64>,
}

/// The physical ceiling of one hop on the path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ceiling {
    /// disk, bus, nic, link, protocol or cpu.
    pub hop: Hop,
    /// What it is, e.g. `1GbE TCP (MTU 1500)`, `PCIe 3.0 x4`.
    pub name: String,
    /// Payload bytes per second the hop can carry at most, after protocol overhead where the hop has one.
    pub bytes_per_sec: f64,
    /// Where the figure came from (sysfs path, --link, the catalog).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The most [`ResultDoc::from_reader`] reads: 64 MiB. A `headroom run` document
/// is tens of kilobytes and an hours-long soak's a few megabytes; anything
/// larger is not a result, and reading it whole would hold all of it in memory.
pub const MAX_DOCUMENT_BYTES: u64 = 64 << 20;

/// All of `reader`, at most [`MAX_DOCUMENT_BYTES`]: more is
/// [`LoadError::TooLarge`], found without reading further (`/dev/zero`
/// costs 64 MiB, not all the memory there is).
pub fn read_capped(reader: impl std::io::Read) -> Result<Vec<u8>, LoadError> {
    let mut bytes = Vec::new();
    reader.take(MAX_DOCUMENT_BYTES + 1).read_to_end(&mut bytes).map_err(LoadError::Io)?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(LoadError::TooLarge);
    }
    Ok(bytes)
}

/// A file the user named as input (a result document, a fleet's hosts
/// file), read with [`read_capped`]. Opening does not wait for a writer: a
/// FIFO nobody writes to reads as empty instead of blocking for ever (a pipe
/// with a writer, as `<(command)` gives, is read as usual).
pub fn read_input_file(path: &std::path::Path) -> Result<Vec<u8>, LoadError> {
    read_capped(os::open_input(path).map_err(LoadError::Io)?)
}

/// Why a document could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading the file or stream failed.
    #[error("cannot read: {0}")]
    Io(std::io::Error),
    /// Larger than [`MAX_DOCUMENT_BYTES`].
    #[error("larger than {} MiB, the most headroom reads from a result document (a `headroom run` document is well under 1 MiB); is it the right file?", MAX_DOCUMENT_BYTES >> 20)]
    TooLarge,
    /// Not JSON (syntax error or truncated text).
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    /// Bytes that are not UTF-8.
    #[error("not JSON: not UTF-8 text")]
    NotUtf8,
    /// A JSON object with no `schema` string: not a headroom result.
    #[error("not a headroom result (no \"schema\" field); was it written by another tool?")]
    NoSchema,
    /// A `schema` other than [`SCHEMA`].
    #[error("schema '{found}' is not supported (this headroom reads {SCHEMA}); upgrade headroom or re-run the test")]
    UnknownSchema {
        /// The `schema` value the document has.
        found: String,
    },
    /// The right schema, but a field is missing or of the wrong type.
    #[error("a {SCHEMA} document with invalid content: {0}")]
    Invalid(serde_json::Error),
    /// Loaded, but a figure is impossible (negative, NaN...), see [`ResultDoc::validate`].
    #[error("a {SCHEMA} document with an impossible figure: {0}")]
    Impossible(InvalidField),
}

/// Just the `schema` field: read first, without building the rest of the document.
#[derive(Deserialize)]
struct SchemaOnly {
    #[serde(default)]
    schema: Option<serde_json::Value>,
}

/// Now in UTC as RFC 3339 to the second: the form of every `started_at`.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

impl ResultDoc {
    /// A new, empty document stamped with the schema, tool and start time.
    pub fn new(started_at: impl Into<String>) -> Self {
        ResultDoc {
            schema: SCHEMA.into(),
            tool: Tool::default(),
            label: None,
            started_at: started_at.into(),
            host: Host::default(),
            probes: Vec::new(),
            ceilings: Vec::new(),
            verdict: None,
            warnings: Vec::new(),
            soak: None,
            peers: Vec::new(),
            fleet: None,
        }
    }

    /// Parses and validates a document, checking the schema before the
    /// content so a user learns "wrong tool / wrong version" rather than a
    /// field error. The text is deserialised straight into the types (no
    /// intermediate `serde_json::Value`), so memory stays proportional to the
    /// document.
    pub fn from_json(text: &str) -> Result<Self, LoadError> {
        if !text.trim_start().starts_with('{') {
            // Valid JSON that is not an object (serde would read an array as a struct).
            serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(LoadError::NotJson)?;
            return Err(LoadError::NoSchema);
        }
        let head: SchemaOnly = serde_json::from_str(text).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => LoadError::NoSchema,
            _ => LoadError::NotJson(e),
        })?;
        match head.schema.as_ref().and_then(|s| s.as_str()) {
            None => return Err(LoadError::NoSchema),
            Some(SCHEMA) => {}
            Some(other) => return Err(LoadError::UnknownSchema { found: other.to_string() }),
        }
        let doc: ResultDoc = serde_json::from_str(text).map_err(LoadError::Invalid)?;
        doc.validate().map_err(LoadError::Impossible)?;
        Ok(doc)
    }

    /// Reads a document from a file or stream: at most [`MAX_DOCUMENT_BYTES`]
    /// (more is [`LoadError::TooLarge`], found without reading further), then
    /// [`ResultDoc::from_json`].
    pub fn from_reader(reader: impl std::io::Read) -> Result<Self, LoadError> {
        Self::from_bytes(&read_capped(reader)?)
    }

    /// [`ResultDoc::from_json`] of bytes read with [`read_input_file`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, LoadError> {
        Self::from_json(std::str::from_utf8(bytes).map_err(|_| LoadError::NotUtf8)?)
    }

    /// Pretty JSON, as `--json` prints it.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("result documents always serialise")
    }

    /// Every probe with figures of its own: the probes, then a fleet's sums
    /// (what `compare` holds side by side).
    pub fn probes_and_fleet_sums(&self) -> impl Iterator<Item = &Probe> {
        self.probes.iter().chain(self.fleet.iter().flat_map(|f| f.sums.iter().map(|s| &s.probe)))
    }

    /// The JSON Schema of this document type.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(ResultDoc)).expect("schema serialises")
    }
}

#[cfg(test)]
mod tests;
