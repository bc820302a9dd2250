//! What the client side of a network test is set by ([`NetSetting`]), as
//! its errors and warnings name it: the engine holds the setting, the front
//! end spells it (the binary's flags), so this crate names no flag.

use std::fmt;

/// What a network test is set by; errors and warnings name these and the
/// front end spells them ([`crate::NetEngine::spelling_settings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetSetting {
    /// The protocol spoken to the server (headroom's, iperf3's, iperf2's).
    Protocol,
    /// The shared secret a server asks for.
    Token,
    /// Which tests run.
    Tests,
    /// Measured time per test.
    Time,
    /// A fixed transfer's byte count.
    Bytes,
    /// The socket buffer asked for.
    Window,
}

impl NetSetting {
    /// The setting's own name, for an engine whose front end gives none.
    pub fn name(self) -> &'static str {
        match self {
            NetSetting::Protocol => "protocol",
            NetSetting::Token => "token",
            NetSetting::Tests => "tests",
            NetSetting::Time => "time",
            NetSetting::Bytes => "byte count",
            NetSetting::Window => "socket buffer",
        }
    }
}

impl fmt::Display for NetSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an engine names a setting: the front end's table, or
/// [`NetSetting::name`].
pub type NetSpelling = fn(NetSetting) -> &'static str;

/// `headroom net`'s spelling, as the binary gives it (tests here check the
/// words a user reads).
#[cfg(test)]
pub(crate) fn test_flags(setting: NetSetting) -> &'static str {
    match setting {
        NetSetting::Protocol => "--protocol",
        NetSetting::Token => "--token",
        NetSetting::Tests => "--tests",
        NetSetting::Time => "--time",
        NetSetting::Bytes => "--bytes",
        NetSetting::Window => "--window",
    }
}
