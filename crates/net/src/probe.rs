//! Turns what the client measured into `headroom.result/v1` probes
//! (kind `net` or `ping`), with the sender's TCP_INFO, CPU of both ends
//! (percent of one core, and per core/thread/cgroup as `cpu_load_local` and
//! `cpu_load_remote`), UDP loss/jitter and the RTT under load in `details`.

use crate::client::{EchoResult, RrResult};
use crate::ping::ConnectResult;
use crate::setting::{NetSetting, NetSpelling};
use crate::stats::LatencyRecorder;
use crate::tcpinfo::{self, TcpInfo};
use crate::throughput::ThroughputResult;
use headroom_result::{
    details, Histogram, NetProbeKind, NetProtocol, NetSpec, PingSpec, Probe, ProbeSpec, Sample, Side, SocketBuffers,
    Summary, Warning,
};
use headroom_units::format_size;
use serde_json::json;
use std::collections::BTreeMap;

fn probe(id: String, name: String, spec: ProbeSpec, summary: Summary) -> Probe {
    Probe {
        host: None,
        id,
        name,
        spec,
        summary,
        samples: Vec::new(),
        histogram: None,
        warnings: Vec::new(),
        details: BTreeMap::new(),
    }
}

fn histogram(r: &LatencyRecorder) -> Option<Histogram> {
    (r.count() > 0).then(|| Histogram { buckets: r.buckets() })
}

/// The id of a throughput probe, e.g. `tcp-up-4`, `tcp-down-1`, `udp-up-1`.
pub fn throughput_id(r: &ThroughputResult) -> String {
    let dir = match r.direction {
        Some(crate::wire::TrafficDirection::Upload) | None => "up",
        Some(crate::wire::TrafficDirection::Download) => "down",
        Some(crate::wire::TrafficDirection::Bidir) => "bidir",
    };
    format!("{}-{dir}-{}", if r.udp { "udp" } else { "tcp" }, r.streams)
}

