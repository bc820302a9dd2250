//! The headroom wire protocol, version 1.
//!
//! Every TCP connection from a headroom client opens with the 12-byte
//! `GREETING`: `HEADROOM`, a big-endian u16 protocol version and two zero
//! bytes. iperf3 opens with a 37-byte cookie of `[a-z2-7]` characters and a
//! NUL; the greeting starts with an upper-case `H`, which is never a cookie
//! character, so the server tells the two apart from the first byte.
//!
//! After the greeting both sides exchange framed JSON messages: a big-endian
//! u32 length then that many bytes of JSON. Frames over [`MAX_FRAME`] are
//! refused before any allocation, so a hostile length prefix costs nothing.
//!
//! A connection is a control connection (authenticates, then asks for
//! tests), a data stream of a test, or a request/response echo stream.
//! Every session has a secret ([`SessionKeys`]): with a token, both ends
//! derive it from the challenge-response and it never crosses the wire;
//! without one (a loopback or `--no-auth` server, where there is nothing to
//! keep secret) the server sends it in the Welcome. Data and echo streams
//! name their session by its public id and prove membership with a proof
//! made from the secret for that one stream; the server also takes them only
//! from the control connection's address. UDP datagrams carry the public id
//! (and are taken only from that address too).
//!
//! Authentication is a challenge-response, so the token never crosses the
//! wire: a server with a token answers the control hello with
//! [`Reply::Challenge`] (a fresh random nonce); the client answers with
//! [`AuthAnswer`]: its own nonce and HMAC-SHA256 keyed with the token over
//! [`AUTH_CONTEXT`], the server nonce and the client nonce ([`auth_proof`]).
//!
//! Long (about 580 lines) because it is the whole protocol definition (greeting, keys, messages,
//! framing) in one place, as a protocol reference should be.

/// The flushcheck run and acknowledgement are documents as well as messages:
/// they live in headroom-result so presenters read them without this crate.
pub use headroom_result::flushcheck::{
    from_hex, FlushAck, FlushRun, FLUSH_BLOCK_RANGE, FLUSH_MAX_BLOCKS, FLUSH_MAX_TEXT, FLUSH_RUN_LEN,
};
use headroom_result::{Host, Warning};
use headroom_runner::{LiveSample, Measured, PrepareEvent, ProbeError, ProbeRequest};
use headroom_sys::ServingQuery;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// Protocol version spoken by this build (2: challenge-response
/// authentication; 3: no session secret on the wire with a token, per-stream
/// proofs).
pub const VERSION: u16 = 3;
/// The first bytes of every headroom connection.
pub const MAGIC: &[u8; 8] = b"HEADROOM";
/// Magic plus version plus two reserved zero bytes.
pub const GREETING_LEN: usize = 12;
/// Largest JSON frame either side accepts.
pub const MAX_FRAME: u32 = 64 * 1024;
/// Largest request an authenticated client may send to a server that runs
/// probes: a plan of [`crate::MAX_PLAN`] requests fits.
pub const MAX_PLAN_FRAME: u32 = 1 << 20;
/// Largest frame a client accepts from a server for a remote probe's result
/// or an inventory: an hour of per-second samples and a histogram fit.
pub const MAX_RESULT_FRAME: u32 = 32 << 20;
/// Session keys are 16 random bytes.
pub const KEY_LEN: usize = 16;
/// Largest request/response message size.
pub const MAX_RR_SIZE: u32 = 64 * 1024;
/// UDP datagram tags (first 4 bytes).
pub const UDP_ECHO_TAG: &[u8; 4] = b"HRE1";
/// Tag of a UDP test datagram or a UDP stream hello.
pub const UDP_DATA_TAG: &[u8; 4] = b"HRU1";
/// Smallest useful datagram: tag, key, sequence, send time.
pub const UDP_HEADER_LEN: usize = 4 + KEY_LEN + 8 + 8;

/// The greeting for this build.
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[..8].copy_from_slice(MAGIC);
    g[8..10].copy_from_slice(&VERSION.to_be_bytes());
    g
}

/// Parses a greeting; returns the peer's protocol version.
pub fn parse_greeting(bytes: &[u8; GREETING_LEN]) -> Option<u16> {
    if &bytes[..8] != MAGIC {
        return None;
    }
    Some(u16::from_be_bytes([bytes[8], bytes[9]]))
}

/// A session key as lower-case hex, for JSON.
pub fn key_hex(key: &[u8; KEY_LEN]) -> String {
    to_hex(key)
}

/// Parses a hex session key.
pub fn key_from_hex(text: &str) -> Option<[u8; KEY_LEN]> {
    from_hex(text)
}

