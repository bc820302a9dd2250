//! `headroom disk nbd://...` against a real NBD server (nbdkit) in the lab
//! NAS namespace: the quick preset through the protocol, a 1M read at QD8
//! against the NBD ceiling of a tbf-shaped link, a blkio-throttled device
//! measured through the protocol, and what goes wrong (a wrong export, a
//! read-only export written to, the server killed or the link cut mid-test,
//! a server that answers garbage or nothing).

mod support;
use headroom_lab::blockdev::{write_md_superblock, BlkioThrottle, LoopDevice};
use headroom_lab::nas::nbd::{NbdBacking, NbdOptions};
use headroom_lab::nas::Nas;
use headroom_limits::protocol::{goodput_bits, DataDirection, Negotiated, StorageProtocol};
use headroom_limits::{tbf_tcp_goodput_bits, Framing};
use std::io::Write;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
use support::{headroom_bin, one_error_line};

const MIB: u64 = 1 << 20;

/// `headroom disk URL ARGS... --json` run as the client in the NAS's client namespace.
fn disk_in_client(nas: &Nas, url: &str, args: &[&str]) -> Output {
    nas.client()
        .command(headroom_bin().to_str().unwrap())
        .arg("disk")
        .arg(url)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("headroom runs")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "headroom failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a result document")
}

/// Fills `path` with incompressible bytes (an xorshift stream), `size` bytes.
fn fill_random(path: &std::path::Path, size: u64) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
    let mut chunk = vec![0u8; MIB as usize];
    for _ in 0..size / MIB {
        for word in chunk.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            word.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&chunk).unwrap();
    }
    f.sync_all().unwrap();
}

/// A file of random bytes in /dev/shm (memory speed, real data: no holes a
/// server could answer with a few bytes), removed on drop.
fn random_shm_file(size: u64) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().prefix("headroom-lab-nbd-").tempfile_in("/dev/shm").unwrap();
    f.as_file().set_len(size).unwrap();
    fill_random(f.path(), size);
    f
}

#[test]
fn quick_preset_runs_over_nbd_and_records_what_the_server_granted() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    let export = nas.serve_nbd("disk0", &NbdBacking::Memory(512 * MIB), NbdOptions::default()).unwrap();
    let args = ["--preset", "quick", "--size", "256M", "--time", "1s", "--ramp", "300ms", "--destructive", "--json"];
    let doc = json(&disk_in_client(&nas, &export.url, &args));
    let probes = doc["probes"].as_array().unwrap();
    let ids: Vec<&str> = probes.iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "seq1m-q8t1-read",
            "seq1m-q8t1-write",
            "rnd4k-q32t1-read",
            "rnd4k-q32t1-write",
            "rnd4k-q1t1-read",
            "rnd4k-q1t1-write"
        ]
    );
    for p in probes {
        let spec = &p["spec"];
        assert_eq!(spec["engine"], "nbd", "{spec}");
        assert!(p["summary"]["bytes_per_sec"].as_f64().unwrap() > 0.0, "{p}");
        let proto = &spec["protocol"];
        assert_eq!(proto["name"], "nbd");
        assert_eq!(proto["server"], format!("{}:{}", nas.addr(), export.port));
        assert_eq!(proto["version"], "newstyle-fixed");
        let granted = &proto["granted"];
        assert_eq!(granted["export_size"], 512 * MIB, "{proto}");
        assert_eq!((granted["can_flush"].as_u64(), granted["can_fua"].as_u64()), (Some(1), Some(1)), "{proto}");
        assert_eq!(granted["structured_replies"], 1, "{proto}");
        assert_eq!(granted["read_only"], 0, "{proto}");
    }
}