/// A throughput test as a probe.
/// Its warnings name settings as `spell` spells them.
pub fn throughput_probe(r: &ThroughputResult, spell: NetSpelling) -> Probe {
    let dir = r.direction.unwrap_or(crate::wire::TrafficDirection::Upload);
    let test = dir.test_name(r.udp);
    let name = format!(
        "{} {} x{}",
        if r.udp { "UDP" } else { "TCP" },
        match dir {
            crate::wire::TrafficDirection::Upload => "upload",
            crate::wire::TrafficDirection::Download => "download",
            crate::wire::TrafficDirection::Bidir => "bidirectional",
        },
        r.streams
    );
    let mut p = probe(
        throughput_id(r),
        name,
        ProbeSpec::Net(NetSpec {
            test,
            streams: r.streams,
            protocol: r.protocol.clone(),
            peer: r.peer.clone(),
            rate_bits_per_sec: r.rate_bits,
            bytes: r.fixed_bytes,
            source: r.source.clone(),
            interface: None,
            socket_buffers: r.window.map(|asked| SocketBuffers {
                asked: u64::from(asked),
                local: r.buffers_local,
                remote: r.buffers_remote,
            }),
        }),
        Summary {
            bytes_per_sec: r.bytes_per_sec(),
            duration_s: r.duration_s,
            bytes: Some(r.upload_bytes + r.download_bytes),
            sample_interval_s: Some(r.sample_interval.as_secs_f64()),
            ..Default::default()
        },
    );
    p.samples = r.samples.clone();
    if let Some(w) = buffer_cap_warning(r, spell) {
        p.warnings.push(w);
    }
    let d = &mut p.details;
    d.insert("upload_bytes".into(), json!(r.upload_bytes));
    d.insert("download_bytes".into(), json!(r.download_bytes));
    if let Some(w) = r.upload_duration_s {
        d.insert("upload_window_s".into(), json!(w));
    }
    d.insert(details::cpu_percent_key(Side::Local).into(), json!(r.cpu_local.percent_total()));
    let gb = (r.upload_bytes + r.download_bytes) as f64 / 1e9;
    if gb > 0.0 {
        d.insert("cpu_local_s_per_gb".into(), json!((r.cpu_local.user_s + r.cpu_local.system_s) / gb));
    }
    if let Some(c) = &r.cpu_remote {
        d.insert(details::cpu_percent_key(Side::Remote).into(), json!(c.percent_total()));
        if gb > 0.0 {
            d.insert("cpu_remote_s_per_gb".into(), json!((c.user_s + c.system_s) / gb));
        }
    }
    for (key, load) in [("cpu_load_local", &r.cpu_load_local), ("cpu_load_remote", &r.cpu_load_remote)] {
        if let Some(load) = load {
            d.insert(key.into(), serde_json::to_value(load).unwrap_or_default());
        }
    }
    if let Some(merged) = TcpInfo::merge(&r.sender_tcp_info) {
        d.insert(details::TCP_INFO.into(), serde_json::to_value(&merged).unwrap_or_default());
        if r.streams == 1 {
            if let Some(why) = tcpinfo::explain(&merged, r.window, spell) {
                d.insert("why".into(), json!(why));
                p.warnings.push(Warning::new(headroom_result::WarningCode::SingleStreamLimited, why));
            }
        }
    }
    if let Some(u) = &r.udp_recv {
        let mut udp = json!({"packets": u.packets, "lost": u.lost, "out_of_order": u.out_of_order});
        udp[details::LOSS_PERCENT] = json!(u.loss_ratio() * 100.0);
        udp[details::JITTER_MS] = json!(u.jitter_s * 1e3);
        d.insert(details::UDP.into(), udp);
    }
    if let Some(rx) = &r.rx_copy {
        d.insert(details::SKIP_RX_COPY.into(), serde_json::to_value(rx).unwrap_or_default());
    }
    if let Some(tx) = &r.zerocopy {
        d.insert(details::ZEROCOPY.into(), serde_json::to_value(tx).unwrap_or_default());
    }
    if let Some(offload) = &r.udp_offload {
        d.insert(details::UDP_OFFLOAD.into(), serde_json::to_value(offload).unwrap_or_default());
    }
    if let Some(l) = &r.rtt_under_load {
        d.insert("rtt_under_load_ns".into(), serde_json::to_value(l).unwrap_or_default());
    }
    if let Some(e) = &r.error {
        d.insert(headroom_result::details::ERROR.into(), json!(e));
        p.warnings.push(Warning::new(headroom_result::WarningCode::TestAborted, format!("the test ended early: {e}")));
    }
    if let Some(why) = &r.missing_report {
        p.warnings.push(Warning::new(headroom_result::WarningCode::NoServerReport, why.clone()));
    }
    p
}

/// A kernel that granted less socket buffer than `--window` asked: capped
/// by net.core.wmem_max / rmem_max (the sysctl to raise is named).
fn buffer_cap_warning(r: &ThroughputResult, spell: NetSpelling) -> Option<Warning> {
    let asked = u64::from(r.window?);
    let capped: Vec<String> = [("this machine", r.buffers_local), ("the server", r.buffers_remote)]
        .into_iter()
        .filter_map(|(end, b)| {
            let b = b.filter(|b| b.capped_below(asked))?;
            Some(format!("{end} granted {} send / {} receive", format_size(b.send / 2), format_size(b.recv / 2)))
        })
        .collect();
    (!capped.is_empty()).then(|| {
        Warning::new(
            headroom_result::WarningCode::SocketBufferCapped,
            format!(
                "{} {} asked, but {}: the kernel caps it at net.core.wmem_max / rmem_max \
                 (raise both there, e.g. sysctl -w net.core.rmem_max={asked} net.core.wmem_max={asked})",
                spell(NetSetting::Window),
                format_size(asked),
                capped.join(" and "),
            ),
        )
    })
}

