//! iperf2's TCP settings header, as stock iperf 2 sends it at the start of
//! every stream (2.0's 24-byte form, 2.1's 60-byte extended form captured
//! from iperf 2.1.8): writing it for our client (`throughput/iperf2.rs`) and
//! reading a stock client's for the server's iperf2 side (`server/iperf2.rs`).
//! Knows bytes only, no socket.
//!
//! Words are big-endian: flags, streams (-P), the port the client connected
//! to, buffer length, window or rate, then the amount (a byte count, or
//! minus the time in hundredths of a second). The extended part adds its
//! type and length, the extended flags word (reverse, full duplex) and the
//! client's version.

use std::time::Duration;

/// Set by -r and -d: the server is to connect back to the client.
const HEADER_VERSION1: u32 = 0x8000_0000;
/// 2.1's extended header follows the first six words.
const HEADER_EXTEND: u32 = 0x4000_0000;
/// A UDP test's header (never on a TCP stream).
const HEADER_UDPTESTS: u32 = 0x2000_0000;
/// The extended flags word is meaningful (set with -R and --full-duplex).
const HEADER_VERSION2: u32 = 0x0400_0000;
/// -X: the client asks the server for its version.
const HEADER_PEER_DETECT: u32 = 0x0200_0000;
/// The header's length is in the bits of [`HEADER_LEN_MASK`] (shifted by one).
const HEADER_LEN_BIT: u32 = 0x0001_0000;
const HEADER_LEN_MASK: u32 = 0x0000_fffe;
/// With [`HEADER_VERSION1`]: -d (both at once) rather than -r (one after the other).
const RUN_NOW: u32 = 0x0000_0001;
/// Extended flags word: -R, the server sends.
const EXTENDED_REVERSE: u32 = 0x0400_0000;
/// Extended flags word: --full-duplex, both ways on one connection.
const EXTENDED_FULL_DUPLEX: u32 = 0x0800_0000;
/// The client version words 2.1.8 sends (2.1, 8.3): a server reads the
/// header as that client's.
const VERSION_WORDS: [u32; 2] = [0x0002_0001, 0x0008_0003];

/// Length of 2.0's header (flags through amount).
pub const V1_LEN: usize = 24;
/// Length of 2.1's extended header, as 2.1.8 sends it.
pub const EXTENDED_LEN: usize = 60;
/// Longest header read: anything longer is not a header this side knows.
pub const MAX_HEADER_LEN: usize = 256;
/// Most streams one test may ask for (the same bound as iperf3's).
pub const MAX_STREAMS: u32 = crate::iperf3::MAX_STREAMS;

/// How much a stream carries before it ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// A byte count per stream (-n).
    Bytes(u64),
    /// A duration (-t).
    Time(Duration),
}

/// The 60 bytes iperf 2.1.8's client starts a stream with: an upload's
/// (then the data follows) or, with `reverse`, a download's (then the
/// server sends).
pub fn client_header(streams: u32, port: u16, amount: Amount, reverse: bool) -> [u8; EXTENDED_LEN] {
    let amount = match amount {
        Amount::Bytes(b) => i32::try_from(b).unwrap_or(i32::MAX),
        Amount::Time(t) => -i32::try_from(t.as_millis().div_ceil(10)).unwrap_or(i32::MAX),
    };
    let flags =
        HEADER_EXTEND | HEADER_LEN_BIT | ((EXTENDED_LEN as u32) << 1) | if reverse { HEADER_VERSION2 } else { 0 };
    let words: [u32; 15] = [
        flags,
        streams,
        u32::from(port),
        0,
        0,
        amount as u32,
        0,
        0,
        if reverse { EXTENDED_REVERSE } else { 0 },
        VERSION_WORDS[0],
        VERSION_WORDS[1],
        0,
        0,
        0,
        0,
    ];
    let mut header = [0u8; EXTENDED_LEN];
    for (chunk, word) in header.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    header
}

/// Why a stream's opening is not served.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Not an iperf2 header at all.
    NotIperf2(String),
    /// An iperf2 client asking for something not served: what it asked.
    Unsupported(String),
}

