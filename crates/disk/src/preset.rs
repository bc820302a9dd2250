//! The named test sets: quick, cdm, nvme, sizes, sweep, sync, sustained; the
//! naming of tests (`SEQ1M Q8T1 read`, id `seq1m-q8t1-read`); and the
//! resolution of a preset or a custom test with the user's overrides into
//! the tests to run ([`resolve`]), with the one-line errors that name the setting
//! ([`Setting`]; the binary spells it as its flag).
//!
//! Long (about 640 lines): about 520 lines of code (the refusals spelled part by part,
//! each setting typed), the rest its unit tests.

use crate::run::RunSettings;
use crate::{DirectMode, DiskError, EngineChoice, Pattern, Rw, Setting, SyncMode, TestDef};
use headroom_units::setting::Message;
use headroom_units::{DurationArg, Size};
use std::time::Duration;

/// A preset's name and what it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// SEQ1M Q8T1, RND4K Q32T1, RND4K Q1T1, read and write: the default.
    Quick,
    /// CrystalDiskMark's set: SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1.
    Cdm,
    /// Deep queues for NVMe: SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, RND4K Q1T1.
    Nvme,
    /// Random 4K, 64K and 1M at QD1, and sequential 1M.
    Sizes,
    /// QD 1..64 x 4K/64K/1M random reads and writes, shown as a matrix.
    Sweep,
    /// 4K/64K/1M random writes buffered, with O_DSYNC and with fsync, side by side.
    Sync,
    /// Sequential 1M QD8 writes for a minute or `--size` bytes, watching for a write cliff.
    Sustained,
}

impl Preset {
    /// Every preset, in the order `--help` lists them.
    pub const ALL: [Preset; 7] =
        [Preset::Quick, Preset::Cdm, Preset::Nvme, Preset::Sizes, Preset::Sweep, Preset::Sync, Preset::Sustained];

    /// The name `--preset` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Preset::Quick => "quick",
            Preset::Cdm => "cdm",
            Preset::Nvme => "nvme",
            Preset::Sizes => "sizes",
            Preset::Sweep => "sweep",
            Preset::Sync => "sync",
            Preset::Sustained => "sustained",
        }
    }

    /// The preset named `s`; None for any other word.
    pub fn parse(s: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Measured time per test unless --time says otherwise.
    pub fn default_time(self) -> Duration {
        Duration::from_secs(match self {
            Preset::Quick => 3,
            Preset::Cdm | Preset::Nvme => 5,
            Preset::Sizes | Preset::Sync => 3,
            Preset::Sweep => 2,
            Preset::Sustained => 60,
        })
    }

    /// Warm-up per test unless --ramp says otherwise.
    pub fn default_ramp(self) -> Duration {
        match self {
            Preset::Sweep => Duration::from_millis(500),
            // A cliff may come early: measure from the first second.
            Preset::Sustained => Duration::ZERO,
            _ => Duration::from_secs(1),
        }
    }

    /// The tests of the preset, each with `time` and `ramp`.
    pub fn tests(self, time: Duration, ramp: Duration) -> Vec<TestDef> {
        let t = |rw, bs, qd, jobs| test_def(rw, bs, qd, jobs, time, ramp);
        let both = |rw_read, rw_write, bs, qd, jobs| [t(rw_read, bs, qd, jobs), t(rw_write, bs, qd, jobs)];
        const K4: u64 = 4096;
        const K64: u64 = 64 << 10;
        const K128: u64 = 128 << 10;
        const M1: u64 = 1 << 20;
        match self {
            Preset::Quick => [
                both(Rw::Read, Rw::Write, M1, 8, 1),
                both(Rw::RandRead, Rw::RandWrite, K4, 32, 1),
                both(Rw::RandRead, Rw::RandWrite, K4, 1, 1),
            ]
            .concat(),
            Preset::Cdm => [
                both(Rw::Read, Rw::Write, M1, 8, 1),
                both(Rw::Read, Rw::Write, M1, 1, 1),
                both(Rw::RandRead, Rw::RandWrite, K4, 32, 1),
                both(Rw::RandRead, Rw::RandWrite, K4, 1, 1),
            ]
            .concat(),
            Preset::Nvme => [
                both(Rw::Read, Rw::Write, M1, 8, 1),
                both(Rw::Read, Rw::Write, K128, 32, 1),
                both(Rw::RandRead, Rw::RandWrite, K4, 32, 16),
                both(Rw::RandRead, Rw::RandWrite, K4, 1, 1),
            ]
            .concat(),
            Preset::Sizes => [
                both(Rw::RandRead, Rw::RandWrite, K4, 1, 1),
                both(Rw::RandRead, Rw::RandWrite, K64, 1, 1),
                both(Rw::RandRead, Rw::RandWrite, M1, 1, 1),
                both(Rw::Read, Rw::Write, M1, 1, 1),
            ]
            .concat(),
            Preset::Sweep => {
                let mut v = Vec::new();
                for bs in SWEEP_BLOCK_SIZES {
                    for rw in [Rw::RandRead, Rw::RandWrite] {
                        for qd in SWEEP_QUEUE_DEPTHS {
                            v.push(t(rw, bs, qd, 1));
                        }
                    }
                }
                v
            }
            Preset::Sync => {
                let mut v = Vec::new();
                for bs in [K4, K64, M1] {
                    for (sync, label) in
                        [(SyncMode::None, "buffered"), (SyncMode::Dsync, "dsync"), (SyncMode::Fsync, "fsync")]
                    {
                        let mut d = t(Rw::RandWrite, bs, 1, 1);
                        // All three through the page cache, so the columns differ only in durability.
                        d.direct = Some(DirectMode::Off);
                        d.sync = sync;
                        d.id = format!("{}-{label}", d.id);
                        d.name = format!("{} {label}", d.name);
                        v.push(d);
                    }
                }
                v
            }
            Preset::Sustained => vec![t(Rw::Write, M1, 8, 1)],
        }
    }
}

