//! `headroom disk URL --jobs N --bind A,B` (and `--interface a,b`): each
//! job's connection leaves from its turn of the sources (round robin), the
//! result records which jobs left from which source and what each carried,
//! and the table says the spread. On loopback against nbdkit (no root: the
//! record and the split), and in the lab over two links shaped with tbf to
//! the same rate: iSCSI (tgt) and SMB (Samba) sessions spread over both
//! links reach about twice what the same jobs reach from one source, each
//! source near one link's ceiling, as the links' own counters confirm.

mod support;

use headroom_lab::nas::smb::{SmbOptions, SMB_PASSWORD};
use headroom_lab::nas::Nas;
use headroom_lab::netns::SecondLink;
use headroom_limits::protocol::{goodput_bits, DataDirection, Negotiated, StorageProtocol};
use headroom_limits::{tbf_tcp_goodput_bits, Framing};
use headroom_result::{ProbeSpec, ProtocolInfo, ResultDoc};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::{headroom_bin, one_error_line, stderr};

const MIB: u64 = 1 << 20;

/// The one probe's protocol record and the bytes it measured.
fn measured(out: &Output) -> (ProtocolInfo, u64, f64) {
    assert!(out.status.success(), "headroom failed ({:?}): {}", out.status.code(), stderr(out));
    let doc = ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a result document");
    let p = &doc.probes[0];
    let ProbeSpec::Disk(spec) = &p.spec else { panic!("not a disk probe") };
    (spec.protocol.clone().expect("spec.protocol"), p.summary.bytes.expect("summary.bytes"), p.summary.bytes_per_sec)
}

/// nbdkit serving 64 MiB of memory on 127.0.0.1; killed on drop.
struct Nbdkit(std::process::Child, u16);

