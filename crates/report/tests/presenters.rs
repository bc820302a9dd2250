//! Every format, rendered from stored result documents (the analysis crate's fixtures).

use headroom_report::{presenter, Format, Report, Style};
use headroom_result::ResultDoc;

/// Loads `crates/analysis/tests/fixtures/<name>.json` and returns it with the
/// file name the report shows as its source.
pub fn fixture(name: &str) -> (ResultDoc, String) {
    let path = format!("{}/../analysis/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let doc = ResultDoc::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (doc, format!("{name}.json"))
}

fn render(format: Format, names: &[&str], style: Style) -> String {
    let report = Report::new(names.iter().map(|n| fixture(n)).collect());
    presenter(format).render(&report, style)
}

#[test]
fn terminal_shows_verdict_chain_and_both_units_with_colour_only_when_asked() {
    let plain = render(Format::Table, &["link-bound"], Style::default());
    assert!(plain.contains("READ: reads run at 98% of the 1GbE TCP (MTU 1500) ceiling"), "{plain}");
    assert!(plain.contains("5GbE link would raise reads up to 5.0x"), "{plain}");
    assert!(plain.contains("941.5 Mb/s (117.7 MB/s)"), "ceiling in bits and bytes: {plain}");
    assert!(plain.contains("seq1m-q8t1-read"));
    assert!(!plain.contains('\x1b'));
    let iec = render(Format::Table, &["link-bound"], Style { color: false, iec: true });
    assert!(iec.contains("MiB/s"));
    assert!(render(Format::Table, &["link-bound"], Style { color: true, iec: false }).contains("\x1b["));
}

#[test]
fn markdown_is_a_forum_ready_table() {
    let md = render(Format::Markdown, &["compare-before", "compare-after"], Style::default());
    assert!(md.contains("| hop | what | ceiling | measured | of ceiling |"), "{md}");
    assert!(md.contains("**before-10gbe -> after-10gbe: reads 1.40x, writes 10.00x, IOPS 1.60x**"), "{md}");
    assert!(md.contains("Mann-Whitney"));
    assert!(!md.contains('\x1b'));
}

#[test]
fn an_upgrade_that_moved_the_bottleneck_is_headlined_by_the_path_not_the_disk() {
    let text = render(Format::Table, &["link-bound", "disk-bound"], Style::default());
    assert!(text.contains("1gbe-nas -> 10gbe-hdd: reads 1.82x (link -> disk), writes 1.70x (link -> disk)"), "{text}");
    assert!(text.contains("922.4 Mb/s (115.3 MB/s), link"), "each result's figure names its bottleneck: {text}");
}

#[test]
fn several_results_lead_with_their_comparison_in_every_text_format() {
    let names = ["compare-before", "compare-after"];
    for (format, table, first_result) in [
        (Format::Table, "comparison", "headroom: "),
        (Format::Markdown, "Mann-Whitney", "### headroom: "),
        (Format::Html, "<section class=\"comparison\">", "<section class=\"result\">"),
    ] {
        let text = render(format, &names, Style::default());
        let headline = text.find("after-10gbe: reads 1.40x, writes 10.00x").expect("the comparison's headline");
        let table = text.find(table).expect("the comparison table");
        let result = text.find(first_result).expect("a result's own report");
        assert!(headline < result && table < result, "{format:?}: the comparison comes after a result:\n{text}");
    }
}

#[test]
fn csv_is_tidy_numbers() {
    let csv = render(Format::Csv, &["link-bound"], Style::default());
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("result,probe,kind,what,bytes_per_sec,mbit_per_sec"));
    assert_eq!(csv.lines().count(), 1 + 6);
    assert!(csv.contains("1gbe-nas,tcp-download,net,"), "{csv}");
    let cmp = render(Format::Csv, &["compare-before", "compare-after"], Style::default());
    assert!(cmp.contains("seq1m-q8t1-write,throughput,bytes/s,after-10gbe,200000000,10.0000,significant"), "{cmp}");
}

#[test]
fn json_of_one_result_is_the_document_and_of_several_has_the_comparison() {
    let one = render(Format::Json, &["link-bound"], Style::default());
    let doc = ResultDoc::from_json(&one).unwrap();
    assert_eq!(doc.label.as_deref(), Some("1gbe-nas"));
    let many: serde_json::Value =
        serde_json::from_str(&render(Format::Json, &["compare-before", "compare-after"], Style::default())).unwrap();
    assert_eq!(many["results"].as_array().unwrap().len(), 2);
    assert_eq!(many["comparison"]["columns"][1], "after-10gbe");
}

#[test]
fn html_is_self_contained_with_a_chart_per_probe_and_comparison_charts() {
    let html = render(Format::Html, &["link-bound", "unexplained"], Style::default());
    let probes = 6 + 4;
    assert_eq!(html.matches("class=\"chart probe-chart\"").count(), probes);
    assert!(html.matches("<svg").count() > probes, "comparison chart too");
    assert!(html.contains("comparison-chart"));
    for external in ["<script", "<link", "src=", "@import", "url("] {
        assert!(!html.contains(external), "found {external}");
    }
    // The only URLs are XML namespaces, which browsers never fetch.
    for (i, _) in html.match_indices("http:").chain(html.match_indices("https:")) {
        let near = &html[i.saturating_sub(8)..(i + 40).min(html.len())];
        assert!(near.contains("www.w3.org/"), "unexpected URL near {near}");
    }
    assert!(html.contains("reads run at 98% of the 1GbE TCP"));
    assert!(html.contains("unexplained: reads run at 62.00 MB/s"));
}

