//! Conventions every command follows: help with examples and exit codes,
//! completions, a man page, exit code 2 on usage errors without a backtrace,
//! `--json` errors on stdout, `--color`, the exit codes of SIGTERM and
//! SIGHUP, and docs that link only inside the repository.

use predicates::prelude::*;
mod support;
use support::{headroom, headroom_process};

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

// ---------------------------------------------------------------- --json errors

/// What a failed `--json` run left: stdout is one JSON object holding the
/// error and the exit code, and stderr still has its one error line.
fn json_error(args: &[&str]) -> (String, i64) {
    let out = headroom_process().args(args).env("NO_COLOR", "1").env_remove("HEADROOM_TOKEN").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let err = support::stderr(&out);
    let v: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}): {stdout:?}; {err}"));
    let message = v["error"].as_str().unwrap_or_else(|| panic!("{args:?}: no error in {v}")).to_string();
    let code = v["code"].as_i64().unwrap_or_else(|| panic!("{args:?}: no code in {v}"));
    assert_eq!(Some(code as i32), out.status.code(), "{args:?}: code is the exit code");
    assert!(err.lines().any(|l| l.starts_with("headroom: error: ")), "{args:?}: the stderr line stays: {err}");
    assert!(!message.is_empty() && !message.starts_with("headroom: error"), "{args:?}: {message}");
    (message, code)
}

#[test]
fn json_errors_go_to_stdout_as_an_object_with_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here");
    let missing = missing.to_str().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // Every subcommand that prints a document with --json: a clap error
    // (flag before or after the subcommand) and, for most, a runtime one.
    for sub in ["run", "disk", "net", "fleet", "ping", "link", "sys", "cpu", "compare", "report", "soak", "flushcheck"]
    {
        let (message, code) = json_error(&["--json", sub, "--no-such-flag"]);
        assert_eq!(code, 2);
        assert!(message.contains("--no-such-flag"), "{sub}: {message}");
        json_error(&[sub, "--no-such-flag", "--json"]);
    }
    let runtime: [&[&str]; 7] = [
        &["link", "7gbe", "--json"],
        &["disk", missing, "--json"],
        &["report", missing, "--json"],
        &["compare", missing, missing, "--json"],
        &["net", &format!("127.0.0.1:{closed}"), "--time", "1s", "--json"],
        &["ping", &format!("127.0.0.1:{closed}"), "--count", "1", "--json"],
        &["run", "--server", &format!("127.0.0.1:{closed}"), "--path", missing, "--json"],
    ];
    for args in runtime {
        let (message, code) = json_error(args);
        assert_eq!(code, 2, "{args:?}: {message}");
    }
    // A missing subcommand, and a flag value clap refuses.
    assert_eq!(json_error(&["--json"]).1, 2);
    assert!(json_error(&["disk", ".", "--json", "--qd", "0"]).0.contains("--qd"));
    // Without --json stdout stays empty; with it, a success has no error.
    let out = headroom_process().args(["link", "7gbe"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let out = headroom_process().args(["link", "10gbe", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("error").is_none() && out.status.success(), "{v}");
    // After `--` a `--json` is not the flag.
    let out = headroom_process().args(["link", "--", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

// ---------------------------------------------------------------- --color

/// `report` of a stored result with the given colour flags and environment;
/// whether its stdout holds ANSI colour.
fn coloured(args: &[&str], env: &[(&str, &str)]) -> bool {
    let mut c = headroom_process();
    c.arg("report").arg(support::analysis_fixture("disk-bound")).args(args);
    for var in ["NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE"] {
        c.env_remove(var);
    }
    c.envs(env.iter().copied());
    let out = c.output().unwrap();
    assert!(out.status.success(), "{args:?} {env:?}: {}", support::stderr(&out));
    String::from_utf8_lossy(&out.stdout).contains("\x1b[")
}

#[test]
fn color_flag_and_environment_decide_colour_into_a_pipe() {
    assert!(!coloured(&[], &[]), "auto: a pipe gets no colour");
    assert!(coloured(&["--color", "always"], &[]), "always: colour through a pipe, for less -R");
    assert!(coloured(&["--color=always"], &[("NO_COLOR", "1")]), "the flag beats NO_COLOR");
    assert!(coloured(&[], &[("CLICOLOR_FORCE", "1")]), "CLICOLOR_FORCE=1 forces colour");
    assert!(!coloured(&[], &[("CLICOLOR_FORCE", "0")]));
    assert!(!coloured(&[], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]), "NO_COLOR beats CLICOLOR_FORCE");
    assert!(!coloured(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]));
    assert!(!coloured(&["--color", "always", "--no-color"], &[]), "--no-color is never");
    let out = headroom_process().args(["link", "10gbe", "--color", "sometimes"]).output().unwrap();
    support::one_error_line(&out, &["--color", "sometimes"]);
}

// ---------------------------------------------------------------- signals

/// Starts a 60 s `disk` run in `dir`, waits until its test file exists and
/// it measured a little, sends `signals` 2 ms apart, and returns how it ended.
fn disk_stopped_by(dir: &std::path::Path, signals: &[i32]) -> std::process::Output {
    let child = headroom_process()
        .args(["disk", dir.to_str().unwrap(), "--rw", "randread", "--size", "16M", "--time", "60s", "--ramp", "0s"])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let file = dir.join(format!("headroom-disk-{}.tmp", child.id()));
    let start = std::time::Instant::now();
    while std::fs::metadata(&file).map_or(true, |m| m.len() < (16 << 20)) {
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "the test file was never laid out");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for signal in signals {
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(child.id() as i32, *signal) }, 0);
        wait_until_taken(child.id(), *signal);
    }
    let out = child.wait_with_output().unwrap();
    assert!(!file.exists(), "the test file is left after signals {signals:?}");
    assert!(support::disk_leftovers(dir).is_empty(), "{:?}", support::disk_leftovers(dir));
    out
}

/// Waits until the process took `signal` (it is no longer pending for the
/// process). Two standard signals pending together are delivered lowest
/// number first, whatever order they were sent in: the next one must not be
/// sent before this one was taken, or "the first decides" is not what the
/// process can see.
fn wait_until_taken(pid: u32, signal: i32) {
    let bit = 1u64 << (signal - 1);
    let start = std::time::Instant::now();
    loop {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return };
        let pending = status
            .lines()
            .filter(|l| l.starts_with("ShdPnd:") || l.starts_with("SigPnd:"))
            .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
            .fold(0, |all, mask| all | mask);
        if pending & bit == 0 {
            return;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "signal {signal} was never taken");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// SIGTERM (systemd, Kubernetes, `kill`) and SIGHUP clean up as Ctrl-C does,
/// print what was measured, and exit 128 + the signal as shells expect.
#[test]
fn sigterm_exits_143_and_sighup_129_after_the_same_cleanup_as_ctrl_c() {
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGHUP, 129), (libc::SIGINT, 130)] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let out = disk_stopped_by(dir.path(), &[signal]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "signal {signal}: {}", support::stderr(&out));
        assert!(stdout.contains("RND4K Q1T1 read"), "signal {signal}: what was measured is printed: {stdout}");
    }
    // A second signal hurries the cleanup; the first one decides the code.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = disk_stopped_by(dir.path(), &[libc::SIGTERM, libc::SIGINT]);
    assert_eq!(out.status.code(), Some(143), "{}", support::stderr(&out));
}