/// How long the header is, from its first word (the flags), or why the
/// stream is refused without reading further.
pub fn header_len(flags: u32) -> Result<usize, Refusal> {
    if flags & HEADER_VERSION1 != 0 {
        let what = if flags & RUN_NOW != 0 { "a dual test (-d)" } else { "a tradeoff test (-r)" };
        return Err(Refusal::Unsupported(format!(
            "{what}: the server would connect back to the client; run an upload and then -R"
        )));
    }
    if flags == 0 {
        return Ok(V1_LEN);
    }
    // Recognised by its shape first (2.1 sets the length bits with the
    // extended header), refused for what it asks only then.
    let len = ((flags & HEADER_LEN_MASK) >> 1) as usize;
    if flags & HEADER_EXTEND == 0 || flags & HEADER_LEN_BIT == 0 {
        return Err(Refusal::NotIperf2(format!("first word {flags:08x} is no iperf2 flags word")));
    }
    if !(36..=MAX_HEADER_LEN).contains(&len) {
        return Err(Refusal::NotIperf2(format!(
            "first word {flags:08x} gives a header of {len} bytes (iperf 2.1 sends 60)"
        )));
    }
    if flags & HEADER_UDPTESTS != 0 {
        return Err(Refusal::Unsupported("a UDP test (-u) over TCP".into()));
    }
    if flags & HEADER_PEER_DETECT != 0 {
        return Err(Refusal::Unsupported("peer version detection (-X); run without -X".into()));
    }
    let unknown = flags & !(HEADER_EXTEND | HEADER_VERSION2 | HEADER_LEN_BIT | HEADER_LEN_MASK);
    if unknown != 0 {
        return Err(Refusal::Unsupported(format!(
            "header flags {unknown:08x}, an option this server does not know; run a plain upload or -R"
        )));
    }
    Ok(len)
}

/// What a stock client asked in its header.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// Streams of the test (-P).
    pub streams: u32,
    /// The server sends (-R).
    pub reverse: bool,
    /// Per stream.
    pub amount: Amount,
}

fn word(header: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([header[4 * i], header[4 * i + 1], header[4 * i + 2], header[4 * i + 3]])
}