/// A sweep's dozens of time charts fold into one closed `<details>`; a
/// run's handful stay on the page.
#[test]
fn html_folds_the_time_charts_of_many_probes() {
    let (mut doc, name) = fixture("link-bound");
    let few = presenter(Format::Html).render(&Report::new(vec![(doc.clone(), name.clone())]), Style::default());
    assert!(!few.contains("<details"), "six probes stay open");
    let template = doc.probes[0].clone();
    for i in 0..30 {
        let mut p = template.clone();
        p.id = format!("sweep-{i}");
        doc.probes.push(p);
    }
    let many = presenter(Format::Html).render(&Report::new(vec![(doc, name)]), Style::default());
    let folded = &many[many.find("<details class=\"time-charts\">").expect("folded charts")..];
    let folded = &folded[..folded.find("</details>").unwrap()];
    assert!(folded.contains("Time charts of the 36 probes"), "{folded:.200}");
    assert_eq!(folded.matches("class=\"chart probe-chart\"").count(), 36);
}

#[test]
fn html_escapes_labels() {
    let (mut doc, name) = fixture("cache");
    doc.label = Some("<b>me & you</b>".into());
    let html = presenter(Format::Html).render(&Report::new(vec![(doc, name)]), Style::default());
    assert!(html.contains("&lt;b&gt;me &amp; you&lt;/b&gt;") && !html.contains("<b>me"));
}

#[test]
fn the_chain_says_which_machine_each_hop_is_on_once_the_server_measured_its_own_disk() {
    let md = render(Format::Markdown, &["far-cpu-bound"], Style::default());
    assert!(md.contains("| hop | on | what | ceiling | measured | of ceiling |"), "{md}");
    assert!(md.contains("| disk | nas | vda |"), "{md}");
    assert!(md.contains("| cpu | nas | CPU (cgroup quota) |"), "{md}");
    assert!(md.contains("| link | between | loopback (memory copy, no wire) |"), "{md}");
    assert!(md.contains("nas's CPU is the bottleneck"), "{md}");
    let plain = render(Format::Table, &["far-disk-bound"], Style::default());
    assert!(plain.contains("reads from nas's own disk (loop1)"), "{plain}");
    assert!(plain.lines().any(|l| l.starts_with("disk  nas") && l.contains("loop1")), "{plain}");
    let html = render(Format::Html, &["far-disk-bound"], Style::default());
    assert!(html.contains("<th>on</th>") && html.contains(">nas<"), "the HTML chain has the machine column");
    // A document without a far end keeps the chain it had.
    let md = render(Format::Markdown, &["link-bound"], Style::default());
    assert!(md.contains("| hop | what | ceiling | measured | of ceiling |") && !md.contains("| on |"), "{md}");
}

/// The verdict's sentences are said once in the HTML: in the verdict box as
/// text; the path picture above it names only the direction.
#[test]
fn html_says_the_verdict_once() {
    for name in ["link-bound", "disk-bound", "cache", "far-disk-bound"] {
        let html = render(Format::Html, &[name], Style::default());
        let view = &Report::new(vec![fixture(name)]).results[0];
        assert!(!view.directions.is_empty(), "{name} has a verdict");
        for v in &view.directions {
            let mut sentences = vec![v.explanation.clone()];
            sentences.extend(v.headroom.clone());
            for s in sentences {
                // Cut at the first character HTML escapes, so the text matches as written.
                let plain: String = s.chars().take_while(|c| !"<>&'\"".contains(*c)).take(40).collect();
                assert_eq!(html.matches(&plain).count(), 1, "{name}: {plain:?}");
            }
        }
    }
}

#[test]
fn settings_not_measured_alike_follow_the_comparison_in_every_text_format() {
    let before = fixture("compare-before");
    let mut after = fixture("compare-after");
    let headroom_result::ProbeSpec::Disk(spec) = &mut after.0.probes[0].spec else { panic!("a disk probe") };
    spec.block_size = 4 << 20;
    let report = Report::new(vec![before, after]);
    let item = "seq1m-q8t1-read block_size: before-10gbe = 1048576; after-10gbe = 4194304";
    for (format, shown) in [
        (Format::Table, format!("  {item}")),
        (Format::Markdown, format!("- {item}")),
        (Format::Html, format!("<li>{item}</li>")),
    ] {
        let text = presenter(format).render(&report, Style::default());
        let listed = text.find(&shown).unwrap_or_else(|| panic!("{format:?} lists the setting:\n{text}"));
        let heading = text.find("measured differently (ratios across these are not like for like):").unwrap();
        assert!(heading < listed, "{format:?}");
    }
}
