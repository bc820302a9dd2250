//! The command line: flags, presets and help text, parsed with clap.
//! Owns argument syntax, validation of single values and how a bad command
//! line is reported (one line, exit 2); it runs nothing.

use crate::commands;
use crate::output::GlobalArgs;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

pub const EXIT_CODES: &str = "\
Exit codes:
  0  ok
  1  measured, but a goal (--goal) was missed
  2  usage error (bad flag, spec or value) or runtime error
  130  stopped by Ctrl-C (what was measured is printed, test files are removed)
  143  stopped by SIGTERM (systemd, Kubernetes, kill), with the same cleanup
  129  stopped by SIGHUP (the terminal went away), with the same cleanup
With --json, a failure that printed no result prints {\"error\": \"...\", \"code\": N} on stdout
(the error line stays on stderr).";

#[derive(Parser, Debug)]
#[command(
    name = "headroom",
    version,
    about = "How fast is this storage/network path really, and what is holding it back?",
    long_about = "headroom measures disk, network and the path between them, puts every figure \
next to the physical ceiling of each hop (disk, PCIe, NIC, link, protocol, CPU) and names the \
bottleneck.\n\nSizes accept SI and IEC units with dd's convention: 4k = 4096, 1M = 1048576, \
1MB = 1000000. Rates are printed in decimal units, bits and bytes side by side.",
    after_help = EXIT_CODES,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The main job: inventory, disk and network probes, ceilings per hop, and the bottleneck verdict
    Run(commands::run::RunArgs),
    /// Storage tests on a directory, device or file: MB/s, IOPS, latency percentiles, fio-checked
    Disk(Box<commands::disk::DiskArgs>),
    /// Network path: latency idle and under load, handshake time, throughput, next to the link ceiling
    Net(commands::net::NetArgs),
    /// The same probe on many agents (`headroom serve`) at one start: per-host rows, the sum, the spread
    Fleet(commands::fleet::FleetArgs),
    /// Serve `headroom net` / `headroom ping` clients (and stock iperf3 clients with --iperf3)
    Serve(commands::serve::ServeArgs),
    /// TCP handshake round trips to any service (HOST:PORT), or UDP echo to a headroom server (HOST)
    Ping(commands::ping::PingArgs),
    /// Ceilings of a link or bus: usable rate, TCP/UDP/iSCSI goodput, frame timing
    Link(commands::link::LinkArgs),
    /// What is in this box: CPU, memory, NICs, disks, filesystems, each with its ceiling
    Sys(commands::sys::SysArgs),
    /// What this CPU pushes through parity, checksums, compression and encryption, next to the link
    Cpu(commands::cpu::CpuArgs),
    /// Compare saved results side by side: ratios to the first and whether they are beyond the noise
    Compare(commands::compare::CompareArgs),
    /// Show saved results: verdict, hop chain, probes; --html writes a self-contained report
    Report(commands::report::ReportArgs),
    /// Durability: write numbered blocks with fsync/O_DSYNC, cut the power, and list every acknowledged write the storage lost
    Flushcheck(commands::flushcheck::FlushcheckArgs),
    /// Hours-long loop of disk and network probes into SQLite: dips, drift, link flaps, outages
    Soak(commands::soak::SoakArgs),
    /// Print shell completions for bash, zsh, fish, elvish or powershell
    Completions(commands::meta::CompletionsArgs),
    /// Print the man page (roff) generated from this CLI; --dir writes one page per subcommand
    #[command(name = "manpage")]
    ManPage(commands::meta::ManPageArgs),
}

/// Parses the command line. Help and version print as clap renders them and
/// exit 0; every error is one line on stderr (what was wrong, and an example
/// that works) and exits 2.
pub fn parse() -> Result<Cli, ExitCode> {
    parse_from(std::env::args_os())
}

fn parse_from(args: impl IntoIterator<Item = OsString>) -> Result<Cli, ExitCode> {
    let args: Vec<OsString> = args.into_iter().collect();
    let mut cmd = values_may_start_with_a_dash(Cli::command());
    let parsed = cmd.try_get_matches_from_mut(&args).and_then(|m| Cli::from_arg_matches(&m));
    parsed.map_err(|e| match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            let line = one_line(&e, &cmd, &args);
            eprintln!("headroom: error: {line}");
            if asks_for_json(&args) {
                crate::output::json_error(&line, 2);
            }
            ExitCode::from(2)
        }
    })
}

