//! `headroom flushcheck` on a terminal: the writer's start and stop lines,
//! and the verify summary with one line per lost or torn block, saying
//! whether a loss means the storage lied (fsync, O_DSYNC) or was expected
//! (`--sync none`).

use headroom_result::flushcheck::{Finding, FlushRun, VerifyReport, WriteReport};
use headroom_units::format_size;

/// Most lost blocks listed one per line; the rest are counted (all are in --json).
const LISTED: usize = 50;

/// "writing 4 KiB blocks with fsync to /mnt/f (run ..., 262143 blocks), reporting to nas:5201".
pub fn write_started(run: &FlushRun, listener: &str) -> String {
    let mut text = format!(
        "flushcheck run {}: writing {} blocks round and round {} ({} blocks), {}, reporting each acknowledged block to {listener}\n",
        run.run,
        format_size(u64::from(run.block_size)),
        run.path,
        run.blocks,
        sync_words(&run.sync),
    );
    if run.sync == "none" {
        text += "--sync none: blocks are acknowledged when write() returns, before they reach the disk; \
                 a power cut is expected to lose them\n";
    }
    text += "cut the power (or press Ctrl-C) whenever you like; after the reboot run `headroom flushcheck verify`\n";
    text
}

fn sync_words(sync: &str) -> &str {
    match sync {
        "fsync" => "fsync after each",
        "dsync" => "opened O_DSYNC",
        _ => "never synced (--sync none)",
    }
}

/// The writer's closing line.
pub fn write_summary(r: &WriteReport) -> String {
    format!(
        "{} blocks written, {} acknowledged and recorded on {} in {:.1} s ({:.0} blocks/s); the file stays for verify:\n  headroom flushcheck verify {} --from {}\n",
        r.written,
        r.acknowledged,
        r.listener,
        r.duration_s,
        r.acks_per_sec,
        shell_word(&r.run.path),
        r.listener
    )
}

fn shell_word(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The verify summary and its findings.
pub fn verify(r: &VerifyReport) -> String {
    let mut text = format!(
        "flushcheck run {} ({} on {}, sync {}): {} acknowledged blocks, {} intact, {} lost, {} torn\n",
        r.run.run, r.run.path, r.run.host, r.run.sync, r.acknowledged, r.intact, r.lost, r.torn
    );
    if !r.direct {
        text += "warning: the filesystem refused O_DIRECT: blocks were read through the page cache, \
                 which may hold what the disk lost (verify after a reboot)\n";
    }
    for f in r.findings.iter().take(LISTED) {
        let what = match (f.finding, f.found_seq) {
            (Finding::Missing, Some(s)) => format!("lost: block seq {s} of another offset stands there"),
            (Finding::Missing, None) => "lost: the write never reached the disk".to_string(),
            (Finding::Stale, Some(s)) => format!("lost: the earlier block seq {s} is still there"),
            (Finding::Stale, None) => "lost: an earlier block is still there".to_string(),
            (Finding::Torn, _) => "torn: part of the block was written".to_string(),
        };
        text += &format!("  seq {:>10}  offset {:>14}  {what}\n", f.seq, f.offset);
    }
    if r.findings.len() > LISTED {
        text += &format!("  ... and {} more (--json lists all)\n", r.findings.len() - LISTED);
    }
    text += &if r.acknowledged == 0 {
        "nothing to check: the listener recorded no acknowledged block of this run\n".to_string()
    } else if r.storage_lied() {
        format!(
            "FAIL: the storage acknowledged {} {} write(s) it did not keep: it lies about flushes \
             (a volatile write cache without power-loss protection, or a layer that ignores flushes)\n",
            r.lost + r.torn,
            r.run.sync
        )
    } else if r.lost + r.torn > 0 {
        "as expected: with --sync none a write is acknowledged before it reaches the disk, so a power cut loses it; \
         run with --sync fsync or dsync to test durability\n"
            .to_string()
    } else {
        "ok: every acknowledged write survived\n".to_string()
    };
    text
}
