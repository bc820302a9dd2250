//! `headroom soak` on a terminal: what `--resume` did with the test files
//! killed sessions left, a line per finished turn while it runs, and the
//! end-of-soak summary (each probe over all its cycles, gaps, and what the
//! detectors found).

use crate::Style;
use headroom_result::{Probe, ResultDoc};
use headroom_units::{format_bytes_per_sec, format_duration};
use std::path::Path;
use std::time::Duration;

/// What became of one test file a killed session left (`headroom_soak::LeftFile`
/// as this presenter sees it).
#[derive(Debug, Clone, Copy)]
pub enum LeftFile<'a> {
    /// Removed now.
    Removed(&'a Path),
    /// Kept: a running headroom (this pid) still uses it.
    InUse(&'a Path, u32),
    /// Could not be removed, for this reason.
    Failed(&'a Path, &'a std::io::Error),
}

/// The stderr lines of `--resume` about the test files killed sessions left.
/// `quiet` (`--json`) drops the plain removals and keeps what needs a look.
pub fn left_file_lines<'a>(files: impl IntoIterator<Item = LeftFile<'a>>, quiet: bool) -> Vec<String> {
    files
        .into_iter()
        .filter_map(|left| match left {
            LeftFile::Removed(_) if quiet => None,
            LeftFile::Removed(path) => {
                Some(format!("headroom: removed {}, the test file of an interrupted session", path.display()))
            }
            LeftFile::InUse(path, pid) => {
                Some(format!("headroom: {} is in use by a running headroom (pid {pid}); left in place", path.display()))
            }
            LeftFile::Failed(path, e) => Some(format!(
                "headroom: cannot remove {}, the test file of an interrupted session: {e}",
                path.display()
            )),
        })
        .collect()
}

