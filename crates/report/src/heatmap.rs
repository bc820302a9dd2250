//! The queue-depth x block-size matrix of a disk sweep (`headroom disk
//! --preset sweep`, or any document whose disk probes of one access pattern
//! cover two or more queue depths at two or more block sizes) as a heatmap:
//! one per access pattern, colour = throughput on a log scale, each cell
//! marked latency-bound or bandwidth-bound by what doubling the queue depth
//! did to it.

use crate::markup::escape;
use crate::model::ResultView;
use headroom_result::{DiskSpec, Probe, ProbeSpec};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeSet;

/// Doubling the queue depth raised throughput by at least this factor (half
/// the ideal doubling, on a log scale): the cell was held by per-I/O latency
/// (Little's law: throughput = QD x block / latency), more I/Os in flight
/// still help. Below it the device (or the path) is full: bandwidth-bound.
pub const SCALES: f64 = std::f64::consts::SQRT_2;

/// How a cell of the matrix is limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Doubling the queue depth from here raised throughput by [`SCALES`] or more.
    Latency,
    /// Doubling it raised throughput by less: the plateau.
    Bandwidth,
}

/// One access pattern's matrix: block sizes (rows) x queue depths (columns).
#[derive(Debug, Clone)]
pub struct Matrix {
    /// randread, randwrite, read, write, randrw.
    pub rw: String,
    /// Bytes per I/O, ascending.
    pub block_sizes: Vec<u64>,
    /// Queue depths, ascending.
    pub queue_depths: Vec<u32>,
    /// `cells[row][col]`: (bytes/s, IOPS), None where no probe measured it.
    pub cells: Vec<Vec<Option<(f64, f64)>>>,
}

impl Matrix {
    /// Whether the cell at (`row`, `col`) is latency- or bandwidth-bound:
    /// latency-bound when some deeper queue depth gains [`SCALES`] or more
    /// per doubling over it (any, not just the next: one noisy cell does not
    /// end the climb), bandwidth-bound when none does; the deepest cell by
    /// the step that led to it. None without a neighbour to compare with.
    pub fn bound(&self, row: usize, col: usize) -> Option<Bound> {
        let at = |c: usize| self.cells[row].get(c).copied().flatten().map(|v| v.0).filter(|v| *v > 0.0);
        let per_doubling = |a: usize, b: usize| {
            let steps = (f64::from(self.queue_depths[b]) / f64::from(self.queue_depths[a])).log2();
            Some((at(b)? / at(a)?).powf(1.0 / steps.max(1e-9)))
        };
        let deeper: Vec<f64> = (col + 1..self.queue_depths.len()).filter_map(|d| per_doubling(col, d)).collect();
        let best = if deeper.is_empty() {
            if col == 0 {
                return None;
            }
            per_doubling(col - 1, col)?
        } else {
            deeper.into_iter().fold(0.0, f64::max)
        };
        Some(if best >= SCALES { Bound::Latency } else { Bound::Bandwidth })
    }
}

fn disk(p: &Probe) -> Option<&DiskSpec> {
    match &p.spec {
        ProbeSpec::Disk(d) if d.jobs == 1 => Some(d),
        _ => None,
    }
}

/// The matrices of a document's disk probes, one per access pattern that
/// has at least two queue depths and two block sizes.
pub fn matrices<'a>(probes: impl Iterator<Item = &'a Probe>) -> Vec<Matrix> {
    let probes: Vec<&Probe> = probes.filter(|p| disk(p).is_some() && p.host.is_none()).collect();
    let mut patterns: Vec<String> = Vec::new();
    for d in probes.iter().filter_map(|p| disk(p)) {
        if !patterns.contains(&d.rw) {
            patterns.push(d.rw.clone());
        }
    }
    let mut out = Vec::new();
    for rw in patterns {
        let mine: Vec<(&DiskSpec, &Probe)> =
            probes.iter().filter_map(|p| disk(p).filter(|d| d.rw == rw).map(|d| (d, *p))).collect();
        let block_sizes: Vec<u64> = mine.iter().map(|m| m.0.block_size).collect::<BTreeSet<_>>().into_iter().collect();
        let queue_depths: Vec<u32> =
            mine.iter().map(|m| m.0.queue_depth).collect::<BTreeSet<_>>().into_iter().collect();
        if block_sizes.len() < 2 || queue_depths.len() < 2 {
            continue;
        }
        let cells = block_sizes
            .iter()
            .map(|bs| {
                queue_depths
                    .iter()
                    .map(|qd| {
                        let (_, p) = mine.iter().find(|m| m.0.block_size == *bs && m.0.queue_depth == *qd)?;
                        let s = &p.summary;
                        let ok = s.bytes_per_sec.is_finite() && s.bytes_per_sec > 0.0;
                        ok.then(|| (s.bytes_per_sec, s.iops.unwrap_or(s.bytes_per_sec / *bs as f64)))
                    })
                    .collect()
            })
            .collect();
        out.push(Matrix { rw, block_sizes, queue_depths, cells });
    }
    out
}