/// Fresh unguessable bytes from the OS.
pub fn random_key() -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    getrandom::fill(&mut key).expect("the OS random source is available");
    key
}

/// Authentication nonces are 32 random bytes, sent as hex.
pub const NONCE_LEN: usize = 32;
/// Bound into every proof, so a proof cannot be replayed in another protocol.
pub const AUTH_CONTEXT: &[u8] = b"headroom-auth-v2\0";

/// A fresh authentication nonce from the OS.
pub fn random_nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).expect("the OS random source is available");
    n
}

fn auth_mac(token: &str, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN]) -> Hmac<sha2::Sha256> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(AUTH_CONTEXT);
    mac.update(server_nonce);
    mac.update(client_nonce);
    mac
}

/// HMAC-SHA256(token, AUTH_CONTEXT || server nonce || client nonce): what the
/// client sends instead of the token.
pub fn auth_proof(token: &str, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN]) -> [u8; 32] {
    auth_mac(token, server_nonce, client_nonce).finalize().into_bytes().into()
}

/// Whether `proof` is the proof for `token` over the two nonces (constant time).
pub fn auth_verify(token: &str, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN], proof: &[u8]) -> bool {
    auth_mac(token, server_nonce, client_nonce).verify_slice(proof).is_ok()
}

/// Bound into the session secret's derivation, apart from [`AUTH_CONTEXT`].
pub const SESSION_CONTEXT: &[u8] = b"headroom-session-v3\0";

/// A session's secret and what is made from it. The secret itself never
/// crosses the wire once a token is set; what streams and datagrams carry
/// (the public id, a proof for one stream) does not reveal it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SessionKeys {
    secret: [u8; KEY_LEN],
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeys").field("id", &to_hex(&self.id())).finish_non_exhaustive()
    }
}

impl SessionKeys {
    /// A fresh random secret (a server without a token sends it in the Welcome).
    pub fn random() -> Self {
        SessionKeys { secret: random_key() }
    }

    /// The secret both ends of an authenticated session derive:
    /// HMAC-SHA256(token, [`SESSION_CONTEXT`] || server nonce || client nonce),
    /// its first 16 bytes.
    pub fn derived(token: &str, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN]) -> Self {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes keys of any length");
        mac.update(SESSION_CONTEXT);
        mac.update(server_nonce);
        mac.update(client_nonce);
        SessionKeys { secret: first_key_bytes(&mac.finalize().into_bytes()) }
    }

    /// The secret a Welcome carried (servers without a token).
    pub fn from_hex(text: &str) -> Option<Self> {
        key_from_hex(text).map(|secret| SessionKeys { secret })
    }

    /// The secret as hex, for a Welcome (only without a token).
    pub fn secret_hex(&self) -> String {
        to_hex(&self.secret)
    }

    fn made(&self, label: &[u8], parts: &[&[u8]]) -> [u8; KEY_LEN] {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&self.secret).expect("HMAC takes keys of any length");
        mac.update(label);
        for p in parts {
            mac.update(p);
        }
        first_key_bytes(&mac.finalize().into_bytes())
    }

    /// The session's public name: stream hellos and UDP datagrams carry it.
    pub fn id(&self) -> [u8; KEY_LEN] {
        self.made(b"id", &[])
    }

    /// The proof that data stream `index` of test `test` belongs to the session.
    pub fn stream_proof(&self, test: u32, index: u32) -> [u8; KEY_LEN] {
        self.made(b"stream", &[&test.to_be_bytes(), &index.to_be_bytes()])
    }

    /// The proof that an echo stream of `size` bytes belongs to the session.
    pub fn rr_proof(&self, size: u32) -> [u8; KEY_LEN] {
        self.made(b"rr", &[&size.to_be_bytes()])
    }

    /// Whether `proof` (hex) is `expected`, in constant time.
    pub fn proves(expected: &[u8; KEY_LEN], proof: &str) -> bool {
        let Some(given) = key_from_hex(proof) else { return false };
        expected.iter().zip(given).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

fn first_key_bytes(digest: &[u8]) -> [u8; KEY_LEN] {
    digest[..KEY_LEN].try_into().expect("SHA-256 gives 32 bytes")
}

/// Lower-case hex of any bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The client's answer to [`Reply::Challenge`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthAnswer {
    /// The client's nonce, hex.
    pub nonce: String,
    /// [`auth_proof`], hex.
    pub proof: String,
}

