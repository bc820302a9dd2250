//! Helpers every test of the binary shares: running it, reading what it
//! printed, the result document it wrote, the fixtures and the test files it
//! may have left. Each test binary includes this module with `mod support;`
//! and uses what it needs.

// Each tests/*.rs is its own crate and uses only some of these helpers.
#![allow(dead_code)]

use headroom_result::ResultDoc;
use std::path::Path;
use std::process::Output;

/// The built `headroom` binary.
pub fn headroom_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_headroom"))
}

/// The binary as a plain process (for `spawn`, signals and `.output()`).
pub fn headroom_process() -> std::process::Command {
    std::process::Command::new(headroom_bin())
}

/// The binary under assert_cmd, with the environment as the test runs.
pub fn headroom() -> assert_cmd::Command {
    assert_cmd::Command::new(headroom_bin())
}

/// The binary under assert_cmd with no colour and no token from the
/// environment, so its text is what a script would read.
pub fn headroom_plain() -> assert_cmd::Command {
    let mut c = headroom();
    c.env("NO_COLOR", "1").env_remove("HEADROOM_TOKEN");
    c
}

/// What a run wrote on stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The result document a successful `--json` run printed.
pub fn doc(o: &Output) -> ResultDoc {
    assert!(o.status.success(), "headroom failed: {}", stderr(o));
    ResultDoc::from_json(&String::from_utf8_lossy(&o.stdout)).expect("a headroom.result/v1 document")
}

/// A stored result document of the analysis crate's fixtures.
pub fn analysis_fixture(name: &str) -> String {
    format!("{}/crates/analysis/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

/// The run failed with exit code 2 and one line on stderr holding every needle.
pub fn one_error_line(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "exit code; stdout: {}; stderr: {err}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    for needle in needles {
        assert!(lines[0].contains(needle), "'{needle}' not in: {err}");
    }
}

/// Test files of `headroom disk` left in `dir`.
pub fn disk_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("headroom-disk-"))
        .collect()
}

/// The Prometheus text a `--metrics 127.0.0.1:PORT` serves now, if it answers.
pub fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// What libblkid (through the blkid program) finds on `target`: the ground
/// truth that a signature is there, independent of headroom.
pub fn blkid_type(target: &Path) -> String {
    let o = std::process::Command::new("blkid").args(["-p", "-o", "value", "-s", "TYPE"]).arg(target).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}
