//! Prometheus metrics of a running soak (`--metrics ADDR[:PORT]`), so it can
//! be watched in Grafana: counters of bytes and operations per probe (for
//! `rate()`: a gauge of the last 1-second sample would show a 15 s scrape one
//! second in fifteen), a latency histogram per probe, counters of samples and
//! detections, and `headroom_build_info`, every one carrying the constant
//! labels the soak was given (`host=` at least, so one dashboard tells a
//! fleet's agents apart).
//!
//! The default port is [`DEFAULT_PORT`]: 9100-9999, Prometheus's exporter
//! range, has been fully allocated since 2023 and 9464 (used before) is
//! OpenTelemetry's Prometheus exporter's default, so it is one outside both.
//!
//! The registry and text encoding are the prometheus-client crate's. The
//! HTTP side is a few lines on std's TcpListener (why: one GET, no TLS, no
//! keep-alive; an HTTP framework would be most of the binary's weight). It
//! answers `GET /metrics` (and `/`), bounds request size and time, and never
//! blocks the soak: it runs on its own thread and reads atomics.
//!
//! A scraper that asks for OpenMetrics (Prometheus does, in its Accept
//! header) gets prometheus-client's OpenMetrics text; anyone else (curl,
//! `promtool check metrics`, older scrapers) gets the classic text format
//! 0.0.4, which names a counter's HELP and TYPE with its `_total` suffix and
//! has no `# EOF`: promtool reads only that format, and flagged every counter
//! of the OpenMetrics text as having no help text.
//!
//! Long (about 510 lines): about 410 lines of code, the rest its unit tests.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
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

/// Labels of detection counters and findings.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// Live events: flap, server_outage, probe_error. Findings of the
    /// analysis: periodic_dips, latency_drift, link_flaps, write_cliff, ...
    pub kind: String,
}

/// Labels of `headroom_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabel {
    /// headroom's version.
    pub version: String,
}

/// The port `--metrics ADDR` listens on when none is given.
pub const DEFAULT_PORT: u16 = 10120;

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
    bytes: Family<ProbeLabel, Counter>,
    operations: Family<ProbeLabel, Counter>,
    measured: Family<ProbeLabel, Counter<f64, AtomicU64>>,
    latency: Family<ProbeLabel, MergedHistogram>,
    samples: Family<ProbeLabel, Counter>,
    detections: Family<KindLabel, Counter>,
    findings: Family<KindLabel, Gauge>,
    /// Every kind ever found (and the usual ones), so each series stays and
    /// reads 0 when a re-analysis no longer finds it.
    finding_kinds: Arc<Mutex<BTreeSet<String>>>,
    cycle: Gauge,
}

/// Findings shown from the start, at 0, so dashboards have their series.
const USUAL_FINDINGS: [&str; 5] = ["periodic_dips", "latency_drift", "link_flaps", "write_cliff", "write_decline"];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a constant label given to [`Metrics::with_labels`] was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LabelError {
    /// Not `NAME=VALUE`, or NAME is not a Prometheus label name.
    #[error("'{0}' is not NAME=VALUE with NAME of letters, digits and _ (not starting with a digit or __)")]
    Malformed(String),
    /// NAME is one the per-metric labels already use.
    #[error("label '{0}' is reserved (probe, kind and le are headroom's own)")]
    Reserved(String),
    /// The same NAME twice.
    #[error("label '{0}' is given twice")]
    Duplicate(String),
    /// VALUE holds a quote, backslash or line break, or is empty or over 256 bytes.
    #[error("the value of '{0}' must be 1 to 256 characters without quotes, backslashes or line breaks")]
    BadValue(String),
}

/// Parses and checks constant labels (`host=nas1`): Prometheus label names,
/// none of the per-metric ones, no duplicates, values that need no escaping
/// (prometheus-client writes label values as they are).
pub fn parse_labels(specs: &[String]) -> Result<Vec<(String, String)>, LabelError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for spec in specs {
        let (name, value) = spec.split_once('=').ok_or_else(|| LabelError::Malformed(spec.clone()))?;
        let name_ok = !name.is_empty()
            && !name.starts_with("__")
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok {
            return Err(LabelError::Malformed(spec.clone()));
        }
        if ["probe", "kind", "le"].contains(&name) {
            return Err(LabelError::Reserved(name.to_string()));
        }
        if value.is_empty() || value.len() > 256 || value.contains(['"', '\\', '\n', '\r']) {
            return Err(LabelError::BadValue(name.to_string()));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(LabelError::Duplicate(name.to_string()));
        }
        out.push((name.to_string(), value.to_string()));
    }
    Ok(out)
}

impl Metrics {
    /// Metrics with every family registered, no values yet and no constant labels.
    pub fn new() -> Metrics {
        Self::with_labels(Vec::new())
    }

