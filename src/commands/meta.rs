//! Commands about the CLI itself: shell completions and the man page.

use crate::output::Outcome;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  headroom completions bash > /etc/bash_completion.d/headroom\n  headroom completions zsh > ~/.zfunc/_headroom"
)]
pub struct CompletionsArgs {
    /// The shell to generate completions for
    pub shell: clap_complete::Shell,
}

/// Writes the completion script of `cli` (the whole command line) for the shell asked.
pub fn completions(args: &CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<Outcome> {
    clap_complete::generate(args.shell, &mut cli, "headroom", &mut std::io::stdout());
    Ok(Outcome::Ok)
}

/// Writes the man page of `cli` (the whole command line) in roff.
pub fn man_page(cli: clap::Command) -> anyhow::Result<Outcome> {
    clap_mangen::Man::new(cli).render(&mut std::io::stdout())?;
    Ok(Outcome::Ok)
}
