//! `headroom`: measure disk, network and the path between them, next to the
//! physical ceiling of every hop, and name the bottleneck.
//!
//! Exit codes: 0 ok; 1 measured, but a goal (`--goal`) was missed; 2 usage or
//! runtime error.

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
    match commands::dispatch(cli.command, &out) {
        Ok(code) => code.into(),
        Err(e) => {
            out.error(&e);
            output::Outcome::Error.into()
        }
    }
}
