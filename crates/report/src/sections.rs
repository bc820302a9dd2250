//! The tables and lines every format shows, built once from a [`Report`]:
//! the hop chain and verdict per direction, the probes, the goals and the
//! comparison. Formats differ only in how they render these.
//!
//! Long (about 520 lines): about 480 lines of code, the rest its unit tests.

use crate::model::{Report, ResultView};
use crate::table::{Cell, Table, Tone};
use crate::Style;
use headroom_analysis::{Bottleneck, DirectionVerdict};
use headroom_analysis::{Comparison, Figure, Significance};
use headroom_result::{
    DetectionKind, Direction, Hop, HopFigure, Probe, ProbeSpec, ResultDoc, Side, SoakEventKind, WarningCode,
};
use headroom_units::{format_duration, format_rate};
use std::time::Duration;

/// "941.5 Mb/s (117.7 MB/s)": a byte rate in both units.
pub fn rate(bytes_per_sec: f64, style: Style) -> String {
    format_rate(bytes_per_sec * 8.0, style.iec)
}

/// "72.9ms", "90us": a latency in nanoseconds (one formatter for every presenter).
pub fn latency(ns: f64) -> String {
    headroom_units::format_latency_compact(ns)
}

/// "20.5k": an IOPS figure.
pub fn count(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// A figure of the comparison in its own unit.
pub fn figure_value(figure: Figure, v: f64, style: Style) -> String {
    match figure {
        Figure::Throughput => rate(v, style),
        Figure::Iops => format!("{} IOPS", count(v)),
        Figure::LatencyMean | Figure::LatencyP99 => latency(v),
    }
}

/// One line about the run: label, host, start time.
pub fn heading(view: &ResultView) -> String {
    let h = &view.doc.host;
    let host = h.hostname.clone().unwrap_or_else(|| "unknown host".into());
    let cpu = h.cpu.as_ref().map(|c| format!(", {} ({} CPUs)", c.model, c.logical_cpus)).unwrap_or_default();
    format!("{} — {host}{cpu}, started {}", view.name, view.doc.started_at)
}

/// A probe's parameters in a few words: "read 1 MiB QD8x1 direct io_uring".
pub fn probe_what(p: &Probe) -> String {
    match &p.spec {
        ProbeSpec::Disk(d) => format!(
            "{} {} QD{}x{}{}{} {} on {}",
            d.rw,
            headroom_units::format_size(d.block_size),
            d.queue_depth,
            d.jobs,
            if d.direct { " direct" } else { " buffered" },
            if d.sync != "none" { format!(" {}", d.sync) } else { String::new() },
            d.engine,
            d.path
        ),
        ProbeSpec::Net(n) => format!("{} x{} to {} ({})", n.test, n.streams, n.peer, n.protocol),
        ProbeSpec::Ping(p) => format!("{} to {} x{}", p.method, p.peer, p.count),
        ProbeSpec::Cpu(c) => format!("{} x{} threads", c.kernel, c.threads),
    }
}

fn kind(p: &Probe) -> &'static str {
    match p.spec {
        ProbeSpec::Disk(_) => "disk",
        ProbeSpec::Net(_) => "net",
        ProbeSpec::Ping(_) => "ping",
        ProbeSpec::Cpu(_) => "cpu",
    }
}

/// One hop of a direction's chain as every picture of it shows it.
#[derive(Debug, Clone)]
pub struct ChainRow<'a> {
    /// The hop with its ceiling and measured figure, as the verdict carries it.
    pub hop: &'a HopFigure,
    /// Which machine it is on when the chain has two ends ("between" for the
    /// link and protocol); None when the chain is this machine's alone.
    pub on: Option<String>,
    /// This hop is the one the verdict names as the limit.
    pub limiting: bool,
}

