//! Before and after, drawn: every figure the compared results share as a
//! group of bars, one bar per result, each group on its own scale (its
//! largest value fills the width, so a 10x change and a 1.1x change read
//! alike), with the ratio to the first result and `compare`'s significance
//! mark written at the bar, and on the end-to-end rows each result's
//! bottleneck after it. The headline ("before -> after: reads 1.40x,
//! writes 10.00x") is the title. Reads only the [`Comparison`]; the
//! significance is `compare`'s (a Mann-Whitney test on per-second samples,
//! which gives a p-value, not an interval).
//!
//! Hand-written SVG for the same reason as the path picture: rows of bars and
//! words, placed by row.

use crate::markup::xml_text;
use crate::sections::{comparison_headline, figure_value, ratio_mark};
use crate::table::Tone;
use crate::Style;
use headroom_analysis::{Comparison, Figure, Significance};
use std::fmt::Write;

const WIDTH: f64 = 860.0;
const BARS_X: f64 = 230.0;
/// Longest bar; the value and ratio are written right of it.
const BARS_W: f64 = 340.0;
const BAR_H: f64 = 13.0;
/// One colour per result (Okabe-Ito, as the charts).
const COLOURS: [&str; 6] = ["#999999", "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9"];

/// What a figure is called beside its bars.
fn figure_words(f: Figure) -> &'static str {
    match f {
        Figure::Throughput => "throughput",
        Figure::Iops => "IOPS",
        Figure::LatencyMean => "mean latency, lower is better",
        Figure::LatencyP99 => "p99 latency, lower is better",
    }
}

/// The comparison of `c` as one self-contained SVG; None without rows.
pub fn paired_svg(c: &Comparison) -> Option<String> {
    if c.rows.is_empty() {
        return None;
    }
    let style = Style::default();
    let mut body = String::new();
    let mut y = 4.0;
    let headline = comparison_headline(c);
    let title = if headline.is_empty() { c.columns.join(" vs ") } else { headline.join("; ") };
    y += 20.0;
    let _ = write!(body, "<text x=\"12\" y=\"{y}\" font-size=\"16\" font-weight=\"700\">{}</text>", xml_text(&title));
    // The key: which colour is which result.
    y += 22.0;
    let mut x = 12.0;
    for (i, col) in c.columns.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let _ = write!(
            body,
            "<rect x=\"{x}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"{colour}\"/>\
<text x=\"{}\" y=\"{y}\" font-size=\"12\">{}</text>",
            y - 10.0,
            x + 18.0,
            xml_text(col)
        );
        x += 30.0 + 7.0 * col.chars().count() as f64;
    }
    y += 10.0;
    for row in &c.rows {
        let max = row.cells.iter().map(|c| c.value).fold(0.0, f64::max);
        let group_h = row.cells.len() as f64 * (BAR_H + 4.0) + 14.0;
        let _ = write!(
            body,
            "<line x1=\"12\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#e4e4e4\"/>\
<text x=\"12\" y=\"{}\" font-size=\"13\" font-weight=\"600\">{}</text>\
<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">{}</text>",
            WIDTH - 12.0,
            y + 20.0,
            xml_text(&row.name),
            y + 35.0,
            figure_words(row.figure)
        );
        let mut by = y + 8.0;
        for (i, cell) in row.cells.iter().enumerate() {
            let w = if max > 0.0 { cell.value / max * BARS_W } else { 0.0 };
            let colour = COLOURS[i % COLOURS.len()];
            let value = xml_text(&figure_value(row.figure, cell.value, style));
            let (mut text, tone) = match cell.significance {
                Significance::Baseline => (value, Tone::Plain),
                _ => {
                    let (ratio, tone) = ratio_mark(row.figure, cell);
                    // SVG collapses spaces: the gap is a shift.
                    (format!("{value}<tspan dx=\"10\">{}</tspan>", xml_text(&ratio)), tone)
                }
            };
            // A path row: what held that result's path, as the table's cell says.
            if let Some(bottleneck) = row.bottlenecks.get(i) {
                let _ =
                    write!(text, "<tspan dx=\"10\" fill=\"#555\" font-weight=\"400\">{}</tspan>", xml_text(bottleneck));
            }
            let (fill, weight) = match tone {
                Tone::Good => ("#08703a", " font-weight=\"600\""),
                Tone::Bad => ("#b00020", " font-weight=\"600\""),
                _ => ("#222", ""),
            };
            let _ = write!(
                body,
                "<rect class=\"paired-bar\" x=\"{BARS_X}\" y=\"{by}\" width=\"{w:.1}\" height=\"{BAR_H}\" fill=\"{colour}\"/>\
<text x=\"{:.1}\" y=\"{}\" font-size=\"11\" fill=\"{fill}\"{weight}>{text}</text>",
                BARS_X + w + 6.0,
                by + BAR_H - 2.0,
            );
            by += BAR_H + 4.0;
        }
        y += group_h.max(44.0);
    }
    y += 16.0;
    for line in [
        crate::sections::comparison_legend(c),
        "Each group has its own scale: its largest figure fills the bar.".into(),
    ] {
        let _ = write!(body, "<text x=\"12\" y=\"{y}\" font-size=\"10\" fill=\"#666\">{}</text>", xml_text(&line));
        y += 14.0;
    }
    let height = y.ceil();
    Some(crate::markup::svg_document("paired-chart", WIDTH, height, &c.columns.join(" vs "), &body))
}