/// Request/response round trips as a probe (`rr`, or `rr` under load).
pub fn rr_probe(r: &RrResult, protocol: NetProtocol, peer: &str) -> Probe {
    let ops = r.rtt.count();
    let mut p = probe(
        "rr-idle".into(),
        format!("TCP request/response {} B", r.size),
        ProbeSpec::Net(NetSpec {
            test: NetProbeKind::Rr,
            streams: 1,
            protocol,
            peer: peer.into(),
            source: r.source.clone(),
            ..Default::default()
        }),
        Summary {
            bytes_per_sec: 0.0,
            iops: Some(ops as f64 / r.duration_s.max(1e-9)),
            latency_ns: r.rtt.latency(),
            duration_s: r.duration_s,
            ops: Some(ops),
            sample_interval_s: Some(r.sample_interval.as_secs_f64()),
            ..Default::default()
        },
    );
    p.samples = r.samples.clone();
    p.histogram = histogram(&r.rtt);
    if let Some(busy) = &r.busy_poll {
        p.details.insert(details::BUSY_POLL.into(), serde_json::to_value(busy).unwrap_or_default());
    }
    p
}

/// UDP echo round trips (kind ping, method udp_echo), with loss and jitter.
pub fn echo_probe(r: &EchoResult, peer: &str, interval_ms: f64) -> Probe {
    let mut p = probe(
        "udp-echo".into(),
        "UDP echo".into(),
        ProbeSpec::Ping(PingSpec {
            method: "udp_echo".into(),
            peer: peer.into(),
            count: r.sent as u32,
            interval_ms,
            source: r.source.clone(),
        }),
        Summary {
            bytes_per_sec: 0.0,
            iops: None,
            latency_ns: r.rtt.latency(),
            duration_s: r.duration_s,
            ops: Some(r.received),
            ..Default::default()
        },
    );
    p.histogram = histogram(&r.rtt);
    let loss = if r.sent > 0 { (r.sent - r.received) as f64 / r.sent as f64 * 100.0 } else { 0.0 };
    p.details.insert(details::SENT.into(), json!(r.sent));
    p.details.insert(details::RECEIVED.into(), json!(r.received));
    p.details.insert(details::LOSS_PERCENT.into(), json!(loss));
    p.details.insert(details::JITTER_MS.into(), json!(r.jitter_s * 1e3));
    if loss > 0.0 {
        p.warnings.push(Warning::new(
            headroom_result::WarningCode::UdpLoss,
            format!("{loss:.1}% of the echo datagrams got no answer"),
        ));
    }
    p
}

/// TCP handshake round trips: kind net/test connect inside `headroom net`
/// (`within` the protocol its session spoke), kind ping/method tcp_connect
/// for `headroom ping` (`within` None).
pub fn connect_probe(r: &ConnectResult, within: Option<NetProtocol>, interval_ms: f64) -> Probe {
    let as_ping = within.is_none();
    let spec = if let Some(protocol) = within {
        ProbeSpec::Net(NetSpec {
            test: NetProbeKind::Connect,
            streams: 1,
            protocol,
            peer: r.peer.clone(),
            source: r.source.clone(),
            ..Default::default()
        })
    } else {
        ProbeSpec::Ping(PingSpec {
            method: "tcp_connect".into(),
            peer: r.peer.clone(),
            count: r.attempts,
            interval_ms,
            source: r.source.clone(),
        })
    };
    let mut p = probe(
        if as_ping { "ping-tcp".into() } else { "tcp-connect".into() },
        "TCP connect (handshake RTT)".into(),
        spec,
        Summary {
            bytes_per_sec: 0.0,
            latency_ns: r.rtt.latency(),
            duration_s: r.series.iter().flatten().map(|d| d.as_secs_f64()).sum(),
            ops: Some(r.rtt.count()),
            ..Default::default()
        },
    );
    p.histogram = histogram(&r.rtt);
    let mut t = 0.0;
    for d in r.series.iter().flatten() {
        t += d.as_secs_f64();
        p.samples.push(Sample { t_s: t, latency_ns_mean: Some(d.as_nanos() as f64), ..Default::default() });
    }
    p.details.insert(details::ATTEMPTS.into(), json!(r.attempts));
    p.details.insert(details::FAILURES.into(), json!(r.failures));
    if r.failures > 0 {
        p.warnings.push(Warning::new(
            headroom_result::WarningCode::ConnectFailures,
            format!(
                "{} of {} connections failed (last: {})",
                r.failures,
                r.attempts,
                r.last_error.clone().unwrap_or_default()
            ),
        ));
    }
    p
}