impl ChainRow<'_> {
    /// Measured as a share of the ceiling, 1.0 = full; None without both.
    pub fn share(&self) -> Option<f64> {
        match (self.hop.measured_bytes_per_sec, self.hop.ceiling_bytes_per_sec) {
            (Some(m), Some(c)) if c > 0.0 => Some(m / c),
            _ => None,
        }
    }
}

/// The hops of one direction in the order every picture shows them (this
/// machine's CPU last), each marked when it is the limit (`here`: this
/// machine's name, for chains with a far end).
pub fn chain_rows<'a>(v: &'a DirectionVerdict, here: &str) -> Vec<ChainRow<'a>> {
    let two_ends = v.hops.iter().any(|h| h.host.is_some());
    let hot = v.limiting();
    let mut hops: Vec<_> = v.hops.iter().collect();
    // This machine's CPU sits beside the chain; show it last. The server's
    // stays on the server's side, next to its disk.
    hops.sort_by_key(|h| h.hop == Hop::Cpu && h.host.is_none());
    hops.into_iter()
        .map(|h| {
            // With a hop of the same kind on both ends, the verdict's side says which one limits.
            let on_both = v.hops.iter().any(|x| x.hop == h.hop && x.host.is_some() != h.host.is_some());
            let this_side = !on_both || (v.side == Some(Side::Remote)) == h.host.is_some();
            // A CPU limit with no cpu hop in the chain shows on the link it held back.
            let limiting = (Some(h.hop) == hot && this_side)
                || (hot == Some(Hop::Cpu) && h.hop == Hop::Link && !v.hops.iter().any(|x| x.hop == Hop::Cpu));
            let on = two_ends.then(|| match (&h.host, h.hop) {
                (Some(host), _) => host.clone(),
                (None, Hop::Link | Hop::Protocol) => "between".into(),
                (None, _) => here.to_string(),
            });
            ChainRow { hop: h, on, limiting }
        })
        .collect()
}

/// The chain of one direction: hop, what, ceiling, measured, share of
/// ceiling; with a far end in the chain, also which machine each hop is on
/// (`here`: this machine's name; the link is between the two).
pub fn hop_table(v: &DirectionVerdict, here: &str, style: Style) -> Table {
    let rows = chain_rows(v, here);
    let two_ends = rows.iter().any(|r| r.on.is_some());
    let headers: &[&str] = if two_ends {
        &["hop", "on", "what", "ceiling", "measured", "of ceiling"]
    } else {
        &["hop", "what", "ceiling", "measured", "of ceiling"]
    };
    let mut t = Table::new(format!("{}: {}", v.direction.as_str(), v.bottleneck.as_str()), headers);
    let first_figure = if two_ends { 3 } else { 2 };
    t.right = vec![first_figure, first_figure + 1, first_figure + 2];
    for r in rows {
        let h = r.hop;
        let tone = if r.limiting { Tone::Warn } else { Tone::Plain };
        let share = r.share().map(|s| format!("{:.0}%", s * 100.0)).unwrap_or_default();
        let mut row = vec![Cell::tone(h.hop.as_str(), tone)];
        if let Some(on) = &r.on {
            row.push(Cell::tone(on.clone(), tone));
        }
        row.extend([
            Cell::tone(h.name.clone(), tone),
            h.ceiling_bytes_per_sec.map(|c| rate(c, style)).unwrap_or_else(|| "-".into()).into(),
            h.measured_bytes_per_sec.map(|m| rate(m, style)).unwrap_or_else(|| "-".into()).into(),
            share.into(),
        ]);
        t.row(row);
    }
    t
}

/// The name the hop chain gives this machine: its hostname, else "this machine".
pub fn here(view: &ResultView) -> &str {
    view.doc.host.hostname.as_deref().unwrap_or("this machine")
}

/// The verdict of one direction as sentences: explanation, headroom, checks.
pub fn verdict_lines(v: &DirectionVerdict) -> Vec<String> {
    let mut lines = vec![format!("{}: {}", v.direction.as_str().to_uppercase(), v.explanation)];
    if let Some(h) = &v.headroom {
        lines.push(format!("  {h}"));
    }
    for c in &v.checks {
        lines.push(format!("  - check {c}"));
    }
    lines
}

