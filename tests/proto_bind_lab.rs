//! `headroom disk URL --interface NIC` through the protocol clients, proved
//! by the client's interface counters: the lab NAS is reachable through two
//! links, the routing table prefers the first, and the bytes of a read must
//! cross the link named (and, without the flag, the routed one). NBD
//! (nbdkit), iSCSI (tgt), SMB (Samba) and NFS (Ganesha, libnfs's
//! nfs_set_interface).

mod support;

use headroom_lab::nas::nbd::{NbdBacking, NbdOptions};
use headroom_lab::nas::smb::{SmbOptions, SMB_PASSWORD};
use headroom_lab::nas::Nas;
use headroom_lab::netns::SecondLink;
use headroom_result::{ProbeSpec, ProtocolInfo, ResultDoc};
use std::process::{Output, Stdio};
use support::{headroom_bin, stderr};

const MIB: u64 = 1 << 20;

/// A NAS with a second link to the client, routed behind the first.
fn two_link_nas() -> (Nas, SecondLink) {
    let nas = Nas::new().expect("lab NAS namespaces");
    let second = nas.hosts.second_link().expect("second link");
    nas.hosts.route_behind(&second).expect("route through the second link");
    (nas, second)
}

fn headroom_in(nas: &Nas, args: &[&str], env: &[(&str, &str)]) -> Output {
    nas.client()
        .command(headroom_bin().to_str().unwrap())
        .args(args)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("headroom runs")
}

fn protocol_of(out: &Output) -> (ProtocolInfo, u64) {
    assert!(out.status.success(), "headroom failed ({:?}): {}", out.status.code(), stderr(out));
    let doc = ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a result document");
    let p = &doc.probes[0];
    let ProbeSpec::Disk(spec) = &p.spec else { panic!("not a disk probe") };
    let bytes = p.summary.bytes.unwrap_or((p.summary.bytes_per_sec * p.summary.duration_s) as u64);
    (spec.protocol.clone().expect("spec.protocol"), bytes)
}

/// Bytes each client interface (first link, second link) carried while
/// `args` ran, and what headroom recorded.
fn traffic(nas: &Nas, second: &SecondLink, args: &[&str], env: &[(&str, &str)]) -> (u64, u64, ProtocolInfo, u64) {
    let client = nas.client();
    let (first0, second0) =
        (client.traffic_bytes(&nas.hosts.dev_b).unwrap(), client.traffic_bytes(&second.dev_b).unwrap());
    let out = headroom_in(nas, args, env);
    let (first1, second1) =
        (client.traffic_bytes(&nas.hosts.dev_b).unwrap(), client.traffic_bytes(&second.dev_b).unwrap());
    let (info, read) = protocol_of(&out);
    (first1 - first0, second1 - second0, info, read)
}

/// The read's bytes crossed `used` and (almost) none crossed `idle`.
fn assert_through(what: &str, used: u64, idle: u64, read: u64) {
    eprintln!("{what}: {} MiB read; chosen link {} MiB, other link {} KiB", read / MIB, used / MIB, idle >> 10);
    assert!(read >= 8 * MIB, "{what}: too little was read to tell ({read} bytes)");
    assert!(used >= read, "{what}: the chosen link carried {used} bytes, less than the {read} read");
    // What the other link may carry: neighbour discovery and the like.
    assert!(idle < MIB, "{what}: the other link carried {idle} bytes");
}

fn read_args(url: &str) -> Vec<&str> {
    vec!["disk", url, "--rw", "read", "--bs", "1M", "--qd", "4", "--size", "64M", "--time", "1s", "--ramp", "0s"]
}

