//! Latency as a distribution: percentile plots drawn from the recorded
//! histograms (never from the p50/p99 summary fields), as HdrHistogram's
//! plotter draws them. The x axis is the percentile on a log scale of
//! 1/(1-q), so 0, 90, 99, 99.9, 99.99 ... are evenly spaced and the tail gets
//! the room; y is latency. Several probes of one result share a plot (disk
//! probes on one, network and ping probes on another); with several results,
//! the same probe of each shares one.

use crate::charts::PALETTE;
use crate::markup::escape;
use crate::model::{Report, ResultView};
use headroom_result::{Histogram, Probe, ProbeKind};
use plotters::prelude::*;

const WIDTH: u32 = 720;
const HEIGHT: u32 = 320;
/// Lines per plot: the palette's six and two greys beyond it; more probes get more plots.
const PER_PLOT: usize = 8;
const EXTRA: [RGBColor; 2] = [RGBColor(0, 0, 0), RGBColor(120, 120, 120)];

fn colour(i: usize) -> RGBColor {
    PALETTE.get(i).copied().unwrap_or_else(|| EXTRA[(i - PALETTE.len()) % EXTRA.len()])
}

/// x of the percentile `q` (0..1): log10(1/(1-q)); 0 at 0%, 1 at 90%, 2 at 99%.
fn x_of(q: f64) -> f64 {
    -(1.0 - q).max(1e-12).log10()
}

/// The label of an x position: "0%", "90%", "99.9%", "99.999%".
fn percentile_label(x: f64) -> String {
    let q = 100.0 * (1.0 - 10f64.powf(-x));
    if x < 0.5 {
        return "0%".into();
    }
    let decimals = (x.round() as i32 - 2).max(0) as usize;
    format!("{q:.decimals$}%")
}

/// The percentile curve of a histogram as a step line: (x, latency ns) with
/// x as [`x_of`]; each bucket holds its value from the percentile the
/// buckets below it reach to the one it reaches. The last step ends at the
/// percentile of the last operation but one (1 - 1/N), where the x axis
/// ends. Empty when the histogram has no counts.
pub fn percentile_points(h: &Histogram) -> Vec<(f64, f64)> {
    let mut buckets: Vec<(u64, u64)> = h.buckets.iter().copied().filter(|b| b.1 > 0).collect();
    buckets.sort_unstable();
    // Counts from a file may be anything: add without overflowing.
    let total = buckets.iter().fold(0u64, |t, b| t.saturating_add(b.1));
    if total == 0 {
        return Vec::new();
    }
    let end = x_of(1.0 - 1.0 / total as f64).max(1.0);
    let mut out = Vec::with_capacity(buckets.len() * 2);
    let mut seen = 0u64;
    for (v, c) in buckets {
        let from = x_of(seen as f64 / total as f64).min(end);
        seen = seen.saturating_add(c);
        let to = if seen == total { end } else { x_of(seen as f64 / total as f64).min(end) };
        out.push((from, v as f64));
        out.push((to, v as f64));
    }
    out
}

/// One line of a percentile plot.
pub struct Curve<'a> {
    /// Legend text.
    pub label: String,
    /// The recorded histogram.
    pub histogram: &'a Histogram,
}

