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

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  headroom manpage > headroom.1\n  headroom manpage --dir /usr/local/share/man/man1   # headroom.1, headroom-disk.1, ..."
)]
pub struct ManPageArgs {
    /// Write every page (headroom.1 and headroom-SUBCOMMAND.1 for each subcommand) into this existing directory instead of printing the top-level page
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// Writes the man page of `cli` (the whole command line) in roff: the
/// top-level page to stdout, or with `--dir` one page per command, as
/// `man headroom-disk` expects to find them.
pub fn man_page(args: &ManPageArgs, cli: clap::Command) -> anyhow::Result<Outcome> {
    // No `help` subcommand: it has no page of its own, so headroom(1) must not name one.
    let cli = cli.disable_help_subcommand(true);
    let Some(dir) = &args.dir else {
        clap_mangen::Man::new(cli).render(&mut std::io::stdout())?;
        return Ok(Outcome::Ok);
    };
    // Checked first, so a wrong path leaves no half-written set of pages behind.
    if !dir.is_dir() {
        anyhow::bail!("--dir {}: not an existing directory; create it first (mkdir -p)", dir.display());
    }
    clap_mangen::generate_to(cli, dir)
        .map_err(|e| anyhow::anyhow!("--dir {}: cannot write the pages: {e}", dir.display()))?;
    Ok(Outcome::Ok)
}
