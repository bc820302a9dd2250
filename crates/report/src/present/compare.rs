//! `headroom compare` as a table or Markdown: the headline, the comparison
//! table, its legend and what not every result has — without the sections
//! of each result that `headroom report` shows. CSV and JSON go through the
//! [`Presenter`](crate::Presenter)s.

use crate::sections::{comparison_headline, comparison_legend, comparison_table, measured_differently_block};
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
    out += &measured_differently_block(c, if format == Format::Markdown { "- " } else { "  " });
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::fixture;
    use crate::sections::MEASURED_DIFFERENTLY;

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

    #[test]
    fn settings_not_measured_alike_are_listed_under_the_table() {
        let before = fixture("compare-before");
        let mut after = fixture("compare-after");
        let headroom_result::ProbeSpec::Disk(spec) = &mut after.0.probes[2].spec else { panic!("a disk probe") };
        spec.queue_depth = 1;
        let report = Report::new(vec![before.clone(), after]);
        let text = render(&report, Format::Table, Style::default()).unwrap();
        assert!(
            text.contains(&format!(
                "{MEASURED_DIFFERENTLY}\n  rnd4k-q32t1-read queue_depth: before-10gbe = 32; after-10gbe = 1\n"
            )),
            "{text}"
        );
        let headline = text.lines().next().unwrap_or_default();
        assert!(
            headline.starts_with("before-10gbe -> after-10gbe: ") && headline.ends_with(" (1 setting differs)"),
            "{text}"
        );
        let markdown = render(&report, Format::Markdown, Style::default()).unwrap();
        assert!(markdown.contains("\n- rnd4k-q32t1-read queue_depth: before-10gbe = 32"), "{markdown}");
        let alike = render(&Report::new(vec![before.clone(), before]), Format::Table, Style::default()).unwrap();
        assert!(!alike.contains(MEASURED_DIFFERENTLY) && !alike.contains("differ)"), "{alike}");
    }
}