/// Tone of a bottleneck word: cache and unexplained need attention.
pub fn bottleneck_tone(b: Bottleneck) -> Tone {
    match b {
        Bottleneck::Cache | Bottleneck::Unexplained => Tone::Bad,
        _ => Tone::Warn,
    }
}

/// Every probe with its headline figures.
pub fn probes_table(view: &ResultView, style: Style) -> Table {
    let mut t = Table::new("probes", &["probe", "what", "throughput", "IOPS", "lat p50", "lat p99", "warnings"]);
    t.right = vec![2, 3, 4, 5];
    for p in view.doc.probes_and_fleet_sums() {
        let s = &p.summary;
        let l = s.latency_ns.as_ref();
        let warnings: Vec<&str> = p.warnings.iter().map(|w| w.code.as_str()).collect();
        t.row(vec![
            p.id.clone().into(),
            probe_what(p).into(),
            if s.bytes_per_sec > 0.0 { rate(s.bytes_per_sec, style) } else { "-".into() }.into(),
            s.iops.map(count).unwrap_or_else(|| "-".into()).into(),
            l.map(|l| latency(l.p50)).unwrap_or_else(|| "-".into()).into(),
            l.map(|l| latency(l.p99)).unwrap_or_else(|| "-".into()).into(),
            Cell::tone(warnings.join(", "), if warnings.is_empty() { Tone::Plain } else { Tone::Warn }),
        ]);
    }
    t
}

/// The lines under the probes table: the document's own warnings (a whole
/// run's, e.g. a virtual disk's, as "code: message"), then
/// [`memory_shared_lines`].
pub fn probe_notes(view: &ResultView) -> Vec<String> {
    let mut lines: Vec<String> = view.doc.warnings.iter().map(|w| format!("{}: {}", w.code, w.message)).collect();
    lines.extend(memory_shared_lines(view));
    lines
}

/// One line per figure other processes' memory traffic shared, under the
/// probes table (which shows only the `memory_shared` code): "cpu-xxh3-64-t1-memory:
/// measured while other processes kept 1.0 cores busy ...: memory bandwidth
/// is shared; rerun on a quiet machine".
pub fn memory_shared_lines(view: &ResultView) -> Vec<String> {
    view.doc
        .probes
        .iter()
        .flat_map(|p| {
            p.warnings
                .iter()
                .filter(|w| w.code == WarningCode::MemoryShared)
                .map(move |w| format!("{}: {}", p.id, w.message))
        })
        .collect()
}

/// Goals next to the figures they were held against.
pub fn goals_table(view: &ResultView, style: Style) -> Option<Table> {
    goal_results_table(&view.goals, style)
}

/// Goal results as a table (None when there are none).
pub fn goal_results_table(goals: &[headroom_analysis::GoalResult], style: Style) -> Option<Table> {
    if goals.is_empty() {
        return None;
    }
    let mut t = Table::new("goals", &["goal", "measured", "result", "from"]);
    t.right = vec![1];
    for g in goals {
        let measured = match (g.metric, g.measured) {
            (_, None) => "not measured".to_string(),
            ("read" | "write", Some(m)) => rate(m, style),
            (m, Some(v)) if m.contains("iops") => format!("{} IOPS", count(v)),
            (_, Some(v)) => latency(v),
        };
        t.row(vec![
            g.goal.clone().into(),
            measured.into(),
            if g.met { Cell::tone("met", Tone::Good) } else { Cell::tone("MISSED", Tone::Bad) },
            g.source.clone().unwrap_or_default().into(),
        ]);
    }
    Some(t)
}

