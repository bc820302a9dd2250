//! `headroom flushcheck` in the lab: a writer on an ext4 filesystem of a loop
//! device reports to a `headroom serve --flushcheck-dir` on loopback; the
//! test kills the writer with SIGKILL, then emulates the power cut by
//! shutting the filesystem down without flushing anything
//! (`EXT4_IOC_SHUTDOWN`, NOLOGFLUSH: what the page cache held and no one
//! synced is thrown away, as at a power cut), mounts it again and runs
//! `flushcheck verify`.
//!
//! - fsync: every acknowledged block survives (exit 0), also after the
//!   listener itself was killed and started again;
//! - a layer that acknowledges flushes without persisting (eatmydata turns
//!   fsync into a no-op): verify reads the blocks back, finds the lost ones
//!   and exits 1;
//! - `--sync none`: blocks are lost, and verify says that was expected (exit 0).
//!
//! What it cannot emulate: a disk's own volatile write cache. Below the
//! loop device is the host's page cache, which the test never loses.
//! Needs root, mkfs.ext4 and eatmydata; skips with a reason otherwise.
//!
//! Long (about 860 lines): 15 lab tests sharing one served loop device and
//! its helpers; split, each file would rebuild the same lab.

use headroom_lab::blockdev::{LoopDevice, Mount};
use headroom_lab::sh;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
mod support;
use support::{headroom_bin, stderr};

/// A `headroom serve --flushcheck-dir` on loopback, killed on drop.
struct Listener {
    child: Child,
    port: u16,
    token: String,
    _banner: std::io::BufReader<std::process::ChildStderr>,
}

impl Listener {
    /// On a port the kernel picks (read from the banner): never another test's server.
    fn start(dir: &Path) -> Listener {
        Listener::spawn(Some(dir))
    }

    /// A serve with `--flushcheck-dir dir`, or without one.
    fn spawn(dir: Option<&Path>) -> Listener {
        Listener::spawn_with(Command::new(headroom_bin()), dir)
    }