/// Queue depths of the sweep preset.
pub const SWEEP_QUEUE_DEPTHS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Block sizes of the sweep preset.
pub const SWEEP_BLOCK_SIZES: [u64; 3] = [4096, 64 << 10, 1 << 20];

/// "4K", "64K", "1M", "3000B": the one size-label formatter, in headroom-units.
pub use headroom_units::size_label;

/// A test with CrystalDiskMark-style name (`RND4K Q32T1 read`) and id (`rnd4k-q32t1-read`).
pub fn test_def(rw: Rw, block_size: u64, queue_depth: u32, jobs: u32, time: Duration, ramp: Duration) -> TestDef {
    let kind = if rw.is_random() { "RND" } else { "SEQ" };
    let dir = match rw {
        Rw::Read | Rw::RandRead => "read",
        Rw::Write | Rw::RandWrite => "write",
        Rw::RandRw => "mix",
    };
    let name = format!("{kind}{} Q{queue_depth}T{jobs} {dir}", size_label(block_size));
    TestDef {
        id: name.to_lowercase().replace(' ', "-"),
        name,
        rw,
        block_size,
        queue_depth,
        jobs,
        rwmix_read: None,
        direct: None,
        sync: SyncMode::None,
        time,
        ramp,
        max_bytes: None,
        sample_interval: Duration::from_secs(1),
    }
}

/// One custom test as `run --test` takes it: `RW:BS[:qN][:tN]`, e.g.
/// `read:512k:q4` (IOMeter's 512K sequential read at QD4) or
/// `randread:4k:q32:t4`; queue depth and jobs default to 1.
pub fn parse_test_spec(spec: &str, time: Duration, ramp: Duration) -> Result<TestDef, DiskError> {
    let bad_because = |why: Message<Setting>| {
        DiskError::Invalid(
            Message::of(Setting::TestSpec)
                .then(format!(" '{spec}': "))
                .join(why)
                .then("; write it as RW:BS[:qN][:tN], e.g. read:512k:q4 or randread:4k:q32:t4"),
        )
    };
    let bad = |why: String| bad_because(Message::text(why));
    let mut parts = spec.split(':');
    let rw_text = parts.next().unwrap_or_default();
    let rw = Rw::parse(rw_text)
        .ok_or_else(|| bad(format!("'{rw_text}' is not read, write, randread, randwrite or randrw")))?;
    let bs_text = parts.next().ok_or_else(|| bad("no block size".into()))?;
    let block_size = headroom_units::parse_size(bs_text).map_err(|e| bad(format!("block size: {e}")))?;
    if !(512..=(64 << 20)).contains(&block_size) {
        return Err(bad(format!("block size {block_size} is out of range (512 bytes to 64M)")));
    }
    let (mut queue_depth, mut jobs) = (1u32, 1u32);
    for part in parts {
        let number = |text: &str, max: u32| text.parse::<u32>().ok().filter(|n| (1..=max).contains(n));
        match part.split_at_checked(1) {
            Some(("q", n)) => {
                queue_depth =
                    number(n, *crate::QUEUE_DEPTH_RANGE.end()).ok_or_else(|| bad(format!("'{part}': qN is 1-4096")))?
            }
            Some(("t", n)) => {
                jobs = number(n, *crate::JOBS_RANGE.end()).ok_or_else(|| bad(format!("'{part}': tN is 1-256")))?
            }
            _ => return Err(bad(format!("'{part}' is neither qN (queue depth) nor tN (jobs)"))),
        }
    }
    let def = test_def(rw, block_size, queue_depth, jobs, time, ramp);
    crate::check_test_def(&def).map_err(|e| match e {
        DiskError::Invalid(why) => bad_because(why),
        e => bad(e.to_string()),
    })?;
    Ok(def)
}

