//! headroom's own iSCSI initiator against a real target: tgt's tgtd in the
//! lab NAS namespace, headroom in the client namespace. The quick preset,
//! the derived protocol ceiling over a tbf-shaped 1 Gb/s link, a
//! blkio-throttled backing device measured through the protocol, wrong
//! names and passwords, a target killed mid-test, and a peer that answers
//! garbage.
//!
//! `HEADROOM_BIN=PATH` runs that binary instead of the one cargo built (a
//! target directory shared between checkouts may hold another's build).

mod support;

use headroom_lab::blockdev::{write_md_superblock, BlkioThrottle, LoopDevice};
use headroom_lab::nas::iscsi::IscsiTarget;
use headroom_lab::nas::Nas;
use headroom_limits::protocol::{goodput_bits, DataDirection, Negotiated, StorageProtocol};
use headroom_limits::{tbf_tcp_goodput_bits, Framing};
use headroom_result::{ProbeSpec, ProtocolInfo, ResultDoc, WarningCode};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::one_error_line;

const MB: u64 = 1_000_000;

fn headroom_bin() -> PathBuf {
    std::env::var_os("HEADROOM_BIN").map_or_else(|| support::headroom_bin().to_path_buf(), PathBuf::from)
}

fn lab_ready(what: &str) -> bool {
    if !headroom_lab::is_root() {
        eprintln!("SKIPPED {what}: needs root (namespaces, tgtd)");
        return false;
    }
    for program in ["ip", "tc", "tgtd", "tgtadm"] {
        if !headroom_lab::has_program(program) {
            eprintln!("SKIPPED {what}: `{program}` is not installed (run scripts/install-deps.sh)");
            return false;
        }
    }
    true
}

/// A file of `size` bytes of random data in /dev/shm (tmpfs takes tgt's
/// O_DIRECT and is faster than the link, so the link or the protocol is what
/// is measured, not this VM's noisy disk); removed on drop.
struct Backing(PathBuf);