/// Whether `--json` is among the flags (before a `--`): clap failed, so
/// the parsed flags are not there to ask.
fn asks_for_json(args: &[OsString]) -> bool {
    args.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json")
}

/// Lets a flag's value start with `-` (`--size -1G`, `--time -5s`), so the
/// value's own parser says what is wrong with it and names the flag, rather
/// than clap taking it for an unknown flag.
fn values_may_start_with_a_dash(cmd: clap::Command) -> clap::Command {
    let cmd =
        cmd.mut_args(
            |a| {
                if a.get_action().takes_values() && !a.is_positional() {
                    a.allow_hyphen_values(true)
                } else {
                    a
                }
            },
        );
    let names: Vec<String> = cmd.get_subcommands().map(|c| c.get_name().to_string()).collect();
    names.iter().fold(cmd, |cmd, name| cmd.mut_subcommand(name, values_may_start_with_a_dash))
}

/// A clap error as one line: its message (a list of missing arguments
/// joined), clap's suggestion when it has one, and the first example of the
/// subcommand's help unless the message already shows one.
fn one_line(e: &clap::Error, cmd: &clap::Command, args: &[OsString]) -> String {
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let names: Vec<&str> = cmd.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.get_name()).collect();
        return format!(
            "a command is required: {} (example: headroom run; headroom --help says what each does)",
            names.join(", ")
        );
    }
    let rendered = e.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim().trim_start_matches("error:").trim())
        .filter(|l| !l.is_empty())
        .collect();
    let mut line = message.join(" ");
    if line.ends_with(':') {
        line.pop();
    }
    for kind in [ContextKind::SuggestedArg, ContextKind::SuggestedValue, ContextKind::SuggestedSubcommand] {
        match e.get(kind) {
            Some(ContextValue::String(s)) => line += &format!("; did you mean '{s}'?"),
            Some(ContextValue::Strings(v)) if !v.is_empty() => line += &format!("; did you mean '{}'?", v.join("', '")),
            _ => {}
        }
    }
    let sub = args.iter().skip(1).filter_map(|a| a.to_str()).find_map(|a| cmd.find_subcommand(a));
    let help = match sub {
        Some(sub) => format!("headroom {} --help", sub.get_name()),
        None => "headroom --help".to_string(),
    };
    if !line.contains("example") {
        let example = sub.and_then(first_example).unwrap_or_else(|| "headroom run".to_string());
        line += &format!(" (example: {example}; {help} shows every flag)");
    } else {
        line += &format!(" ({help} shows every flag)");
    }
    line
}

