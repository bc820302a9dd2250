//! `headroom net` on a terminal: the heading (server, protocol, the link
//! ceiling and where it came from), one block per probe as it finishes
//! (throughput with its share of the link, TCP_INFO, UDP loss, both ends'
//! CPU, RTT under load, notes; or a latency line), and a failed test's line.
//! Also the banner and log lines of `headroom serve`, net's other end.

use crate::Style;
use headroom_analysis::LinkCeiling;
use headroom_analysis::{faster_than_ceiling, CEILING_SHARE};
use headroom_result::{details, BufferPair, CpuLoad, NetSpec, Probe, ProbeSpec, Side, SocketBuffers};
use headroom_units::{format_latency, format_rate, format_size, format_size_both};

/// The two heading lines: who answered with which protocol, and the link.
pub fn heading(
    server: &str,
    protocol: &str,
    server_version: Option<&str>,
    ceiling: &LinkCeiling,
    style: Style,
) -> String {
    format!(
        "{} {server} ({protocol} protocol{})\nlink: {}\n",
        style.bold("headroom net"),
        server_version.map(|v| format!(", server {v}")).unwrap_or_default(),
        link_line(ceiling, style)
    )
}

/// The `link:` line: the ceiling, where it came from, and why it may not hold.
fn link_line(c: &LinkCeiling, style: Style) -> String {
    let mut s = match c.tcp_bytes_per_sec {
        Some(b) => format!("{} ({}): TCP ceiling {}", c.name, c.source, format_rate(b * 8.0, style.iec)),
        None => format!("{} ({})", c.name, c.source),
    };
    if let Some(n) = &c.note {
        s += &format!("; {n}");
    }
    s
}

/// A test that did not run, under the probes.
pub fn failure(line: &str) -> String {
    format!("  {line}\n")
}

