//! `headroom compare` as a table or Markdown: the headline, the comparison
//! table, its legend and what not every result has — without the sections
//! of each result that `headroom report` shows. CSV and JSON go through the
//! [`Presenter`](crate::Presenter)s.

use crate::sections::{comparison_headline, comparison_legend, comparison_table};
use crate::{Format, Report, Style};

/// The comparison section of the table (`Format::Table`) or Markdown
/// presenter alone; `None` when the report holds no comparison.
pub fn render(report: &Report, format: Format, style: Style) -> Option<String> {
    let c = report.comparison.as_ref()?;
    let table = comparison_table(c, style);
    let mut out = String::new();
    for line in comparison_headline(c) {
        out += &if format == Format::Markdown { format!("**{line}**\n\n") } else { format!("{line}\n") };
    }
    out += &if format == Format::Markdown { table.to_markdown() } else { table.to_terminal(style.color) };
    out += &format!("{}\n", comparison_legend(c));
    if !c.not_shared.is_empty() {
        out += &format!("not in every result: {}\n", c.not_shared.join(", "));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::fixture;

    #[test]
    fn the_comparison_alone_with_headline_table_and_legend() {
        let report = Report::new(vec![fixture("compare-before"), fixture("compare-after")]);
        let text = render(&report, Format::Table, Style::default()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "before-10gbe -> after-10gbe: reads 1.40x, writes 10.00x, IOPS 1.60x", "{text}");
        assert!(text.contains("seq1m-q8t1-write  throughput"), "{text}");
        assert!(lines.last().unwrap().starts_with("* beyond the noise, ~ within the noise"), "{text}");
        assert!(!text.contains("verdict"), "no per-result sections: {text}");
        let markdown = render(&report, Format::Markdown, Style::default()).unwrap();
        assert!(markdown.starts_with("**before-10gbe -> after-10gbe: reads 1.40x"), "{markdown}");
        assert!(render(&Report::new(vec![fixture("compare-before")]), Format::Table, Style::default()).is_none());
    }
}
