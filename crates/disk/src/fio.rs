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
    /// The protocol of a share (`path` is then its URL).
    pub protocol: Option<&'a str>,
}

/// fio's engine for a protocol and how it names the target, e.g.
/// `--ioengine=nbd --uri=nbd://nas`; None where fio has no such engine (SMB).
fn fio_share_args(protocol: &str, url: &str) -> Option<[String; 2]> {
    let quoted = shell_quote(url);
    match protocol {
        "nbd" => Some(["--ioengine=nbd".into(), format!("--uri={quoted}")]),
        "nfs" => Some(["--ioengine=nfs".into(), format!("--nfs_url={quoted}")]),
        // fio's libiscsi engine takes the URL as a filename, colons escaped.
        "iscsi" => {
            Some(["--ioengine=libiscsi".into(), format!("--filename={}", shell_quote(&url.replace(':', "\\:")))])
        }
        _ => None,
    }
}

/// `fio --name=... --filename=... ...` for `def` as headroom runs it; None
/// when fio cannot run it (a protocol fio has no engine for).
pub fn fio_command(def: &TestDef, ctx: FioContext<'_>) -> Option<String> {
    let mut args = vec!["fio".to_string(), format!("--name={}", def.id)];
    match ctx.protocol {
        Some(protocol) => args.extend(fio_share_args(protocol, ctx.path)?),
        None => {
            args.push(format!("--filename={}", shell_quote(ctx.path)));
            let engine =
                if ctx.engine == EngineKind::IoUring { crate::os::FIO_ASYNC_ENGINE } else { ctx.engine.as_str() };
            args.push(format!("--ioengine={engine}"));
        }
    }
    args.push(format!("--rw={}", def.rw.as_str()));
    args.push(format!("--bs={}", fio_size(def.block_size)));
    // psync runs one I/O per thread: queue depth becomes jobs (capped as the runner caps it).
    let (numjobs, iodepth) = match ctx.engine {
        EngineKind::Psync => (crate::engine::psync_threads(def.jobs, def.queue_depth), 1),
        EngineKind::IoUring | EngineKind::Share => (def.jobs, def.queue_depth),
    };
    // io_uring's own options; Windows' windowsaio has none of them.
    if ctx.engine == EngineKind::IoUring && crate::os::FIO_ASYNC_ENGINE == "io_uring" {
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
    Some(args.join(" "))
}

/// A fio job file running `commands` (fio command lines as
/// [`fio_command`] writes them) one after another: each becomes a job
/// section, its `--key=value` options `key=value` lines, with `stonewall` so
/// fio runs the jobs in turn as headroom did (fio starts all jobs of a file
/// at once otherwise). `None` entries (a protocol fio has no engine for)
/// become a comment naming the test.
pub fn fio_job_file(commands: &[(&str, Option<&str>)]) -> Result<String, String> {
    let mut text = String::from(
        "; The fio jobs equivalent to a headroom disk run, one after another (stonewall).\n; Run: fio THIS_FILE\n",
    );
    for (test, command) in commands {
        let Some(command) = command else {
            text += &format!("\n; {test}: fio has no engine for this protocol\n");
            continue;
        };
        let words = shlex::split(command).ok_or_else(|| format!("cannot read the fio command of {test}: {command}"))?;
        let mut section = String::new();
        let mut options = Vec::new();
        for word in words.iter().skip(1) {
            let option = word.strip_prefix("--").ok_or_else(|| format!("{test}: '{word}' is not a fio option"))?;
            match option.split_once('=') {
                Some(("name", name)) => section = name.to_string(),
                _ => options.push(option.to_string()),
            }
        }
        text += &format!("\n[{section}]\nstonewall\n");
        for option in options {
            text += &option;
            text.push('\n');
        }
    }
    Ok(text)
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
                protocol: None,
            },
        )
        .unwrap();
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
            protocol: None,
        };
        let both = fio_command(&def, ctx(true, true)).unwrap();
        assert!(both.contains("--fixedbufs=1") && both.contains("--force_async=1"), "{both}");
        let plain_async = fio_command(&def, ctx(false, true)).unwrap();
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
                protocol: None,
            },
        )
        .unwrap();
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
            protocol: None,
        };
        let line = fio_command(&def, ctx).unwrap();
        assert!(line.contains("--numjobs=128") && line.contains("--iodepth=1"), "{line}");
        assert_eq!(crate::engine::psync_threads(1, 8), 8);
        assert_eq!(crate::engine::psync_threads(200, 4), 200, "never fewer threads than jobs");
    }

    #[test]
    fn a_job_file_runs_each_test_in_turn_with_the_same_options() {
        let def = crate::preset::test_def(Rw::RandRead, 4096, 32, 1, Duration::from_secs(5), Duration::from_secs(1));
        let ctx = FioContext {
            path: "/mnt/my disk/headroom-disk-7.tmp",
            size: 1 << 30,
            engine: EngineKind::IoUring,
            direct: true,
            pattern: Pattern::Random,
            fixedbufs: false,
            force_async: false,
            protocol: None,
        };
        let line = fio_command(&def, ctx).unwrap();
        let job = fio_job_file(&[("RND4K Q32T1 read", Some(&line)), ("SEQ1M smb", None)]).unwrap();
        assert!(job.contains("\n[rnd4k-q32t1-read]\nstonewall\nfilename=/mnt/my disk/headroom-disk-7.tmp\n"), "{job}");
        assert!(job.contains("\niodepth=32\n") && job.contains("\nnorandommap\n"), "{job}");
        assert!(job.contains("; SEQ1M smb: fio has no engine"), "{job}");
        assert!(fio_job_file(&[("x", Some("fio 'unclosed"))]).is_err());
    }

    #[test]
    fn shares_name_fios_protocol_engine_or_none() {
        let def = crate::preset::test_def(Rw::Read, 1 << 20, 8, 1, Duration::from_secs(1), Duration::ZERO);
        let ctx = |path, protocol| FioContext {
            path,
            size: 1 << 30,
            engine: EngineKind::Share,
            direct: true,
            pattern: Pattern::Random,
            fixedbufs: false,
            force_async: false,
            protocol: Some(protocol),
        };
        let nbd = fio_command(&def, ctx("nbd://nas:10809/disk", "nbd")).unwrap();
        assert!(nbd.contains("--ioengine=nbd --uri=nbd://nas:10809/disk") && nbd.contains("--iodepth=8"), "{nbd}");
        assert!(!nbd.contains("--filename"), "{nbd}");
        let iscsi = fio_command(&def, ctx("iscsi://nas:3260/iqn.2026-11.lab:disk/1", "iscsi")).unwrap();
        assert!(iscsi.contains(r"--filename='iscsi\://nas\:3260/iqn.2026-11.lab\:disk/1'"), "{iscsi}");
        assert!(fio_command(&def, ctx("smb://nas/share", "smb")).is_none(), "fio has no SMB engine");
    }
}
