//! `headroom report` and `headroom compare` on stored result documents.

use predicates::prelude::*;
mod support;
use support::{analysis_fixture as fixture, headroom_plain as headroom};

#[test]
fn compare_prints_known_ratios_with_significance() {
    headroom()
        .args(["compare", &fixture("compare-before"), &fixture("compare-after")])
        .assert()
        .success()
        .stdout(predicate::str::contains("before-10gbe -> after-10gbe: reads 1.40x, writes 10.00x, IOPS 1.60x"))
        .stdout(predicate::str::contains("10.00x *"))
        .stdout(predicate::str::contains("Mann-Whitney U"));
}

#[test]
fn compare_formats() {
    let out = headroom()
        .args(["compare", &fixture("compare-before"), &fixture("compare-after"), "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["columns"][0], "before-10gbe");
    assert!(v["significance_test"].as_str().unwrap().contains("Mann-Whitney"));
    headroom()
        .args(["compare", &fixture("compare-before"), &fixture("compare-after"), "--format", "csv"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("probe,figure,unit,result,value,ratio_to_first"));
    headroom()
        .args(["compare", &fixture("compare-before"), &fixture("compare-after"), "--format", "markdown"])
        .assert()
        .success()
        .stdout(predicate::str::contains("| probe | figure | before-10gbe | after-10gbe |"));
    headroom()
        .args(["compare", &fixture("compare-before"), &fixture("compare-after"), "--format", "xml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("accepted: table, markdown, csv, json"));
}

#[test]
fn compare_with_nothing_in_common_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("other.json");
    let text = std::fs::read_to_string(fixture("cache")).unwrap().replace("\"seq1m-", "\"other-");
    std::fs::write(&other, text).unwrap();
    headroom()
        .args(["compare", &fixture("compare-before"), other.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nothing in common"));
    headroom().args(["compare", &fixture("compare-before")]).assert().code(2);
}

#[test]
fn bad_result_files_exit_2_naming_file_and_reason() {
    for (name, reason) in [
        ("not-json", "not JSON"),
        ("not-headroom", "another tool"),
        ("future-schema", "schema 'headroom.result/v9' is not supported"),
    ] {
        for cmd in [vec!["report", &fixture(name)], vec!["compare", &fixture("compare-before"), &fixture(name)]] {
            headroom()
                .args(&cmd)
                .assert()
                .code(2)
                .stderr(predicate::str::contains(format!("{name}.json: ")))
                .stderr(predicate::str::contains(reason))
                .stderr(predicate::str::contains("panicked").not());
        }
    }
    headroom()
        .args(["report", "/nonexistent/run.json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read"));
}

#[test]
fn report_prints_the_verdict_and_writes_html() {
    headroom()
        .args(["report", &fixture("bus-bound")])
        .assert()
        .success()
        .stdout(predicate::str::contains("READ: reads run at 88% of the PCIe 2.0 x1 slot of eth0"));
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("r.html");
    headroom()
        .args(["report", &fixture("compare-before"), &fixture("compare-after"), "--html", html.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains("self-contained"));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>") && text.contains("comparison-chart"));
    headroom()
        .args(["report", &fixture("link-bound"), "--format", "markdown"])
        .assert()
        .success()
        .stdout(predicate::str::contains("> READ: reads run at 98%"));
    let out = headroom().args(["--json", "report", &fixture("link-bound")]).output().unwrap();
    assert!(serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["verdict"].is_object());
}

#[test]
fn help_has_examples() {
    for cmd in ["report", "compare"] {
        headroom().args([cmd, "--help"]).assert().success().stdout(predicate::str::contains("Examples:"));
    }
}

/// A fleet document is many machines: `report` shows its hosts (each with its
/// own verdict in the fleet section), never one verdict for the whole fleet
/// as if the agents were far ends of one machine.
#[test]
fn a_fleet_document_is_reported_by_host_not_as_one_machine() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/fleet/tests/fixtures/fleet-run-one-host.json");
    let out = headroom().args(["report", fixture.to_str().unwrap()]).env("NO_COLOR", "1").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("headroom fleet: 1 ok of 1 host"), "{text}");
    assert!(text.contains("Jain's fairness index"), "{text}");
    assert!(!text.contains("READ:") && !text.contains("own disk"), "a whole-fleet verdict: {text}");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("fleet.html");
    let out =
        headroom().args(["report", fixture.to_str().unwrap(), "--html", html.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h3>Hosts</h3>") && page.contains("headroom fleet: 1 ok of 1 host"));
    assert!(page.contains("each host&#39;s verdict is in the fleet table") || page.contains("each host's verdict"));
}