/// Viridis at `t` in 0..1 (five stops, linear between): dark blue to yellow,
/// ordered in lightness and readable with common colour blindness.
fn viridis(t: f64) -> RGBColor {
    const STOPS: [(f64, f64, f64); 5] =
        [(68.0, 1.0, 84.0), (59.0, 82.0, 139.0), (33.0, 145.0, 140.0), (94.0, 201.0, 98.0), (253.0, 231.0, 37.0)];
    let t = t.clamp(0.0, 1.0) * 4.0;
    let i = (t.floor() as usize).min(3);
    let f = t - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

const WIDTH: u32 = 720;
const LEFT: i32 = 64;
const TOP: i32 = 56;
const CELL_H: i32 = 52;

/// "412 MB/s", "1.21 GB/s".
fn mbps(bytes_per_sec: f64) -> String {
    if bytes_per_sec >= 1e9 {
        format!("{:.2} GB/s", bytes_per_sec / 1e9)
    } else if bytes_per_sec >= 100e6 {
        format!("{:.0} MB/s", bytes_per_sec / 1e6)
    } else {
        format!("{:.1} MB/s", bytes_per_sec / 1e6)
    }
}

/// The heatmap of one matrix as SVG.
pub fn heatmap(m: &Matrix, title: &str) -> Option<String> {
    let values: Vec<f64> = m.cells.iter().flatten().flatten().map(|c| c.0).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    if values.is_empty() {
        return None;
    }
    let shade = |v: f64| if hi > lo { (v / lo).ln() / (hi / lo).ln() } else { 1.0 };
    let cols = m.queue_depths.len() as i32;
    let cell_w = (WIDTH as i32 - LEFT - 16) / cols;
    let grid_bottom = TOP + CELL_H * m.block_sizes.len() as i32;
    let height = (grid_bottom + 96) as u32;
    let font = |size: f64| ("sans-serif", size).into_font();
    let centre = Pos::new(HPos::Center, VPos::Center);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let text = |s: &str, at: (i32, i32), size: f64, colour: RGBColor, pos: Pos| {
            root.draw(&Text::new(s.to_string(), at, font(size).color(&colour).pos(pos))).ok()
        };
        text(title, (WIDTH as i32 / 2, 16), 16.0, BLACK, centre)?;
        text("queue depth (I/Os in flight) →", (LEFT + cell_w * cols / 2, 36), 12.0, BLACK, centre)?;
        for (c, qd) in m.queue_depths.iter().enumerate() {
            text(&format!("QD{qd}"), (LEFT + cell_w * c as i32 + cell_w / 2, TOP - 8), 13.0, BLACK, centre)?;
        }
        for (r, bs) in m.block_sizes.iter().enumerate() {
            let y = TOP + CELL_H * r as i32;
            text(
                &headroom_units::size_label(*bs),
                (LEFT - 8, y + CELL_H / 2),
                13.0,
                BLACK,
                Pos::new(HPos::Right, VPos::Center),
            )?;
            for (c, cell) in m.cells[r].iter().enumerate() {
                let x = LEFT + cell_w * c as i32;
                let (x0, y0, x1, y1) = (x + 1, y + 1, x + cell_w - 1, y + CELL_H - 1);
                let mid = (x + cell_w / 2, y + CELL_H / 2);
                let Some((bytes, iops)) = cell else {
                    root.draw(&Rectangle::new([(x0, y0), (x1, y1)], RGBColor(235, 235, 235).filled())).ok()?;
                    text("not measured", mid, 11.0, RGBColor(90, 90, 90), centre)?;
                    continue;
                };
                let t = shade(*bytes);
                root.draw(&Rectangle::new([(x0, y0), (x1, y1)], viridis(t).filled())).ok()?;
                // Dark text on the light (yellow-green) end, white on the dark.
                let ink = if t > 0.6 { BLACK } else { WHITE };
                text(&mbps(*bytes), (mid.0, mid.1 - 13), 12.0, ink, centre)?;
                text(&format!("{} IOPS", crate::sections::count(*iops)), (mid.0, mid.1 + 1), 11.0, ink, centre)?;
                let bound = match m.bound(r, c) {
                    Some(Bound::Bandwidth) => {
                        // The plateau outlined, so the region shows at a glance.
                        let frame = Rectangle::new([(x0 + 2, y0 + 2), (x1 - 2, y1 - 2)], ink.stroke_width(2));
                        root.draw(&frame).ok()?;
                        "bandwidth-bound"
                    }
                    Some(Bound::Latency) => "latency-bound",
                    None => "",
                };
                text(bound, (mid.0, mid.1 + 15), 10.0, ink, centre)?;
            }
        }
        // Legend: the colour scale, then what the outline means.
        let (bar_x, bar_y, bar_w) = (LEFT, grid_bottom + 20, 240);
        for i in 0..bar_w {
            let c = viridis(i as f64 / (bar_w - 1) as f64);
            root.draw(&Rectangle::new([(bar_x + i, bar_y), (bar_x + i + 1, bar_y + 14)], c.filled())).ok()?;
        }
        let left = Pos::new(HPos::Left, VPos::Center);
        text(&mbps(lo), (bar_x, bar_y + 26), 11.0, BLACK, left)?;
        text(&mbps(hi), (bar_x + bar_w, bar_y + 26), 11.0, BLACK, Pos::new(HPos::Right, VPos::Center))?;
        text("throughput (log colour scale)", (bar_x + bar_w / 2, bar_y + 26), 11.0, BLACK, centre)?;
        let key_x = bar_x + bar_w + 24;
        root.draw(&Rectangle::new([(key_x, bar_y), (key_x + 22, bar_y + 14)], BLACK.stroke_width(2))).ok()?;
        text("bandwidth-bound (outlined): doubling QD adds < 41%: full", (key_x + 30, bar_y + 7), 11.0, BLACK, left)?;
        text(
            "latency-bound: doubling QD adds 41% or more (Little's law)",
            (key_x + 30, bar_y + 29),
            11.0,
            BLACK,
            left,
        )?;
        root.present().ok()?;
    }
    Some(svg)
}

