//! A self-contained HTML report: inline CSS, inline SVG charts, no script and
//! nothing loaded from elsewhere, so it opens offline and can be mailed.
//! Shows, per result, the verdict, the hop chain, the probes with a
//! per-second chart each, the goals; then, for several results, the
//! comparison table and charts.

use crate::charts;
use crate::heatmap;
use crate::latency_chart;
use crate::markup::escape;
use crate::model::Report;
use crate::sections;
use crate::table::{Table, Tone};
use crate::{Presenter, Style};
use headroom_analysis::Figure;

/// More probes than this in one result (a sweep's dozens) fold their time
/// charts into a closed `<details>`; a `run`'s eight or so stay open.
const UNFOLDED_TIME_CHARTS: usize = 12;

/// `--html FILE`: one self-contained page (inline SVG charts, no external assets).
pub struct HtmlPresenter;

fn table_html(t: &Table) -> String {
    let mut out = String::from("<table>");
    if !t.title.is_empty() {
        out += &format!("<caption>{}</caption>", escape(&t.title));
    }
    out += "<thead><tr>";
    for (i, h) in t.headers.iter().enumerate() {
        let class = if t.right.contains(&i) { " class=\"num\"" } else { "" };
        out += &format!("<th{class}>{}</th>", escape(h));
    }
    out += "</tr></thead><tbody>";
    for r in &t.rows {
        out += "<tr>";
        for (i, c) in r.iter().enumerate() {
            let mut classes = Vec::new();
            if t.right.contains(&i) {
                classes.push("num");
            }
            match c.tone {
                Tone::Good => classes.push("good"),
                Tone::Bad => classes.push("bad"),
                Tone::Warn => classes.push("warn"),
                Tone::Bold => classes.push("strong"),
                Tone::Plain => {}
            }
            let class = if classes.is_empty() { String::new() } else { format!(" class=\"{}\"", classes.join(" ")) };
            out += &format!("<td{class}>{}</td>", escape(&c.text));
        }
        out += "</tr>";
    }
    out + "</tbody></table>\n"
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:960px;\
color:#222;padding:0 1rem}h1{font-size:1.6rem}h2{font-size:1.3rem;border-bottom:1px solid #ddd;padding-bottom:.3rem;\
margin-top:2.5rem}h3{font-size:1.1rem}table{border-collapse:collapse;margin:.8rem 0;font-size:.9rem}caption{text-align:left;\
font-weight:600;padding:.3rem 0}th,td{border:1px solid #ddd;padding:.3rem .6rem;text-align:left}th{background:#f4f4f4}\
.num{text-align:right;font-variant-numeric:tabular-nums}.good{color:#08703a;font-weight:600}.bad{color:#b00020;\
font-weight:600}.warn{background:#fff4d6}.strong{font-weight:600}.verdict{border-left:4px solid #0072b2;background:#f3f8fc;\
padding:.6rem 1rem;margin:.8rem 0}.verdict.bad{border-color:#b00020;background:#fdf2f4;color:inherit;font-weight:normal}\
.verdict p{margin:.3rem 0}.findings{border-left:4px solid #e69f00;background:#fff8ec;padding:.4rem 1rem;margin:.8rem 0}\
.findings li{margin:.3rem 0}.finding{font-weight:600}.chart{margin:.8rem 0}details.time-charts summary{cursor:pointer;font-weight:600;margin:.8rem 0}.chart svg{max-width:100%;height:auto}footer{margin-top:3rem;color:#777;\
font-size:.8rem}";

impl Presenter for HtmlPresenter {
    fn render(&self, report: &Report, style: Style) -> String {
        let style = Style { color: false, ..style };
        let title = match report.results.as_slice() {
            [one] => format!("headroom report: {}", one.name),
            many => {
                format!("headroom report: {}", many.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(" vs "))
            }
        };
        let mut body = format!("<h1>{}</h1>\n", escape(&title));
        // Several results lead with what changed between them, each result's
        // own report after it.
        if let Some(c) = &report.comparison {
            for line in sections::comparison_headline(c) {
                body += &format!("<p class=\"strong\">{}</p>\n", escape(&line));
            }
        }
        if let Some(c) = &report.comparison {
            body += "<section class=\"comparison\">\n<h2>Comparison</h2>\n";
            body += &crate::paired::html_figure(c);
            body += &table_html(&sections::comparison_table(c, style));
            body += &format!("<p>{}</p>\n", escape(&sections::comparison_legend(c)));
            let differently = sections::measured_differently(c);
            if !differently.is_empty() {
                body += &format!("<p>{}</p>\n<ul>\n", escape(sections::MEASURED_DIFFERENTLY));
                body += &differently.iter().map(|item| format!("<li>{}</li>\n", escape(item))).collect::<String>();
                body += "</ul>\n";
            }
            for figure in [Figure::Throughput, Figure::Iops, Figure::LatencyMean] {
                if let Some(svg) = charts::comparison_chart(c, figure) {
                    body += &format!("<div class=\"chart comparison-chart\">{svg}</div>\n");
                }
            }
            body += &latency_chart::across_html(report);
            body += "</section>\n";
        } else if let Some(e) = &report.comparison_error {
            body += &format!("<p>No comparison: {}</p>\n", escape(&e.to_string()));
        }
        for view in &report.results {
            body += &format!("<section class=\"result\">\n<h2>{}</h2>\n", escape(&sections::heading(view)));
            body += &crate::path_chart::html_figure(view);
            let findings = sections::soak_findings(&view.doc);
            if !findings.is_empty() {
                // A soak leads with what it found.
                body += "<div class=\"findings\"><h3>Findings</h3><ul>";
                for (line, tone) in &findings {
                    let class = if matches!(tone, Tone::Good) { "good" } else { "finding" };
                    body += &format!("<li class=\"{class}\">{}</li>", escape(line));
                }
                body += "</ul>";
                if let Some(course) = sections::soak_course(&view.doc) {
                    body += &format!("<p>{}</p>", escape(&course));
                }
                body += "</div>\n";
            }
            let fleet = crate::present::fleet::render(&view.doc, style);
            if !fleet.is_empty() {
                body += &format!("<h3>Hosts</h3>\n<pre>{}</pre>\n", escape(&fleet));
            }
            for v in &view.directions {
                let bad = matches!(sections::bottleneck_tone(v.bottleneck), Tone::Bad);
                body += &format!("<div class=\"verdict{}\">", if bad { " bad" } else { "" });
                let mut lines = sections::verdict_lines(v).into_iter();
                if let Some(first) = lines.next() {
                    body += &format!("<p><strong>{}</strong></p>", escape(&first));
                }
                for l in lines {
                    body += &format!("<p>{}</p>", escape(l.trim_start()));
                }
                body += "</div>\n";
            }
            if !view.directions.is_empty() {
                body += "<h3>Hop chain</h3>\n";
            }
            for v in &view.directions {
                body += &table_html(&sections::hop_table(v, sections::here(view), style));
            }
            if let Some(goals) = sections::goals_table(view, style) {
                body += "<h3>Goals</h3>\n";
                body += &table_html(&goals);
            }
            body += "<h3>Probes</h3>\n";
            body += &table_html(&sections::probes_table(view, style));
            for line in sections::probe_notes(view) {
                body += &format!("<p class=\"warn\">~ {}</p>\n", escape(&line));
            }
            body += &heatmap::result_html(view);
            let far_hops: Vec<_> = view.directions.iter().flat_map(|d| d.hops.iter().cloned()).collect();
            let probes = view.doc.probes_and_fleet_sums().count();
            // A sweep has dozens of probes: their time charts fold away under the
            // heatmap and the table instead of making the page a scroll of charts.
            let folded = view.doc.soak.is_none() && probes > UNFOLDED_TIME_CHARTS;
            if folded {
                body +=
                    &format!("<details class=\"time-charts\"><summary>Time charts of the {probes} probes</summary>\n");
            }
            for p in view.doc.probes_and_fleet_sums() {
                let ceiling = charts::ceiling_for(p, &view.ceilings, &far_hops);
                if view.doc.soak.is_some() {
                    let marks = sections::soak_marks(&view.doc, p);
                    match charts::soak_chart(p, &marks) {
                        Some(svg) => {
                            body +=
                                &format!("<div class=\"chart soak-chart\" id=\"chart-{}\">{svg}</div>\n", escape(&p.id))
                        }
                        None => body += &format!("<p>{}: no per-second samples to draw.</p>\n", escape(&p.id)),
                    }
                    if let Some(svg) = charts::latency_chart(p, &marks) {
                        body += &format!(
                            "<div class=\"chart latency-chart\" id=\"latency-{}\">{svg}</div>\n",
                            escape(&p.id)
                        );
                    }
                    continue;
                }
                match charts::probe_chart(p, ceiling.as_ref()) {
                    Some(svg) => {
                        body +=
                            &format!("<div class=\"chart probe-chart\" id=\"chart-{}\">{svg}</div>\n", escape(&p.id))
                    }
                    None => body += &format!("<p>{}: no per-second samples to draw.</p>\n", escape(&p.id)),
                }
            }
            if folded {
                body += "</details>\n";
            }
            body += &latency_chart::result_html(view);
            body += "</section>\n";
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}<footer>Written by headroom {}; self-contained: \
nothing on this page is loaded from elsewhere.</footer>\n</body>\n</html>\n",
            escape(&title),
            env!("CARGO_PKG_VERSION")
        )
    }
}
