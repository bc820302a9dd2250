//! The path, drawn: for each direction of a verdict, the chain of hops as
//! horizontal bars on one scale — each hop's ceiling as a pale bar, what was
//! measured through it as a filled bar, the limiting hop in orange, the
//! figure the whole path delivered as a dashed line, and what is left written
//! under each bar. It uses the verdict the document carries; nothing is
//! analysed here.
//!
//! Owns the scale the terminal bars (`bars.rs`) share. The SVG is written by
//! hand rather than with plotters: the picture is rectangles and text placed
//! by row, which a chart library's axes would only get in the way of; text is
//! left to the viewer's fonts so the file needs nothing from elsewhere.

use crate::markup::xml_text;
use crate::model::ResultView;
use crate::sections::{chain_rows, here, ChainRow};
use headroom_analysis::DirectionVerdict;
use headroom_units::format_bytes_per_sec;
use std::fmt::Write;

/// Width of the picture, px (fits the HTML report's 960 px column).
const WIDTH: f64 = 860.0;
/// Left edge of the bars; the hop's word and name sit left of it.
const BARS_X: f64 = 210.0;
/// Right edge of the bars.
const BARS_END: f64 = WIDTH - 20.0;
const ROW_H: f64 = 46.0;
/// Orange for the limit, blue for the rest (Okabe-Ito, as the charts).
const LIMIT: &str = "#d55e00";
const MEASURED: &str = "#0072b2";
/// Text wraps at this many characters (14 px bold system-ui is about 8 px a
/// character; checked in chromium's screenshots).
const WRAP: usize = 100;
/// A white outline behind text, so the dashed path line never cuts through a word.
const HALO: &str = " paint-order=\"stroke\" stroke=\"#fff\" stroke-width=\"4\" stroke-linejoin=\"round\"";

/// One scale for every hop of a direction: linear when all figures are
/// within 20x of each other, else logarithmic (a 64 Gb/s PCIe bus and a
/// 1 GbE link on one linear scale would leave the link a sliver).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scale {
    lo: f64,
    hi: f64,
    /// Logarithmic between `lo` and `hi`.
    pub log: bool,
}

impl Scale {
    /// The scale of a direction's ceilings, measured figures and path figure;
    /// None when the verdict holds no positive figure at all.
    pub fn of(v: &DirectionVerdict) -> Option<Scale> {
        let values: Vec<f64> = v
            .hops
            .iter()
            .flat_map(|h| [h.ceiling_bytes_per_sec, h.measured_bytes_per_sec])
            .chain([Some(v.figure_bytes_per_sec)])
            .flatten()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        let max = values.iter().copied().fold(f64::NAN, f64::max);
        let min = values.iter().copied().fold(f64::NAN, f64::min);
        if max.is_nan() {
            return None;
        }
        if max / min <= 20.0 {
            return Some(Scale { lo: 0.0, hi: nice_ceil(max * 1.05, &FINE), log: false });
        }
        // A decade below the smallest figure's third, so its bar is no sliver.
        let lo = 10f64.powf((min / 3.0).log10().floor());
        let hi = 10f64.powf((max * 1.05).log10().ceil());
        Some(Scale { lo, hi, log: true })
    }

    /// Where `x` bytes/s falls, 0.0 (left) ..= 1.0 (right).
    pub fn at(&self, x: f64) -> f64 {
        let f = if self.log {
            if x <= self.lo {
                0.0
            } else {
                (x / self.lo).ln() / (self.hi / self.lo).ln()
            }
        } else {
            x / self.hi
        };
        f.clamp(0.0, 1.0)
    }

    /// Figures to mark on the axis.
    pub fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut t = Vec::new();
            let mut x = self.lo;
            while x <= self.hi * 1.0001 {
                t.push(x);
                x *= 10.0;
            }
            t
        } else {
            let step = nice_ceil(self.hi / 5.0, &COARSE);
            (0..).map(|i| i as f64 * step).take_while(|x| *x <= self.hi * 1.0001).collect()
        }
    }
}

/// Round steps for axis ticks.
const COARSE: [f64; 5] = [1.0, 2.0, 2.5, 5.0, 10.0];
/// Round ends of a linear scale: fine enough that the largest bar fills most of it.
const FINE: [f64; 11] = [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0];