    /// Metrics whose every series carries `labels` (checked by [`parse_labels`]).
    pub fn with_labels(labels: Vec<(String, String)>) -> Metrics {
        let labels = labels.into_iter().map(|(n, v)| (Cow::Owned(n), Cow::Owned(v)));
        // No prefix: headroom_build_info is not a soak_ metric.
        let mut registry = Registry::with_labels(labels);
        let bytes = Family::<ProbeLabel, Counter>::default();
        let operations = Family::<ProbeLabel, Counter>::default();
        let measured = Family::<ProbeLabel, Counter<f64, AtomicU64>>::default();
        let latency = Family::<ProbeLabel, MergedHistogram>::default();
        let samples = Family::<ProbeLabel, Counter>::default();
        let detections = Family::<KindLabel, Counter>::default();
        let findings = Family::<KindLabel, Gauge>::default();
        let cycle = Gauge::default();
        let build = Family::<BuildLabel, Gauge>::default();
        registry.register(
            "headroom_soak_bytes",
            "Payload bytes moved by the probe (rate() gives bytes per second)",
            bytes.clone(),
        );
        registry.register(
            "headroom_soak_operations",
            "I/O operations of the probe (rate() gives IOPS); probes that count none have no series",
            operations.clone(),
        );
        // The probes of a cycle take turns: rate(bytes) averages a probe's
        // idle turns in, rate(bytes) / rate(measured seconds) does not.
        registry.register(
            "headroom_soak_measured_seconds",
            "Seconds the probe was measured; divide the rates of the other counters by its rate for per-second figures while it ran",
            measured.clone(),
        );
        registry.register("headroom_soak_latency_seconds", "Per-operation latency, merged per cycle", latency.clone());
        registry.register("headroom_soak_samples", "Per-second samples recorded", samples.clone());
        registry.register(
            "headroom_soak_detections",
            "Events as they happen: flap, server_outage, probe_error",
            detections.clone(),
        );
        registry.register(
            "headroom_soak_findings",
            "Findings of the soak's analysis so far, redone every minute: periodic_dips, latency_drift, \
             link_flaps, write_cliff, write_decline, ...",
            findings.clone(),
        );
        registry.register("headroom_soak_cycle", "Number of the running cycle", cycle.clone());
        registry.register("headroom_build_info", "headroom's version; always 1", build.clone());
        build.get_or_create(&BuildLabel { version: env!("CARGO_PKG_VERSION").to_string() }).set(1);
        let finding_kinds = Arc::new(Mutex::new(USUAL_FINDINGS.iter().map(|k| k.to_string()).collect()));
        let metrics = Metrics {
            registry: Arc::new(registry),
            bytes,
            operations,
            measured,
            latency,
            samples,
            detections,
            findings,
            finding_kinds,
            cycle,
        };
        metrics.findings(&BTreeMap::new());
        metrics
    }

    fn label(probe: &str) -> ProbeLabel {
        ProbeLabel { probe: probe.to_string() }
    }

