//! `headroom fleet` against real agents: `headroom serve` processes, each
//! testing a disk of known speed (its own loop device behind a blkio
//! throttle, mounted at the same path in its own mount namespace, as on real
//! hosts), gathered into one document whose sum must match the throttles;
//! an agent killed mid-run, agents down or with the wrong token, and host
//! lists that are wrong before anything starts.
//!
//! Long (about 560 lines): 9 tests sharing the agents' lab (namespaces,
//! throttles, mount namespaces) and its helpers.

mod support;

use headroom_lab::blockdev::{BlkioThrottle, LoopDevice, Mount};
use headroom_lab::netns::{ChildGuard, Star};
use headroom_limits::{tbf_tcp_goodput_bits, Framing};
use headroom_result::ResultDoc;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{headroom_bin, headroom_plain, one_error_line, stderr};

const MB: u64 = 1_000_000;
const TOKEN: &str = "fleet-lab-token";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_listening(port: u16) {
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "serve on port {port} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One agent: a loop device of memory speed throttled to a known read rate,
/// mounted at `common` in the agent's own mount namespace, and the
/// `headroom serve --allow-path common` using it.
struct Agent {
    server: ChildGuard,
    port: u16,
    /// The agent's disk as this (root) namespace sees it.
    real: Mount,
    _throttle: BlkioThrottle,
    _device: LoopDevice,
}

impl Agent {
    fn new(common: &Path, read_bytes_per_sec: u64) -> Agent {
        let device = LoopDevice::new_in(Path::new("/dev/shm"), 256 << 20).expect("loop device");
        device.mkfs("ext4").expect("mkfs");
        let real = Mount::device(&device.path, "ext4").expect("mount");
        let throttle =
            BlkioThrottle::new(&device.major_minor(), Some(read_bytes_per_sec), None, None, None).expect("blkio group");
        let port = free_port();
        let script =
            "mount --bind \"$1\" \"$2\" && exec \"$3\" serve --port \"$4\" --token \"$5\" --allow-path \"$2\" --quiet";
        let (real_s, common_s, port_s) = (real.path().to_str().unwrap(), common.to_str().unwrap(), port.to_string());
        let args = ["-m", "--propagation", "private", "sh", "-c", script, "sh", real_s, common_s];
        let mut args: Vec<&str> = args.to_vec();
        args.extend([headroom_bin().to_str().unwrap(), &port_s, TOKEN]);
        let server = throttle.command(Path::new("unshare"), &args).stdout(Stdio::null()).spawn().expect("serve");
        let server = ChildGuard(Some(server));
        wait_listening(port);
        Agent { server, port, real, _throttle: throttle, _device: device }
    }

    fn name(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

fn lab_ready(what: &str) -> bool {
    if !headroom_lab::is_root() {
        eprintln!("SKIPPED {what}: needs root (loop devices, mount namespaces, cgroups)");
        return false;
    }
    if !BlkioThrottle::available() {
        eprintln!("SKIPPED {what}: cgroup v1 blkio is not mounted at /sys/fs/cgroup/blkio");
        return false;
    }
    for program in ["unshare", "mkfs.ext4", "losetup", "mount"] {
        if !headroom_lab::has_program(program) {
            eprintln!("SKIPPED {what}: `{program}` is not installed (run scripts/install-deps.sh)");
            return false;
        }
    }
    true
}

/// The path every agent tests (each sees its own disk there).
fn common_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("headroom-fleet-lab-").tempdir().unwrap()
}

fn fleet(hosts: &[String], path: &Path, time: &str) -> Command {
    let mut c = Command::new(headroom_bin());
    c.args(["fleet", "--hosts", &hosts.join(","), "--token", TOKEN, "disk"])
        .arg(path)
        .args(["--rw", "read", "--bs", "1M", "--qd", "4", "--size", "64M", "--time", time, "--json"])
        .env("NO_COLOR", "1");
    c
}

fn document(stdout: &[u8]) -> ResultDoc {
    ResultDoc::from_json(&String::from_utf8_lossy(stdout)).expect("a headroom.result/v1 document")
}

#[test]
fn four_throttled_agents_sum_to_the_throttles() {
    let _machine = headroom_lab::hold_machine();
    if !lab_ready("fleet disk sum") {
        return;
    }
    let common = common_dir();
    let agents: Vec<Agent> = (0..4).map(|_| Agent::new(common.path(), 20 * MB)).collect();
    let names: Vec<String> = agents.iter().map(Agent::name).collect();
    let out = fleet(&names, common.path(), "5s").output().expect("headroom fleet");
    assert!(out.status.success(), "fleet failed: {}", stderr(&out));
    let doc = document(&out.stdout);
    let f = doc.fleet.as_ref().expect("a fleet section");
    assert!(f.hosts.iter().all(|h| h.status == "ok" && h.clock_offset_s.is_some()), "{:?}", f.hosts);
    let sum = &f.sums[0];
    let total = sum.probe.summary.bytes_per_sec;
    let ground = (4 * 20 * MB) as f64;
    eprintln!("fleet sum {:.2} MB/s against 4 x 20 MB/s throttles", total / 1e6);
    for r in &sum.rows {
        eprintln!("  {} {:.2} MB/s share {:.3}", r.host, r.bytes_per_sec / 1e6, r.share);
    }
    assert!((total / ground - 1.0).abs() < 0.05, "sum {total} B/s against the throttles' {ground}");
    // Per-host rows: every agent, each near its own throttle, adding up to the sum.
    assert_eq!(sum.rows.len(), 4);
    let rows: f64 = sum.rows.iter().map(|r| r.bytes_per_sec).sum();
    assert!((rows - total).abs() < 1.0, "{rows} vs {total}");
    assert!((sum.rows.iter().map(|r| r.share).sum::<f64>() - 1.0).abs() < 1e-9);
    let spread = sum.spread.as_ref().expect("spread");
    assert!(spread.jain_index > 0.98, "{spread:?}");
    // The merged histogram holds every host's operations.
    let ops: u64 = sum.probe.histogram.as_ref().unwrap().buckets.iter().map(|b| b.1).sum();
    let host_ops: u64 =
        doc.probes.iter().map(|p| p.histogram.as_ref().unwrap().buckets.iter().map(|b| b.1).sum::<u64>()).sum();
    assert_eq!(ops, host_ops);
    // Per-second sums on one clock: the agents ran at once, so the middle seconds carry all four.
    let samples = &sum.probe.samples;
    assert!(samples.len() >= 4, "{samples:?}");
    for s in &samples[1..samples.len() - 1] {
        assert!((s.bytes_per_sec / ground - 1.0).abs() < 0.15, "second {}: {} B/s", s.t_s, s.bytes_per_sec);
    }
    let skew = f.hosts.iter().filter_map(|h| h.start_skew_s).fold(0.0, f64::max);
    assert!(skew < 0.25, "agents started {skew} s apart");
    for a in &agents {
        assert!(support::disk_leftovers(a.real.path()).is_empty(), "test file left on {}", a.name());
    }
}

#[test]
fn an_agent_killed_mid_run_is_named_and_the_others_are_kept() {
    let _machine = headroom_lab::hold_machine();
    if !lab_ready("fleet agent killed") {
        return;
    }
    let common = common_dir();
    let mut agents: Vec<Agent> = (0..4).map(|_| Agent::new(common.path(), 20 * MB)).collect();
    let names: Vec<String> = agents.iter().map(Agent::name).collect();
    let run = fleet(&names, common.path(), "8s").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Wait until agent 2 laid out its test file, then into its measured phase.
    let victim = &mut agents[2];
    let t0 = Instant::now();
    while support::disk_leftovers(victim.real.path()).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(30), "agent 2 never created its test file");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(4));
    victim.server.kill();
    let out = run.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let killed = names[2].clone();
    assert!(err.contains(&killed), "the killed agent is named: {err}");
    let doc = document(&out.stdout);
    let f = doc.fleet.as_ref().unwrap();
    let host = f.hosts.iter().find(|h| h.name == killed).unwrap();
    assert_eq!(host.status, "failed");
    eprintln!("killed agent: {:?}", host.error);
    let sum = &f.sums[0];
    assert_eq!(sum.rows.len(), 3, "the others' results are kept");
    assert_eq!(sum.failed_hosts, [killed]);
    assert!((sum.probe.summary.bytes_per_sec / (3 * 20 * MB) as f64 - 1.0).abs() < 0.1);
    // Its samples until it died are in the per-second sums: four agents' worth, then three.
    let rates: Vec<f64> = sum.probe.samples.iter().map(|x| x.bytes_per_sec).collect();
    let four = (4 * 20 * MB) as f64;
    assert!(rates[0] > 0.9 * four, "all four at first: {rates:?}");
    assert!(rates[rates.len() - 2] < 0.85 * four, "a dip after the kill: {rates:?}");
}

