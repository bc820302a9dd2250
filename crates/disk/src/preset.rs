//! The named test sets: quick, cdm, nvme, sizes, sweep, sync, sustained, and
//! the naming of tests (`SEQ1M Q8T1 read`, id `seq1m-q8t1-read`).

use crate::{DirectMode, Rw, SyncMode, TestDef};
use std::time::Duration;

/// A preset's name and what it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Quick,
    Cdm,
    Nvme,
    Sizes,
    Sweep,
    Sync,
    Sustained,
}

impl Preset {
    pub const ALL: [Preset; 7] =
        [Preset::Quick, Preset::Cdm, Preset::Nvme, Preset::Sizes, Preset::Sweep, Preset::Sync, Preset::Sustained];

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

/// "4K", "64K", "1M", "128K", "3000B".
pub fn size_label(bytes: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn quick_runs_about_thirty_seconds() {
        let p = Preset::Quick;
        let total: Duration = p.tests(p.default_time(), p.default_ramp()).iter().map(|t| t.time + t.ramp).sum();
        assert!(total >= Duration::from_secs(20) && total <= Duration::from_secs(30), "{total:?}");
    }
}
