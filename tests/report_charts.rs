//! The report's charts from real results: a disk sweep on a temporary
//! directory and two `headroom net` runs against a `headroom serve` on
//! loopback, drawn by `headroom report --html` and looked at in headless
//! Chromium. Every SVG must parse as XML, the series carry the samples the
//! engines took (about 20 of a 2 s test), the percentile plots and the
//! heatmaps are there; screenshots of the pages and of each kind of chart
//! are kept under target/report-artifacts/ for people to look at. Also: a
//! result with no histograms or samples draws what it has and says what is
//! missing. The Chromium test skips with a printed reason without chromium.

mod net_support;
mod support;

use headroom_lab::chromium::{self, CHROMIUM};
use net_support::Served;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("report-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn headroom_json(args: &[&str]) -> serde_json::Value {
    let out = support::headroom_process().args(args).arg("--json").arg("--quiet").output().unwrap();
    assert!(out.status.success(), "headroom {args:?} failed: {}", support::stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn report_html(docs: &[&Path], html: &Path) -> String {
    let out = support::headroom_process().arg("report").args(docs).arg("--html").arg(html).output().unwrap();
    assert!(out.status.success(), "headroom report failed: {}", support::stderr(&out));
    std::fs::read_to_string(html).unwrap()
}

/// Each chart of a page: (class, id, the `<div>` opening tag, svg).
fn charts(html: &str) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for part in html.split("<div class=\"chart ").skip(1) {
        let class = part.split('"').next().unwrap().to_string();
        let id = part.split("id=\"").nth(1).map(|s| s.split('"').next().unwrap().to_string()).unwrap_or_default();
        let open = part.split('>').next().unwrap().to_string();
        let svg = &part[part.find("<svg").unwrap()..part.find("</svg>").unwrap() + 6];
        out.push((class, id, open, svg.to_string()));
    }
    out
}

/// The text of every `<text>` element of an SVG, trimmed.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t[t.find('>')? + 1..t.find("</text>")?].trim().to_string()))
        .collect()
}

fn chart<'a>(all: &'a [(String, String, String, String)], id: &str) -> &'a (String, String, String, String) {
    all.iter().find(|c| c.1 == id).unwrap_or_else(|| panic!("no chart {id}"))
}

/// Every SVG of the pages in one XHTML document, which Chromium parses as
/// XML: a malformed SVG shows as a parsererror in the DOM.
fn assert_svgs_parse(tmp: &Path, svgs: &[&str]) {
    let page = tmp.join("all-svgs.xhtml");
    let body: String = svgs.concat();
    std::fs::write(&page, format!("<html xmlns=\"http://www.w3.org/1999/xhtml\"><body>{body}</body></html>")).unwrap();
    let dom = chromium::run(&tmp.join("profile-xml"), &["--dump-dom".into()], &page, Duration::from_secs(90));
    assert!(dom.status.success(), "chromium --dump-dom failed");
    let text = String::from_utf8_lossy(&dom.stdout);
    assert!(!text.contains("parsererror"), "an SVG is not well-formed XML: {}", &text[..text.len().min(2000)]);
    assert_eq!(text.matches("<svg").count(), svgs.len(), "every SVG is in the parsed document");
}

/// Screenshots `page` at `size` into the artifacts.
fn screenshot(tmp: &Path, page: &Path, size: (u32, u32), name: &str) {
    let png = artifacts().join(name);
    let _ = std::fs::remove_file(&png);
    let shot = chromium::run(
        &tmp.join(format!("profile-{name}")),
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={},{}", size.0, size.1),
            "--hide-scrollbars".into(),
        ],
        page,
        Duration::from_secs(90),
    );
    assert!(shot.status.success(), "chromium --screenshot of {name} failed");
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    eprintln!("screenshot: {}", png.display());
}