    /// `serve` started by `command` (headroom itself, or `ip netns exec NS headroom`).
    fn spawn_with(mut command: Command, dir: Option<&Path>) -> Listener {
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = format!("flushcheck-lab-{}-{n}", std::process::id());
        let mut child = command
            .args(["serve", "--port", "0", "--token", &token])
            .args(dir.iter().flat_map(|d| [Path::new("--flushcheck-dir"), d]))
            .env_remove("HEADROOM_TOKEN")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let mut banner = String::new();
        let mut err = std::io::BufReader::new(child.stderr.take().expect("piped"));
        std::io::BufRead::read_line(&mut err, &mut banner).unwrap();
        let port = banner
            .split_once("listening on 127.0.0.1:")
            .and_then(|(_, rest)| rest.split_once(' '))
            .and_then(|(port, _)| port.parse().ok())
            .unwrap_or_else(|| panic!("no port in serve's banner: {banner}"));
        Listener { child, port, token, _banner: err }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An ext4 filesystem on a loop device of its own, and the listener's directory.
struct Scene {
    dev: LoopDevice,
    mount: Option<Mount>,
    ledger_dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dev = LoopDevice::new(64 << 20).expect("loop device");
        dev.mkfs("ext4").expect("mkfs.ext4");
        let mount = Mount::device(&dev.path, "ext4").expect("mount");
        Scene { dev, mount: Some(mount), ledger_dir: tempfile::tempdir().unwrap() }
    }

    fn file(&self) -> PathBuf {
        self.mount.as_ref().expect("mounted").path().join("fc.bin")
    }

    /// Acknowledged blocks the listener has recorded so far.
    fn recorded(&self) -> i64 {
        let db = self.ledger_dir.path().join("flushcheck.sqlite");
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM acks", [], |r| r.get(0)))
            .unwrap_or(0)
    }

    fn wait_recorded(&self, n: i64, writer: &mut Child) {
        let t0 = Instant::now();
        while self.recorded() < n {
            if let Some(status) = writer.try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(writer.stderr.as_mut().expect("piped"), &mut err);
                panic!("the writer ended early ({status}): {err}");
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "only {} blocks recorded in 60 s", self.recorded());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The power cut: the filesystem is shut down without flushing its log
    /// or its dirty pages, unmounted and mounted again (the journal replays).
    fn power_cut(&mut self) {
        let mount = self.mount.take().expect("mounted");
        {
            let dir = std::fs::File::open(mount.path()).unwrap();
            // EXT4_IOC_SHUTDOWN = _IOR('X', 125, __u32); 2 = EXT4_GOING_FLAGS_NOLOGFLUSH.
            let flags: u32 = 2;
            let rc = unsafe { libc::ioctl(dir.as_raw_fd(), 0x8004_587D, &flags) };
            assert_eq!(rc, 0, "EXT4_IOC_SHUTDOWN: {}", std::io::Error::last_os_error());
        }
        mount.unmount().expect("umount after the shutdown");
        self.mount = Some(Mount::device(&self.dev.path, "ext4").expect("mount again"));
    }
}

fn writer(scene: &Scene, l: &Listener, sync: &str, lying: bool) -> Child {
    let mut c = if lying {
        let mut c = Command::new("eatmydata");
        c.arg(headroom_bin());
        c
    } else {
        Command::new(headroom_bin())
    };
    c.args(["flushcheck", "write"])
        .arg(scene.file())
        .args(["--to", &l.addr(), "--token", &l.token, "--size", "8M", "--block", "4K", "--sync", sync])
        .env_remove("HEADROOM_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the writer")
}

fn kill(mut w: Child) {
    w.kill().unwrap(); // SIGKILL
    w.wait().unwrap();
}

fn verify(scene: &Scene, l: &Listener) -> (Output, serde_json::Value) {
    let out = Command::new(headroom_bin())
        .args(["flushcheck", "verify"])
        .arg(scene.file())
        .args(["--from", &l.addr(), "--token", &l.token, "--json"])
        .env_remove("HEADROOM_TOKEN")
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify printed no document ({e}); stderr: {}", stderr(&out)));
    (out, doc)
}

fn text_verify(scene: &Scene, l: &Listener) -> String {
    let out = Command::new(headroom_bin())
        .args(["flushcheck", "verify"])
        .arg(scene.file())
        .args(["--from", &l.addr(), "--token", &l.token])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn fsync_keeps_every_acknowledged_block_through_a_kill_a_power_cut_and_a_listener_restart() {
    durable_writes_survive("fsync");
}

#[test]
fn o_dsync_keeps_every_acknowledged_block_through_a_kill_a_power_cut_and_a_listener_restart() {
    durable_writes_survive("dsync");
}

fn durable_writes_survive(sync: &str) {
    headroom_lab::require_root!();
    headroom_lab::require_program!("mkfs.ext4");
    let mut scene = Scene::new();
    let mut listener = Listener::start(scene.ledger_dir.path());
    let mut w = writer(&scene, &listener, sync, false);
    scene.wait_recorded(300, &mut w);
    kill(w);
    scene.power_cut();
    // The listener dies too and comes back: its list was on its disk.
    drop(listener);
    listener = Listener::start(scene.ledger_dir.path());
    let (out, doc) = verify(&scene, &listener);
    assert_eq!(out.status.code(), Some(0), "{doc:#}\n{}", stderr(&out));
    let acked = doc["acknowledged"].as_u64().unwrap();
    assert!(acked >= 300, "{doc:#}");
    assert_eq!(acked as i64, scene.recorded());
    assert_eq!(doc["intact"].as_u64(), Some(acked), "{doc:#}");
    assert_eq!((doc["lost"].as_u64(), doc["torn"].as_u64()), (Some(0), Some(0)), "{doc:#}");
    assert_eq!(doc["direct"], true);
    assert!(text_verify(&scene, &listener).contains("ok: every acknowledged write survived"));
}

#[test]
fn storage_that_acknowledges_flushes_without_persisting_is_caught() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("mkfs.ext4");
    headroom_lab::require_program!("eatmydata");
    let mut scene = Scene::new();
    let listener = Listener::start(scene.ledger_dir.path());
    let mut w = writer(&scene, &listener, "fsync", true);
    // eatmydata swallows the writer's own syncs too: make the laid-out file
    // durable from outside once the first block is recorded, so the cut
    // loses the blocks written since, not the whole file.
    scene.wait_recorded(1, &mut w);
    let before = scene.recorded();
    sh("sync", &["-f", &scene.file().to_string_lossy()]).unwrap();
    let synced = scene.recorded();
    scene.wait_recorded(synced + 300, &mut w);
    kill(w);
    scene.power_cut();
    let (out, doc) = verify(&scene, &listener);
    assert_eq!(out.status.code(), Some(1), "the lie must fail verify: {doc:#}\n{}", stderr(&out));
    let acked = doc["acknowledged"].as_u64().unwrap();
    let findings = doc["findings"].as_array().unwrap();
    assert_eq!(findings.len() as u64, doc["lost"].as_u64().unwrap() + doc["torn"].as_u64().unwrap());
    // What stands there is the layout's filler: the writes never reached the disk.
    assert!(findings.iter().all(|f| f["finding"] == "missing"), "{findings:?}");
    let lost: Vec<u64> = findings.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    // Blocks recorded before the outside sync began were written before it: kept.
    assert!(lost.iter().all(|&s| s as i64 > before), "blocks synced from outside were reported lost: {lost:?}");
    // The writer writes block k+1 only once k is recorded, so every block from
    // synced + 2 on was written after the sync returned, only into the page
    // cache; the kernel writes such pages back after 30 s
    // (vm.dirty_expire_centisecs), or earlier when the whole machine's dirty
    // memory passes its background threshold, which other work may cause: at
    // least some of them must be lost.
    let only_cached = (synced as u64 + 2)..=acked;
    assert!(lost.iter().any(|s| only_cached.contains(s)), "none of {only_cached:?} was lost: {lost:?}");
    let text = text_verify(&scene, &listener);
    assert!(text.contains("FAIL: the storage acknowledged") && text.contains("lost: the write never reached the disk"));
}

#[test]
fn writes_without_sync_are_lost_and_verify_says_that_was_expected() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("mkfs.ext4");
    let mut scene = Scene::new();
    let listener = Listener::start(scene.ledger_dir.path());
    let mut w = writer(&scene, &listener, "none", false);
    scene.wait_recorded(300, &mut w);
    kill(w);
    scene.power_cut();
    let (out, doc) = verify(&scene, &listener);
    assert_eq!(out.status.code(), Some(0), "{doc:#}\n{}", stderr(&out));
    assert_eq!(doc["durable"], false);
    // Unsynced pages stay in the page cache for 30 s (vm.dirty_expire_centisecs)
    // unless the machine's dirty memory passes its background threshold.
    assert!(doc["lost"].as_u64().unwrap() > 0, "{doc:#}");
    assert!(text_verify(&scene, &listener).contains("as expected: with --sync none"));
}

#[test]
fn an_existing_file_that_is_not_a_flushcheck_file_is_never_touched() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("precious.db");
    std::fs::write(&precious, b"someone's data").unwrap();
    let out = Command::new(headroom_bin())
        .args(["flushcheck", "write"])
        .arg(&precious)
        .args(["--to", "127.0.0.1:9", "--size", "1M"])
        .env_remove("HEADROOM_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("not a flushcheck file") && err.lines().count() == 1, "{err}");
    assert_eq!(std::fs::read(&precious).unwrap(), b"someone's data");
}

#[test]
fn bad_flags_and_a_listener_without_flushcheck_dir_are_one_line_errors_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fc.bin");
    let run = |extra: &[&str], to: &str| {
        Command::new(headroom_bin())
            .args(["flushcheck", "write"])
            .arg(&file)
            .args(["--to", to])
            .args(extra)
            .env_remove("HEADROOM_TOKEN")
            .output()
            .unwrap()
    };
    for (extra, says) in [
        (&["--block", "3K"][..], "--block"),
        (&["--block", "2M"], "--block"),
        (&["--size", "4K"], "--size"),
        (&["--size", "1P"], "--block"),
        (&["--duration", "0s"], "--duration"),
    ] {
        let out = run(extra, "127.0.0.1:9");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says) && err.contains("example") && err.lines().count() == 1, "{extra:?}: {err}");
    }
    // A serve without --flushcheck-dir refuses, saying how to start it; nothing was written.
    let ledgerless = tempfile::tempdir().unwrap();
    let l = Listener::start(ledgerless.path());
    let no_ledger = Listener::spawn(None);
    let out = run(&["--size", "1M", "--token", &no_ledger.token], &no_ledger.addr());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--flushcheck-dir") && err.lines().count() == 1, "{err}");
    assert!(!file.exists(), "a refused run left its file");
    // verify of a file that is not a flushcheck file: exit 2, one line.
    std::fs::write(&file, b"plain").unwrap();
    let out = Command::new(headroom_bin())
        .args(["flushcheck", "verify"])
        .arg(&file)
        .args(["--from", &l.addr(), "--token", &l.token])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not a flushcheck file"), "{}", stderr(&out));
}