/// What the user asked of the disk engine, flags as given (`headroom disk`'s
/// options; `run` and `soak` fill in their own).
#[derive(Debug, Clone)]
pub struct TestChoice {
    /// `--preset`, unparsed.
    pub preset: Option<String>,
    /// `--rw`, unparsed (read, write, randread, randwrite, randrw).
    pub rw: Option<String>,
    /// `--bs`, bytes per I/O.
    pub bs: Option<Size>,
    /// `--qd`, I/Os in flight per job.
    pub qd: Option<u32>,
    /// `--jobs`, workers.
    pub jobs: Option<u32>,
    /// `--size`: test file size, the region of a device, or the bytes `sustained` writes.
    pub size: Option<Size>,
    /// `--time`, measured time per test.
    pub time: Option<DurationArg>,
    /// `--ramp`, warm-up per test.
    pub ramp: Option<DurationArg>,
    /// `--sample-interval`, length of each sample of the series.
    pub sample_interval: Option<DurationArg>,
    /// `--rwmix`, percent reads for randrw.
    pub rwmix: Option<u32>,
    /// `--direct`: O_DIRECT auto, on or off.
    pub direct: DirectMode,
    /// `--engine`: auto, io_uring or psync.
    pub engine: EngineChoice,
    /// `--fixedbufs`: io_uring with registered buffers (auto, on, off).
    pub fixedbufs: crate::FixedBufs,
    /// `--sync`: none, fsync or dsync.
    pub sync: SyncMode,
    /// `--pattern`: random, zero or compressible=PCT.
    pub pattern: Pattern,
}

impl Default for TestChoice {
    fn default() -> Self {
        TestChoice {
            preset: None,
            rw: None,
            bs: None,
            qd: None,
            jobs: None,
            size: None,
            time: None,
            ramp: None,
            sample_interval: None,
            rwmix: None,
            direct: DirectMode::Auto,
            engine: EngineChoice::Auto,
            fixedbufs: crate::FixedBufs::Auto,
            sync: SyncMode::None,
            pattern: Pattern::Random,
        }
    }
}

/// The tests a [`TestChoice`] resolves to.
#[derive(Debug, Clone)]
pub struct TestSelection {
    /// The preset they come from (None: one custom test).
    pub preset: Option<Preset>,
    /// The tests, in the order they run.
    pub tests: Vec<TestDef>,
    /// How they run: engine, O_DIRECT, write pattern, registered buffers.
    pub settings: RunSettings,
}

fn invalid(message: Message<Setting>) -> DiskError {
    DiskError::Invalid(message)
}

fn settings_of(choice: &TestChoice) -> Result<RunSettings, DiskError> {
    let settings = RunSettings {
        engine: choice.engine,
        direct: choice.direct,
        pattern: choice.pattern,
        fixedbufs: choice.fixedbufs,
    };
    if choice.fixedbufs == crate::FixedBufs::On && settings.engine == EngineChoice::Psync {
        return Err(invalid(
            Message::of(Setting::FixedBufs)
                .then(" registers io_uring buffers and does not apply to ")
                .and(Setting::Engine)
                .then(" psync; drop one of them (e.g. ")
                .and(Setting::Engine)
                .then(" io_uring ")
                .and(Setting::FixedBufs)
                .then(")"),
        ));
    }
    Ok(settings)
}