/// Every shared figure side by side, ratios to the first, and significance.
pub fn comparison_table(c: &Comparison, style: Style) -> Table {
    let mut headers: Vec<String> = vec!["probe".into(), "figure".into()];
    headers.extend(c.columns.iter().cloned());
    for col in c.columns.iter().skip(1) {
        headers.push(format!("{col} / {}", c.columns[0]));
    }
    let mut t = Table { title: "comparison".into(), headers, ..Default::default() };
    t.right = (2..2 + c.columns.len() * 2).collect();
    for r in &c.rows {
        let mut cells: Vec<Cell> = vec![r.name.clone().into(), r.figure.as_str().into()];
        cells.extend(r.cells.iter().enumerate().map(|(i, cell)| {
            let value = figure_value(r.figure, cell.value, style);
            Cell::new(match r.bottlenecks.get(i) {
                Some(bottleneck) => format!("{value}, {bottleneck}"),
                None => value,
            })
        }));
        for cell in r.cells.iter().skip(1) {
            let (text, tone) = ratio_mark(r.figure, cell);
            cells.push(Cell::tone(text, tone));
        }
        t.row(cells);
    }
    t
}

/// A later result's ratio to the first with its significance mark
/// ("1.40x *"), good when significantly better, bad when significantly worse.
pub fn ratio_mark(figure: Figure, cell: &headroom_analysis::Cell) -> (String, Tone) {
    let better = if figure.lower_is_better() { cell.ratio < 1.0 } else { cell.ratio > 1.0 };
    let tone = match cell.significance {
        Significance::Significant { .. } if better => Tone::Good,
        Significance::Significant { .. } => Tone::Bad,
        _ => Tone::Plain,
    };
    let mark = match cell.significance {
        Significance::Significant { .. } => " *",
        Significance::WithinNoise { .. } => " ~",
        Significance::TooFewSamples => " (too few samples)",
        Significance::Baseline => "",
    };
    (format!("{:.2}x{mark}", cell.ratio), tone)
}

/// The legend of the comparison's ratio marks.
pub fn comparison_legend(c: &Comparison) -> String {
    format!(
        "* beyond the noise, ~ within the noise ({}); too few samples: not enough samples on a side to tell",
        c.significance_test
    )
}

/// The heading of [`measured_differently`]'s list.
pub const MEASURED_DIFFERENTLY: &str = "measured differently (ratios across these are not like for like):";

/// One item per setting a shared probe was not measured alike with
/// ("rnd4k-q32t1-read block_size: before = 4096; after = 8192"), to list
/// under [`MEASURED_DIFFERENTLY`]; empty when every result measured alike.
pub fn measured_differently(c: &Comparison) -> Vec<String> {
    c.measured_differently
        .iter()
        .map(|d| {
            let values: Vec<String> = c.columns.iter().zip(&d.values).map(|(col, v)| format!("{col} = {v}")).collect();
            format!("{} {}: {}", d.probe, d.setting, values.join("; "))
        })
        .collect()
}

/// [`MEASURED_DIFFERENTLY`] and its items, one per line after `bullet`
/// ("  " in a terminal, "- " in Markdown); empty when every result
/// measured alike.
pub fn measured_differently_block(c: &Comparison, bullet: &str) -> String {
    let items = measured_differently(c);
    if items.is_empty() {
        return String::new();
    }
    format!("{MEASURED_DIFFERENTLY}\n{}", items.iter().map(|item| format!("{bullet}{item}\n")).collect::<String>())
}

