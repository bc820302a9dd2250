//! Presenters: one result document (or several) shown as a terminal table,
//! a Markdown table for a forum post, CSV, JSON, or a self-contained HTML
//! report with inline SVG charts.
//!
//! Every format lives in its own file under `export/` behind the one small
//! [`Presenter`] trait (in the spirit of hyperfine's `export/` folder). The
//! tables all formats share are built once in [`sections`]. Presenters read
//! only result documents and the analysis of them; they do no I/O — callers
//! write the returned text wherever it goes.

pub mod charts;
pub mod export;
pub mod model;
pub mod sections;
pub mod table;

pub use export::{presenter, Format};
pub use model::{Report, ResultView};

/// How figures are shown, from the global flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// ANSI colour (terminal only).
    pub color: bool,
    /// Also show IEC units (MiB/s).
    pub iec: bool,
}

/// One output format.
pub trait Presenter {
    /// Renders the whole report as text (UTF-8).
    fn render(&self, report: &Report, style: Style) -> String;
}
