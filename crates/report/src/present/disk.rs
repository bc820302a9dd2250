//! `headroom disk` on a terminal: the heading (target, filesystem, engine,
//! O_DIRECT or Windows' FILE_FLAG_NO_BUFFERING), the bus ceiling, the tests as a table (or the sweep's matrix,
//! or the sync preset side by side; a test whose jobs left from several sources has its spread under its row)
//! and the warnings, each once.

use crate::Style;
use headroom_result::{DiskSpec, Hop, Probe, ProbeSpec, ResultDoc};
use headroom_units::{format_bytes_per_sec, format_latency, format_size, size_label};

/// What the disk engine said about its target (the heading).
#[derive(Debug, Clone)]
pub struct TargetSummary<'a> {
    /// The path tested, e.g. the test file headroom created.
    pub path: &'a str,
    /// test_file, block_device or an existing file.
    pub kind: &'a str,
    /// Filesystem type of the path (ext4, xfs, nfs4...); None for a block
    /// device or when it could not be found, and then left out of the heading.
    pub filesystem: Option<&'a str>,
    /// Bytes tested.
    pub size: u64,
}

/// How the tests are laid out.
#[derive(Debug, Clone, Copy)]
pub enum Layout<'a> {
    /// One row per test.
    Table,
    /// The sweep preset: a block per direction, a row per block size, a
    /// column per queue depth (a test not run shows `-`).
    Sweep {
        /// Row order: the block sizes of the sweep, bytes.
        block_sizes: &'a [u64],
        /// Column order: the queue depths of the sweep.
        queue_depths: &'a [u32],
    },
    /// The table, then buffered, O_DSYNC and fsync writes side by side.
    Sync,
}

/// How the tests reached the target: the engine and the unbuffered open
/// (O_DIRECT, FILE_FLAG_NO_BUFFERING: the document's `direct_flag`), or the
/// protocol headroom spoke and what its server granted.
fn engine_words(d: &headroom_result::DiskSpec) -> String {
    let Some(p) = &d.protocol else {
        return format!(", {}, {}", d.engine, if d.direct { d.direct_flag.word() } else { "buffered" });
    };
    let version = p.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
    let cipher = p.cipher.as_deref().map(|c| format!(" encrypted {}", c.to_uppercase())).unwrap_or_default();
    let granted = p.queue_depth_granted.map(|q| format!(", {q} in flight granted")).unwrap_or_default();
    format!(", {}{version}{cipher} by headroom's own client{granted}", p.name.to_uppercase())
}

/// The whole terminal output of `headroom disk` for its document.
pub fn render(doc: &ResultDoc, target: &TargetSummary<'_>, layout: Layout<'_>, style: Style) -> String {
    let what = match target.kind {
        "test_file" => format!("test file {}", format_size(target.size)),
        "block_device" => format!("block device, {} tested", format_size(target.size)),
        "export" => format!("whole export, {} tested", format_size(target.size)),
        _ => format!("existing file, {} tested", format_size(target.size)),
    };
    let fs = target.filesystem.map(|f| format!("{f}, ")).unwrap_or_default();
    let engine_direct = doc.probes.first().and_then(disk_spec).map(engine_words).unwrap_or_default();
    // Probes a server ran name it, as scp does: `nas:/tank/bench/...`.
    let on = doc.probes.first().and_then(|p| p.host.as_deref()).map(|h| format!("{h}:")).unwrap_or_default();
    let mut s = style.bold(&format!("headroom disk {on}{} ({fs}{what}{engine_direct})", target.path)) + "\n";
    for b in doc.ceilings.iter().filter(|c| c.hop == Hop::Bus) {
        s += &format!("bus: {} = {}\n", b.name, format_bytes_per_sec(b.bytes_per_sec));
    }
    match layout {
        Layout::Table => s += &table(&doc.probes, style),
        Layout::Sweep { block_sizes, queue_depths } => s += &sweep(&doc.probes, block_sizes, queue_depths),
        Layout::Sync => {
            s += &table(&doc.probes, style);
            s += &sync(&doc.probes);
        }
    }
    // A warning every test carries is shown once; io_error is the error
    // the command reports itself.
    let mut seen = std::collections::BTreeSet::new();
    for w in doc.warnings.iter().chain(doc.probes.iter().flat_map(|p| p.warnings.iter())) {
        if w.code != "io_error" && seen.insert((&w.code, &w.message)) {
            s += &format!("warning [{}]: {}\n", w.code, w.message);
        }
    }
    s
}

