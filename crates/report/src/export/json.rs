//! JSON: one document. A single result is the result document itself (with
//! its ceilings and verdict); several are `{"results": [...], "comparison": ...}`.

use crate::model::Report;
use crate::{Presenter, Style};

/// `--format json`: one result document as it is, or for several
/// `{results, comparison, comparison_error}`.
pub struct JsonPresenter;

impl Presenter for JsonPresenter {
    fn render(&self, report: &Report, _style: Style) -> String {
        let docs: Vec<&headroom_result::ResultDoc> = report.results.iter().map(|v| &v.doc).collect();
        let value = if docs.len() == 1 && report.comparison.is_none() {
            serde_json::to_value(docs[0])
        } else {
            serde_json::to_value(serde_json::json!({
                "results": docs,
                "comparison": report.comparison,
                "comparison_error": report.comparison_error.as_ref().map(|e| e.to_string()),
            }))
        };
        serde_json::to_string_pretty(&value.expect("documents serialise")).expect("values serialise") + "\n"
    }
}
