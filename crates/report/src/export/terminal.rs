//! The terminal: the verdict first, then the hop chain, probes, goals and
//! the comparison as aligned tables; colour when the caller says so.

use crate::model::Report;
use crate::sections::{self, bottleneck_tone};
use crate::table::{paint, Tone};
use crate::{Presenter, Style};

/// `--format table`, the default: aligned columns, ANSI colour when `Style::color`.
pub struct TerminalPresenter;

impl Presenter for TerminalPresenter {
    fn render(&self, report: &Report, style: Style) -> String {
        let mut out = String::new();
        for view in &report.results {
            out += &paint(&format!("headroom: {}", sections::heading(view)), Tone::Bold, style.color);
            out += "\n\n";
            let findings = sections::soak_findings(&view.doc);
            if !findings.is_empty() {
                // A soak leads with what it found.
                out += &paint("findings:", Tone::Bold, style.color);
                out.push('\n');
                for (line, tone) in &findings {
                    out += &format!("  {}\n", paint(line, *tone, style.color));
                }
                if let Some(course) = sections::soak_course(&view.doc) {
                    out += &format!("  {course}\n");
                }
                out.push('\n');
            }
            for v in &view.directions {
                let mut lines = sections::verdict_lines(v).into_iter();
                if let Some(first) = lines.next() {
                    out += &paint(&first, bottleneck_tone(v.bottleneck), style.color);
                    out.push('\n');
                }
                for l in lines {
                    out += &l;
                    out.push('\n');
                }
            }
            if !view.directions.is_empty() {
                out.push('\n');
            }
            for v in &view.directions {
                out += &sections::hop_table(v, sections::here(view), style).to_terminal(style.color);
                out.push('\n');
            }
            out += &sections::probes_table(view, style).to_terminal(style.color);
            if let Some(goals) = sections::goals_table(view, style) {
                out.push('\n');
                out += &goals.to_terminal(style.color);
            }
            out.push('\n');
        }
        if let Some(c) = &report.comparison {
            for line in sections::comparison_headline(c) {
                out += &paint(&line, Tone::Bold, style.color);
                out.push('\n');
            }
            out += &sections::comparison_table(c, style).to_terminal(style.color);
            out += &sections::comparison_legend(c);
            out.push('\n');
        } else if let Some(e) = &report.comparison_error {
            out += &format!("no comparison: {e}\n");
        }
        out
    }
}
