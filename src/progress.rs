//! Live progress bars for probes longer than a second: a bar on stderr with
//! the current figure, drawn only when stderr is a terminal. Engines report
//! through a plain callback; only this module knows indicatif.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// A bar over a known duration, or a spinner when the length is unknown.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for one probe named `label` that runs about `expected`.
    pub fn new(enabled: bool, label: &str, expected: Option<Duration>) -> Self {
        let bar = match expected {
            Some(d) => ProgressBar::new(d.as_millis().max(1) as u64),
            None => ProgressBar::new_spinner(),
        };
        if enabled {
            bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        } else {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        let template =
            if expected.is_some() { "{prefix:>22.bold} [{bar:30}] {msg}" } else { "{prefix:>22.bold} {spinner} {msg}" };
        bar.set_style(ProgressStyle::with_template(template).expect("static template").progress_chars("=> "));
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress { bar }
    }

    /// Moves the bar to `elapsed` and shows `figure` (e.g. "941.5 Mb/s (117.7 MB/s)").
    pub fn update(&self, elapsed: Duration, figure: &str) {
        self.bar.set_position(elapsed.as_millis() as u64);
        self.bar.set_message(figure.to_string());
    }

    /// Removes the bar from the terminal.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
