//! Why a network test could not run or could not finish: the one error type
//! of the crate, each variant a line the user reads.

use std::io;

/// Why a network test could not run or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The host name did not resolve.
    #[error("cannot resolve '{host}': {reason}")]
    Resolve {
        /// The name as given.
        host: String,
        /// Why, for the user.
        reason: String,
    },
    /// The TCP connection could not be made.
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// The address tried.
        addr: String,
        /// Why, with what to check.
        reason: String,
    },
    /// The server could not listen on its address (`serve --bind/--port`).
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address asked for.
        addr: String,
        /// Why, with an example that works.
        reason: String,
    },
    /// The server answered but said no (wrong token, busy, limits).
    #[error("{0}")]
    Refused(String),
    /// The peer broke the protocol or sent something we cannot use.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The connection failed while a test ran (link down, peer gone, stalled).
    #[error("{0}")]
    Broken(String),
    /// The server at this address speaks iperf3, not headroom (auto-detection falls back).
    #[error("the server speaks iperf3, not headroom (use --protocol iperf3)")]
    IsIperf3,
    /// Any other socket error.
    #[error("{0}")]
    Io(#[from] io::Error),
}