/// The next round number at or above `x`: one of `steps` times a power of ten.
fn nice_ceil(x: f64, steps: &[f64]) -> f64 {
    let p = 10f64.powf(x.log10().floor());
    steps.iter().map(|m| m * p).find(|v| *v >= x * 0.9999).unwrap_or(10.0 * p)
}

/// The words written with a hop's bar: what is left on it, or that it is the limit.
pub(crate) fn hop_note(r: &ChainRow, v: &DirectionVerdict) -> String {
    let h = r.hop;
    let rate = format_bytes_per_sec;
    let path = v.figure_bytes_per_sec;
    match (h.measured_bytes_per_sec, h.ceiling_bytes_per_sec) {
        (_, Some(c)) if r.limiting && r.share().is_some() => {
            let share = r.share().unwrap_or_default();
            let word = if share >= 0.9 { "full" } else { "limits" };
            format!("{} {word}: {:.0}% of {}, {}", h.hop, share * 100.0, h.name, rate(c))
        }
        (Some(m), _) if r.limiting => format!("{} limits: {} measured", h.hop, rate(m)),
        (None, Some(c)) if r.limiting => format!("{} limits: ceiling {}", h.hop, rate(c)),
        (_, _) if r.limiting => format!("{} limits", h.hop),
        (Some(m), Some(c)) => {
            format!("the {} alone does {} ({:.0}% of its {} ceiling)", h.hop, rate(m), m / c * 100.0, rate(c))
        }
        (Some(m), None) => format!("the {} alone does {}; its ceiling is not known", h.hop, rate(m)),
        (None, Some(c)) if path > c => format!("ceiling {}: below what the path delivered", rate(c)),
        (None, Some(c)) if path > 0.0 => format!("ceiling {}: room for {:.1}x the path", rate(c), c / path),
        (None, Some(c)) => format!("ceiling {}", rate(c)),
        (None, None) => "ceiling not known, not measured".into(),
    }
}

/// An axis figure without trailing zeros: "200 MB/s", "1 GB/s", "2.5 GB/s".
fn tick_label(bytes_per_sec: f64) -> String {
    let trim = headroom_units::format_trimmed;
    match bytes_per_sec {
        b if b <= 0.0 => "0".into(),
        b if b >= 1e12 => format!("{} TB/s", trim(b / 1e12, 2)),
        b if b >= 1e9 => format!("{} GB/s", trim(b / 1e9, 2)),
        b if b >= 1e6 => format!("{} MB/s", trim(b / 1e6, 2)),
        b if b >= 1e3 => format!("{} kB/s", trim(b / 1e3, 2)),
        b => format!("{} B/s", trim(b, 2)),
    }
}

