//! `headroom cpu` on a terminal: the CPU and its features, the link the
//! kernels are held against, one row per kernel with a column per thread
//! count and buffer, and the sentences (encryption, and the slowest kernel of
//! each other group) saying whether one stream keeps up with the link. The
//! fill judgement is `headroom_analysis::cpu_link`'s; a figure is marked
//! contended when the engine said so ([`Measurement::contended`], `*`), or
//! shared with other processes' memory traffic ([`Measurement::memory_shared`], `~`).

use crate::Style;
use headroom_analysis::LinkTarget;
use headroom_analysis::{fills_link, share_of_link};
use headroom_result::kernels::{BufferSpec, DataKind, Feature, Group, Kernel, KernelMatrix, Measurement};
use headroom_result::Host;
use headroom_units::{format_bytes_per_sec_short, format_rate, format_rate_cell, format_size_compact};
use owo_colors::OwoColorize;

/// What `headroom cpu` measured, as it is shown.
pub struct CpuRun<'a> {
    /// The machine measured; only `host.cpu` (model, logical CPUs) is shown,
    /// and the line is left out when it is None.
    pub host: &'a Host,
    /// The kernels, thread counts and buffers that were asked for (the rows and columns).
    pub plan: &'a KernelMatrix,
    /// What the engine measured, one per kernel, thread count and buffer; a
    /// planned cell with no measurement shows `-`.
    pub results: &'a [Measurement],
    /// The link the kernels are held against (`--link`, else the NIC, else 10 GbE).
    pub link: &'a LinkTarget,
    /// This CPU's instruction-set features.
    pub features: &'a [Feature],
}

