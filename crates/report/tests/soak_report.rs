//! The report of a soak: it leads with the findings, draws no run-style
//! verdict, and marks each finding on the charts.

mod common;

use headroom_report::{presenter, Format, Report, Style};

#[test]
fn terminal_leads_with_the_findings_and_no_run_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let text = presenter(Format::Table).render(&Report::new(vec![common::soak_doc(dir.path())]), Style::default());
    let findings = text.find("findings:").expect(&text);
    let probes = text.find("probes").expect(&text);
    assert!(findings < probes, "findings first: {text}");
    for needle in [
        "periodic_dips: ",
        "every 5 min",
        "link_flaps: 1 link flap(s): eth0",
        "server_outage: ",
        "gap: no samples for 100.0 s",
    ] {
        assert!(text[findings..probes].contains(needle), "{needle:?} in {text}");
    }
    for verdict in ["WRITE:", "READ:", "unexplained"] {
        assert!(!text.contains(verdict), "no run verdict for a soak ({verdict}): {text}");
    }
}

#[test]
fn html_marks_each_finding_on_the_charts_and_breaks_lines_at_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, name) = common::soak_doc(dir.path());
    let html = presenter(Format::Html).render(&Report::new(vec![(doc, name)]), Style::default());
    let findings = html.find("<div class=\"findings\">").expect("a findings block");
    assert!(findings < html.find("<svg").unwrap(), "findings before the charts");
    assert!(!html.contains("class=\"verdict"), "no run verdict for a soak");
    assert_eq!(html.matches("class=\"chart soak-chart\"").count(), 3);
    assert_eq!(html.matches("class=\"chart latency-chart\"").count(), 2, "write and read have latency");
    let chart = |id: &str| {
        let at = html.find(&format!("id=\"chart-soak-{id}\"")).unwrap();
        &html[at..at + html[at..].find("</svg>").unwrap()]
    };
    let (write, net) = (chart("write"), chart("net"));
    for (what, svg) in [("write", write), ("net", net)] {
        assert!(svg.contains("dip"), "{what}: dips in the legend");
        assert!(svg.contains("link flap"), "{what}: the flap is drawn");
        assert!(svg.contains("no samples (soak not running)"), "{what}: the gap between sessions is shaded");
    }
    assert!(net.contains("server unreachable"), "the outage on the net chart");
    // One line per turn: 10 write turns, 20 s apart from the next.
    let lines = write.matches("<polyline").count();
    assert!(lines >= 15, "the write line is broken between turns ({lines} pieces)");
    let latency = &html[html.find("id=\"latency-soak-write\"").unwrap()..];
    assert!(latency[..latency.find("</svg>").unwrap()].contains("p99 per second"));
}
