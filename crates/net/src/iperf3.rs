//! The iperf3 control protocol, as stock iperf3 3.x speaks it (see
//! docs/reference/iperf3.md): the 37-byte cookie, one-byte states,
//! length-prefixed JSON, the parameter and results documents and the UDP
//! hello. Shared by our iperf3 client (`client/iperf3.rs`) and the
//! server's iperf3 side (`server/`).

use serde_json::{json, Map, Value};
use std::io::{self, Read, Write};

/// A cookie: 36 characters of `[a-z2-7]` and a NUL.
pub const COOKIE_LEN: usize = 37;
/// Parameters larger than this are refused (stock servers use the same bound).
pub const MAX_PARAMS: u32 = 8 * 1024;
/// Results documents can carry per-interval server output; still bounded.
pub const MAX_RESULTS: u32 = 1024 * 1024;
/// Most streams a test may ask for (iperf3's own limit).
pub const MAX_STREAMS: u32 = 128;

/// State: the streams are up, the test starts.
pub const TEST_START: i8 = 1;
/// State: the test runs.
pub const TEST_RUNNING: i8 = 2;
/// State: the client ends the test.
pub const TEST_END: i8 = 4;
/// State: the server asks for the parameter JSON.
pub const PARAM_EXCHANGE: i8 = 9;
/// State: the server asks for the data streams.
pub const CREATE_STREAMS: i8 = 10;
/// State: the server ends the test early.
pub const SERVER_TERMINATE: i8 = 11;
/// State: the client ends the test early.
pub const CLIENT_TERMINATE: i8 = 12;
/// State: both sides send their results.
pub const EXCHANGE_RESULTS: i8 = 13;
/// State: the client may print the results.
pub const DISPLAY_RESULTS: i8 = 14;
/// State: the client is done.
pub const IPERF_DONE: i8 = 16;
/// State: the server is busy (another test runs).
pub const ACCESS_DENIED: i8 = -1;
/// State: the server refuses; two big-endian i32 (i_errno, errno) follow.
pub const SERVER_ERROR: i8 = -2;

/// UDP hello and reply since 3.12 (ASCII), and up to 3.11 (u32 in host order).
pub const UDP_HELLO: &[u8; 4] = b"9876";
/// UDP reply since 3.12.
pub const UDP_REPLY: &[u8; 4] = b"6789";
/// UDP hello up to 3.11 (host byte order).
pub const LEGACY_UDP_HELLO: u32 = 123_456_789;
/// UDP reply up to 3.11 (host byte order).
pub const LEGACY_UDP_REPLY: u32 = 987_654_321;

/// Whether 4 bytes are an iperf3 UDP hello of either generation.
pub fn is_udp_hello(b: &[u8]) -> bool {
    b.len() == 4 && (b == UDP_HELLO || b == LEGACY_UDP_HELLO.to_ne_bytes())
}

/// Whether 4 bytes are an iperf3 UDP reply of either generation.
pub fn is_udp_reply(b: &[u8]) -> bool {
    b.len() == 4 && (b == UDP_REPLY || b == LEGACY_UDP_REPLY.to_ne_bytes())
}

/// Whether a byte can start an iperf3 cookie.
pub fn is_cookie_char(b: u8) -> bool {
    b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b)
}

/// A fresh cookie: 36 characters of [a-z2-7] and a NUL.
pub fn new_cookie() -> [u8; COOKIE_LEN] {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut rng = fastrand::Rng::new();
    let mut c = [0u8; COOKIE_LEN];
    for b in c.iter_mut().take(COOKIE_LEN - 1) {
        *b = ALPHABET[rng.usize(..32)];
    }
    c
}

/// Whether a received cookie is well formed (36 cookie characters and a NUL).
pub fn cookie_is_valid(c: &[u8; COOKIE_LEN]) -> bool {
    c[..COOKIE_LEN - 1].iter().all(|&b| is_cookie_char(b)) && c[COOKIE_LEN - 1] == 0
}

/// Writes one state byte.
pub fn write_state(w: &mut impl Write, state: i8) -> io::Result<()> {
    w.write_all(&[state as u8])
}

/// Reads one state byte.
pub fn read_state(r: &mut impl Read) -> io::Result<i8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0] as i8)
}

/// Writes one length-prefixed JSON document.
pub fn write_json(w: &mut impl Write, v: &Value) -> io::Result<()> {
    let body = serde_json::to_vec(v).map_err(io::Error::other)?;
    w.write_all(&crate::socket::length_prefixed(&body))
}