/// One sentence per later result: "A -> B: reads 1.4x, writes 10x, IOPS 1.6x",
/// ending "(2 settings differ)" where B measured a shared probe differently.
/// Reads and writes are the path's end-to-end figures where every result
/// judged a path, with the bottleneck where it moved ("reads 4.30x (link ->
/// disk)"); else the first sequential disk probe's.
pub fn comparison_headline(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    for (i, col) in c.columns.iter().enumerate().skip(1) {
        let mut parts = Vec::new();
        let best = |pred: &dyn Fn(&headroom_analysis::Row) -> bool, word: &str, parts: &mut Vec<String>| {
            if let Some(r) = c.rows.iter().find(|r| pred(r)) {
                let moved = match (r.bottlenecks.first(), r.bottlenecks.get(i)) {
                    (Some(before), Some(after)) if before != after => format!(" ({before} -> {after})"),
                    _ => String::new(),
                };
                parts.push(format!("{word} {:.2}x{moved}", r.cells[i].ratio));
            }
        };
        for (dir, word) in [(Direction::Read, "reads"), (Direction::Write, "writes")] {
            let path = headroom_analysis::Row::path_id(dir);
            if c.rows.iter().any(|r| r.probe == path) {
                best(&|r| r.probe == path, word, &mut parts);
            } else {
                best(
                    &|r| r.figure == Figure::Throughput && r.probe.contains(dir.as_str()) && !r.probe.contains("rnd"),
                    word,
                    &mut parts,
                );
            }
        }
        best(&|r| r.figure == Figure::Iops && r.probe.contains("rnd"), "IOPS", &mut parts);
        if parts.is_empty() {
            continue;
        }
        let differing = settings_differing_from_first(c, i);
        let differ = match differing {
            0 => String::new(),
            1 => " (1 setting differs)".to_string(),
            n => format!(" ({n} settings differ)"),
        };
        out.push(format!("{} -> {col}: {}{differ}", c.columns[0], parts.join(", ")));
    }
    out
}

/// How many settings of shared probes column `i` measured with other values
/// than the first column: the headline says so, so a long list under the
/// table is not missed.
fn settings_differing_from_first(c: &Comparison, i: usize) -> usize {
    c.measured_differently.iter().filter(|d| d.values.get(i) != d.values.first()).count()
}

/// Tidy CSV of every probe of every result: one row per probe, raw numbers.
pub fn probes_csv(report: &Report) -> Table {
    let mut t = Table::new(
        "",
        &[
            "result",
            "probe",
            "kind",
            "what",
            "bytes_per_sec",
            "mbit_per_sec",
            "mbyte_per_sec",
            "iops",
            "latency_mean_ns",
            "latency_p50_ns",
            "latency_p99_ns",
            "latency_p999_ns",
            "duration_s",
        ],
    );
    for v in &report.results {
        for p in v.doc.probes_and_fleet_sums() {
            let s = &p.summary;
            let l = s.latency_ns.as_ref();
            let num = |x: Option<f64>| x.map(|x| format!("{x}")).unwrap_or_default();
            t.row(vec![
                v.name.clone().into(),
                p.id.clone().into(),
                kind(p).into(),
                probe_what(p).into(),
                format!("{}", s.bytes_per_sec).into(),
                format!("{:.3}", s.bytes_per_sec * 8.0 / 1e6).into(),
                format!("{:.3}", s.bytes_per_sec / 1e6).into(),
                num(s.iops).into(),
                num(l.map(|l| l.mean)).into(),
                num(l.map(|l| l.p50)).into(),
                num(l.map(|l| l.p99)).into(),
                num(l.map(|l| l.p999)).into(),
                format!("{}", s.duration_s).into(),
            ]);
        }
    }
    t
}

/// Tidy CSV of a comparison: one row per figure and result.
pub fn comparison_csv(c: &Comparison) -> Table {
    let mut t =
        Table::new("", &["probe", "figure", "unit", "result", "value", "ratio_to_first", "significance", "p_value"]);
    for r in &c.rows {
        for (cell, col) in r.cells.iter().zip(&c.columns) {
            let (sig, p) = match cell.significance {
                Significance::Baseline => ("baseline", String::new()),
                Significance::Significant { p_value } => ("significant", format!("{p_value:.4}")),
                Significance::WithinNoise { p_value } => ("within_noise", format!("{p_value:.4}")),
                Significance::TooFewSamples => ("too_few_samples", String::new()),
            };
            t.row(vec![
                r.probe.clone().into(),
                r.figure.as_str().into(),
                r.figure.unit().into(),
                col.clone().into(),
                format!("{}", cell.value).into(),
                format!("{:.4}", cell.ratio).into(),
                sig.into(),
                p.into(),
            ]);
        }
    }
    t
}

