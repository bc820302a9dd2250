//! headroom's own NFS client against a real server: nfs-ganesha (VFS
//! backend) in the lab NAS namespace, headroom in the client namespace. The
//! quick preset over NFSv3 and NFSv4, the protocol's ceiling over a tbf-shaped
//! 1 Gb/s link, a blkio-throttled backing device measured through the
//! protocol, and what a wrong export, a server killed mid-test and a server
//! that answers garbage give.

mod support;

use headroom_lab::blockdev::{BlkioThrottle, LoopDevice, Mount};
use headroom_lab::nas::nfs::{drop_cached_pages, nfs_lab_ready, NfsExport};
use headroom_lab::nas::Nas;
use headroom_limits::protocol::{goodput_bits, DataDirection, Negotiated, StorageProtocol};
use headroom_limits::{tbf_tcp_goodput_bits, Framing};
use headroom_result::{DiskSpec, ProbeSpec, ResultDoc};
use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
use support::{disk_leftovers, headroom_bin, one_error_line, stderr};

/// The headroom binary; HEADROOM_TEST_BIN names a copy instead (a target
/// directory shared by several checkouts may hold another checkout's build).
fn bin() -> std::path::PathBuf {
    std::env::var_os("HEADROOM_TEST_BIN").map(Into::into).unwrap_or_else(|| headroom_bin().to_path_buf())
}

/// `headroom disk ARGS` in the NAS's client namespace.
fn headroom_in(nas: &Nas, args: &[&str]) -> Output {
    nas.client()
        .command(bin().to_str().unwrap())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("headroom runs")
}

fn disk_spec(spec: &ProbeSpec) -> &DiskSpec {
    match spec {
        ProbeSpec::Disk(d) => d,
        other => panic!("not a disk probe: {other:?}"),
    }
}

fn doc_of(out: &Output) -> ResultDoc {
    assert!(out.status.success(), "headroom failed ({:?}): {}", out.status.code(), stderr(out));
    ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a result document")
}

#[test]
fn quick_preset_over_nfsv3_and_v4_leaves_nothing_behind() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() {
        return;
    }
    let (nas, export) = Nas::with_nfs_export().expect("lab NAS serving NFS");
    // A directory inside the export: v3 finds the export by its MOUNT list.
    std::fs::create_dir(export.dir.join("bench")).unwrap();
    let url = format!("{}/bench", export.url);
    let out = headroom_in(
        &nas,
        &["disk", &url, "--preset", "quick", "--size", "256M", "--time", "1s", "--ramp", "300ms", "--json", "--quiet"],
    );
    let doc = doc_of(&out);
    // Three tests (SEQ1M Q8T1, RND4K Q32T1, RND4K Q1T1), each read and write.
    let ids: Vec<&str> = doc.probes.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), 6, "{ids:?}");
    for p in &doc.probes {
        eprintln!("{}: {:.1} MB/s, {:.0} IOPS", p.id, p.summary.bytes_per_sec / 1e6, p.summary.iops.unwrap_or(0.0));
        let spec = disk_spec(&p.spec);
        let proto = spec.protocol.as_ref().expect("spec.protocol");
        assert_eq!((proto.name.as_str(), proto.version.as_deref()), ("nfs", Some("3")));
        assert!(proto.granted.get("rsize").copied().unwrap_or(0) >= 4096, "{proto:?}");
        assert!(proto.granted.get("wsize").copied().unwrap_or(0) >= 4096, "{proto:?}");
        assert!(p.summary.bytes_per_sec > 0.0);
    }
    assert!(disk_leftovers(&export.dir.join("bench")).is_empty(), "test file left");

    // NFSv4: the path is looked up in the server's namespace; writes and reads.
    let url4 = format!("{url}?version=4");
    for rw in ["write", "read"] {
        let out = headroom_in(
            &nas,
            &[
                "disk", &url4, "--rw", rw, "--qd", "4", "--size", "64M", "--time", "1s", "--ramp", "200ms", "--json",
                "--quiet",
            ],
        );
        let doc = doc_of(&out);
        let proto = disk_spec(&doc.probes[0].spec).protocol.clone().expect("protocol");
        assert_eq!((proto.name.as_str(), proto.version.as_deref()), ("nfs", Some("4")));
    }
    assert!(disk_leftovers(&export.dir.join("bench")).is_empty(), "test file left (v4)");
}

