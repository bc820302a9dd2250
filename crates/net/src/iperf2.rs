//! iperf2's headers, as stock iperf 2 sends them: the TCP settings header at
//! the start of every stream (2.0's 24-byte form, 2.1's 60-byte extended
//! form captured from iperf 2.1.8), writing it for our client
//! (`throughput/iperf2.rs`) and reading a stock client's for the server's
//! iperf2 side (`server/iperf2.rs`); and UDP's: the settings 2.1.8 carries
//! in every datagram after its id and send time, and the report a stock
//! server sends back for the final datagram (bytes, loss, reordering,
//! jitter), read from untrusted bytes. Knows bytes only, no socket.
//!
//! Words are big-endian: flags, streams (-P), the port the client connected
//! to, buffer length, window or rate, then the amount (a byte count, or
//! minus the time in hundredths of a second). The extended part adds its
//! type and length, the extended flags word (reverse, full duplex) and the
//! client's version; UDP's adds the rate.
//!
//! Who sends is the header's direction: a plain upload, `-R` (the server
//! sends), or `--full-duplex` (both at once on the same connection: iperf
//! 2.1's listener starts a sender beside the receiver on that socket, for
//! the amount the header asks).
//!
//! Long (about 670 lines): about 440 lines of code (the TCP and UDP headers
//! and the server's report, each read and written), the rest its unit tests.

use crate::wire::TrafficDirection;
use std::time::Duration;

/// Set by -r and -d: the server is to connect back to the client.
const HEADER_VERSION1: u32 = 0x8000_0000;
/// 2.1's extended header follows the first six words.
const HEADER_EXTEND: u32 = 0x4000_0000;
/// A UDP test's header (never on a TCP stream).
const HEADER_UDPTESTS: u32 = 0x2000_0000;
/// UDP: datagram ids are 64-bit (the id's high word follows the send time).
const HEADER_SEQNO64B: u32 = 0x0800_0000;
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

/// The header word of an amount: a byte count, or minus hundredths of a second.
fn amount_word(amount: Amount) -> u32 {
    let word = match amount {
        Amount::Bytes(b) => i32::try_from(b).unwrap_or(i32::MAX),
        // The longest time the word holds is i32::MIN hundredths, as a server reads it.
        Amount::Time(t) => {
            i64::try_from(t.as_millis().div_ceil(10)).map_or(i32::MIN, |h| i32::try_from(-h).unwrap_or(i32::MIN))
        }
    };
    word as u32
}

fn to_bytes<const N: usize>(words: &[u32]) -> [u8; N] {
    let mut bytes = [0u8; N];
    for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    bytes
}

/// The 60 bytes iperf 2.1.8's client starts a stream with: an upload's
/// (then the data follows), a download's (`-R`: then the server sends) or
/// a both-way one's (`--full-duplex`: both send on this connection).
pub fn client_header(streams: u32, port: u16, amount: Amount, direction: TrafficDirection) -> [u8; EXTENDED_LEN] {
    let extended = match direction {
        TrafficDirection::Upload => 0,
        TrafficDirection::Download => EXTENDED_REVERSE,
        TrafficDirection::Bidir => EXTENDED_FULL_DUPLEX,
    };
    // 2.1's server reads the extended flags word only when this flag says it is meaningful.
    let version2 = if extended != 0 { HEADER_VERSION2 } else { 0 };
    let flags = HEADER_EXTEND | HEADER_LEN_BIT | ((EXTENDED_LEN as u32) << 1) | version2;
    to_bytes(&[
        flags,
        streams,
        u32::from(port),
        0,
        0,
        amount_word(amount),
        0,
        0,
        extended,
        VERSION_WORDS[0],
        VERSION_WORDS[1],
    ])
}

/// Length of a UDP datagram's id and send time: id (low word), seconds,
/// microseconds, id (high word).
pub const UDP_ID_LEN: usize = 16;
/// Length of the settings iperf 2.1.8's client carries in every UDP
/// datagram after [`UDP_ID_LEN`].
pub const UDP_SETTINGS_LEN: usize = 76;
/// The whole header of 2.1.8's UDP datagrams: the id and time, then the settings.
pub const UDP_HEADER_LEN: usize = UDP_ID_LEN + UDP_SETTINGS_LEN;
/// Shortest server report: 2.0's 12-byte id and time, then its ten words.
pub const UDP_REPORT_MIN_LEN: usize = 12 + 40;
/// 2.1's report with the 64-bit counts' high words (iperf 2.1.8 sends 128 bytes).
const UDP_REPORT_64_LEN: usize = UDP_ID_LEN + 112;

