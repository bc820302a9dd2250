//! Quantities users type and read: sizes, rates and durations.
//!
//! Owns the one convention every headroom command follows:
//! - sizes use dd's convention: `K`/`k`, `M`, `G`, `T`, `P` and `KiB`..`PiB` are
//!   powers of 1024; `kB`/`KB`, `MB`, `GB`, `TB`, `PB` are powers of 1000; a bare
//!   number is bytes;
//! - rates are stored as bits per second; `b` is a bit, `B` a byte; prefixes are
//!   SI (`k`, `M`, `G`, `T`) unless written `Ki`, `Mi`, `Gi`, `Ti`;
//! - throughput is printed in decimal units, in bits and bytes side by side.
//!
//! This crate does no I/O and knows nothing of links or probes. [`setting`]
//! holds the shape of messages that name a library's settings without
//! spelling them as flags.
//!
//! Long (about 520 lines) because each quantity's parser and formatter sit side by side with their
//! unit tests, so the convention above is checked where it is written.

pub mod setting;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Why a quantity could not be parsed. The message names the input, what was
/// wrong, and an example that would have worked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} '{input}': {reason} (examples: {examples})")]
pub struct UnitError {
    /// "size", "rate" or "duration".
    pub what: &'static str,
    /// The text exactly as the user typed it, quoted back in the message.
    pub input: String,
    /// What was wrong with `input`, in a few words (e.g. "too large").
    pub reason: String,
    /// Inputs of the same kind that parse, comma-separated, so the message
    /// always shows one that works.
    pub examples: &'static str,
}

const SIZE_EXAMPLES: &str = "4k = 4096, 1M = 1048576, 1MB = 1000000, 512KiB, 10GiB, 4096";
const RATE_EXAMPLES: &str = "1Gb/s, 1Gbps, 1gbit, 2.5GbE, 125MB/s, 800MiB/s";
const DURATION_EXAMPLES: &str = "500ms, 10s, 1m30s, 3h";

fn error(what: &'static str, input: &str, reason: impl Into<String>, examples: &'static str) -> UnitError {
    UnitError { what, input: input.to_string(), reason: reason.into(), examples }
}

/// The longest duration any flag takes: a year. Longer is a typo (`99999h`),
/// and would run until killed.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86400);

/// The highest rate any flag takes: 10^18 b/s, a million times any link.
pub const MAX_RATE_BITS_PER_SEC: f64 = 1e18;

/// Refuses a leading minus: no size, rate or duration is negative.
fn not_negative(input: &str, fail: impl Fn(&str) -> UnitError) -> Result<(), UnitError> {
    if input.trim_start().starts_with('-') {
        return Err(fail("negative; it must be 0 or more"));
    }
    Ok(())
}

/// Splits "12.5GiB" into (12.5, "GiB"). The number must be finite and >= 0.
fn split_number(input: &str) -> Option<(f64, &str)> {
    let s = input.trim();
    let end = s.char_indices().find(|(_, c)| !(c.is_ascii_digit() || *c == '.')).map(|(i, _)| i).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let value: f64 = s[..end].parse().ok()?;
    value.is_finite().then_some((value, s[end..].trim()))
}

/// Parses a size in bytes (dd convention, see the crate docs).
pub fn parse_size(input: &str) -> Result<u64, UnitError> {
    let fail = |reason: &str| error("size", input, reason, SIZE_EXAMPLES);
    not_negative(input, fail)?;
    let (value, suffix) = split_number(input).ok_or_else(|| fail("expected a number followed by an optional unit"))?;
    let multiplier: f64 = match suffix {
        "" | "B" | "b" => 1.0,
        "k" | "K" | "KiB" | "kiB" | "kib" | "KIB" => 1024.0,
        "m" | "M" | "MiB" | "mib" | "MIB" => 1024f64.powi(2),
        "g" | "G" | "GiB" | "gib" | "GIB" => 1024f64.powi(3),
        "t" | "T" | "TiB" | "tib" | "TIB" => 1024f64.powi(4),
        "p" | "P" | "PiB" | "pib" | "PIB" => 1024f64.powi(5),
        "kB" | "KB" | "kb" => 1e3,
        "MB" | "mB" | "mb" => 1e6,
        "GB" | "gB" | "gb" => 1e9,
        "TB" | "tB" | "tb" => 1e12,
        "PB" | "pB" | "pb" => 1e15,
        other => return Err(fail(&format!("unknown unit '{other}'"))),
    };
    let bytes = (value * multiplier).round();
    if bytes > u64::MAX as f64 {
        return Err(fail("too large"));
    }
    if value.fract() != 0.0 && multiplier == 1.0 {
        return Err(fail("a byte count must be a whole number"));
    }
    Ok(bytes as u64)
}

