//! `report --png`: an SVG picture rendered to PNG by headless chromium, the
//! browser the HTML report is checked in. headroom draws no pixels itself;
//! chromium's renderer is the one users see the SVG in anyway.
//!
//! The SVG and chromium's profile live in a temporary directory that is
//! removed on success, on error and on Ctrl-C.

use anyhow::{bail, Context};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Longest chromium may take to draw one picture.
const LIMIT: Duration = Duration::from_secs(90);

/// Whether a `chromium` executable is on $PATH: checked before anything
/// is measured or written, so a missing browser is one line up front.
pub fn chromium_on_path() -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .any(|d| std::fs::metadata(d.join(CHROMIUM)).is_ok_and(|m| crate::os::is_executable(&m)))
    })
}

/// The browser's program name (Debian's package).
const CHROMIUM: &str = "chromium";

/// The `width` and `height` attributes of an SVG's root element, px.
fn svg_size(svg: &str) -> Option<(u32, u32)> {
    let root = &svg[svg.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let attr = |name: &str| -> Option<u32> {
        let start = root.find(&format!(" {name}=\""))? + name.len() + 3;
        let value = &root[start..];
        value[..value.find('"')?].parse::<f64>().ok().map(|v| v.ceil() as u32)
    };
    Some((attr("width")?, attr("height")?))
}

/// Writes `svg` as a PNG of its own size to `out`.
pub fn svg_to_png(svg: &str, out: &Path) -> anyhow::Result<()> {
    let (width, height) = svg_size(svg).context("--png: the picture has no size")?;
    let stop = crate::signals::stop_flag();
    let dir = tempfile::Builder::new()
        .prefix("headroom-png-")
        .tempdir()
        .context("--png: cannot make a temporary directory")?;
    let page = dir.path().join("path.svg");
    let shot = dir.path().join("path.png");
    std::fs::write(&page, svg).with_context(|| format!("--png: cannot write {}", page.display()))?;
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", dir.path().join("profile").display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("--png: cannot start chromium")?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().context("--png: waiting for chromium")? {
            break status;
        }
        if stop.load(Ordering::SeqCst) || start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            if stop.load(Ordering::SeqCst) {
                bail!("--png: stopped");
            }
            bail!("--png: chromium did not draw the picture within {} s", LIMIT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let png = std::fs::read(&shot).unwrap_or_default();
    if !status.success() || !png.starts_with(b"\x89PNG\r\n\x1a\n") {
        bail!("--png: chromium drew no picture (it exited with {status}); --svg FILE writes the same picture as SVG");
    }
    std::fs::write(out, png).with_context(|| format!("--png {}: cannot write", out.display()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn size_comes_from_the_root_element() {
        let svg = "<svg xmlns=\"x\" class=\"p\" width=\"860\" height=\"512.5\"><rect width=\"1\" height=\"2\"/></svg>";
        assert_eq!(super::svg_size(svg), Some((860, 513)));
        assert_eq!(super::svg_size("<svg>"), None);
    }
}