impl Nbdkit {
    fn start() -> Nbdkit {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("nbdkit")
            .args(["--foreground", "--ip-addr", "127.0.0.1", "--port", &port.to_string(), "memory", "64M"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        Nbdkit(child, port)
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn jobs_take_the_sources_round_robin_and_each_ones_bytes_are_recorded() {
    headroom_lab::require_program!("nbdkit");
    let nbdkit = Nbdkit::start();
    let url = format!("nbd://127.0.0.1:{}", nbdkit.1);
    let args = ["disk", &url, "--rw", "read", "--bs", "64k", "--qd", "2", "--jobs", "3", "--size", "16M"];
    let run = |extra: &[&str]| {
        Command::new(headroom_bin())
            .args(args)
            .args(["--time", "1s", "--ramp", "0s", "--bind", "127.0.0.1,127.0.0.2"])
            .args(extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let (info, bytes, _) = measured(&run(&["--json"]));
    let places: Vec<(Option<&str>, &[u32])> =
        info.sources.iter().map(|s| (s.source_address.as_deref(), &s.jobs[..])).collect();
    assert_eq!(places, [(Some("127.0.0.1"), &[0, 2][..]), (Some("127.0.0.2"), &[1][..])], "{info:?}");
    for s in &info.sources {
        assert!(s.bytes.unwrap() > 0 && s.bytes_per_sec.unwrap() > 0.0, "{s:?}");
    }
    let split: u64 = info.sources.iter().map(|s| s.bytes.unwrap()).sum();
    assert_eq!(split, bytes, "the sources' bytes add up to the probe's: {info:?}");

    let out = run(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("spread over 2 sources")).unwrap_or_else(|| panic!("{text}"));
    // 127.0.0.2 is on lo only as part of 127.0.0.0/8: no interface holds it by name.
    assert!(line.contains("127.0.0.1 via lo (jobs 0,2)") && line.contains("127.0.0.2 (job 1)"), "{line}");

    // One source: nothing to spread, nothing recorded or shown beyond today's.
    let one = Command::new(headroom_bin())
        .args(args)
        .args(["--time", "300ms", "--ramp", "0s", "--bind", "127.0.0.2", "--json"])
        .output()
        .unwrap();
    let (info, _, _) = measured(&one);
    assert!(info.sources.is_empty(), "{info:?}");
    assert_eq!(info.source_address.as_deref(), Some("127.0.0.2"));
}

#[test]
fn a_bad_entry_or_lists_that_do_not_pair_is_one_line_and_exit_2() {
    for (flags, says) in [
        (&["--bind", "127.0.0.1,192.0.2.9"][..], &["--bind 192.0.2.9: not an address of this machine"][..]),
        (&["--interface", "lo,nosuch0"][..], &["--interface nosuch0: this machine has no such interface"][..]),
        (
            &["--bind", "127.0.0.1,127.0.0.2", "--interface", "lo,lo,lo"][..],
            &["--bind names 2 sources and --interface 3"][..],
        ),
    ] {
        let out = Command::new(headroom_bin()).args(["disk", "nbd://127.0.0.1:1/x"]).args(flags).output().unwrap();
        one_error_line(&out, says);
    }
}

/// A NAS reached through two links, each shaped both ways with tbf at
/// `rate` bits/s; the second link's route sits behind the first's.
fn two_shaped_links(rate: u64) -> (Nas, SecondLink) {
    let nas = Nas::new().expect("lab NAS namespaces");
    let second = nas.hosts.second_link().expect("second link");
    nas.hosts.route_behind(&second).expect("route through the second link");
    nas.shape(rate).expect("tbf on the first link");
    nas.hosts.shape_second(&second, rate).expect("tbf on the second link");
    (nas, second)
}

/// Runs headroom in the client namespace; returns its output and the bytes
/// each client link (first, second) carried meanwhile.
fn run_counted(nas: &Nas, second: &SecondLink, args: &[&str], env: &[(&str, &str)]) -> (Output, u64, u64) {
    let client = nas.client();
    let before = (client.traffic_bytes(&nas.hosts.dev_b).unwrap(), client.traffic_bytes(&second.dev_b).unwrap());
    let out = client
        .command(headroom_bin().to_str().unwrap())
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("headroom runs");
    let after = (client.traffic_bytes(&nas.hosts.dev_b).unwrap(), client.traffic_bytes(&second.dev_b).unwrap());
    (out, after.0 - before.0, after.1 - before.1)
}

fn needs(what: &str, programs: &[&str]) -> bool {
    if !headroom_lab::is_root() {
        eprintln!("SKIPPED {what}: needs root (namespaces, tbf, SO_BINDTODEVICE)");
        return false;
    }
    for program in programs {
        if !headroom_lab::has_program(program) {
            eprintln!("SKIPPED {what}: `{program}` is not installed (run scripts/install-deps.sh)");
            return false;
        }
    }
    true
}

/// Both links' tbf rate: slow enough that neither this machine's CPU nor
/// the servers are the limit, so each link's ceiling is the figure.
const RATE: u64 = 200_000_000;

/// The read's figures with one source and with two, held against one link's
/// ceiling for `protocol`.
fn assert_doubles(
    what: &str,
    protocol: StorageProtocol,
    one: (Output, u64, u64),
    two: (Output, u64, u64),
    second_is_idle_with_one: bool,
) {
    let tcp = tbf_tcp_goodput_bits(RATE as f64, &Framing::default());
    let ceiling = goodput_bits(tcp, protocol, DataDirection::Read, MIB, &Negotiated::defaults(protocol)) / 8.0;
    let (info1, _, rate1) = measured(&one.0);
    let (info2, bytes2, rate2) = measured(&two.0);
    let per: Vec<f64> = info2.sources.iter().map(|s| s.bytes_per_sec.unwrap()).collect();
    eprintln!(
        "{what} 1M QD2 read, 2 jobs, tbf {} Mb/s per link (ceiling {:.1} MB/s): one source {:.1} MB/s \
         (links {} / {} MiB); two sources {:.1} MB/s = {} (links {} / {} MiB)",
        RATE / 1_000_000,
        ceiling / 1e6,
        rate1 / 1e6,
        one.1 / MIB,
        one.2 / MIB,
        rate2 / 1e6,
        per.iter().map(|r| format!("{:.1}", r / 1e6)).collect::<Vec<_>>().join(" + "),
        two.1 / MIB,
        two.2 / MIB
    );
    assert!(info1.sources.is_empty(), "one source records no spread: {info1:?}");
    assert_eq!(info2.sources.len(), 2, "{info2:?}");
    assert_eq!(info2.sources.iter().map(|s| s.jobs.clone()).collect::<Vec<_>>(), [vec![0], vec![1]], "{info2:?}");
    // Completions are counted when they land: the I/Os in flight across the
    // measured window's edges (jobs x QD x 1 MiB) move a figure by a few
    // percent at this rate.
    let over = 1.05 * ceiling;
    assert!(rate1 <= over, "{what}: one source above one link's ceiling: miscounted");
    if second_is_idle_with_one {
        assert!(one.2 < MIB, "{what}: one source, yet the second link carried {} bytes", one.2);
    }
    // Each link carried its job's half of the read (the other direction's
    // requests and acknowledgements add a little).
    for (link, carried) in [("first", two.1), ("second", two.2)] {
        assert!(carried >= bytes2 * 2 / 5, "{what}: the {link} link carried {carried} of {bytes2} bytes read");
    }
    for (s, r) in info2.sources.iter().zip(&per) {
        assert!(*r <= over, "{what}: {s:?} is above one link's ceiling: miscounted");
        assert!(*r >= 0.7 * ceiling, "{what}: {s:?} is far below one link's ceiling {:.1} MB/s", ceiling / 1e6);
    }
    assert!(rate2 >= 1.5 * rate1, "{what}: two links gave {rate2:.0} B/s, one {rate1:.0} B/s");
}

fn read_args(url: &str) -> Vec<&str> {
    let time = ["--time", "4s", "--ramp", "1s", "--json"];
    let mut v = vec!["disk", url, "--rw", "read", "--bs", "1M", "--qd", "2", "--jobs", "2", "--size", "64M"];
    v.extend(time);
    v
}

#[test]
fn iscsi_sessions_bound_to_two_addresses_reach_twice_one_links_ceiling() {
    if !needs("iscsi --bind A,B", &["ip", "tc", "tgtd", "tgtadm"]) {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, second) = two_shaped_links(RATE);
    // tmpfs: tgt reads at memory speed, not this VM's disk's.
    let lun = tempfile::Builder::new().prefix("headroom-lab-multinic-").tempfile_in("/dev/shm").unwrap();
    lun.as_file().set_len(64 * MIB).unwrap();
    let t = nas.serve_iscsi(lun.path(), None, None).unwrap();
    let (first_addr, second_addr) = (nas.hosts.addr_b.to_string(), second.addr_b.to_string());
    let both = format!("{first_addr},{second_addr}");
    let mut one = read_args(&t.url);
    one.extend(["--bind", &first_addr]);
    let mut two = read_args(&t.url);
    two.extend(["--bind", &both]);
    let one = run_counted(&nas, &second, &one, &[]);
    let two = run_counted(&nas, &second, &two, &[]);
    let (info, _, _) = measured(&two.0);
    let addrs: Vec<Option<&str>> = info.sources.iter().map(|s| s.source_address.as_deref()).collect();
    assert_eq!(addrs, [Some(first_addr.as_str()), Some(second_addr.as_str())], "{info:?}");
    assert_doubles("iSCSI --bind A,B", StorageProtocol::Iscsi, one, two, true);
}

#[test]
fn smb_connections_through_two_interfaces_reach_twice_one_links_ceiling() {
    if !needs("smb --interface a,b", &["ip", "tc", "smbd", "pdbedit"]) {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, second) = two_shaped_links(RATE);
    let dir = nas.subdir("share").expect("share dir");
    let export = nas.serve_smb(&dir, SmbOptions::default()).expect("smbd");
    let url = export.url_with_user();
    let env = [("HEADROOM_SMB_PASSWORD", SMB_PASSWORD)];
    let first_nic = nas.hosts.dev_b.clone();
    let both = format!("{first_nic},{}", second.dev_b);
    let mut one = read_args(&url);
    one.extend(["--interface", &first_nic]);
    let mut two = read_args(&url);
    two.extend(["--interface", &both]);
    // The test file is laid out through job 0's source, the first link.
    let one = run_counted(&nas, &second, &one, &env);
    let two = run_counted(&nas, &second, &two, &env);
    let (info, _, _) = measured(&two.0);
    let nics: Vec<Option<&str>> = info.sources.iter().map(|s| s.interface.as_deref()).collect();
    assert_eq!(nics, [Some(first_nic.as_str()), Some(second.dev_b.as_str())], "{info:?}");
    assert_doubles("SMB --interface a,b", StorageProtocol::Smb, one, two, true);
}