/// Reads one length-prefixed JSON document of at most `max` bytes.
pub fn read_json(r: &mut impl Read, max: u32) -> io::Result<Value> {
    let mut body = crate::socket::read_length_prefixed(r, max, "JSON")?;
    // Some versions send a trailing NUL; tolerate it.
    while body.last() == Some(&0) {
        body.pop();
    }
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad JSON: {e}")))
}

/// The test parameters both sides agree on.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// UDP instead of TCP.
    pub udp: bool,
    /// -R: the server sends.
    pub reverse: bool,
    /// --bidir: both send.
    pub bidirectional: bool,
    /// -P: streams per direction.
    pub parallel: u32,
    /// -t: test length, seconds.
    pub time_s: u64,
    /// -n: bytes to send (0 = by time).
    pub bytes: u64,
    /// -k: blocks to send (0 = by time).
    pub blockcount: u64,
    /// -l: write size (TCP) or datagram size (UDP).
    pub len: u32,
    /// UDP target rate per stream, bits/s.
    pub bandwidth: u64,
    /// UDP sequence numbers are 64-bit.
    pub udp_counters_64bit: bool,
    /// The client wants the server's output.
    pub get_server_output: bool,
    /// -w: socket buffer of each stream, bytes (both ends).
    pub window: Option<u32>,
    /// --gsro (iperf3 3.21's `gso` and `gro`): UDP senders hand the kernel
    /// bursts of datagrams (GSO) and receivers take them coalesced (GRO),
    /// at each end that can; an older peer ignores the keys.
    pub gsro: bool,
    /// --skip-rx-copy (iperf3 3.19's `skip_rx_copy`): TCP receivers at
    /// both ends drop what arrives in the kernel.
    pub skip_rx_copy: bool,
    /// -Z (`zerocopy`): TCP senders at both ends hand the kernel their
    /// payload by reference (iperf3: sendfile from a file holding it).
    pub zerocopy: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            udp: false,
            reverse: false,
            bidirectional: false,
            parallel: 1,
            time_s: 10,
            bytes: 0,
            blockcount: 0,
            len: 128 * 1024,
            bandwidth: 1_000_000,
            udp_counters_64bit: false,
            get_server_output: false,
            window: None,
            gsro: false,
            skip_rx_copy: false,
            zerocopy: false,
        }
    }
}

