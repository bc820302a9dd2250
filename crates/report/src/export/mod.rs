//! One file per output format, each a [`Presenter`](crate::Presenter).

mod csv;
pub(crate) mod html;
mod json;
mod markdown;
mod terminal;

pub use self::csv::CsvPresenter;
pub use self::html::HtmlPresenter;
pub use self::json::JsonPresenter;
pub use self::markdown::MarkdownPresenter;
pub use self::terminal::TerminalPresenter;

use crate::Presenter;

/// The formats `--format` accepts (HTML is written with `--html FILE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a terminal (also accepted as `terminal`, `text`).
    Table,
    /// Markdown tables (also `md`).
    Markdown,
    /// CSV of raw numbers.
    Csv,
    /// JSON of the documents and the comparison.
    Json,
    /// A self-contained HTML page.
    Html,
}

impl Format {
    /// The names `--format` accepts, for help and errors.
    pub const NAMES: &'static str = "table, markdown, csv, json, html";

    /// A `--format` value, any case; None for a name not in [`Format::NAMES`]
    /// or its aliases (the caller names the flag in the error).
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s.to_ascii_lowercase().as_str() {
            "table" | "terminal" | "text" => Format::Table,
            "markdown" | "md" => Format::Markdown,
            "csv" => Format::Csv,
            "json" => Format::Json,
            "html" => Format::Html,
            _ => return None,
        })
    }
}

/// The presenter of a format.
pub fn presenter(format: Format) -> Box<dyn Presenter> {
    match format {
        Format::Table => Box::new(TerminalPresenter),
        Format::Markdown => Box::new(MarkdownPresenter),
        Format::Csv => Box::new(CsvPresenter),
        Format::Json => Box::new(JsonPresenter),
        Format::Html => Box::new(HtmlPresenter),
    }
}
