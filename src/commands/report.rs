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
  headroom report before.json after.json --svg upgrade.svg   paired bars: every shared figure, ratio, significance
  headroom report run.json --format markdown       a table ready for a forum post
  headroom report run.json --format csv > run.csv
  headroom report soak.sqlite --html soak.html     a whole soak: every probe over time, detections
  headroom report run.json --svg path.svg          the path alone as a picture (--png path.png: the same
                                                   as PNG, drawn by headless chromium)
  headroom report run.json --bars | less           the hop chain as bars even when piped")]
pub struct ReportArgs {
    /// Result documents written by `headroom run --save` or `--json`, or `headroom soak` databases
    #[arg(required = true, value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// Write a self-contained HTML report (charts inline, nothing loaded from elsewhere)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// What to print: table, markdown, csv or json (default: table; with --html, --svg or --png, nothing)
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// Write the path picture alone (each direction's hops as bars on one scale) as a self-contained
    /// SVG; with several results, their shared figures as paired bars (before and after)
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write the --svg picture as PNG, rendered by headless chromium (which must be installed)
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
    /// Draw the hop chain as bars in the table even when stdout is not a terminal
    /// (width: $COLUMNS, else 100)
    #[arg(long)]
    pub bars: bool,
}

/// Columns to draw the hop chain's bars in: the terminal's width when
/// stdout is one; when `force`d (piped output), $COLUMNS or 100; None when
/// neither (a script reading the table gets no bars).
pub fn bar_width(force: bool) -> Option<usize> {
    use std::io::IsTerminal;
    let stdout = std::io::stdout();
    let tty = stdout.is_terminal().then(|| crate::os::terminal_columns(&stdout)).flatten();
    match tty {
        Some(columns) if columns > 0 => Some(usize::from(columns)),
        _ if force => Some(
            std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.trim().parse::<usize>().ok())
                .filter(|c| *c > 0)
                .unwrap_or(100),
        ),
        _ => None,
    }
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
                    .map_err(|e| anyhow::anyhow!(crate::flags::line(&e)))?;
                doc.validate().map_err(|e| {
                    anyhow::anyhow!("{}: a soak database with an impossible figure: {e}", path.display())
                })?;
                doc
            } else {
                headroom_result::read_input_file(path)
                    .and_then(|bytes| ResultDoc::from_bytes(&bytes))
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
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
    let writes_file = args.html.is_some() || args.svg.is_some() || args.png.is_some();
    let format = match (&args.format, out.json) {
        (_, true) => Some(Format::Json),
        (Some(f), false) => Some(parse_format(f)?),
        (None, false) => (!writes_file).then_some(Format::Table),
    };
    if let Some(path) = &args.html {
        crate::output::check_output_file("--html", path, "report.html")?;
    }
    for (flag, path, example) in [("--svg", &args.svg, "path.svg"), ("--png", &args.png, "path.png")] {
        if let Some(path) = path {
            crate::output::check_output_file(flag, path, example)?;
        }
    }
    if args.png.is_some() && !crate::picture::chromium_on_path() {
        bail!("--png needs chromium to draw the picture and none is on PATH; install it (apt install chromium) or use --svg FILE");
    }
    let report = Report::new(load_results(&args.results)?).with_bars(bar_width(args.bars));
    let style = out.style();
    if let Some(path) = &args.html {
        let html = presenter(Format::Html).render(&report, style);
        std::fs::write(path, &html).with_context(|| format!("--html {}: cannot write", path.display()))?;
        if format.is_none() {
            crate::output::write_stdout(&format!(
                "wrote {} ({} charts, {} bytes, self-contained)\n",
                path.display(),
                html.matches("<svg").count(),
                html.len()
            ));
        }
    }
    if args.svg.is_some() || args.png.is_some() {
        let (svg, what) = picture(&report, &args.results, args.svg.is_some())?;
        if let Some(path) = &args.svg {
            std::fs::write(path, &svg).with_context(|| format!("--svg {}: cannot write", path.display()))?;
            if format.is_none() {
                crate::output::write_stdout(&format!("wrote {} ({what}, {} bytes)\n", path.display(), svg.len()));
            }
        }
        if let Some(path) = &args.png {
            crate::picture::svg_to_png(&svg, path)?;
            if format.is_none() {
                crate::output::write_stdout(&format!("wrote {} ({what}, drawn by chromium)\n", path.display()));
            }
        }
    }
    if let Some(format) = format {
        out.print(&presenter(format).render(&report, style));
    }
    Ok(Outcome::Ok)
}

/// The picture `--svg`/`--png` write, and what it shows: one result's path,
/// or several results' figures as paired bars. A result with no verdict
/// (or results with nothing in common) is an error saying why.
fn picture(report: &Report, paths: &[PathBuf], svg_flag: bool) -> anyhow::Result<(String, String)> {
    let flag = if svg_flag { "--svg" } else { "--png" };
    if let [view] = report.results.as_slice() {
        let svg = headroom_report::path_svg(view).ok_or_else(|| {
            let why = headroom_report::path_missing(view).unwrap_or_default();
            anyhow::anyhow!("{flag}: {} has no path to draw: {why}; its figures are in --html FILE", paths[0].display())
        })?;
        return Ok((svg, format!("the path of {}", view.name)));
    }
    let Some(c) = &report.comparison else {
        let why = report.comparison_error.as_ref().map(|e| e.to_string()).unwrap_or_default();
        bail!("{flag}: nothing to draw before and after: {why}");
    };
    let svg = headroom_report::paired_svg(c).context("no shared figure")?;
    Ok((svg, format!("{} before and after", c.columns.join(" vs "))))
}
