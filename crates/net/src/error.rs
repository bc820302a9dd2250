//! Why a network test could not run or could not finish: the one error type
//! of the crate, each variant a line the user reads.

use crate::setting::{NetSetting, NetSpelling};
use headroom_units::setting::Message;
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
    #[error("{}", is_iperf3())]
    IsIperf3,
    /// The server asks for a token and none was given.
    #[error("{}", token_needed(server))]
    TokenNeeded {
        /// The server, as the user named it.
        server: String,
    },
    /// Any other socket error.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// [`NetError::IsIperf3`]'s line, naming the setting that chooses iperf3.
fn is_iperf3() -> Message<NetSetting> {
    Message::text("the server speaks iperf3, not headroom (use ").and(NetSetting::Protocol).then(" iperf3)")
}

/// [`NetError::TokenNeeded`]'s line, naming the token on both ends.
fn token_needed(server: &str) -> Message<NetSetting> {
    Message::text(format!("{server} requires a token: pass "))
        .and(NetSetting::Token)
        .then(" (the one given to `headroom serve ")
        .and(NetSetting::Token)
        .then("`)")
}

impl NetError {
    /// The error's line with each setting it names written as `spell`
    /// spells it (the front end's flags); `Display` names them plainly.
    pub fn spelled(&self, spell: NetSpelling) -> String {
        match self {
            NetError::IsIperf3 => is_iperf3().spelled(spell),
            NetError::TokenNeeded { server } => token_needed(server).spelled(spell),
            other => other.to_string(),
        }
    }
}
