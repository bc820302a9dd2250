//! Where and how results reach the user: JSON or terminal, colour or not,
//! errors on stderr, and the exit code. Presenters decide layout; this decides
//! the channel.

use clap::Args;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

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

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> Self {
        ExitCode::from(match o {
            Outcome::Ok => 0,
            Outcome::GoalMissed => 1,
            Outcome::Error => 2,
        })
    }
}

/// Output settings resolved from flags, NO_COLOR and whether stdout/stderr are terminals.
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
        let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Output {
            json: g.json,
            iec: g.iec,
            color: !g.no_color && !no_color_env && std::io::stdout().is_terminal(),
            progress: !g.quiet && std::io::stderr().is_terminal(),
        }
    }

    /// Prints an error as one line (plus its causes) on stderr; a peer's or
    /// a file's words in it cannot drive the terminal.
    pub fn error(&self, e: &anyhow::Error) {
        let mut text = format!("headroom: error: {e}");
        for cause in e.chain().skip(1) {
            text += &format!(": {cause}");
        }
        eprintln!("{}", headroom_report::terminal_safe(&text, false));
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
    /// Never use colour (NO_COLOR in the environment does the same)
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
    if rustix::fs::access(target, rustix::fs::Access::WRITE_OK).is_err() {
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