/// What a connection is for, declared in its first message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Hello {
    /// A control connection; a server with a token answers with a challenge.
    /// (Version 1 clients sent the token itself here; the field is ignored.)
    Control {
        /// The client's headroom version.
        client_version: String,
    },
    /// Data stream `index` of test `test` of session `session`.
    Stream {
        /// The session's public id ([`SessionKeys::id`]), hex.
        session: String,
        /// The test's number within the session.
        test: u32,
        /// The stream's index within the test.
        index: u32,
        /// [`SessionKeys::stream_proof`] of this test and index, hex.
        proof: String,
    },
    /// A request/response echo stream with fixed message size.
    Rr {
        /// The session's public id ([`SessionKeys::id`]), hex.
        session: String,
        /// Message size, bytes each way.
        size: u32,
        /// [`SessionKeys::rr_proof`] of this size, hex.
        proof: String,
        /// Both ends spin on non-blocking sockets with SO_BUSY_POLL
        /// (`net --busy-poll`); a server that does answers with one byte
        /// ([`crate::BusyPollEnd::to_byte`]) before the first echo, one
        /// that predates it ignores the field and sends none.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        busy_poll: bool,
    },
}

/// The direction of a throughput test, from the client's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficDirection {
    /// Client sends, server receives.
    Upload,
    /// Server sends, client receives.
    Download,
    /// Both at once: streams 0..n upload, n..2n download.
    Bidir,
}

impl TrafficDirection {
    /// The probe kind the result document records.
    pub fn test_name(self, udp: bool) -> headroom_result::NetProbeKind {
        use headroom_result::NetProbeKind;
        match (udp, self) {
            (true, _) => NetProbeKind::Udp,
            (false, TrafficDirection::Upload) => NetProbeKind::Tcp,
            (false, TrafficDirection::Download) => NetProbeKind::TcpReverse,
            (false, TrafficDirection::Bidir) => NetProbeKind::TcpBidir,
        }
    }
}

/// What a client asks of a test ([`Request::Test`]); the server checks it
/// against its limits before trusting it. (Its fields sit beside `op` on the
/// wire, as those of a struct variant would.)
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TestRequest {
    /// UDP instead of TCP.
    pub udp: bool,
    /// Who sends.
    pub direction: TrafficDirection,
    /// Streams per direction.
    pub streams: u32,
    /// Planned length; the server refuses more than its --max-duration.
    pub duration_ms: u64,
    /// Bytes each sending stream moves before stopping (fixed-size transfer).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Write size for TCP, datagram size for UDP.
    pub len: u32,
    /// UDP target rate, bits per second (whole test).
    #[serde(default)]
    pub rate_bits: Option<f64>,
    /// Socket buffer of each data stream at both ends, bytes (iperf3's -w).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// The server's TCP receivers drop what arrives in the kernel,
    /// without copying it to user space (`--skip-rx-copy`). A server
    /// that predates it reads as usual, and its report says so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_rx_copy: bool,
    /// The server's TCP senders hand the kernel their payload by
    /// reference (`--zerocopy`). A server that predates it copies, and its
    /// report says so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub zerocopy: bool,
    /// The server's UDP streams send bursts in one call (GSO) and
    /// receive coalesced (GRO), where its kernel can (`--gsro`). A
    /// server that predates it sends and receives one datagram per call,
    /// and its report says so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub udp_offload: bool,
}

/// Client requests on a control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Prepare a test; the server answers `TestReady`, then waits for the streams.
    Test(TestRequest),
    /// Stop the running test (or remote probe) and report.
    End,
    /// Leave.
    Bye,
    /// Send this machine's inventory (`headroom sys --remote`).
    Inventory,
    /// Prepare to run these probe requests here (lay out test files, check
    /// every request against the server's rules); replaces an earlier plan
    /// and removes its test files. Answered by `Event`s, then `Prepared` or
    /// `Failed`.
    Plan {
        /// The requests, each one to be run later with `Run`.
        requests: Vec<ProbeRequest>,
    },
    /// Run one request of the plan. Answered by `Sample`s, then `Measured` or
    /// `Failed`; an `End` meanwhile stops it early.
    Run {
        /// The request, as it was in the plan.
        request: ProbeRequest,
    },
    /// The plan is over: remove its test files. Answered by `Finished`.
    Finish,
    /// Start watching this machine's CPU (while the client measures
    /// something that loads the server, e.g. a disk probe on its share).
    /// Answered by `Watching`.
    CpuWatch {
        /// Also follow the processes serving this share here (their threads
        /// and cgroup), found by its port or their names.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        serving: Option<ServingQuery>,
    },
    /// The CPU since `CpuWatch`. Answered by `CpuLoad`.
    CpuWatchEnd,
    /// What time is it on the server? Answered by `Clock` (a fleet compares
    /// every agent's clock with its own, NTP-style, over this connection).
    Clock,
    /// A flushcheck writer starts a run: record it (again, after a
    /// reconnect, with the same fields). Answered by `FlushRecorded` (seq 0).
    FlushBegin {
        /// The run as its writer declared it.
        run: FlushRun,
    },
    /// The storage acknowledged this block of run `run` (its sync returned):
    /// record it durably before answering `FlushRecorded`.
    FlushAck {
        /// Run id, hex ([`FLUSH_RUN_LEN`] bytes).
        run: String,
        /// The block.
        ack: FlushAck,
    },
    /// The acknowledged blocks of run `run` at offsets above `after`, in
    /// offset order, at most [`FLUSH_PAGE`] of them. Answered by `FlushAcks`.
    FlushList {
        /// Run id, hex.
        run: String,
        /// Offsets up to this one were fetched already (0 at first).
        after: u64,
    },
}