/// Words into lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// `s` cut to `n` characters with an ellipsis.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// One direction's block at vertical offset `y`; returns its SVG and height.
fn direction_block(v: &DirectionVerdict, here_name: &str, y: f64, sentences: bool) -> (String, f64) {
    let mut s = String::new();
    let mut y = y;
    let direction = v.direction.as_str().to_uppercase();
    let title = if sentences { format!("{direction}: {}", v.explanation) } else { direction };
    for (i, line) in wrap(&title, WRAP).into_iter().enumerate() {
        y += 20.0;
        let weight = if i == 0 { " font-weight=\"600\"" } else { "" };
        let _ = write!(s, "<text x=\"12\" y=\"{y}\" font-size=\"14\"{weight}>{}</text>", xml_text(&line));
    }
    if let Some(h) = v.headroom.as_ref().filter(|_| sentences) {
        for line in wrap(h, WRAP) {
            y += 18.0;
            let _ = write!(s, "<text x=\"12\" y=\"{y}\" font-size=\"13\" fill=\"#444\">{}</text>", xml_text(&line));
        }
    }
    // Room for the path line's label above the first bar.
    y += 14.0;
    let Some(scale) = Scale::of(v) else {
        y += 18.0;
        let _ = write!(s, "<text x=\"12\" y=\"{y}\" font-size=\"13\">no hop has a ceiling or a figure to draw</text>");
        return (s, y + 8.0);
    };
    let x_of = |b: f64| BARS_X + scale.at(b) * (BARS_END - BARS_X);
    let rows = chain_rows(v, here_name);
    let top = y;
    // Words go on top of the path line, bars below it.
    let mut words = String::new();
    for r in &rows {
        let h = r.hop;
        let word = match r.on.as_deref() {
            Some(on) if on != "between" => format!("{} on {}", h.hop, cut(on, 16)),
            _ => h.hop.to_string(),
        };
        let word_weight = if r.limiting { "700" } else { "600" };
        let _ = write!(
            words,
            "<text x=\"12\" y=\"{}\" font-size=\"13\" font-weight=\"{word_weight}\"{}>{}</text>\
<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">{}</text>",
            y + 18.0,
            if r.limiting { format!(" fill=\"{LIMIT}\"") } else { String::new() },
            xml_text(&word),
            y + 33.0,
            xml_text(&cut(&h.name, 30))
        );
        // The lane: where the bar could be.
        let _ = write!(
            s,
            "<rect x=\"{BARS_X}\" y=\"{}\" width=\"{}\" height=\"18\" fill=\"#f7f7f7\"/>",
            y + 5.0,
            BARS_END - BARS_X
        );
        if let Some(c) = h.ceiling_bytes_per_sec.filter(|c| *c > 0.0) {
            let _ = write!(
                s,
                "<rect class=\"ceiling\" x=\"{BARS_X}\" y=\"{}\" width=\"{:.1}\" height=\"18\" fill=\"#e3e3e3\" stroke=\"#8a8a8a\" stroke-width=\"1\"/>",
                y + 5.0,
                x_of(c) - BARS_X
            );
        }
        if let Some(m) = h.measured_bytes_per_sec.filter(|m| *m > 0.0) {
            let fill = if r.limiting { LIMIT } else { MEASURED };
            let _ = write!(
                s,
                "<rect class=\"measured\" x=\"{BARS_X}\" y=\"{}\" width=\"{:.1}\" height=\"10\" fill=\"{fill}\"/>",
                y + 9.0,
                x_of(m) - BARS_X
            );
        }
        let note_color = if r.limiting { LIMIT } else { "#222" };
        let weight = if r.limiting { " font-weight=\"600\"" } else { "" };
        let _ = write!(
            words,
            "<text x=\"{BARS_X}\" y=\"{}\" font-size=\"12\" fill=\"{note_color}\"{weight}{HALO}>{}</text>",
            y + 37.0,
            xml_text(&hop_note(r, v))
        );
        y += ROW_H;
    }
    // The path's figure across every hop: the gap to each ceiling is the room left there.
    if v.figure_bytes_per_sec > 0.0 {
        let x = x_of(v.figure_bytes_per_sec);
        let _ = write!(
            s,
            "<line class=\"path-figure\" x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#222\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>",
            top + 1.0,
            y - 18.0
        );
        let label = format!("path {}", format_bytes_per_sec(v.figure_bytes_per_sec));
        let anchor = if x > BARS_END - 120.0 { "end" } else { "start" };
        let dx = if anchor == "end" { -4.0 } else { 4.0 };
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"{anchor}\"{HALO}>{}</text>",
            x + dx,
            top + 1.0,
            xml_text(&label)
        );
    }
    s += &words;
    // The axis.
    let _ = write!(s, "<line x1=\"{BARS_X}\" y1=\"{y}\" x2=\"{BARS_END}\" y2=\"{y}\" stroke=\"#888\"/>");
    for t in scale.ticks() {
        let x = x_of(t);
        let label = tick_label(t);
        let anchor = if x >= BARS_END - 1.0 {
            "end"
        } else if x <= BARS_X + 1.0 {
            "start"
        } else {
            "middle"
        };
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{y}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#888\"/>\
<text x=\"{x:.1}\" y=\"{}\" font-size=\"11\" fill=\"#555\" text-anchor=\"{anchor}\">{}</text>",
            y + 4.0,
            y + 16.0,
            xml_text(&label)
        );
    }
    let _ = write!(
        s,
        "<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#555\">{} scale, bytes/s</text>",
        y + 16.0,
        if scale.log { "log" } else { "linear" }
    );
    (s, y + 30.0)
}

/// Why a result has no path to draw, as a sentence; None when it has one.
pub fn missing(view: &ResultView) -> Option<String> {
    if !view.directions.is_empty() {
        return None;
    }
    Some(if view.doc.soak.is_some() {
        "a soak has no path verdict (its probes take turns over hours); its findings lead the report".into()
    } else if view.doc.fleet.is_some() {
        "a fleet ran on many machines: each host's verdict is in the fleet table, not one path".into()
    } else {
        "it holds no sequential disk read or write and no TCP figure to judge, so it has no verdict \
         (headroom run measures both)"
            .into()
    })
}