/// One probe's lines: a latency line for round trips, handshakes and UDP
/// echo; for throughput the figure and its share of `ceiling` (held by
/// `headroom_analysis::link_share`), then the indented detail lines.
pub fn probe(p: &Probe, ceiling: &LinkCeiling, style: Style) -> String {
    let d = &p.details;
    let num = |k: &str| d.get(k).and_then(|v| v.as_f64());
    match &p.spec {
        ProbeSpec::Net(s) if s.test.is_latency() => match &p.summary.latency_ns {
            Some(l) => {
                let mut text = format!(
                    "  {:<24} min {}  mean {}  p50 {}  p99 {}  max {}  stddev {}\n",
                    p.name,
                    format_latency(l.min.unwrap_or(0.0)),
                    format_latency(l.mean),
                    format_latency(l.p50),
                    format_latency(l.p99),
                    format_latency(l.max),
                    format_latency(l.stddev.unwrap_or(0.0))
                );
                if let Some(busy) = d.get(details::BUSY_POLL) {
                    text += &format!("  {:<24} {}\n", "", busy_poll_line(busy));
                }
                text
            }
            None => String::new(),
        },
        ProbeSpec::Ping(_) => match &p.summary.latency_ns {
            Some(l) => format!(
                "  {:<24} min {}  mean {}  p99 {}  max {}  jitter {:.3} ms  loss {:.1}%\n",
                p.name,
                format_latency(l.min.unwrap_or(0.0)),
                format_latency(l.mean),
                format_latency(l.p99),
                format_latency(l.max),
                num(details::JITTER_MS).unwrap_or(0.0),
                num(details::LOSS_PERCENT).unwrap_or(0.0)
            ),
            None => String::new(),
        },
        spec => {
            let mut line = format!("  {:<24} {}", p.name, format_rate(p.summary.bytes_per_sec * 8.0, style.iec));
            if let Some(share) = num(CEILING_SHARE) {
                if faster_than_ceiling(share) {
                    line += &format!("  above the {} ceiling (virtual NIC?)", ceiling.name);
                } else {
                    line += &format!("  {:.1}% of {}", share * 100.0, ceiling.name);
                }
            }
            let fixed_bytes = matches!(spec, ProbeSpec::Net(s) if s.bytes.is_some());
            if let Some(b) = p.summary.bytes.filter(|_| fixed_bytes) {
                line += &format!("  {} in {:.2} s", format_size_both(b), p.summary.duration_s);
            }
            if let Some(t) = d.get(details::TCP_INFO) {
                line += &format!(
                    "  retr {}  srtt {:.2} ms  cwnd {} KiB",
                    t["retransmits"],
                    t["srtt_us"].as_f64().unwrap_or(0.0) / 1e3,
                    t["cwnd_bytes"].as_u64().unwrap_or(0) / 1024
                );
            }
            if let Some(u) = d.get(details::UDP) {
                line += &format!(
                    "  loss {:.2}%  jitter {:.3} ms",
                    u[details::LOSS_PERCENT].as_f64().unwrap_or(0.0),
                    u[details::JITTER_MS].as_f64().unwrap_or(0.0)
                );
            }
            line += &format!("  cpu {:.0}% here", num(details::cpu_percent_key(Side::Local)).unwrap_or(0.0));
            if let Some(c) = num(details::cpu_percent_key(Side::Remote)) {
                line += &format!(" / {c:.0}% server");
            }
            let mut text = line + "\n";
            for (key, whose) in [("cpu_load_local", "cpu here"), ("cpu_load_remote", "cpu server")] {
                if let Some(load) = d.get(key).and_then(|v| serde_json::from_value::<CpuLoad>(v.clone()).ok()) {
                    text += &format!("  {:<24} {whose}: {}\n", "", cpu_line(&load));
                }
            }
            if let ProbeSpec::Net(NetSpec { socket_buffers: Some(b), .. }) = &p.spec {
                text += &format!("  {:<24} {}\n", "", buffers_line(b));
            }
            if let Some(rx) = d.get(details::SKIP_RX_COPY) {
                text += &format!(
                    "  {:<24} {}\n",
                    "",
                    copy_line(rx, "receivers skipped the copy to user space (--skip-rx-copy)")
                );
            }
            if let Some(tx) = d.get(details::ZEROCOPY) {
                text += &format!(
                    "  {:<24} {}\n",
                    "",
                    copy_line(tx, "senders skipped the copy into the kernel (--zerocopy)")
                );
            }
            if let Some(offload) = d.get(details::UDP_OFFLOAD) {
                text += &format!("  {:<24} {}\n", "", udp_offload_line(offload));
            }
            if let Some(l) = d.get("rtt_under_load_ns") {
                text += &format!(
                    "  {:<24} RTT under load: mean {}  p99 {}\n",
                    "",
                    format_latency(l["mean"].as_f64().unwrap_or(0.0)),
                    format_latency(l["p99"].as_f64().unwrap_or(0.0))
                );
            }
            for w in &p.warnings {
                text += &format!("  {:<24} note: {}\n", "", w.message);
            }
            text
        }
    }
}

/// "receivers skipped the copy to user space (--skip-rx-copy): here yes, server no".
fn copy_line(ends: &serde_json::Value, what: &str) -> String {
    let said: Vec<String> = [("local", "here"), ("remote", "server")]
        .into_iter()
        .filter_map(|(key, end)| {
            ends[key].as_bool().map(|skipped| format!("{end} {}", if skipped { "yes" } else { "no" }))
        })
        .collect();
    // Neither end said: the only end concerned is an iperf3 server, asked and silent.
    let said = if said.is_empty() { "the server does not say".to_string() } else { said.join(", ") };
    format!("{what}: {said}")
}

/// "busy-polled (--busy-poll): here spin yes, SO_BUSY_POLL yes; server spin no, SO_BUSY_POLL no".
fn busy_poll_line(busy: &serde_json::Value) -> String {
    let yes_no = |v: &serde_json::Value| if v.as_bool() == Some(true) { "yes" } else { "no" };
    let end = |key: &str, name: &str| {
        format!("{name} spin {}, SO_BUSY_POLL {}", yes_no(&busy[key]["spin"]), yes_no(&busy[key]["so_busy_poll"]))
    };
    format!("busy-polled (--busy-poll): {}; {}", end("local", "here"), end("remote", "server"))
}

