//! Charts as inline SVG, drawn with plotters' SVG backend: a chart of each
//! probe over time (with the ceiling of its hop as a dashed line and the
//! warm-up shaded), a soak
//! probe's chart with its findings marked and its latency (mean and p99)
//! over time, and a grouped bar chart comparing results. Text is left to the browser's fonts, so the
//! SVG needs nothing from outside the page.

use crate::sections::Marks;
use headroom_analysis::{Comparison, Figure};
use headroom_result::{Ceiling, Hop, HopFigure, Probe, ProbeSpec, Sample};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

const WIDTH: u32 = 720;
const HEIGHT: u32 = 260;
/// Series colours, readable on white and for common colour blindness (Okabe-Ito).
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
];

/// Draws the legend of a chart in a light box at `position` and writes the
/// drawing out.
fn finish<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Option<()> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .ok()?;
    root.present().ok()
}

const SOAK_SECONDS: &str = "seconds since the soak started";

/// A probe's name for a chart title, its id when it has none.
fn probe_title(probe: &Probe) -> String {
    if probe.name.is_empty() {
        probe.id.clone()
    } else {
        probe.name.clone()
    }
}

/// The frame every time chart shares: title, margins, label areas, and the mesh
/// with its axis names (`axes`: x, y).
fn time_frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: String,
    x: std::ops::Range<f64>,
    y_max: f64,
    axes: (&str, &str),
) -> Option<ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(64)
        .build_cartesian_2d(x, 0.0..y_max)
        .ok()?;
    chart.configure_mesh().x_desc(axes.0).y_desc(axes.1).light_line_style(RGBColor(235, 235, 235)).draw().ok()?;
    Some(chart)
}

/// The ceiling a probe's figure should be held against: the bus for a disk
/// probe here (the network and protocol over a network filesystem), the NIC
/// and link for a net probe; for a disk probe a server ran on its own disk,
/// the bus of that server in the verdict's chain (`far_hops`), since the
/// document's ceilings are this machine's and the wire's.
pub fn ceiling_for(probe: &Probe, ceilings: &[Ceiling], far_hops: &[HopFigure]) -> Option<Ceiling> {
    if let (ProbeSpec::Disk(_), Some(host)) = (&probe.spec, &probe.host) {
        return far_hops.iter().find(|h| h.hop == Hop::Bus && h.host.as_ref() == Some(host)).and_then(|h| {
            Some(Ceiling { hop: Hop::Bus, name: h.name.clone(), bytes_per_sec: h.ceiling_bytes_per_sec?, source: None })
        });
    }
    let hops: &[&str] = match probe.spec {
        ProbeSpec::Disk(_) if ceilings.iter().any(|c| c.hop == "protocol") => &["nic", "link", "protocol"],
        ProbeSpec::Disk(_) => &["bus"],
        ProbeSpec::Net(_) => &["nic", "link"],
        _ => &[],
    };
    ceilings
        .iter()
        .filter(|c| hops.contains(&c.hop.as_str()))
        .min_by(|a, b| a.bytes_per_sec.total_cmp(&b.bytes_per_sec))
        .cloned()
}

/// The warm-up's samples a disk probe keeps beside its measured ones
/// (`details.warmup_samples`, negative `t_s`); empty when it has none or
/// they do not parse (they are for drawing only).
pub fn warmup_samples(probe: &Probe) -> Vec<Sample> {
    probe
        .details
        .get("warmup_samples")
        .and_then(|v| serde_json::from_value::<Vec<Sample>>(v.clone()).ok())
        .unwrap_or_default()
        .into_iter()
        // Drawn only: anything a file could hold that no warm-up produces is left out.
        .filter(|s| (-3600.0..=0.0).contains(&s.t_s) && (0.0..1e15).contains(&s.bytes_per_sec))
        .filter(|s| [s.iops, s.latency_ns_mean].iter().flatten().all(|v| (0.0..1e15).contains(v)))
        .collect()
}

