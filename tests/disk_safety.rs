//! Data safety of `headroom disk` and `soak` (issue 12), each case reproducing
//! what went wrong before:
//! - a test file swapped for a symlink mid-run must not redirect a single write;
//! - LUKS1/2 headers, md RAID superblocks (0.90 to 1.2) and the other
//!   signatures libblkid knows are refused without `--force`;
//! - a mounted or exclusively held device is refused even with `--force`;
//! - two quick Ctrl-Cs still remove the test file, and Ctrl-C exits 130.
//!
//! Device cases need root (loop devices) and skip with a reason otherwise;
//! the signature cases also run on image files without root.

use headroom_lab::blockdev::{luks_format, write_md_superblock, LoopDevice, Mount, MD_METADATA};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
mod support;
use support::{blkid_type, disk_leftovers as leftovers, headroom_process as headroom, stderr};

fn disk(args: &[&str]) -> Output {
    headroom().arg("disk").args(args).output().expect("run headroom")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

const WRITE: &[&str] = &["--rw", "randwrite", "--time", "300ms", "--ramp", "0s", "--size", "8M"];

fn write_to(target: &Path, extra: &[&str]) -> Output {
    let t = target.to_string_lossy().to_string();
    let mut args = vec![t.as_str()];
    args.extend_from_slice(WRITE);
    args.extend_from_slice(extra);
    disk(&args)
}

#[test]
fn a_test_file_swapped_for_a_symlink_never_redirects_a_write() {
    // The attacker owns a world-writable directory the user benchmarks; the
    // victim is any file the user (often root) can write.
    let dir = tempdir();
    let victims = tempdir();
    let victim = victims.path().join("victim.img");
    let original = vec![0x5au8; 1 << 20];
    std::fs::write(&victim, &original).unwrap();

    let mut child = headroom()
        .args(["disk", dir.path().to_str().unwrap()])
        .args(["--rw", "randwrite", "--size", "16M", "--time", "1s", "--ramp", "0s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let name = dir.path().join(format!("headroom-disk-{}.tmp", child.id()));
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, victim) = (stop.clone(), victim.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u32;
            while !stop.load(Ordering::Relaxed) {
                // Swap the file for a symlink as soon as headroom has created it.
                if std::fs::symlink_metadata(&name).is_ok_and(|m| m.file_type().is_file())
                    && std::fs::remove_file(&name).is_ok()
                    && std::os::unix::fs::symlink(&victim, &name).is_ok()
                {
                    swaps += 1;
                }
                std::thread::yield_now();
            }
            swaps
        })
    };
    let status = child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    let mut err = String::new();
    use std::io::Read;
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(swaps > 0, "the race never ran: headroom's test file was never seen ({err})");
    let now = std::fs::read(&victim).unwrap();
    assert!(now == original, "the victim file was written through the swapped-in symlink ({} bytes now)", now.len());
    // headroom kept measuring its own (now unlinked) file.
    assert!(status.success(), "headroom failed: {err}");
}

/// (how to make it, the TYPE libblkid gives it)
fn signature_cases() -> Vec<(&'static str, &'static str)> {
    let mut cases = vec![("luks1", "crypto_LUKS"), ("luks2", "crypto_LUKS")];
    cases.extend(MD_METADATA.iter().map(|m| (*m, "linux_raid_member")));
    cases.extend([("swap", "swap"), ("ext4", "ext4"), ("gpt", "gpt")]);
    cases
}

fn make_signature(target: &Path, how: &str) {
    let t = target.to_string_lossy().to_string();
    match how {
        "luks1" => luks_format(target, 1).unwrap(),
        "luks2" => luks_format(target, 2).unwrap(),
        "swap" => drop(headroom_lab::sh("mkswap", &[&t]).unwrap()),
        "ext4" => drop(headroom_lab::sh("mkfs.ext4", &["-q", "-F", &t]).unwrap()),
        "gpt" => {
            let mut c =
                Command::new("sfdisk").args(["-q", "--label", "gpt", &t]).stdin(Stdio::piped()).spawn().unwrap();
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b",,L\n").unwrap();
            assert!(c.wait().unwrap().success());
        }
        md => write_md_superblock(target, md).unwrap(),
    }
}

fn blkid_names(ty: &str, target: &Path) -> String {
    // blkid prints a partition table's type under PTTYPE.
    if ty == "gpt" {
        let o = Command::new("blkid").args(["-p", "-o", "value", "-s", "PTTYPE"]).arg(target).output().unwrap();
        return String::from_utf8_lossy(&o.stdout).trim().to_string();
    }
    blkid_type(target)
}

