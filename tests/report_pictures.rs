//! The report's pictures as a browser shows them: `headroom report` writes
//! the path (`--svg`, `--png`, first in `--html`) and the before/after bars;
//! headless chromium parses and renders each one, and the screenshots are
//! kept under target/report-artifacts/ for people to look at. Asserts what a
//! machine can: the SVG parses as XML in chromium, the limit's label is in
//! the rendered document, the screenshot is no blank page (a blank SVG of
//! the same size, rendered the same way, is the yardstick). Skips with a
//! printed reason when chromium is missing.

mod support;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{analysis_fixture as fixture, headroom_plain as headroom};

use headroom_lab::chromium::CHROMIUM;

/// target/report-artifacts/ (of $CARGO_TARGET_DIR when set), emptied of
/// `prefix`'s files from earlier runs.
fn artifacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("report-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs headless chromium (the lab's flags, no scrollbars in screenshots) on
/// `page` with `extra` flags; returns stdout.
fn chromium(profile: &Path, extra: &[String], page: &Path) -> String {
    let flags: Vec<String> = std::iter::once("--hide-scrollbars".to_string()).chain(extra.iter().cloned()).collect();
    let out = headroom_lab::chromium::run(profile, &flags, page, Duration::from_secs(120));
    assert!(out.status.success(), "chromium on {} failed: {}", page.display(), out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The size attributes of an SVG's root element.
fn svg_size(svg: &str) -> (u32, u32) {
    let attr = |name: &str| -> u32 {
        let at = svg.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        svg[at..].split('"').next().unwrap().parse::<f64>().unwrap().ceil() as u32
    };
    (attr("width"), attr("height"))
}

/// Screenshot of `page` at `size` into `png`; returns the PNG's length.
fn screenshot(tmp: &Path, page: &Path, size: (u32, u32), png: &Path) -> usize {
    let _ = std::fs::remove_file(png);
    let profile = tmp.join(format!("profile-{}", png.file_stem().unwrap().to_string_lossy()));
    chromium(
        &profile,
        &[format!("--screenshot={}", png.display()), format!("--window-size={},{}", size.0, size.1)],
        page,
    );
    let bytes = std::fs::read(png).expect("screenshot written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    bytes.len()
}

/// Checks one SVG picture in chromium: it parses, holds `needles` once
/// rendered, and its screenshot is far from blank; keeps it as `name`.png.
fn check_svg(tmp: &Path, svg_path: &Path, name: &str, needles: &[&str]) {
    let svg = std::fs::read_to_string(svg_path).unwrap();
    let dom = chromium(&tmp.join(format!("dom-{name}")), &["--dump-dom".into()], svg_path);
    assert!(dom.contains("<svg"), "{name}: chromium shows no SVG:\n{dom}");
    // Chromium replaces a document that is no well-formed XML by its error page.
    assert!(!dom.contains("parsererror"), "{name}: the SVG does not parse:\n{dom}");
    for n in needles {
        assert!(dom.contains(n), "{name}: {n:?} is not in the rendered picture");
    }
    let size = svg_size(&svg);
    let blank = tmp.join(format!("{name}-blank.svg"));
    std::fs::write(
        &blank,
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/></svg>",
            size.0, size.1
        ),
    )
    .unwrap();
    let blank_len = screenshot(tmp, &blank, size, &tmp.join(format!("{name}-blank.png")));
    let png = artifacts().join(format!("{name}.png"));
    let len = screenshot(tmp, svg_path, size, &png);
    assert!(len > 8 * blank_len, "{name}: {len} bytes against {blank_len} for a blank page of the same size");
    std::fs::copy(svg_path, artifacts().join(format!("{name}.svg"))).unwrap();
    eprintln!("{name}: {} ({len} bytes; blank {blank_len})", png.display());
}

#[test]
fn the_path_picture_renders_with_the_limit_marked() {
    headroom_lab::require_program!(CHROMIUM);
    let _machine = headroom_lab::hold_machine();
    let tmp = tempfile::tempdir().unwrap();
    for (fixture_name, needles) in [
        ("link-bound", &["link full: 98% of 1GbE TCP (MTU 1500), 117.7 MB/s", "the disk alone does 580.0 MB/s"][..]),
        ("far-disk-bound", &["disk limits: 39.84 MB/s measured", "disk on nas"][..]),
        ("cache", &["READ:"][..]),
    ] {
        let svg = tmp.path().join(format!("{fixture_name}.svg"));
        let png = artifacts().join(format!("path-{fixture_name}-cli.png"));
        headroom()
            .args(["report", &fixture(fixture_name), "--svg"])
            .arg(&svg)
            .arg("--png")
            .arg(&png)
            .assert()
            .success();
        check_svg(tmp.path(), &svg, &format!("path-{fixture_name}"), needles);
        // --png is chromium's rendering of the same SVG.
        let bytes = std::fs::read(&png).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 20_000, "--png wrote {} bytes", bytes.len());
    }
}

#[test]
fn before_and_after_renders_as_paired_bars() {
    headroom_lab::require_program!(CHROMIUM);
    let _machine = headroom_lab::hold_machine();
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("paired.svg");
    headroom()
        .args(["report", &fixture("compare-before"), &fixture("compare-after"), "--svg"])
        .arg(&svg)
        .assert()
        .success();
    check_svg(
        tmp.path(),
        &svg,
        "paired",
        &["before-10gbe -&gt; after-10gbe: reads 1.40x, writes 10.00x, IOPS 1.60x", "10.00x *"],
    );
}

#[test]
fn the_html_report_leads_with_the_path() {
    headroom_lab::require_program!(CHROMIUM);
    let _machine = headroom_lab::hold_machine();
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    headroom()
        .args(["report", &fixture("compare-before"), &fixture("compare-after"), &fixture("link-bound"), "--html"])
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    let dom = chromium(&tmp.path().join("dom"), &["--dump-dom".into()], &page);
    // Each result's section opens with its path, before the verdict's words.
    for section in dom.split("<section class=\"result\">").skip(1) {
        let path = section.find("<figure class=\"path\"").expect("a path picture in every result");
        let verdict = section.find("<div class=\"verdict").unwrap();
        assert!(path < verdict, "the path comes first");
    }
    assert!(dom.contains("link full: 98% of 1GbE TCP (MTU 1500), 117.7 MB/s"));
    assert!(dom.contains("<figure class=\"paired\""), "the comparison opens with the paired bars");
    assert_eq!(dom.matches("<svg").count(), html.matches("<svg").count(), "every picture is in the rendered DOM");
    let len = screenshot(tmp.path(), &page, (1280, 3200), &artifacts().join("report-with-path.png"));
    assert!(len > 100_000, "{len} bytes");
}

#[test]
fn a_result_without_a_verdict_says_so_in_every_picture() {
    let tmp = tempfile::tempdir().unwrap();
    // A disk result of random reads only: nothing the verdict can judge.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("link-bound")).unwrap()).unwrap();
    doc["probes"].as_array_mut().unwrap().retain(|p| p["id"].as_str().unwrap().starts_with("rnd4k"));
    doc.as_object_mut().unwrap().remove("verdict");
    doc["ceilings"] = serde_json::json!([]);
    let file = tmp.path().join("random-only.json");
    std::fs::write(&file, doc.to_string()).unwrap();

    let svg = tmp.path().join("x.svg");
    let out = headroom().args(["report"]).arg(&file).arg("--svg").arg(&svg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--svg") && err.contains("random-only.json has no path to draw"), "{err}");
    assert!(!svg.exists(), "no file written");

    let page = tmp.path().join("r.html");
    headroom().args(["report"]).arg(&file).arg("--html").arg(&page).assert().success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("No path picture: it holds no sequential disk read or write"), "says what is missing");
    assert!(html.contains("rnd4k-q32t1-read"), "and draws what it has");

    let text = headroom().args(["report", "--bars"]).arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("no path to draw: it holds no sequential disk read"), "{text}");
}

#[test]
fn bars_only_on_a_wide_terminal_or_when_forced() {
    let plain = headroom().args(["report", &fixture("link-bound")]).output().unwrap();
    assert!(!String::from_utf8_lossy(&plain.stdout).contains('█'), "piped: no bars unless forced");
    let forced = headroom().args(["report", "--bars", &fixture("link-bound")]).env("COLUMNS", "80").output().unwrap();
    let text = String::from_utf8_lossy(&forced.stdout);
    let link = text.lines().find(|l| l.contains("◀ full: 98% of 117.7 MB/s")).expect("the link marked");
    assert!(link.trim_start().starts_with("link"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80 || !l.contains('█')), "bars fit 80 columns:\n{text}");
    let narrow = headroom().args(["report", "--bars", &fixture("link-bound")]).env("COLUMNS", "60").output().unwrap();
    assert!(!String::from_utf8_lossy(&narrow.stdout).contains('█'), "60 columns: too narrow for bars");
}