/// Waits until something in `ns` listens on `addr:port`.
fn wait_listening_in(ns: &headroom_lab::netns::Netns, addr: &str, port: u16) {
    let t0 = Instant::now();
    let probe = format!("exec 3<>/dev/tcp/{addr}/{port}");
    while ns.exec("bash", &["-c", &probe]).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "nothing listens on {addr}:{port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn four_agents_fill_the_servers_link_and_share_it() {
    let _machine = headroom_lab::hold_machine();
    if !headroom_lab::is_root() || !headroom_lab::has_program("tc") {
        eprintln!("SKIPPED fleet net: needs root and tc (namespaces, bridge, tbf)");
        return;
    }
    let star = Star::new(4).expect("namespaces");
    let rate = 1_000_000_000u64;
    star.shape(rate).expect("tbf");
    let exe = headroom_bin().to_str().unwrap();
    let server_addr = star.server_addr.to_string();
    let mut guards = vec![star
        .server
        .spawn(exe, &["serve", "--bind", &server_addr, "--token", TOKEN, "--quiet"])
        .expect("the server")];
    wait_listening_in(&star.switch, &server_addr, 5201);
    let mut names = Vec::new();
    for (ns, addr) in star.leaves.iter().zip(&star.leaf_addrs) {
        let addr = addr.to_string();
        let args = ["serve", "--bind", &addr, "--token", TOKEN, "--allow-net-to", &server_addr, "--quiet"];
        guards.push(ns.spawn(exe, &args).expect("an agent"));
        wait_listening_in(&star.switch, &addr, 5201);
        names.push(addr);
    }
    let out = star
        .switch
        .command(exe)
        .args(["fleet", "--hosts", &names.join(","), "--token", TOKEN, "net", &server_addr, "--time", "8s", "--json"])
        .output()
        .expect("headroom fleet");
    assert!(out.status.success(), "fleet failed: {}", stderr(&out));
    let doc = document(&out.stdout);
    let f = doc.fleet.as_ref().unwrap();
    let sum = &f.sums[0];
    let total_bits = sum.probe.summary.bytes_per_sec * 8.0;
    let ceiling = tbf_tcp_goodput_bits(rate as f64, &Framing::default());
    eprintln!("fleet net sum {:.1} Mb/s against the link's TCP ceiling {:.1} Mb/s", total_bits / 1e6, ceiling / 1e6);
    for r in &sum.rows {
        eprintln!("  {} {:.1} Mb/s share {:.3}", r.host, r.bytes_per_sec * 8.0 / 1e6, r.share);
    }
    assert!((total_bits / ceiling - 1.0).abs() < 0.03, "{total_bits} b/s against {ceiling}");
    assert_eq!(sum.rows.len(), 4, "every agent has its share");
    let rows: f64 = sum.rows.iter().map(|r| r.bytes_per_sec).sum();
    assert!((rows - sum.probe.summary.bytes_per_sec).abs() < 1.0);
    assert!((sum.rows.iter().map(|r| r.share).sum::<f64>() - 1.0).abs() < 1e-9);
    assert!(sum.rows.iter().all(|r| r.share > 0.05), "every agent got through: {:?}", sum.rows);
}

