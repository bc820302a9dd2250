//! The ranges every disk test must stay within, wherever it comes from:
//! the command line (`--bs`, `--qd`, `--jobs`, `--time`, ...), a `run
//! --test` spec, or a remote plan a token holder sends to `headroom serve`.
//! One check ([`check_test_def`]) so that a field the CLI refuses is never
//! accepted over the wire (a queue depth of 0 hangs an io_uring worker, a
//! block size of 0 divides by zero, a duration near `u64::MAX` overflows).
//!
//! What it must not do: know the server's own caps (threads, buffer memory:
//! the server's admission adds those on top) or any target's alignment
//! (`run::check_test` checks a test against its prepared target).

use crate::{DiskError, Rw, SyncMode, TestDef};
use std::ops::RangeInclusive;
use std::time::Duration;

/// Bytes per I/O (`--bs`).
pub const BLOCK_SIZE_RANGE: RangeInclusive<u64> = 1..=(64 << 20);
/// I/Os in flight per job (`--qd`).
pub const QUEUE_DEPTH_RANGE: RangeInclusive<u32> = 1..=4096;
/// Workers (`--jobs`).
pub const JOBS_RANGE: RangeInclusive<u32> = 1..=256;
/// Measured time per test (`--time`).
pub const TIME_RANGE: RangeInclusive<Duration> = Duration::from_millis(100)..=Duration::from_secs(86_400);
/// Longest warm-up (`--ramp`).
pub const MAX_RAMP: Duration = Duration::from_secs(3600);
/// Length of each sample (`--sample-interval`).
pub const SAMPLE_INTERVAL_RANGE: RangeInclusive<Duration> = Duration::from_millis(100)..=Duration::from_secs(10);

fn usage(text: String) -> DiskError {
    DiskError::Usage(text)
}

/// Checks every field of `def` against the ranges above; the error names
/// the flag that sets the field, as the command line would.
pub fn check_test_def(def: &TestDef) -> Result<(), DiskError> {
    if !BLOCK_SIZE_RANGE.contains(&def.block_size) {
        return Err(usage(format!("--bs {} is out of range: 1 byte to 64M (e.g. --bs 4k or --bs 1M)", def.block_size)));
    }
    if !QUEUE_DEPTH_RANGE.contains(&def.queue_depth) {
        return Err(usage(format!("--qd {} is out of range: 1 to 4096 (e.g. --qd 32)", def.queue_depth)));
    }
    if !JOBS_RANGE.contains(&def.jobs) {
        return Err(usage(format!("--jobs {} is out of range: 1 to 256 (e.g. --jobs 4)", def.jobs)));
    }
    if !TIME_RANGE.contains(&def.time) {
        return Err(usage(format!(
            "--time {:.3}s is out of range: 100ms to 24h per test (e.g. --time 5s)",
            def.time.as_secs_f64()
        )));
    }
    if def.ramp > MAX_RAMP {
        return Err(usage(format!(
            "--ramp {:.0}s is too long: at most 1h of warm-up (e.g. --ramp 2s)",
            def.ramp.as_secs_f64()
        )));
    }
    if !SAMPLE_INTERVAL_RANGE.contains(&def.sample_interval) {
        return Err(usage(format!(
            "--sample-interval {:.3}s is out of range: 100ms to 10s (e.g. --sample-interval 250ms)",
            def.sample_interval.as_secs_f64()
        )));
    }
    if def.max_bytes == Some(0) {
        return Err(usage("--size 0 leaves nothing to test; use e.g. --size 1G".into()));
    }
    match (def.rw, def.rwmix_read) {
        (Rw::RandRw, Some(pct)) if pct > 100 => {
            return Err(usage(format!("--rwmix {pct} is not a percentage of reads (0 to 100, e.g. --rwmix 70)")));
        }
        (Rw::RandRw, _) | (_, None) => {}
        (_, Some(_)) => {
            return Err(usage("--rwmix sets the read share of a mixed test and needs --rw randrw".into()));
        }
    }
    if def.sync != SyncMode::None && !def.rw.writes() {
        return Err(usage(format!("--sync applies to writes; test '{}' only reads", def.name)));
    }
    Ok(())
}

/// The bytes of I/O buffers a test allocates: one block per I/O in flight,
/// per job.
pub fn buffer_bytes(def: &TestDef) -> u64 {
    def.block_size.saturating_mul(u64::from(def.queue_depth)).saturating_mul(u64::from(def.jobs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_def;

    fn good() -> TestDef {
        test_def(Rw::RandRead, 4096, 32, 4, Duration::from_secs(5), Duration::from_secs(1))
    }

    #[test]
    fn every_field_out_of_range_is_refused_naming_its_flag() {
        assert!(check_test_def(&good()).is_ok());
        let cases: Vec<(TestDef, &str)> = vec![
            (TestDef { block_size: 0, ..good() }, "--bs"),
            (TestDef { block_size: 128 << 20, ..good() }, "--bs"),
            (TestDef { queue_depth: 0, ..good() }, "--qd"),
            (TestDef { queue_depth: 32768, ..good() }, "--qd"),
            (TestDef { jobs: 0, ..good() }, "--jobs"),
            (TestDef { jobs: u32::MAX, ..good() }, "--jobs"),
            (TestDef { time: Duration::ZERO, ..good() }, "--time"),
            (TestDef { time: Duration::MAX, ..good() }, "--time"),
            (TestDef { ramp: Duration::MAX, ..good() }, "--ramp"),
            (TestDef { sample_interval: Duration::ZERO, ..good() }, "--sample-interval"),
            (TestDef { max_bytes: Some(0), ..good() }, "--size"),
            (TestDef { rwmix_read: Some(70), ..good() }, "--rwmix"),
            (TestDef { rw: Rw::RandRw, rwmix_read: Some(101), ..good() }, "--rwmix"),
            (TestDef { sync: SyncMode::Fsync, ..good() }, "--sync"),
        ];
        for (def, flag) in cases {
            let e = check_test_def(&def).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{flag}: {e}");
        }
    }

    #[test]
    fn buffer_bytes_never_overflow() {
        let huge = TestDef { block_size: u64::MAX, queue_depth: u32::MAX, jobs: u32::MAX, ..good() };
        assert_eq!(buffer_bytes(&huge), u64::MAX);
        assert_eq!(buffer_bytes(&good()), 4096 * 32 * 4);
    }
}