    /// One sample of a probe: `interval` long, at `bytes_per_sec` and `iops`.
    /// The counters get what the interval moved (the engines' rates are
    /// counts over the interval, so this gives the counts back).
    pub fn sample(&self, probe: &str, interval: Duration, bytes_per_sec: f64, iops: Option<f64>) {
        let label = Self::label(probe);
        let count = |rate: f64| (rate * interval.as_secs_f64()).round().max(0.0) as u64;
        self.bytes.get_or_create(&label).inc_by(count(bytes_per_sec));
        if let Some(v) = iops {
            self.operations.get_or_create(&label).inc_by(count(v));
        }
        self.measured.get_or_create(&label).inc_by(interval.as_secs_f64());
        self.samples.get_or_create(&label).inc();
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

    /// The analysis so far: how many findings of each kind. Kinds found
    /// before and not now drop to 0 (a re-analysis may merge or retract).
    pub fn findings(&self, counts: &BTreeMap<String, i64>) {
        let mut kinds = self.finding_kinds.lock().unwrap_or_else(|p| p.into_inner());
        kinds.extend(counts.keys().cloned());
        for kind in kinds.iter() {
            self.findings.get_or_create(&KindLabel { kind: kind.clone() }).set(counts.get(kind).copied().unwrap_or(0));
        }
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

    /// The exposition in the classic Prometheus text format 0.0.4.
    pub fn render_classic(&self) -> String {
        openmetrics_to_classic(&self.render())
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

/// Rewrites prometheus-client's OpenMetrics text into the classic format:
/// the two differ, for what this registry emits, only in a counter family's
/// name in HELP/TYPE (`x` there, `x_total` in the classic format), the
/// `# UNIT` lines and the closing `# EOF`.
fn openmetrics_to_classic(text: &str) -> String {
    let counters: HashSet<&str> =
        text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].into_iter().find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) { "_total" } else { "" };
                out.push_str(&format!("{prefix}{name}{suffix} {tail}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
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
    let head = String::from_utf8_lossy(&request).into_owned();
    let line = head.lines().next().unwrap_or_default();
    let openmetrics = head.lines().skip(1).any(|h| {
        h.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("accept") && value.contains("application/openmetrics-text")
        })
    });
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics" | "/")) if openmetrics => respond(
            &mut stream,
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            &metrics.render(),
        ),
        (Some("GET"), Some("/metrics" | "/")) => {
            respond(&mut stream, "200 OK", "text/plain; version=0.0.4; charset=utf-8", &metrics.render_classic())
        }
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
        m.sample("write", Duration::from_secs(1), 123.5e6, Some(30000.0));
        m.sample("write", Duration::from_millis(250), 100e6, Some(20000.0));
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
        // Counters of what both samples moved: 123.5 MB + 25 MB, 30000 + 5000 operations.
        assert!(text.contains("headroom_soak_bytes_total{probe=\"write\"} 148500000\n"), "{text}");
        assert!(text.contains("headroom_soak_operations_total{probe=\"write\"} 35000\n"), "{text}");
        assert!(text.contains("# TYPE headroom_soak_bytes_total counter\n"), "{text}");
        assert!(text.contains("headroom_soak_measured_seconds_total{probe=\"write\"} 1.25\n"), "{text}");
        let version = format!("headroom_build_info{{version=\"{}\"}} 1\n", env!("CARGO_PKG_VERSION"));
        assert!(text.contains(&version), "{text}");
        assert!(text.contains("headroom_soak_detections_total{kind=\"flap\"} 2"), "{text}");
        assert!(text.contains("headroom_soak_latency_seconds_count{probe=\"write\"} 16"), "{text}");
        // Cumulative buckets: 10 at <= 50 us, 15 at <= 2.5 ms, 16 at +Inf.
        for (le, count) in [("0.00005", 10), ("0.0025", 15), ("+Inf", 16)] {
            let line = format!("headroom_soak_latency_seconds_bucket{{le=\"{le}\",probe=\"write\"}} {count}");
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(text.contains("headroom_soak_cycle 3"), "{text}");
        // No Accept header: the classic format promtool reads, counters'
        // HELP named with _total, no # EOF.
        assert!(text.contains("Content-Type: text/plain; version=0.0.4"), "{text}");
        assert!(text.contains("# HELP headroom_soak_samples_total Per-second samples recorded.\n"), "{text}");
        assert!(text.contains("# TYPE headroom_soak_detections_total counter\n"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");

        // A scraper asking for OpenMetrics gets it.
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(
            b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n",
        )
        .unwrap();
        let mut om = String::new();
        s.read_to_string(&mut om).unwrap();
        assert!(om.contains("Content-Type: application/openmetrics-text"), "{om}");
        assert!(om.contains("# TYPE headroom_soak_samples counter\n"), "{om}");
        assert!(om.ends_with("# EOF\n"), "{om}");

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

    #[test]
    fn constant_labels_on_every_series() {
        let labels = parse_labels(&["host=nas1".into(), "site=lab".into()]).unwrap();
        let m = Metrics::with_labels(labels);
        m.sample("write", Duration::from_secs(1), 1.0, Some(2.0));
        m.latency("write", &[(40_000, 1)]);
        m.detection("flap");
        m.cycle(1);
        let text = m.render_classic();
        let series: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(series.len() > 10, "{text}");
        for s in series {
            assert!(s.contains("host=\"nas1\"") && s.contains("site=\"lab\""), "{s} lacks the labels in {text}");
        }
    }

    #[test]
    fn bad_labels_are_refused() {
        let one = |s: &str| parse_labels(&[s.to_string()]);
        assert_eq!(one("host"), Err(LabelError::Malformed("host".into())));
        assert_eq!(one("1x=a"), Err(LabelError::Malformed("1x=a".into())));
        assert_eq!(one("__x=a"), Err(LabelError::Malformed("__x=a".into())));
        assert_eq!(one("ho-st=a"), Err(LabelError::Malformed("ho-st=a".into())));
        assert_eq!(one("probe=a"), Err(LabelError::Reserved("probe".into())));
        assert_eq!(one("host="), Err(LabelError::BadValue("host".into())));
        assert_eq!(one("host=a\"b"), Err(LabelError::BadValue("host".into())));
        assert_eq!(parse_labels(&["host=a".into(), "host=b".into()]), Err(LabelError::Duplicate("host".into())));
        assert_eq!(one("host=nas-1.lan").unwrap(), vec![("host".to_string(), "nas-1.lan".to_string())]);
    }
}
