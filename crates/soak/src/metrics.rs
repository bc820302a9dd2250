//! Prometheus metrics of a running soak (`--metrics ADDR:PORT`), so it can be
//! watched in Grafana: current throughput and IOPS per probe, a latency
//! histogram per probe, and counters of samples and detections.
//!
//! The registry and text encoding are the prometheus-client crate's. The
//! HTTP side is a few lines on std's TcpListener (why: one GET, no TLS, no
//! keep-alive; an HTTP framework would be most of the binary's weight). It
//! answers `GET /metrics` (and `/`), bounds request size and time, and never
//! blocks the soak: it runs on its own thread and reads atomics.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Labels of per-probe metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabel {
    /// The soak probe's name: write, read, iops, net or a remote-* one.
    pub probe: String,
}

/// Labels of detection counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// The detector: periodic_dips, latency_drift, link_flaps, write_cliff.
    pub kind: String,
}

/// Upper bounds (seconds) of the latency histogram: 10 us .. 10 s.
const LATENCY_BOUNDS_S: [f64; 13] =
    [10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 100e-3, 1.0, 10.0];

/// A latency histogram that merges whole HDR histograms at once (a probe
/// reports millions of I/Os per cycle; prometheus-client's Histogram only
/// takes one observation at a time).
#[derive(Clone, Debug, Default)]
pub struct MergedHistogram {
    inner: Arc<Mutex<MergedState>>,
}

#[derive(Debug, Default)]
struct MergedState {
    sum_s: f64,
    count: u64,
    /// Non-cumulative counts per bound, plus one for +Inf.
    buckets: [u64; LATENCY_BOUNDS_S.len() + 1],
}

impl MergedHistogram {
    /// Adds `count` observations of `value_ns`.
    pub fn observe_ns(&self, value_ns: f64, count: u64) {
        let s = value_ns / 1e9;
        let at = LATENCY_BOUNDS_S.iter().position(|b| s <= *b).unwrap_or(LATENCY_BOUNDS_S.len());
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        st.sum_s += s * count as f64;
        st.count += count;
        st.buckets[at] += count;
    }
}