fn check_ranges(choice: &TestChoice) -> Result<(), DiskError> {
    if let Some(t) = choice.time {
        if t.0 < *crate::TIME_RANGE.start() {
            return Err(invalid(
                Message::of(Setting::Time)
                    .then(format!(" {t} is too short to measure; use at least 100ms, e.g. "))
                    .and(Setting::Time)
                    .then(" 5s"),
            ));
        }
        if t.0 > *crate::TIME_RANGE.end() {
            return Err(invalid(
                Message::of(Setting::Time)
                    .then(format!(" {t} is too long: at most 24h per test, e.g. "))
                    .and(Setting::Time)
                    .then(" 5m"),
            ));
        }
    }
    if let Some(r) = choice.ramp.filter(|r| r.0 > crate::MAX_RAMP) {
        return Err(invalid(
            Message::of(Setting::Ramp)
                .then(format!(" {r} is too long: at most 1h of warm-up, e.g. "))
                .and(Setting::Ramp)
                .then(" 2s"),
        ));
    }
    if choice.bs.is_some_and(|b| b.0 == 0) {
        return Err(invalid(
            Message::of(Setting::BlockSize)
                .then(" 0 is not a block size; use e.g. ")
                .and(Setting::BlockSize)
                .then(" 4k or ")
                .and(Setting::BlockSize)
                .then(" 1M"),
        ));
    }
    if let Some(bs) = choice.bs.filter(|b| b.0 > *crate::BLOCK_SIZE_RANGE.end()) {
        return Err(invalid(
            Message::of(Setting::BlockSize)
                .then(format!(" {} is larger than the 64M headroom supports; use e.g. ", bs.0))
                .and(Setting::BlockSize)
                .then(" 1M"),
        ));
    }
    if choice.size.is_some_and(|s| s.0 == 0) {
        return Err(invalid(crate::bounds::zero_size()));
    }
    Ok(())
}

/// The preset asked for (quick when nothing custom is), refusing custom-test
/// flags a preset would ignore.
fn preset_of(choice: &TestChoice) -> Result<Option<Preset>, DiskError> {
    let custom = choice.rw.is_some() || choice.bs.is_some() || choice.qd.is_some() || choice.jobs.is_some();
    let preset = match (&choice.preset, custom) {
        (Some(p), _) => Some(Preset::parse(p).ok_or_else(|| {
            invalid(
                Message::of(Setting::Preset)
                    .then(format!(" '{p}' is not a preset (example: "))
                    .and(Setting::Preset)
                    .then(" cdm)"),
            )
        })?),
        (None, true) => None,
        (None, false) => Some(Preset::Quick),
    };
    if let Some(p) = preset {
        if p != Preset::Sustained {
            for (setting, given) in [
                (Setting::Rw, choice.rw.is_some()),
                (Setting::BlockSize, choice.bs.is_some()),
                (Setting::QueueDepth, choice.qd.is_some()),
                (Setting::Jobs, choice.jobs.is_some()),
            ] {
                if given {
                    return Err(invalid(
                        Message::of(setting)
                            .then(" defines a custom test and cannot be combined with ")
                            .and(Setting::Preset)
                            .then(format!(" {}; drop one of them (e.g. `headroom disk PATH ", p.as_str()))
                            .and(Setting::Rw)
                            .then(" randread ")
                            .and(Setting::BlockSize)
                            .then(" 4k ")
                            .and(Setting::QueueDepth)
                            .then(" 32`)"),
                    ));
                }
            }
        } else if choice.rw.as_deref().is_some_and(|rw| rw != "write") {
            return Err(invalid(
                Message::of(Setting::Rw)
                    .then(format!(" {} does not fit ", choice.rw.as_deref().unwrap_or("")))
                    .and(Setting::Preset)
                    .then(" sustained, which writes sequentially; drop ")
                    .and(Setting::Rw),
            ));
        }
    }
    Ok(preset)
}

/// The sustained preset with --bs, --qd and --size: a write of --size bytes
/// (capped by --time if given).
fn apply_sustained_overrides(choice: &TestChoice, tests: &mut [TestDef]) {
    for t in tests {
        if let Some(bs) = choice.bs {
            *t = test_def(Rw::Write, bs.0, choice.qd.unwrap_or(t.queue_depth), 1, t.time, t.ramp);
        } else if let Some(qd) = choice.qd {
            *t = test_def(Rw::Write, t.block_size, qd, 1, t.time, t.ramp);
        }
        if let Some(size) = choice.size {
            t.max_bytes = Some(size.0);
            // --size bounds the run; --time (if given) still caps it.
            t.time = choice.time.map_or(Duration::from_secs(3600), |d| d.0);
        }
    }
}

