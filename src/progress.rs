//! Live progress bars for probes longer than a second: a bar on stderr with
//! the current figure, drawn only when stderr is a terminal. Engines report
//! to the Runner, the Runner to [`ProgressSink`]; only this module knows
//! indicatif.

use headroom_runner::{EngineKind, Expected, LiveSample, Plan, PrepareEvent, ProbeRequest, ProbeRun, Sink};
use headroom_units::format_size;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// A bar over a known duration, or a spinner when the length is unknown.
pub struct ProbeBar {
    bar: ProgressBar,
}

impl ProbeBar {
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
        ProbeBar { bar }
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

/// The Runner's progress sink: a bar per disk or network probe, one bar over
/// all of a plan's CPU kernels (each takes a fraction of a second), and a
/// spinner while a test file is laid out.
pub struct ProgressSink {
    enabled: bool,
    iec: bool,
    bar: Option<ProbeBar>,
    layout: Option<ProbeBar>,
    cpu: Option<KernelsBar>,
    cpu_total: usize,
    cpu_expected: Duration,
}

/// The one bar over a plan's CPU kernels.
struct KernelsBar {
    bar: ProbeBar,
    start: std::time::Instant,
    done: usize,
    last_bytes_per_sec: Option<f64>,
}

impl ProgressSink {
    /// Bars for `plan`, drawn only when `enabled` (and stderr is a terminal).
    pub fn new(enabled: bool, iec: bool, plan: &Plan) -> Self {
        let cpu: Vec<&ProbeRequest> = plan.requests.iter().filter(|r| r.engine == EngineKind::Cpu).collect();
        let cpu_expected = cpu
            .iter()
            .map(|r| match r.expected {
                Expected::About(d) => d,
                _ => Duration::ZERO,
            })
            .sum();
        ProgressSink { enabled, iec, bar: None, layout: None, cpu: None, cpu_total: cpu.len(), cpu_expected }
    }

    fn update_kernels(&mut self, label: &str) {
        let total = self.cpu_total;
        let (enabled, expected) = (self.enabled, self.cpu_expected);
        let k = self.cpu.get_or_insert_with(|| KernelsBar {
            bar: ProbeBar::new(enabled, "cpu", Some(expected)),
            start: std::time::Instant::now(),
            done: 0,
            last_bytes_per_sec: None,
        });
        let last = k
            .last_bytes_per_sec
            .map(|b| format!(" (last {})", headroom_units::format_rate_cell(b)))
            .unwrap_or_default();
        k.bar.update(k.start.elapsed(), &format!("{}/{total} {label}{last}", k.done));
    }
}

impl Sink for ProgressSink {
    fn prepared(&mut self, event: &PrepareEvent) {
        if let PrepareEvent::Progress { what, done, total } = event {
            let enabled = self.enabled;
            let bar = self.layout.get_or_insert_with(|| ProbeBar::new(enabled, what, None));
            bar.update(Duration::ZERO, &format!("{} of {}", format_size(*done), format_size(*total)));
            if done == total {
                if let Some(bar) = self.layout.take() {
                    bar.finish();
                }
            }
        }
    }

    fn probe_started(&mut self, _index: usize, request: &ProbeRequest) {
        if let Some(bar) = self.layout.take() {
            bar.finish();
        }
        if request.engine == EngineKind::Cpu {
            self.update_kernels(&request.label);
            return;
        }
        self.bar = match request.expected {
            Expected::About(d) => Some(ProbeBar::new(self.enabled, &request.label, Some(d))),
            Expected::Unknown => Some(ProbeBar::new(self.enabled, &request.label, None)),
            Expected::Instant => None,
        };
    }

    fn sample(&mut self, _index: usize, request: &ProbeRequest, s: &LiveSample) {
        let Some(bar) = &self.bar else { return };
        let figure = match request.engine {
            EngineKind::Disk => {
                let phase = if s.ramping { " (warm-up)" } else { "" };
                format!("{:.1} MB/s  {:.0} IOPS{phase}", s.bytes_per_sec / 1e6, s.iops.unwrap_or(0.0))
            }
            EngineKind::Net => match s.latency_ns_mean {
                Some(ns) => format!("{:.0} us", ns / 1e3),
                None => headroom_units::format_rate(s.bytes_per_sec * 8.0, self.iec),
            },
            EngineKind::Cpu => return,
        };
        bar.update(s.elapsed, &figure);
    }

    fn probe_finished(&mut self, _index: usize, run: &ProbeRun) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
        if run.request.engine == EngineKind::Cpu {
            if let Some(k) = &mut self.cpu {
                k.done += 1;
                k.last_bytes_per_sec = run.probe().map(|p| p.summary.bytes_per_sec).or(k.last_bytes_per_sec);
            }
            if self.cpu.as_ref().is_some_and(|k| k.done == self.cpu_total) {
                self.update_kernels("done");
                if let Some(k) = self.cpu.take() {
                    k.bar.finish();
                }
            }
        }
    }
}

impl Drop for ProgressSink {
    fn drop(&mut self) {
        for bar in [self.bar.take(), self.layout.take(), self.cpu.take().map(|k| k.bar)].into_iter().flatten() {
            bar.finish();
        }
    }
}
