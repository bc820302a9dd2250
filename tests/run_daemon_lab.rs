//! The file-server daemon starved of CPU, in the lab: the NAS namespace
//! serves a share (Samba's smbd, nfs-ganesha) whose daemon a cgroup v1 cpu
//! quota holds to a few percent of one core, while the share's disk and the
//! gigabit link could both carry 100+ MB/s. `headroom run --server NAS
//! --remote-path DIR --share URL` must name the NAS's CPU and the daemon,
//! from the daemon's own cgroup counters (the serve process beside it is not
//! limited): the kernel's own throttle count is the ground truth. Without
//! `--remote-path` too (the smbd case): a serve on the share's server is
//! watched all the same.

use headroom_lab::cpu::CpuQuota;
use headroom_lab::nas::nbd::{NbdBacking, NbdOptions};
use headroom_lab::nas::smb::{SmbOptions, SMB_PASSWORD};
use headroom_lab::nas::Nas;
use headroom_limits::{tbf_rate_emulating, Framing};
use headroom_result::{Bottleneck, Direction, Hop, ResultDoc, Side};
use std::process::Stdio;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_headroom")
}

/// A NAS with `headroom serve --allow-path DIR` on it, its link shaped like
/// gigabit Ethernet when `gigabit`.
fn nas_with_serve(gigabit: bool) -> (Nas, std::path::PathBuf) {
    let mut nas = Nas::new().expect("lab NAS");
    if gigabit {
        nas.shape(tbf_rate_emulating(1e9, &Framing::default()) as u64).expect("tbf");
    }
    let dir = nas.subdir("export").expect("export dir");
    nas.serve_headroom(std::path::Path::new(exe()), &[&dir]).expect("headroom serve on the NAS");
    (nas, dir)
}

/// ganesha's quota test's flags: gigabit, and 1 s per test (the preset's
/// warm-ups stay). ganesha held to 5 % of a core is throttled from its first
/// period of 100 ms, so each test's second holds ten held periods; the verdict
/// and the kernel's throttle count are checked as before. (smbd keeps the
/// preset's times: at 1 s its run took 139 s instead of about 60.)
const GANESHA_QUOTA_RUN: [&str; 4] = ["--link", "1gbe", "--time", "1s"];

/// `run --server NAS [--remote-path DIR] --share URL --json --preset seq` from the
/// client, `extra` added; `dir` None: the server's own disk is not measured.
fn run_over_share(nas: &Nas, dir: Option<&std::path::Path>, url: &str, extra: &[&str]) -> ResultDoc {
    let remote_path = dir.map(|d| ["--remote-path", d.to_str().unwrap()]);
    let out = nas
        .client()
        .command(exe())
        .args(["run", "--server", &nas.addr().to_string()])
        .args(remote_path.iter().flatten())
        // The verdict is what these tests check, and it weighs only the 1 MiB
        // sequential tests: the seq preset runs those alone.
        .args(["--share", url, "--json", "--preset", "seq"])
        .args(extra)
        .env("HEADROOM_SMB_PASSWORD", SMB_PASSWORD)
        .stdin(Stdio::null())
        .output()
        .expect("headroom run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a result document")
}

/// The NAS's CPU during the first probe over the share (it carries the serving daemon's figures).
fn nas_cpu_over_the_share(doc: &ResultDoc) -> headroom_result::CpuLoad {
    doc.probes
        .iter()
        .find(|p| p.host.is_none() && matches!(&p.spec, headroom_result::ProbeSpec::Disk(d) if d.protocol.is_some()))
        .expect("a probe over the share")
        .cpu_load(Side::Remote)
        .expect("the NAS's CPU during the share probe")
}