/// The whole `headroom cpu` table and sentences.
pub fn render(run: &CpuRun, style: Style) -> String {
    let CpuRun { host, plan, results, link, features } = *run;
    let mut text = String::new();
    if let Some(cpu) = &host.cpu {
        text += &format!("{}  {}, {} logical CPUs\n", style.bold("CPU"), cpu.model, cpu.logical_cpus);
    }
    let features: Vec<String> =
        features.iter().map(|f| format!("{} {}", f.name, if f.present { "yes" } else { "no" })).collect();
    if !features.is_empty() {
        text += &format!("     {}\n", features.join(", "));
    }
    text += &format!(
        "{} {} {}: {}\n",
        style.bold("Link"),
        link.name,
        link.basis,
        format_rate(link.bytes_per_sec * 8.0, style.iec)
    );
    if let Some(caveat) = &link.caveat {
        text += &format!("     {caveat}\n");
    }
    text += "\n";

    let columns: Vec<(usize, BufferSpec)> =
        plan.threads.iter().flat_map(|t| plan.buffers.iter().map(move |b| (*t, *b))).collect();
    text += &format!("{:<36}", "");
    for (t, b) in &columns {
        text += &format!(" {:>23} ", column_title(*t, b));
    }
    text += &format!("  fills {}?\n", link.name);
    let mut group = None;
    for kernel in &plan.kernels {
        if !results.iter().any(|m| m.kernel == *kernel) {
            continue;
        }
        if group != Some(kernel.group()) {
            group = Some(kernel.group());
            let title = match kernel.group() {
                Group::Parity => "Parity",
                Group::Checksum => "Checksums",
                Group::Compression => "Compression (figures are uncompressed bytes)",
                Group::Encryption => "Encryption (AEAD seal)",
            };
            text += &format!("{}\n", style.bold(title));
        }
        text += &format!("  {:<34}", kernel_label(kernel, results));
        for (t, b) in &columns {
            let cell = results
                .iter()
                .find(|m| m.kernel == *kernel && m.threads == *t && m.cache_resident == b.cache_resident)
                .map(|m| format!("{}{}", format_rate_cell(m.bytes_per_sec), mark(m)))
                .unwrap_or_else(|| "- ".into());
            text += &format!(" {cell:>24}");
        }
        if let Some(one) = single_stream(results, kernel) {
            let x = share_of_link(one.bytes_per_sec, link);
            text += &format!("  {} {x:.1}x", yes_no(fills_link(one.bytes_per_sec, link), style));
        }
        text += "\n";
    }

    text += &implementations(plan, results, style);

    let shared: Vec<&Measurement> = results.iter().filter(|m| m.contended()).collect();
    let quota = shared
        .iter()
        .filter_map(|m| m.held_by_quota())
        .max_by(|a, b| a.throttled_share().total_cmp(&b.throttled_share()));
    if let Some(q) = quota {
        text += &format!(
            "* a CPU quota held the workers during {} of {} figures: the measuring process's cgroup {} may use {:.0}% of one core \
             ({}) and was throttled in up to {:.0}% of its periods; those figures are the quota's, not the CPU's \
             (--json has each one per CPU-second, details.bytes_per_cpu_sec)\n",
            shared.len(),
            results.len(),
            q.path,
            q.quota_cores() * 100.0,
            if q.version == 1 { "cpu.cfs_quota_us" } else { "cpu.max" },
            q.throttled_share() * 100.0
        );
    } else if !shared.is_empty() {
        let least = shared.iter().map(|m| m.cpu_share).fold(1.0, f64::min);
        text += &format!(
            "* other processes shared the CPU during {} of {} figures (down to {:.0}% of a core per worker): \
             those figures are low; --json has each one per CPU-second (details.bytes_per_cpu_sec)\n",
            shared.len(),
            results.len(),
            100.0 * least
        );
    }
    text += &memory_shared_line(results);
    text += "\n";
    for kernel in plan.kernels.iter().filter(|k| k.group() == Group::Encryption) {
        if let Some(s) = sentence(results, kernel, link, style) {
            text += &format!("{s}\n");
        }
    }
    for (g, word) in [(Group::Parity, "parity"), (Group::Checksum, "checksum"), (Group::Compression, "compression")] {
        let slowest = plan
            .kernels
            .iter()
            .filter(|k| k.group() == g)
            .filter_map(|k| single_stream(results, k).map(|m| (k, m.bytes_per_sec)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some(s) = slowest.and_then(|(kernel, _)| sentence(results, kernel, link, style)) {
            text += &format!("slowest {word}: {s}\n");
        }
    }
    text
}

/// A figure's mark: `*` when other processes took its workers' CPU (or a
/// quota held them), else `~` when they kept cores busy beside an
/// out-of-cache figure and so shared its memory bandwidth.
fn mark(m: &Measurement) -> &'static str {
    if m.contended() {
        "*"
    } else if m.memory_shared().is_some() {
        "~"
    } else {
        " "
    }
}

/// The `~` line: how many figures shared the memory bandwidth, in the words
/// of the busiest case (`Contention::sentence`, as the probe's warning says).
fn memory_shared_line(results: &[Measurement]) -> String {
    let shared: Vec<_> = results.iter().filter_map(Measurement::memory_shared).collect();
    let Some(worst) = shared.iter().max_by(|a, b| a.other_busy_cores.total_cmp(&b.other_busy_cores)) else {
        return String::new();
    };
    format!("~ {} of {} figures were {}\n", shared.len(), results.len(), worst.sentence())
}

/// Which code computed each kernel shown: a figure is only comparable with
/// the user's software when both run the same implementation (OpenSSL's
/// ChaCha20 is not ring's).
fn implementations(plan: &KernelMatrix, results: &[Measurement], style: Style) -> String {
    let mut text = String::new();
    for kernel in &plan.kernels {
        let Some(m) = results.iter().find(|m| m.kernel == *kernel && !m.implementation.is_empty()) else { continue };
        if text.is_empty() {
            text += &format!("{}\n", style.bold("Implementations"));
        }
        text += &format!("  {:<34} {}\n", kernel_label(kernel, results), m.implementation);
        if let Some(slower) = &m.runner_up {
            let share = slower.bytes_per_cpu_sec / m.bytes_per_cpu_sec.max(f64::MIN_POSITIVE);
            text += &format!("  {:<34} the faster of two; {}: {share:.2}x per CPU-second\n", "", slower.implementation);
        }
    }
    text
}

/// What one stream of this kernel does on a storage path, for the sentences.
fn role(kernel: &Kernel) -> &'static str {
    match kernel {
        Kernel::Aes128Gcm => "one SMB3-encrypted stream (AES-128-GCM)",
        Kernel::Aes256Gcm => "one SMB3-encrypted stream (AES-256-GCM)",
        Kernel::ChaCha20Poly1305 => "one SSH/sshfs stream (chacha20-poly1305)",
        Kernel::Aes128Ccm => "one SMB3-encrypted stream (AES-128-CCM)",
        Kernel::Aes256Ccm => "one SMB3-encrypted stream (AES-256-CCM)",
        _ => match kernel.group() {
            Group::Parity => "parity for a write stream",
            Group::Checksum => "checksumming a stream",
            Group::Compression => "one compressed stream",
            Group::Encryption => "one encrypted stream",
        },
    }
}