/// A chart of one probe over time: MB/s (or IOPS, or latency when that is
/// all it has) per sample, with the ceiling as a dashed line and the
/// warm-up, when the probe kept its samples, shaded before 0 s. None when
/// the probe has no samples.
pub fn probe_chart(probe: &Probe, ceiling: Option<&Ceiling>) -> Option<String> {
    let warmup = warmup_samples(probe);
    let by_bytes = probe.samples.iter().any(|s| s.bytes_per_sec > 0.0);
    let by_iops = !by_bytes && probe.samples.iter().any(|s| s.iops.is_some());
    let value = |s: &Sample| {
        if by_bytes {
            s.bytes_per_sec / 1e6
        } else if by_iops {
            s.iops.unwrap_or(0.0)
        } else {
            s.latency_ns_mean.unwrap_or(0.0) / 1e3
        }
    };
    let (unit, ceiling) = if by_bytes {
        ("MB/s", ceiling.map(|c| (c.name.clone(), c.bytes_per_sec / 1e6)))
    } else if by_iops {
        ("IOPS", None)
    } else {
        ("latency (us)", None)
    };
    let points: Vec<(f64, f64)> = probe.samples.iter().map(|s| (s.t_s, value(s))).collect();
    if points.is_empty() {
        return None;
    }
    // The warm-up joins the measured line at its first sample.
    let ramp: Vec<(f64, f64)> = warmup.iter().map(|s| (s.t_s, value(s))).chain(points.first().copied()).collect();
    let ramp = if ramp.len() > 1 { ramp } else { Vec::new() };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        // The axis ends with the test (a 200 ms test is not drawn on a 1 s axis).
        let t_max = points.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-3);
        // The warm-up started a sample before its first sample ended.
        let step = probe.summary.sample_interval_s.unwrap_or(1.0);
        let t_min = ramp.first().map_or(0.0, |p| p.0 - step).min(0.0);
        let y_max = points.iter().chain(&ramp).map(|p| p.1).chain(ceiling.as_ref().map(|c| c.1)).fold(0.0, f64::max)
            * 1.15
            + 1e-9;
        let mut chart = time_frame(&root, probe_title(probe), t_min..t_max, y_max, ("seconds", unit))?;
        let line = PALETTE[0];
        if !ramp.is_empty() {
            let grey = GAP_COLOR;
            chart
                .draw_series(std::iter::once(Rectangle::new([(t_min, 0.0), (0.0, y_max)], grey.mix(0.2).filled())))
                .ok()?
                .label("warm-up (not in the figures)")
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], grey.mix(0.2).filled()));
            chart.draw_series(LineSeries::new(ramp.iter().copied(), line.mix(0.5).stroke_width(2))).ok()?;
        }
        chart
            .draw_series(LineSeries::new(points.iter().copied(), line.stroke_width(2)))
            .ok()?
            .label(format!("measured {unit} ({})", interval_words(probe)))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], line.stroke_width(2)));
        if points.len() <= 120 {
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 2, line.filled()))).ok()?;
        }
        if let Some((name, c)) = &ceiling {
            let red = PALETTE[5];
            let span = t_max - t_min;
            let dashes = (0..40).map(|i| {
                let a = t_min + span * i as f64 / 40.0;
                PathElement::new(vec![(a, *c), (a + span / 80.0, *c)], red.stroke_width(2))
            });
            chart
                .draw_series(dashes)
                .ok()?
                .label(format!("ceiling: {name}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], red.stroke_width(2)));
        }
        finish(&root, &mut chart, SeriesLabelPosition::LowerRight)?;
    }
    Some(svg)
}

/// "20 samples of 100 ms": how the series was sampled, for the legend.
fn interval_words(probe: &Probe) -> String {
    let n = probe.samples.len();
    match probe.summary.sample_interval_s {
        Some(i) if i < 1.0 => format!("{n} samples of {:.0} ms", i * 1e3),
        Some(i) => format!("{n} samples of {i:.3} s").replace(".000 s", " s"),
        None => format!("{n} samples"),
    }
}