/// Parses a rate and returns bits per second.
pub fn parse_rate(input: &str) -> Result<f64, UnitError> {
    let fail = |reason: &str| error("rate", input, reason, RATE_EXAMPLES);
    not_negative(input, fail)?;
    let (value, rest) = split_number(input).ok_or_else(|| fail("expected a number followed by a unit"))?;
    if rest.is_empty() {
        return Err(fail("a rate needs a unit: b (bits) or B (bytes) per second"));
    }
    let (multiplier, unit) = split_rate_prefix(rest);
    let bits_per_unit = rate_unit_bits(unit).ok_or_else(|| fail(&format!("unknown unit '{rest}'")))?;
    let bits = value * multiplier * bits_per_unit;
    if !bits.is_finite() || bits > MAX_RATE_BITS_PER_SEC {
        return Err(fail("too large: at most 1e18 b/s"));
    }
    Ok(bits)
}

/// Takes the SI or IEC prefix off a rate unit: ("Mi", "B/s") -> (1048576, "B/s").
fn split_rate_prefix(unit: &str) -> (f64, &str) {
    let mut chars = unit.chars();
    let multiplier = match chars.next() {
        Some('k' | 'K') => 1e3,
        Some('m' | 'M') => 1e6,
        Some('g' | 'G') => 1e9,
        Some('t' | 'T') => 1e12,
        // The formatters reach P (a 1 Pb/s figure rounds up there), so what
        // they print must parse back.
        Some('p' | 'P') => 1e15,
        _ => return (1.0, unit),
    };
    let after = &unit[1..];
    // A bare "B"/"b" after a prefix letter would be ambiguous with words like
    // "bit"; the unit table sorts that out. Only "i" makes the prefix binary.
    if let Some(rest) = after.strip_prefix('i') {
        let binary = match multiplier as u64 {
            1_000 => 1024.0,
            1_000_000 => 1024f64.powi(2),
            1_000_000_000 => 1024f64.powi(3),
            1_000_000_000_000 => 1024f64.powi(4),
            _ => 1024f64.powi(5),
        };
        return (binary, rest);
    }
    (multiplier, after)
}

/// Bits in one unit of a rate (after its prefix): "b/s" -> 1, "B/s" -> 8.
fn rate_unit_bits(unit: &str) -> Option<f64> {
    match unit {
        "b/s" | "bps" | "b" | "bE" | "be" | "BE" | "Be" => Some(1.0),
        "B/s" | "Bps" | "B" => Some(8.0),
        _ => match unit.to_ascii_lowercase().as_str() {
            "bit" | "bits" | "bit/s" | "bits/s" | "bit/sec" => Some(1.0),
            "byte" | "bytes" | "byte/s" | "bytes/s" => Some(8.0),
            "gbe" => None,
            _ => None,
        },
    }
}

/// Parses a duration: `500ms`, `10s`, `1m30s`, `3h`, `2d`, `250us`; a bare number is seconds.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let fail = |reason: &str| error("duration", input, reason, DURATION_EXAMPLES);
    let mut rest = input.trim();
    if rest.is_empty() {
        return Err(fail("empty"));
    }
    not_negative(input, fail)?;
    let too_long = || fail("too long: at most 365d");
    if let Some((value, "")) = split_number(rest) {
        let d = Duration::try_from_secs_f64(value).map_err(|_| too_long())?;
        return if d <= MAX_DURATION { Ok(d) } else { Err(too_long()) };
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let (value, after) = split_number(rest).ok_or_else(|| fail("expected a number before each unit"))?;
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let seconds_per_unit = match &after[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" | "sec" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => return Err(fail("only the last part may omit its unit; write 1m30s")),
            other => return Err(fail(&format!("unknown unit '{other}' (use ns, us, ms, s, m, h, d)"))),
        };
        total += value * seconds_per_unit;
        rest = &after[unit_len..];
    }
    let d = Duration::try_from_secs_f64(total).map_err(|_| too_long())?;
    if d <= MAX_DURATION {
        Ok(d)
    } else {
        Err(too_long())
    }
}

