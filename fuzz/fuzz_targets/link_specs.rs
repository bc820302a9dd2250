//! `--link` and `headroom link` specs: a catalog name or a rate. Neither the
//! lookup nor the spec parser may panic, and an accepted spec has a finite,
//! positive rate.
#![no_main]

use headroom_analysis::LinkSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the entry point, so each input costs one lookup
    // (an unknown name's suggestions dominate the time) and the fuzzer still
    // learns both: `headroom link NAME` and `--link SPEC`.
    let Some((&choice, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    if choice & 1 == 0 {
        if let Ok(link) = headroom_limits::lookup(text) {
            assert!(link.usable_bits_per_sec.is_finite() && link.usable_bits_per_sec > 0.0);
        }
    } else if let Ok(spec) = LinkSpec::parse(text) {
        assert!(spec.usable_bits_per_sec.is_finite() && spec.usable_bits_per_sec > 0.0, "{text:?}: {spec:?}");
    }
});