/// The paired bars as the comparison section's first figure.
pub(crate) fn html_figure(c: &Comparison) -> String {
    match paired_svg(c) {
        Some(svg) => {
            let svg = svg.replacen("<svg ", "<svg style=\"max-width:100%;height:auto\" ", 1);
            format!("<figure class=\"paired\" style=\"margin:.8rem 0\">{svg}</figure>\n")
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::fixture;
    use crate::Report;

    #[test]
    fn before_and_after_in_one_picture_with_ratios_and_marks() {
        let report = Report::new(vec![fixture("compare-before"), fixture("compare-after")]);
        let c = report.comparison.as_ref().unwrap();
        let svg = paired_svg(c).unwrap();
        assert!(svg.contains("before-10gbe -&gt; after-10gbe: reads 1.40x, writes 10.00x, IOPS 1.60x"), "{svg}");
        assert_eq!(svg.matches("class=\"paired-bar\"").count(), c.rows.len() * 2);
        // The write throughput row: the after bar fills the width, the before bar is a tenth of it.
        let write_row =
            c.rows.iter().position(|r| r.probe.contains("write") && r.figure == Figure::Throughput).unwrap();
        let widths: Vec<f64> = svg
            .split("class=\"paired-bar\"")
            .skip(1)
            .map(|s| s.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        let (before, after) = (widths[write_row * 2], widths[write_row * 2 + 1]);
        assert_eq!(after, BARS_W);
        assert!((before / after - 0.1).abs() < 0.01, "{before} vs {after}");
        assert!(svg.contains("<tspan dx=\"10\">10.00x *</tspan>"), "significance mark beside the ratio");
        assert!(!svg.contains("fill=\"#555\" font-weight"), "disk-only results: no path row, no bottleneck");
    }

    #[test]
    fn each_end_to_end_bar_names_what_held_its_path() {
        let report = Report::new(vec![fixture("link-bound"), fixture("disk-bound")]);
        let svg = paired_svg(report.comparison.as_ref().unwrap()).unwrap();
        assert!(svg.contains("reads 1.82x (link -&gt; disk)"), "{svg}");
        let reads = svg.split("reads end to end").nth(1).unwrap().split("writes end to end").next().unwrap();
        let held: Vec<&str> =
            reads.split("fill=\"#555\" font-weight=\"400\">").skip(1).map(|s| s.split('<').next().unwrap()).collect();
        assert_eq!(held, ["link", "disk"], "{reads}");
    }
}