/// Every direction blames the NAS's CPU and names `daemon` with its
/// throttled cgroup. A forking server (smbd) serves each client from a child
/// of the process the lab started: any process of that name may be named.
fn assert_daemon_named(doc: &ResultDoc, daemon: &str, quota: &CpuQuota) {
    let (periods, throttled) = quota.throttle_counts().expect("cpu.stat");
    assert!(throttled * 2 > periods, "ground truth: the quota held {daemon} ({throttled} of {periods} periods)");
    let verdict = doc.verdict.as_ref().expect("a verdict");
    for dir in &verdict.directions {
        let text = &dir.explanation;
        assert_eq!(dir.bottleneck, Bottleneck::Cpu, "{:?}: {text}", dir.direction);
        assert_eq!(dir.limiting_hop, Some(Hop::Cpu), "{:?}: {text}", dir.direction);
        assert_eq!(dir.side, Some(Side::Remote), "{text}");
        assert!(
            text.contains(&format!("{daemon} (pid "))
                && text.contains("was throttled in")
                && text.contains("of its cgroup's"),
            "{:?}: {text}",
            dir.direction
        );
    }
    // The share probes carry the daemon's own figures.
    let load = nas_cpu_over_the_share(doc);
    let served = load.serving.iter().find(|s| s.name == daemon).expect("the daemon was followed");
    let cg = served.cgroup.as_ref().expect("its cgroup");
    assert_eq!((cg.quota_us, cg.period_us), quota.limit().expect("the group's quota"), "{cg:?}");
}

#[test]
fn a_starved_smbd_is_named_as_the_nas_cpu() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("smbd");
    if !CpuQuota::available() {
        println!("SKIPPED: no cgroup v1 cpu bandwidth control here");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, dir) = nas_with_serve(true);
    let export = nas.serve_smb(&dir, SmbOptions::default()).expect("smbd");
    // 2 %: smbd then serves 19-26 MB/s over the 118 MB/s link, a fifth of it,
    // and lays out the test file in half the time it took at 1 % (5 % reached
    // 77-100 MB/s, too near the link to be named with certainty).
    let quota = CpuQuota::new(2000, 100_000).expect("a 2% cpu group");
    quota.add_pid(export.pid).expect("smbd into the group");
    let doc = run_over_share(&nas, None, &export.url_with_user(), &["--link", "1gbe"]);
    assert!(doc.peers.is_empty(), "the server's own disk was not asked for");
    assert_daemon_named(&doc, "smbd", &quota);
}

#[test]
fn a_starved_ganesha_is_named_as_the_nas_cpu() {
    headroom_lab::require_root!();
    for program in ["ganesha.nfsd", "rpcbind", "unshare"] {
        headroom_lab::require_program!(program);
    }
    if !CpuQuota::available() {
        println!("SKIPPED: no cgroup v1 cpu bandwidth control here");
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, dir) = nas_with_serve(true);
    let export = nas.serve_nfs(&dir, None).expect("ganesha");
    let quota = CpuQuota::new(5000, 100_000).expect("a 5% cpu group");
    quota.add_pid(export.pid).expect("ganesha into the group");
    let doc = run_over_share(&nas, Some(&dir), &export.url, &GANESHA_QUOTA_RUN);
    assert_daemon_named(&doc, "ganesha.nfsd", &quota);
}

/// nbdkit with one worker thread decompressing an xz image for every read:
/// no quota, the link unshaped, the NAS's disk fast; the one thread at a
/// full core (of two here, of eight on a NAS) is the limit and is named.
#[test]
fn a_single_threaded_daemon_at_a_full_core_is_named_as_the_nas_cpu() {
    headroom_lab::require_root!();
    for program in ["nbdkit", "xz", "base64"] {
        headroom_lab::require_program!(program);
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, dir) = nas_with_serve(false);
    let export =
        nas.serve_nbd("packed", &NbdBacking::Xz(xz_image(&dir)), one_thread()).expect("nbdkit with the xz filter");
    let doc = run_over_share(&nas, Some(&dir), &export.url, &[]);
    let verdict = doc.verdict.as_ref().expect("a verdict");
    let read = verdict.directions.iter().find(|d| d.direction == Direction::Read).expect("reads");
    let text = &read.explanation;
    assert_eq!((read.bottleneck, read.side), (Bottleneck::Cpu, Some(Side::Remote)), "{text}");
    // A machine busy with other work (outside CI) gives the thread less than
    // a core; the verdict then says it shared the core, still the NAS's CPU.
    let full_or_shared = text.contains("kept one core") || text.contains("wanted a whole core");
    assert!(text.contains(&format!("nbdkit (pid {})", export.pid)) && full_or_shared, "{text}");
    // Ground truth beside the verdict: the share ran far below the NAS's own disk and the network.
    let over_nbd = read.hops.iter().find(|h| h.hop == Hop::Client).and_then(|h| h.measured_bytes_per_sec).unwrap();
    let net = doc
        .probes
        .iter()
        .filter(|p| matches!(&p.spec, headroom_result::ProbeSpec::Net(n) if n.test == "tcp_reverse"))
        .map(|p| p.summary.bytes_per_sec)
        .fold(0.0, f64::max);
    assert!(net > over_nbd * 3.0, "the network ({net} B/s) is not what held the share: {text}");
}