fn needs(what: &str, programs: &[&str]) -> bool {
    if !headroom_lab::is_root() {
        eprintln!("SKIPPED {what}: needs root (namespaces, SO_BINDTODEVICE)");
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

#[test]
fn nbd_reads_cross_the_interface_named_and_otherwise_the_routed_one() {
    if !needs("nbd --interface", &["ip", "nbdkit"]) {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, second) = two_link_nas();
    let export = nas.serve_nbd("disk0", &NbdBacking::Memory(128 * MIB), NbdOptions::default()).unwrap();
    let url = export.url.clone();

    let mut args = read_args(&url);
    args.extend(["--interface", &second.dev_b, "--json"]);
    let (first, through, info, read) = traffic(&nas, &second, &args, &[]);
    assert_through("nbd --interface SECOND", through, first, read);
    assert_eq!(info.interface.as_deref(), Some(second.dev_b.as_str()), "{info:?}");
    assert_eq!(info.source_address, Some(second.addr_b.to_string()), "{info:?}");

    // Without the flag the routing table chooses: the first link.
    let mut args = read_args(&url);
    args.push("--json");
    let (first, through, info, read) = traffic(&nas, &second, &args, &[]);
    assert_through("nbd, routed", first, through, read);
    assert_eq!(info.interface.as_deref(), Some(nas.hosts.dev_b.as_str()), "{info:?}");

    // --bind with the second link's address: the kernel sends it by the
    // routing table (the first link) from that address; recorded as such.
    let addr = second.addr_b.to_string();
    let mut args = read_args(&url);
    args.extend(["--bind", &addr, "--json"]);
    let (_, _, info, _) = traffic(&nas, &second, &args, &[]);
    assert_eq!(info.source_address, Some(addr), "{info:?}");
}

#[test]
fn iscsi_reads_cross_the_interface_named() {
    if !needs("iscsi --interface", &["ip", "tgtd", "tgtadm"]) {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, second) = two_link_nas();
    // tmpfs: tgt's O_DIRECT reads at memory speed, not this VM's disk's.
    let lun = tempfile::Builder::new().prefix("headroom-lab-bind-").tempfile_in("/dev/shm").unwrap();
    lun.as_file().set_len(128 * MIB).unwrap();
    let t = nas.serve_iscsi(lun.path(), None, None).unwrap();
    let mut args = read_args(&t.url);
    args.extend(["--interface", &second.dev_b, "--json"]);
    let (first, through, info, read) = traffic(&nas, &second, &args, &[]);
    assert_through("iscsi --interface SECOND", through, first, read);
    assert_eq!(info.interface.as_deref(), Some(second.dev_b.as_str()), "{info:?}");
}

#[test]
fn nfs_reads_cross_the_interface_named() {
    if !needs("nfs --interface", &["ip", "ganesha.nfsd", "rpcbind", "nfs-ls", "unshare"]) {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, second) = two_link_nas();
    let dir = nas.subdir("export").expect("export dir");
    let export = nas.serve_nfs(&dir, None).expect("ganesha");
    let mut args = read_args(&export.url);
    args.extend(["--interface", &second.dev_b, "--json"]);
    // The test file is written first (laid out), then read: both through the NIC.
    let (first, through, info, read) = traffic(&nas, &second, &args, &[]);
    assert_through("nfs --interface SECOND", through, first, read);
    assert_eq!(info.interface.as_deref(), Some(second.dev_b.as_str()), "{info:?}");
    assert_eq!(info.source_address, Some(second.addr_b.to_string()), "{info:?}");
}

#[test]
fn smb_reads_cross_the_interface_named() {
    if !needs("smb --interface", &["ip", "smbd", "pdbedit"]) {
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, second) = two_link_nas();
    let dir = nas.subdir("share").expect("share dir");
    let export = nas.serve_smb(&dir, SmbOptions::default()).expect("smbd");
    let url = export.url_with_user();
    let mut args = read_args(&url);
    args.extend(["--interface", &second.dev_b, "--json"]);
    let env = [("HEADROOM_SMB_PASSWORD", SMB_PASSWORD)];
    let (first, through, info, read) = traffic(&nas, &second, &args, &env);
    assert_through("smb --interface SECOND", through, first, read);
    assert_eq!(info.interface.as_deref(), Some(second.dev_b.as_str()), "{info:?}");
}

#[test]
fn a_missing_interface_or_a_foreign_address_is_one_line_and_exit_2() {
    for (flag, value, says) in [
        ("--interface", "nosuch0", "--interface nosuch0: this machine has no such interface"),
        ("--bind", "192.0.2.9", "--bind 192.0.2.9: not an address of this machine"),
    ] {
        let out = std::process::Command::new(headroom_bin())
            .args(["disk", "nbd://127.0.0.1/x", flag, value])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
    }
    let out = std::process::Command::new(headroom_bin()).args(["disk", "/tmp", "--interface", "lo"]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--interface is for nfs://, smb://, iscsi:// and nbd:// targets"), "{err}");
}

/// `run --server NAS --share nbd://NAS/... --interface SECOND`: the network
/// probes and the share's reads both leave through the NIC named, and the
/// verdict holds the path against it, not against the routed one.
#[test]
fn run_with_an_interface_measures_and_holds_the_path_through_it() {
    let _machine = headroom_lab::hold_machine();
    if !needs("run --interface", &["nbdkit"]) {
        return;
    }
    let (mut nas, second) = two_link_nas();
    let export = nas.serve_nbd("disk0", &NbdBacking::Memory(128 * MIB), NbdOptions::default()).unwrap();
    let addr = nas.addr().to_string();
    nas.serve_headroom(headroom_bin(), &[]).expect("headroom serve on the NAS");
    let client = nas.client();
    let before = (client.traffic_bytes(&nas.hosts.dev_b).unwrap(), client.traffic_bytes(&second.dev_b).unwrap());
    let args = ["run", "--server", &addr, "--share", &export.url, "--interface", &second.dev_b, "--json", "--quiet"];
    let out = headroom_in(&nas, &args, &[]);
    let after = (client.traffic_bytes(&nas.hosts.dev_b).unwrap(), client.traffic_bytes(&second.dev_b).unwrap());
    assert!(out.status.success(), "run failed: {}", stderr(&out));
    let (first, through) = (after.0 - before.0, after.1 - before.1);
    eprintln!("run --interface SECOND: chosen link {} MiB, routed link {} KiB", through / MIB, first >> 10);
    assert!(through > 64 * MIB, "the chosen link carried only {through} bytes");
    assert!(first < MIB, "the routed link carried {first} bytes");
    let doc = ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a result document");
    let verdict = doc.verdict.as_ref().expect("a verdict");
    let nics: Vec<&str> =
        verdict.directions.iter().flat_map(|d| &d.hops).filter(|h| h.hop == "nic").map(|h| h.name.as_str()).collect();
    assert!(!nics.is_empty() && nics.iter().all(|n| n.contains(&second.dev_b)), "NIC hops {nics:?}");
}