/// Grouped bars of one figure across results: one group per probe, one bar
/// per result. None when the comparison has no row of that figure.
pub fn comparison_chart(c: &Comparison, figure: Figure) -> Option<String> {
    let rows: Vec<_> = c.rows.iter().filter(|r| r.figure == figure).collect();
    if rows.is_empty() {
        return None;
    }
    let (scale, unit) = match figure {
        Figure::Throughput => (1e-6, "MB/s"),
        Figure::Iops => (1.0, "IOPS"),
        _ => (1e-3, "us"),
    };
    let n = c.columns.len();
    let group = n as f64 + 1.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT + 40)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let y_max = rows.iter().flat_map(|r| r.cells.iter().map(|c| c.value * scale)).fold(0.0, f64::max) * 1.15 + 1e-9;
        let names: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} by result", figure.as_str()), ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..group * rows.len() as f64, 0.0..y_max)
            .ok()?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(rows.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = (x / group).floor() as usize;
                let centre = (x - i as f64 * group - n as f64 / 2.0).abs() < 0.5;
                if centre {
                    names.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(unit)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .ok()?;
        for (j, col) in c.columns.iter().enumerate() {
            let color = PALETTE[j % PALETTE.len()];
            chart
                .draw_series(rows.iter().enumerate().map(|(i, r)| {
                    let x0 = i as f64 * group + j as f64 + 0.5;
                    Rectangle::new([(x0, 0.0), (x0 + 0.9, r.cells[j].value * scale)], color.filled())
                }))
                .ok()?
                .label(col.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        }
        finish(&root, &mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Some(svg)
}

/// Colours of the soak marks (Okabe-Ito, as the series): throughput dips
/// (bands and the shaded dip areas).
pub const DIP_COLOR: RGBColor = PALETTE[1];
/// Link flaps (an outlined box from down to up) and the write cliff's cross.
pub const FLAP_COLOR: RGBColor = PALETTE[5];
/// Bands where the server was unreachable.
pub const OUTAGE_COLOR: RGBColor = PALETTE[3];
/// Bands with no samples at all (the soak was not running); grey, outside the palette.
pub const GAP_COLOR: RGBColor = RGBColor(150, 150, 150);

/// Splits points where the time step is much longer than usual (the other
/// probes' turns, a gap between sessions), so no line is drawn across a
/// stretch that has no samples.
pub fn segments(points: &[(f64, f64)]) -> Vec<&[(f64, f64)]> {
    let mut steps: Vec<f64> = points.windows(2).map(|w| w[1].0 - w[0].0).filter(|d| *d > 0.0).collect();
    steps.sort_by(f64::total_cmp);
    let typical = steps.get(steps.len() / 2).copied().unwrap_or(1.0);
    let limit = (2.5 * typical).max(1.5);
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..points.len() {
        if points[i].0 - points[i - 1].0 > limit {
            out.push(&points[start..i]);
            start = i;
        }
    }
    if start < points.len() {
        out.push(&points[start..]);
    }
    out
}

/// Draws `points` as lines broken at gaps, with dots, labelled once.
fn broken_line<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<
        'a,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    points: &[(f64, f64)],
    color: RGBColor,
    label: &str,
) -> Option<()> {
    for (i, seg) in segments(points).into_iter().enumerate() {
        let series = chart.draw_series(LineSeries::new(seg.iter().copied(), color.stroke_width(2))).ok()?;
        if i == 0 {
            series
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
        }
        if seg.len() <= 240 {
            chart.draw_series(seg.iter().map(|p| Circle::new(*p, 2, color.filled()))).ok()?;
        }
    }
    Some(())
}

/// A soak probe over the whole soak: throughput (or IOPS) with the lines
/// broken at gaps, dips shaded, link flaps as vertical lines, outages and
/// gaps shaded, the write cliff as a marked point. None without samples.
pub fn soak_chart(probe: &Probe, marks: &Marks) -> Option<String> {
    let bytes: Vec<(f64, f64)> = probe.samples.iter().map(|s| (s.t_s, s.bytes_per_sec / 1e6)).collect();
    let (points, unit, scale) = if bytes.iter().any(|p| p.1 > 0.0) {
        (bytes, "MB/s", 1e-6)
    } else {
        (probe.samples.iter().map(|s| (s.t_s, s.iops.unwrap_or(0.0))).collect(), "IOPS", 1.0)
    };
    if points.is_empty() {
        return None;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let t_max = points.iter().map(|p| p.0).chain(marks.gaps.iter().map(|g| g.1)).fold(1.0, f64::max);
        let t_min = points.iter().map(|p| p.0).chain(marks.flaps.iter().map(|f| f.0)).fold(0.0, f64::min).max(-t_max);
        let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.15 + 1e-9;
        let mut chart = time_frame(&root, probe_title(probe), t_min..t_max, y_max, (SOAK_SECONDS, unit))?;
        let band = |chart: &mut ChartContext<_, _>, spans: &[(f64, f64)], color: RGBColor, label: &str| -> Option<()> {
            if spans.is_empty() {
                return Some(());
            }
            chart
                .draw_series(
                    spans.iter().map(|(a, b)| Rectangle::new([(*a, 0.0), (*b, y_max)], color.mix(0.3).filled())),
                )
                .ok()?
                .label(label)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.mix(0.3).filled()));
            Some(())
        };
        band(&mut chart, &marks.gaps, GAP_COLOR, "no samples (soak not running)")?;
        band(&mut chart, &marks.outages, OUTAGE_COLOR, "server unreachable")?;
        band(&mut chart, &marks.dips, DIP_COLOR, "dip")?;
        broken_line(&mut chart, &points, PALETTE[0], &format!("measured {unit}"))?;
        if !marks.flaps.is_empty() {
            let red = FLAP_COLOR;
            chart
                .draw_series(marks.flaps.iter().map(|(down, up)| {
                    let up = up.unwrap_or(t_max);
                    Rectangle::new([(*down, 0.0), (up.max(*down), y_max)], red.stroke_width(2))
                }))
                .ok()?
                .label("link flap (down .. up)")
                .legend(move |(x, y)| PathElement::new(vec![(x + 6, y - 6), (x + 6, y + 6)], red.stroke_width(2)));
        }
        if let Some((at, after)) = marks.cliff {
            let c = FLAP_COLOR;
            chart
                .draw_series(std::iter::once(Cross::new((at, after * scale), 8, c.stroke_width(3))))
                .ok()?
                .label(format!("write cliff at +{at:.0} s"))
                .legend(move |(x, y)| Cross::new((x + 6, y), 5, c.stroke_width(2)));
        }
        finish(&root, &mut chart, SeriesLabelPosition::LowerRight)?;
    }
    Some(svg)
}

