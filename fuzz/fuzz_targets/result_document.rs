//! Result documents from outside (`report`, `compare`): loading and
//! validation must not panic, and every document that loads must render in
//! every format and compare with itself without panicking, and what it prints
//! through `terminal_safe` holds no control character but colour (SGR).
#![no_main]

use headroom_report::{presenter, terminal_safe, Format, Report, ResultView, Style};
use headroom_result::ResultDoc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = ResultDoc::from_reader(data) else { return };
    let docs = vec![doc.clone(), doc.clone()];
    let names = vec!["a".to_string(), "b".to_string()];
    let comparison = headroom_analysis::compare(&docs, &names).ok();
    let mut report = Report::single(ResultView::new(doc, "fuzz"));
    report.comparison = comparison;
    // Colour on: what reaches the terminal is the presenter's text through
    // terminal_safe, whose only escape sequences may be the presenters' SGR.
    let style = Style { color: true, iec: true };
    for format in [Format::Table, Format::Markdown, Format::Csv, Format::Json, Format::Html] {
        let text = presenter(format).render(&report, style);
        let shown = terminal_safe(&text, true);
        let mut rest: &str = &shown;
        while let Some(at) = rest.find(|c: char| c.is_control() && c != '\n' && c != '\t') {
            let sgr = rest[at..].strip_prefix("\x1b[").and_then(|s| {
                let n = s.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
                s[n..].starts_with('m').then_some(n + 3)
            });
            let len = sgr.unwrap_or_else(|| panic!("{format:?}: a control character reached the terminal: {shown:?}"));
            rest = &rest[at + len..];
        }
    }
});
