//! A soak written into a real soak database and loaded as `report` loads it:
//! three probes taking 20 s turns over 20 minutes, a 15 s dip every 5 min, a
//! link flap, a server outage, latency with per-second p99, and a second
//! session after a gap.

use headroom_result::ResultDoc;
use headroom_soak::SampleRow;
use headroom_soak::{EventRow, SampleDetail, SoakConfig, SoakInfo, Store};
use std::path::Path;

pub const T0: f64 = 1_800_000_000.0;

pub fn soak_doc(dir: &Path) -> (ResultDoc, String) {
    let info = SoakInfo {
        started_at: headroom_soak::rfc3339(T0),
        started_unix: T0,
        planned_s: Some(1300.0),
        config: SoakConfig {
            cycle: vec!["write".into(), "read".into(), "net".into()],
            probe_s: 20.0,
            path: Some("/mnt/nas".into()),
            server: Some("nas.lan".into()),
            vmkernel_log: None,
            extra: serde_json::Value::Null,
        },
        host: None,
    };
    let path = dir.join("nas.sqlite");
    let store = Store::create(&path, &info).unwrap();
    let levels = [("write", 400e6), ("read", 900e6), ("net", 110e6)];
    let mut n = 1;
    for (from, to, clean) in [(0.0, 600.0, false), (700.0, 1300.0, true)] {
        let session = store.begin_session(T0 + from).unwrap();
        let mut t = from;
        'turns: loop {
            for (probe, level) in levels {
                let cycle = store.begin_cycle(session, n, probe, T0 + t).unwrap();
                for i in 0..20 {
                    if t + 1.0 > to {
                        break 'turns;
                    }
                    let dip = (t - 100.0).rem_euclid(300.0) < 15.0;
                    let wobble = 1.0 + 0.02 * ((t * 7.3).sin());
                    let v = level * wobble * if dip { 0.15 } else { 1.0 };
                    let lat = (probe != "net").then_some(2e6 * (1.0 + t / 1300.0) * if dip { 4.0 } else { 1.0 });
                    let row = SampleRow {
                        t_unix: T0 + t + 1.0,
                        bytes_per_sec: v,
                        iops: (probe != "net").then_some(v / 1048576.0),
                        lat_mean_ns: lat,
                        lat_p99_ns: lat.map(|l| 3.0 * l + 1e5 * f64::from(i % 3)),
                    };
                    store.add_sample(cycle, probe, &row).unwrap();
                    t += 1.0;
                }
                n += 1;
            }
        }
        if clean {
            store.end_session(session, T0 + to, "duration").unwrap();
        }
    }
    for (kind, source, at, end, msg) in [
        ("flap", "sysfs", 250.0, Some(253.5), "eth0 down"),
        ("server_outage", "soak", 820.0, Some(905.0), "server unreachable: connection refused; the other probes go on"),
    ] {
        store
            .add_event(&EventRow {
                id: 0,
                t_unix: T0 + at,
                end_unix: end.map(|e| T0 + e),
                kind: kind.parse().unwrap(),
                source: source.into(),
                device: (kind == "flap").then(|| "eth0".into()),
                message: msg.into(),
                details: None,
            })
            .unwrap();
    }
    drop(store);
    (headroom_soak::load_result(&path, SampleDetail::AtMost(2000)).unwrap(), "nas.sqlite".into())
}