impl TypedMetric for MergedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for MergedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let buckets: Vec<(f64, u64)> = LATENCY_BOUNDS_S
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(st.buckets.iter().copied())
            .collect();
        encoder.encode_histogram::<NoLabelSet>(st.sum_s, st.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The soak's metrics. Cheap to clone (shared handles).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    throughput: Family<ProbeLabel, Gauge<f64, AtomicU64>>,
    iops: Family<ProbeLabel, Gauge<f64, AtomicU64>>,
    latency: Family<ProbeLabel, MergedHistogram>,
    samples: Family<ProbeLabel, Counter>,
    detections: Family<KindLabel, Counter>,
    cycle: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Metrics with every family registered and no values yet.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("headroom_soak");
        let throughput = Family::<ProbeLabel, Gauge<f64, AtomicU64>>::default();
        let iops = Family::<ProbeLabel, Gauge<f64, AtomicU64>>::default();
        let latency = Family::<ProbeLabel, MergedHistogram>::default();
        let samples = Family::<ProbeLabel, Counter>::default();
        let detections = Family::<KindLabel, Counter>::default();
        let cycle = Gauge::default();
        registry.register(
            "throughput_bytes_per_second",
            "Payload bytes per second of the last sample",
            throughput.clone(),
        );
        registry.register("iops", "Operations per second of the last sample", iops.clone());
        registry.register("latency_seconds", "Per-operation latency, merged per cycle", latency.clone());
        registry.register("samples", "Per-second samples recorded", samples.clone());
        registry.register(
            "detections",
            "Detections: flap, server_outage, probe_error, periodic_dips",
            detections.clone(),
        );
        registry.register("cycle", "Number of the running cycle", cycle.clone());
        Metrics { registry: Arc::new(registry), throughput, iops, latency, samples, detections, cycle }
    }

    fn label(probe: &str) -> ProbeLabel {
        ProbeLabel { probe: probe.to_string() }
    }

    /// One per-second sample of a probe.
    pub fn sample(&self, probe: &str, bytes_per_sec: f64, iops: Option<f64>) {
        self.throughput.get_or_create(&Self::label(probe)).set(bytes_per_sec);
        if let Some(v) = iops {
            self.iops.get_or_create(&Self::label(probe)).set(v);
        }
        self.samples.get_or_create(&Self::label(probe)).inc();
    }

    /// A probe's latency histogram: (upper edge ns, count) pairs.
    pub fn latency(&self, probe: &str, buckets: &[(u64, u64)]) {
        let h = self.latency.get_or_create(&Self::label(probe));
        for (value_ns, count) in buckets {
            h.observe_ns(*value_ns as f64, *count);
        }
    }

    /// Counts one finding of detector `kind`.
    pub fn detection(&self, kind: &str) {
        self.detections.get_or_create(&KindLabel { kind: kind.to_string() }).inc();
    }

    /// Sets the cycle gauge to cycle number `n`.
    pub fn cycle(&self, n: i64) {
        self.cycle.set(n);
    }

    /// The exposition text (OpenMetrics flavour of the Prometheus text format).
    pub fn render(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }

    /// Serves the metrics on `addr` from a background thread; returns the
    /// bound address (port 0 picks a free one).
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr)?;
        let bound = listener.local_addr()?;
        let metrics = self.clone();
        std::thread::Builder::new().name("soak-metrics".into()).spawn(move || {
            for stream in listener.incoming().flatten() {
                // One client at a time is plenty for a scraper; a slow or
                // hostile one is cut off by the timeouts.
                let _ = answer(stream, &metrics);
            }
        })?;
        Ok(bound)
    }
}

fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut request = Vec::with_capacity(512);
    let mut buf = [0u8; 512];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && !request.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
        if request.len() > 8192 {
            return respond(&mut stream, "431 Request Header Fields Too Large", "text/plain", "request too large\n");
        }
    }
    let line = String::from_utf8_lossy(request.split(|b| *b == b'\n').next().unwrap_or_default()).into_owned();
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics" | "/")) => respond(
            &mut stream,
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            &metrics.render(),
        ),
        (Some("GET"), _) => respond(&mut stream, "404 Not Found", "text/plain", "try /metrics\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", "only GET\n"),
    }
}

fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_over_http() {
        let m = Metrics::new();
        m.sample("write", 123.5e6, Some(30000.0));
        m.latency("write", &[(40_000, 10), (2_000_000, 5), (50_000_000_000, 1)]);
        m.detection("flap");
        m.detection("flap");
        m.cycle(3);
        let addr = m.serve("127.0.0.1:0".parse().unwrap()).unwrap();

        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        assert!(text.contains("headroom_soak_throughput_bytes_per_second{probe=\"write\"} 123500000.0"), "{text}");
        assert!(text.contains("headroom_soak_iops{probe=\"write\"} 30000.0"), "{text}");
        assert!(text.contains("headroom_soak_detections_total{kind=\"flap\"} 2"), "{text}");
        assert!(text.contains("headroom_soak_latency_seconds_count{probe=\"write\"} 16"), "{text}");
        // Cumulative buckets: 10 at <= 50 us, 15 at <= 2.5 ms, 16 at +Inf.
        for (le, count) in [("0.00005", 10), ("0.0025", 15), ("+Inf", 16)] {
            let line = format!("headroom_soak_latency_seconds_bucket{{le=\"{le}\",probe=\"write\"}} {count}");
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(text.contains("headroom_soak_cycle 3"), "{text}");

        // Hostile and wrong requests get an answer, and the server keeps serving.
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&vec![b'A'; 10_000]).unwrap();
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"POST /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 405"));
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"));
    }
}