fn assert_refused_and_intact(target: &Path, how: &str, ty: &str) {
    assert_eq!(blkid_names(ty, target), ty, "{how}: the lab did not make a {ty} signature");
    let o = write_to(target, &["--destructive"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{how}: --destructive alone was not refused: {err}");
    assert!(err.contains(ty) && err.contains("--force"), "{how}: the refusal names neither {ty} nor --force: {err}");
    assert_eq!(blkid_names(ty, target), ty, "{how}: the {ty} signature was damaged");
}

#[test]
fn luks_md_and_other_signatures_in_image_files_need_force() {
    for program in ["cryptsetup", "blkid", "mkswap", "mkfs.ext4", "sfdisk"] {
        headroom_lab::require_program!(program);
    }
    let dir = tempdir();
    for (how, ty) in signature_cases() {
        let img = dir.path().join(format!("{how}.img"));
        std::fs::File::create(&img).unwrap().set_len(64 << 20).unwrap();
        make_signature(&img, how);
        assert_refused_and_intact(&img, how, ty);
    }
    // --force is the user's word that the data may go: then it is written.
    // Sequential from offset 0, so the header is written whatever the I/O count
    // (random 4K writes over 8M may miss its first blocks on a slow run).
    let img = dir.path().join("luks2.img");
    let t = img.to_string_lossy().to_string();
    let o = disk(&[
        &t,
        "--rw",
        "write",
        "--bs",
        "1M",
        "--time",
        "1s",
        "--ramp",
        "0s",
        "--size",
        "8M",
        "--destructive",
        "--force",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(blkid_type(&img), "crypto_LUKS", "--force wrote nothing over the LUKS header");
}

#[test]
fn luks_and_md_members_on_block_devices_need_force() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("cryptsetup");
    for (how, ty) in signature_cases() {
        let dev = LoopDevice::new(64 << 20).unwrap();
        make_signature(&dev.path, how);
        assert_refused_and_intact(&dev.path, how, ty);
    }
}

#[test]
fn a_mounted_filesystem_is_refused_even_with_force() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("e2fsck");
    let dev = LoopDevice::new(64 << 20).unwrap();
    dev.mkfs("ext4").unwrap();
    let mount = Mount::device(&dev.path, "ext4").unwrap();
    std::fs::write(mount.path().join("precious"), b"keep me").unwrap();
    let o = write_to(&dev.path, &["--destructive", "--force"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "a mounted device was written: {err}");
    assert!(err.contains("mounted on") && err.contains(&mount.path().display().to_string()), "{err}");
    // Reading a mounted device harms nothing and stays allowed.
    let p = dev.path.to_string_lossy().to_string();
    let r = disk(&[&p, "--rw", "randread", "--time", "200ms", "--ramp", "0s", "--size", "8M"]);
    assert!(r.status.success(), "{}", stderr(&r));
    drop(mount);
    // umount -l is lazy: wait until the kernel lets go before checking.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(&dev.path).is_err() {
        assert!(Instant::now() < deadline, "the lab mount never went away");
        std::thread::sleep(Duration::from_millis(50));
    }
    let fsck = Command::new("e2fsck").args(["-f", "-n"]).arg(&dev.path).output().unwrap();
    assert!(fsck.status.success(), "the filesystem was damaged: {}", String::from_utf8_lossy(&fsck.stdout));
}

#[test]
fn a_device_held_exclusively_is_refused_even_with_force() {
    headroom_lab::require_root!();
    let dev = LoopDevice::new(32 << 20).unwrap();
    // What md, dm (LUKS, LVM) and swap do to their members: an exclusive open.
    let held = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(&dev.path).unwrap();
    let o = write_to(&dev.path, &["--destructive", "--force"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "a device held open exclusively was written: {err}");
    assert!(err.contains("in use"), "{err}");
    drop(held);
    let o = write_to(&dev.path, &["--destructive"]);
    assert!(o.status.success(), "once released, a blank device is written: {}", stderr(&o));
}

fn sigint(child: &Child) {
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
}

/// Waits for `child`, at most `limit`; kills it (and fails) after that.
fn wait_at_most(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("headroom did not exit within {limit:?} of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `headroom ARGS`, waits until its test file in `dir` holds data,
/// sends two SIGINTs 2 ms apart (a user hammering Ctrl-C), and checks that it
/// exits 130 with no test file left.
fn double_ctrl_c(dir: &Path, args: &[&str]) {
    let mut child = headroom().args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let file: PathBuf = dir.join(format!("headroom-disk-{}.tmp", child.id()));
    let start = Instant::now();
    while std::fs::metadata(&file).map_or(true, |m| m.len() < (8 << 20)) {
        assert!(start.elapsed() < Duration::from_secs(30), "{}: the test file never grew", args[0]);
        assert!(child.try_wait().unwrap().is_none(), "{}: headroom exited early", args[0]);
        std::thread::sleep(Duration::from_millis(5));
    }
    sigint(&child);
    std::thread::sleep(Duration::from_millis(2));
    sigint(&child);
    let status = wait_at_most(&mut child, Duration::from_secs(10));
    assert!(leftovers(dir).is_empty(), "{}: test file left after two Ctrl-Cs: {:?}", args[0], leftovers(dir));
    assert_eq!(status.code(), Some(130), "{}: exit code after Ctrl-C", args[0]);
}

#[test]
fn two_quick_ctrl_cs_still_remove_the_test_file() {
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    for _ in 0..3 {
        double_ctrl_c(dir.path(), &["disk", d, "--rw", "randread", "--size", "256M", "--time", "60s"]);
    }
    let db = dir.path().join("soak.sqlite");
    let db = db.to_str().unwrap();
    for _ in 0..3 {
        double_ctrl_c(
            dir.path(),
            &["soak", "--path", d, "--cycle", "read", "--size", "128M", "--duration", "60s", "--db", db],
        );
        let _ = std::fs::remove_file(db);
    }
}

#[test]
fn one_ctrl_c_prints_what_was_measured_and_exits_130() {
    let dir = tempdir();
    let mut child = headroom()
        .args(["disk", dir.path().to_str().unwrap(), "--rw", "randread", "--size", "16M", "--time", "60s"])
        .args(["--ramp", "0s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let file = dir.path().join(format!("headroom-disk-{}.tmp", child.id()));
    let start = Instant::now();
    while std::fs::metadata(&file).map_or(true, |m| m.len() < (16 << 20)) {
        assert!(start.elapsed() < Duration::from_secs(30), "the test file was never laid out");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1200));
    sigint(&child);
    let status = wait_at_most(&mut child, Duration::from_secs(10));
    let mut out = String::new();
    use std::io::Read;
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(out.contains("RND4K Q1T1 read"), "what was measured is printed: {out}");
    assert!(leftovers(dir.path()).is_empty());
}
