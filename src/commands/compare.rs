//! `headroom compare A.json B.json [C.json ...] [--format F]`: every figure
//! the results share, side by side, with ratios to the first and whether each
//! difference is beyond the noise of the per-second samples.

use crate::commands::report::{load_results, parse_format};
use crate::output::{Outcome, Output};
use anyhow::bail;
use headroom_analysis::compare;
use headroom_report::{presenter, Format, Report};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom compare before.json after.json                   did the upgrade help?
  headroom compare 1gbe.json 10gbe.json usb-nic.json        ratios to the first result
  headroom compare a.json b.json --format markdown          for a forum post
  headroom compare a.json b.json --format csv > cmp.csv

Columns are named by each result's --label (else its file name). Ratios are
B/A; '*' marks a difference beyond the noise, '~' one within it (two-sided
Mann-Whitney U test on the per-second samples, p < 0.05).")]
pub struct CompareArgs {
    /// Two or more result documents; the first is the baseline
    #[arg(required = true, num_args = 2.., value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// table, markdown, csv or json (default: table)
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
}

pub fn run(args: &CompareArgs, out: &Output) -> anyhow::Result<Outcome> {
    let format = match (&args.format, out.json) {
        (_, true) => Format::Json,
        (Some(f), false) => parse_format(f)?,
        (None, false) => Format::Table,
    };
    let loaded = load_results(&args.results)?;
    let docs: Vec<_> = loaded.iter().map(|(d, _)| d.clone()).collect();
    let names: Vec<String> = loaded.iter().map(|(_, n)| n.clone()).collect();
    let comparison = match compare(&docs, &names) {
        Ok(c) => c,
        Err(e) => bail!("{e}"),
    };
    let mut report = Report::new(loaded);
    // compare shows only the comparison, not each result's verdict.
    report.results.iter_mut().for_each(|r| r.directions.clear());
    report.comparison = Some(comparison);
    let style = out.style();
    let text = match format {
        Format::Json => serde_json::to_string_pretty(report.comparison.as_ref().expect("set above"))? + "\n",
        Format::Table | Format::Markdown => {
            headroom_report::present::compare::render(&report, format, style).expect("set above")
        }
        other => presenter(other).render(&report, style),
    };
    out.print(&text);
    Ok(Outcome::Ok)
}
