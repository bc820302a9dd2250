//! The ranges every disk test must stay within, wherever it comes from:
//! the command line (`--bs`, `--qd`, `--jobs`, `--time`, ...), a `run
//! --test` spec, or a remote plan a token holder sends to `headroom serve`.
//! One check ([`check_test_def`]) so that a field the CLI refuses is never
//! accepted over the wire (a queue depth of 0 hangs an io_uring worker, a
//! block size of 0 divides by zero, a duration near `u64::MAX` overflows).
//!
//! Owns [`Setting`], what a disk test is set by, so that errors name a
//! setting and the front end spells it (the binary's flags).
//!
//! What it must not do: spell a setting as a flag, know the server's own caps (threads, buffer memory:
//! the server's admission adds those on top) or any target's alignment
//! (`run::check_test` checks a test against its prepared target).

use crate::{DiskError, Rw, SyncMode, TestDef};
use headroom_units::setting::Message;
use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

/// What a disk test is set by; an [`DiskError::Invalid`] names these and the
/// front end spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// A named set of tests (quick, cdm, sustained, sync, ...).
    Preset,
    /// One custom test written `RW:BS[:qN][:tN]`.
    TestSpec,
    /// The access pattern (read, randwrite, ...).
    Rw,
    /// Bytes per I/O.
    BlockSize,
    /// I/Os in flight per job.
    QueueDepth,
    /// Workers.
    Jobs,
    /// Measured time per test.
    Time,
    /// Warm-up before measuring.
    Ramp,
    /// Length of each sample of the series.
    SampleInterval,
    /// Size of the test file or region.
    Size,
    /// Read share of a mixed test.
    RwMix,
    /// How writes are made durable.
    Sync,
    /// The I/O engine.
    Engine,
    /// Registered io_uring buffers.
    FixedBufs,
    /// Leave to write over a device, a file or a whole export.
    Destructive,
    /// Leave to write over data that carries a signature.
    Force,
    /// Keeping the test file after the run.
    Keep,
    /// Bypassing the page cache (O_DIRECT, unbuffered I/O).
    Direct,
    /// The file that holds a share's credentials.
    Credentials,
    /// The login keys an iSCSI initiator offers.
    IscsiKeys,
    /// The directories a server lets clients' disk probes use (the far
    /// end's setting, named in its refusals).
    ServerAllowPath,
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Setting::Preset => "preset",
            Setting::TestSpec => "test",
            Setting::Rw => "access pattern",
            Setting::BlockSize => "block size",
            Setting::QueueDepth => "queue depth",
            Setting::Jobs => "jobs",
            Setting::Time => "time",
            Setting::Ramp => "ramp",
            Setting::SampleInterval => "sample interval",
            Setting::Size => "size",
            Setting::RwMix => "read share",
            Setting::Sync => "sync mode",
            Setting::Engine => "engine",
            Setting::FixedBufs => "fixed buffers",
            Setting::Destructive => "leave to destroy data",
            Setting::Force => "leave to write over a signature",
            Setting::Keep => "keeping the test file",
            Setting::Direct => "direct I/O",
            Setting::Credentials => "credentials file",
            Setting::IscsiKeys => "iSCSI login keys",
            Setting::ServerAllowPath => "allowed paths",
        })
    }
}

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

fn invalid(message: Message<Setting>) -> DiskError {
    DiskError::Invalid(message)
}

