//! headroom net over real (namespaced, tbf-shaped) links and through failures:
//! goodput against the tbf ceiling and stock iperf3, UDP above the shaped rate,
//! a CPU quota on either end named as the limit, a link cut, a server killed
//! and a client killed mid-test.

mod net_support;
use headroom_lab::cpu::CpuQuota;
use headroom_lab::netns::TwoHosts;
use headroom_limits::{tbf_rate_emulating, tbf_tcp_goodput_bits, Framing};
use net_support::*;
use std::process::Command;
use std::time::{Duration, Instant};

fn lab_servers(lab: &TwoHosts) -> (headroom_lab::netns::ChildGuard, headroom_lab::netns::ChildGuard) {
    let a = lab.addr_a.to_string();
    let hr = lab.a.spawn(bin(), &["serve", "--bind", &a, "--no-auth", "--iperf3", "--idle-timeout", "3s"]).unwrap();
    let ip = lab.a.spawn("iperf3", &["-s", "-B", &a, "-p", "5202"]).unwrap();
    // Wait until both listen (probing from inside b).
    let t0 = Instant::now();
    while lab.b.exec(bin(), &["ping", &format!("{a}:5201"), "--count", "1"]).is_err()
        || lab.b.exec(bin(), &["ping", &format!("{a}:5202"), "--count", "1"]).is_err()
    {
        assert!(t0.elapsed() < Duration::from_secs(10), "servers did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    (hr, ip)
}

fn headroom_goodput(lab: &TwoHosts, tests: &str) -> (f64, serde_json::Value) {
    let out =
        run(lab.b.command(bin()).args(["net", &lab.addr_a.to_string(), "--tests", tests, "--time", "2s", "--json"]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json(&out);
    (doc["probes"][0]["summary"]["bytes_per_sec"].as_f64().unwrap() * 8.0, doc)
}

fn iperf3_goodput(lab: &TwoHosts) -> f64 {
    let out = run(lab.b.command("iperf3").args(["-c", &lab.addr_a.to_string(), "-p", "5202", "-t", "2", "-J"]));
    json(&out)["end"]["sum_received"]["bits_per_second"].as_f64().unwrap()
}

#[test]
fn tbf_goodput_reaches_the_derived_ceiling_and_matches_iperf3() {
    headroom_lab::require_root!();
    headroom_lab::require_program!("iperf3");
    let _machine = headroom_lab::hold_machine();
    for rate in [1_000_000_000u64, 2_500_000_000] {
        let lab = TwoHosts::new(1500).unwrap();
        lab.shape(rate).unwrap();
        let _servers = lab_servers(&lab);
        let ceiling = tbf_tcp_goodput_bits(rate as f64, &Framing::default());
        // Interleaved (headroom, iperf3, headroom, iperf3); the better run of each is
        // compared, so a burst of load from other work on the host hurts neither side.
        let pressure = headroom_lab::CpuPressure::start();
        let (h1, _) = headroom_goodput(&lab, "up1");
        let s1 = iperf3_goodput(&lab);
        let (h2, doc) = headroom_goodput(&lab, "up1");
        let s2 = iperf3_goodput(&lab);
        let (ours, stock) = (h1.max(h2), s1.max(s2));
        eprintln!("tbf {rate}: ceiling {ceiling:.0}, headroom {h1:.0}/{h2:.0}, iperf3 {s1:.0}/{s2:.0}");
        // The 99% bar holds when the host has CPU to spare; when other work starves
        // both tools (stock iperf3 below 99% too), headroom must still match iperf3.
        if stock >= 0.99 * ceiling {
            assert!(ours >= 0.99 * ceiling, "headroom {ours:.0} b/s < 99% of the tbf ceiling {ceiling:.0}");
        } else {
            eprintln!(
                "tbf {rate}: host busy (iperf3 reached {:.1}% of the ceiling): 99% bar not applied",
                stock / ceiling * 100.0
            );
        }
        assert!(ours <= 1.01 * ceiling, "headroom {ours:.0} b/s above the tbf ceiling {ceiling:.0}: counting is off");
        // A tool descheduled for part of its 2 s by work outside the suite
        // (the machine lock keeps only tests apart) loses to the other for
        // a reason that is not its own: then the comparison proves nothing.
        let stalled = pressure.as_ref().map_or(0.0, |p| p.stalled_fraction());
        let agree = ours >= 0.98 * stock && (close(ours, stock, 0.02) || stock < 0.99 * ceiling);
        if !agree && stalled >= 0.25 {
            eprintln!(
                "SKIPPED tbf {rate} comparison: cpu pressure {:.0} % (a starved machine); headroom {ours:.0}, iperf3 {stock:.0}",
                stalled * 100.0
            );
        } else {
            assert!(ours >= 0.98 * stock, "headroom {ours:.0} more than 2% below iperf3 {stock:.0}");
            assert!(close(ours, stock, 0.02) || stock < 0.99 * ceiling, "headroom {ours:.0} vs iperf3 {stock:.0}");
        }
        assert!(doc["probes"][0]["details"]["tcp_info"]["srtt_us"].as_u64().unwrap() > 0);
        if rate == 1_000_000_000 {
            let pressure = headroom_lab::CpuPressure::start();
            let (four, _) = headroom_goodput(&lab, "up");
            let stalled = pressure.map_or(0.0, |p| p.stalled_fraction());
            if four < 0.98 * ceiling && stalled >= 0.25 {
                eprintln!("SKIPPED 4 streams: {four:.0} of {ceiling:.0} at cpu pressure {:.0} %", stalled * 100.0);
            } else {
                assert!(four >= 0.98 * ceiling, "4 streams: {four:.0} of {ceiling:.0}");
            }
            // UDP above the shaped rate: loss shows, with jitter.
            let out = run(lab.b.command(bin()).args([
                "net",
                &lab.addr_a.to_string(),
                "--tests",
                "udp",
                "--udp",
                "1.5G",
                "--time",
                "1s",
                "--json",
            ]));
            let doc = json(&out);
            let udp = &doc["probes"][0]["details"]["udp"];
            // tbf counts 14 + 20 + 8 + payload bytes per datagram: at most 1472/1514 of the rate
            // arrives. The local qdisc pushes back on the sender, so how far it overshoots (and so
            // how much is lost) depends on timing; what must hold is that nothing beyond the
            // shaped rate is reported as received and that any overshoot shows as loss.
            let udp_ceiling = rate as f64 * 1472.0 / 1514.0;
            let received_bits = doc["probes"][0]["summary"]["bytes_per_sec"].as_f64().unwrap() * 8.0;
            assert!(
                received_bits <= 1.03 * udp_ceiling,
                "received {received_bits:.0} b/s over the shaped {udp_ceiling:.0}"
            );
            let (packets, lost) = (udp["packets"].as_f64().unwrap(), udp["lost"].as_f64().unwrap());
            let sent_bits = received_bits * packets / (packets - lost).max(1.0);
            let loss = udp["loss_percent"].as_f64().unwrap();
            assert!(sent_bits <= 1.05 * udp_ceiling || loss > 0.0, "sent {sent_bits:.0} b/s, no loss: {udp}");
            assert!(udp["jitter_ms"].as_f64().is_some());
        }
    }
}

/// What a net document's TCP probes say about the CPU: (id, goodput bits/s,
/// cpu_limit, the cgroup figures of `side`'s load).
fn cpu_findings(doc: &serde_json::Value, side: &str) -> Vec<(String, f64, serde_json::Value, serde_json::Value)> {
    doc["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["summary"]["bytes_per_sec"].as_f64().unwrap() * 8.0,
                p["details"]["cpu_limit"].clone(),
                p["details"][format!("cpu_load_{side}")]["cgroup"].clone(),
            )
        })
        .collect()
}

/// Section 5 of issue 11: a `headroom serve` held by a cgroup cpu quota to 2%
/// of a core behind a veth shaped like 2.5 GbE carries a fraction of the link;
/// `headroom net` must name the server's CPU quota with its throttled periods
/// (as the kernel counted them), and must not advise raising wmem/rmem. With
/// the quota on the client instead, it names this machine's.
/// The link behind the quota tests: far above what 2% of a core can carry.
/// Under a 2.5 GbE link the held server still reached 46-61% of the ceiling
/// here (the kernel charges much of TCP's work to softirqs, not to the
/// quota'd process, and CFS enforces a 2 ms quota only at the next tick), too
/// close to the 85% line on a faster or differently loaded machine; under
/// 10 GbE it reaches about 9%.
const QUOTA_LINK_BITS: f64 = 10e9;

#[test]
fn a_cpu_quota_on_either_end_is_named_with_its_throttled_periods() {
    headroom_lab::require_root!();
    if !CpuQuota::available() {
        eprintln!("SKIPPED: cgroup v1 cpu is not mounted at {}", headroom_lab::cpu::CPU_ROOT);
        return;
    }
    let _machine = headroom_lab::hold_machine();
    let lab = TwoHosts::new(1500).unwrap();
    lab.shape(tbf_rate_emulating(QUOTA_LINK_BITS, &Framing::default()) as u64).unwrap();
    let a = lab.addr_a.to_string();
    let server = lab.a.spawn(bin(), &["serve", "--bind", &a, "--no-auth", "--quiet"]).unwrap();
    let t0 = Instant::now();
    while lab.b.exec(bin(), &["ping", &format!("{a}:5201"), "--count", "1"]).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "server did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    let ceiling_bits = Framing::default().tcp_goodput_bits(QUOTA_LINK_BITS);
    let net_args = ["net", a.as_str(), "--tests", "up1,down1", "--time", "3s", "--link", "10gbe", "--json"];
    let net = |cmd: &mut Command| {
        let out = run(cmd);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!text.contains("wmem") && !text.contains("rmem"), "buffer advice under a CPU quota: {text}");
        json(&out)
    };

    // The peer in the same run: no quota, so no quota blamed. On a busy host
    // the free run can miss the link's ceiling for a real reason headroom then
    // names (hypervisor steal of 30% was seen while builds ran beside the
    // suite): any finding but a quota is allowed here.
    let free = net(lab.b.command(bin()).args(net_args));
    let free_bits: Vec<f64> = cpu_findings(&free, "remote").iter().map(|f| f.1).collect();
    for (id, bits, limit, _) in cpu_findings(&free, "remote") {
        eprintln!(
            "no quota, {id}: {:.0} Mb/s ({:.0}% of {ceiling_bits:.0}), CPU finding {limit}",
            bits / 1e6,
            bits / ceiling_bits * 100.0
        );
        assert!(limit.is_null() || limit["kind"] != "quota", "{id}: a quota named where none was set: {limit}");
    }

    for side in ["remote", "local"] {
        let quota = CpuQuota::new(2000, 100_000).unwrap();
        let before = quota.throttle_counts().unwrap();
        let doc = if side == "remote" {
            quota.add_pid(server.id()).unwrap();
            net(lab.b.command(bin()).args(net_args))
        } else {
            let mut args = vec!["netns", "exec", lab.b.name.as_str(), bin()];
            args.extend(net_args);
            net(&mut quota.command(std::path::Path::new("ip"), &args))
        };
        let after = quota.throttle_counts().unwrap();
        let (kernel_periods, kernel_throttled) = (after.0 - before.0, after.1 - before.1);
        for ((id, bits, limit, cgroup), free) in cpu_findings(&doc, side).into_iter().zip(&free_bits) {
            let (periods, throttled) =
                (cgroup["periods"].as_u64().unwrap(), cgroup["throttled_periods"].as_u64().unwrap());
            eprintln!(
                "quota 2% on {side}, {id}: {:.0} Mb/s ({:.0}% of the 10GbE TCP ceiling; {:.0} Mb/s without), \
                 throttled in {throttled} of {periods} periods (kernel, whole run: {kernel_throttled} of {kernel_periods})",
                bits / 1e6,
                bits / ceiling_bits * 100.0,
                free / 1e6
            );
            assert_eq!(limit["side"], side, "{id}: {limit}");
            assert_eq!(limit["kind"], "quota", "{id}: {limit}");
            let owner = if side == "remote" { "the server's CPU quota" } else { "this machine's CPU quota" };
            assert!(limit["evidence"].as_str().unwrap().contains(owner), "{id}: {limit}");
            // headroom's window lies inside the kernel's count over the whole run.
            assert!(periods > 0 && periods <= kernel_periods, "{id}: {periods} periods of {kernel_periods}");
            assert!(throttled <= kernel_throttled, "{id}: {throttled} throttled of {kernel_throttled}");
            assert!(throttled as f64 >= 0.2 * periods as f64, "{id}: {throttled} of {periods}");
            assert!(bits < 0.85 * ceiling_bits && bits < *free, "{id}: the quota did not hold the stream back");
        }
    }
}

#[test]
fn link_cut_mid_test_ends_with_an_error_and_keeps_samples() {
    headroom_lab::require_root!();
    let _machine = headroom_lab::hold_machine();
    let lab = TwoHosts::new(1500).unwrap();
    lab.shape(1_000_000_000).unwrap();
    let a = lab.addr_a.to_string();
    let _server = lab.a.spawn(bin(), &["serve", "--bind", &a, "--no-auth"]).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client = lab
        .b
        .command(bin())
        .args(["net", &a, "--tests", "up1", "--time", "10s", "--timeout", "2s", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let t0 = Instant::now();
    lab.cut().unwrap();
    let out = client.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(6), "client took {:?} to give up", t0.elapsed());
    assert_eq!(out.status.code(), Some(2));
    let doc = json(&out);
    let p = &doc["probes"][0];
    assert!(p["samples"].as_array().unwrap().len() >= 2, "samples kept: {p}");
    assert!(p["details"]["error"].as_str().unwrap().contains("no data"), "{}", p["details"]["error"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("error"));
}

#[test]
fn server_killed_mid_test_client_reports_it_and_keeps_samples() {
    let _machine = headroom_lab::hold_machine();
    for test in ["up1", "down1"] {
        let (mut server, port) = Served::serve(&[]);
        let client = Command::new(bin())
            .args(["net", &format!("127.0.0.1:{port}"), "--tests", test, "--time", "10s", "--timeout", "2s", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        server.child.kill().unwrap();
        let t0 = Instant::now();
        let out = client.wait_with_output().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(4), "{test}: client took {:?}", t0.elapsed());
        assert_eq!(out.status.code(), Some(2), "{test}");
        let doc = json(&out);
        let p = &doc["probes"][0];
        assert!(!p["samples"].as_array().unwrap().is_empty(), "{test}: samples kept");
        assert!(p["details"]["error"].is_string(), "{test}: {p}");
    }
}

#[test]
fn client_killed_mid_test_frees_the_slot_within_the_idle_timeout() {
    let _machine = headroom_lab::hold_machine();
    let (server, port) = Served::serve(&["--max-clients", "1", "--idle-timeout", "2s"]);
    let mut victim = Command::new(bin())
        .args(["net", &format!("127.0.0.1:{port}"), "--tests", "up1", "--time", "30s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Long enough for the victim's test to be under way even on a loaded
    // machine (other lab tests share the two cores): a client killed before
    // its test starts is never logged as aborted.
    std::thread::sleep(Duration::from_millis(2500));
    victim.kill().unwrap();
    victim.wait().unwrap();
    let t0 = Instant::now();
    loop {
        let out = run(Command::new(bin()).args([
            "net",
            &format!("127.0.0.1:{port}"),
            "--tests",
            "up1",
            "--time",
            "1s",
            "--json",
        ]));
        if out.status.success() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(4), "slot not freed: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(200));
    }
    let lines = server.wait_lines(2, Duration::from_secs(5));
    assert!(lines.iter().any(|l| l.contains("aborted")), "the killed client was not logged as aborted: {lines:?}");
}