impl Params {
    /// The parameter JSON a stock client sends for these settings.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if self.udp {
            m.insert("udp".into(), json!(true));
        } else {
            m.insert("tcp".into(), json!(true));
        }
        m.insert("omit".into(), json!(0));
        m.insert("time".into(), json!(self.time_s));
        m.insert("num".into(), json!(self.bytes));
        m.insert("blockcount".into(), json!(self.blockcount));
        m.insert("parallel".into(), json!(self.parallel));
        if self.reverse {
            m.insert("reverse".into(), json!(true));
        }
        if self.bidirectional {
            m.insert("bidirectional".into(), json!(true));
        }
        m.insert("len".into(), json!(self.len));
        if self.udp {
            m.insert("bandwidth".into(), json!(self.bandwidth));
        }
        if let Some(w) = self.window {
            m.insert("window".into(), json!(w));
        }
        m.insert("pacing_timer".into(), json!(1000));
        if self.udp_counters_64bit {
            m.insert("udp_counters_64bit".into(), json!(1));
        }
        if self.udp && self.gsro {
            // As a 3.21 client words --gsro: datagram size and burst buffer.
            m.insert("gso".into(), json!(1));
            m.insert("gso_dg_size".into(), json!(self.len));
            let burst = crate::socket::MAX_UDP_LEN as u32 / self.len.max(1) * self.len;
            m.insert("gso_bf_size".into(), json!(burst));
            m.insert("gro".into(), json!(1));
            m.insert("gro_bf_size".into(), json!(crate::socket::MAX_UDP_LEN));
        }
        if !self.udp && self.zerocopy {
            m.insert("zerocopy".into(), json!(1));
        }
        if !self.udp && self.skip_rx_copy {
            m.insert("skip_rx_copy".into(), json!(1));
        }
        m.insert("client_version".into(), json!("3.12"));
        Value::Object(m)
    }

    /// Reads a client's parameters the way a stock server does: a key of the
    /// wrong JSON type is ignored. Values out of range are errors.
    pub fn from_json(v: &Value) -> Result<Params, String> {
        let obj = v.as_object().ok_or("parameters are not a JSON object")?;
        let flag = |k: &str| obj.get(k).and_then(Value::as_bool).unwrap_or(false);
        let num = |k: &str| obj.get(k).and_then(Value::as_u64);
        let mut p = Params {
            udp: flag("udp"),
            reverse: flag("reverse"),
            bidirectional: flag("bidirectional"),
            ..Default::default()
        };
        if let Some(n) = obj.get("parallel").and_then(Value::as_i64) {
            if !(1..=i64::from(MAX_STREAMS)).contains(&n) {
                return Err(format!("{n} parallel streams asked; at most {MAX_STREAMS}"));
            }
            p.parallel = n as u32;
        }
        if let Some(t) = obj.get("time").and_then(Value::as_i64) {
            if t < 0 {
                return Err("negative test time".into());
            }
            p.time_s = t as u64;
        }
        p.bytes = num("num").unwrap_or(0);
        p.blockcount = num("blockcount").unwrap_or(0);
        p.len = match obj.get("len").and_then(Value::as_i64) {
            Some(l) if l >= 1 && l as usize <= crate::socket::MAX_TCP_LEN => l as u32,
            Some(l) => return Err(format!("block length {l} out of range (1 to 1 MiB)")),
            None if p.udp => crate::socket::DEFAULT_UDP_LEN as u32,
            None => crate::socket::DEFAULT_TCP_LEN as u32,
        };
        if p.udp && p.len as usize > crate::socket::MAX_UDP_LEN {
            return Err(format!("UDP datagram length {} over 65507", p.len));
        }
        if let Some(b) = num("bandwidth") {
            p.bandwidth = b;
        } else if !p.udp {
            p.bandwidth = 0;
        }
        p.udp_counters_64bit = num("udp_counters_64bit").is_some_and(|v| v != 0);
        p.get_server_output = num("get_server_output").is_some_and(|v| v != 0);
        // The sizes that come with them are the client's own buffers: this
        // end segments and splits at its own datagram length.
        p.gsro = p.udp && (num("gso").is_some_and(|v| v != 0) || num("gro").is_some_and(|v| v != 0));
        p.zerocopy = !p.udp && num("zerocopy").is_some_and(|v| v != 0);
        p.skip_rx_copy = !p.udp && num("skip_rx_copy").is_some_and(|v| v != 0);
        p.window = match obj.get("window").and_then(Value::as_i64) {
            None | Some(0) => None,
            Some(w) if (1..=i64::from(crate::socket::MAX_WINDOW)).contains(&w) => Some(w as u32),
            Some(w) => return Err(format!("socket buffer (window) of {w} bytes out of range (1 to 1 GiB)")),
        };
        Ok(p)
    }

    /// What each sending stream moves with -n or -k; None = by time.
    pub fn bytes_per_stream(&self) -> Option<u64> {
        match (self.bytes, self.blockcount) {
            (0, 0) => None,
            // -k comes from the peer: saturate rather than wrap to a short transfer.
            (0, k) => Some(k.saturating_mul(u64::from(self.len)) / u64::from(self.parallel)),
            (b, _) => Some(b / u64::from(self.parallel)),
        }
    }

    /// Streams opened by the client: `parallel`, twice that with --bidir.
    pub fn total_streams(&self) -> u32 {
        if self.bidirectional {
            self.parallel * 2
        } else {
            self.parallel
        }
    }
}

/// iperf3's stream ids in creation order: 1, 3, 4, 5, ...
pub fn stream_id(index: usize) -> u64 {
    if index == 0 {
        1
    } else {
        index as u64 + 2
    }
}

fn short(v: &Value) -> String {
    let t = v.to_string();
    t.chars().take(200).collect()
}

/// One stream in a results document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamResult {
    /// iperf3 stream id ([`stream_id`]).
    pub id: u64,
    /// Payload bytes the side sent or received on this stream.
    pub bytes: u64,
    /// TCP retransmits; -1 = unknown.
    pub retransmits: i64,
    /// UDP jitter, seconds.
    pub jitter_s: f64,
    /// UDP datagrams lost.
    pub errors: i64,
    /// UDP datagrams sent or counted.
    pub packets: u64,
    /// When the stream ended, seconds since the start.
    pub end_time: f64,
}