/// The settings iperf 2.1.8's `iperf -c -u` carries in every datagram of a
/// stream: 64-bit ids, `len`-byte datagrams, `rate_bits` per stream (the
/// rate's bits above 32 in the next word, shifted past its units byte).
pub fn udp_settings(streams: u32, port: u16, len: usize, rate_bits: f64, amount: Amount) -> [u8; UDP_SETTINGS_LEN] {
    let flags = HEADER_EXTEND | HEADER_SEQNO64B | HEADER_LEN_BIT | ((UDP_SETTINGS_LEN as u32) << 1);
    let rate = rate_bits.max(0.0) as u64;
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    to_bytes(&[
        flags,
        streams,
        u32::from(port),
        len,
        0,
        amount_word(amount),
        0,
        0,
        0,
        VERSION_WORDS[0],
        VERSION_WORDS[1],
        0,
        rate as u32,
        ((rate >> 32) as u32) << 8,
    ])
}

/// The id of the datagram that ends a stream whose last datagram was
/// `last`: the next id, negated, as a 64-bit id's two words carry it.
pub fn final_id(last: u64) -> u64 {
    i64::try_from(last.saturating_add(1)).map_or(i64::MIN, |next| -next) as u64
}

/// A stock client's UDP datagram as a server reads it: its 64-bit id
/// (negative on the final datagram), or why it is not one this side serves.
pub fn udp_datagram_id(buf: &[u8]) -> Result<i64, Refusal> {
    if buf.len() < UDP_HEADER_LEN {
        return Err(Refusal::NotIperf2(format!("a datagram of {} bytes", buf.len())));
    }
    let flags = word(&buf[UDP_ID_LEN..], 0);
    let len = ((flags & HEADER_LEN_MASK) >> 1) as usize;
    if flags & (HEADER_EXTEND | HEADER_LEN_BIT | HEADER_SEQNO64B) != HEADER_EXTEND | HEADER_LEN_BIT | HEADER_SEQNO64B
        || !(36..=MAX_HEADER_LEN).contains(&len)
    {
        return Err(Refusal::NotIperf2(format!("settings word {flags:08x} is no iperf 2.1 UDP client's")));
    }
    if flags & HEADER_VERSION1 != 0 {
        return Err(Refusal::Unsupported("a UDP dual or tradeoff test (-d, -r); run a plain -u test".into()));
    }
    let extended = word(&buf[UDP_ID_LEN..], 8);
    if extended & (EXTENDED_REVERSE | EXTENDED_FULL_DUPLEX) != 0 {
        return Err(Refusal::Unsupported("a UDP test where the server sends (-R, --full-duplex)".into()));
    }
    Ok(((u64::from(word(buf, 3)) << 32) | u64::from(word(buf, 0))) as i64)
}

/// The report a stock 2.1 server answers the final datagram with, as long
/// as `room` allows (never longer than the datagram it answers): 2.0's ten
/// words, and with room for all 128 bytes the 64-bit counts' high words.
pub fn udp_report(r: &UdpReport, room: usize) -> Option<Vec<u8>> {
    if room < UDP_REPORT_MIN_LEN + 4 {
        return None;
    }
    let wide = room >= UDP_REPORT_64_LEN;
    let split = |v: i64| ((v >> 32) as u32, v as u32);
    let (lost_hi, lost) = split(r.lost);
    let (ooo_hi, ooo) = split(r.out_of_order as i64);
    let (dgrams_hi, dgrams) = split(r.datagrams as i64);
    let jitter = Duration::from_secs_f64(r.jitter_s.max(0.0));
    let mut words = [0u32; 28];
    words[..10].copy_from_slice(&[
        HEADER_VERSION1 | if wide { HEADER_SEQNO64B } else { 0 },
        (r.bytes >> 32) as u32,
        r.bytes as u32,
        r.window.as_secs() as u32,
        r.window.subsec_micros(),
        lost,
        ooo,
        dgrams,
        jitter.as_secs() as u32,
        jitter.subsec_micros(),
    ]);
    words[25..].copy_from_slice(&[lost_hi, ooo_hi, dgrams_hi]);
    let report: [u8; 112] = to_bytes(&words);
    let len = if wide { UDP_REPORT_64_LEN } else { UDP_ID_LEN + 40 };
    let mut out = vec![0u8; len];
    out[UDP_ID_LEN..].copy_from_slice(&report[..len - UDP_ID_LEN]);
    Some(out)
}

