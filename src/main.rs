//! `headroom`: measure disk, network and the path between them, next to the
//! physical ceiling of every hop, and name the bottleneck.
//!
//! Exit codes: 0 ok; 1 measured, but a goal (`--goal`) was missed; 2 usage or
//! runtime error; 130 stopped by Ctrl-C (or SIGTERM/SIGHUP), after printing
//! what was measured and removing the test files.

mod cli;
mod commands;
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
    let outcome = match dispatch(cli.command, &out) {
        Ok(code) => code.into(),
        Err(e) => {
            out.error(&e);
            Outcome::Error.into()
        }
    };
    // Commands report a stop as they see fit (figures so far, an error);
    // the exit code says it was Ctrl-C, whatever they returned.
    if signals::interrupted() {
        return ExitCode::from(signals::INTERRUPTED_EXIT);
    }
    outcome
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