// ---------------------------------------------------------------- docs

/// Every relative link of the project's Markdown resolves to a file inside
/// the repository: a reader of the project can open everything its docs
/// refer to (a link to ../shared/DESIGN.md pointed outside it).
#[test]
fn docs_link_only_to_files_inside_the_repository() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).canonicalize().unwrap();
    let mut pages = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && !name.starts_with('.') && name != "target" {
                dirs.push(path);
            } else if name.ends_with(".md") {
                pages.push(path);
            }
        }
    }
    assert!(pages.iter().any(|p| p.ends_with("docs/design.md")), "the design is in the repository");
    let mut outside = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let target = rest[..rest.find(')').unwrap_or(0)].split_whitespace().next().unwrap_or("");
            let target = target.split('#').next().unwrap();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let resolved = page.parent().unwrap().join(target);
            match resolved.canonicalize() {
                Ok(p) if p.starts_with(&root) => {}
                _ => outside.push(format!("{}: {target}", page.strip_prefix(&root).unwrap().display())),
            }
        }
    }
    assert!(checked > 10, "only {checked} links found; is the scan working?");
    assert!(outside.is_empty(), "links that leave the repository or lead nowhere: {outside:#?}");
}

/// The subcommands a help text lists under "Commands:" (without `help`).
fn listed_subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|name| name != "help")
        .collect()
}

/// No option's help says its default twice (a "[default: X]" written in the
/// doc line beside the one clap adds): checked per option in every command's
/// `--help` (an option's text runs until the next option) and per line of `-h`.
#[test]
fn no_help_says_a_default_twice() {
    let mut todo = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let mut long = path.clone();
        long.push("--help".into());
        let out = headroom().args(&long).output().unwrap();
        assert!(out.status.success(), "{long:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        let mut block = String::new();
        for line in help.lines().chain(std::iter::once("  -")) {
            // An option's first line: `-s, --long` at 2 columns, `--long` alone at 6.
            let text = line.trim_start();
            if text.starts_with('-') && line.len() - text.len() <= 6 {
                assert!(block.matches("[default:").count() < 2, "{long:?} says a default twice:\n{block}");
                block.clear();
            }
            block += line;
            block.push('\n');
        }
        let mut short = path.clone();
        short.push("-h".into());
        let out = headroom().args(&short).output().unwrap();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            assert!(line.matches("[default:").count() < 2, "{short:?}: {line}");
        }
        seen += 1;
        for sub in listed_subcommands(&help) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
    }
    assert!(seen > 20, "only {seen} commands' help walked");
}
