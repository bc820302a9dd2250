//! The processor, memory and the machine's names, from /proc and /etc.

use super::sysfs::read;
use crate::SysRoot;
use headroom_result::CpuInfo;
use std::collections::BTreeSet;

/// CPU flags that matter for storage work, in the order they are shown:
/// AES and carry-less multiply (AES-GCM, SMB3, TLS), vector widths (parity,
/// checksums, compression), SHA extensions and CRC32 (checksums). x86 names
/// first, then aarch64's `Features` names.
const FEATURES: &[&str] = &[
    "aes",
    "vaes",
    "pclmulqdq",
    "vpclmulqdq",
    "sse4_2",
    "avx",
    "avx2",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "gfni",
    "sha_ni",
    "bmi2",
    // aarch64
    "pmull",
    "sha2",
    "sha512",
    "crc32",
    "asimd",
    "sve",
    "sve2",
];

/// Model, logical CPUs, physical cores and storage-relevant features from /proc/cpuinfo.
pub fn cpu(root: &SysRoot) -> Option<CpuInfo> {
    let text = std::fs::read_to_string(root.proc().join("cpuinfo")).ok()?;
    let mut model = None;
    let mut logical = 0u32;
    let mut flags: BTreeSet<String> = BTreeSet::new();
    let mut cores: BTreeSet<(String, String)> = BTreeSet::new();
    let mut physical_id = String::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => logical += 1,
            // x86 "model name"; aarch64 kernels show no model, some show "Hardware" or "CPU part".
            "model name" | "Hardware" | "cpu model" if model.is_none() => model = Some(value.to_string()),
            "flags" | "Features" => flags.extend(value.split_whitespace().map(str::to_string)),
            "physical id" => physical_id = value.to_string(),
            "core id" => {
                cores.insert((physical_id.clone(), value.to_string()));
            }
            _ => {}
        }
    }
    if logical == 0 {
        return None;
    }
    Some(CpuInfo {
        model: model.unwrap_or_else(|| "unknown".into()),
        logical_cpus: logical,
        physical_cores: (!cores.is_empty()).then_some(cores.len() as u32),
        features: FEATURES.iter().filter(|f| flags.contains(**f)).map(|f| f.to_string()).collect(),
    })
}

/// MemTotal from /proc/meminfo, bytes.
pub fn memory_bytes(root: &SysRoot) -> Option<u64> {
    let text = std::fs::read_to_string(root.proc().join("meminfo")).ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The hostname (/proc/sys/kernel/hostname); None when unreadable.
pub fn hostname(root: &SysRoot) -> Option<String> {
    read(root.proc().join("sys/kernel/hostname"))
}

/// Kernel release (/proc/sys/kernel/osrelease), e.g. `6.12.48-amd64`; None when unreadable.
pub fn kernel(root: &SysRoot) -> Option<String> {
    read(root.proc().join("sys/kernel/osrelease"))
}

/// PRETTY_NAME from os-release, e.g. "Debian GNU/Linux 13 (trixie)".
pub fn os(root: &SysRoot) -> Option<String> {
    let text = std::fs::read_to_string(root.path("etc/os-release"))
        .or_else(|_| std::fs::read_to_string(root.path("usr/lib/os-release")))
        .ok()?;
    let value = text.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="))?;
    Some(value.trim_matches('"').to_string())
}