#[test]
fn sequential_reads_fill_a_shaped_gigabit_link_to_the_protocol_ceiling() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (nas, export) = Nas::with_nfs_export().expect("lab NAS serving NFS");
    nas.shape(1_000_000_000).expect("tbf");
    let out = headroom_in(
        &nas,
        &[
            "disk",
            &export.url,
            "--rw",
            "read",
            "--bs",
            "1M",
            "--qd",
            "8",
            "--size",
            "512M",
            "--time",
            "4s",
            "--json",
            "--quiet",
        ],
    );
    let doc = doc_of(&out);
    let probe = &doc.probes[0];
    let proto = disk_spec(&probe.spec).protocol.clone().expect("protocol");
    let rsize = proto.granted["rsize"];
    let tcp = tbf_tcp_goodput_bits(1e9, &Framing::default());
    let n = Negotiated { max_request: rsize, ..Negotiated::defaults(StorageProtocol::Nfs3) };
    let ceiling = goodput_bits(tcp, StorageProtocol::Nfs3, DataDirection::Read, 1 << 20, &n);
    let measured = probe.summary.bytes_per_sec * 8.0;
    let ratio = measured / ceiling;
    eprintln!("NFSv3 1M QD8 read: {measured:.4e} b/s, ceiling {ceiling:.4e} b/s (rsize {rsize}), ratio {ratio:.4}");
    assert!(ratio >= 0.97, "{ratio:.4} of the ceiling");
    assert!(ratio <= 1.01, "{ratio:.4}: above the ceiling is a measuring error");
}

#[test]
fn a_throttled_backing_device_is_measured_through_nfs() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() || !BlkioThrottle::available() {
        eprintln!("SKIPPED: needs ganesha and cgroup v1 blkio");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    const RATE: u64 = 40_000_000;
    let mut nas = Nas::new().expect("lab NAS");
    let device = LoopDevice::new_in(nas.dir(), 1 << 30).expect("loop device");
    device.mkfs("ext4").expect("mkfs");
    let mount = Mount::device(&device.path, "ext4").expect("mount");
    let throttle = BlkioThrottle::new(&device.major_minor(), Some(RATE), None, None, None).expect("blkio");
    let export = nas.serve_nfs(mount.path(), Some(&throttle)).expect("ganesha");

    // Ganesha's VFS backend reads through the NAS's page cache, which the
    // layout just filled: drop the test file's pages once it is written, so
    // every read of the measured phase reaches the throttled device.
    let dir = mount.path().to_path_buf();
    let size: u64 = 400 << 20;
    let dropper = std::thread::spawn(move || drop_once_laid_out(&dir, size, Duration::from_secs(60)));
    let out = headroom_in(
        &nas,
        &[
            "disk",
            &export.url,
            "--rw",
            "read",
            "--bs",
            "1M",
            "--qd",
            "8",
            "--size",
            "400M",
            "--ramp",
            "3s",
            "--time",
            "3s",
            "--json",
            "--quiet",
        ],
    );
    let dropped = dropper.join().unwrap();
    let doc = doc_of(&out);
    assert!(dropped, "the test file never reached its size");
    let measured = doc.probes[0].summary.bytes_per_sec;
    let ratio = measured / RATE as f64;
    eprintln!("throttle {RATE} B/s, through NFS {measured:.0} B/s, ratio {ratio:.4}");
    assert!((0.95..=1.05).contains(&ratio), "{ratio:.4} of the throttle");
    drop(nas);
    drop(mount);
}

/// Waits for headroom's test file in `dir` to reach `size`, then drops its
/// cached pages every 200 ms for 2.5 s (the end of the layout and its COMMIT
/// may still dirty pages); within the run's 3 s warm-up.
fn drop_once_laid_out(dir: &Path, size: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let full = std::fs::read_dir(dir).ok().and_then(|entries| {
            entries
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with("headroom-disk-"))
                .filter(|e| e.metadata().map(|m| m.len() >= size).unwrap_or(false))
                .map(|e| e.path())
        });
        if let Some(file) = full {
            let until = Instant::now() + Duration::from_millis(2500);
            while Instant::now() < until {
                let _ = drop_cached_pages(&file);
                std::thread::sleep(Duration::from_millis(200));
            }
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn a_wrong_export_is_named() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() {
        return;
    }
    let (nas, export) = Nas::with_nfs_export().expect("lab NAS serving NFS");
    let addr = nas.addr();
    let out = headroom_in(&nas, &["disk", &format!("nfs://{addr}/no/such/export"), "--quiet"]);
    one_error_line(&out, &["/no/such/export", &export.dir.display().to_string()]);
    let out = headroom_in(&nas, &["disk", &format!("nfs://{addr}/no/such/export?version=4"), "--quiet"]);
    one_error_line(&out, &["/no/such/export", "NFSv4"]);
    // A directory missing inside a real export.
    let out = headroom_in(&nas, &["disk", &format!("{}/missing-dir", export.url), "--quiet"]);
    one_error_line(&out, &["missing-dir"]);
}

