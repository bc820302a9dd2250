//! Bad input from outside (issue 12): files `report`/`compare` read, and
//! command lines. Each test is one item of the issue and failed before its
//! fix: no size cap, nonsense figures accepted, terminal escapes printed raw,
//! clap's multi-line errors, negative values taken for flags, absurd
//! durations, `--save` checked after the job, `--force` alone, `--link 7gbe`,
//! a listen failure called "cannot connect", `ping HOST:PORT` suggesting serve.

use predicates::prelude::*;
use std::path::PathBuf;
mod support;
use support::{analysis_fixture as fixture, headroom_plain as headroom};

/// The `compare-before` fixture with `edit` applied, written to a temp file.
fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> (tempfile::TempDir, PathBuf) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("compare-before")).unwrap()).unwrap();
    edit(&mut v);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edited.json");
    std::fs::write(&path, v.to_string()).unwrap();
    (dir, path)
}

/// stderr of a run that must fail with exit 2 and a single line.
fn one_line_error(args: &[&str]) -> String {
    let out = headroom().args(args).timeout(std::time::Duration::from_secs(20)).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?} printed more than one line:\n{stderr}");
    assert!(stderr.starts_with("headroom: error: "), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn an_endless_file_is_refused_at_the_cap_in_bounded_memory() {
    // Before: `report /dev/zero` read until memory ran out (10 GB in 20 s).
    // With 1 GiB of address space it must end with the cap's message.
    let bin = assert_cmd::cargo::cargo_bin("headroom");
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -v 1048576; exec \"$0\" report /dev/zero"])
        .arg(&bin)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/dev/zero: larger than 64 MiB"), "{stderr}");
}

#[test]
fn nonsense_figures_are_refused_naming_the_field() {
    let (_dir, huge) = edited(|v| v["probes"][0]["summary"]["bytes_per_sec"] = serde_json::json!(1e308));
    let line = one_line_error(&["report", huge.to_str().unwrap()]);
    assert!(line.contains("probes[0].summary.bytes_per_sec"), "{line}");
    let (_dir, negative) = edited(|v| v["probes"][0]["summary"]["duration_s"] = serde_json::json!(-5.0));
    let line = one_line_error(&["compare", &fixture("compare-after"), negative.to_str().unwrap()]);
    assert!(line.contains("probes[0].summary.duration_s") && line.contains("negative"), "{line}");
}

#[test]
fn escape_sequences_from_a_file_never_reach_the_terminal() {
    let hostile = "x\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}H";
    let (_dir, path) = edited(|v| {
        v["label"] = serde_json::json!(hostile);
        v["probes"][0]["warnings"] = serde_json::json!([{"code": "c\u{1b}[31m", "message": "m\u{1b}[2J"}]);
    });
    for args in [
        vec!["report", path.to_str().unwrap(), "--no-color"],
        vec!["report", path.to_str().unwrap(), "--format", "markdown"],
        vec!["compare", path.to_str().unwrap(), &fixture("compare-after")],
    ] {
        let out = headroom().args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(stdout.contains("x\u{fffd}]0;pwned"), "{args:?}: the label is shown, neutralised:\n{stdout}");
        assert!(!stdout.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{args:?}:\n{stdout:?}");
    }
}

#[test]
fn clap_errors_are_one_line_naming_the_flag_with_an_example() {
    for args in [
        &["disk", "--frobnicate"][..],
        &["disk"],
        &["link"],
        &["frobnicate"],
        &[],
        &["disk", ".", "--qd", "0"],
        &["disk", ".", "--rw", "sideways"],
        &["net"],
        &["compare", "one.json"],
        &["ping"],
        &["run", "--preset", "slow"],
        &["disk", ".", "--bs"],
    ] {
        let line = one_line_error(args);
        assert!(line.contains("example"), "{args:?}: {line}");
    }
    assert!(one_line_error(&["dsik"]).contains("did you mean 'disk'"));
    assert!(one_line_error(&["disk", ".", "--rw", "sideways"]).contains("--rw"));
    // --help and --version still print as before and exit 0.
    headroom().args(["disk", "--help"]).assert().success().stdout(predicate::str::contains("Examples:"));
    headroom().arg("--version").assert().success().stdout(predicate::str::starts_with("headroom "));
}

#[test]
fn negative_values_name_their_flag() {
    let line = one_line_error(&["disk", ".", "--size", "-1G"]);
    assert!(line.contains("--size") && line.contains("negative"), "{line}");
    let line = one_line_error(&["net", "127.0.0.1", "--time", "-5s"]);
    assert!(line.contains("--time") && line.contains("negative"), "{line}");
}

#[test]
fn absurd_durations_are_refused_before_anything_runs() {
    for args in [
        &["disk", ".", "--time", "99999999999999h"][..],
        &["disk", ".", "--time", "300d"],
        &["disk", ".", "--ramp", "2h"],
        &["serve", "--max-duration", "300d"],
        &["soak", "--duration", "99999999999999h"],
        &["soak", "--probe-time", "3d"],
    ] {
        let line = one_line_error(args);
        assert!(line.contains("too long"), "{args:?}: {line}");
    }
}

#[test]
fn save_is_checked_before_the_job_runs() {
    // Before: the whole run (about a minute) ran, then the write failed.
    let out = headroom().args(["run", "--save", "/nonexistent/x.json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--save /nonexistent/x.json: directory /nonexistent does not exist"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing ran");
    one_line_error(&["report", &fixture("compare-before"), "--html", "/nonexistent/r.html"]);
}

#[test]
fn force_needs_destructive() {
    let line = one_line_error(&["disk", ".", "--force"]);
    assert!(line.contains("--destructive"), "{line}");
}

#[test]
fn run_link_takes_the_same_names_as_net_and_cpu() {
    // Before: `run --link 7gbe` was read as a 7 Gb/s rate.
    let line = one_line_error(&["run", "--link", "7gbe"]);
    assert!(line.contains("unknown link '7gbe'"), "{line}");
}

#[test]
fn a_listen_failure_says_listen() {
    // 192.0.2.1 (TEST-NET-1) is on no interface of this machine.
    let line = one_line_error(&["serve", "--bind", "192.0.2.1", "--no-auth"]);
    assert!(line.contains("cannot listen on 192.0.2.1:5201") && !line.contains("cannot connect"), "{line}");
}

#[test]
fn ping_to_a_closed_port_does_not_suggest_headroom_serve() {
    // A port of our own that nothing listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = headroom().args(["ping", &format!("127.0.0.1:{port}"), "--count", "1"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("connection refused") && !stderr.contains("headroom serve"), "{stderr}");
}
