//! Renders the HTML report in headless Chromium: the page loads without
//! console errors, every chart's <svg> is in the rendered DOM, and a PNG
//! screenshot is saved under target/report-artifacts/ for people to look at. Skips with a
//! printed reason when chromium is not installed.

mod common;

use headroom_report::{presenter, Format, Report, Style};
use headroom_result::ResultDoc;
use std::path::{Path, PathBuf};
use std::time::Duration;

use headroom_lab::chromium::CHROMIUM;

fn fixture(name: &str) -> (ResultDoc, String) {
    let path = format!("{}/../analysis/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    (ResultDoc::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap(), format!("{name}.json"))
}

fn chromium(profile: &Path, extra: &[String], page: &Path, limit: Duration) -> std::process::Output {
    headroom_lab::chromium::run(profile, extra, page, limit)
}

fn artifacts_dir() -> PathBuf {
    // Beside the other pictures' screenshots (tests/report_pictures.rs), in the target directory.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("report-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

#[test]
fn html_report_renders_in_headless_chromium() {
    headroom_lab::require_program!(CHROMIUM);
    let _machine = headroom_lab::hold_machine();
    let docs = vec![fixture("compare-before"), fixture("compare-after"), fixture("link-bound")];
    let report = Report::new(docs);
    let html = presenter(Format::Html).render(&report, Style::default());
    let expected_svgs = html.matches("<svg").count();
    assert!(expected_svgs >= 12, "3 + 3 + 6 probe charts and comparison charts, got {expected_svgs}");

    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    std::fs::write(&page, &html).unwrap();

    let dom = chromium(&tmp.path().join("profile-dom"), &["--dump-dom".into()], &page, Duration::from_secs(90));
    assert!(dom.status.success(), "chromium --dump-dom failed: {}", String::from_utf8_lossy(&dom.stderr));
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(dom_text.matches("<svg").count(), expected_svgs, "every chart is in the rendered DOM");
    assert!(dom_text.contains("reads run at 98% of the 1GbE TCP"));
    let log = String::from_utf8_lossy(&dom.stderr);
    let console: Vec<&str> =
        log.lines().filter(|l| l.contains(":CONSOLE") || l.contains("Refused to") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "console messages while loading the page: {console:#?}");

    let png = artifacts_dir().join("report.png");
    let _ = std::fs::remove_file(&png);
    let shot = chromium(
        &tmp.path().join("profile-shot"),
        &[format!("--screenshot={}", png.display()), "--window-size=1280,2000".into(), "--hide-scrollbars".into()],
        &page,
        Duration::from_secs(90),
    );
    assert!(shot.status.success(), "chromium --screenshot failed: {}", String::from_utf8_lossy(&shot.stderr));
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(bytes.len() > 20_000, "a page with charts is more than a blank PNG ({} bytes)", bytes.len());
    std::fs::copy(&page, artifacts_dir().join("report.html")).unwrap();
    eprintln!("screenshot: {}", png.display());
}

#[test]
fn soak_report_renders_in_headless_chromium() {
    headroom_lab::require_program!(CHROMIUM);
    let _machine = headroom_lab::hold_machine();
    let tmp = tempfile::tempdir().unwrap();
    let report = Report::new(vec![common::soak_doc(tmp.path())]);
    let html = presenter(Format::Html).render(&report, Style::default());
    let expected_svgs = html.matches("<svg").count();
    assert_eq!(expected_svgs, 5, "3 soak charts and 2 latency charts");
    let page = tmp.path().join("soak-report.html");
    std::fs::write(&page, &html).unwrap();

    let dom = chromium(&tmp.path().join("profile-dom"), &["--dump-dom".into()], &page, Duration::from_secs(90));
    assert!(dom.status.success(), "chromium --dump-dom failed: {}", String::from_utf8_lossy(&dom.stderr));
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(dom_text.matches("<svg").count(), expected_svgs, "every chart is in the rendered DOM");
    let findings = dom_text.find("Findings").expect("the findings block is rendered");
    assert!(findings < dom_text.find("<svg").unwrap(), "findings lead the page");
    assert!(dom_text.contains("periodic_dips: 4 dips"), "{dom_text}");
    let log = String::from_utf8_lossy(&dom.stderr);
    let console: Vec<&str> =
        log.lines().filter(|l| l.contains(":CONSOLE") || l.contains("Refused to") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "console messages while loading the page: {console:#?}");

    let png = artifacts_dir().join("soak-report.png");
    let _ = std::fs::remove_file(&png);
    let shot = chromium(
        &tmp.path().join("profile-shot"),
        &[format!("--screenshot={}", png.display()), "--window-size=1280,2400".into(), "--hide-scrollbars".into()],
        &page,
        Duration::from_secs(90),
    );
    assert!(shot.status.success(), "chromium --screenshot failed: {}", String::from_utf8_lossy(&shot.stderr));
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(bytes.len() > 20_000, "a page with charts is more than a blank PNG ({} bytes)", bytes.len());
    std::fs::copy(&page, artifacts_dir().join("soak-report.html")).unwrap();
    eprintln!("screenshot: {}", png.display());
}