/// A number scaled to an SI or IEC prefix with enough digits to read at a glance:
/// 941.5, 95.41, 9.541.
fn scaled(value: f64, base: f64, prefixes: &[&'static str]) -> (String, &'static str) {
    let mut v = value;
    let mut i = 0;
    while v.abs() >= base && i + 1 < prefixes.len() {
        v /= base;
        i += 1;
    }
    let decimals = if v.abs() >= 100.0 {
        1
    } else if v.abs() >= 10.0 {
        2
    } else {
        3
    };
    // Rounding may carry into the next prefix (999.96 -> "1000.0"): rescale once.
    let text = format!("{v:.decimals$}");
    if text.trim_start_matches('-').starts_with("1000") && i + 1 < prefixes.len() {
        return (format!("{:.3}", v / base), prefixes[i + 1]);
    }
    (text, prefixes[i])
}

const SI: &[&str] = &["", "k", "M", "G", "T", "P"];
const IEC: &[&str] = &["", "Ki", "Mi", "Gi", "Ti", "Pi"];

/// "941.5 Mb/s": a bit rate with an SI prefix.
pub fn format_bits(bits_per_sec: f64) -> String {
    let (n, p) = scaled(bits_per_sec, 1000.0, SI);
    format!("{n} {p}b/s")
}

/// "117.7 MB/s": a byte rate with an SI prefix.
pub fn format_bytes_per_sec(bytes_per_sec: f64) -> String {
    let (n, p) = scaled(bytes_per_sec, 1000.0, SI);
    format!("{n} {p}B/s")
}

/// "112.2 MiB/s": a byte rate with an IEC prefix.
pub fn format_bytes_per_sec_iec(bytes_per_sec: f64) -> String {
    let (n, p) = scaled(bytes_per_sec, 1024.0, IEC);
    format!("{n} {p}B/s")
}

/// The way every rate is shown to users: "941.5 Mb/s (117.7 MB/s)", or with
/// `iec` "941.5 Mb/s (117.7 MB/s, 112.2 MiB/s)".
pub fn format_rate(bits_per_sec: f64, iec: bool) -> String {
    let bytes = bits_per_sec / 8.0;
    if iec {
        format!("{} ({}, {})", format_bits(bits_per_sec), format_bytes_per_sec(bytes), format_bytes_per_sec_iec(bytes))
    } else {
        format!("{} ({})", format_bits(bits_per_sec), format_bytes_per_sec(bytes))
    }
}

/// "850 ns", "70.2 us", "1.23 ms", "2.00 s": a latency in nanoseconds for a
/// sentence or a wide column (three significant digits; negative values keep
/// their sign, for differences).
pub fn format_latency(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// "72.9ms", "90.0us", "2.00s": a latency for a narrow table column; "-" for
/// a value that is not a latency (negative, NaN).
pub fn format_latency_compact(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return "-".into();
    }
    if ns >= 1e9 {
        format!("{:.2}s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1}us", ns / 1e3)
    } else {
        format_duration(Duration::from_nanos(ns.round() as u64))
    }
}

/// "1.000 GiB", "4.000 KiB", "512 B": a size in IEC units.
pub fn format_size(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let (n, p) = scaled(bytes as f64, 1024.0, IEC);
    format!("{n} {p}B")
}

/// "12.00 GB (11.18 GiB)": a size in SI units with its IEC equivalent, as an
/// amount the user typed either way (`--bytes 12GB` or `12GiB`) reads back.
pub fn format_size_both(bytes: u64) -> String {
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let (n, p) = scaled(bytes as f64, 1000.0, SI);
    format!("{n} {p}B ({})", format_size(bytes))
}

/// "1m30s", "500ms", "3h", "2.500s": a duration in the units `parse_duration` reads.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        // Exact, so the text parses back to the same duration (940.7ms, not 940ms).
        let nanos = d.subsec_nanos();
        let (per_unit, digits, unit) = match nanos {
            1_000_000.. => (1_000_000, 6, "ms"),
            1_000.. => (1_000, 3, "us"),
            _ => return format!("{nanos}ns"),
        };
        let fraction = format!("{:0digits$}", nanos % per_unit);
        let fraction = fraction.trim_end_matches('0');
        let point = if fraction.is_empty() { "" } else { "." };
        return format!("{}{point}{fraction}{unit}", nanos / per_unit);
    }
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let seconds = if d.subsec_nanos() != 0 {
        let text = format!("{:.9}", s as f64 + f64::from(d.subsec_nanos()) * 1e-9);
        format!("{}s", text.trim_end_matches('0'))
    } else {
        format!("{s}s")
    };
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if m > 0 {
        out += &format!("{m}m");
    }
    if s > 0 || d.subsec_nanos() != 0 || out.is_empty() {
        out += &seconds;
    }
    out
}

// Fine forms: ping round trips, frame times, line rates.