/// An agent refuses network tests towards an address its operator did not allow.
#[test]
fn an_agent_tests_only_towards_allowed_servers() {
    let _machine = headroom_lab::hold_machine();
    let port = free_port();
    let agent = Command::new(headroom_bin())
        .args(["serve", "--port", &port.to_string(), "--token", TOKEN, "--allow-net-to", "192.0.2.0/24", "--quiet"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _agent = ChildGuard(Some(agent));
    wait_listening(port);
    let host = format!("127.0.0.1:{port}");
    let out = headroom_plain()
        .args(["fleet", "--hosts", &host, "--token", TOKEN, "net", "127.0.0.1:9", "--time", "1s"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("127.0.0.1 is outside every --allow-net-to") && err.contains("192.0.2.0/24"), "{err}");
}

/// A `headroom serve` without root on a free loopback port, with `token`
/// and `args`; its guard and `127.0.0.1:PORT`.
fn local_serve(token: &str, args: &[&str]) -> (ChildGuard, String) {
    let port = free_port();
    let child = Command::new(headroom_bin())
        .args(["serve", "--port", &port.to_string(), "--token", token, "--quiet"])
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port);
    (ChildGuard(Some(child)), format!("127.0.0.1:{port}"))
}

/// An agent without root allowing disk probes in `dir`.
fn plain_agent(token: &str, dir: &Path) -> (ChildGuard, String) {
    local_serve(token, &["--allow-path", dir.to_str().unwrap()])
}

/// Two plain agents on temporary directories (no root), one agent with
/// another token and one port nobody listens on.
#[test]
fn down_and_wrong_token_agents_are_named_and_the_rest_measured() {
    let _machine = headroom_lab::hold_machine();
    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let (_a, a) = plain_agent(TOKEN, dir.path());
    let (_b, b) = plain_agent(TOKEN, dir.path());
    let (_c, wrong) = plain_agent("another-token", dir.path());
    let down = format!("127.0.0.1:{}", free_port());
    let hosts = [a.clone(), wrong.clone(), b.clone(), down.clone()];
    let saved = dir.path().join("fleet.json");
    let out = headroom_plain()
        .args(["fleet", "--hosts", &hosts.join(","), "--token", TOKEN, "--save"])
        .arg(&saved)
        .arg("disk")
        .arg(dir.path())
        .args(["--rw", "read", "--size", "8M", "--time", "1s", "--ramp", "0s", "--json"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{wrong}: wrong token")), "{err}");
    assert!(err.contains(&down) && err.contains("2 of 4 hosts failed"), "{err}");
    let doc = document(&out.stdout);
    let f = doc.fleet.unwrap();
    let status: Vec<&str> = f.hosts.iter().map(|h| h.status.as_str()).collect();
    assert_eq!(status, ["ok", "failed", "ok", "failed"]);
    let rows: Vec<&str> = f.sums[0].rows.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(rows, [a.as_str(), b.as_str()]);
    assert!(support::disk_leftovers(dir.path()).is_empty());
    // --save keeps the document --json prints, for compare and report (a
    // Kubernetes Job has no shell to redirect with): each host's row and the sum.
    assert_eq!(std::fs::read(&saved).unwrap(), out.stdout, "--save writes what --json prints");
    let compared = headroom_plain().arg("compare").arg(&saved).arg(&saved).output().unwrap();
    let text = String::from_utf8_lossy(&compared.stdout);
    assert!(compared.status.success(), "{}", stderr(&compared));
    assert!(
        text.contains(&format!("@{a}")) && text.contains(&format!("@{b}")) && text.contains("(sum of 2)"),
        "{text}"
    );
    let html = dir.path().join("fleet.html");
    let report = headroom_plain().arg("report").arg(&saved).arg("--html").arg(&html).output().unwrap();
    assert!(report.status.success(), "{}", stderr(&report));
    let page = std::fs::read_to_string(&html).unwrap();
    for chart in [format!("chart-seq1m-q1t1-read@{a}"), format!("chart-seq1m-q1t1-read@{b}"), "chart-fleet-".into()] {
        assert!(page.contains(&chart), "no {chart} in the report");
    }
}

#[test]
fn bad_host_lists_are_one_line_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let run = |hosts: &str| headroom_plain().args(["fleet", "--hosts", hosts, "disk", "/tmp"]).output().unwrap();
    let missing = dir.path().join("nope.txt");
    one_error_line(&run(missing.to_str().unwrap()), &["--hosts", "nope.txt", "cannot read", "example"]);
    let bad_port = file("ports", "# agents\nhv1\nhv2:70000\n");
    one_error_line(&run(bad_port.to_str().unwrap()), &["line 3", "70000", "example"]);
    let twice = file("twice", "127.0.0.1\n127.0.0.1:5201\n");
    one_error_line(&run(twice.to_str().unwrap()), &["line 2", "named twice", "line 1"]);
    one_error_line(&run("127.0.0.1,no-such-agent.invalid"), &["no-such-agent.invalid", "nothing was started"]);
    let empty = file("empty", "# nobody\n");
    one_error_line(&run(empty.to_str().unwrap()), &["names no hosts", "example"]);
    one_error_line(
        &headroom_plain().args(["fleet", "--hosts", "127.0.0.1", "disk", "rel/dir"]).output().unwrap(),
        &["must be absolute", "example"],
    );
}

/// More agents than the server's --max-clients: the ones past it are named
/// with what to change on the server; the others measure.
#[test]
fn agents_past_the_servers_max_clients_are_told_what_to_change() {
    let _machine = headroom_lab::hold_machine();
    let (_server, server) = local_serve(TOKEN, &["--max-clients", "2"]);
    let agents: Vec<_> = (0..3).map(|_| local_serve(TOKEN, &["--allow-net-to", "127.0.0.1"])).collect();
    let hosts: Vec<&str> = agents.iter().map(|(_, h)| h.as_str()).collect();
    let out = headroom_plain()
        .args(["fleet", "--hosts", &hosts.join(","), "--token", TOKEN, "net", &server, "--time", "1s", "--json"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("server busy") && err.contains("--max-clients 3"), "{err}");
    let doc = document(&out.stdout);
    let f = doc.fleet.unwrap();
    assert_eq!(f.sums[0].rows.len(), 2, "{:?}", f.hosts);
    assert_eq!(f.hosts.iter().filter(|h| h.status == "failed").count(), 1);
}

/// The most threads and open files a running process had, sampled until it exits.
fn watch_threads_and_files(child: &mut std::process::Child) -> (usize, usize) {
    let pid = child.id();
    let count = |what: &str| std::fs::read_dir(format!("/proc/{pid}/{what}")).map_or(0, |d| d.count());
    let (mut threads, mut files) = (0, 0);
    while child.try_wait().unwrap().is_none() {
        threads = threads.max(count("task"));
        files = files.max(count("fd"));
        std::thread::sleep(Duration::from_millis(2));
    }
    (threads, files)
}

/// A host list of thousands: two live agents among 2000 entries whose port
/// nobody listens on. The client drives them from a pool of at most
/// MAX_WORKERS threads and as many connections in flight, raises its own
/// open-file limit to hold a control connection per agent (or, when it
/// cannot, says so before anything starts), reports every host, keeps the
/// live ones' results and exits 2; its last line names a few failed hosts,
/// not thousands.
#[test]
fn thousands_of_hosts_take_a_bounded_pool_and_every_one_is_reported() {
    let _machine = headroom_lab::hold_machine();
    let max_workers = headroom_fleet::MAX_WORKERS;
    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let (_a, a) = plain_agent(TOKEN, dir.path());
    let (_b, b) = plain_agent(TOKEN, dir.path());
    let closed = free_port();
    // Every 127/8 address is this machine's loopback: distinct hosts, one closed port.
    let dead: Vec<String> = (0..1998).map(|i| format!("127.1.{}.{}:{closed}", i / 250, i % 250 + 1)).collect();
    let mut hosts = vec![a.clone()];
    hosts.extend(dead[..999].iter().cloned());
    hosts.push(b.clone());
    hosts.extend(dead[999..].iter().cloned());
    let list = dir.path().join("hosts");
    std::fs::write(&list, hosts.join("\n") + "\n").unwrap();
    let fleet_under = |limit: &str| {
        let mut c = Command::new("bash");
        c.arg("-c")
            .arg(format!("ulimit {limit} && exec \"$0\" \"$@\""))
            .arg(headroom_bin())
            .args(["fleet", "--hosts", list.to_str().unwrap(), "--token", TOKEN, "disk"])
            .arg(dir.path())
            .args(["--rw", "read", "--size", "8M", "--time", "2s", "--ramp", "0s", "--json"])
            .env("NO_COLOR", "1");
        c
    };
    // A hard limit below one connection per agent: known before anything starts.
    let out = fleet_under("-n 512").output().unwrap();
    one_error_line(&out, &["2000 agents", "ulimit -n", "nothing was started"]);

    let hard = Command::new("bash").args(["-c", "ulimit -Hn"]).output().unwrap();
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_string();
    if hard != "unlimited" && hard.parse::<u64>().unwrap_or(0) < 4096 {
        eprintln!("SKIPPED the run of 2000 hosts: the hard open-file limit is {hard}, under 4096");
        return;
    }
    // A soft limit of 256: the client raises its own up to the hard one.
    let mut child = fleet_under("-Sn 256").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (stdout, stderr_text) = {
        let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let so = std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut so, &mut v).unwrap();
            v
        });
        let se = std::thread::spawn(move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut se, &mut s).unwrap();
            s
        });
        let (threads, files) = watch_threads_and_files(&mut child);
        eprintln!("2000 hosts: at most {threads} threads and {files} open files");
        // The workers, the main thread and the Ctrl-C handler's; never a thread per host.
        assert!(threads > max_workers && threads <= max_workers + 2, "{threads} threads");
        // Two agents' control connections, at most a connection in flight per worker, stdio.
        assert!(files <= max_workers + 16, "{files} open files");
        (so.join().unwrap(), se.join().unwrap())
    };
    assert_eq!(child.wait().unwrap().code(), Some(2), "{stderr_text}");
    let doc = document(&stdout);
    let f = doc.fleet.unwrap();
    assert_eq!(f.hosts.len(), 2000);
    let ok: Vec<&str> = f.hosts.iter().filter(|h| h.status == "ok").map(|h| h.name.as_str()).collect();
    assert_eq!(ok, [a.as_str(), b.as_str()]);
    let rows: Vec<&str> = f.sums[0].rows.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(rows, [a.as_str(), b.as_str()]);
    assert_eq!(f.sums[0].failed_hosts.len(), 1998);
    for name in &dead {
        let host = f.hosts.iter().find(|h| &h.name == name).unwrap();
        assert!(host.error.as_deref().is_some_and(|e| e.contains("connection refused")), "{host:?}");
    }
    let lines: Vec<&str> = stderr_text.lines().collect();
    assert_eq!(lines.len(), 1999, "a line per failed host and the last one");
    let last = lines.last().unwrap();
    assert!(last.contains("1998 of 2000 hosts failed") && last.contains("and 1990 more"), "{last}");
    assert!(last.len() < 400, "the last line names a few hosts, not thousands: {} chars", last.len());
}

