//! ESXi vmkernel.log and kernel log lines (read by `soak --vmkernel-log` and
//! the link watcher): the line parsers must not panic on any text, and a
//! parsed event has a finite time.
#![no_main]

use headroom_analysis::detect::{parse_kernel_log_line, parse_vmkernel_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        if let Some(event) = parse_vmkernel_line(line) {
            assert!(event.t_s.is_finite(), "{line:?}: {event:?}");
        }
        let _ = parse_kernel_log_line(line);
    }
});
