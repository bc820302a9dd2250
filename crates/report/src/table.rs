//! A plain table every text format renders its own way: aligned columns for
//! the terminal, pipes for Markdown, quoted fields for CSV. Hand-written
//! because all three renderings are a few lines each.

use owo_colors::OwoColorize;

/// How a cell should stand out when colour is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tone {
    /// No emphasis in any format.
    #[default]
    Plain,
    /// Green on the terminal (a goal met, a figure near its ceiling); plain in Markdown.
    Good,
    /// Bold red on the terminal, bold in Markdown (a missed goal, a limit).
    Bad,
    /// Yellow on the terminal (something to look at); plain in Markdown.
    Warn,
    /// Bold on the terminal and in Markdown (titles, headers, key figures).
    Bold,
}

/// One table cell: text already formatted with its unit, and how it stands out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cell {
    /// What the cell shows, as printed (e.g. "1.2 GB/s"); no markup, every
    /// format escapes it its own way.
    pub text: String,
    /// Emphasis; CSV drops it.
    pub tone: Tone,
}

impl Cell {
    /// A plain cell.
    pub fn new(text: impl Into<String>) -> Self {
        Cell { text: text.into(), tone: Tone::Plain }
    }
    /// A cell with emphasis.
    pub fn tone(text: impl Into<String>, tone: Tone) -> Self {
        Cell { text: text.into(), tone }
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::new(s)
    }
}
impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::new(s)
    }
}

/// A titled grid of cells that the terminal, Markdown and CSV presenters render.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    /// Printed above the table (bold on the terminal and in Markdown); empty
    /// for none. CSV leaves it out.
    pub title: String,
    /// Column names; their count sets how many columns the terminal and
    /// Markdown show (extra cells in a row are dropped, missing ones blank).
    pub headers: Vec<String>,
    /// The body, one `Vec` per line, cells in header order. CSV writes each
    /// row as it is, without padding or cutting it to the header count.
    pub rows: Vec<Vec<Cell>>,
    /// Columns to right-align (numbers).
    pub right: Vec<usize>,
}

impl Table {
    /// An empty table with a title and column names, every column left-aligned.
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Self {
        Table { title: title.into(), headers: headers.iter().map(|h| h.to_string()).collect(), ..Default::default() }
    }

    /// Appends one row of cells, in header order.
    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// Aligned columns; tones become ANSI colours when `color`.
    pub fn to_terminal(&self, color: bool) -> String {
        let cols = self.headers.len();
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.text.chars().count());
            }
        }
        let pad = |i: usize, text: &str| {
            let n = width[i].saturating_sub(text.chars().count());
            if self.right.contains(&i) {
                format!("{}{text}", " ".repeat(n))
            } else {
                format!("{text}{}", " ".repeat(n))
            }
        };
        let mut out = String::new();
        if !self.title.is_empty() {
            out += &paint(&self.title, Tone::Bold, color);
            out.push('\n');
        }
        let header: Vec<String> = self.headers.iter().enumerate().map(|(i, h)| pad(i, h)).collect();
        out += &paint(header.join("  ").trim_end(), Tone::Bold, color);
        out.push('\n');
        for r in &self.rows {
            let line: Vec<String> = (0..cols)
                .map(|i| {
                    let c = r.get(i).cloned().unwrap_or_default();
                    paint(&pad(i, &c.text), c.tone, color)
                })
                .collect();
            out += line.join("  ").trim_end();
            out.push('\n');
        }
        out
    }

    /// A GitHub/Discourse-flavoured Markdown table (pipes escaped).
    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|").replace('*', "\\*");
        let mut out = String::new();
        if !self.title.is_empty() {
            out += &format!("**{}**\n\n", esc(&self.title));
        }
        out += &format!("| {} |\n", self.headers.iter().map(|h| esc(h)).collect::<Vec<_>>().join(" | "));
        let rule: Vec<&str> =
            (0..self.headers.len()).map(|i| if self.right.contains(&i) { "---:" } else { "---" }).collect();
        out += &format!("| {} |\n", rule.join(" | "));
        for r in &self.rows {
            let cells: Vec<String> = (0..self.headers.len())
                .map(|i| {
                    let c = r.get(i).cloned().unwrap_or_default();
                    if c.tone == Tone::Bad || c.tone == Tone::Bold {
                        format!("**{}**", esc(&c.text))
                    } else {
                        esc(&c.text)
                    }
                })
                .collect();
            out += &format!("| {} |\n", cells.join(" | "));
        }
        out
    }

    /// RFC 4180 CSV: a header line, then one line per row.
    pub fn to_csv(&self) -> String {
        let field = |s: &str| {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut out = self.headers.iter().map(|h| field(h)).collect::<Vec<_>>().join(",");
        out.push('\n');
        for r in &self.rows {
            out += &r.iter().map(|c| field(&c.text)).collect::<Vec<_>>().join(",");
            out.push('\n');
        }
        out
    }
}

/// Colours a text by tone (green good, red bad, yellow warn, bold).
pub fn paint(text: &str, tone: Tone, color: bool) -> String {
    if !color {
        return text.to_string();
    }
    match tone {
        Tone::Plain => text.to_string(),
        Tone::Good => text.green().to_string(),
        Tone::Bad => text.red().bold().to_string(),
        Tone::Warn => text.yellow().to_string(),
        Tone::Bold => text.bold().to_string(),
    }
}

/// `s` cut to `n` characters, the last one an ellipsis when cut, so a
/// long cell keeps its column.
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new("T", &["probe", "rate"]);
        t.right = vec![1];
        t.row(vec!["a|b".into(), "1.0 MB/s".into()]);
        t.row(vec!["say \"hi\", ok".into(), Cell::tone("22.00 MB/s", Tone::Bad)]);
        t
    }

    #[test]
    fn renders_three_ways() {
        let t = sample();
        let term = t.to_terminal(false);
        assert!(term.contains("a|b             1.0 MB/s"), "{term}");
        assert!(!term.contains('\x1b'));
        assert!(t.to_terminal(true).contains('\x1b'));
        let md = t.to_markdown();
        assert!(
            md.contains("| a\\|b | 1.0 MB/s |") && md.contains("| --- | ---: |") && md.contains("**22.00 MB/s**"),
            "{md}"
        );
        assert_eq!(t.to_csv(), "probe,rate\na|b,1.0 MB/s\n\"say \"\"hi\"\", ok\",22.00 MB/s\n");
    }

    #[test]
    fn truncate_keeps_the_width() {
        assert_eq!(truncate("8b/10b", 40), "8b/10b");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abcd", 4), "abcd");
    }
}