/// The heatmaps of a result, one per access pattern with a matrix; empty
/// when it has none (no sweep).
pub fn result_html(view: &ResultView) -> String {
    let mut out = String::new();
    for m in matrices(view.doc.probes.iter()) {
        let title = format!("{}: {} throughput by queue depth and block size", view.name, m.rw);
        if let Some(svg) = heatmap(&m, &title) {
            let cells = m.cells.iter().flatten().filter(|c| c.is_some()).count();
            out += &format!(
                "<div class=\"chart heatmap\" id=\"heatmap-{}\" data-cells=\"{cells}\">{svg}</div>\n",
                escape(&m.rw)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rates: &[f64]) -> Matrix {
        Matrix {
            rw: "randread".into(),
            block_sizes: vec![4096],
            queue_depths: (0..rates.len()).map(|i| 1 << i).collect(),
            cells: vec![rates.iter().map(|r| Some((*r, r / 4096.0))).collect()],
        }
    }

    #[test]
    fn a_cell_is_bandwidth_bound_once_doubling_qd_stops_paying() {
        // QD1 -> 2 -> 4 doubles, then 4 -> 8 -> 16 flat: a device full at QD4.
        let m = matrix(&[50e6, 100e6, 200e6, 210e6, 212e6]);
        let bounds: Vec<_> = (0..5).map(|c| m.bound(0, c)).collect();
        use Bound::*;
        assert_eq!(bounds, vec![Some(Latency), Some(Latency), Some(Bandwidth), Some(Bandwidth), Some(Bandwidth)]);
        // A noisy cell (QD8 here) does not end the climb: QD16 still pays over QD4.
        let noisy = matrix(&[50e6, 100e6, 105e6, 146e6, 215e6]);
        assert_eq!(noisy.bound(0, 2), Some(Latency));
        // The deepest cell is judged by the step that led to it.
        assert_eq!(matrix(&[50e6, 100e6]).bound(0, 1), Some(Latency));
        let missing = Matrix { cells: vec![vec![Some((1e6, 1.0)), None]], ..matrix(&[1e6, 1e6]) };
        assert_eq!(missing.bound(0, 0), None);
    }

    #[test]
    fn viridis_runs_dark_to_light() {
        let lum = |c: RGBColor| 0.2126 * c.0 as f64 + 0.7152 * c.1 as f64 + 0.0722 * c.2 as f64;
        assert!((0..10).all(|i| lum(viridis(i as f64 / 10.0)) < lum(viridis((i + 1) as f64 / 10.0))));
    }
}
