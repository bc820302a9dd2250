//! `headroom`: measure disk, network and the path between them, next to the
//! physical ceiling of every hop, and name the bottleneck.
//!
//! Exit codes: 0 ok; 1 measured, but a goal (`--goal`) was missed; 2 usage or
//! runtime error; 130 stopped by Ctrl-C (or SIGTERM/SIGHUP), after printing
//! what was measured and removing the test files.

mod cli;
mod commands;
mod output;
mod progress;
mod signals;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let out = output::Output::from_env(&cli.global);
    let outcome = match commands::dispatch(cli.command, &out) {
        Ok(code) => code.into(),
        Err(e) => {
            out.error(&e);
            output::Outcome::Error.into()
        }
    };
    // Commands report a stop as they see fit (figures so far, an error);
    // the exit code says it was Ctrl-C, whatever they returned.
    if signals::interrupted() {
        return ExitCode::from(signals::INTERRUPTED_EXIT);
    }
    outcome
}