#[test]
fn ctrl_c_stops_the_writer_with_its_report_and_exit_130_and_keeps_the_file() {
    let ledger = tempfile::tempdir().unwrap();
    let l = Listener::start(ledger.path());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fc.bin");
    let w = Command::new(headroom_bin())
        .args(["flushcheck", "write"])
        .arg(&file)
        .args(["--to", &l.addr(), "--token", &l.token, "--size", "1M", "--sync", "none", "--json"])
        .env_remove("HEADROOM_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let db = ledger.path().join("flushcheck.sqlite");
    let t0 = Instant::now();
    while rusqlite::Connection::open(&db)
        .and_then(|c| c.query_row("SELECT COUNT(*) FROM acks", [], |r| r.get::<_, i64>(0)))
        .unwrap_or(0)
        < 10
    {
        assert!(t0.elapsed() < Duration::from_secs(30), "no block recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(unsafe { libc::kill(w.id() as i32, libc::SIGINT) }, 0);
    let out = w.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["stopped_by"], "interrupted");
    assert!(doc["acknowledged"].as_u64().unwrap() >= 10, "{doc:#}");
    assert!(file.exists(), "verify needs the file after the writer stopped");
}

/// nbdkit serving `file` on loopback, killed (SIGKILL) on drop. `lying`:
/// nbdkit's fua filter with fuamode=discard answers every NBD_CMD_FLUSH and
/// FUA write with success and does nothing, so the writes sit in the page
/// cache over the file: a write cache that lies.
struct Nbdkit {
    child: Child,
    port: u16,
}

impl Nbdkit {
    fn start(file: &Path, lying: bool) -> Nbdkit {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut c = Command::new("nbdkit");
        c.args(["--foreground", "--ip-addr", "127.0.0.1", "--port", &port.to_string()]);
        if lying {
            c.arg("--filter=fua");
        }
        c.arg("file").arg(format!("file={}", file.display()));
        if lying {
            c.arg("fuamode=discard");
        }
        let child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("start nbdkit");
        let mut n = Nbdkit { child, port };
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = n.child.try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(n.child.stderr.as_mut().expect("piped"), &mut err);
                panic!("nbdkit ended at start ({status}): {err}");
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "nbdkit does not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        n
    }

    fn url(&self) -> String {
        format!("nbd://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `flushcheck ACTION URL ARGS...` with the listener's token.
fn flushcheck_url(action: &str, url: &str, l: &Listener, args: &[&str]) -> Command {
    let mut c = Command::new(headroom_bin());
    c.args(["flushcheck", action, url, if action == "write" { "--to" } else { "--from" }, &l.addr()])
        .args(["--token", &l.token])
        .args(args)
        .env_remove("HEADROOM_TOKEN")
        .env("NO_COLOR", "1");
    c
}

/// An export over NBD: the writer's blocks go through headroom's NBD client
/// to nbdkit's file plugin over a file on the scene's ext4 (flush:
/// fdatasync). The writer and nbdkit are killed, the filesystem is cut
/// (what only the page cache held is gone), nbdkit comes back honest on the
/// same file and verify reads every block back through the protocol.
/// Returns verify's exit code and document, and the blocks the listener
/// recorded before and after the outside sync of the layout.
fn nbd_power_cut(sync: &str, lying: bool) -> (Option<i32>, serde_json::Value, i64, i64) {
    let mut scene = Scene::new();
    let backing = scene.mount.as_ref().unwrap().path().join("export.img");
    // Written whole and synced before the test: later writes overwrite
    // allocated blocks in place, so only data is at stake at the cut.
    std::fs::write(&backing, vec![0u8; 16 << 20]).unwrap();
    sh("sync", &["-f", &backing.to_string_lossy()]).unwrap();
    let listener = Listener::start(scene.ledger_dir.path());
    let nbd = Nbdkit::start(&backing, lying);
    let mut w = flushcheck_url("write", &nbd.url(), &listener, &["--destructive", "--size", "8M", "--sync", sync])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The lying target drops the layout's flush too: write the layout (and
    // the header verify starts from) back from outside once the first block
    // is recorded, as a real cache writes back what it holds long enough;
    // the cut then loses the blocks written since.
    scene.wait_recorded(1, &mut w);
    let before = scene.recorded();
    sh("sync", &["-f", &backing.to_string_lossy()]).unwrap();
    let synced = scene.recorded();
    scene.wait_recorded(synced + 300, &mut w);
    kill(w);
    drop(nbd);
    scene.power_cut();
    // Mounted again at another place.
    let backing = scene.mount.as_ref().unwrap().path().join("export.img");
    let nbd = Nbdkit::start(&backing, false);
    let out = flushcheck_url("verify", &nbd.url(), &listener, &["--json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify printed no document ({e}); stderr: {}", stderr(&out)));
    eprintln!(
        "nbd {sync} lying={lying}: acknowledged {} lost {} torn {}",
        doc["acknowledged"], doc["lost"], doc["torn"]
    );
    (out.status.code(), doc, before, synced)
}

#[test]
fn an_nbd_target_whose_write_cache_drops_flushes_is_caught_and_an_honest_one_is_not() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("mkfs.ext4");
    headroom_lab::require_program!("nbdkit");
    for sync in ["fsync", "dsync"] {
        let (code, doc, _, _) = nbd_power_cut(sync, false);
        assert_eq!(code, Some(0), "{sync}, honest: {doc:#}");
        assert!(doc["acknowledged"].as_u64().unwrap() >= 300, "{doc:#}");
        assert_eq!((doc["lost"].as_u64(), doc["torn"].as_u64()), (Some(0), Some(0)), "{sync}: {doc:#}");
        assert_eq!(doc["path"].as_str().unwrap().split(':').next(), Some("nbd"), "{doc:#}");

        let (code, doc, before, synced) = nbd_power_cut(sync, true);
        assert_eq!(code, Some(1), "{sync}, lying: the lie must fail verify: {doc:#}");
        let findings = doc["findings"].as_array().unwrap();
        assert!(findings.iter().all(|f| f["finding"] == "missing"), "{findings:?}");
        let lost: Vec<u64> = findings.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
        assert!(lost.iter().all(|&s| s as i64 > before), "blocks synced from outside were reported lost: {lost:?}");
        // Written after the outside sync, flushed only into nbdkit's lie
        // (see storage_that_acknowledges_flushes_without_persisting_is_caught
        // on the kernel's own write-back).
        let only_cached = (synced as u64 + 2)..=doc["acknowledged"].as_u64().unwrap();
        assert!(lost.iter().any(|s| only_cached.contains(s)), "none of {only_cached:?} was lost: {lost:?}");
    }
}

#[test]
fn an_export_is_written_only_with_destructive_and_not_over_a_signature_without_force() {
    headroom_lab::require_program!("nbdkit");
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("export.img");
    std::fs::write(&backing, vec![0u8; 8 << 20]).unwrap();
    let ledger = tempfile::tempdir().unwrap();
    let l = Listener::start(ledger.path());
    let nbd = Nbdkit::start(&backing, false);
    let out = flushcheck_url("write", &nbd.url(), &l, &["--size", "4M"]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--destructive") && err.lines().count() == 1, "{err}");
    // An ext4 superblock (magic 0xEF53 at byte 1080) makes it someone's data.
    let mut data = std::fs::read(&backing).unwrap();
    data[1024..2048].fill(0);
    data[1080..1082].copy_from_slice(&0xEF53u16.to_le_bytes());
    std::fs::write(&backing, &data).unwrap();
    let out = flushcheck_url("write", &nbd.url(), &l, &["--size", "4M", "--destructive"]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--force") && err.lines().count() == 1, "{err}");
    assert_eq!(std::fs::read(&backing).unwrap(), data, "a refused run wrote to the export");
    for (url, says) in [
        ("smb://127.0.0.1/share/fc.bin", "nbd:// and iscsi://"),
        ("nfs://127.0.0.1/export/fc.bin", "nbd:// and iscsi://"),
    ] {
        let out = flushcheck_url("write", url, &l, &["--destructive"]).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says) && err.lines().count() == 1, "{err}");
    }
    let out = Command::new(headroom_bin())
        .args(["flushcheck", "write"])
        .arg(dir.path().join("fc.bin"))
        .args(["--to", &l.addr(), "--destructive"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--destructive is for nbd:// and iscsi://"), "{}", stderr(&out));
}

#[test]
fn an_iscsi_lun_is_written_with_synchronize_cache_and_fua_and_verified_through_the_protocol() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("tgtd");
    let _machine = headroom_lab::hold_machine();
    let mut nas = headroom_lab::nas::Nas::new().unwrap();
    let lun = nas.dir().join("lun.img");
    std::fs::write(&lun, vec![0u8; 16 << 20]).unwrap();
    let t = nas.serve_iscsi(&lun, None, None).unwrap();
    let ledger = tempfile::tempdir().unwrap();
    // In the client's namespace, with the writer: its loopback is its own.
    let l = Listener::spawn_with(nas.client().command(headroom_bin().to_str().unwrap()), Some(ledger.path()));
    let in_client = |args: &[&str]| {
        let out = nas
            .client()
            .command(headroom_bin().to_str().unwrap())
            .arg("flushcheck")
            .args(args)
            .args(["--token", &l.token, "--json"])
            .env_remove("HEADROOM_TOKEN")
            .output()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: no document ({e}); stderr: {}", stderr(&out)));
        (out.status.code(), doc)
    };
    for sync in ["fsync", "dsync"] {
        let write = ["write", &t.url, "--to", &l.addr(), "--destructive", "--size", "8M", "--duration", "2s"];
        let (code, w) = in_client(&[&write[..], &["--sync", sync]].concat());
        assert_eq!(code, Some(0), "{w:#}");
        let acked = w["acknowledged"].as_u64().unwrap();
        assert!(acked > 0, "{w:#}");
        let (code, v) = in_client(&["verify", &t.url, "--from", &l.addr()]);
        assert_eq!(code, Some(0), "{v:#}");
        eprintln!("iscsi {sync}: acknowledged {acked}, verify intact {}", v["intact"]);
        // verify counts the latest acknowledged block at each offset: a writer
        // that went round the 2047 blocks of the 8 MiB file more than once
        // acknowledged more than verify can find.
        let expected = acked.min(8 * 256 - 1);
        assert_eq!((v["acknowledged"].as_u64(), v["intact"].as_u64()), (Some(expected), Some(expected)), "{v:#}");
    }
    // The blocks are on the LUN's backing file, where verify read them through tgt.
    let data = std::fs::read(&lun).unwrap();
    assert!(data.starts_with(b"HRFLUSH1"), "no flushcheck header on the LUN");
}

/// Ctrl-C reaches the protocol client's own waits: a target that accepts and
/// never answers the login does not hold `flushcheck write` until the
/// login's deadline; the error says the login was stopped, not timed out.
#[test]
fn ctrl_c_ends_a_login_the_target_never_answers() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || silent.accept().map(|(conn, _)| conn));
    let ledger = tempfile::tempdir().unwrap();
    let l = Listener::start(ledger.path());
    let url = format!("iscsi://127.0.0.1:{port}/iqn.2026-11.test:silent/0");
    let child = flushcheck_url("write", &url, &l, &["--destructive", "--size", "4M"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _conn = held.join().unwrap().expect("the client connects");
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("stopped by Ctrl-C"), "the login was stopped, not timed out: {err}");
}

/// `headroom flushcheck ARGS --token --json` in the lab NAS's client
/// namespace, where the listener runs too (its loopback is its own).
fn client_flushcheck(nas: &headroom_lab::nas::Nas, l: &Listener, args: &[&str]) -> Command {
    let mut c = nas.client().command(headroom_bin().to_str().unwrap());
    c.arg("flushcheck").args(args).args(["--token", &l.token, "--json"]).env_remove("HEADROOM_TOKEN");
    c
}

/// Runs `client_flushcheck`; its exit code and document.
fn client_document(nas: &headroom_lab::nas::Nas, l: &Listener, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let out = client_flushcheck(nas, l, args).output().unwrap();
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: no document ({e}); stderr: {}", stderr(&out)));
    (out.status.code(), doc)
}

/// A file on an SMB share and one on an NFS export, named by their URLs:
/// written for a few seconds with FLUSH / COMMIT (fsync) and write-through /
/// FILE_SYNC (dsync), the second run reusing the file by its header, each
/// verified through the protocol; a file that is not flushcheck's is
/// refused and left as it was, and a URL that names no file is an error.
#[test]
fn smb_and_nfs_files_are_written_and_verified_through_the_protocol_and_a_foreign_file_is_refused() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("smbd");
    headroom_lab::require_program!("ganesha.nfsd");
    let _machine = headroom_lab::hold_machine();
    let mut nas = headroom_lab::nas::Nas::new().unwrap();
    let smb_dir = nas.subdir("smb").unwrap();
    let smb = nas.serve_smb(&smb_dir, Default::default()).unwrap();
    let nfs_dir = nas.subdir("nfs").unwrap();
    let nfs = nas.serve_nfs(&nfs_dir, None).unwrap();
    let ledger = tempfile::tempdir().unwrap();
    let l = Listener::spawn_with(nas.client().command(headroom_bin().to_str().unwrap()), Some(ledger.path()));
    for (base, dir) in [(&smb.url, &smb_dir), (&nfs.url, &nfs_dir)] {
        let url = format!("{base}/fc.bin");
        for sync in ["fsync", "dsync"] {
            let write = ["write", &url, "--to", &l.addr(), "--size", "4M", "--duration", "2s", "--sync", sync];
            let (code, w) = client_document(&nas, &l, &write);
            assert_eq!(code, Some(0), "{url} {sync}: {w:#}");
            let acked = w["acknowledged"].as_u64().unwrap();
            let (code, v) = client_document(&nas, &l, &["verify", &url, "--from", &l.addr()]);
            assert_eq!(code, Some(0), "{url} {sync}: {v:#}");
            eprintln!("{url} {sync}: acknowledged {acked}, verify intact {} lost {}", v["intact"], v["lost"]);
            // verify counts the latest block at each of the 1023 offsets.
            let expected = acked.min(4 * 256 - 1);
            assert!(expected > 0, "{w:#}");
            assert_eq!((v["intact"].as_u64(), v["lost"].as_u64()), (Some(expected), Some(0)), "{v:#}");
        }
        let data = std::fs::read(dir.join("fc.bin")).unwrap();
        assert!(data.starts_with(b"HRFLUSH1") && data.len() == 4 << 20, "{url}: not flushcheck's file on the NAS");

        let precious = dir.join("precious.db");
        std::fs::write(&precious, b"someone's data, not flushcheck's").unwrap();
        let foreign = format!("{base}/precious.db");
        let out =
            client_flushcheck(&nas, &l, &["write", &foreign, "--to", &l.addr(), "--size", "4M"]).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("not a flushcheck file") && err.lines().count() == 1, "{err}");
        assert_eq!(std::fs::read(&precious).unwrap(), b"someone's data, not flushcheck's");
    }
    // NFSv4: the file at the root of the mounted directory (WRITEs of 3 KiB at most with libnfs 4.0).
    let url = format!("{}/fc4.bin?version=4", nfs.url);
    let (code, w) = client_document(&nas, &l, &["write", &url, "--to", &l.addr(), "--size", "4M", "--duration", "1s"]);
    assert_eq!(code, Some(0), "{w:#}");
    let (code, v) = client_document(&nas, &l, &["verify", &url, "--from", &l.addr()]);
    eprintln!("{url} fsync: acknowledged {}, verify intact {} lost {}", w["acknowledged"], v["intact"], v["lost"]);
    assert_eq!(code, Some(0), "{v:#}");
    assert!(v["intact"].as_u64().unwrap() > 0 && v["lost"] == 0, "{v:#}");
    assert!(std::fs::read(nfs_dir.join("fc4.bin")).unwrap().starts_with(b"HRFLUSH1"));
    for url in [smb.url.clone(), format!("{}/", smb.url)] {
        let out = client_flushcheck(&nas, &l, &["write", &url, "--to", &l.addr()]).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("names no file") && err.lines().count() == 1, "{err}");
    }
}

/// A file on Samba over the scene's ext4: the writer and smbd are killed,
/// the filesystem is cut (what only the NAS's page cache held is gone), an
/// honest smbd serves the filesystem mounted again and verify reads the
/// blocks back over SMB. `lying`: `strict sync = no`, so FLUSH and
/// write-through are acknowledged without an fsync. Returns verify's exit
/// code and document, and the blocks recorded before and after the outside
/// sync of the layout.
fn smb_power_cut(sync: &str, lying: bool) -> (Option<i32>, serde_json::Value, i64, i64) {
    let mut scene = Scene::new();
    let share = |scene: &Scene| {
        let d = scene.mount.as_ref().unwrap().path().join("share");
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let dir = share(&scene);
    let mut nas = headroom_lab::nas::Nas::new().unwrap();
    let opts = headroom_lab::nas::smb::SmbOptions { lying_sync: lying, ..Default::default() };
    let smb = nas.serve_smb(&dir, opts).unwrap();
    let l = Listener::spawn_with(nas.client().command(headroom_bin().to_str().unwrap()), Some(scene.ledger_dir.path()));
    let url = format!("{}/fc.bin", smb.url);
    let mut w = client_flushcheck(&nas, &l, &["write", &url, "--to", &l.addr(), "--size", "8M", "--sync", sync])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // As for NBD: the layout (and the header verify starts from) written
    // back from outside once the first block is recorded.
    scene.wait_recorded(1, &mut w);
    let before = scene.recorded();
    sh("sync", &["-f", &dir.join("fc.bin").to_string_lossy()]).unwrap();
    let synced = scene.recorded();
    scene.wait_recorded(synced + 300, &mut w);
    kill(w);
    smb.kill();
    scene.power_cut();
    let smb = nas.serve_smb(&share(&scene), Default::default()).unwrap();
    let url = format!("{}/fc.bin", smb.url);
    let (code, doc) = client_document(&nas, &l, &["verify", &url, "--from", &l.addr()]);
    eprintln!(
        "smb {sync} lying={lying}: acknowledged {} lost {} torn {}",
        doc["acknowledged"], doc["lost"], doc["torn"]
    );
    (code, doc, before, synced)
}

/// One power-cut round against an honest target with --sync fsync, then
/// against a lying one with fsync and with dsync; returns verify's exit
/// code, its document, the last block recorded before the outside sync and
/// the last one that sync covered.
type PowerCut = fn(&str, bool) -> (Option<i32>, serde_json::Value, i64, i64);

/// The honest target loses nothing; the lying one fails verify, loses only
/// blocks after the outside sync, and at least one that only its cache held.
fn honest_kept_and_lying_caught(power_cut: PowerCut) {
    let (code, doc, _, _) = power_cut("fsync", false);
    assert_eq!(code, Some(0), "honest: {doc:#}");
    assert!(doc["acknowledged"].as_u64().unwrap() >= 300, "{doc:#}");
    assert_eq!((doc["lost"].as_u64(), doc["torn"].as_u64()), (Some(0), Some(0)), "{doc:#}");
    for sync in ["fsync", "dsync"] {
        let (code, doc, before, synced) = power_cut(sync, true);
        assert_eq!(code, Some(1), "{sync}, lying: the lie must fail verify: {doc:#}");
        let findings = doc["findings"].as_array().unwrap();
        let lost: Vec<u64> = findings.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
        assert!(lost.iter().all(|&s| s as i64 > before), "blocks synced from outside were reported lost: {lost:?}");
        let only_cached = (synced as u64 + 2)..=doc["acknowledged"].as_u64().unwrap();
        assert!(lost.iter().any(|s| only_cached.contains(s)), "none of {only_cached:?} was lost: {lost:?}");
    }
}

#[test]
fn an_smb_server_whose_flush_lies_is_caught_at_a_power_cut_and_an_honest_one_is_not() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("mkfs.ext4");
    headroom_lab::require_program!("smbd");
    let _machine = headroom_lab::hold_machine();
    honest_kept_and_lying_caught(smb_power_cut);
}

/// Waits until the killed process `pid` has let go of its files (a zombie
/// or gone), so the filesystem under them can be cut and unmounted.
fn wait_released(pid: u32) {
    let t0 = Instant::now();
    while std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|mut d| d.next().is_some()) {
        assert!(t0.elapsed() < Duration::from_secs(10), "process {pid} still holds files 10 s after SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A LUN of tgt over a file on the scene's ext4, through the NAS's page
/// cache: SYNCHRONIZE CACHE and FUA are tgt's fdatasync, a no-op under
/// eatmydata when `lying`. The writer and tgtd are killed, the filesystem
/// is cut, an honest tgtd serves the file mounted again and verify reads
/// it back over iSCSI. Returns as [`smb_power_cut`] does.
fn iscsi_power_cut(sync: &str, lying: bool) -> (Option<i32>, serde_json::Value, i64, i64) {
    let mut scene = Scene::new();
    let backing = scene.mount.as_ref().unwrap().path().join("lun.img");
    std::fs::write(&backing, vec![0u8; 16 << 20]).unwrap();
    sh("sync", &["-f", &backing.to_string_lossy()]).unwrap();
    let mut nas = headroom_lab::nas::Nas::new().unwrap();
    let t = nas.serve_iscsi_cached(&backing, lying).unwrap();
    let l = Listener::spawn_with(nas.client().command(headroom_bin().to_str().unwrap()), Some(scene.ledger_dir.path()));
    let write = ["write", &t.url, "--to", &l.addr(), "--destructive", "--size", "8M", "--sync", sync];
    let mut w = client_flushcheck(&nas, &l, &write).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    scene.wait_recorded(1, &mut w);
    let before = scene.recorded();
    sh("sync", &["-f", &backing.to_string_lossy()]).unwrap();
    let synced = scene.recorded();
    scene.wait_recorded(synced + 300, &mut w);
    kill(w);
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(t.pid as i32, libc::SIGKILL) };
    wait_released(t.pid);
    drop(t);
    scene.power_cut();
    let backing = scene.mount.as_ref().unwrap().path().join("lun.img");
    let t = nas.serve_iscsi_cached(&backing, false).unwrap();
    let (code, doc) = client_document(&nas, &l, &["verify", &t.url, "--from", &l.addr()]);
    eprintln!(
        "iscsi {sync} lying={lying}: acknowledged {} lost {} torn {}",
        doc["acknowledged"], doc["lost"], doc["torn"]
    );
    (code, doc, before, synced)
}

#[test]
fn an_iscsi_target_whose_flush_lies_is_caught_at_a_power_cut_and_an_honest_one_is_not() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("mkfs.ext4");
    headroom_lab::require_program!("tgtd");
    headroom_lab::require_program!("eatmydata");
    let _machine = headroom_lab::hold_machine();
    honest_kept_and_lying_caught(iscsi_power_cut);
}

/// A LUN that requires CHAP: written and verified with the account from a
/// `--credentials` file (as `disk` takes it); without it the login fails.
#[test]
fn an_iscsi_lun_with_chap_takes_the_account_from_a_credentials_file() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("tgtd");
    let _machine = headroom_lab::hold_machine();
    let mut nas = headroom_lab::nas::Nas::new().unwrap();
    let lun = nas.dir().join("lun.img");
    std::fs::write(&lun, vec![0u8; 8 << 20]).unwrap();
    let t = nas.serve_iscsi(&lun, None, Some(("flushuser", "flush-secret-12"))).unwrap();
    let creds = nas.dir().join("creds");
    std::fs::write(&creds, "HEADROOM_ISCSI_USER=flushuser\nHEADROOM_ISCSI_PASSWORD=flush-secret-12\n").unwrap();
    std::fs::set_permissions(&creds, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let creds = creds.to_string_lossy().into_owned();
    let ledger = tempfile::tempdir().unwrap();
    let l = Listener::spawn_with(nas.client().command(headroom_bin().to_str().unwrap()), Some(ledger.path()));
    let write = ["write", &t.url, "--to", &l.addr(), "--destructive", "--size", "4M", "--duration", "1s"];
    let out = client_flushcheck(&nas, &l, &write).env_remove("HEADROOM_ISCSI_USER").output().unwrap();
    assert_ne!(out.status.code(), Some(0), "a login without the CHAP account: {}", stderr(&out));
    let (code, w) = client_document(&nas, &l, &[&write[..], &["--credentials", &creds]].concat());
    assert_eq!(code, Some(0), "{w:#}");
    let (code, v) = client_document(&nas, &l, &["verify", &t.url, "--from", &l.addr(), "--credentials", &creds]);
    assert_eq!(code, Some(0), "{v:#}");
    assert!(v["intact"].as_u64().unwrap() > 0 && v["lost"] == 0, "{v:#}");
}