/// "UDP offload (--gsro): here GSO yes, server GRO no": per end, what it
/// did of what it could (GSO when it sent, GRO when it received).
fn udp_offload_line(offload: &serde_json::Value) -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let ends: Vec<String> = [("local", "here"), ("remote", "server")]
        .into_iter()
        .flat_map(|(key, end)| {
            [("gso", "GSO"), ("gro", "GRO")].into_iter().filter_map(move |(half, name)| {
                offload[key][half].as_bool().map(|b| format!("{end} {name} {}", yes_no(b)))
            })
        })
        .collect();
    format!("UDP offload (--gsro): {}", ends.join(", "))
}

/// "socket buffers 4 MiB asked: here 4 MiB send / 4 MiB receive, server ...":
/// the grants halved back from what getsockopt reports (Linux doubles them).
fn buffers_line(b: &SocketBuffers) -> String {
    let pair = |p: &BufferPair| format!("{} send / {} receive", format_size(p.send / 2), format_size(p.recv / 2));
    let mut line = format!("socket buffers {} asked", format_size(b.asked));
    let grants: Vec<String> = [("here", b.local.as_ref()), ("server", b.remote.as_ref())]
        .into_iter()
        .filter_map(|(end, p)| p.map(|p| format!("{end} {}", pair(p))))
        .collect();
    if !grants.is_empty() {
        line += &format!(": {}", grants.join(", "));
    }
    line
}

/// One end's CPU over a test: the process against one core and the machine,
/// its busiest thread and core, softirq, steal and the cgroup quota.
fn cpu_line(load: &CpuLoad) -> String {
    let mut parts = vec![format!("process {:.0}% of one core ({} cores)", load.process_percent, load.cores)];
    if let Some(t) = load.busiest_thread() {
        parts.push(format!("busiest thread {} {:.0}%", t.name, t.percent));
    }
    if let Some(c) = load.busiest_core() {
        parts.push(format!("busiest core cpu{} {:.0}% (softirq {:.0}%)", c.cpu, c.busy_percent, c.softirq_percent));
    }
    if load.steal_percent >= 1.0 {
        parts.push(format!("steal {:.0}%", load.steal_percent));
    }
    if let Some(cg) = load.cgroup.as_ref().filter(|cg| cg.version == 0) {
        // A Windows job object: its rate, no periods to count.
        parts.push(format!("{} quota {:.0}% of a core", cg.path, cg.quota_cores() * 100.0));
    } else if let Some(cg) = &load.cgroup {
        parts.push(format!(
            "cgroup {} quota {:.0}% of a core, throttled in {} of {} periods",
            cg.path,
            cg.quota_cores() * 100.0,
            cg.throttled_periods,
            cg.periods
        ));
    }
    parts.join(", ")
}

/// `headroom serve`'s banner (stderr): where it listens and whom it serves.
pub fn serve_banner(
    listening: &str,
    token_required: bool,
    iperf3: bool,
    iperf2_port: Option<u16>,
    disk_dirs: &[String],
) -> String {
    format!(
        "headroom serve: listening on {listening} (TCP and UDP); headroom clients: {}; iperf3 clients: {}{}; disk probes: {}\n",
        if token_required { "token required" } else { "no authentication" },
        if iperf3 { "served" } else { "refused (add --iperf3)" },
        // Only when asked for: the banner of a server without --iperf2 stays as it was.
        iperf2_port.map(|p| format!("; iperf2 clients: served on TCP and UDP port {p}")).unwrap_or_default(),
        if disk_dirs.is_empty() { "refused (add --allow-path DIR)".to_string() } else { format!("in {}", disk_dirs.join(", ")) }
    )
}