/// Resolves a preset or one custom test, with the user's overrides, into
/// the tests to run; every mistake is a one-line usage error naming the flag.
pub fn resolve(choice: &TestChoice) -> Result<TestSelection, DiskError> {
    let settings = settings_of(choice)?;
    let sync = choice.sync;
    check_ranges(choice)?;
    let preset = preset_of(choice)?;
    let rw = match choice.rw.as_deref() {
        Some(s) => Some(Rw::parse(s).ok_or_else(|| {
            invalid(
                Message::of(Setting::Rw)
                    .then(format!(" '{s}' is not an access pattern (example: "))
                    .and(Setting::Rw)
                    .then(" randread)"),
            )
        })?),
        None => None,
    };
    if choice.rwmix.is_some() && rw != Some(Rw::RandRw) {
        return Err(invalid(
            Message::of(Setting::RwMix)
                .then(" sets the read share of a mixed test and needs ")
                .and(Setting::Rw)
                .then(" randrw (e.g. ")
                .and(Setting::Rw)
                .then(" randrw ")
                .and(Setting::RwMix)
                .then(" 70)"),
        ));
    }
    let ramp_of = |p: Option<Preset>| {
        choice.ramp.map(|r| r.0).unwrap_or_else(|| p.map_or(Duration::from_secs(1), Preset::default_ramp))
    };
    let mut tests = match preset {
        Some(p) => {
            let time = choice.time.map_or(p.default_time(), |t| t.0);
            let mut tests = p.tests(time, ramp_of(preset));
            if p == Preset::Sustained {
                apply_sustained_overrides(choice, &mut tests);
            }
            tests
        }
        None => {
            let rw = rw.unwrap_or(Rw::RandRead);
            let bs = choice.bs.map_or(if rw.is_random() { 4096 } else { 1 << 20 }, |b| b.0);
            let time = choice.time.map_or(Duration::from_secs(5), |t| t.0);
            let mut t = test_def(rw, bs, choice.qd.unwrap_or(1), choice.jobs.unwrap_or(1), time, ramp_of(None));
            if rw == Rw::RandRw {
                t.rwmix_read = Some(choice.rwmix.unwrap_or(70));
            }
            vec![t]
        }
    };
    if let Some(i) = choice.sample_interval {
        if !crate::SAMPLE_INTERVAL_RANGE.contains(&i.0) {
            return Err(invalid(
                Message::of(Setting::SampleInterval)
                    .then(format!(" {i} is out of range: 100ms to 10s (example: "))
                    .and(Setting::SampleInterval)
                    .then(" 250ms)"),
            ));
        }
        tests.iter_mut().for_each(|t| t.sample_interval = i.0);
    } else {
        // Enough points to draw even a 2 s test (about 20), one a second for long ones.
        tests.iter_mut().for_each(|t| t.sample_interval = headroom_runner::sample_interval_for(t.time));
    }
    if sync != SyncMode::None {
        if preset == Some(Preset::Sync) {
            return Err(invalid(
                Message::of(Setting::Sync)
                    .then(format!(" {} cannot be combined with ", choice.sync.as_str()))
                    .and(Setting::Preset)
                    .then(" sync, which runs every sync mode"),
            ));
        }
        for t in tests.iter_mut().filter(|t| t.rw.writes()) {
            t.sync = sync;
        }
    }
    tests.iter().try_for_each(crate::check_test_def)?;
    Ok(TestSelection { preset, tests, settings })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_of_the_run_flags_parse_into_their_types_and_back() {
        assert_eq!("compressible=50".parse::<Pattern>(), Ok(Pattern::Compressible(50)));
        assert_eq!("compressible=50%".parse::<Pattern>(), Ok(Pattern::Compressible(50)));
        assert_eq!("zero".parse::<Pattern>(), Ok(Pattern::Zero));
        for bad in ["compressible=101", "compressible=", "zeros", ""] {
            let err = bad.parse::<Pattern>().unwrap_err();
            assert!(err.contains("use random, zero or compressible=PCT"), "{bad}: {err}");
        }
        for p in [Pattern::Random, Pattern::Zero, Pattern::Compressible(30)] {
            assert_eq!(p.to_string().parse::<Pattern>(), Ok(p), "round trip of {p}");
        }
        assert_eq!("dsync".parse::<SyncMode>(), Ok(SyncMode::Dsync));
        assert_eq!(SyncMode::Fsync.as_str().parse::<SyncMode>(), Ok(SyncMode::Fsync));
        assert_eq!(crate::os::ASYNC_ENGINE.parse::<EngineChoice>(), Ok(EngineChoice::IoUring));
        let other = if crate::os::ASYNC_ENGINE == "iocp" { "io_uring" } else { "iocp" };
        assert!(other.parse::<EngineChoice>().unwrap_err().contains("another system's engine"), "{other}");
        assert_eq!("off".parse::<DirectMode>(), Ok(DirectMode::Off));
        assert!("uring".parse::<EngineChoice>().is_err() && "yes".parse::<DirectMode>().is_err());
    }

    #[test]
    fn presets_have_the_tests_the_issue_names() {
        let s = Duration::from_secs(1);
        let names = |p: Preset| p.tests(s, s).into_iter().map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(
            names(Preset::Quick),
            [
                "SEQ1M Q8T1 read",
                "SEQ1M Q8T1 write",
                "RND4K Q32T1 read",
                "RND4K Q32T1 write",
                "RND4K Q1T1 read",
                "RND4K Q1T1 write"
            ]
        );
        assert_eq!(names(Preset::Cdm).len(), 8);
        assert!(names(Preset::Nvme).contains(&"RND4K Q32T16 read".to_string()));
        assert!(names(Preset::Nvme).contains(&"SEQ128K Q32T1 write".to_string()));
        assert_eq!(names(Preset::Sweep).len(), 7 * 3 * 2);
        assert_eq!(names(Preset::Sync).len(), 9);
        assert!(names(Preset::Sync).contains(&"RND64K Q1T1 write dsync".to_string()));
        // Ids are unique within every preset.
        for p in Preset::ALL {
            let mut ids: Vec<_> = p.tests(s, s).into_iter().map(|t| t.id).collect();
            let n = ids.len();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), n, "{p:?}");
        }
    }

    #[test]
    fn a_custom_test_and_a_preset_do_not_mix_and_sustained_takes_bs_and_size() {
        let err =
            resolve(&TestChoice { preset: Some("cdm".into()), qd: Some(4), ..TestChoice::default() }).unwrap_err();
        let DiskError::Invalid(m) = err else { panic!("{err}") };
        assert_eq!(m.settings().take(2).collect::<Vec<_>>(), [Setting::QueueDepth, Setting::Preset], "{m}");
        assert!(
            m.to_string().starts_with("queue depth defines a custom test and cannot be combined with preset cdm"),
            "{m}"
        );
        let sustained = resolve(&TestChoice {
            preset: Some("sustained".into()),
            bs: Some(Size(128 << 10)),
            size: Some(Size(1 << 30)),
            ..TestChoice::default()
        })
        .unwrap();
        let t = &sustained.tests[0];
        assert_eq!(
            (t.name.as_str(), t.max_bytes, t.time),
            ("SEQ128K Q8T1 write", Some(1 << 30), Duration::from_secs(3600))
        );
        let custom =
            resolve(&TestChoice { rw: Some("randrw".into()), sync: SyncMode::Dsync, ..TestChoice::default() }).unwrap();
        assert_eq!(custom.preset, None);
        assert_eq!((custom.tests[0].rwmix_read, custom.tests[0].sync), (Some(70), SyncMode::Dsync));
        assert_eq!(resolve(&TestChoice::default()).unwrap().preset, Some(Preset::Quick));
    }

    #[test]
    fn quick_runs_about_thirty_seconds() {
        let p = Preset::Quick;
        let total: Duration = p.tests(p.default_time(), p.default_ramp()).iter().map(|t| t.time + t.ramp).sum();
        assert!(total >= Duration::from_secs(20) && total <= Duration::from_secs(30), "{total:?}");
    }

    #[test]
    fn a_test_spec_names_the_test_users_compare_with() {
        let t = parse_test_spec("read:512k:q4", Duration::from_secs(2), Duration::ZERO).unwrap();
        assert_eq!((t.rw, t.block_size, t.queue_depth, t.jobs), (Rw::Read, 512 << 10, 4, 1));
        assert_eq!(t.id, "seq512k-q4t1-read");
        let t = parse_test_spec("randread:4k:q32:t4", Duration::from_secs(2), Duration::ZERO).unwrap();
        assert_eq!((t.queue_depth, t.jobs), (32, 4));
        for (bad, says) in [
            ("read", "no block size"),
            ("fast:4k", "'fast' is not read"),
            ("read:4x", "block size"),
            ("read:1:q4", "out of range"),
            ("read:4k:q0", "qN is 1-4096"),
            ("read:4k:x3", "neither qN"),
        ] {
            let e = parse_test_spec(bad, Duration::from_secs(1), Duration::ZERO).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("RW:BS"), "{bad}: {e}");
        }
    }
}