/// Acknowledged blocks per `FlushAcks` page: a page stays far below [`MAX_FRAME`].
pub const FLUSH_PAGE: usize = 512;
/// Server messages on a control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum Reply {
    /// Prove you hold the token: answer with an [`AuthAnswer`] over this nonce (hex).
    Challenge {
        /// Hex of the server's fresh nonce.
        nonce: String,
    },
    /// Authenticated: the session and the server's limits.
    Welcome {
        /// The session secret, hex, from a server without a token; empty
        /// when a token was proven (both ends derive it: [`SessionKeys::derived`]).
        session: String,
        /// The server's headroom version.
        server_version: String,
        /// Longest test it accepts, ms.
        max_duration_ms: u64,
        /// Most streams per direction it accepts.
        max_streams: u32,
        /// Whether it runs disk and CPU probes and sends its inventory for
        /// clients (`Plan`, `Run`, `Inventory`); older servers leave it out.
        #[serde(default)]
        probes: bool,
    },
    /// No: the reason is for the user.
    Refused {
        /// One line saying why.
        reason: String,
    },
    /// The server waits for the test's data streams.
    TestReady {
        /// The test's number within the session.
        test: u32,
    },
    /// Every stream arrived: data flows.
    Started,
    /// What the server measured in the test.
    Result(ServerReport),
    /// This machine's inventory.
    Inventory(Box<Host>),
    /// A remote plan's preparation event (test file created, layout progress, target).
    Event {
        /// The event, as the server's engine reported it.
        event: PrepareEvent,
    },
    /// The plan is prepared.
    Prepared {
        /// Warnings about the whole plan (e.g. the test file's layout).
        warnings: Vec<Warning>,
    },
    /// One live sample of the running remote probe.
    Sample(LiveSample),
    /// The remote probe's result.
    Measured(Box<Measured>),
    /// The remote plan or probe ended without a result.
    Failed {
        /// Why, as the server's engine said it.
        error: ProbeError,
    },
    /// The plan's test files are removed.
    Finished,
    /// The CPU is being watched.
    Watching,
    /// This machine's CPU since `CpuWatch`.
    CpuLoad(Box<headroom_result::CpuLoad>),
    /// The flushcheck begin or acknowledgement is on the listener's disk.
    FlushRecorded {
        /// The block's sequence number (0 for `FlushBegin`).
        seq: u64,
    },
    /// A page of a flushcheck run's acknowledged blocks, in offset order.
    FlushAcks {
        /// The run as its writer declared it.
        run: FlushRun,
        /// The latest acknowledged block at each offset.
        acks: Vec<FlushAck>,
        /// More pages follow (ask again after the last offset).
        more: bool,
    },
    /// The server's clock when it answered `Clock`.
    Clock {
        /// Seconds since the Unix epoch.
        unix: f64,
    },
}

/// What the server measured in one test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// Server time from the start of the streams to the end request (or the last byte of a fixed transfer), seconds.
    pub duration_s: f64,
    /// Each stream as the server saw it.
    pub streams: Vec<StreamReport>,
    /// CPU of the server process over the test.
    pub cpu: crate::process_cpu::CpuUse,
    /// Why the server ended the test early, if it did.
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    /// UDP receive figures of the server's receiving streams.
    pub udp: Option<crate::stats::UdpRecvSummary>,
    /// The server's per-core, per-thread and cgroup CPU figures over the test
    /// (absent from servers before it was added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_load: Option<Box<headroom_result::CpuLoad>>,
}

