//! Markdown ready to paste into a forum post: the verdict as a quote, then
//! the tables.

use crate::model::Report;
use crate::sections;
use crate::{Presenter, Style};

/// `--format markdown`: pipe tables to paste into an issue or a forum post.
pub struct MarkdownPresenter;

impl Presenter for MarkdownPresenter {
    fn render(&self, report: &Report, style: Style) -> String {
        let style = Style { color: false, ..style };
        // Several results lead with what changed between them.
        let mut out = String::new();
        if let Some(c) = &report.comparison {
            for line in sections::comparison_headline(c) {
                out += &format!("**{line}**\n\n");
            }
            out += &sections::comparison_table(c, style).to_markdown();
            out += &format!("\n{}\n\n", sections::comparison_legend(c));
            let differently = sections::measured_differently_block(c, "- ");
            if !differently.is_empty() {
                out += &format!("{differently}\n");
            }
        } else if let Some(e) = &report.comparison_error {
            out += &format!("no comparison: {e}\n\n");
        }
        for view in &report.results {
            out += &format!("### headroom: {}\n\n", sections::heading(view));
            let findings = sections::soak_findings(&view.doc);
            for (line, _) in &findings {
                out += &format!("- **{line}**\n");
            }
            if let Some(course) = sections::soak_course(&view.doc) {
                out += &format!("\n{course}\n\n");
            }
            let fleet = crate::present::fleet::render(&view.doc, style);
            if !fleet.is_empty() {
                out += &format!("```\n{fleet}```\n\n");
            }
            for v in &view.directions {
                for l in sections::verdict_lines(v) {
                    out += &format!("> {}\n", l.trim_start());
                }
                out += ">\n";
            }
            if !view.directions.is_empty() {
                out.truncate(out.len() - 2);
                out.push('\n');
            }
            for v in &view.directions {
                out += &sections::hop_table(v, sections::here(view), style).to_markdown();
                out.push('\n');
            }
            out += &sections::probes_table(view, style).to_markdown();
            let notes = sections::probe_notes(view);
            if !notes.is_empty() {
                out.push('\n');
                for line in notes {
                    out += &format!("- ~ {line}\n");
                }
            }
            if let Some(goals) = sections::goals_table(view, style) {
                out.push('\n');
                out += &goals.to_markdown();
            }
            out.push('\n');
        }
        out += "\n<sub>measured with headroom</sub>\n";
        out
    }
}