/// What a soak found, one line each, findings first: the detections, then
/// the gaps (time without samples). Empty for a document that is no soak.
pub fn soak_findings(doc: &ResultDoc) -> Vec<(String, Tone)> {
    let Some(soak) = &doc.soak else { return Vec::new() };
    let mut out: Vec<(String, Tone)> =
        soak.detections.iter().map(|d| (format!("{}: {}", d.kind, d.message), Tone::Bad)).collect();
    for g in &soak.gaps {
        out.push((
            format!("gap: no samples for {:.1} s from +{:.1} s ({})", g.duration_s, g.from_s, g.reason),
            Tone::Warn,
        ));
    }
    if out.is_empty() {
        out.push(("no dips, drift, cliffs, flaps or outages detected".into(), Tone::Good));
    }
    out
}

/// One line on the soak's course: time soaked, sessions, turns, samples.
pub fn soak_course(doc: &ResultDoc) -> Option<String> {
    let s = doc.soak.as_ref()?;
    let planned = s.planned_s.map(|p| format!(" of {}", format_duration(Duration::from_secs_f64(p.max(0.0).round()))));
    Some(format!(
        "soaked {}{} in {} session(s): {} turns, {} samples",
        format_duration(Duration::from_secs_f64(s.elapsed_s.max(0.0).round())),
        planned.unwrap_or_default(),
        s.sessions,
        s.cycles,
        s.samples
    ))
}

/// Where a soak's findings fall on one probe's chart (seconds since the soak
/// started, the clock of its samples).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    /// Dips: (start, end).
    pub dips: Vec<(f64, f64)>,
    /// Link flaps: (down, up); up is None while the link stayed down.
    pub flaps: Vec<(f64, Option<f64>)>,
    /// The write cliff: (time, rate after in bytes/s).
    pub cliff: Option<(f64, f64)>,
    /// Server outages: (start, end).
    pub outages: Vec<(f64, f64)>,
    /// Stretches without samples between sessions: (from, to).
    pub gaps: Vec<(f64, f64)>,
}

