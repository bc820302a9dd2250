//! `headroom`: measure disk, network and the path between them, next to the
//! physical ceiling of every hop, and name the bottleneck.
//!
//! Exit codes: 0 ok; 1 measured, but a goal (`--goal`) was missed; 2 usage or
//! runtime error; 130, 143, 129 stopped by Ctrl-C, SIGTERM, SIGHUP, after
//! printing what was measured and removing the test files. With `--json`, a
//! failure that printed no document prints `{"error": ..., "code": ...}`.

mod cli;
mod commands;
mod flags;
mod os;
mod output;
mod picture;
mod progress;
mod signals;

use clap::CommandFactory;
use cli::Command;
use output::{Outcome, Output};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let out = Output::from_env(&cli.global);
    headroom_net::spell_source_settings(flags::source);
    let result = dispatch(cli.command, &out);
    // Commands report a stop as they see fit (figures so far, an error);
    // the exit code says which signal it was, whatever they returned.
    let code = match (signals::interrupted_exit(), &result) {
        (Some(code), _) => code,
        (None, Ok(outcome)) => outcome.code(),
        (None, Err(_)) => Outcome::Error.code(),
    };
    match result {
        Err(e) => out.error(&e, code),
        // A stop before any result, or a failure the command reported on
        // stderr itself: a script reading --json still gets an object.
        Ok(_) if out.json && code >= 2 => {
            let why = match signals::interrupted_exit() {
                Some(_) => "stopped by a signal before a result was printed",
                None => "failed before a result was printed; stderr says why",
            };
            output::json_error(why, code);
        }
        Ok(_) => {}
    }
    ExitCode::from(code)
}

/// Runs one subcommand; errors are printed by `main` and exit 2.
fn dispatch(command: Command, out: &Output) -> anyhow::Result<Outcome> {
    match command {
        Command::Disk(args) => commands::disk::run(&args, out),
        Command::Link(args) => commands::link::run(&args, out),
        Command::Fleet(args) => commands::fleet::run(&args, out),
        Command::Serve(args) => commands::serve::run(&args, out),
        Command::Net(args) => commands::net::run(&args, out),
        Command::Ping(args) => commands::ping::run(&args, out),
        Command::Sys(args) => commands::sys::run(&args, out),
        Command::Run(args) => commands::run::run(&args, out),
        Command::Report(args) => commands::report::run(&args, out),
        Command::Compare(args) => commands::compare::run(&args, out),
        Command::Soak(args) => commands::soak::run(&args, out),
        Command::Flushcheck(args) => commands::flushcheck::run(&args, out),
        Command::Cpu(args) => commands::cpu::run(&args, out),
        Command::Completions(args) => commands::meta::completions(&args, cli::Cli::command()),
        Command::ManPage(args) => commands::meta::man_page(&args, cli::Cli::command()),
    }
}
