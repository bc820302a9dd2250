//! Where and how results reach the user: JSON or terminal, colour or not,
//! errors on stderr, and the exit code. Presenters decide layout; this decides
//! the channel.

use clap::{Args, ValueEnum};
use std::io::IsTerminal;
use std::path::Path;

/// How a command ended; maps to the documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 0: everything ran.
    Ok,
    /// 1: measured, but a goal was missed.
    GoalMissed,
    /// 2: usage or runtime error.
    Error,
}

impl Outcome {
    /// The exit code.
    pub fn code(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::GoalMissed => 1,
            Outcome::Error => 2,
        }
    }
}

/// `--color WHEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal, unless NO_COLOR says no or CLICOLOR_FORCE says yes.
    #[default]
    Auto,
    /// Colour even into a pipe or file (`| less -R`).
    Always,
    /// No colour.
    Never,
}

/// Whether stdout gets colour. A flag beats the environment; in the
/// environment NO_COLOR (no-color.org) beats CLICOLOR_FORCE, and CLICOLOR=0
/// turns off what a terminal would get (bixense.com/clicolors): the order
/// the anstream crate, and so cargo and clap, follow.
fn resolve_color(choice: ColorChoice, no_color_flag: bool, env: impl Fn(&str) -> Option<String>, tty: bool) -> bool {
    let set = |name: &str| env(name).is_some_and(|v| !v.is_empty());
    match choice {
        _ if no_color_flag => false,
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto if set("NO_COLOR") => false,
        ColorChoice::Auto if set("CLICOLOR_FORCE") && env("CLICOLOR_FORCE").as_deref() != Some("0") => true,
        ColorChoice::Auto => tty && env("CLICOLOR").as_deref() != Some("0"),
    }
}

/// Output settings resolved from flags, the colour variables and whether stdout/stderr are terminals.
#[derive(Debug, Clone)]
pub struct Output {
    pub json: bool,
    pub iec: bool,
    pub color: bool,
    /// Progress bars are drawn (stderr is a terminal and not --quiet/--json).
    pub progress: bool,
}

impl Output {
    pub fn from_env(g: &GlobalArgs) -> Self {
        let env = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
        // The progress bars' bold labels on stderr follow the same rule.
        console::set_colors_enabled_stderr(resolve_color(g.color, g.no_color, env, std::io::stderr().is_terminal()));
        Output {
            json: g.json,
            iec: g.iec,
            color: resolve_color(g.color, g.no_color, env, std::io::stdout().is_terminal()),
            progress: !g.quiet && std::io::stderr().is_terminal(),
        }
    }

    /// Prints an error as one line (plus its causes) on stderr; a peer's or
    /// a file's words in it cannot drive the terminal. With `--json` it also
    /// goes to stdout as `{"error": ..., "code": ...}` (see [`json_error`]).
    pub fn error(&self, e: &anyhow::Error, code: u8) {
        let mut text = crate::flags::line(e.as_ref());
        for cause in e.chain().skip(1) {
            text += &format!(": {}", crate::flags::line(cause));
        }
        eprintln!("headroom: error: {}", headroom_report::terminal_safe(&text, false));
        if self.json {
            json_error(&text, code);
        }
    }

    /// Prints presenter text on stdout, control characters from outside
    /// strings neutralised (the presenters' own colour kept).
    pub fn print(&self, text: &str) {
        write_stdout(&headroom_report::terminal_safe(text, self.color));
    }

    /// Prints a serialisable document as pretty JSON on stdout.
    pub fn print_json<T: serde::Serialize>(&self, doc: &T) -> anyhow::Result<()> {
        write_stdout(&(serde_json::to_string_pretty(doc)? + "\n"));
        Ok(())
    }

    /// The presenters' view of these settings.
    pub fn style(&self) -> headroom_report::Style {
        headroom_report::Style { color: self.color, iec: self.iec }
    }
}

/// Whether anything was written to stdout (by [`write_stdout`]).
static STDOUT_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// With `--json`, a command that fails before its document is printed
/// prints `{"error": MESSAGE, "code": EXIT_CODE}` instead, as iperf3 -J
/// does, so a script reading stdout sees why (the stderr line stays). After
/// a document was printed nothing is added: stdout holds one JSON value.
pub fn json_error(message: &str, code: u8) {
    if STDOUT_USED.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    #[derive(serde::Serialize)]
    struct JsonError<'a> {
        error: &'a str,
        code: u8,
    }
    let doc = serde_json::to_string_pretty(&JsonError { error: message, code }).expect("a string and a number");
    write_stdout(&(doc + "\n"));
}