/// The results document one side sends the other at the end of a test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    /// CPU use, percent of one core.
    pub cpu_total: f64,
    /// User-mode CPU, percent of one core.
    pub cpu_user: f64,
    /// Kernel-mode CPU, percent of one core.
    pub cpu_system: f64,
    /// 1 when the sender counts retransmits, 0 for UDP, -1 when not sending.
    pub sender_has_retransmits: i64,
    /// One entry per stream.
    pub streams: Vec<StreamResult>,
}

impl Results {
    /// The receive figures of a peer's results for UDP streams it received
    /// (packets it counted, those lost, bytes, worst jitter).
    pub fn udp_received(&self) -> crate::stats::UdpRecvSummary {
        let s = &self.streams;
        crate::stats::UdpRecvSummary {
            packets: s.iter().map(|s| s.packets).sum(),
            received: s.iter().map(|s| s.packets.saturating_sub(s.errors.max(0) as u64)).sum(),
            bytes: s.iter().map(|s| s.bytes).sum(),
            lost: s.iter().map(|s| s.errors).sum(),
            out_of_order: 0,
            jitter_s: s.iter().map(|s| s.jitter_s).fold(0.0, f64::max),
        }
    }

    /// The document as iperf3 sends it.
    pub fn to_json(&self) -> Value {
        let streams: Vec<Value> = self
            .streams
            .iter()
            .map(|s| {
                json!({
                    "id": s.id, "bytes": s.bytes, "retransmits": s.retransmits, "jitter": s.jitter_s,
                    "errors": s.errors, "packets": s.packets, "start_time": 0.0, "end_time": s.end_time
                })
            })
            .collect();
        json!({
            "cpu_util_total": self.cpu_total, "cpu_util_user": self.cpu_user, "cpu_util_system": self.cpu_system,
            "sender_has_retransmits": self.sender_has_retransmits, "streams": streams
        })
    }