/// One chart alone on a page of its size, screenshotted.
fn chart_screenshot(tmp: &Path, c: &(String, String, String, String), name: &str) {
    let svg = &c.3;
    let dim = |attr: &str| -> u32 {
        svg.split(&format!("{attr}=\"")).nth(1).and_then(|s| s.split('"').next()).and_then(|s| s.parse().ok()).unwrap()
    };
    let page = tmp.join(format!("{name}.html"));
    std::fs::write(&page, format!("<!DOCTYPE html><html><body style=\"margin:0\">{svg}</body></html>")).unwrap();
    screenshot(tmp, &page, (dim("width"), dim("height")), name);
}

#[test]
fn charts_of_real_results_render_in_headless_chromium() {
    headroom_lab::require_program!(CHROMIUM);
    let _machine = headroom_lab::hold_machine();
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();

    // A short sweep: 3 block sizes x 7 queue depths x read/write, 200 ms each after a 300 ms warm-up.
    let dir = tmp.join("disk");
    std::fs::create_dir(&dir).unwrap();
    let dir_s = dir.to_str().unwrap();
    let sweep =
        headroom_json(&["disk", dir_s, "--preset", "sweep", "--time", "200ms", "--ramp", "300ms", "--size", "32M"]);
    let first = &sweep["probes"][0];
    assert_eq!(first["summary"]["sample_interval_s"], 0.1, "a 200 ms test samples every 100 ms (the floor)");
    assert!(
        !first["details"]["warmup_samples"].as_array().unwrap().is_empty(),
        "the warm-up's samples are kept for the chart: {first}"
    );
    let sweep_path = tmp.join("sweep.json");
    std::fs::write(&sweep_path, sweep.to_string()).unwrap();

    // Two network runs against a server on loopback: 2 s each, round trips and one stream up.
    let (server, port) = Served::serve(&["--quiet"]);
    let peer = format!("127.0.0.1:{port}");
    let mut net_paths = Vec::new();
    for label in ["first", "second"] {
        let mut doc = headroom_json(&["net", &peer, "--tests", "rtt,up1", "--time", "2s"]);
        doc["label"] = label.into();
        let path = tmp.join(format!("net-{label}.json"));
        std::fs::write(&path, doc.to_string()).unwrap();
        net_paths.push((path, doc));
    }
    drop(server);
    let (_, net) = &net_paths[0];
    let probe = |id: &str| net["probes"].as_array().unwrap().iter().find(|p| p["id"] == id).unwrap().clone();
    let up = probe("tcp-up-1");
    let up_samples = up["samples"].as_array().unwrap().len();
    assert_eq!(up["summary"]["sample_interval_s"], 0.1, "{}", up["summary"]);
    assert!((19..=21).contains(&up_samples), "a 2 s test has about 20 samples of 100 ms, got {up_samples}");
    let rr = probe("rr-idle");
    assert!(rr["samples"].as_array().unwrap().len() >= 19, "round trips sampled as often: {}", rr["samples"]);
    assert!(rr["histogram"]["buckets"].as_array().is_some_and(|b| b.len() > 2), "rr carries its histogram");

    // The pages.
    let net_html = report_html(&[&net_paths[0].0, &net_paths[1].0], &tmp.join("net.html"));
    let sweep_html = report_html(&[&sweep_path], &tmp.join("sweep.html"));
    let net_charts = charts(&net_html);
    let sweep_charts = charts(&sweep_html);

    // The time series: one dot per sample.
    let up_chart = chart(&net_charts, "chart-tcp-up-1");
    assert_eq!(up_chart.3.matches("<circle").count(), up_samples, "one point per sample");
    assert!(up_chart.3.contains(&format!("{up_samples} samples of 100 ms")));
    // The warm-up shaded on a disk chart.
    let disk_chart = chart(&sweep_charts, "chart-rnd4k-q1t1-read");
    assert!(disk_chart.3.contains("warm-up (not in the figures)"), "the warm-up is shaded and named");

    // Percentile plots: per result, and the same probe of both results on one.
    let per_result = chart(&net_charts, "percentiles-network-1");
    assert!(per_result.2.contains("data-curves=\"1\""), "rr only (the throughput test has no histogram)");
    let across = chart(&net_charts, "percentiles-across-rr-idle");
    assert!(across.2.contains("data-curves=\"2\""), "{}", across.2);
    let words = texts(&across.3);
    for label in ["0%", "90%", "99%", "99.9%", "first", "second"] {
        assert!(words.iter().any(|w| w == label), "the percentile plot shows {label}: {words:?}");
    }
    assert!(net_html.contains("No latency histogram in the document for tcp-up-1"), "says what it cannot draw");
    let disk_percentiles = chart(&sweep_charts, "percentiles-disk-1");
    assert!(disk_percentiles.2.contains("data-curves=\"8\""), "eight probes a plot");
    assert_eq!(sweep_charts.iter().filter(|c| c.0.contains("percentile-chart")).count(), 6, "42 probes in 6 plots");

    // The heatmaps: 3 block sizes x 7 queue depths for reads and for writes.
    for rw in ["randread", "randwrite"] {
        let h = chart(&sweep_charts, &format!("heatmap-{rw}"));
        assert!(h.2.contains("data-cells=\"21\""), "{}", h.2);
        for label in ["QD1", "QD64", "4K", "64K", "1M", "bandwidth-bound (outlined)", "throughput (log colour scale)"] {
            assert!(h.3.contains(label), "the heatmap shows {label}");
        }
    }

    let svgs: Vec<&str> = net_charts.iter().chain(&sweep_charts).map(|c| c.3.as_str()).collect();
    assert_svgs_parse(tmp, &svgs);

    screenshot(tmp, &tmp.join("net.html"), (1280, 4000), "net-report.png");
    screenshot(tmp, &tmp.join("sweep.html"), (1280, 3000), "sweep-report.png");
    chart_screenshot(tmp, up_chart, "series-tcp-up-1.png");
    chart_screenshot(tmp, disk_chart, "series-rnd4k-q1t1-read.png");
    chart_screenshot(tmp, across, "percentiles-across-rr-idle.png");
    chart_screenshot(tmp, disk_percentiles, "percentiles-disk-1.png");
    chart_screenshot(tmp, chart(&sweep_charts, "heatmap-randread"), "heatmap-randread.png");
    chart_screenshot(tmp, chart(&sweep_charts, "heatmap-randwrite"), "heatmap-randwrite.png");
    for (name, html) in [("net.html", &net_html), ("sweep.html", &sweep_html)] {
        std::fs::write(artifacts().join(name), html).unwrap();
    }
}