/// An xz image of text-like data in `dir`: xz works for it on decompression
/// (random data would be stored as is).
fn xz_image(dir: &std::path::Path) -> std::path::PathBuf {
    let image = dir.join("image.xz");
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg("head -c 48M /dev/urandom | base64 -w 0 | head -c 64M | xz -T1 -1 --block-size=1MiB > \"$0\"")
        .arg(&image)
        .status()
        .expect("sh");
    assert!(made.success(), "making the xz image");
    image
}

/// nbdkit read-only with one worker thread.
fn one_thread() -> NbdOptions<'static> {
    NbdOptions { read_only: true, threads: Some(1), ..NbdOptions::default() }
}

/// A busy loop (`yes`) pinned to one CPU, killed when dropped.
struct PinnedHog(std::process::Child);

impl PinnedHog {
    fn on(cpu: u32) -> PinnedHog {
        let child = std::process::Command::new("taskset")
            .args(["-c", &cpu.to_string(), "yes"])
            .stdout(Stdio::null())
            .spawn()
            .expect("taskset yes");
        PinnedHog(child)
    }
}

impl Drop for PinnedHog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The same one-threaded nbdkit, pinned to one CPU that a busy loop shares:
/// its thread wants a whole core and gets about half. The verdict names the
/// NAS's CPU as shared, with the time the thread waited for it and the busy
/// loop beside it; the pinning is the ground truth.
#[test]
fn a_daemon_sharing_its_core_with_other_work_is_named_with_what_held_it() {
    headroom_lab::require_root!();
    for program in ["nbdkit", "xz", "base64", "taskset", "yes"] {
        headroom_lab::require_program!(program);
    }
    let _machine = headroom_lab::hold_machine();
    let (mut nas, dir) = nas_with_serve(false);
    let export =
        nas.serve_nbd("packed", &NbdBacking::Xz(xz_image(&dir)), one_thread()).expect("nbdkit with the xz filter");
    let pinned = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", "0", &export.pid.to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("taskset");
    assert!(pinned.success(), "pinning nbdkit to CPU 0");
    let hog = PinnedHog::on(0);
    let doc = run_over_share(&nas, None, &export.url, &["--time", "1s"]);
    let verdict = doc.verdict.as_ref().expect("a verdict");
    let read = verdict.directions.iter().find(|d| d.direction == Direction::Read).expect("reads");
    let text = &read.explanation;
    println!("verdict: {text}\nchecks: {:?}", read.checks);
    assert_eq!((read.bottleneck, read.side), (Bottleneck::Cpu, Some(Side::Remote)), "{text}");
    assert!(
        text.contains(&format!("nbdkit (pid {}) wanted a whole core", export.pid))
            && text.contains(&format!("yes (pid {})", hog.0.id())),
        "{text}"
    );
    // The figures under the words: the thread ran less than a core and waited for it.
    let load = nas_cpu_over_the_share(&doc);
    let thread = load.serving.iter().find_map(|s| s.busiest_thread.as_ref()).expect("nbdkit's busiest thread");
    let waited = thread.waiting_percent.expect("the kernel counts run-queue waits");
    assert!(thread.percent < 90.0 && waited >= 10.0, "{thread:?}");
}