fn disk_spec(p: &Probe) -> Option<&DiskSpec> {
    match &p.spec {
        ProbeSpec::Disk(d) => Some(d),
        _ => None,
    }
}

fn mean_latency(p: &Probe) -> String {
    format_latency(p.summary.latency_ns.as_ref().map_or(0.0, |l| l.mean))
}

/// One row per test: MB/s (and MiB/s), IOPS, mean, p99 and p99.9 latency.
fn table(probes: &[Probe], style: Style) -> String {
    let iec_head = if style.iec { format!(" {:>10}", "MiB/s") } else { String::new() };
    let mut s = format!(
        "{:<28} {:>10}{iec_head} {:>10} {:>10} {:>10} {:>10}\n",
        style.bold("test"),
        "MB/s",
        "IOPS",
        "lat mean",
        "p99",
        "p99.9"
    );
    for p in probes {
        if p.summary.ops == Some(0) {
            // A row of zeros would read as a measurement; the warning says why.
            s += &format!("{:<28} {:>10}\n", p.name, "no I/O completed (see the no_io_completed warning)");
            continue;
        }
        let l = p.summary.latency_ns.clone().unwrap_or_default();
        let iec = if style.iec { format!(" {:>10.1}", p.summary.bytes_per_sec / 1048576.0) } else { String::new() };
        s += &format!(
            "{:<28} {:>10.1}{iec} {:>10.0} {:>10} {:>10} {:>10}\n",
            p.name,
            p.summary.bytes_per_sec / 1e6,
            p.summary.iops.unwrap_or(0.0),
            format_latency(l.mean),
            format_latency(l.p99),
            format_latency(l.p999)
        );
        s += &spread(p);
    }
    s
}

/// `  spread over 2 sources: 10.0.1.2 via eth1 (jobs 0,2) 117.3 MB/s, ...`
/// when the jobs' connections left from more than one source; else nothing.
fn spread(p: &Probe) -> String {
    let sources = disk_spec(p).and_then(|d| d.protocol.as_ref()).map_or(&[][..], |p| &p.sources[..]);
    if sources.len() < 2 {
        return String::new();
    }
    let each: Vec<String> = sources
        .iter()
        .map(|s| {
            let place = match (&s.source_address, &s.interface) {
                (Some(a), Some(i)) => format!("{a} via {i}"),
                (Some(x), None) | (None, Some(x)) => x.clone(),
                (None, None) => "?".into(),
            };
            let jobs: Vec<String> = s.jobs.iter().map(u32::to_string).collect();
            let rate = s.bytes_per_sec.map_or("-".into(), format_bytes_per_sec);
            format!("{place} (job{} {}) {rate}", if jobs.len() == 1 { "" } else { "s" }, jobs.join(","))
        })
        .collect();
    format!("  spread over {} sources: {}\n", sources.len(), each.join(", "))
}

/// The sweep as a matrix: one block per direction, a row per block size,
/// a column per queue depth, each cell MB/s, IOPS and mean latency.
fn sweep(probes: &[Probe], block_sizes: &[u64], queue_depths: &[u32]) -> String {
    let mut s = String::new();
    for rw in ["randread", "randwrite"] {
        s += &format!("\n{rw}: MB/s | IOPS | mean latency\n{:<6}", "bs");
        for qd in queue_depths {
            s += &format!(" {:>12}", format!("QD{qd}"));
        }
        s += "\n";
        for &bs in block_sizes {
            let cells: Vec<Option<&Probe>> = queue_depths
                .iter()
                .map(|&qd| {
                    probes
                        .iter()
                        .find(|p| disk_spec(p).is_some_and(|d| d.rw == rw && d.block_size == bs && d.queue_depth == qd))
                })
                .collect();
            let row = |name: &str, f: &dyn Fn(&Probe) -> String| {
                let mut line = format!("{name:<6}");
                for c in &cells {
                    let cell =
                        c.map_or("-".to_string(), |p| if p.summary.ops == Some(0) { "no I/O".into() } else { f(p) });
                    line += &format!(" {cell:>12}");
                }
                line + "\n"
            };
            s += &row(&size_label(bs), &|p| format!("{:.1}", p.summary.bytes_per_sec / 1e6));
            s += &row("", &|p| format!("{:.0}", p.summary.iops.unwrap_or(0.0)));
            s += &row("", &mean_latency);
        }
    }
    s
}

