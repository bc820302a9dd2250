//! Escaping text into HTML and SVG markup: shared by the HTML presenter and
//! every chart, so the charts need nothing from the presenter that embeds them.

/// Escapes text for HTML or SVG element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out += "&amp;",
            '<' => out += "&lt;",
            '>' => out += "&gt;",
            '"' => out += "&quot;",
            '\'' => out += "&#39;",
            c => out.push(c),
        }
    }
    out
}

/// Text for an SVG: escaped, and every control character (a label holding
/// `ESC[2J`) made U+FFFD, since XML allows none and a browser would show a
/// parse error instead of the picture.
pub fn xml_text(s: &str) -> String {
    escape(&crate::terminal_safe(s, false))
}

/// A standalone SVG document `width` wide and `height` high around `body`
/// (already markup), on white, titled `title` (plain text).
pub fn svg_document(class: &str, width: f64, height: f64, title: &str, body: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{class}\" width=\"{width}\" height=\"{height}\" \
viewBox=\"0 0 {width} {height}\" font-family=\"system-ui, -apple-system, 'Segoe UI', sans-serif\" role=\"img\">\
<title>{}</title><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>{body}</svg>\n",
        xml_text(title)
    )
}
