//! The fio command line that runs the same test, recorded with every result so
//! anyone can cross-check what headroom ran.

use crate::{EngineKind, Pattern, Rw, SyncMode, TestDef};

/// A size the way fio reads it (k/m/g are powers of 1024).
pub fn fio_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The parts of a test fio needs beyond its definition.
#[derive(Debug, Clone, Copy)]
pub struct FioContext<'a> {
    /// The target fio opens (`--filename`).
    pub path: &'a str,
    /// Bytes fio tests (`--size`).
    pub size: u64,
    /// The engine to mirror (`--ioengine`).
    pub engine: EngineKind,
    /// Whether O_DIRECT is on (`--direct`).
    pub direct: bool,
    /// What written blocks contain (mapped to fio's buffer options).
    pub pattern: Pattern,
    /// io_uring with registered buffers.
    pub fixedbufs: bool,
    /// io_uring with IOSQE_ASYNC on every read and write.
    pub force_async: bool,
}

/// `fio --name=... --filename=... ...` for `def` as headroom runs it.
pub fn fio_command(def: &TestDef, ctx: FioContext<'_>) -> String {
    let mut args = vec![
        "fio".to_string(),
        format!("--name={}", def.id),
        format!("--filename={}", shell_quote(ctx.path)),
        format!("--rw={}", def.rw.as_str()),
        format!("--bs={}", fio_size(def.block_size)),
    ];
    // psync runs one I/O per thread: queue depth becomes jobs (capped as the runner caps it).
    let (numjobs, iodepth) = match ctx.engine {
        EngineKind::IoUring => (def.jobs, def.queue_depth),
        EngineKind::Psync => (crate::engine::psync_threads(def.jobs, def.queue_depth), 1),
    };
    args.push(format!("--ioengine={}", ctx.engine.as_str()));
    if ctx.engine == EngineKind::IoUring {
        if ctx.fixedbufs {
            args.push("--fixedbufs=1".into());
        }
        args.push("--registerfiles=1".into());
        if ctx.force_async {
            args.push("--force_async=1".into());
        }
    }
    args.push(format!("--iodepth={iodepth}"));
    args.push(format!("--numjobs={numjobs}"));
    if !def.rw.is_random() && numjobs > 1 {
        let per = ctx.size / u64::from(numjobs) / def.block_size * def.block_size;
        args.push(format!("--size={}", fio_size(per)));
        args.push(format!("--offset_increment={}", fio_size(per)));
    } else {
        args.push(format!("--size={}", fio_size(ctx.size)));
    }
    args.push(format!("--direct={}", u8::from(ctx.direct)));
    if let Some(mix) = def.rwmix_read.filter(|_| def.rw == Rw::RandRw) {
        args.push(format!("--rwmixread={mix}"));
    }
    match def.sync {
        SyncMode::None => {}
        SyncMode::Fsync => args.push("--fsync=1".into()),
        SyncMode::Dsync => args.push("--sync=dsync".into()),
    }
    if def.rw.is_random() {
        args.push("--norandommap".into());
        args.push("--randrepeat=0".into());
    }
    match ctx.pattern {
        Pattern::Random => args.push("--refill_buffers".into()),
        Pattern::Zero => args.push("--zero_buffers".into()),
        Pattern::Compressible(p) => {
            args.push("--refill_buffers".into());
            args.push(format!("--buffer_compress_percentage={p}"));
        }
    }
    if let Some(max) = def.max_bytes {
        args.push(format!("--io_size={}", fio_size(max)));
    } else {
        args.push("--time_based".into());
        args.push(format!("--runtime={}ms", def.time.as_millis()));
    }
    if !def.ramp.is_zero() {
        args.push(format!("--ramp_time={}ms", def.ramp.as_millis()));
    }
    args.push("--group_reporting".into());
    args.join(" ")
}

fn shell_quote(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_cdm_test_becomes_the_fio_line_users_expect() {
        let def = crate::preset::test_def(Rw::RandRead, 4096, 32, 1, Duration::from_secs(5), Duration::from_secs(1));
        let line = fio_command(
            &def,
            FioContext {
                path: "/mnt/my disk/f",
                size: 1 << 30,
                engine: EngineKind::IoUring,
                direct: true,
                pattern: Pattern::Random,
                fixedbufs: false,
                force_async: false,
            },
        );
        for part in [
            "--rw=randread",
            "--bs=4k",
            "--iodepth=32",
            "--numjobs=1",
            "--size=1g",
            "--direct=1",
            "--ioengine=io_uring",
            "--runtime=5000ms",
            "--ramp_time=1000ms",
            "'/mnt/my disk/f'",
        ] {
            assert!(line.contains(part), "{part} missing from {line}");
        }
        // Ordinary buffers and inline issue are fio's defaults: nothing to say.
        assert!(!line.contains("fixedbufs") && !line.contains("force_async"), "{line}");
    }

    #[test]
    fn registered_buffers_and_async_issue_are_recorded() {
        let def = crate::preset::test_def(Rw::Read, 1 << 20, 8, 1, Duration::from_secs(5), Duration::from_secs(1));
        let ctx = |fixedbufs, force_async| FioContext {
            path: "/dev/loop0",
            size: 1 << 30,
            engine: EngineKind::IoUring,
            direct: true,
            pattern: Pattern::Random,
            fixedbufs,
            force_async,
        };
        let both = fio_command(&def, ctx(true, true));
        assert!(both.contains("--fixedbufs=1") && both.contains("--force_async=1"), "{both}");
        let plain_async = fio_command(&def, ctx(false, true));
        assert!(!plain_async.contains("fixedbufs") && plain_async.contains("--force_async=1"), "{plain_async}");
    }

    #[test]
    fn psync_turns_queue_depth_into_jobs() {
        let mut def = crate::preset::test_def(Rw::Read, 1 << 20, 8, 1, Duration::from_secs(1), Duration::ZERO);
        def.sync = SyncMode::Fsync;
        let line = fio_command(
            &def,
            FioContext {
                path: "/f",
                size: 1 << 30,
                engine: EngineKind::Psync,
                direct: false,
                pattern: Pattern::Zero,
                fixedbufs: false,
                force_async: false,
            },
        );
        assert!(line.contains("--numjobs=8") && line.contains("--iodepth=1"), "{line}");
        assert!(line.contains("--offset_increment=128m") && line.contains("--fsync=1"), "{line}");
        assert!(line.contains("--zero_buffers") && !line.contains("ramp_time"), "{line}");
    }

    #[test]
    fn psync_jobs_follow_the_runners_thread_cap() {
        let def = crate::preset::test_def(Rw::RandRead, 4096, 32, 16, Duration::from_secs(1), Duration::ZERO);
        let ctx = FioContext {
            path: "/f",
            size: 1 << 30,
            engine: EngineKind::Psync,
            direct: true,
            pattern: Pattern::Random,
            fixedbufs: false,
            force_async: false,
        };
        let line = fio_command(&def, ctx);
        assert!(line.contains("--numjobs=128") && line.contains("--iodepth=1"), "{line}");
        assert_eq!(crate::engine::psync_threads(1, 8), 8);
        assert_eq!(crate::engine::psync_threads(200, 4), 200, "never fewer threads than jobs");
    }
}