/// What a stock server's report datagram says of one UDP stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpReport {
    /// Payload bytes the server received, the final datagram's included.
    pub bytes: u64,
    /// The server's window: its first datagram to the final one.
    pub window: Duration,
    /// Datagrams the server counted: the final datagram's id.
    pub datagrams: u64,
    /// Ids that never arrived (late arrivals fill their gap again).
    pub lost: i64,
    /// Datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// Its RFC 1889 interarrival jitter, seconds.
    pub jitter_s: f64,
}

impl UdpReport {
    /// A receiver's figures over its window, as a report carries them.
    pub fn of(u: &crate::stats::UdpRecvSummary, window: Duration) -> UdpReport {
        UdpReport {
            bytes: u.bytes,
            window,
            datagrams: u.packets,
            lost: u.lost,
            out_of_order: u.out_of_order,
            jitter_s: u.jitter_s,
        }
    }

    /// The report's figures as a receiver's (datagrams received: counted less lost).
    pub fn summary(&self) -> crate::stats::UdpRecvSummary {
        crate::stats::UdpRecvSummary {
            packets: self.datagrams,
            received: self.datagrams.saturating_sub(self.lost.max(0) as u64),
            bytes: self.bytes,
            lost: self.lost,
            out_of_order: self.out_of_order,
            jitter_s: self.jitter_s,
        }
    }
}

/// What this side sent on the stream, to hold the report against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpSent {
    /// The final datagram's id (its absolute value).
    pub datagrams: u64,
    /// Payload bytes, the final datagrams' included.
    pub bytes: u64,
    /// How long this side sent.
    pub window: Duration,
}

/// Slack a report's times get over this side's window: the final
/// datagram's retries and the path's delay.
const REPORT_SLACK: Duration = Duration::from_secs(10);

/// Reads a stock server's report datagram, each figure held against what
/// this side sent: a report that cannot be true is an error naming the
/// figure, never a figure.
pub fn parse_udp_report(buf: &[u8], sent: &UdpSent) -> Result<UdpReport, String> {
    // 2.1 puts the report after a 16-byte id and time, 2.0 after 12 bytes
    // (no high word; laid out as 2.0 describes it, no 2.0 server was at hand):
    // the report starts where its flags word is.
    let at = [UDP_ID_LEN, UDP_ID_LEN - 4]
        .into_iter()
        .find(|&at| buf.len() >= at + 40 && word(&buf[at..], 0) & HEADER_VERSION1 != 0);
    let Some(at) = at else {
        return Err(if buf.len() < UDP_REPORT_MIN_LEN {
            format!("a reply of {} bytes, shorter than a report ({UDP_REPORT_MIN_LEN})", buf.len())
        } else {
            format!("a reply whose flags word {:08x} marks no report", word(&buf[UDP_ID_LEN..], 0))
        });
    };
    let w = |i: usize| word(&buf[at..], i);
    let flags = w(0);
    // 2.1's high words of the counts when it says it sent them; else 2.0's signed words.
    let wide = at == UDP_ID_LEN && flags & HEADER_SEQNO64B != 0 && buf.len() >= UDP_REPORT_64_LEN;
    let count = |low: usize, hi: usize| {
        if wide {
            (i64::from(w(hi) as i32) << 32) | i64::from(w(low))
        } else {
            i64::from(w(low) as i32)
        }
    };
    let (lost, out_of_order, datagrams) = (count(5, 25), count(6, 26), count(7, 27));
    let bytes = (u64::from(w(1)) << 32) | u64::from(w(2));
    let time = |what: &str, sec: u32, usec: u32| {
        let (sec, usec) = (sec as i32, usec as i32);
        if sec < 0 || !(0..1_000_000).contains(&usec) {
            return Err(format!("{what} of {sec} s {usec} us"));
        }
        let t = Duration::from_secs(sec as u64) + Duration::from_micros(usec as u64);
        let most = sent.window + REPORT_SLACK;
        if t > most {
            return Err(format!(
                "{what} of {:.3} s, for a test that sent for {:.3} s",
                t.as_secs_f64(),
                sent.window.as_secs_f64()
            ));
        }
        Ok(t)
    };
    let window = time("a receive window", w(3), w(4))?;
    let jitter = time("a jitter", w(8), w(9))?;
    if !(0..=sent.datagrams as i64).contains(&datagrams) {
        return Err(format!("{datagrams} datagrams counted, of {} sent", sent.datagrams));
    }
    if !(0..=datagrams).contains(&out_of_order) {
        return Err(format!("{out_of_order} datagrams out of order, of {datagrams}"));
    }
    if !(-out_of_order..=datagrams).contains(&lost) {
        return Err(format!("{lost} datagrams lost, of {datagrams} ({out_of_order} out of order)"));
    }
    if bytes > sent.bytes {
        return Err(format!("{bytes} bytes received, more than the {} sent", sent.bytes));
    }
    Ok(UdpReport {
        bytes,
        window,
        datagrams: datagrams as u64,
        lost,
        out_of_order: out_of_order as u64,
        jitter_s: jitter.as_secs_f64(),
    })
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
    /// Streams of the test (-P); with --full-duplex, each carries both ways.
    pub streams: u32,
    /// Who sends: the client (upload), the server (-R), or both (--full-duplex).
    pub direction: TrafficDirection,
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
    let unknown = extended & !(EXTENDED_REVERSE | EXTENDED_FULL_DUPLEX);
    if unknown != 0 {
        return Err(Refusal::Unsupported(format!(
            "extended flags {unknown:08x}, an option this server does not know; run a plain upload, -R or --full-duplex"
        )));
    }
    Ok(Ask { streams, direction: direction_of(extended)?, amount })
}

