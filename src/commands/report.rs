//! `headroom report RESULT.json [MORE.json ...] [--html FILE] [--format F]`:
//! shows saved results — verdict, hop chain, probes and, for several, the
//! comparison — in the terminal, as Markdown, CSV or JSON, and writes a
//! self-contained HTML report. Also owns loading result files, which
//! `compare` shares.

use crate::output::{Outcome, Output};
use anyhow::{bail, Context};
use headroom_report::{presenter, Format, Report};
use headroom_result::ResultDoc;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom report run.json                         verdict, hop chain and probes in the terminal
  headroom report run.json --html report.html      one self-contained HTML file with charts
  headroom report before.json after.json --html upgrade.html
  headroom report run.json --format markdown       a table ready for a forum post
  headroom report run.json --format csv > run.csv
  headroom report soak.sqlite --html soak.html     a whole soak: every probe over time, detections")]
pub struct ReportArgs {
    /// Result documents written by `headroom run --save` or `--json`, or `headroom soak` databases
    #[arg(required = true, value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// Write a self-contained HTML report (charts inline, nothing loaded from elsewhere)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// What to print: table, markdown, csv or json (default: table; with --html, nothing)
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
}

/// Parses `--format`; `html` is not a stdout format for these commands.
pub fn parse_format(s: &str) -> anyhow::Result<Format> {
    match Format::parse(s) {
        Some(Format::Html) => bail!("--format html: HTML is written to a file; use --html FILE"),
        Some(f) => Ok(f),
        None => bail!("--format '{s}' is not known; accepted: table, markdown, csv, json (e.g. --format markdown)"),
    }
}

/// Loads result files; an unreadable file, one that is not JSON, another
/// tool's JSON, an unknown schema version, a file over the size cap or a
/// figure no measurement can produce is an error naming the file (and the
/// field).
pub fn load_results(paths: &[PathBuf]) -> anyhow::Result<Vec<(ResultDoc, String)>> {
    paths
        .iter()
        .map(|path| {
            let doc = if headroom_soak::is_sqlite_file(path) {
                // A `headroom soak` database: the whole soak, samples thinned for the charts.
                let doc = headroom_soak::load_result(path, headroom_soak::SampleDetail::AtMost(2000))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                doc.validate().map_err(|e| {
                    anyhow::anyhow!("{}: a soak database with an impossible figure: {e}", path.display())
                })?;
                doc
            } else {
                let file = std::fs::File::open(path).with_context(|| format!("{}: cannot read", path.display()))?;
                ResultDoc::from_reader(file).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            };
            Ok((doc, display_name(path)))
        })
        .collect()
}

/// A result's fallback column name: its file name without `.json`.
fn display_name(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string())
}

pub fn run(args: &ReportArgs, out: &Output) -> anyhow::Result<Outcome> {
    let format = match (&args.format, out.json) {
        (_, true) => Some(Format::Json),
        (Some(f), false) => Some(parse_format(f)?),
        (None, false) => args.html.is_none().then_some(Format::Table),
    };
    if let Some(path) = &args.html {
        crate::output::check_output_file("--html", path, "report.html")?;
    }
    let report = Report::new(load_results(&args.results)?);
    let style = out.style();
    if let Some(path) = &args.html {
        let html = presenter(Format::Html).render(&report, style);
        std::fs::write(path, &html).with_context(|| format!("--html {}: cannot write", path.display()))?;
        if format.is_none() {
            println!(
                "wrote {} ({} charts, {} bytes, self-contained)",
                path.display(),
                html.matches("<svg").count(),
                html.len()
            );
        }
    }
    if let Some(format) = format {
        out.print(&presenter(format).render(&report, style));
    }
    Ok(Outcome::Ok)
}