/// `fleet run`: two agents run `run`'s network tests towards one server and
/// its disk tests at --path at once (no root). Every test of the quick preset
/// has its sum; each host its inventory and its own verdict; --goal is held
/// against the sum (the disk's, as the path) and --host-goal against every
/// host: met is 0, missed is 1 with `goal_missed` in the document.
#[test]
fn fleet_run_gives_every_host_a_verdict_and_holds_the_goals() {
    let _machine = headroom_lab::hold_machine();
    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let (_server, server) = local_serve(TOKEN, &[]);
    let agent_args = ["--allow-net-to", "127.0.0.1", "--allow-path", dir.path().to_str().unwrap()];
    let (_a, a) = local_serve(TOKEN, &agent_args);
    let (_b, b) = local_serve(TOKEN, &agent_args);
    let run = |goals: &[&str]| {
        headroom_plain()
            .args(["fleet", "--hosts", &format!("{a},{b}"), "--token", TOKEN])
            .args(goals)
            .args(["run", "--server", &server, "--path"])
            .arg(dir.path())
            .arg("--json")
            .output()
            .unwrap()
    };
    // Goals any machine meets, and one no disk of this machine reaches.
    let out = run(&["--goal", "read=1MB/s,iops=100", "--host-goal", "read=100kB/s,iops=1M"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("iops=1M @{a}")) && err.contains(&format!("iops=1M @{b}")), "{err}");
    let doc = document(&out.stdout);
    let f = doc.fleet.as_ref().unwrap();
    let sums: Vec<&str> = f.sums.iter().map(|s| s.probe.id.as_str()).collect();
    assert_eq!(
        sums,
        [
            "fleet-tcp-up-1",
            "fleet-tcp-down-1",
            "fleet-seq1m-q8t1-read",
            "fleet-seq1m-q8t1-write",
            "fleet-rnd4k-q32t1-read",
            "fleet-rnd4k-q32t1-write",
            "fleet-rnd4k-q1t1-read",
            "fleet-rnd4k-q1t1-write"
        ]
    );
    assert!(f.sums.iter().all(|s| s.rows.len() == 2), "both hosts measured every test");
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    for h in &f.hosts {
        let inventory = h.inventory.as_ref().expect("the agent's inventory");
        assert_eq!(inventory.hostname.as_deref(), Some(hostname.as_str()));
        assert!(inventory.cpu.is_some() && !inventory.nics.is_empty(), "{inventory:?}");
        let verdict = h.verdict.as_ref().expect("a verdict per host");
        assert_eq!(verdict.directions.len(), 2, "reads and writes: {verdict:?}");
    }
    let missed: Vec<&str> = doc
        .warnings
        .iter()
        .filter(|w| w.code == headroom_result::WarningCode::GoalMissed)
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(missed, [format!("goal iops=1M @{a} missed"), format!("goal iops=1M @{b} missed")]);
    assert!(support::disk_leftovers(dir.path()).is_empty());
    // The terminal shows each agent's machine and verdict.
    let out = headroom_plain()
        .args(["fleet", "--hosts", &a, "--token", TOKEN, "--goal", "read=1MB/s", "run", "--path"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("verdict: reads") && text.contains("cpu ") && text.contains("read=1MB/s (sum)"), "{text}");
}
