//! The terminal: the verdict first, then (on a wide terminal) the hop chain
//! as bars, then the hop chain as tables, probes and goals as aligned
//! tables, several results led by their comparison; colour when the caller says so.

use crate::model::Report;
use crate::sections::{self, bottleneck_tone};
use crate::table::{paint, Tone};
use crate::{Presenter, Style};

/// `--format table`, the default: aligned columns, ANSI colour when `Style::color`.
pub struct TerminalPresenter;

impl Presenter for TerminalPresenter {
    fn render(&self, report: &Report, style: Style) -> String {
        // Several results lead with what changed between them; each result's
        // own report follows.
        let mut out = String::new();
        if let Some(c) = &report.comparison {
            for line in sections::comparison_headline(c) {
                out += &paint(&line, Tone::Bold, style.color);
                out.push('\n');
            }
            out += &sections::comparison_table(c, style).to_terminal(style.color);
            out += &sections::comparison_legend(c);
            out += "\n";
            out += &sections::measured_differently_block(c, "  ");
            out += "\n";
        } else if let Some(e) = &report.comparison_error {
            out += &format!("no comparison: {e}\n\n");
        }
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
            let fleet = crate::present::fleet::render(&view.doc, style);
            if !fleet.is_empty() {
                out += &fleet;
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
            if let Some(width) = report.bar_width {
                let bars = crate::bars::path_bars(view, width);
                if !bars.is_empty() {
                    out += &bars;
                    out.push('\n');
                } else if let (true, None, Some(why)) =
                    (width >= crate::bars::MIN_WIDTH, &view.doc.soak, crate::path_chart::missing(view))
                {
                    out += &format!("no path to draw: {why}\n\n");
                }
            }
            for v in &view.directions {
                out += &sections::hop_table(v, sections::here(view), style).to_terminal(style.color);
                out.push('\n');
            }
            out += &sections::probes_table(view, style).to_terminal(style.color);
            for line in sections::probe_notes(view) {
                out += &format!("~ {}\n", paint(&line, Tone::Warn, style.color));
            }
            if let Some(goals) = sections::goals_table(view, style) {
                out.push('\n');
                out += &goals.to_terminal(style.color);
            }
            out.push('\n');
        }
        out
    }
}
