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