/// fio's nbd engine (the same libnbd), 1M sequential read at QD8 on `url`
/// from the client namespace, bits/s.
fn fio_seq_read_bits(nas: &Nas, url: &str) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let json_out = dir.path().join("fio.json");
    let out = nas
        .client()
        .command("fio")
        .args(["--name=nbd", "--ioengine=nbd", &format!("--uri={url}"), "--rw=read", "--bs=1M", "--iodepth=8"])
        .args(["--size=512m", "--time_based", "--runtime=4", "--ramp_time=1", "--output-format=json"])
        // fio's nbd engine prints "connected to NBD server" on stdout.
        .arg(format!("--output={}", json_out.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "fio: {}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json_out).unwrap()).unwrap();
    doc["jobs"][0]["read"]["bw_bytes"].as_f64().unwrap() * 8.0
}

#[test]
fn seq_read_at_qd8_reaches_the_nbd_ceiling_of_a_1gbit_link() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    headroom_lab::require_program!("fio");
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    nas.shape(1_000_000_000).unwrap();
    let data = random_shm_file(512 * MIB);
    let export = nas.serve_nbd("disk0", &NbdBacking::File(data.path().to_path_buf()), NbdOptions::default()).unwrap();
    let tcp = tbf_tcp_goodput_bits(1e9, &Framing::default());
    let ceiling =
        goodput_bits(tcp, StorageProtocol::Nbd, DataDirection::Read, MIB, &Negotiated::defaults(StorageProtocol::Nbd));
    // Interleaved with fio's nbd engine, the better of two runs each: a burst
    // of load from work outside the suite hurts neither side alone.
    let args = ["--rw", "read", "--bs", "1M", "--qd", "8", "--size", "512M", "--time", "4s", "--ramp", "1s", "--json"];
    let ours_of = || {
        json(&disk_in_client(&nas, &export.url, &args))["probes"][0]["summary"]["bytes_per_sec"].as_f64().unwrap() * 8.0
    };
    let pressure = headroom_lab::CpuPressure::start();
    let (h1, f1) = (ours_of(), fio_seq_read_bits(&nas, &export.url));
    let (h2, f2) = (ours_of(), fio_seq_read_bits(&nas, &export.url));
    let (ours, fio) = (h1.max(h2), f1.max(f2));
    let stalled = pressure.as_ref().map_or(0.0, |p| p.stalled_fraction());
    eprintln!(
        "NBD 1M QD8 read over tbf 1gbit: ceiling {:.1} Mb/s, headroom {:.1}/{:.1} ({:.4}), fio {:.1}/{:.1} ({:.4}), \
         cpu pressure {:.0}%",
        ceiling / 1e6,
        h1 / 1e6,
        h2 / 1e6,
        ours / ceiling,
        f1 / 1e6,
        f2 / 1e6,
        fio / ceiling,
        stalled * 100.0
    );
    assert!(
        ours <= 1.01 * ceiling,
        "{:.1} Mb/s is above the NBD ceiling {:.1} Mb/s: miscounted",
        ours / 1e6,
        ceiling / 1e6
    );
    if fio >= 0.97 * ceiling {
        assert!(
            ours >= 0.97 * ceiling,
            "{:.1} Mb/s is under 97% of the NBD ceiling {:.1} Mb/s",
            ours / 1e6,
            ceiling / 1e6
        );
    } else {
        // The host starved both clients (fio under 97% too): headroom must still match fio.
        eprintln!("host busy (fio reached {:.1}% of the ceiling): the 97% bar is not applied", fio / ceiling * 100.0);
        assert!(ours >= 0.98 * fio, "headroom {:.1} Mb/s under fio's {:.1} Mb/s", ours / 1e6, fio / 1e6);
    }
}

#[test]
fn a_throttled_device_is_measured_through_nbd_at_its_throttle() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    if !BlkioThrottle::available() {
        eprintln!("SKIPPED: cgroup v1 blkio is not mounted");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    // Backing file in memory, so the throttle (not the host disk) sets the rate;
    // filled through the file, so the loop device's own page cache is cold.
    let device = LoopDevice::new_in(std::path::Path::new("/dev/shm"), 256 * MIB).unwrap();
    fill_random(&device.backing, 256 * MIB);
    let rate = 40_000_000u64;
    let throttle = BlkioThrottle::new(&device.major_minor(), Some(rate), None, None, None).unwrap();
    let mut nas = Nas::new().unwrap();
    let opts = NbdOptions { throttle: Some(&throttle), ..NbdOptions::default() };
    let export = nas.serve_nbd("disk0", &NbdBacking::File(device.path.clone()), opts).unwrap();
    // 64 MiB read over 5 s at 40 MB/s: each block about three times, so a
    // page cache between nbdkit and the device would show as a figure above the throttle.
    let args = ["--rw", "read", "--bs", "1M", "--qd", "8", "--size", "64M", "--time", "4s", "--ramp", "1s", "--json"];
    let doc = json(&disk_in_client(&nas, &export.url, &args));
    let measured = doc["probes"][0]["summary"]["bytes_per_sec"].as_f64().unwrap();
    let ratio = measured / rate as f64;
    eprintln!("NBD 1M QD8 read of a device throttled at 40 MB/s: {:.2} MB/s, ratio {ratio:.4}", measured / 1e6);
    assert!((0.95..=1.05).contains(&ratio), "{:.2} MB/s is not within 5% of the 40 MB/s throttle", measured / 1e6);
}