impl Backing {
    fn new(size: u64) -> Backing {
        let path = PathBuf::from("/dev/shm").join(headroom_lab::blockdev::unique_name("iscsi-lun"));
        let backing = Backing(path);
        let mut f = std::fs::File::create(&backing.0).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut chunk = vec![0u8; 1 << 20];
        for _ in 0..size >> 20 {
            for w in chunk.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                w.copy_from_slice(&x.to_le_bytes());
            }
            f.write_all(&chunk).unwrap();
        }
        backing
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// headroom in the client namespace.
fn headroom_in(nas: &Nas, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = nas.client().command(headroom_bin().to_str().unwrap());
    c.args(args).env("NO_COLOR", "1").env_remove("HEADROOM_ISCSI_USER").env_remove("HEADROOM_ISCSI_PASSWORD");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("headroom runs")
}

fn doc_of(out: &Output) -> ResultDoc {
    assert!(out.status.success(), "headroom failed: {}", String::from_utf8_lossy(&out.stderr));
    ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a result document")
}

fn protocol(doc: &ResultDoc, i: usize) -> (ProtocolInfo, f64) {
    let p = &doc.probes[i];
    let ProbeSpec::Disk(spec) = &p.spec else { panic!("not a disk probe") };
    (spec.protocol.clone().expect("spec.protocol"), p.summary.bytes_per_sec)
}

fn sessions(nas: &Nas, t: &IscsiTarget) -> usize {
    let c = t.control_port.to_string();
    let show = nas.server().exec("tgtadm", &["-C", &c, "--lld", "iscsi", "--op", "show", "--mode", "target"]).unwrap();
    show.lines().filter(|l| l.trim_start().starts_with("I_T nexus:")).count()
}

#[test]
fn the_quick_preset_runs_and_records_what_the_target_granted() {
    if !lab_ready("iscsi quick preset") {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    let lun = Backing::new(256 << 20);
    let t = nas.serve_iscsi(&lun.0, None, None).unwrap();
    let args = ["disk", &t.url, "--preset", "quick", "--size", "256M", "--time", "1s", "--ramp", "300ms"];
    let out = headroom_in(&nas, &[&args[..], &["--destructive", "--json", "--quiet"]].concat(), &[]);
    let doc = doc_of(&out);
    assert_eq!(doc.probes.len(), 6, "{:?}", doc.probes.iter().map(|p| &p.id).collect::<Vec<_>>());
    for i in 0..6 {
        let (info, bytes) = protocol(&doc, i);
        let p = &doc.probes[i];
        eprintln!("{}: {:.1} MB/s, {:.0} IOPS; {:?}", p.id, bytes / 1e6, p.summary.iops.unwrap_or(0.0), info);
        assert_eq!(info.name, "iscsi");
        assert_eq!(info.server, format!("{}:3260", nas.addr()));
        assert!(bytes > 0.0);
        for key in ["MaxRecvDataSegmentLength_target", "MaxBurstLength", "FirstBurstLength", "MaxOutstandingR2T"] {
            assert!(info.granted.get(key).is_some_and(|&v| v > 0), "{key}: {:?}", info.granted);
        }
        assert_eq!(info.granted.get("block_size"), Some(&512));
        assert_eq!(info.granted.get("capacity_bytes"), Some(&(256 << 20)));
    }
    // Every session logged out: tgt lists no I_T nexus any more.
    assert_eq!(sessions(&nas, &t), 0, "sessions left on the target");
}

#[test]
fn a_1m_sequential_read_reaches_the_derived_ceiling_over_a_shaped_link() {
    if !lab_ready("iscsi ceiling") {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    nas.shape(1_000_000_000).unwrap();
    let lun = Backing::new(512 << 20);
    let t = nas.serve_iscsi(&lun.0, None, None).unwrap();
    let args = ["disk", &t.url, "--rw", "read", "--bs", "1M", "--qd", "8", "--time", "4s", "--ramp", "1s"];
    let doc = doc_of(&headroom_in(&nas, &[&args[..], &["--json", "--quiet"]].concat(), &[]));
    let (info, bytes) = protocol(&doc, 0);
    let segment = info.granted["MaxRecvDataSegmentLength_initiator"];
    let ceiling = goodput_bits(
        tbf_tcp_goodput_bits(1e9, &Framing::default()),
        StorageProtocol::Iscsi,
        DataDirection::Read,
        1 << 20,
        &Negotiated { max_request: u64::MAX, segment },
    );
    let ratio = bytes * 8.0 / ceiling;
    eprintln!("1M QD8 read: {:.1} Mb/s, ceiling {:.1} Mb/s, ratio {ratio:.4}", bytes * 8e-6, ceiling * 1e-6);
    assert!((0.97..=1.01).contains(&ratio), "{ratio:.4} of the iSCSI ceiling over tbf 1 Gb/s");
}

#[test]
fn a_throttled_backing_device_is_measured_through_the_protocol() {
    if !lab_ready("iscsi throttled device") {
        return;
    }
    if !BlkioThrottle::available() {
        eprintln!("SKIPPED iscsi throttled device: cgroup v1 blkio is not mounted");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    let device = LoopDevice::new_in(nas.dir(), 256 << 20).unwrap();
    let rate = 40 * MB;
    let throttle = BlkioThrottle::new(&device.major_minor(), Some(rate), None, None, None).unwrap();
    let t = nas.serve_iscsi(&device.path, Some(&throttle), None).unwrap();
    let args = ["disk", &t.url, "--rw", "read", "--bs", "1M", "--qd", "4", "--time", "4s", "--ramp", "1s"];
    let doc = doc_of(&headroom_in(&nas, &[&args[..], &["--json", "--quiet"]].concat(), &[]));
    let (_, bytes) = protocol(&doc, 0);
    let ratio = bytes / rate as f64;
    eprintln!("1M reads of a 40 MB/s device through iSCSI: {:.2} MB/s, ratio {ratio:.4}", bytes / 1e6);
    assert!((ratio - 1.0).abs() < 0.05, "{ratio:.4} of the blkio throttle");
    drop(nas);
    drop(throttle);
}

#[test]
fn wrong_names_and_passwords_are_one_line_each() {
    if !lab_ready("iscsi wrong names") {
        return;
    }
    let mut nas = Nas::new().unwrap();
    let lun = Backing::new(64 << 20);
    let t = nas.serve_iscsi(&lun.0, None, Some(("alice", "s3cret-pass12"))).unwrap();
    let addr = nas.addr().to_string();
    let good = [("HEADROOM_ISCSI_USER", "alice"), ("HEADROOM_ISCSI_PASSWORD", "s3cret-pass12")];
    let read = ["--rw", "read", "--time", "300ms", "--ramp", "0s", "--quiet", "--json"];
    let run = |url: &str, env: &[(&str, &str)]| headroom_in(&nas, &[&["disk", url][..], &read[..]].concat(), env);

    let wrong_iqn = format!("iscsi://{addr}/iqn.2026-11.dev.headroom.lab:nosuch/1");
    one_error_line(&run(&wrong_iqn, &good), &["no target named 'iqn.2026-11.dev.headroom.lab:nosuch'"]);
    let wrong_lun = format!("iscsi://{addr}/{}/7", t.iqn);
    one_error_line(&run(&wrong_lun, &good), &["has no LUN 7", "its LUNs are 0, 1"]);
    let controller = format!("iscsi://{addr}/{}/0", t.iqn);
    one_error_line(&run(&controller, &good), &["LUN 0 is a storage controller", "try LUN 1"]);
    let bad_pass = [("HEADROOM_ISCSI_USER", "alice"), ("HEADROOM_ISCSI_PASSWORD", "wrong-password")];
    one_error_line(&run(&t.url, &bad_pass), &["CHAP authentication failed for user 'alice'"]);
    one_error_line(&run(&t.url, &[]), &["requires CHAP", "HEADROOM_ISCSI_PASSWORD"]);
    // With the right password it reads, and writes are refused without --destructive.
    doc_of(&run(&t.url, &good));
    let w = headroom_in(&nas, &["disk", &t.url, "--rw", "write", "--time", "300ms", "--quiet"], &good);
    one_error_line(&w, &["--destructive"]);
}

/// An md member whose superblock sits at the LUN's end (metadata 0.90, 1.0)
/// is refused however small the tested region: the probe reads the whole
/// LUN's end, not the end of the first `--size` bytes.
#[test]
fn an_md_member_with_its_superblock_at_the_end_is_refused_whatever_the_size() {
    if !lab_ready("iscsi md member at the end") {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    for metadata in ["1.0", "0.90"] {
        let mut nas = Nas::new().unwrap();
        let lun = Backing::new(64 << 20);
        write_md_superblock(&lun.0, metadata).unwrap();
        assert_eq!(support::blkid_type(&lun.0), "linux_raid_member", "md {metadata}: the lab made no member");
        let before = std::fs::read(&lun.0).unwrap();
        let t = nas.serve_iscsi(&lun.0, None, None).unwrap();
        let args = ["disk", &t.url, "--rw", "write", "--bs", "1M", "--size", "8M", "--time", "500ms", "--ramp", "0s"];
        let out = headroom_in(&nas, &[&args[..], &["--destructive", "--quiet"]].concat(), &[]);
        one_error_line(&out, &["linux_raid_member", "--force"]);
        assert!(std::fs::read(&lun.0).unwrap() == before, "md {metadata}: the LUN was written");
    }
}

#[test]
fn a_target_killed_mid_test_ends_the_run_in_one_line() {
    if !lab_ready("iscsi target killed") {
        return;
    }
    let mut nas = Nas::new().unwrap();
    let lun = Backing::new(128 << 20);
    let t = nas.serve_iscsi(&lun.0, None, None).unwrap();
    let mut child = nas
        .client()
        .command(headroom_bin().to_str().unwrap())
        .args(["disk", &t.url, "--rw", "randread", "--qd", "8", "--time", "60s", "--ramp", "0s", "--quiet"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    Command::new("kill").args(["-9", &t.pid.to_string()]).status().unwrap();
    let killed = Instant::now();
    let out = loop {
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap();
        }
        if killed.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            panic!("headroom still runs 15 s after the target died");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("ended {:?} after the kill: {}", killed.elapsed(), String::from_utf8_lossy(&out.stderr));
    assert!(killed.elapsed() < Duration::from_secs(10));
    one_error_line(&out, &["target"]);
}

/// A listener on loopback that answers every connection with `reply` (then
/// keeps the connection open until the client leaves).
fn garbage_server(reply: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let reply = reply.clone();
            std::thread::spawn(move || {
                let mut conn = conn;
                let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(&reply);
                while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    port
}

#[test]
fn garbage_from_the_peer_is_one_line_and_no_hang() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    // A login response announcing 16 MiB of text, then nothing.
    let mut huge = vec![0u8; 48];
    huge[0] = 0x23;
    huge[5..8].copy_from_slice(&[0xff, 0xff, 0xff]);
    // A well-formed login response whose text is not key=value.
    let mut text = vec![0u8; 48];
    text[0] = 0x23;
    text[1] = 0x87;
    text[7] = 8;
    text.extend_from_slice(b"garbage\0");
    for (what, reply, needle) in [
        ("random bytes", random, "garbage from the target"),
        ("a huge data segment", huge, "garbage from the target"),
        ("text without '='", text, "garbage from the target"),
        ("silence", Vec::new(), "no answer from the target"),
    ] {
        let port = garbage_server(reply);
        let url = format!("iscsi://127.0.0.1:{port}/iqn.2026-11.dev.headroom.lab:garbage/1");
        let started = Instant::now();
        let out = Command::new(headroom_bin()).args(["disk", &url, "--rw", "read", "--quiet"]).output().unwrap();
        assert!(started.elapsed() < Duration::from_secs(15), "{what}: took {:?}", started.elapsed());
        one_error_line(&out, &[needle, &url]);
    }
}

#[test]
fn dsync_and_fsync_writes_reach_the_target() {
    if !lab_ready("iscsi sync writes") {
        return;
    }
    let mut nas = Nas::new().unwrap();
    let lun = Backing::new(64 << 20);
    let t = nas.serve_iscsi(&lun.0, None, None).unwrap();
    let before = std::fs::read(&lun.0).unwrap();
    for sync in ["dsync", "fsync"] {
        let args = ["disk", &t.url, "--rw", "randwrite", "--qd", "4", "--sync", sync, "--time", "500ms"];
        let doc = doc_of(&headroom_in(
            &nas,
            &[&args[..], &["--ramp", "0s", "--destructive", "--json", "--quiet"]].concat(),
            &[],
        ));
        let ProbeSpec::Disk(spec) = &doc.probes[0].spec else { panic!() };
        assert_eq!(spec.sync, sync);
        assert!(doc.probes[0].summary.iops.unwrap_or(0.0) > 0.0, "{sync}: no writes completed");
    }
    // The writes reached the LUN's file (tgt writes it with O_DIRECT).
    assert_ne!(std::fs::read(&lun.0).unwrap(), before);
}

/// `--iscsi KEY=VALUE,...`: the keys offered instead of headroom's own reach
/// the target, which answers by RFC 7143's rules (ImmediateData is AND,
/// InitialR2T is OR, the lengths are the smaller); the result records what
/// was asked beside what was granted, and writes still complete under them.
#[test]
fn login_keys_asked_with_iscsi_are_negotiated_and_recorded() {
    if !lab_ready("iscsi login keys") {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    let lun = Backing::new(64 << 20);
    let t = nas.serve_iscsi(&lun.0, None, None).unwrap();
    let args = ["disk", &t.url, "--rw", "write", "--bs", "1M", "--qd", "4", "--time", "1s", "--ramp", "200ms"];
    let run = |extra: &[&str]| {
        let out = headroom_in(&nas, &[&args[..], extra, &["--destructive", "--json", "--quiet"]].concat(), &[]);
        protocol(&doc_of(&out), 0)
    };
    let (default, _) = run(&[]);
    let keys = "ImmediateData=No,InitialR2T=Yes,FirstBurstLength=16384,MaxBurstLength=65536";
    let (asked, bytes) = run(&["--iscsi", keys, "--iscsi", "MaxRecvDataSegmentLength=32768"]);
    eprintln!("default {:?}\nasked {:?}", default.granted, asked.granted);
    let g = |info: &ProtocolInfo, k: &str| info.granted.get(k).copied();
    assert_eq!(g(&default, "ImmediateData"), Some(1), "headroom offers Yes and tgt grants it: {:?}", default.granted);
    assert_eq!(g(&asked, "ImmediateData"), Some(0), "{:?}", asked.granted);
    assert_eq!(g(&asked, "InitialR2T"), Some(1), "{:?}", asked.granted);
    assert_eq!(g(&asked, "FirstBurstLength"), Some(16384), "{:?}", asked.granted);
    assert_eq!(g(&asked, "MaxBurstLength"), Some(65536), "{:?}", asked.granted);
    assert_eq!(g(&asked, "MaxRecvDataSegmentLength_initiator"), Some(32768), "{:?}", asked.granted);
    for (k, v) in [("ImmediateData_asked", 0), ("InitialR2T_asked", 1), ("MaxBurstLength_asked", 65536)] {
        assert_eq!(g(&asked, k), Some(v), "{k}: {:?}", asked.granted);
    }
    assert!(g(&default, "InitialR2T_asked").is_none(), "nothing asked, nothing recorded: {:?}", default.granted);
    assert!(bytes > 0.0, "writes completed under the asked keys");
    // A receive segment above headroom's 256 KiB (up to RFC 7143's largest):
    // tgt sends 1 MiB Data-In PDUs, which the session's receive buffer holds.
    let segment = ["--iscsi", "MaxRecvDataSegmentLength=1048576", "--json", "--quiet"];
    let read = ["disk", &t.url, "--rw", "read", "--bs", "1M", "--qd", "4", "--time", "1s", "--ramp", "200ms"];
    let (large, bytes) = protocol(&doc_of(&headroom_in(&nas, &[&read[..], &segment[..]].concat(), &[])), 0);
    assert_eq!(g(&large, "MaxRecvDataSegmentLength_initiator"), Some(1_048_576), "{:?}", large.granted);
    assert!(bytes > 0.0, "reads completed in 1 MiB PDUs");
    // A key for another protocol's URL is refused before anything connects.
    let out = headroom_in(&nas, &["disk", "nbd://127.0.0.1/x", "--iscsi", "InitialR2T=Yes"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not an iscsi:// URL"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// tgt's default Data-Out segment (8 KiB) splits a 1M write into 128 PDUs,
/// and the write probe says so; with the target's segment raised to 256 KiB
/// the writes cross in 4 PDUs and earn no warning. Reads never do.
#[test]
fn writes_in_a_targets_small_data_out_segments_are_warned() {
    if !lab_ready("iscsi data-out segments") {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    let lun = Backing::new(64 << 20);
    let t = nas.serve_iscsi(&lun.0, None, None).unwrap();
    let run = |rw: &str| {
        let args = ["disk", &t.url, "--rw", rw, "--bs", "1M", "--qd", "4", "--time", "500ms", "--ramp", "0s"];
        doc_of(&headroom_in(&nas, &[&args[..], &["--destructive", "--json", "--quiet"]].concat(), &[]))
    };
    let small_data_out = |doc: &ResultDoc| {
        doc.probes[0].warnings.iter().find(|w| w.code == WarningCode::IscsiSmallDataOut).map(|w| w.message.clone())
    };
    let default = run("write");
    assert_eq!(protocol(&default, 0).0.granted.get("MaxRecvDataSegmentLength_target"), Some(&8192));
    let warned = small_data_out(&default).expect("1M writes in tgt's 8 KiB PDUs are warned");
    assert!(warned.contains("each 1 MiB write crossed as 128 PDUs after 4 R2T requests"), "{warned}");
    assert_eq!(small_data_out(&run("read")), None, "reads cross in the initiator's segments");
    nas.set_iscsi_key(&t, "MaxRecvDataSegmentLength", 262_144).unwrap();
    let raised = run("write");
    assert_eq!(protocol(&raised, 0).0.granted.get("MaxRecvDataSegmentLength_target"), Some(&262_144));
    assert_eq!(small_data_out(&raised), None);
    assert!(protocol(&raised, 0).1 > 0.0, "writes completed in 256 KiB PDUs");
}
