//! The path in a terminal: each direction's hop chain as bars of Unicode
//! block characters on one scale (the path picture's, `path_chart::Scale`),
//! printed under the verdict when the terminal is wide enough. No colour:
//! the limit is marked with an arrow, so it reads the same piped to a file.

use crate::model::ResultView;
use crate::path_chart::Scale;
use crate::sections::{chain_rows, here, ChainRow};
use headroom_analysis::DirectionVerdict;
use headroom_units::format_bytes_per_sec;

/// Narrowest terminal the bars are drawn for; below it they would be too
/// short to tell hops apart.
pub const MIN_WIDTH: usize = 80;
/// Bars stop growing past this, so a 300-column terminal stays readable.
const MAX_BAR: usize = 60;
/// The partial cells of a bar's end, one eighth to seven eighths.
const EIGHTHS: [char; 7] = ['▏', '▎', '▍', '▌', '▋', '▊', '▉'];

/// What is written after a hop's bar: short, the hop's name is on the line.
fn note(r: &ChainRow) -> String {
    let h = r.hop;
    let rate = format_bytes_per_sec;
    match (h.measured_bytes_per_sec, h.ceiling_bytes_per_sec, r.share()) {
        (_, Some(c), Some(share)) if r.limiting => {
            let word = if share >= 0.9 { "full" } else { "the limit" };
            format!("◀ {word}: {:.0}% of {}", share * 100.0, rate(c))
        }
        (Some(m), _, _) if r.limiting => format!("◀ the limit: {}", rate(m)),
        (None, Some(c), _) if r.limiting => format!("◀ the limit: ceiling {}", rate(c)),
        (_, _, _) if r.limiting => "◀ the limit".into(),
        (Some(m), Some(_), Some(share)) => format!("{} alone, {:.0}% of ceiling", rate(m), share * 100.0),
        (Some(m), _, _) => format!("{} alone", rate(m)),
        (None, Some(c), _) => format!("ceiling {}", rate(c)),
        (None, None, _) => "not known".into(),
    }
}

/// A bar of `cols` cells: `measured` filled (to an eighth of a cell), the
/// rest up to `ceiling` shaded, a `│` where the ceiling falls inside the fill.
fn bar(measured: Option<f64>, ceiling: Option<f64>, cols: usize) -> String {
    let eighths = |f: f64| (f * cols as f64 * 8.0).round() as usize;
    let fill = measured.map(eighths).unwrap_or(0);
    let ceil_cells = ceiling.map(|c| (c * cols as f64).round() as usize).unwrap_or(0);
    let mut out: Vec<char> = Vec::with_capacity(cols);
    let full = fill / 8;
    out.extend(std::iter::repeat_n('█', full.min(cols)));
    if full < cols && !fill.is_multiple_of(8) {
        out.push(EIGHTHS[fill % 8 - 1]);
    }
    while out.len() < ceil_cells.min(cols) {
        out.push('░');
    }
    // Faster than the ceiling (a cache): show where the ceiling is.
    if ceiling.is_some() && ceil_cells < out.len() && measured.is_some_and(|m| m > ceiling.unwrap_or(0.0)) {
        out[ceil_cells.saturating_sub(1)] = '│';
    }
    out.into_iter().collect()
}

/// `s` padded or cut (with an ellipsis) to exactly `n` characters.
fn fit(s: &str, n: usize) -> String {
    let len = s.chars().count();
    if len <= n {
        format!("{s}{}", " ".repeat(n - len))
    } else {
        s.chars().take(n.saturating_sub(1)).collect::<String>() + "…"
    }
}

/// One direction as bars for a terminal `width` columns wide.
pub fn direction_bars(v: &DirectionVerdict, here_name: &str, width: usize) -> String {
    let Some(scale) = Scale::of(v) else { return String::new() };
    let rows = chain_rows(v, here_name);
    let words: Vec<String> = rows
        .iter()
        .map(|r| match &r.on {
            Some(on) => format!("{} ({})", r.hop.hop, fit(on, 10).trim_end()),
            None => r.hop.hop.to_string(),
        })
        .collect();
    let notes: Vec<String> = rows.iter().map(note).collect();
    let word_w = words.iter().map(|w| w.chars().count()).max().unwrap_or(4);
    let note_w = notes.iter().map(|n| n.chars().count()).max().unwrap_or(10);
    let mut name_w = rows.iter().map(|r| r.hop.name.chars().count()).max().unwrap_or(8).min(20);
    // indent, word, space, name, space, bar, space, note
    let fixed = |name_w: usize| 2 + word_w + 1 + name_w + 1 + 1 + note_w;
    while name_w > 10 && width.saturating_sub(fixed(name_w)) < 30 {
        name_w -= 1;
    }
    let cols = width.saturating_sub(fixed(name_w)).min(MAX_BAR);
    if cols < 10 {
        return String::new();
    }
    let scale_word = if scale.log { "log scale" } else { "linear scale" };
    let mut out = format!(
        "{}: {}, the path delivers {} ({scale_word})\n",
        v.direction,
        v.bottleneck,
        format_bytes_per_sec(v.figure_bytes_per_sec)
    );
    for ((r, word), note) in rows.iter().zip(&words).zip(&notes) {
        let frac = |x: Option<f64>| x.filter(|x| *x > 0.0).map(|x| scale.at(x));
        let b = bar(frac(r.hop.measured_bytes_per_sec), frac(r.hop.ceiling_bytes_per_sec), cols);
        let line = format!("  {} {} {} {note}", fit(word, word_w), fit(&r.hop.name, name_w), fit(&b, cols));
        out += line.trim_end();
        out.push('\n');
    }
    out
}

/// Every direction of `view` as bars, or nothing when `width` is below
/// [`MIN_WIDTH`] or there is no verdict.
pub fn path_bars(view: &ResultView, width: usize) -> String {
    if width < MIN_WIDTH {
        return String::new();
    }
    let blocks: Vec<String> =
        view.directions.iter().map(|v| direction_bars(v, here(view), width)).filter(|b| !b.is_empty()).collect();
    if blocks.is_empty() {
        return String::new();
    }
    blocks.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::view;

    #[test]
    fn link_bound_bars_fit_80_columns_and_mark_the_link() {
        let text = path_bars(&view("link-bound"), 80);
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{line:?} is wider than 80");
        }
        let link = text.lines().find(|l| l.trim_start().starts_with("link")).unwrap();
        assert!(link.contains("◀ full: 98% of 117.7 MB/s"), "{text}");
        let disk = text.lines().find(|l| l.trim_start().starts_with("disk")).unwrap();
        assert!(disk.contains("580.0 MB/s alone"), "{text}");
        // On one scale the disk's bar is about five times the link's.
        let eighths = |l: &str| -> usize {
            l.chars()
                .map(|c| if c == '█' { 8 } else { EIGHTHS.iter().position(|e| *e == c).map_or(0, |i| i + 1) })
                .sum()
        };
        let ratio = eighths(disk) as f64 / eighths(link).max(1) as f64;
        assert!((4.5..5.6).contains(&ratio), "580 vs 115 MB/s: {ratio}\n{text}");
        assert!(path_bars(&view("link-bound"), 79).is_empty(), "too narrow: no bars");
    }

    #[test]
    fn bar_ends_in_eighths_and_marks_a_ceiling_below_the_figure() {
        assert_eq!(bar(Some(0.5), Some(1.0), 4), "██░░");
        assert_eq!(bar(Some(0.5 + 1.0 / 32.0), None, 4), "██▏");
        assert_eq!(bar(Some(1.0), Some(0.5), 4), "█│██");
    }
}