#[test]
fn a_wrong_export_or_a_write_to_a_read_only_one_is_one_line() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    let mut nas = Nas::new().unwrap();
    let export = nas.serve_nbd("disk0", &NbdBacking::Memory(64 * MIB), NbdOptions::default()).unwrap();
    let wrong = export.url.replace("/disk0", "/disk9");
    let out = disk_in_client(&nas, &wrong, &["--rw", "read", "--time", "1s"]);
    one_error_line(&out, &["refused 'disk9'", &format!("{}:{}", nas.addr(), export.port)]);

    let ro =
        nas.serve_nbd("golden", &NbdBacking::Memory(64 * MIB), NbdOptions { read_only: true, ..Default::default() });
    let ro = ro.unwrap();
    let out = disk_in_client(&nas, &ro.url, &["--rw", "write", "--time", "1s", "--destructive"]);
    one_error_line(&out, &["/golden", "read-only"]);
    // Reading it is fine.
    let out = disk_in_client(&nas, &ro.url, &["--rw", "randread", "--time", "500ms", "--ramp", "0s", "--json"]);
    assert_eq!(json(&out)["probes"][0]["spec"]["protocol"]["granted"]["read_only"], 1);
}

/// An md member whose superblock sits at the export's end (metadata 0.90,
/// 1.0) is refused however small the tested region: the probe reads the
/// whole export's end, not the end of the first `--size` bytes.
#[test]
fn an_md_member_with_its_superblock_at_the_end_is_refused_whatever_the_size() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    headroom_lab::require_program!("blkid");
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    for metadata in ["1.0", "0.90"] {
        let backing = random_shm_file(64 * MIB);
        write_md_superblock(backing.path(), metadata).unwrap();
        assert_eq!(support::blkid_type(backing.path()), "linux_raid_member", "md {metadata}: the lab made no member");
        let before = std::fs::read(backing.path()).unwrap();
        let export = nas
            .serve_nbd(
                &format!("md{}", metadata.replace('.', "")),
                &NbdBacking::File(backing.path().into()),
                NbdOptions::default(),
            )
            .unwrap();
        let args = ["--rw", "write", "--bs", "1M", "--size", "8M", "--time", "500ms", "--ramp", "0s", "--destructive"];
        let out = disk_in_client(&nas, &export.url, &args);
        one_error_line(&out, &["linux_raid_member", "--force"]);
        assert!(std::fs::read(backing.path()).unwrap() == before, "md {metadata}: the export was written");
    }
}

#[test]
fn block_sizes_the_server_advertises_are_recorded_and_kept() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    let mut nas = Nas::new().unwrap();
    let opts = NbdOptions { block_sizes: Some((512, 4096, 65536)), ..NbdOptions::default() };
    let export = nas.serve_nbd("disk0", &NbdBacking::Memory(64 * MIB), opts).unwrap();
    let out = disk_in_client(&nas, &export.url, &["--rw", "randread", "--bs", "4k", "--time", "300ms", "--json"]);
    let granted = json(&out)["probes"][0]["spec"]["protocol"]["granted"].clone();
    assert_eq!(
        (&granted["block_size_minimum"], &granted["block_size_preferred"], &granted["block_size_maximum"]),
        (&512.into(), &4096.into(), &65536.into()),
        "{granted}"
    );
    // A request over the maximum would be refused by the server: said before sending.
    let out = disk_in_client(&nas, &export.url, &["--rw", "read", "--bs", "1M", "--time", "300ms"]);
    one_error_line(&out, &["/disk0", "at most 65536 bytes per request"]);
    // Under the minimum: not a multiple of the alignment.
    let out = disk_in_client(&nas, &export.url, &["--rw", "randread", "--bs", "256", "--time", "300ms"]);
    one_error_line(&out, &["--bs 256", "512 bytes"]);
}

/// IOPS of a 4K random read at `qd` on `url`.
fn randread_iops(nas: &Nas, url: &str, qd: &str) -> f64 {
    let args = ["--rw", "randread", "--bs", "4k", "--qd", qd, "--time", "2s", "--ramp", "500ms", "--json"];
    json(&disk_in_client(nas, url, &args))["probes"][0]["summary"]["iops"].as_f64().unwrap()
}

#[test]
fn the_queue_depth_is_nbd_requests_in_flight() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    let _machine = headroom_lab::hold_machine();
    // Every read takes 50 ms on the server, which works on up to 16 at once:
    // a client that really keeps QD requests on the wire gets QD / 50 ms.
    let delay = Duration::from_millis(50);
    let mut nas = Nas::new().unwrap();
    let opts = NbdOptions { read_delay: Some(delay), ..NbdOptions::default() };
    let export = nas.serve_nbd("disk0", &NbdBacking::Memory(64 * MIB), opts).unwrap();
    for (qd, expected) in [("1", 20.0), ("8", 160.0)] {
        let iops = randread_iops(&nas, &export.url, qd);
        eprintln!("QD{qd} with 50 ms per read on the server: {iops:.1} IOPS (expected {expected})");
        assert!((0.85..=1.02).contains(&(iops / expected)), "QD{qd}: {iops:.1} IOPS, expected ~{expected}");
    }
}

