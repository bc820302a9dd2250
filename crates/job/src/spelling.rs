//! How the jobs' errors and warnings name the settings of each library:
//! [`Spelling`], the front end's tables handed in with a job's settings.
//! The libraries name a setting; only the binary knows its flag.

/// The front end's spelling of each library's settings (the binary's flags).
#[derive(Debug, Clone, Copy)]
pub struct Spelling {
    /// The disk tests' settings (`headroom_disk::Setting`).
    pub disk: fn(headroom_disk::Setting) -> &'static str,
    /// The network tests' settings on the client side (`headroom_net::NetSetting`).
    pub net: fn(headroom_net::NetSetting) -> &'static str,
    /// A server's own settings (`headroom_net::ServerSetting`): `run`'s
    /// loopback server names its limits with these.
    pub serve: fn(headroom_net::ServerSetting) -> &'static str,
}