/// "0.123 ms": a round trip as ping(8) prints it, always in milliseconds at
/// microsecond resolution, so a column of them lines up.
pub fn format_millis(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// "487.040 ns", "12.304 us", "1.230 ms": a span of seconds at three decimals
/// of its own unit, for frame times compared digit by digit.
pub fn format_span_fine(seconds: f64) -> String {
    if seconds < 1e-6 {
        format!("{:.3} ns", seconds * 1e9)
    } else if seconds < 1e-3 {
        format!("{:.3} us", seconds * 1e6)
    } else {
        format!("{:.3} ms", seconds * 1e3)
    }
}

/// "1.25 GBd", "125 MBd", "25.78125 GBd": a symbol rate as exact as the
/// standard states it (up to five decimals, trailing zeros dropped).
pub fn format_baud(baud: f64) -> String {
    let (v, unit) = if baud >= 1e9 { (baud / 1e9, "GBd") } else { (baud / 1e6, "MBd") };
    let text = format!("{v:.5}");
    format!("{} {unit}", text.trim_end_matches('0').trim_end_matches('.'))
}

/// "      941.48 Mb/s     117.69 MB/s     112.23 MiB/s": a rate in all three
/// units at two decimals, in fixed-width columns that line up row under row.
pub fn format_rate_columns(bits_per_sec: f64) -> String {
    format!(
        "{:>12.2} Mb/s {:>10.2} MB/s {:>10.2} MiB/s",
        bits_per_sec / 1e6,
        bits_per_sec / 8e6,
        bits_per_sec / 8.0 / 1_048_576.0
    )
}

// Table cells of `cpu` and `sys`.

/// "1905 MB/s   15.2 Gb/s": a byte rate as a fixed-width table cell (MB/s
/// without decimals, Gb/s with one), so a column of them lines up.
pub fn format_rate_cell(bytes_per_sec: f64) -> String {
    format!("{:>6.0} MB/s {:>6.1} Gb/s", bytes_per_sec / 1e6, bytes_per_sec * 8.0 / 1e9)
}

/// "1.90 GB/s", "941 MB/s": a byte rate in a sentence, as few digits as
/// read well (three significant digits above 1 GB/s, whole MB/s below).
pub fn format_bytes_per_sec_short(bytes_per_sec: f64) -> String {
    if bytes_per_sec >= 1e9 {
        format!("{:.2} GB/s", bytes_per_sec / 1e9)
    } else {
        format!("{:.0} MB/s", bytes_per_sec / 1e6)
    }
}

/// "64 MiB", "256 KiB", "1.5 GiB": a size for a title, whole units without
/// decimals (where [`format_size`] keeps four digits).
pub fn format_size_compact(bytes: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if bytes >= unit {
            let value = bytes as f64 / unit as f64;
            return if bytes.is_multiple_of(unit) {
                format!("{value:.0} {name}")
            } else {
                format!("{value:.1} {name}")
            };
        }
    }
    format!("{bytes} B")
}

/// "4", "7.88", "0.48": a figure with at most `decimals` decimals and no
/// trailing zeros (GT/s of a PCIe link, Gb/s of a SATA link).
pub fn format_trimmed(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A size typed on the command line, in bytes. Implements `FromStr` for clap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl FromStr for Size {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_size(s).map(Size)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

/// A rate typed on the command line, in bits per second. Implements `FromStr` for clap.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Rate(pub f64);

impl Rate {
    /// iperf3's `-b` spelling (`100M` = 100 Mb/s: a bare number with an
    /// optional k/M/G/T suffix is bits per second) as well as headroom's rate
    /// syntax (`100Mb/s`, `12.5MB/s`), so users can keep the flag value they
    /// know.
    pub fn parse_iperf_style(text: &str) -> Result<Rate, UnitError> {
        let t = text.trim();
        let (num, mult) = match t.char_indices().last() {
            Some((i, c)) if "kKmMgGtT".contains(c) => (
                &t[..i],
                match c.to_ascii_lowercase() {
                    'k' => 1e3,
                    'm' => 1e6,
                    'g' => 1e9,
                    _ => 1e12,
                },
            ),
            _ => (t, 1.0),
        };
        match num.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(Rate(v * mult)),
            _ => t.parse::<Rate>(),
        }
    }

    /// The rate in bits per second, as stored (decimal: 1 Gb/s = 1e9).
    pub fn bits_per_sec(self) -> f64 {
        self.0
    }
    /// The rate in bytes per second (bits / 8), for comparing with byte counters.
    pub fn bytes_per_sec(self) -> f64 {
        self.0 / 8.0
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_rate(s).map(Rate)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_rate(self.0, false))
    }
}

/// A duration typed on the command line. Implements `FromStr` for clap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DurationArg(pub Duration);

impl FromStr for DurationArg {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s).map(DurationArg)
    }
}

impl fmt::Display for DurationArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

// Block-size labels of the disk presets.

/// "4K", "64K", "1M", "512B": a size as the disk tests' names and tables
/// label block sizes (whole binary units only, else bytes).
pub fn size_label(bytes: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests;
