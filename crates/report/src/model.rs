//! What a report shows: each result document with its analysis (the stored
//! verdict when the document has one, else a fresh analysis), the goals held
//! against it, and the comparison when there are several documents.

use headroom_analysis::GoalResult;
use headroom_analysis::{annotate, verdict_source, DirectionVerdict, PathHints, VerdictSource};
use headroom_analysis::{compare, CompareError, Comparison};
use headroom_result::{Ceiling, ResultDoc};

/// One document and what analysis says about it.
#[derive(Debug, Clone)]
pub struct ResultView {
    /// Column name: the document's label, else the name the caller gave (file name).
    pub name: String,
    /// The document as loaded, plus the ceilings and verdict [`ResultView::new`]
    /// adds when it had no stored verdict (so JSON output carries them).
    pub doc: ResultDoc,
    /// Ceilings of every hop, bytes/s: the document's own when it has a
    /// stored verdict or is a soak, else freshly derived.
    pub ceilings: Vec<Ceiling>,
    /// Per-direction verdicts (reads first); empty for a soak, or when the
    /// document has no disk or TCP figure to judge.
    pub directions: Vec<DirectionVerdict>,
    /// Goals held against the document; empty from [`ResultView::new`],
    /// filled by `headroom run --goal` before presenting.
    pub goals: Vec<GoalResult>,
}

impl ResultView {
    /// Uses the verdict stored in the document (it knew the `--link` given at
    /// run time); analyses afresh when the document has none. A soak gets no
    /// verdict (`sections::soak_findings` leads its report instead), nor does
    /// a fleet (`present::fleet` shows its hosts, each with its own).
    pub fn new(mut doc: ResultDoc, fallback_name: &str) -> Self {
        let (ceilings, directions) = match verdict_source(&doc) {
            VerdictSource::NotJudged => (doc.ceilings.clone(), Vec::new()),
            VerdictSource::Stored(directions) => (doc.ceilings.clone(), directions.to_vec()),
            // The document gains the ceilings and verdict, so JSON output carries them too.
            VerdictSource::ToJudge => match annotate(&mut doc, &PathHints::default()) {
                Ok(a) => (a.model.ceilings, a.directions),
                Err(_) => (doc.ceilings.clone(), Vec::new()),
            },
        };
        let name = doc.label.clone().unwrap_or_else(|| fallback_name.to_string());
        ResultView { name, doc, ceilings, directions, goals: Vec::new() }
    }
}

/// Everything a presenter needs.
#[derive(Debug, Clone)]
pub struct Report {
    /// The documents in the order given; the first is the comparison's baseline.
    pub results: Vec<ResultView>,
    /// Present when there are two or more results with figures in common.
    pub comparison: Option<Comparison>,
    /// Why there is no comparison though there are several results.
    pub comparison_error: Option<CompareError>,
    /// Terminal columns to draw the hop chain as bars in (the table format);
    /// None: no bars (piped output, or a caller that did not ask).
    pub bar_width: Option<usize>,
}

impl Report {
    /// Builds a report of `docs`, named by label or by `names` (e.g. file names).
    pub fn new(docs: Vec<(ResultDoc, String)>) -> Self {
        let names: Vec<String> = docs.iter().map(|(_, n)| n.clone()).collect();
        let raw: Vec<ResultDoc> = docs.iter().map(|(d, _)| d.clone()).collect();
        let (comparison, comparison_error) = if raw.len() >= 2 {
            match compare(&raw, &names) {
                Ok(c) => (Some(c), None),
                Err(e) => (None, Some(e)),
            }
        } else {
            (None, None)
        };
        let results = docs.into_iter().map(|(d, n)| ResultView::new(d, &n)).collect();
        Report { results, comparison, comparison_error, bar_width: None }
    }

    /// The same report with the hop chain drawn as bars for a terminal
    /// `width` columns wide (none below 80 columns).
    pub fn with_bars(mut self, width: Option<usize>) -> Self {
        self.bar_width = width;
        self
    }

    /// A report of one document whose analysis and goals the caller already has.
    pub fn single(view: ResultView) -> Self {
        Report { results: vec![view], comparison: None, comparison_error: None, bar_width: None }
    }
}