/// The single-stream figure: one thread, out of cache (or the closest the plan has).
fn single_stream<'a>(results: &'a [Measurement], kernel: &Kernel) -> Option<&'a Measurement> {
    let mine = || results.iter().filter(move |m| m.kernel == *kernel);
    let min_threads = mine().map(|m| m.threads).min()?;
    mine().filter(|m| m.threads == min_threads).min_by_key(|m| m.cache_resident)
}

/// The all-cores figure, out of cache.
fn all_cores<'a>(results: &'a [Measurement], kernel: &Kernel) -> Option<&'a Measurement> {
    let mine = || results.iter().filter(move |m| m.kernel == *kernel);
    let max_threads = mine().map(|m| m.threads).max()?;
    mine().filter(|m| m.threads == max_threads).min_by_key(|m| m.cache_resident)
}

/// "AES-256-GCM 1.90 GB/s on one core: one SMB3-encrypted stream (AES-256-GCM)
/// can fill 10GbE (1.18 GB/s) — yes".
fn sentence(results: &[Measurement], kernel: &Kernel, link: &LinkTarget, style: Style) -> Option<String> {
    let one = single_stream(results, kernel)?;
    let cores = if one.threads == 1 { "one core".to_string() } else { format!("{} cores", one.threads) };
    let fills = fills_link(one.bytes_per_sec, link);
    let verb = match kernel.group() {
        Group::Parity | Group::Checksum => "keeps up with",
        Group::Compression | Group::Encryption => "can fill",
    };
    let mut text = format!(
        "{} {} on {cores}: {} {verb} {} ({}) — {}",
        kernel_label(kernel, results),
        format_bytes_per_sec_short(one.bytes_per_sec),
        role(kernel),
        link.name,
        format_bytes_per_sec_short(link.bytes_per_sec),
        yes_no(fills, style)
    );
    if !fills {
        text += &format!(" ({:.0}% of it)", 100.0 * share_of_link(one.bytes_per_sec, link));
        if let Some(all) = all_cores(results, kernel).filter(|a| a.threads > one.threads) {
            let verdict = if fills_link(all.bytes_per_sec, link) { "enough" } else { "still not enough" };
            text += &format!(
                "; {} streams on {} cores: {} together, {verdict}",
                all.threads,
                all.threads,
                format_bytes_per_sec_short(all.bytes_per_sec)
            );
        }
    }
    Some(text)
}

fn yes_no(yes: bool, style: Style) -> String {
    match (yes, style.color) {
        (true, true) => "yes".green().bold().to_string(),
        (false, true) => "no".red().bold().to_string(),
        (true, false) => "yes".into(),
        (false, false) => "no".into(),
    }
}

fn column_title(threads: usize, buffer: &BufferSpec) -> String {
    let cores = if threads == 1 { "1 core".to_string() } else { format!("{threads} cores") };
    let each = if buffer.cache_resident { " each" } else { "" };
    format!("{cores}, {}{each}", format_size_compact(buffer.bytes))
}

