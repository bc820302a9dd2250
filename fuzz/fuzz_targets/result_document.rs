//! Result documents from outside (`report`, `compare`): loading and
//! validation must not panic, and every document that loads must render in
//! every format and compare with itself without panicking or printing a
//! control character to the terminal.
#![no_main]

use headroom_report::{presenter, Format, Report, ResultView, Style};
use headroom_result::ResultDoc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = ResultDoc::from_reader(data) else { return };
    let docs = vec![doc.clone(), doc.clone()];
    let names = vec!["a".to_string(), "b".to_string()];
    let comparison = headroom_analysis::compare::compare(&docs, &names).ok();
    let mut report = Report::single(ResultView::new(doc, "fuzz"));
    report.comparison = comparison;
    let style = Style { color: false, iec: true };
    for format in [Format::Table, Format::Markdown, Format::Csv, Format::Json, Format::Html] {
        let text = presenter(format).render(&report, style);
        if format == Format::Table {
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "a control character reached the terminal: {text:?}"
            );
        }
    }
});