/// Who sends, by the extended flags word: both flags at once ask for two
/// things a connection cannot be.
fn direction_of(extended: u32) -> Result<TrafficDirection, Refusal> {
    match (extended & EXTENDED_REVERSE != 0, extended & EXTENDED_FULL_DUPLEX != 0) {
        (false, false) => Ok(TrafficDirection::Upload),
        (true, false) => Ok(TrafficDirection::Download),
        (false, true) => Ok(TrafficDirection::Bidir),
        (true, true) => Err(Refusal::Unsupported("both -R and --full-duplex; run one of them".into())),
    }
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
        let header = client_header(3, 15011, Amount::Time(Duration::from_millis(2500)), TrafficDirection::Download);
        assert_eq!(header.to_vec(), from_words(captured));
        let bytes = client_header(1, 5001, Amount::Bytes(1 << 20), TrafficDirection::Download);
        assert_eq!(&bytes[20..24], &(1u32 << 20).to_be_bytes(), "a byte count is positive");
        // And a plain upload's, as `iperf -c HOST -p 15999 -P 2` (10 s) sends it.
        let upload = format!("40010078 00000002 00003e7f 00000000 00000000 fffffc18 00000000 00000000 00000000 {TAIL}");
        let ours = client_header(2, 15999, Amount::Time(Duration::from_secs(10)), TrafficDirection::Upload);
        assert_eq!(ours.to_vec(), from_words(&upload));
        // And `iperf -c HOST -p 15123 --full-duplex -t 3 -P 2`'s, as captured.
        let both = "44010078 00000002 00003b13 00000000 00000000 fffffed4 00000000 00000000 \
                    08000000 00020001 00080003 00000000 00000000 00000000 00000000";
        let ours = client_header(2, 15123, Amount::Time(Duration::from_secs(3)), TrafficDirection::Bidir);
        assert_eq!(ours.to_vec(), from_words(both));
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
            assert_eq!((ask.streams, ask.direction == TrafficDirection::Download, ask.amount), want, "{words}");
        }
        for (words, want) in [
            ("44010078 00000003 00003fad 00000000 00000000 00200000", (3, Amount::Bytes(2 << 20))),
            ("44010078 00000001 00003fad 00000000 00000000 fffffc18", (1, Amount::Time(Duration::from_secs(10)))),
        ] {
            let ask = parse(&format!("{words} 00000000 00000000 04000000 {TAIL}")).unwrap();
            assert_eq!(
                (ask.streams, ask.direction, ask.amount),
                (want.0, TrafficDirection::Download, want.1),
                "{words}"
            );
        }
        // --full-duplex -P 2 -t 3, as captured from 2.1.8.
        let both = parse(&format!("44010078 00000002 00003b13 0 0 fffffed4 0 0 08000000 {TAIL}")).unwrap();
        assert_eq!(
            (both.streams, both.direction, both.amount),
            (2, TrafficDirection::Bidir, Amount::Time(Duration::from_secs(3)))
        );
        // What this side's client writes reads back as what it asked, each way.
        for direction in [TrafficDirection::Upload, TrafficDirection::Download, TrafficDirection::Bidir] {
            let ask = parse_header(&client_header(4, 5001, Amount::Bytes(1 << 20), direction)).unwrap();
            assert_eq!((ask.streams, ask.direction, ask.amount), (4, direction, Amount::Bytes(1 << 20)));
        }
        // iperf 2.0's 24-byte header: a zero flags word.
        let v1 = parse("00000000 00000004 00001389 00020000 00000000 fffffc18").unwrap();
        assert_eq!((v1.streams, v1.direction), (4, TrafficDirection::Upload));
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
        // -R and --full-duplex at once, and an unknown extended flag.
        let fd = from_words(&format!("44010078 00000001 00003fad 00000000 00000000 fffffc18 0 0 0c000000 {TAIL}"));
        assert!(matches!(parse_header(&fd), Err(Refusal::Unsupported(w)) if w.contains("-R and --full-duplex")));
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
        let again = client_header(1, 5001, longest.amount, TrafficDirection::Upload);
        assert_eq!(word(&again, 5), 0x8000_0000, "written back as the same word");
        let longer = client_header(1, 5001, Amount::Time(Duration::MAX), TrafficDirection::Upload);
        assert_eq!(word(&longer, 5), 0x8000_0000, "clamped to the longest");
    }

    #[test]
    fn udp_settings_are_the_ones_iperf_2_1_8_carries_in_every_datagram() {
        // `iperf -c 127.0.0.1 -u -p 16002 -b 1M -t 2 -l 200` and `-p 16012 -b 5M -l 1000` (2.1.8,
        // whose M is 2^20), as captured: the words after each datagram's id and time.
        let zeros = "00000000 00000000 00000000 00000000 00000000 00000000";
        for (port, len, rate, captured) in [
            (
                16002,
                200,
                1 << 20,
                "00003e82 000000c8 00000000 ffffff38 00000000 00000000 00000000 00020001 00080003 00000000 00100000",
            ),
            (
                16012,
                1000,
                5 << 20,
                "00003e8c 000003e8 00000000 ffffff38 00000000 00000000 00000000 00020001 00080003 00000000 00500000",
            ),
        ] {
            let ours = udp_settings(1, port, len, f64::from(rate), Amount::Time(Duration::from_secs(2)));
            assert_eq!(ours.to_vec(), from_words(&format!("48010098 00000001 {captured} {zeros}")), "{port}");
        }
        // Above 4 Gb/s the rate's high bits go to the next word, past its units byte.
        let fast = udp_settings(2, 5001, 1470, 10e9, Amount::Bytes(1 << 20));
        assert_eq!(word(&fast, 12), 10_000_000_000u64 as u32);
        assert_eq!(word(&fast, 13), 2 << 8);
        assert_eq!((word(&fast, 1), word(&fast, 5)), (2, 1 << 20));
        // The final datagram after id 1313 is -1314 in both words (captured: fffffade ffffffff).
        assert_eq!(final_id(1313), 0xffff_ffff_ffff_fade);
        assert_eq!(final_id(u64::MAX), i64::MIN as u64, "no overflow");
    }

    /// 2.1.8's report of 1314 datagrams of 1000 bytes over 2.001841 s, with every tenth
    /// dropped and some swapped on the way: 131 lost, 169 out of order, jitter 0.645 ms.
    const LOSSY_REPORT: &str = "00000000 00000000 00000000 00000000 88000000 00000000 00120d18 00000002 00000731 \
        00000083 000000a9 00000522 00000000 00000285 00000000 0000001c 00000000 00000c6e 00000000 000574d4 \
        00000000 0000012e 1bd860da 000c5b4d 00000000 ffffff05 0000049f 00000290 00000001 00000000 00000000 00000000";

    fn sent(datagrams: u64, bytes: u64) -> UdpSent {
        UdpSent { datagrams, bytes, window: Duration::from_secs(2) }
    }

    #[test]
    fn stock_udp_reports_read_as_iperf_c_prints_them() {
        // iperf -c printed: 0.0000-2.0018 sec 1.13 MBytes 4.73 Mbits/sec 0.645 ms 131/1314 (10%), 169 out-of-order.
        let r = parse_udp_report(&from_words(LOSSY_REPORT), &sent(1314, 1314 * 1000)).unwrap();
        assert_eq!((r.bytes, r.datagrams, r.lost, r.out_of_order), (1_183_000, 1314, 131, 169));
        assert_eq!(r.window, Duration::from_micros(2_001_841));
        assert!((r.jitter_s - 0.000_645).abs() < 1e-12);
        // A clean one (0/1314, 0.009 ms, 200-byte datagrams over 2.001974 s).
        let clean = "00000000 00000000 00000000 00000000 88000000 00000000 00040290 00000002 000007b6 00000000 \
            00000000 00000522 00000000 00000009";
        let r = parse_udp_report(&from_words(clean), &sent(1314, 1314 * 200)).unwrap();
        assert_eq!((r.bytes, r.datagrams, r.lost, r.out_of_order), (262_800, 1314, 0, 0));
        assert!((r.jitter_s - 0.000_009).abs() < 1e-12);
        // The high words count only with the 64-bit flag.
        let mut wide = from_words(LOSSY_REPORT);
        wide[16..20].copy_from_slice(&0x8000_0000u32.to_be_bytes());
        wide[124..128].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(parse_udp_report(&wide, &sent(1314, 1314 * 1000)).unwrap().datagrams, 1314);
        // 2.0's layout: a 12-byte id and time (no high word) before the same ten words.
        let lossy = from_words(LOSSY_REPORT);
        let old: Vec<u8> = lossy[..12].iter().chain(&lossy[16..56]).copied().collect();
        let r20 = parse_udp_report(&old, &sent(1314, 1314 * 1000)).unwrap();
        assert_eq!((r20.bytes, r20.datagrams, r20.lost, r20.out_of_order), (1_183_000, 1314, 131, 169));
    }

    #[test]
    fn a_report_that_cannot_be_true_is_an_error_naming_the_figure() {
        let good = from_words(LOSSY_REPORT);
        let with_words = |words: &[(usize, u32)]| {
            let mut r = good.clone();
            for &(i, value) in words {
                r[16 + 4 * i..20 + 4 * i].copy_from_slice(&value.to_be_bytes());
            }
            parse_udp_report(&r, &sent(1314, 1314 * 1000)).unwrap_err()
        };
        let with = |i: usize, value: u32| with_words(&[(i, value)]);
        assert!(parse_udp_report(&good[..51], &sent(1314, 1314 * 1000)).unwrap_err().contains("51 bytes"));
        assert!(parse_udp_report(&good[..55], &sent(1314, 1314 * 1000)).unwrap_err().contains("marks no report"));
        assert!(with(0, 0x0800_0000).contains("marks no report"));
        assert!(with(1, 1).contains("more than the 1314000 sent"), "bytes beyond what was sent");
        assert!(with(3, u32::MAX).contains("receive window of -1 s"));
        assert!(with(4, 1_000_000).contains("receive window of 2 s 1000000 us"));
        assert!(with(3, 3600).contains("for a test that sent for 2.000 s"));
        let e = with(8, 86_400);
        assert!(e.contains("jitter of 86400.001 s"), "{e}");
        assert!(with(9, u32::MAX).contains("jitter of 0 s -1 us"));
        assert!(with(7, 1315).contains("1315 datagrams counted, of 1314 sent"));
        assert!(with(7, u32::MAX).contains("4294967295 datagrams counted"), "64-bit counts");
        assert!(with_words(&[(0, 0x8000_0000), (7, u32::MAX)]).contains("-1 datagrams counted"), "2.0's signed ones");
        assert!(with(6, 1315).contains("1315 datagrams out of order"));
        assert!(with(5, 1315).contains("1315 datagrams lost"));
        let late = with_words(&[(5, (-170i32) as u32), (25, u32::MAX)]);
        assert!(late.contains("-170 datagrams lost"), "more late arrivals than reordered ones: {late}");
        // 64-bit counts whose high words make them huge or negative.
        assert!(with(27, 1).contains("datagrams counted"));
        assert!(with(25, 0x8000_0000).contains("datagrams lost"));
        assert!(with(26, 0x7fff_ffff).contains("out of order"));
        // Random bytes of every length: an answer, never a panic.
        let mut rng = fastrand::Rng::with_seed(7);
        for len in 0..200 {
            let noise: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            let _ = parse_udp_report(&noise, &sent(u64::MAX, u64::MAX));
        }
    }
}