/// How one turn of the loop ended.
#[derive(Debug, Clone, Copy)]
pub enum Turn<'a> {
    /// The probe ran; its summary's bytes/s (and IOPS when a disk probe) are shown.
    Measured(&'a Probe),
    /// The server could not be reached: an outage, not an error.
    Unreachable(&'a str),
    /// The probe failed for another reason, given as one line; the soak goes on.
    Failed(&'a str),
}

/// The progress line of one finished turn.
pub fn turn_line(cycle: i64, probe: &str, turn: Turn<'_>) -> String {
    match turn {
        Turn::Measured(p) => format!(
            "cycle {cycle:>4} {probe:<11} {:>14}{}\n",
            format_bytes_per_sec(p.summary.bytes_per_sec),
            p.summary.iops.map(|i| format!("  {i:>9.0} IOPS")).unwrap_or_default()
        ),
        Turn::Unreachable(why) => format!("cycle {cycle:>4} {probe:<11} server unreachable: {why}\n"),
        Turn::Failed(why) => format!("cycle {cycle:>4} {probe:<11} failed: {why}\n"),
    }
}

/// The end-of-soak summary of a soak's document, stored in `db`.
pub fn summary(doc: &ResultDoc, db: &str, style: Style) -> String {
    let soak = doc.soak.clone().unwrap_or_default();
    let mut s = format!(
        "{} {} in {} session(s), {} turns, {} samples -> {db}\n",
        style.bold("soak"),
        format_duration(Duration::from_secs_f64(soak.elapsed_s.max(0.0).round())),
        soak.sessions,
        soak.cycles,
        soak.samples,
    );
    for p in &doc.probes {
        let lat = p
            .summary
            .latency_ns
            .as_ref()
            .map(|l| format!("  latency mean {:.0} us, p99 {:.0} us", l.mean / 1e3, l.p99 / 1e3))
            .unwrap_or_default();
        let iops = p.summary.iops.map(|i| format!("  {i:.0} IOPS")).unwrap_or_default();
        s += &format!(
            "  {:<11} {:>14}{iops}{lat}\n",
            p.name.trim_start_matches("soak "),
            format_bytes_per_sec(p.summary.bytes_per_sec)
        );
    }
    for g in &soak.gaps {
        s += &format!("  gap: {:.1} s without samples from +{:.1} s ({})\n", g.duration_s, g.from_s, g.reason);
    }
    if soak.detections.is_empty() {
        s += "  no dips, drift, flaps or outages detected\n";
    }
    for d in &soak.detections {
        s += &format!("  {}: {}\n", style.bold(d.kind.as_str()), d.message);
    }
    // The document's other warnings (a virtual disk's host cache): gaps and
    // detections are warnings too, shown above.
    let shown = |code: &str| {
        code == headroom_result::WarningCode::SoakGap.as_str()
            || soak.detections.iter().any(|d| d.kind.as_str() == code)
    };
    for w in doc.warnings.iter().filter(|w| !shown(w.code.as_str())) {
        s += &format!("  {}: {}\n", style.bold(w.code.as_str()), w.message);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> ResultDoc {
        serde_json::from_value(serde_json::json!({
            "schema": "headroom.result/v1", "tool": {"name": "headroom", "version": "0"}, "started_at": "t",
            "probes": [{"id": "soak-write", "name": "soak write", "kind": "disk",
                        "spec": {"rw": "write", "block_size": 1048576, "queue_depth": 8, "jobs": 1, "direct": true,
                                 "sync": "none", "engine": "io_uring", "path": "/t"},
                        "summary": {"bytes_per_sec": 5.452e8, "iops": 520.0, "duration_s": 3.0,
                                    "latency_ns": {"mean": 15.682e6, "p50": 1e6, "p99": 46.341e6, "p999": 5e7, "max": 6e7}}}],
            "soak": {"elapsed_s": 3725.4, "cycles": 30, "sessions": 2, "samples": 3600,
                     "gaps": [{"from_s": 12.5, "to_s": 20.0, "duration_s": 7.5, "reason": "resumed"}],
                     "detections": [{"kind": "write_cliff", "probe": "write", "message": "write: the rate fell"}]},
            "warnings": [{"code": "soak_gap", "message": "no samples"}, {"code": "write_cliff", "message": "write: the rate fell"},
                         {"code": "page_cache_possible", "message": "vda is a virtual disk"}]
        }))
        .unwrap()
    }

    #[test]
    fn the_summary_shows_each_probe_gaps_and_findings() {
        let text = summary(&doc(), "nas.sqlite", Style::default());
        assert_eq!(
            text,
            "soak 1h2m5s in 2 session(s), 30 turns, 3600 samples -> nas.sqlite\n  \
             write           545.2 MB/s  520 IOPS  latency mean 15682 us, p99 46341 us\n  \
             gap: 7.5 s without samples from +12.5 s (resumed)\n  \
             write_cliff: write: the rate fell\n  \
             page_cache_possible: vda is a virtual disk\n"
        );
        let mut quiet = doc();
        quiet.soak.as_mut().unwrap().detections.clear();
        quiet.warnings.clear();
        assert!(
            summary(&quiet, "nas.sqlite", Style::default()).ends_with("  no dips, drift, flaps or outages detected\n")
        );
    }

    #[test]
    fn left_files_are_one_line_each_and_json_keeps_only_the_ones_left() {
        let why = std::io::Error::from_raw_os_error(21); // EISDIR
        let files = || {
            [
                LeftFile::Removed(Path::new("/d/headroom-disk-7.tmp")),
                LeftFile::InUse(Path::new("/d/headroom-disk-8.tmp"), 8),
                LeftFile::Failed(Path::new("/d/headroom-disk-9.tmp"), &why),
            ]
        };
        let in_use = "headroom: /d/headroom-disk-8.tmp is in use by a running headroom (pid 8); left in place";
        let failed = "headroom: cannot remove /d/headroom-disk-9.tmp, the test file of an interrupted session: \
                      Is a directory (os error 21)";
        assert_eq!(
            left_file_lines(files(), false),
            ["headroom: removed /d/headroom-disk-7.tmp, the test file of an interrupted session", in_use, failed]
        );
        assert_eq!(left_file_lines(files(), true), [in_use, failed]);
    }

    #[test]
    fn a_turn_line_is_its_rate_and_iops_or_why_it_failed() {
        let d = doc();
        assert_eq!(
            turn_line(3, "write", Turn::Measured(&d.probes[0])),
            "cycle    3 write           545.2 MB/s        520 IOPS\n"
        );
        assert_eq!(
            turn_line(12, "net", Turn::Unreachable("refused")),
            "cycle   12 net         server unreachable: refused\n"
        );
        assert_eq!(turn_line(1, "read", Turn::Failed("EIO")), "cycle    1 read        failed: EIO\n");
    }
}
