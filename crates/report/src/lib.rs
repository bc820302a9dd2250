//! Presenters: one result document (or several) shown as a terminal table,
//! a Markdown table for a forum post, CSV, JSON, or a self-contained HTML
//! report with inline SVG charts.
//!
//! Every format lives in its own file under `export/` behind the one small
//! [`Presenter`] trait (in the spirit of hyperfine's `export/` folder). The
//! tables all formats share are built once in `sections.rs`. Presenters read
//! only result documents (`headroom-result`, which also holds what `cpu` and
//! `flushcheck` show) and the analysis of them, and name links from
//! `headroom-limits`, a table of facts; they import no engine and do no I/O —
//! callers write the returned text wherever it goes.

mod bars;
mod charts;
mod export;
mod heatmap;
mod latency_chart;
mod markup;
mod model;
mod paired;
mod path_chart;
pub mod present;
mod sections;
mod table;

/// The analysis crate's result fixtures, for this crate's unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use headroom_result::ResultDoc;

    /// `crates/analysis/tests/fixtures/NAME.json` and its name.
    pub fn fixture(name: &str) -> (ResultDoc, String) {
        let path = format!("{}/../analysis/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        (ResultDoc::from_json(&std::fs::read_to_string(path).unwrap()).unwrap(), name.to_string())
    }

    /// The same fixture analysed as a report would.
    pub fn view(name: &str) -> crate::ResultView {
        let (doc, name) = fixture(name);
        crate::ResultView::new(doc, &name)
    }
}

pub use export::{presenter, Format};
pub use model::{Report, ResultView};
pub use paired::paired_svg;
pub use path_chart::{missing as path_missing, path_svg};

/// How figures are shown, from the global flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// ANSI colour (terminal only).
    pub color: bool,
    /// Also show IEC units (MiB/s).
    pub iec: bool,
}

impl Style {
    /// Bold text when colour is on.
    pub fn bold(&self, s: &str) -> String {
        use owo_colors::OwoColorize;
        if self.color {
            s.bold().to_string()
        } else {
            s.to_string()
        }
    }
}

/// One output format.
pub trait Presenter {
    /// Renders the whole report as text (UTF-8).
    fn render(&self, report: &Report, style: Style) -> String;
}

/// Text that is safe to write to a terminal. Strings from outside (a result
/// file's label, a soak database, a peer's message) may hold control
/// characters: `ESC[2J` clears the screen, an OSC sequence sets the window
/// title or plants a hyperlink. Every control character (C0, DEL, C1) but
/// newline and tab becomes U+FFFD, one character for one so table alignment
/// holds. With `keep_colour`, SGR sequences (`ESC[...m`: colour and bold
/// only, which cannot move the cursor or talk to the terminal) are kept, as
/// the presenters paint with them.
pub fn terminal_safe(text: &str, keep_colour: bool) -> std::borrow::Cow<'_, str> {
    let clean = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if text.chars().all(clean) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if keep_colour && c == '\x1b' {
            let sgr_len = rest[1..]
                .strip_prefix('[')
                .and_then(|s| s.find(|c: char| !(c.is_ascii_digit() || c == ';')).filter(|&n| s[n..].starts_with('m')));
            if let Some(n) = sgr_len {
                let len = 1 + 1 + n + 1;
                out.push_str(&rest[..len]);
                rest = &rest[len..];
                continue;
            }
        }
        out.push(if clean(c) { c } else { '\u{fffd}' });
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod terminal_safe_tests {
    use super::terminal_safe;

    #[test]
    fn control_sequences_are_neutralised() {
        let hostile = "lab\x1b]0;pwned\x07\x1b[2J\u{9b}2J\r\nnext\tcol";
        assert_eq!(
            terminal_safe(hostile, false),
            "lab\u{fffd}]0;pwned\u{fffd}\u{fffd}[2J\u{fffd}2J\u{fffd}\nnext\tcol"
        );
        // Colour kept only as SGR: the clear-screen CSI is not one.
        assert_eq!(terminal_safe("\x1b[1mbold\x1b[0m\x1b[2J", true), "\x1b[1mbold\x1b[0m\u{fffd}[2J");
        assert!(matches!(terminal_safe("plain 941.5 Mb/s\n", false), std::borrow::Cow::Borrowed(_)));
    }
}