/// One stream as the server saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// Stream index, as the client numbered it.
    pub index: u32,
    /// Payload the server sent on it.
    pub bytes_sent: u64,
    /// Payload the server received on it.
    pub bytes_received: u64,
    /// TCP_INFO at the end, when the server sent on this stream.
    #[serde(default)]
    pub tcp_info: Option<crate::tcpinfo::TcpInfo>,
    /// The socket buffers the server's kernel granted this stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<headroom_result::BufferPair>,
    /// The server received on this stream without copying to user space.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rx_copy_skipped: bool,
    /// The server's kernel sent this stream's payload by reference
    /// (`--zerocopy`), every byte of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sent_by_reference: bool,
    /// UDP `--gsro`: the server sent bursts in one call on this stream (GSO,
    /// a sending stream) or its kernel coalesced what it received (GRO).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub udp_offloaded: bool,
}

/// Writes one framed JSON message.
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    w.write_all(&crate::socket::length_prefixed(&body))
}

/// What opened a headroom connection: the greeting's protocol version and the hello.
#[derive(Debug, Clone, PartialEq)]
pub struct Opening {
    /// The peer's protocol version.
    pub version: u16,
    /// What the connection is for.
    pub hello: Hello,
}

/// Reads the greeting and the hello frame that open every headroom connection
/// (the server's first parser of untrusted bytes; public for the fuzzer).
/// `None` = not a headroom greeting (drop silently); `Err` = a headroom
/// greeting followed by a bad hello (the server says why).
pub fn read_opening(r: &mut impl Read) -> io::Result<Option<Opening>> {
    let mut g = [0u8; GREETING_LEN];
    r.read_exact(&mut g)?;
    let Some(version) = parse_greeting(&g) else { return Ok(None) };
    let hello = read_frame(r, MAX_HELLO)?;
    Ok(Some(Opening { version, hello }))
}

/// Largest first message (hello) on a headroom connection.
pub const MAX_HELLO: u32 = 4096;

/// Reads one framed JSON message of at most `max` bytes.
pub fn read_frame<T: for<'de> Deserialize<'de>>(r: &mut impl Read, max: u32) -> io::Result<T> {
    decode(&crate::socket::read_length_prefixed(r, max, "message")?)
}

/// One frame's JSON body as a message.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> io::Result<T> {
    serde_json::from_slice(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad message: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_request_reads_as_the_struct_variant_older_peers_send() {
        // What a client from before `TestRequest` sent: the fields beside `op`.
        let older = r#"{"op":"test","udp":false,"direction":"upload","streams":2,"duration_ms":1000,"bytes":null,"len":1448,"rate_bits":null}"#;
        let Request::Test(asked) = serde_json::from_str(older).unwrap() else { panic!("not a test request") };
        assert_eq!((asked.streams, asked.len, asked.window, asked.skip_rx_copy), (2, 1448, None, false));
        let back: serde_json::Value = serde_json::to_value(Request::Test(asked)).unwrap();
        assert_eq!(back, serde_json::from_str::<serde_json::Value>(older).unwrap(), "the same fields, flat");
    }

    #[test]
    fn greeting_is_never_an_iperf3_cookie() {
        let g = greeting();
        // iperf3 cookies are [a-z2-7]{36} NUL: the greeting's first byte is outside that set.
        assert!(!(g[0].is_ascii_lowercase() || (b'2'..=b'7').contains(&g[0])));
        assert_eq!(parse_greeting(&g), Some(VERSION));
        let mut cookie = [b'a'; GREETING_LEN];
        cookie[11] = 0;
        assert_eq!(parse_greeting(&cookie), None);
    }

    #[test]
    fn frames_round_trip_and_limit() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &Request::End).unwrap();
        let back: Request = read_frame(&mut buf.as_slice(), MAX_FRAME).unwrap();
        assert_eq!(back, Request::End);
        let huge = [0xff, 0xff, 0xff, 0xff];
        let err = read_frame::<Request>(&mut huge.as_slice(), MAX_FRAME).unwrap_err();
        assert!(err.to_string().contains("exceeds"));
    }

    #[test]
    fn keys_round_trip() {
        let k = random_key();
        assert_eq!(key_from_hex(&key_hex(&k)), Some(k));
        assert_eq!(key_from_hex("zz"), None);
    }

    #[test]
    fn proofs_bind_token_and_both_nonces() {
        let (sn, cn) = (random_nonce(), random_nonce());
        let p = auth_proof("s3cret", &sn, &cn);
        assert!(auth_verify("s3cret", &sn, &cn, &p));
        assert!(!auth_verify("s3creT", &sn, &cn, &p));
        assert!(!auth_verify("s3cret", &cn, &sn, &p));
        assert!(!auth_verify("s3cret", &sn, &cn, &p[..31]));
    }
}