/// Writes to stdout. A reader that went away (`headroom ... | head`) is not
/// an error: the rest of the output is dropped and the command finishes as
/// it would have (cleanup, exit code), where `print!` would panic. SIGPIPE
/// stays ignored process-wide because libnfs may write to its sockets
/// without MSG_NOSIGNAL: a dead NFS server must be an error, not a silent
/// death.
pub fn write_stdout(text: &str) {
    use std::io::Write;
    static READER_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if READER_GONE.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    STDOUT_USED.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            READER_GONE.store(true, std::sync::atomic::Ordering::Relaxed);
        } else {
            eprintln!("headroom: cannot write to stdout: {e}");
        }
    }
}

/// Flags every command accepts.
#[derive(Args, Debug, Clone, Default)]
pub struct GlobalArgs {
    /// Print one JSON document to stdout instead of tables
    #[arg(long, global = true)]
    pub json: bool,
    /// Also print byte rates in IEC units (MiB/s)
    #[arg(long, global = true)]
    pub iec: bool,
    /// Colour on stdout: auto (a terminal, unless NO_COLOR is set; CLICOLOR_FORCE=1 forces it), always (e.g. `| less -R`), never
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    pub color: ColorChoice,
    /// Never use colour: the same as --color never
    #[arg(long, global = true)]
    pub no_color: bool,
    /// Hide progress bars
    #[arg(long, global = true)]
    pub quiet: bool,
}

/// Checks, before any work starts, that a file a command will write can be
/// written: its directory exists and is writable, and it is not a directory.
pub fn check_output_file(flag: &str, path: &Path, example: &str) -> anyhow::Result<()> {
    let shown = path.display();
    if path.is_dir() {
        anyhow::bail!("{flag} {shown} is a directory; give a file name (example: {flag} {example})");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!("{flag} {shown}: directory {} does not exist (example: {flag} {example})", dir.display());
    }
    let target = if path.exists() { path } else { dir };
    if !crate::os::is_writable(target) {
        anyhow::bail!("{flag} {shown}: {} is not writable (example: {flag} {example})", target.display());
    }
    Ok(())
}

/// `--goal LIST` of `disk` and `net`, parsed before anything runs (exit 2 when wrong).
pub fn parse_goal_flag(list: Option<&str>) -> anyhow::Result<Vec<headroom_analysis::Goal>> {
    match list {
        Some(list) => Ok(headroom_analysis::parse_goals(list)?),
        None => Ok(Vec::new()),
    }
}

/// Prints `--goal` results under a command's own output (the table unless
/// `--json`: the document carries a warning per missed goal then), and
/// names the missed ones on stderr. Ok, or GoalMissed (exit 1).
pub fn goal_outcome(results: &[headroom_analysis::GoalResult], out: &Output) -> Outcome {
    if !out.json && !results.is_empty() {
        out.print(&headroom_report::present::goals(results, out.style()));
    }
    let missed: Vec<&str> = results.iter().filter(|g| !g.met).map(|g| g.goal.as_str()).collect();
    if missed.is_empty() {
        return Outcome::Ok;
    }
    eprintln!("headroom: goal missed: {}", missed.join(", "));
    Outcome::GoalMissed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn color(choice: ColorChoice, flag: bool, vars: &[(&str, &str)], tty: bool) -> bool {
        let env = |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
        resolve_color(choice, flag, env, tty)
    }

    #[test]
    fn colour_follows_flag_then_no_color_then_clicolor() {
        use ColorChoice::*;
        assert!(color(Auto, false, &[], true));
        assert!(!color(Auto, false, &[], false));
        assert!(color(Always, false, &[("NO_COLOR", "1")], false), "a flag beats the environment");
        assert!(!color(Always, true, &[], true), "--no-color wins");
        assert!(!color(Never, false, &[("CLICOLOR_FORCE", "1")], true));
        assert!(color(Auto, false, &[("CLICOLOR_FORCE", "1")], false));
        assert!(!color(Auto, false, &[("CLICOLOR_FORCE", "0")], false));
        assert!(!color(Auto, false, &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], true));
        assert!(color(Auto, false, &[("NO_COLOR", "")], true), "an empty NO_COLOR is unset");
        assert!(!color(Auto, false, &[("CLICOLOR", "0")], true));
    }
}