/// The marks of one soak probe (`probe.id` is `soak-<name>`).
pub fn soak_marks(doc: &ResultDoc, probe: &Probe) -> Marks {
    let Some(soak) = &doc.soak else { return Marks::default() };
    let name = probe.id.strip_prefix("soak-").unwrap_or(&probe.id);
    let end = probe.samples.last().map_or(0.0, |s| s.t_s).max(soak.elapsed_s);
    let mut m = Marks::default();
    let dip_of = |d: &serde_json::Value| {
        let mine = d.get("probe").and_then(|p| p.as_str()).is_none_or(|p| p == name);
        let span = (d.get("start_s")?.as_f64()?, d.get("end_s")?.as_f64()?);
        mine.then_some(span)
    };
    for det in &soak.detections {
        match det.kind {
            DetectionKind::PeriodicDips if det.probe.as_deref().is_none_or(|p| p == name) => {
                let dips = det.details.get(headroom_result::details::DIPS).and_then(|d| d.as_array());
                m.dips.extend(dips.into_iter().flatten().filter_map(dip_of));
            }
            // Older documents name no probe: their cliff was the client's writes.
            DetectionKind::WriteCliff if det.probe.as_deref().map_or(name == "write", |p| p == name) => {
                m.cliff = det.write_cliff().map(|c| (c.at_s, c.bytes_per_sec_after));
            }
            _ => {}
        }
    }
    // Dips that recur at no period are listed on the probe itself.
    m.dips.extend(
        probe
            .details
            .get(headroom_result::details::DIPS)
            .and_then(|d| d.as_array())
            .into_iter()
            .flatten()
            .filter_map(dip_of),
    );
    for e in &soak.events {
        match e.kind {
            SoakEventKind::Flap => m.flaps.push((e.t_s, e.end_s)),
            SoakEventKind::ServerOutage => m.outages.push((e.t_s, e.end_s.unwrap_or(end))),
            SoakEventKind::ProbeError | SoakEventKind::Gap => {}
        }
    }
    m.gaps = soak.gaps.iter().map(|g| (g.from_s, g.to_s)).collect();
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::{Detection, Sample, Soak};

    fn soak_probe(name: &str) -> Probe {
        let spec = serde_json::json!({"kind": "cpu", "spec": {"kernel": "x", "threads": 1, "buffer_size": 1}});
        Probe {
            id: format!("soak-{name}"),
            name: name.into(),
            spec: serde_json::from_value(spec).unwrap(),
            summary: Default::default(),
            samples: Vec::new(),
            histogram: None,
            warnings: Vec::new(),
            details: Default::default(),
            host: None,
        }
    }

    #[test]
    fn a_figure_other_processes_shared_is_spelled_out_under_the_probes_in_every_format() {
        let shared = headroom_result::Contention {
            other_busy_cores: 1.04,
            window_s: 0.6,
            busiest: vec![headroom_result::ProcessLoad { name: "dd".into(), pid: 7, percent: 97.0 }],
        };
        let mut marked = soak_probe("xxh3");
        marked.id = "cpu-xxh3-64-t1-memory".into();
        marked.warnings.push(headroom_result::Warning::new(WarningCode::MemoryShared, shared.sentence()));
        let mut quiet = soak_probe("crc");
        quiet.warnings.push(headroom_result::Warning::new(WarningCode::CpuContended, "the workers got 50%"));
        let mut doc = ResultDoc::new("2026-11-27T00:00:00Z");
        doc.probes = vec![marked, quiet];
        let report = crate::model::Report::new(vec![(doc, "cpu.json".into())]);
        let line =
            "cpu-xxh3-64-t1-memory: measured while other processes kept 1.0 cores busy (busiest: dd 97% of a core): \
                    memory bandwidth is shared; rerun on a quiet machine";
        assert_eq!(memory_shared_lines(&report.results[0]), vec![line.to_string()], "one line, the marked probe's");
        for format in [crate::export::Format::Table, crate::export::Format::Markdown, crate::export::Format::Html] {
            let text = crate::export::presenter(format).render(&report, Style::default());
            assert!(text.contains(&format!("~ {line}")), "{format:?}: {text}");
        }
    }

    #[test]
    fn a_cliff_is_marked_on_the_probe_it_was_found_in() {
        let series: Vec<Sample> = (0..40)
            .map(|i| Sample { t_s: i as f64, bytes_per_sec: if i < 20 { 500e6 } else { 100e6 }, ..Sample::default() })
            .collect();
        let cliff = headroom_analysis::detect_write_cliff(&series).expect("a cliff");
        let mut doc = ResultDoc::new("2026-11-23T00:00:00Z");
        doc.soak = Some(Soak { detections: vec![cliff.detection("remote-write")], ..Soak::default() });
        assert!(soak_marks(&doc, &soak_probe("remote-write")).cliff.is_some());
        assert!(soak_marks(&doc, &soak_probe("write")).cliff.is_none(), "the server's cliff is not the client's");

        // A document from before detections named their probe: the client's writes.
        let unnamed = Detection { probe: None, ..cliff.detection("write") };
        doc.soak = Some(Soak { detections: vec![unnamed], ..Soak::default() });
        assert!(soak_marks(&doc, &soak_probe("write")).cliff.is_some());
        assert!(soak_marks(&doc, &soak_probe("remote-write")).cliff.is_none());
    }
}
