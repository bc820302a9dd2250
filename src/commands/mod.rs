//! One file per subcommand: each turns parsed arguments into engine calls and
//! hands the result to a presenter. Dispatch lives here.

pub mod compare;
pub mod disk;
pub mod link;
pub mod meta;
pub mod net;
pub mod ping;
pub mod report;
pub mod run;
pub mod serve;
pub mod soak;
pub mod sys;

use crate::cli::Command;
use crate::output::{Outcome, Output};

/// Runs one subcommand; errors are printed by `main` and exit 2.
pub fn dispatch(command: Command, out: &Output) -> anyhow::Result<Outcome> {
    match command {
        Command::Disk(args) => disk::run(&args, out),
        Command::Link(args) => link::run(&args, out),
        Command::Serve(args) => serve::run(&args, out),
        Command::Net(args) => net::run(&args, out),
        Command::Ping(args) => ping::run(&args, out),
        Command::Sys(args) => sys::run(&args, out),
        Command::Run(args) => run::run(&args, out),
        Command::Report(args) => report::run(&args, out),
        Command::Compare(args) => compare::run(&args, out),
        Command::Soak(args) => soak::run(&args, out),
        Command::Completions(args) => meta::completions(&args),
        Command::ManPage => meta::man_page(),
    }
}