/// Reads a whole header, of the length [`header_len`] gave.
pub fn parse_header(header: &[u8]) -> Result<Ask, Refusal> {
    if header.len() < V1_LEN || header.len() != header_len(word(header, 0))? {
        return Err(Refusal::NotIperf2(format!("a header of {} bytes", header.len())));
    }
    let streams = word(header, 1);
    if streams == 0 {
        return Err(Refusal::NotIperf2("a header asking for 0 streams".into()));
    }
    if streams > MAX_STREAMS {
        return Err(Refusal::Unsupported(format!("{streams} parallel streams (-P {streams}); at most {MAX_STREAMS}")));
    }
    let amount = match word(header, 5) as i32 {
        0 => return Err(Refusal::NotIperf2("a header asking for no time and no bytes".into())),
        // i32::MIN has no positive counterpart: as long as iperf2 can ask.
        a if a < 0 => Amount::Time(Duration::from_millis(u64::from(a.unsigned_abs()) * 10)),
        a => Amount::Bytes(a as u64),
    };
    let extended = if header.len() >= 36 { word(header, 8) } else { 0 };
    if extended & EXTENDED_FULL_DUPLEX != 0 {
        return Err(Refusal::Unsupported("a full-duplex test (--full-duplex); run an upload and then -R".into()));
    }
    let unknown = extended & !EXTENDED_REVERSE;
    if unknown != 0 {
        return Err(Refusal::Unsupported(format!(
            "extended flags {unknown:08x}, an option this server does not know; run a plain upload or -R"
        )));
    }
    Ok(Ask { streams, reverse: extended & EXTENDED_REVERSE != 0, amount })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_words(captured: &str) -> Vec<u8> {
        captured.split_whitespace().flat_map(|w| u32::from_str_radix(w, 16).unwrap().to_be_bytes()).collect()
    }

    fn parse(captured: &str) -> Result<Ask, Refusal> {
        let h = from_words(captured);
        header_len(word(&h, 0))?;
        parse_header(&h)
    }

    const TAIL: &str = "00020001 00080003 00000000 00000000 00000000 00000000";

    #[test]
    fn the_download_header_is_the_one_iperf_2_1_8_sends_for_reverse() {
        // `iperf -c HOST -p 15011 -t 2.5 -P 3 -R` (2.1.8), as captured on the wire.
        let captured = "44010078 00000003 00003aa3 00000000 00000000 ffffff06 00000000 00000000 \
                        04000000 00020001 00080003 00000000 00000000 00000000 00000000";
        let header = client_header(3, 15011, Amount::Time(Duration::from_millis(2500)), true);
        assert_eq!(header.to_vec(), from_words(captured));
        let bytes = client_header(1, 5001, Amount::Bytes(1 << 20), true);
        assert_eq!(&bytes[20..24], &(1u32 << 20).to_be_bytes(), "a byte count is positive");
        // And a plain upload's, as `iperf -c HOST -p 15999 -P 2` (10 s) sends it.
        let upload = format!("40010078 00000002 00003e7f 00000000 00000000 fffffc18 00000000 00000000 00000000 {TAIL}");
        let ours = client_header(2, 15999, Amount::Time(Duration::from_secs(10)), false);
        assert_eq!(ours.to_vec(), from_words(&upload));
    }

    #[test]
    fn stock_headers_read_as_what_was_asked() {
        // Captured from 2.1.8: plain -t 10, -P 2 -t 3, -n 1M, -P 3 -R -n 2M, -R -t 10.
        for (words, want) in [
            (
                "40010078 00000001 00003e7f 00000000 00000000 fffffc18",
                (1, false, Amount::Time(Duration::from_secs(10))),
            ),
            ("40010078 00000002 00003e7f 00000000 00000000 fffffed4", (2, false, Amount::Time(Duration::from_secs(3)))),
            ("40010078 00000001 00003e7f 00000000 00000000 00100000", (1, false, Amount::Bytes(1 << 20))),
        ] {
            let ask = parse(&format!("{words} 00000000 00000000 00000000 {TAIL}")).unwrap();
            assert_eq!((ask.streams, ask.reverse, ask.amount), want, "{words}");
        }
        for (words, want) in [
            ("44010078 00000003 00003fad 00000000 00000000 00200000", (3, Amount::Bytes(2 << 20))),
            ("44010078 00000001 00003fad 00000000 00000000 fffffc18", (1, Amount::Time(Duration::from_secs(10)))),
        ] {
            let ask = parse(&format!("{words} 00000000 00000000 04000000 {TAIL}")).unwrap();
            assert_eq!((ask.streams, ask.reverse, ask.amount), (want.0, true, want.1), "{words}");
        }
        // iperf 2.0's 24-byte header: a zero flags word.
        let v1 = parse("00000000 00000004 00001389 00020000 00000000 fffffc18").unwrap();
        assert_eq!((v1.streams, v1.reverse), (4, false));
    }

    #[test]
    fn what_is_not_served_is_named() {
        let refused = |first: u32| match header_len(first) {
            Err(Refusal::Unsupported(why)) => why,
            other => panic!("{first:08x}: {other:?}"),
        };
        // 2.1.8's -d, -r and -X flags words.
        assert!(refused(0xc001_0079).contains("-d"));
        assert!(refused(0xc001_0078).contains("-r"));
        assert!(refused(0x4601_0078).contains("-X"));
        assert!(refused(0x4081_0078).contains("00800000"), "an unknown flag is named by its bits");
        // --full-duplex, as 2.1.8 sends it, and an unknown extended flag.
        let fd = from_words(&format!("44010078 00000001 00003fad 00000000 00000000 fffffc18 0 0 08000000 {TAIL}"));
        assert!(matches!(parse_header(&fd), Err(Refusal::Unsupported(w)) if w.contains("--full-duplex")));
        let odd = from_words(&format!("44010078 00000001 00003fad 00000000 00000000 fffffc18 0 0 00000010 {TAIL}"));
        assert!(matches!(parse_header(&odd), Err(Refusal::Unsupported(w)) if w.contains("00000010")));
    }

    #[test]
    fn hostile_and_malformed_headers_are_refused() {
        // Not iperf2's first word: no extended bit, or a length it cannot have.
        assert!(matches!(header_len(0x4845_4144), Err(Refusal::NotIperf2(_))), "headroom's greeting");
        assert!(matches!(header_len(0x0001_0078), Err(Refusal::NotIperf2(_))));
        assert!(matches!(header_len(0x4001_0002), Err(Refusal::NotIperf2(_))), "a 1-byte header");
        assert!(matches!(header_len(0x4001_fffe), Err(Refusal::NotIperf2(_))), "a 32 KiB header");
        // Too many streams, none, no amount, a short header.
        let with =
            |streams: &str, amount: &str| from_words(&format!("40010078 {streams} 00001389 0 0 {amount} 0 0 0 {TAIL}"));
        assert!(
            matches!(parse_header(&with("ffffffff", "fffffc18")), Err(Refusal::Unsupported(w)) if w.contains("at most 128"))
        );
        assert!(matches!(parse_header(&with("00000000", "fffffc18")), Err(Refusal::NotIperf2(_))));
        assert!(matches!(parse_header(&with("00000001", "00000000")), Err(Refusal::NotIperf2(_))));
        assert!(matches!(parse_header(&with("00000001", "fffffc18")[..40]), Err(Refusal::NotIperf2(_))));
        // The longest time a header can hold reads without overflow.
        let longest = parse_header(&with("00000001", "80000000")).unwrap();
        assert_eq!(longest.amount, Amount::Time(Duration::from_millis(2_147_483_648 * 10)));
    }
}
