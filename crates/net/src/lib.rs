//! headroom-net: the network engine behind `headroom serve`, `headroom net` and
//! `headroom ping`.
//!
//! It owns sockets and wire formats. Its modules are private; this page
//! re-exports what callers use:
//! - the client: [`Endpoint`] (where), [`Session`] (an authenticated headroom
//!   session: throughput, request/response, UDP echo) and
//!   [`iperf3_throughput`] (a stock iperf3 server); both protocols run ONE
//!   measurement loop behind a `Protocol` seam (`throughput/`);
//! - `headroom ping`: [`tcp_connect_series`], [`connect_once`];
//! - the server: [`Server`], [`ServerConfig`], [`check_bind_policy`]
//!   (`server/`: accept loop, admission, headroom side, iperf3 side, UDP,
//!   the far end's probes a [`ProbeHost`] runs for clients, and the
//!   flushcheck listener keeping runs in a [`FlushLedger`]);
//! - remote probes from the near end: [`RemoteEngine`] (a Runner engine whose
//!   probes run on a `headroom serve`), [`remote_inventory`];
//! - what was measured as `headroom_result::Probe`s: [`throughput_probe`],
//!   [`rr_probe`], [`echo_probe`], [`connect_probe`];
//! - the two wire formats as public modules, for peers and the fuzzers:
//!   [`wire`] (headroom protocol) and [`iperf3`] (iperf3 control protocol).
//!
//! Inside, `socket` is the bottom layer (bounds, readiness, length-prefixed
//! frames, connecting); `wire`, `iperf3` and `datapath` build on it and not
//! on each other in a circle.
//!
//! It must not print, draw progress bars or know about the CLI: callers get
//! per-second samples through a callback and typed results back. It never
//! sends traffic to an address other than the peer the caller named (client)
//! or the peer that connected (server).

mod address;
mod busy_poll;
mod client;
mod datapath;
mod error;
pub mod iperf2;
pub mod iperf3;
mod os;
mod ping;
mod probe;
mod probe_engine;
mod process_cpu;
mod remote;
mod server;
mod setting;
mod socket;
mod stall_watch;
mod stats;
mod tcpinfo;
mod throughput;
mod udp_header;
mod udp_offload;
pub mod wire;

pub use address::{resolve, split_host_port, Endpoint};
pub use busy_poll::BusyPollEnd;
pub use client::{BusyPoll, EchoResult, RrResult, Session};
pub use error::NetError;
pub use ping::{connect_once, tcp_connect_series, Close, ConnectResult, GRACEFUL_MIN_INTERVAL};
pub use probe::{connect_probe, echo_probe, rr_probe, throughput_id, throughput_probe};
pub use probe_engine::{probe_error, NetEngine, NetRequest, NetServer, NetTest, ProtocolChoice};
pub use process_cpu::CpuUse;
pub use remote::{
    is_absolute_on_far_end, peer_inventory, remote_inventory, ClockReading, FarCpuWatch, RemoteEngine, RunStep,
    MAX_CLOCK_OFFSET_S,
};
pub use server::{
    check_bind_policy, FlushLedger, ProbeHost, Server, ServerConfig, ServerHandle, ServerSetting, ServerSettingError,
    MAX_PLAN,
};
pub use setting::{NetSetting, NetSpelling};
pub use socket::{
    connect_within, spell_source_settings, spelled_source, Source, SourceError, SourceSetting, DEFAULT_TCP_LEN,
    DEFAULT_UDP_LEN, MAX_WINDOW,
};
pub use stats::{LatencyRecorder, UdpRecvStats, UdpRecvSummary};
pub use tcpinfo::TcpInfo;
pub use throughput::iperf2::{throughput as iperf2_throughput, IPERF2_PORT};
pub use throughput::iperf3::throughput as iperf3_throughput;
pub use throughput::{CopySkipped, ThroughputResult, ThroughputSpec, UdpOffload, UdpOffloadEnd};
pub use udp_header::UdpHeader;
pub use wire::TrafficDirection;

/// The default port, shared with iperf3 so one firewall rule serves both.
pub const DEFAULT_PORT: u16 = 5201;