/// Checks every field of `def` against the ranges above; the error names
/// the setting of the field.
pub fn check_test_def(def: &TestDef) -> Result<(), DiskError> {
    if !BLOCK_SIZE_RANGE.contains(&def.block_size) {
        return Err(invalid(
            Message::of(Setting::BlockSize)
                .then(format!(" {} is out of range: 1 byte to 64M (e.g. ", def.block_size))
                .and(Setting::BlockSize)
                .then(" 4k or ")
                .and(Setting::BlockSize)
                .then(" 1M)"),
        ));
    }
    if !QUEUE_DEPTH_RANGE.contains(&def.queue_depth) {
        return Err(invalid(
            Message::of(Setting::QueueDepth)
                .then(format!(" {} is out of range: 1 to 4096 (e.g. ", def.queue_depth))
                .and(Setting::QueueDepth)
                .then(" 32)"),
        ));
    }
    if !JOBS_RANGE.contains(&def.jobs) {
        return Err(invalid(
            Message::of(Setting::Jobs)
                .then(format!(" {} is out of range: 1 to 256 (e.g. ", def.jobs))
                .and(Setting::Jobs)
                .then(" 4)"),
        ));
    }
    if !TIME_RANGE.contains(&def.time) {
        return Err(invalid(
            Message::of(Setting::Time)
                .then(format!(" {:.3}s is out of range: 100ms to 24h per test (e.g. ", def.time.as_secs_f64()))
                .and(Setting::Time)
                .then(" 5s)"),
        ));
    }
    if def.ramp > MAX_RAMP {
        return Err(invalid(
            Message::of(Setting::Ramp)
                .then(format!(" {:.0}s is too long: at most 1h of warm-up (e.g. ", def.ramp.as_secs_f64()))
                .and(Setting::Ramp)
                .then(" 2s)"),
        ));
    }
    if !SAMPLE_INTERVAL_RANGE.contains(&def.sample_interval) {
        return Err(invalid(
            Message::of(Setting::SampleInterval)
                .then(format!(" {:.3}s is out of range: 100ms to 10s (e.g. ", def.sample_interval.as_secs_f64()))
                .and(Setting::SampleInterval)
                .then(" 250ms)"),
        ));
    }
    if def.max_bytes == Some(0) {
        return Err(invalid(zero_size()));
    }
    match (def.rw, def.rwmix_read) {
        (Rw::RandRw, Some(pct)) if pct > 100 => {
            return Err(invalid(
                Message::of(Setting::RwMix)
                    .then(format!(" {pct} is not a percentage of reads (0 to 100, e.g. "))
                    .and(Setting::RwMix)
                    .then(" 70)"),
            ));
        }
        (Rw::RandRw, _) | (_, None) => {}
        (_, Some(_)) => {
            return Err(invalid(
                Message::of(Setting::RwMix)
                    .then(" sets the read share of a mixed test and needs ")
                    .and(Setting::Rw)
                    .then(" randrw"),
            ));
        }
    }
    if def.sync != SyncMode::None && !def.rw.writes() {
        return Err(invalid(
            Message::of(Setting::Sync).then(format!(" applies to writes; test '{}' only reads", def.name)),
        ));
    }
    Ok(())
}

/// A size of 0, refused the same way by the ranges and by the choice of tests.
pub(crate) fn zero_size() -> Message<Setting> {
    Message::of(Setting::Size).then(" 0 leaves nothing to test; use e.g. ").and(Setting::Size).then(" 1G")
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
    fn every_field_out_of_range_is_refused_naming_its_setting() {
        assert!(check_test_def(&good()).is_ok());
        let cases: Vec<(TestDef, Setting)> = vec![
            (TestDef { block_size: 0, ..good() }, Setting::BlockSize),
            (TestDef { block_size: 128 << 20, ..good() }, Setting::BlockSize),
            (TestDef { queue_depth: 0, ..good() }, Setting::QueueDepth),
            (TestDef { queue_depth: 32768, ..good() }, Setting::QueueDepth),
            (TestDef { jobs: 0, ..good() }, Setting::Jobs),
            (TestDef { jobs: u32::MAX, ..good() }, Setting::Jobs),
            (TestDef { time: Duration::ZERO, ..good() }, Setting::Time),
            (TestDef { time: Duration::MAX, ..good() }, Setting::Time),
            (TestDef { ramp: Duration::MAX, ..good() }, Setting::Ramp),
            (TestDef { sample_interval: Duration::ZERO, ..good() }, Setting::SampleInterval),
            (TestDef { max_bytes: Some(0), ..good() }, Setting::Size),
            (TestDef { rwmix_read: Some(70), ..good() }, Setting::RwMix),
            (TestDef { rw: Rw::RandRw, rwmix_read: Some(101), ..good() }, Setting::RwMix),
            (TestDef { sync: SyncMode::Fsync, ..good() }, Setting::Sync),
        ];
        for (def, setting) in cases {
            match check_test_def(&def).unwrap_err() {
                DiskError::Invalid(m) => assert_eq!(m.settings().next(), Some(setting), "{m}"),
                e => panic!("{setting}: {e}"),
            }
        }
    }

    #[test]
    fn buffer_bytes_never_overflow() {
        let huge = TestDef { block_size: u64::MAX, queue_depth: u32::MAX, jobs: u32::MAX, ..good() };
        assert_eq!(buffer_bytes(&huge), u64::MAX);
        assert_eq!(buffer_bytes(&good()), 4096 * 32 * 4);
    }
}