/// The first line under "Examples:" in a subcommand's help, as a command alone.
fn first_example(cmd: &clap::Command) -> Option<String> {
    let help = cmd.get_after_help()?.to_string();
    let mut lines = help.lines().skip_while(|l| !l.trim_start().starts_with("Examples:")).skip(1);
    let first = lines.next()?.trim();
    // The comment after two spaces and any shell redirection are not the command.
    let command = first.split("  ").next().unwrap_or(first);
    Some(command.split(['>', '|']).next().unwrap_or(command).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_line(args: &[&str]) -> String {
        let args: Vec<OsString> = std::iter::once("headroom").chain(args.iter().copied()).map(Into::into).collect();
        let mut cmd = values_may_start_with_a_dash(Cli::command());
        let e = cmd.try_get_matches_from_mut(&args).expect_err("a bad command line");
        one_line(&e, &cmd, &args)
    }

    #[test]
    fn every_example_in_help_parses() {
        let cmd = Cli::command();
        for sub in cmd.get_subcommands() {
            if let Some(example) = first_example(sub) {
                let args = shell_words(&example);
                assert!(Cli::try_parse_from(&args).is_ok(), "{}: {example:?} does not parse", sub.get_name());
            }
        }
    }

    fn shell_words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn clap_errors_are_one_line_with_an_example() {
        let cases = [&["disk", "--bogus"][..], &["disk"], &["link"], &["frobnicate"], &["disk", ".", "--qd", "0"], &[]];
        for args in cases {
            let line = error_line(args);
            assert!(!line.contains('\n'), "{args:?}: {line}");
            assert!(line.contains("example"), "{args:?}: {line}");
        }
        assert!(error_line(&["disk", "--bogus"]).contains("headroom disk /mnt/nas"));
        assert!(error_line(&["dsik"]).contains("did you mean 'disk'"), "{}", error_line(&["dsik"]));
    }

    #[test]
    fn negative_values_name_the_flag() {
        let line = error_line(&["disk", ".", "--size", "-1G"]);
        assert!(line.contains("--size") && line.contains("negative"), "{line}");
        let line = error_line(&["disk", ".", "--time", "-5s"]);
        assert!(line.contains("--time") && line.contains("negative"), "{line}");
    }

    /// Every long flag of every command, recursively.
    fn long_flags(cmd: &clap::Command, flags: &mut std::collections::BTreeSet<String>) {
        flags.extend(cmd.get_arguments().filter_map(|a| a.get_long()).map(|l| format!("--{l}")));
        flags.extend(["--help".to_string(), "--version".to_string()]);
        for sub in cmd.get_subcommands() {
            long_flags(sub, flags);
        }
    }

    /// Each `--word` in the code (not comments, not tests) of a library file.
    fn flags_named_in(source: &str) -> Vec<String> {
        let code = source.split("#[cfg(test)]").next().unwrap_or_default();
        let mut found = Vec::new();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut rest = line;
            while let Some(at) = rest.find("--") {
                let word: String = rest[at + 2..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                    .collect();
                if word.starts_with(|c: char| c.is_ascii_lowercase()) {
                    found.push(format!("--{word}"));
                }
                rest = &rest[at + 2 + word.len()..];
            }
        }
        found
    }

    fn rust_files(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, files);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }

    /// Libraries name the command line's flags in two places that are not
    /// typed settings: advice inside result documents (the verdict's checks,
    /// a ceiling's source) and the presenters' lines. A flag renamed here
    /// must fail this test rather than leave advice naming a flag that no
    /// longer exists. Other tools' flags are listed with whose they are.
    #[test]
    fn every_flag_a_library_names_is_one_of_the_command_lines() {
        let others = [
            "--full-duplex", // iperf 2's client (the iperf2 server's refusals)
            "--cpus",        // docker run's CPU quota (the verdict's advice)
            "--release",     // cargo build's (a build without the NFS and NBD clients)
            // tgtadm's, raising a target's MaxRecvDataSegmentLength (the iscsi_small_data_out advice)
            "--lld",
            "--op",
            "--mode",
            "--tid",
            "--name",
            "--value",
        ];
        let mut known = std::collections::BTreeSet::new();
        long_flags(&Cli::command(), &mut known);
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
        let mut files = Vec::new();
        for krate in std::fs::read_dir(&crates).unwrap().map(Result::unwrap) {
            // The lab runs other programs (tc, ip, smbd, nbdkit) with their flags.
            if krate.file_name() != "lab" {
                rust_files(&krate.path().join("src"), &mut files);
            }
        }
        // fio's command lines, written for the user to run.
        files.retain(|f| !f.ends_with("disk/src/fio.rs"));
        assert!(files.len() > 100, "the crates' sources were not found: {}", files.len());
        let mut unknown = Vec::new();
        for file in &files {
            for flag in flags_named_in(&std::fs::read_to_string(file).unwrap()) {
                if !known.contains(&flag) && !others.contains(&flag.as_str()) {
                    unknown.push(format!("{}: {flag}", file.strip_prefix(&crates).unwrap().display()));
                }
            }
        }
        assert!(unknown.is_empty(), "flags no command has:\n{}", unknown.join("\n"));
        assert_eq!(
            flags_named_in("x(\"use --link SPEC or --rw-mix\")\n  // --not\n#[cfg(test)] --no"),
            ["--link", "--rw-mix"]
        );
    }
}
