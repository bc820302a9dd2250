//! Commands about the CLI itself: shell completions and the man page.

use crate::cli::Cli;
use crate::output::Outcome;
use clap::CommandFactory;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  headroom completions bash > /etc/bash_completion.d/headroom\n  headroom completions zsh > ~/.zfunc/_headroom"
)]
pub struct CompletionsArgs {
    /// The shell to generate completions for
    pub shell: clap_complete::Shell,
}

pub fn completions(args: &CompletionsArgs) -> anyhow::Result<Outcome> {
    clap_complete::generate(args.shell, &mut Cli::command(), "headroom", &mut std::io::stdout());
    Ok(Outcome::Ok)
}

pub fn man_page() -> anyhow::Result<Outcome> {
    clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
    Ok(Outcome::Ok)
}