    /// Reads a peer's results document; a missing figure is an error.
    pub fn from_json(v: &Value) -> Result<Results, String> {
        let f = |k: &str| v.get(k).and_then(Value::as_f64).ok_or_else(|| format!("results lack '{k}': {}", short(v)));
        let streams = v.get("streams").and_then(Value::as_array).ok_or("results lack 'streams'")?;
        let mut out = Results {
            cpu_total: f("cpu_util_total")?,
            cpu_user: f("cpu_util_user")?,
            cpu_system: f("cpu_util_system")?,
            // cJSON prints -1 stored in an unsigned field as 2^64-1: both mean "none".
            sender_has_retransmits: v
                .get("sender_has_retransmits")
                .and_then(|x| x.as_i64().or_else(|| x.as_u64().map(|u| u as i64)))
                .ok_or_else(|| format!("results lack 'sender_has_retransmits': {}", short(v)))?,
            streams: Vec::with_capacity(streams.len().min(MAX_STREAMS as usize * 2)),
        };
        for s in streams.iter().take(MAX_STREAMS as usize * 2) {
            let g = |k: &str| s.get(k).and_then(Value::as_f64).ok_or_else(|| format!("stream result lacks '{k}'"));
            out.streams.push(StreamResult {
                id: g("id")? as u64,
                bytes: g("bytes")? as u64,
                retransmits: s
                    .get("retransmits")
                    .and_then(|x| x.as_i64().or_else(|| x.as_u64().map(|u| u as i64)))
                    .unwrap_or(-1),
                jitter_s: g("jitter")?,
                errors: g("errors")? as i64,
                packets: g("packets")? as u64,
                end_time: s.get("end_time").and_then(Value::as_f64).unwrap_or(0.0),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// iperf3 3.21 sends `gso`/`gro` (with its buffer sizes) on --gsro, 0
    /// without; older clients send neither. Only UDP tests take them.
    #[test]
    fn gsro_is_read_as_iperf3_321_words_it_and_written_the_same_way() {
        let with = |extra: &str| {
            let body =
                format!(r#"{{"udp":true,"time":1,"len":1448,"bandwidth":1000000,"client_version":"3.21"{extra}}}"#);
            Params::from_json(&serde_json::from_str(&body).unwrap()).unwrap()
        };
        assert!(with(r#","gso":1,"gso_dg_size":1448,"gso_bf_size":65160,"gro":1,"gro_bf_size":65507"#).gsro);
        assert!(!with(r#","gso":0,"gso_dg_size":0,"gso_bf_size":65507,"gro":0,"gro_bf_size":65507"#).gsro);
        assert!(!with("").gsro);
        let tcp = serde_json::json!({"tcp": true, "gso": 1, "gro": 1});
        assert!(!Params::from_json(&tcp).unwrap().gsro, "TCP has no datagrams to segment");
        let p = Params { udp: true, len: 1448, gsro: true, ..Default::default() };
        let v = p.to_json();
        assert_eq!((v["gso"].as_u64(), v["gso_dg_size"].as_u64(), v["gro"].as_u64()), (Some(1), Some(1448), Some(1)));
        assert_eq!(v["gso_bf_size"].as_u64(), Some(65507 / 1448 * 1448));
        assert_eq!(Params::from_json(&v).unwrap(), p);
        assert!(Params { udp: true, ..Default::default() }.to_json().get("gso").is_none(), "not asked: not sent");
    }

    /// iperf3 words -Z as `"zerocopy":1` and 3.19's --skip-rx-copy as
    /// `"skip_rx_copy":1`, both TCP only; older clients send neither.
    #[test]
    fn zerocopy_and_skip_rx_copy_are_read_and_written_as_iperf3_words_them() {
        let read = |body: &str| Params::from_json(&serde_json::from_str(body).unwrap()).unwrap();
        let both = read(r#"{"tcp":true,"time":1,"len":131072,"zerocopy":1,"skip_rx_copy":1}"#);
        assert!(both.zerocopy && both.skip_rx_copy);
        let neither = read(r#"{"tcp":true,"time":1,"len":131072}"#);
        assert!(!neither.zerocopy && !neither.skip_rx_copy);
        let udp = read(r#"{"udp":true,"time":1,"len":1448,"zerocopy":1,"skip_rx_copy":1}"#);
        assert!(!udp.zerocopy && !udp.skip_rx_copy, "a UDP test has no TCP stream to take them");
        let p = Params { zerocopy: true, skip_rx_copy: true, bandwidth: 0, ..Default::default() };
        let v = p.to_json();
        assert_eq!((v["zerocopy"].as_u64(), v["skip_rx_copy"].as_u64()), (Some(1), Some(1)));
        assert_eq!(Params::from_json(&v).unwrap(), p);
        assert!(Params::default().to_json().get("zerocopy").is_none(), "not asked: not sent");
    }

    #[test]
    fn cookies_and_hellos() {
        let c = new_cookie();
        assert!(cookie_is_valid(&c));
        assert!(is_udp_hello(b"9876"));
        assert!(is_udp_hello(&LEGACY_UDP_HELLO.to_ne_bytes()));
        assert!(!is_udp_hello(b"6789"));
        assert!(is_udp_reply(b"6789"));
        assert_eq!([stream_id(0), stream_id(1), stream_id(2)], [1, 3, 4]);
    }

    #[test]
    fn params_are_type_strict_and_bounded() {
        let p = Params::from_json(&json!({"tcp": true, "reverse": 1, "parallel": 4, "len": 1000, "time": 2})).unwrap();
        assert!(!p.reverse, "a number is not a boolean, as in stock iperf3");
        assert_eq!(p.parallel, 4);
        assert!(Params::from_json(&json!({"parallel": 10000})).unwrap_err().contains("at most 128"));
        assert_eq!(Params::from_json(&json!({"window": 131072})).unwrap().window, Some(131072));
        assert_eq!(Params::from_json(&json!({"window": 0})).unwrap().window, None, "0: the kernel's default");
        for bad in [json!({"window": -1}), json!({"window": 1u64 << 40})] {
            assert!(Params::from_json(&bad).unwrap_err().contains("window"), "{bad}");
        }
        assert_eq!(Params { window: Some(4096), ..Default::default() }.to_json()["window"], 4096);
        let huge = Params::from_json(&json!({"blockcount": u64::MAX, "len": 1000})).unwrap();
        assert_eq!(huge.bytes_per_stream(), Some(u64::MAX), "-k times the block length saturates");
        let round = Params::from_json(&Params { reverse: true, parallel: 3, ..Default::default() }.to_json()).unwrap();
        assert!(round.reverse && round.parallel == 3);
    }

    #[test]
    fn results_round_trip() {
        let r = Results {
            cpu_total: 1.0,
            sender_has_retransmits: 1,
            streams: vec![StreamResult { id: 3, bytes: 10, end_time: 1.0, ..Default::default() }],
            ..Default::default()
        };
        assert_eq!(Results::from_json(&r.to_json()).unwrap(), r);
        assert!(Results::from_json(&json!({"streams": []})).is_err());
    }
}