/// Latency of a probe over time: per-sample mean and p99 (where the engine
/// reported them), broken at gaps. None when no sample has a latency.
pub fn latency_chart(probe: &Probe, marks: &Marks) -> Option<String> {
    let mean: Vec<(f64, f64)> =
        probe.samples.iter().filter_map(|s| s.latency_ns_mean.map(|l| (s.t_s, l / 1e3))).collect();
    let p99: Vec<(f64, f64)> =
        probe.samples.iter().filter_map(|s| s.latency_ns_p99.map(|l| (s.t_s, l / 1e3))).collect();
    if mean.is_empty() && p99.is_empty() {
        return None;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let all = || mean.iter().chain(p99.iter());
        let t_max = all().map(|p| p.0).fold(1.0, f64::max);
        let y_max = all().map(|p| p.1).fold(0.0, f64::max) * 1.15 + 1e-9;
        let title = format!("{} latency", probe_title(probe));
        let mut chart = time_frame(&root, title, 0.0..t_max, y_max, (SOAK_SECONDS, "latency (us)"))?;
        if !marks.dips.is_empty() {
            chart
                .draw_series(
                    marks
                        .dips
                        .iter()
                        .map(|(a, b)| Rectangle::new([(*a, 0.0), (*b, y_max)], DIP_COLOR.mix(0.3).filled())),
                )
                .ok()?;
        }
        broken_line(&mut chart, &mean, PALETTE[2], "mean per second")?;
        if !p99.is_empty() {
            broken_line(&mut chart, &p99, PALETTE[3], "p99 per second")?;
        }
        finish(&root, &mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    Some(svg)
}
