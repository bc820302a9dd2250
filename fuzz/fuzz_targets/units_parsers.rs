//! The parsers of values users type: sizes, rates, durations and `--goal`
//! lists. None may panic; whatever they accept must be finite, formattable,
//! and (durations) read back as the same value.
#![no_main]

use headroom_units::{format_duration, format_rate, format_size, parse_duration, parse_rate, parse_size};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(bytes) = parse_size(text) {
        assert!(!format_size(bytes).is_empty());
    }
    if let Ok(bits) = parse_rate(text) {
        assert!(bits.is_finite() && bits >= 0.0, "parse_rate({text:?}) = {bits}");
        assert!(!format_rate(bits, true).contains("inf"));
    }
    if let Ok(d) = parse_duration(text) {
        let shown = format_duration(d);
        let back = parse_duration(&shown).unwrap_or_else(|e| panic!("{text:?} -> {shown:?} does not parse: {e}"));
        let diff = back.abs_diff(d).as_secs_f64();
        assert!(diff <= d.as_secs_f64() * 1e-12 + 1e-9, "{text:?} -> {d:?} -> {shown:?} -> {back:?}");
    }
    if let Ok(goals) = headroom_analysis::parse_goals(text) {
        for g in goals {
            assert!(g.target.is_finite() && g.target > 0.0);
        }
    }
});