/// A 60 s read of a test file on `export`, started in the client namespace;
/// returns once the file is laid out and the read test runs.
fn long_read(nas: &Nas, export: &NfsExport) -> std::process::Child {
    let child = nas
        .client()
        .command(bin().to_str().unwrap())
        .args(["disk", &export.url, "--rw", "read", "--qd", "4", "--size", "64M", "--time", "60s", "--quiet"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while disk_leftovers(&export.dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    child
}

#[test]
fn a_server_killed_mid_test_ends_the_run_in_seconds() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() {
        return;
    }
    let (nas, export) = Nas::with_nfs_export().expect("lab NAS serving NFS");
    let child = long_read(&nas, &export);
    // The read test runs (the file is laid out): kill ganesha.
    // SAFETY: a signal to the ganesha this test started.
    assert_eq!(unsafe { libc::kill(export.pid as i32, libc::SIGKILL) }, 0, "kill ganesha");
    let killed = Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = killed.elapsed();
    eprintln!("ended {took:?} after the kill: {}", stderr(&out));
    assert!(took < Duration::from_secs(12), "took {took:?}");
    let left = disk_leftovers(&export.dir);
    assert_eq!(left.len(), 1, "the server was gone: the file stays ({left:?})");
    one_error_line(&out, &[export.addr_port().as_str(), &left[0]]);
}

#[test]
fn a_server_that_falls_silent_ends_the_run_in_seconds() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() {
        return;
    }
    let (nas, export) = Nas::with_nfs_export().expect("lab NAS serving NFS");
    let child = long_read(&nas, &export);
    // No RST, no FIN: the link goes down and the server just stops answering.
    nas.hosts.cut().expect("link down");
    let cut = Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = cut.elapsed();
    eprintln!("ended {took:?} after the cut: {}", stderr(&out));
    assert!(took < Duration::from_secs(20), "took {took:?}");
    one_error_line(&out, &["did not answer", "headroom-disk-"]);
}

#[test]
fn a_server_answering_garbage_is_an_error_not_a_hang() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() {
        return;
    }
    // NFSv4 straight to a listener on loopback that answers random bytes.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let mut junk = vec![0u8; 64 * 1024];
            for _ in 0..64 {
                for b in junk.iter_mut() {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    *b = seed as u8;
                }
                if stream.write_all(&junk).is_err() {
                    break;
                }
            }
        }
    });
    let started = Instant::now();
    let out = std::process::Command::new(bin())
        .args(["disk", &format!("nfs://127.0.0.1:{port}/export?version=4"), "--quiet"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    eprintln!("garbage v4: {:?} {}", started.elapsed(), stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(15));
    one_error_line(&out, &["nfs://127.0.0.1"]);

    // NFSv3: garbage from the portmapper, in a namespace of the test's own.
    let nas = Nas::new().expect("lab NAS");
    let script = "import socket,os\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
                  s.bind(('0.0.0.0',111));s.listen(8)\nwhile True:\n c,_=s.accept()\n try:\n  c.sendall(os.urandom(65536))\n except Exception:\n  pass\n";
    let mut junk = nas.server().command("python3").args(["-c", script]).stdin(Stdio::null()).spawn().unwrap();
    nas.wait_for_port(111, Duration::from_secs(10)).expect("garbage portmapper");
    let started = Instant::now();
    let out = headroom_in(&nas, &["disk", &format!("nfs://{}/export?version=3", nas.addr()), "--quiet"]);
    let _ = junk.kill();
    let _ = junk.wait();
    eprintln!("garbage v3: {:?} {}", started.elapsed(), stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(15));
    one_error_line(&out, &["exports"]);
}

trait AddrPort {
    fn addr_port(&self) -> String;
}

impl AddrPort for NfsExport {
    /// `ADDR:2049` as the error names the server.
    fn addr_port(&self) -> String {
        let host = self.url.trim_start_matches("nfs://").split('/').next().unwrap_or("");
        format!("{host}:2049")
    }
}

#[test]
fn a_second_ctrl_c_still_removes_the_test_file_on_the_server() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() {
        return;
    }
    let (nas, export) = Nas::with_nfs_export().expect("lab NAS serving NFS");
    let child = long_read(&nas, &export);
    assert_eq!(disk_leftovers(&export.dir).len(), 1, "the test file is there while the read runs");
    // `ip netns exec` execs headroom, so the child's pid is headroom's. The
    // second 20 ms after the first (signals do not queue: at once they would
    // be one), well before the first stop ends the run and drops the share
    // (at least one 50 ms poll of the stop flag, then the workers' joins),
    // which would remove the file the ordinary way.
    for _ in 0..2 {
        // SAFETY: a signal to the process this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{:?}: {}", out.status, stderr(&out));
    assert!(
        stderr(&out).contains("removing the test files and quitting"),
        "the second Ctrl-C's path: {}",
        stderr(&out)
    );
    let left = disk_leftovers(&export.dir);
    assert!(left.is_empty(), "a second Ctrl-C exits at once, and removes the server's test file first: {left:?}");
}