/// A percentile plot of `curves` (at most [`PER_PLOT`] are drawn). Latency is
/// on a log axis when the curves span more than 20x (a QD1 read and a QD32
/// one), else linear from 0. None when no curve has counts.
pub fn percentile_chart(title: &str, curves: &[Curve]) -> Option<String> {
    let lines: Vec<(String, Vec<(f64, f64)>)> = curves
        .iter()
        .take(PER_PLOT)
        .map(|c| (c.label.clone(), percentile_points(c.histogram)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if lines.is_empty() {
        return None;
    }
    let all = || lines.iter().flat_map(|(_, p)| p.iter());
    let x_max = all().map(|p| p.0).fold(1.0, f64::max).ceil();
    let (lo, hi) = all().fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let log_y = hi > 20.0 * lo.max(1.0);
    // Latency in microseconds; on a log axis the drawn y is log10(us).
    let y = |ns: f64| if log_y { (ns / 1e3).max(1e-3).log10() } else { ns / 1e3 };
    let (y_min, y_max) =
        if log_y { (y(lo).floor(), y(hi).ceil().max(y(lo).floor() + 1.0)) } else { (0.0, y(hi) * 1.15 + 1e-9) };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            // Room for the last percentile label, centred on the right edge.
            .margin_right(36)
            .x_label_area_size(36)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..x_max, y_min..y_max)
            .ok()?;
        let y_label = |v: &f64| {
            let us = if log_y { 10f64.powf(*v) } else { *v };
            headroom_units::format_latency_compact(us * 1e3)
        };
        let y_labels = if log_y { (y_max - y_min) as usize + 1 } else { 8 };
        chart
            .configure_mesh()
            .x_labels(x_max as usize + 1)
            .x_label_formatter(&|x| percentile_label(*x))
            .y_labels(y_labels)
            .y_label_formatter(&y_label)
            .x_desc("percentile")
            .y_desc(if log_y { "latency (log scale)" } else { "latency" })
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .ok()?;
        for (i, (label, points)) in lines.iter().enumerate() {
            let c = colour(i);
            chart
                .draw_series(LineSeries::new(points.iter().map(|p| (p.0, y(p.1))), c.stroke_width(2)))
                .ok()?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            // The tail rises to the right: the lower right is where no curve is.
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .ok()?;
        root.present().ok()?;
    }
    Some(svg)
}

/// Whether a probe's latency belongs on a percentile plot: disk, net and ping.
fn plotted(p: &Probe) -> bool {
    matches!(p.kind(), ProbeKind::Disk | ProbeKind::Net | ProbeKind::Ping)
}

fn name(p: &Probe) -> String {
    if p.name.is_empty() {
        p.id.clone()
    } else {
        p.name.clone()
    }
}

fn wrap(id: &str, svg: &str, curves: usize) -> String {
    format!("<div class=\"chart percentile-chart\" id=\"{}\" data-curves=\"{curves}\">{svg}</div>\n", escape(id))
}

/// The percentile plots of one result: one for its disk probes, one for its
/// network and ping probes (in groups of [`PER_PLOT`]), and a line naming
/// the probes that carry no histogram.
pub fn result_html(view: &ResultView) -> String {
    let mut out = String::new();
    let probes: Vec<&Probe> = view.doc.probes_and_fleet_sums().filter(|p| plotted(p)).collect();
    let mut drawn = 0;
    for (group, kinds) in [("disk", &[ProbeKind::Disk][..]), ("network", &[ProbeKind::Net, ProbeKind::Ping][..])] {
        let with: Vec<&Probe> =
            probes.iter().copied().filter(|p| kinds.contains(&p.kind()) && has_counts(p.histogram.as_ref())).collect();
        for (n, chunk) in with.chunks(PER_PLOT).enumerate() {
            let curves: Vec<Curve> =
                chunk.iter().map(|p| Curve { label: name(p), histogram: p.histogram.as_ref().unwrap() }).collect();
            let part = if with.len() > PER_PLOT {
                format!(" ({}/{})", n + 1, with.len().div_ceil(PER_PLOT))
            } else {
                String::new()
            };
            let title = format!("{} latency by percentile: {group} probes{part}", view.name);
            if let Some(svg) = percentile_chart(&title, &curves) {
                out += &wrap(&format!("percentiles-{group}-{}", n + 1), &svg, curves.len());
                drawn += 1;
            }
        }
    }
    let missing: Vec<String> =
        probes.iter().filter(|p| !has_counts(p.histogram.as_ref())).map(|p| p.id.clone()).collect();
    if !missing.is_empty() {
        out += &format!(
            "<p class=\"missing\">No latency histogram in the document for {}: no percentile plot{}.</p>\n",
            escape(&missing.join(", ")),
            if drawn > 0 { " for these" } else { "" }
        );
    }
    out
}

fn has_counts(h: Option<&Histogram>) -> bool {
    h.is_some_and(|h| h.buckets.iter().any(|b| b.1 > 0))
}

/// With several results: one percentile plot per probe id that two or more
/// of them carry a histogram of, a line per result.
pub fn across_html(report: &Report) -> String {
    if report.results.len() < 2 {
        return String::new();
    }
    let mut ids: Vec<&str> = Vec::new();
    for v in &report.results {
        for p in v.doc.probes_and_fleet_sums().filter(|p| plotted(p) && has_counts(p.histogram.as_ref())) {
            if !ids.contains(&p.id.as_str()) {
                ids.push(&p.id);
            }
        }
    }
    let mut out = String::new();
    for id in ids {
        let curves: Vec<Curve> = report
            .results
            .iter()
            .filter_map(|v| {
                let p = v.doc.probes_and_fleet_sums().find(|p| p.id == id)?;
                Some(Curve { label: v.name.clone(), histogram: p.histogram.as_ref().filter(|h| has_counts(Some(h)))? })
            })
            .collect();
        if curves.len() < 2 {
            continue;
        }
        if let Some(svg) = percentile_chart(&format!("{id}: latency by percentile"), &curves) {
            out += &wrap(&format!("percentiles-across-{id}"), &svg, curves.len());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_steps_through_each_bucket_at_its_percentile() {
        // 900 ops at 100 us, 90 at 1 ms, 9 at 10 ms, 1 at 100 ms: 90%, 99%, 99.9%, 100%.
        let h = Histogram { buckets: vec![(100_000, 900), (1_000_000, 90), (10_000_000, 9), (100_000_000, 1)] };
        let p = percentile_points(&h);
        assert_eq!(p.len(), 8);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(p[0].0, 0.0) && near(p[1].0, 1.0) && p[1].1 == 100_000.0, "{p:?}");
        assert!(near(p[3].0, 2.0) && p[3].1 == 1_000_000.0, "{p:?}");
        assert!(near(p[5].0, 3.0) && p[5].1 == 10_000_000.0, "{p:?}");
        // The last operation ends at 1 - 1/N = 99.9%.
        assert!(near(p[7].0, 3.0) && p[7].1 == 100_000_000.0, "{p:?}");
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(1.0), "90%");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(3.0), "99.9%");
        assert_eq!(percentile_label(5.0), "99.999%");
    }

    #[test]
    fn an_empty_histogram_draws_nothing() {
        assert!(percentile_points(&Histogram::default()).is_empty());
        let empty = Histogram { buckets: vec![(5, 0)] };
        assert!(percentile_chart("t", &[Curve { label: "x".into(), histogram: &empty }]).is_none());
    }
}
