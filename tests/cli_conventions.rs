//! Conventions every command follows: help with examples and exit codes,
//! completions, a man page, exit code 2 on usage errors without a backtrace.

use predicates::prelude::*;
mod support;
use support::headroom;

#[test]
fn help_documents_exit_codes() {
    headroom()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Exit codes:"))
        .stdout(predicate::str::contains("1  measured, but a goal"));
}

#[test]
fn link_help_has_examples() {
    headroom().args(["link", "--help"]).assert().success().stdout(predicate::str::contains("Examples:"));
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        headroom().args(["completions", shell]).assert().success().stdout(predicate::str::contains("link"));
    }
    headroom().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn man_page_is_roff() {
    headroom().arg("manpage").assert().success().stdout(predicate::str::contains(".TH headroom"));
}

/// `manpage --dir` writes the page every `headroom-SUB(1)` reference of the
/// top-level page points to, each titled with its own name (what
/// `man headroom-disk` looks up).
#[test]
fn man_pages_one_per_subcommand() {
    let top = headroom().arg("manpage").assert().success().get_output().stdout.clone();
    let top = String::from_utf8(top).unwrap();
    let referenced: Vec<&str> = top
        .split(|c: char| c.is_whitespace())
        .filter_map(|w| w.strip_suffix("(1)"))
        .filter(|w| w.starts_with("headroom\\-") || w.starts_with("headroom-"))
        .collect();
    assert!(referenced.len() >= 10, "the top page lists the subcommands: {top}");

    let dir = tempfile::tempdir().unwrap();
    headroom().args(["manpage", "--dir"]).arg(dir.path()).assert().success();
    for name in referenced {
        let name = name.replace("\\-", "-");
        let page = std::fs::read_to_string(dir.path().join(format!("{name}.1")))
            .unwrap_or_else(|e| panic!("{name}.1 referenced by headroom(1) but not written: {e}"));
        assert!(page.contains(&format!("\n.TH {name} 1 ")), "{name}.1: {}", &page[..page.len().min(300)]);
    }
    let disk = std::fs::read_to_string(dir.path().join("headroom-disk.1")).unwrap();
    assert!(disk.contains("\\-\\-rw"), "headroom-disk(1) documents disk's own flags");
    assert!(dir.path().join("headroom.1").exists());

    // A directory that is not there: one line, exit 2, nothing created.
    let missing = dir.path().join("nope");
    headroom()
        .args(["manpage", "--dir"])
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--dir").and(predicate::str::contains("mkdir")));
    assert!(!missing.exists());
}

#[test]
fn unknown_flags_exit_2_without_backtrace() {
    headroom()
        .args(["link", "1gbe", "--frobnicate"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--frobnicate"))
        .stderr(predicate::str::contains("panicked").not());
}

/// `headroom ... | head`: a reader that goes away mid-output is not a panic,
/// and the command finishes with its own exit code.
#[test]
fn a_closed_pipe_on_stdout_is_not_a_panic() {
    for args in [&["link", "10gbe", "--json"][..], &["link", "10gbe"][..]] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_headroom"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before headroom writes a byte.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}