/// One line of `headroom serve`'s test log, as text or (`--json`) a JSON event.
pub fn serve_log_line(line: &str, json: bool) -> String {
    if json {
        format!("{}\n", serde_json::json!({"event": "test", "line": line}))
    } else {
        format!("{line}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::{Latency, NetSpec, Summary, Warning, WarningCode};
    use serde_json::json;

    fn net(test: &str, name: &str, bytes: Option<u64>) -> Probe {
        Probe {
            id: test.into(),
            name: name.into(),
            spec: ProbeSpec::Net(NetSpec {
                test: test.into(),
                streams: 1,
                protocol: "headroom".into(),
                peer: "198.18.1.1:5201".into(),
                bytes,
                ..Default::default()
            }),
            summary: Summary { bytes_per_sec: 117.0e6, duration_s: 4.0, bytes: Some(12_000_000), ..Summary::default() },
            samples: vec![],
            histogram: None,
            warnings: vec![],
            details: Default::default(),
            host: None,
        }
    }

    fn gigabit() -> LinkCeiling {
        LinkCeiling {
            name: "1GbE TCP (MTU 1500)".into(),
            tcp_bytes_per_sec: Some(117.69e6),
            source: "--link".into(),
            is_virtual: false,
            note: Some("a note".into()),
        }
    }

    #[test]
    fn the_busy_poll_line_says_each_end() {
        let busy =
            json!({"local": {"spin": true, "so_busy_poll": true}, "remote": {"spin": false, "so_busy_poll": false}});
        assert_eq!(
            busy_poll_line(&busy),
            "busy-polled (--busy-poll): here spin yes, SO_BUSY_POLL yes; server spin no, SO_BUSY_POLL no"
        );
    }

    #[test]
    fn the_udp_offload_line_says_each_ends_half() {
        let line = udp_offload_line(&json!({"local": {"gso": true}, "remote": {"gro": false}}));
        assert_eq!(line, "UDP offload (--gsro): here GSO yes, server GRO no");
        let both = udp_offload_line(&json!({"local": {"gso": true, "gro": true}}));
        assert_eq!(both, "UDP offload (--gsro): here GSO yes, here GRO yes");
    }

    #[test]
    fn heading_names_the_server_and_the_ceiling() {
        let text = heading("nas:5201", "headroom", Some("0.1.0"), &gigabit(), Style::default());
        assert_eq!(
            text,
            "headroom net nas:5201 (headroom protocol, server 0.1.0)\n\
             link: 1GbE TCP (MTU 1500) (--link): TCP ceiling 941.5 Mb/s (117.7 MB/s); a note\n"
        );
        let iperf3 = heading("nas:5201", "iperf3", None, &gigabit(), Style { color: true, iec: true });
        assert!(iperf3.starts_with("\x1b[1mheadroom net\x1b[0m nas:5201 (iperf3 protocol)\n"), "{iperf3}");
        assert!(iperf3.contains("(117.7 MB/s, 112.2 MiB/s)"), "{iperf3}");
    }

    #[test]
    fn a_throughput_block_shows_share_tcp_info_cpu_and_notes() {
        let mut p = net("tcp", "TCP upload x1", Some(12_000_000));
        p.details.insert(CEILING_SHARE.into(), json!(0.994));
        p.details.insert("tcp_info".into(), json!({"retransmits": 3, "srtt_us": 1340.0, "cwnd_bytes": 2048 * 1024}));
        p.details.insert("cpu_local_percent".into(), json!(17.2));
        p.details.insert("cpu_remote_percent".into(), json!(16.0));
        p.details.insert(
            "cpu_load_local".into(),
            json!({"wall_s": 4.0, "cores": 2, "process_percent": 17.0, "threads": [{"name": "tcp-send-0", "tid": 1, "percent": 15.0}],
                   "per_core": [{"cpu": 1, "busy_percent": 100.0, "softirq_percent": 4.0, "steal_percent": 0.0}],
                   "steal_percent": 13.0, "softirq_percent": 4.0}),
        );
        p.details.insert("rtt_under_load_ns".into(), json!({"mean": 251_400.0, "p99": 7_470_000.0}));
        p.details.insert("skip_rx_copy".into(), json!({"remote": false}));
        p.details.insert("zerocopy".into(), json!({"local": true, "remote": false}));
        p.warnings.push(Warning::new(WarningCode::CpuLimited, "limited by x"));
        let text = probe(&p, &gigabit(), Style::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "  TCP upload x1            936.0 Mb/s (117.0 MB/s)  99.4% of 1GbE TCP (MTU 1500)  12.00 MB (11.44 MiB) in 4.00 s  \
             retr 3  srtt 1.34 ms  cwnd 2048 KiB  cpu 17% here / 16% server"
        );
        assert_eq!(
            lines[1],
            "                           cpu here: process 17% of one core (2 cores), busiest thread tcp-send-0 15%, \
             busiest core cpu1 100% (softirq 4%), steal 13%"
        );
        assert_eq!(
            lines[2],
            "                           receivers skipped the copy to user space (--skip-rx-copy): server no"
        );
        assert_eq!(
            lines[3],
            "                           senders skipped the copy into the kernel (--zerocopy): here yes, server no"
        );
        assert_eq!(lines[4], "                           RTT under load: mean 251.4 us  p99 7.47 ms");
        assert_eq!(lines[5], "                           note: limited by x");
        assert_eq!(lines.len(), 6);
        p.details.insert("zerocopy".into(), json!({}));
        let text = probe(&p, &gigabit(), Style::default());
        assert!(text.contains("(--zerocopy): the server does not say\n"), "{text}");
    }

    #[test]
    fn above_the_ceiling_says_so_instead_of_a_share() {
        let mut p = net("tcp", "TCP upload x4", None);
        p.details.insert(CEILING_SHARE.into(), json!(1.86));
        let text = probe(&p, &gigabit(), Style::default());
        assert!(text.contains("  above the 1GbE TCP (MTU 1500) ceiling (virtual NIC?)  cpu 0% here\n"), "{text}");
        assert!(!text.contains(" in 4.00 s"), "no --bytes, no transfer size: {text}");
    }

    #[test]
    fn round_trips_are_one_latency_line() {
        let mut p = net("rr", "TCP request/response 64 B", None);
        p.summary.latency_ns = Some(Latency {
            min: Some(16_900.0),
            mean: 37_600.0,
            p50: 18_400.0,
            p99: 201_300.0,
            max: 26_660_000.0,
            stddev: Some(395_000.0),
            ..Latency::default()
        });
        assert_eq!(
            probe(&p, &gigabit(), Style::default()),
            "  TCP request/response 64 B min 16.9 us  mean 37.6 us  p50 18.4 us  p99 201.3 us  max 26.66 ms  stddev 395.0 us\n"
        );
    }

    #[test]
    fn serve_lines() {
        assert_eq!(
            serve_banner("127.0.0.1:5201", false, false, None, &[]),
            "headroom serve: listening on 127.0.0.1:5201 (TCP and UDP); headroom clients: no authentication; iperf3 clients: refused (add --iperf3); disk probes: refused (add --allow-path DIR)\n"
        );
        assert!(serve_banner("0.0.0.0:5201", false, true, Some(5001), &[])
            .contains("iperf3 clients: served; iperf2 clients: served on TCP and UDP port 5001; disk probes"));
        assert_eq!(serve_log_line("a \"b\"", true), "{\"event\":\"test\",\"line\":\"a \\\"b\\\"\"}\n");
        assert_eq!(serve_log_line("a", false), "a\n");
    }

    #[test]
    fn a_job_objects_rate_is_named_without_periods_a_cgroups_with_them() {
        let quota = |version, path: &str| headroom_result::CgroupCpu {
            version,
            path: path.into(),
            quota_us: 20_000,
            period_us: 10_000,
            periods: 50,
            throttled_periods: 5,
            ..Default::default()
        };
        let load = |cg| CpuLoad { cores: 8, cgroup: Some(cg), ..CpuLoad::default() };
        let job = cpu_line(&load(quota(0, "job object (CpuRate 2500, hard cap)")));
        assert!(job.ends_with(", job object (CpuRate 2500, hard cap) quota 200% of a core"), "{job}");
        let cgroup = cpu_line(&load(quota(2, "/bench")));
        assert!(cgroup.ends_with(", cgroup /bench quota 200% of a core, throttled in 5 of 50 periods"), "{cgroup}");
    }
}