/// A document whose probes lost their histograms and samples, and one whose
/// histogram and warm-up hold what no engine writes: the page draws what it
/// can, says what is missing, and `report` does not panic.
#[test]
fn a_result_without_histograms_or_samples_says_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/analysis/tests/fixtures/link-bound.json");
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let probes = doc["probes"].as_array_mut().unwrap();
    for p in probes.iter_mut() {
        p["samples"] = serde_json::json!([]);
        p.as_object_mut().unwrap().remove("histogram");
    }
    // One probe keeps a hostile histogram (counts that overflow when added) and warm-up.
    probes[0]["histogram"] = serde_json::json!({"buckets": [[1000, u64::MAX], [2000, u64::MAX], [0, 5]]});
    probes[0]["samples"] = serde_json::json!([{"t_s": 1.0, "bytes_per_sec": 1e6}]);
    probes[0]["details"]["warmup_samples"] = serde_json::json!([{"t_s": -1e300, "bytes_per_sec": 1e6}, "nonsense"]);
    let path = tmp.path().join("bare.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let html = report_html(&[&path], &tmp.path().join("bare.html"));
    assert!(html.contains("no per-second samples to draw"), "names the probes without samples");
    let missing = "No latency histogram in the document for seq1m-q8t1-write, rnd4k-q32t1-read";
    assert!(html.contains(missing), "names the probes without histograms");
    let c = charts(&html);
    assert!(c.iter().any(|c| c.1 == "percentiles-disk-1"), "the one histogram is still drawn");
    assert!(!chart(&c, &format!("chart-{}", doc["probes"][0]["id"].as_str().unwrap())).3.contains("warm-up"));
}