/// Request lines (not replies) of `kind` (Write, Flush) in an nbdkit request log.
fn requests<'a>(log: &'a str, kind: &str) -> Vec<&'a str> {
    let needle = format!(" {kind} id=");
    log.lines().filter(|l| l.contains(&needle)).collect()
}

#[test]
fn sync_modes_are_fua_and_flush_on_the_wire() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    let mut logs = Vec::new();
    for sync in ["dsync", "fsync"] {
        let opts = NbdOptions { log: true, ..NbdOptions::default() };
        let export = nas.serve_nbd("disk0", &NbdBacking::Memory(64 * MIB), opts).unwrap();
        let args = ["--rw", "randwrite", "--bs", "64k", "--qd", "4", "--sync", sync, "--time", "500ms", "--ramp", "0s"];
        let out = disk_in_client(&nas, &export.url, &[&args[..], &["--destructive", "--json"]].concat());
        json(&out);
        logs.push(std::fs::read_to_string(export.log.unwrap()).unwrap());
    }
    let (dsync, fsync) = (&logs[0], &logs[1]);
    let writes = requests(dsync, "Write");
    assert!(writes.len() > 10, "{dsync}");
    assert!(writes.iter().all(|l| l.contains(" fua=1 ")), "dsync: a write without FUA: {writes:?}");
    let (writes, flushes) = (requests(fsync, "Write"), requests(fsync, "Flush"));
    assert!(writes.len() > 10, "{fsync}");
    assert!(writes.iter().all(|l| l.contains(" fua=0 ")), "fsync: FUA set");
    // Writes still in flight when the test stops (at most the queue depth, 4)
    // complete without their flush: they are not counted either.
    assert!(flushes.len() + 4 >= writes.len(), "fsync: {} flushes for {} writes", flushes.len(), writes.len());
}

/// Starts a long read test, lets it run, breaks the server with `break_it`,
/// and returns how long headroom took to give up, and what it printed.
fn break_mid_test(nas: &Nas, url: &str, break_it: impl FnOnce()) -> (Duration, Output) {
    let child = nas
        .client()
        .command(headroom_bin().to_str().unwrap())
        .args(["disk", url, "--rw", "randread", "--qd", "8", "--time", "60s", "--ramp", "0s", "--size", "64M"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    break_it();
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    (t0.elapsed(), out)
}

#[test]
fn a_server_killed_mid_test_ends_the_run_in_one_line() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    let export = nas.serve_nbd("disk0", &NbdBacking::Memory(64 * MIB), NbdOptions::default()).unwrap();
    let (took, out) = break_mid_test(&nas, &export.url, || {
        // SAFETY: plain kill(2) of the nbdkit this test started.
        assert_eq!(unsafe { libc::kill(export.pid as i32, libc::SIGKILL) }, 0);
    });
    eprintln!("server killed: headroom gave up after {took:?}: {}", support::stderr(&out));
    one_error_line(&out, &[&export.url, "connection to the NBD server broke"]);
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_link_cut_mid_test_times_out_in_one_line() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("nbdkit");
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().unwrap();
    let export = nas.serve_nbd("disk0", &NbdBacking::Memory(64 * MIB), NbdOptions::default()).unwrap();
    let (took, out) = break_mid_test(&nas, &export.url, || nas.hosts.cut().unwrap());
    eprintln!("link cut: headroom gave up after {took:?}: {}", support::stderr(&out));
    one_error_line(&out, &[&export.url, "no reply from the NBD server"]);
    assert!(took < Duration::from_secs(12), "took {took:?}");
}

/// A TCP server on loopback that answers each client with `answer` (then
/// holds the connection open without a word), for as long as the test runs.
fn fake_server(answer: fn() -> Vec<u8>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(&answer());
            held.push(conn);
        }
    });
    port
}

#[test]
fn a_server_answering_garbage_or_nothing_is_one_line_and_no_hang() {
    // Loopback only: no namespace, no root needed.
    let garbage = fake_server(|| {
        let mut x = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
        (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    });
    // Right magic ("NBDMAGIC" + "IHAVEOPT"), then nonsense handshake flags and noise.
    let half = fake_server(|| {
        let mut v = b"NBDMAGICIHAVEOPT".to_vec();
        v.extend_from_slice(&[0xff; 64]);
        v
    });
    let silent = fake_server(Vec::new);
    for (port, needle, limit) in [(garbage, "handshake", 3), (half, "handshake", 3), (silent, "no NBD handshake", 8)] {
        let url = format!("nbd://127.0.0.1:{port}/disk0");
        let t0 = Instant::now();
        let out = support::headroom_plain().args(["disk", &url, "--rw", "read", "--time", "1s"]).output().unwrap();
        let took = t0.elapsed();
        one_error_line(&out, &[&url, needle]);
        assert!(took < Duration::from_secs(limit), "{url}: took {took:?}");
    }
}