/// The path of every direction of `view` as one self-contained SVG, headed
/// by the run's label, host and time; None when the result has no verdict
/// ([`missing`] says why).
pub fn path_svg(view: &ResultView) -> Option<String> {
    render(view, true)
}

/// The picture, with or without its heading and the verdict's sentences:
/// the HTML report's section heading and verdict box already say them, as
/// text, so there the picture carries only each direction's name.
fn render(view: &ResultView, standalone: bool) -> Option<String> {
    let heading = standalone;
    if view.directions.is_empty() {
        return None;
    }
    let mut body = String::new();
    let mut y = 0.0;
    let who = crate::sections::heading(view);
    if heading {
        y += 22.0;
        let _ = write!(
            body,
            "<text x=\"12\" y=\"{y}\" font-size=\"16\" font-weight=\"700\">{}</text>",
            xml_text(&cut(&who, 88))
        );
    }
    y += 6.0;
    for v in &view.directions {
        let (block, end) = direction_block(v, here(view), y, standalone);
        body += &block;
        y = end;
    }
    y += 4.0;
    let _ = write!(
        body,
        "<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#888\" text-anchor=\"end\">headroom {}: pale bar = ceiling, \
filled = measured, orange = the limit, dashed = the path's figure</text>",
        WIDTH - 12.0,
        y,
        env!("CARGO_PKG_VERSION")
    );
    y += 8.0;
    let height = y.ceil();
    Some(crate::markup::svg_document("path-chart", WIDTH, height, &format!("the path of {}", view.name), &body))
}

/// The path picture as the HTML report's first figure of a result, or a
/// line saying why there is none (nothing for a soak: its findings lead).
pub(crate) fn html_figure(view: &ResultView) -> String {
    match (render(view, false), missing(view)) {
        (Some(svg), _) => {
            // Inline style keeps html.rs's stylesheet untouched; the CSP allows it.
            let svg = svg.replacen("<svg ", "<svg style=\"max-width:100%;height:auto\" ", 1);
            format!(
                "<figure class=\"path\" id=\"path-{}\" style=\"margin:.8rem 0\">{svg}</figure>\n",
                xml_text(&view.name)
            )
        }
        (None, _) if view.doc.soak.is_some() => String::new(),
        (None, Some(why)) => format!("<p class=\"missing\">No path picture: {}.</p>\n", xml_text(&why)),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::view;

    #[test]
    fn link_bound_path_marks_the_link_and_says_what_the_disk_does() {
        let svg = path_svg(&view("link-bound")).unwrap();
        assert!(svg.contains("link full: 98% of 1GbE TCP (MTU 1500), 117.7 MB/s"), "{svg}");
        assert!(svg.contains("the disk alone does 580.0 MB/s"), "{svg}");
        assert!(svg.contains(&format!("fill=\"{LIMIT}\"")), "the limit is orange");
        assert_eq!(svg.matches("class=\"path-figure\"").count(), 2, "one path line per direction");
        assert!(svg.contains("linear scale"), "580 MB/s and 118 MB/s share a linear scale");
    }

    #[test]
    fn scale_turns_logarithmic_for_far_apart_figures() {
        let mut v = view("link-bound").directions[0].clone();
        v.hops[0].ceiling_bytes_per_sec = Some(8e9);
        let s = Scale::of(&v).unwrap();
        assert!(s.log);
        assert!(s.at(117.7e6) > 0.2 && s.at(117.7e6) < 0.8, "{s:?}");
        assert_eq!(s.ticks().first().copied(), Some(1e7));
    }

    #[test]
    fn a_hostile_label_cannot_break_the_xml() {
        let mut v = view("link-bound");
        v.name = "lab\x1b]0;x\x07<b>&".into();
        v.doc.label = Some(v.name.clone());
        v.directions[0].hops[0].name = "sd\u{9b}a\"'".into();
        let svg = path_svg(&v).unwrap();
        assert!(!svg.chars().any(|c| c.is_control() && c != '\n'), "{svg:?}");
        assert!(svg.contains("lab\u{fffd}]0;x\u{fffd}&lt;b&gt;&amp;"), "{svg}");
    }

    #[test]
    fn no_verdict_no_picture_but_a_reason() {
        let mut v = view("link-bound");
        v.directions.clear();
        assert!(path_svg(&v).is_none());
        assert!(missing(&v).unwrap().contains("so it has no verdict"));
    }
}