/// "zstd -3 compress 2:1 (1.97:1)": the kernel, its data and the ratio it reached.
fn kernel_label(kernel: &Kernel, results: &[Measurement]) -> String {
    if !kernel.data_matters() {
        return kernel.name();
    }
    let data = match kernel.data() {
        DataKind::Incompressible => "random",
        DataKind::Compressible2to1 => "2:1",
    };
    let ratio = results.iter().find(|m| m.kernel == *kernel).and_then(|m| m.ratio);
    match ratio {
        Some(r) => format!("{} {data} ({r:.2}:1)", kernel.name()),
        None => format!("{} {data}", kernel.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::kernels::RunnerUp;
    use headroom_result::{Contention, ProcessLoad};
    use std::time::Duration;

    fn measured(kernel: Kernel, threads: usize, cache_resident: bool, bytes_per_sec: f64) -> Measurement {
        Measurement {
            kernel,
            threads,
            buffer_bytes: if cache_resident { 256 << 10 } else { 64 << 20 },
            cache_resident,
            bytes: 1 << 30,
            duration: Duration::from_millis(100),
            bytes_per_sec,
            ratio: None,
            samples: vec![],
            cpu_share: 1.0,
            bytes_per_cpu_sec: bytes_per_sec,
            quota: None,
            contention: None,
            implementation: String::new(),
            runner_up: None,
        }
    }

    #[test]
    fn a_slow_cipher_is_a_no_with_its_share_and_the_all_cores_figure() {
        let kernels = vec![Kernel::Aes256Gcm, Kernel::ChaCha20Poly1305];
        let buffers = vec![
            BufferSpec { bytes: 64 << 20, cache_resident: false },
            BufferSpec { bytes: 256 << 10, cache_resident: true },
        ];
        let plan = KernelMatrix {
            kernels: kernels.clone(),
            threads: vec![1, 2],
            buffers,
            time: Duration::from_millis(100),
            warmup: Duration::from_millis(25),
        };
        let mut results = Vec::new();
        for (k, one, two) in [(Kernel::Aes256Gcm, 4.8e9, 9e9), (Kernel::ChaCha20Poly1305, 287e6, 560e6)] {
            for cache in [false, true] {
                results.push(measured(k, 1, cache, one));
                results.push(measured(k, 2, cache, two));
            }
        }
        results[1].cpu_share = 0.5;
        // A memory stream beside the one-core AES figure; a quiet-enough
        // machine beside ChaCha's (a fifth of a core: no mark).
        let others = |cores: f64| Contention {
            other_busy_cores: cores,
            window_s: 0.13,
            busiest: vec![ProcessLoad { name: "dd".into(), pid: 7, percent: 98.0 }],
        };
        results[0].contention = Some(others(1.02));
        results[4].contention = Some(others(0.2));
        for m in &mut results {
            m.implementation = format!("{} by test code", m.kernel.id());
        }
        // ChaCha's figure came from the faster of two implementations.
        results[4].runner_up = Some(RunnerUp {
            implementation: "slower test code".into(),
            bytes_per_sec: 200e6,
            bytes_per_cpu_sec: 205e6,
        });
        let link =
            LinkTarget { name: "10GbE".into(), bytes_per_sec: 1.177e9, basis: "TCP at MTU 1500".into(), caveat: None };
        let host = Host::default();
        let run = CpuRun { host: &host, plan: &plan, results: &results, link: &link, features: &[] };
        let text = render(&run, Style::default());
        // No CPU in the host and no features given: the Link line comes first.
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Link 10GbE TCP at MTU 1500: 9.416 Gb/s (1.177 GB/s)");
        assert!(lines[2].contains("1 core, 64 MiB") && lines[2].contains("2 cores, 256 KiB each"), "{text}");
        assert!(lines[2].ends_with("fills 10GbE?"), "{text}");
        assert!(text.contains("  AES-256-GCM                          4800 MB/s   38.4 Gb/s~   4800 MB/s   38.4 Gb/s    9000 MB/s   72.0 Gb/s*"), "{text}");
        assert!(text.contains("  ChaCha20-Poly1305                     287 MB/s    2.3 Gb/s     287 MB/s"), "{text}");
        assert!(
            text.contains(
                "~ 1 of 8 figures were measured while other processes kept 1.0 cores busy (busiest: dd 98% of a core): \
                 memory bandwidth is shared; rerun on a quiet machine\n"
            ),
            "{text}"
        );
        assert!(text.contains("  yes 4.1x\n") && text.contains("  no 0.2x\n"), "{text}");
        assert!(
            text.contains(
                "Implementations\n  AES-256-GCM                        aes-256-gcm by test code\n  \
                 ChaCha20-Poly1305                  chacha20-poly1305 by test code\n"
            ),
            "{text}"
        );
        let runner_up = format!("{:37}the faster of two; slower test code: 0.71x per CPU-second\n", "");
        assert!(text.contains(&format!("chacha20-poly1305 by test code\n{runner_up}")), "{text}");
        assert!(
            text.contains("* other processes shared the CPU during 1 of 8 figures (down to 50% of a core"),
            "{text}"
        );
        assert!(
            text.contains(
                "ChaCha20-Poly1305 287 MB/s on one core: one SSH/sshfs stream (chacha20-poly1305) can fill 10GbE \
             (1.18 GB/s) — no (24% of it); 2 streams on 2 cores: 560 MB/s together, still not enough"
            ),
            "{text}"
        );
        assert!(text.contains("AES-256-GCM 4.80 GB/s on one core: one SMB3-encrypted stream (AES-256-GCM) can fill 10GbE (1.18 GB/s) — yes\n"), "{text}");
    }
}