/// The sync preset side by side: MB/s of buffered, O_DSYNC and fsync writes per block size.
fn sync(probes: &[Probe]) -> String {
    let mut s =
        format!("\n{:<6} {:>14} {:>14} {:>14}   (write MB/s, mean latency)\n", "bs", "buffered", "dsync", "fsync");
    for bs in [4096u64, 64 << 10, 1 << 20] {
        s += &format!("{:<6}", size_label(bs));
        for mode in ["buffered", "dsync", "fsync"] {
            let p = probes.iter().find(|p| p.id.ends_with(mode) && disk_spec(p).is_some_and(|d| d.block_size == bs));
            let cell = p.map_or("-".into(), |p| {
                if p.summary.ops == Some(0) {
                    return "no I/O".to_string();
                }
                format!("{:.1} {}", p.summary.bytes_per_sec / 1e6, mean_latency(p))
            });
            s += &format!(" {cell:>14}");
        }
        s += "\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> ResultDoc {
        let probe = |id: &str, name: &str, rw: &str, bs: u64, qd: u32, mbps: f64, ops: u64| {
            serde_json::json!({
                "id": id, "name": name, "kind": "disk",
                "spec": {"rw": rw, "block_size": bs, "queue_depth": qd, "jobs": 1, "direct": true,
                         "sync": "none", "engine": "io_uring", "path": "/mnt/t/headroom-disk-1.tmp"},
                "summary": {"bytes_per_sec": mbps * 1e6, "iops": mbps * 1e6 / bs as f64, "duration_s": 3.0, "ops": ops,
                            "latency_ns": {"mean": 70e3, "p50": 65e3, "p99": 1.2e6, "p999": 4.5e6, "max": 9e6}},
                "warnings": [{"code": "page_cache_possible", "message": "cache"}, {"code": "io_error", "message": "eio"}]
            })
        };
        serde_json::from_value(serde_json::json!({
            "schema": "headroom.result/v1", "tool": {"name": "headroom", "version": "0"}, "started_at": "t",
            "probes": [probe("rnd4k-q1t1-read", "RND4K Q1T1 read", "randread", 4096, 1, 56.0, 41000),
                       probe("rnd4k-q32t1-write", "RND4K Q32T1 write", "randwrite", 4096, 32, 0.0, 0)],
            "ceilings": [{"hop": "bus", "name": "SATA 6 Gb/s link of sda", "bytes_per_sec": 6e8}]
        }))
        .unwrap()
    }

    const TARGET: TargetSummary = TargetSummary {
        path: "/mnt/t/headroom-disk-1.tmp",
        kind: "test_file",
        filesystem: Some("ext4"),
        size: 1 << 30,
    };

    #[test]
    fn the_table_shows_heading_bus_rows_and_each_warning_once() {
        let text = render(&doc(), &TARGET, Layout::Table, Style { color: false, iec: true });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "headroom disk /mnt/t/headroom-disk-1.tmp (ext4, test file 1.000 GiB, io_uring, O_DIRECT)"
        );
        assert_eq!(lines[1], "bus: SATA 6 Gb/s link of sda = 600.0 MB/s");
        assert_eq!(
            lines[2],
            "test                               MB/s      MiB/s       IOPS   lat mean        p99      p99.9"
        );
        assert_eq!(
            lines[3],
            "RND4K Q1T1 read                    56.0       53.4      13672    70.0 us    1.20 ms    4.50 ms"
        );
        assert_eq!(lines[4], "RND4K Q32T1 write            no I/O completed (see the no_io_completed warning)");
        assert_eq!(lines[5..], ["warning [page_cache_possible]: cache"]);
    }

    #[test]
    fn a_test_spread_over_sources_has_one_line_under_its_row() {
        let mut d = doc();
        let ProbeSpec::Disk(s) = &mut d.probes[0].spec else { unreachable!() };
        let share = |addr: &str, nic: &str, job: u32, rate: f64| headroom_result::SourceShare {
            source_address: Some(addr.into()),
            interface: Some(nic.into()),
            jobs: vec![job],
            bytes: None,
            bytes_per_sec: Some(rate),
        };
        s.protocol = Some(headroom_result::ProtocolInfo {
            name: "iscsi".into(),
            server: "nas:3260".into(),
            sources: vec![share("10.0.1.2", "eth1", 0, 25e6), share("10.0.2.2", "eth2", 1, 24e6)],
            ..Default::default()
        });
        let text = table(&d.probes, Style { color: false, iec: false });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[2],
            "  spread over 2 sources: 10.0.1.2 via eth1 (job 0) 25.00 MB/s, 10.0.2.2 via eth2 (job 1) 24.00 MB/s"
        );
        let ProbeSpec::Disk(s) = &mut d.probes[0].spec else { unreachable!() };
        s.protocol.as_mut().unwrap().sources.truncate(1);
        assert!(!table(&d.probes, Style { color: false, iec: false }).contains("spread"));
    }

    #[test]
    fn an_smb_heading_names_the_dialect_and_the_cipher() {
        let mut spec: headroom_result::DiskSpec = serde_json::from_value(serde_json::json!({
            "rw": "read", "block_size": 1048576, "queue_depth": 8, "jobs": 1, "direct": true, "sync": "none",
            "engine": "smb", "path": "smb://nas/bench/headroom-disk-1.tmp",
            "protocol": {"name": "smb", "version": "3.1.1", "cipher": "aes-128-gcm", "server": "nas:445"}
        }))
        .unwrap();
        assert_eq!(engine_words(&spec), ", SMB 3.1.1 encrypted AES-128-GCM by headroom's own client");
        spec.protocol.as_mut().unwrap().cipher = None;
        assert_eq!(engine_words(&spec), ", SMB 3.1.1 by headroom's own client");
    }

    #[test]
    fn a_windows_run_names_its_unbuffered_flag_and_a_buffered_one_none() {
        let mut d = doc();
        for p in &mut d.probes {
            let ProbeSpec::Disk(s) = &mut p.spec else { unreachable!() };
            s.engine = "iocp".into();
            s.direct_flag = headroom_result::DirectFlag::FileFlagNoBuffering;
        }
        let text = render(&d, &TARGET, Layout::Table, Style::default());
        assert!(
            text.starts_with(
                "headroom disk /mnt/t/headroom-disk-1.tmp (ext4, test file 1.000 GiB, iocp, FILE_FLAG_NO_BUFFERING)\n"
            ),
            "{text}"
        );
        let ProbeSpec::Disk(s) = &mut d.probes[0].spec else { unreachable!() };
        s.direct = false;
        let text = render(&d, &TARGET, Layout::Table, Style::default());
        assert!(
            text.starts_with("headroom disk /mnt/t/headroom-disk-1.tmp (ext4, test file 1.000 GiB, iocp, buffered)\n"),
            "{text}"
        );
    }

    #[test]
    fn the_sweep_is_a_matrix_with_dashes_for_tests_not_run() {
        let layout = Layout::Sweep { block_sizes: &[4096, 1 << 20], queue_depths: &[1, 32] };
        let text = render(&doc(), &TARGET, layout, Style::default());
        assert!(text.contains("\nrandread: MB/s | IOPS | mean latency\nbs              QD1         QD32\n4K             56.0            -\n"), "{text}");
        assert!(text.contains("\n1M                -            -\n"), "{text}");
        assert!(text.contains("randwrite: MB/s | IOPS | mean latency\nbs              QD1         QD32\n4K                -       no I/O\n"), "{text}");
    }

    #[test]
    fn the_sync_preset_adds_buffered_dsync_and_fsync_side_by_side() {
        let mut d = doc();
        d.probes[0].id = "rnd4k-q1t1-write-dsync".into();
        let text = render(&d, &TARGET, Layout::Sync, Style::default());
        assert!(text.contains("\nbs           buffered          dsync          fsync   (write MB/s, mean latency)\n"));
        assert!(text.contains("\n4K                  -   56.0 70.0 us              -\n"), "{text}");
    }
}
