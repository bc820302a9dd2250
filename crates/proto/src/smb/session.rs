//! One SMB connection's setup and tear-down: connecting, NEGOTIATE,
//! SESSION_SETUP with NTLMv2 (and the signing key when the server requires
//! it), TREE_CONNECT, the credit ECHOs, and one request at a time with its
//! final answer ([`Session::call`]: CREATE and CLOSE of the test file), each
//! within the login's and the request's deadlines.
//!
//! What it owns: [`Session`] (the connection, the negotiated limits, the
//! login's deadline) and the errors of the login and of one call. What it
//! must not do: pipeline I/O (the worker's engine, `engine`, takes the
//! connection after setup) or send and receive but through `conn`.

use super::conn::{Body, Conn};
use super::wire::{self, status, Command};
use super::{ntlm, sign, Login, Target, LOGIN_TIMEOUT, REQUEST_TIMEOUT, TIMEOUT};
use crate::transport;
use crate::wait::Deadline;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// One authenticated, tree-connected TCP connection.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) conn: Conn,
    pub(super) neg: wire::Negotiated,
    /// Ctrl-C: every wait ends at once.
    pub(super) stop: Arc<AtomicBool>,
    /// The login's end, while logging in: each request's deadline is no later.
    pub(super) login_ends: Option<Deadline>,
}

impl Session {
    /// Connects, negotiates, authenticates, connects the tree, then gathers
    /// `want` credits with ECHOs (Samba grants at most 32 more per answer).
    pub(super) fn connect(t: &Target, want: u32) -> io::Result<Session> {
        let server = t.server.to_string();
        let login_ends = Deadline::after(LOGIN_TIMEOUT, "the SMB login");
        let sock = transport::connect(&t.addrs, &t.source, Duration::from_secs(5), &t.stop)
            .map_err(|e| io::Error::new(e.kind(), format!("connecting to the SMB server {server}: {e}")))?;
        sock.set_nodelay(true)?;
        let mut s = Session {
            conn: Conn::new(sock, server)?,
            neg: wire::Negotiated { dialect: 0, signing_required: false, max_transact: 0, max_read: 0, max_write: 0 },
            stop: Arc::clone(&t.stop),
            login_ends: Some(login_ends),
        };
        let (guid, salt) = (random(&s.conn.server)?, random(&s.conn.server)?);
        let (h, body) = s.call(Command::Negotiate, &wire::negotiate(&wire::DIALECTS, guid, salt))?;
        s.expect(&h, status::SUCCESS, "NEGOTIATE")?;
        s.neg = wire::parse_negotiate(&body).map_err(|e| s.conn.protocol_error(e))?;
        if s.neg.dialect < 0x0210 || !wire::DIALECTS.contains(&s.neg.dialect) {
            return Err(s.conn.protocol_error(format!(
                "the server chose dialect {}, headroom speaks SMB 2.1, 3.0 and 3.0.2",
                wire::dialect_name(s.neg.dialect)
            )));
        }
        s.authenticate(&t.login)?;
        let (h, _) =
            s.call(Command::TreeConnect, &wire::tree_connect(&format!("\\\\{}\\{}", t.server.host, t.share)))?;
        match h.status.0 {
            status::SUCCESS => s.conn.tree_id = h.tree_id,
            status::BAD_NETWORK_NAME => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "no share '{}' on {} ({}); list the shares with `smbclient -L {} -U USER`",
                        t.share, s.conn.server, h.status, t.server.host
                    ),
                ))
            }
            status::ACCESS_DENIED => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("share '{}' on {}: access denied ({}) for this user", t.share, s.conn.server, h.status),
                ))
            }
            _ => return Err(io::Error::other(format!("connecting to share '{}': {}", t.share, h.status))),
        }
        let mut rounds = 0;
        while s.conn.credits < want && rounds < 64 {
            let before = s.conn.credits;
            let (h, _) = s.call(Command::Echo, &wire::echo())?;
            s.expect(&h, status::SUCCESS, "ECHO")?;
            if s.conn.credits <= before {
                break; // the server grants no more
            }
            rounds += 1;
        }
        s.login_ends = None;
        Ok(s)
    }

    fn authenticate(&mut self, login: &Login) -> io::Result<()> {
        let negotiate = ntlm::negotiate();
        let (h, body) = self.call(Command::SessionSetup, &wire::session_setup(&negotiate))?;
        self.expect(&h, status::MORE_PROCESSING_REQUIRED, "SESSION_SETUP (NTLMSSP negotiate)")?;
        self.conn.session_id = h.session_id;
        let (_, token) = wire::parse_session_setup(&body).map_err(|e| self.conn.protocol_error(e))?;
        let challenge = ntlm::parse_challenge(token).map_err(|e| self.conn.protocol_error(e))?;
        let id = ntlm::Identity { user: &login.user, password: &login.password, domain: &login.domain };
        let client_challenge = random(&self.conn.server)?;
        let (auth, session_key) =
            ntlm::authenticate(&id, &negotiate, &challenge, client_challenge, ntlm::filetime_now());
        let (h, body) = self.call(Command::SessionSetup, &wire::session_setup(&auth))?;
        match h.status.0 {
            status::SUCCESS => {
                // Signing costs a MAC over every byte: only where the server
                // insists, as a NAS's own clients would (Samba's default).
                if !self.neg.signing_required {
                    return Ok(());
                }
                let (flags, _) = wire::parse_session_setup(&body).map_err(|e| self.conn.protocol_error(e))?;
                // A guest or anonymous session has no key: such sessions are
                // not signed (MS-SMB2 3.2.5.3.1), whatever the server requires.
                if let (Some(key), 0) = (session_key, flags & wire::SESSION_FLAG_GUEST_OR_NULL) {
                    self.conn.signing = Some(sign::SigningKey::for_dialect(self.neg.dialect, key));
                }
                Ok(())
            }
            status::LOGON_FAILURE | status::ACCESS_DENIED => {
                let who = if login.user.is_empty() {
                    "a guest session".to_string()
                } else {
                    format!("user '{}'", login.user)
                };
                Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "the SMB server {} refused {who} ({}): check the user and HEADROOM_SMB_PASSWORD",
                        self.conn.server, h.status
                    ),
                ))
            }
            _ => Err(io::Error::other(format!(
                "SESSION_SETUP on {}: the server answered {}",
                self.conn.server, h.status
            ))),
        }
    }

    fn expect(&self, h: &wire::ResponseHeader, want: u32, what: &str) -> io::Result<()> {
        if h.status.0 == want {
            Ok(())
        } else {
            Err(io::Error::other(format!("{what} on the SMB server {}: {}", self.conn.server, h.status)))
        }
    }

    /// One request and its final answer (set-up and tear-down only: the
    /// connection has nothing else in flight).
    pub(super) fn call(&mut self, command: Command, body: &[u8]) -> io::Result<(wire::ResponseHeader, Vec<u8>)> {
        let charge = u16::from(command != Command::Negotiate);
        let id = self.conn.request(command, charge, body, &[]);
        self.conn.heard_now();
        let mut ends = Deadline::after(REQUEST_TIMEOUT, "an SMB request");
        if let Some(login) = self.login_ends {
            ends = ends.min(login);
        }
        loop {
            let Some(a) = self.conn.next(None)? else {
                self.wait(ends)?;
                continue;
            };
            self.conn.credits = self.conn.credits.saturating_add(u32::from(a.h.credits));
            if a.h.message_id == u64::MAX || a.h.status.0 == status::PENDING {
                continue; // an oplock break, or an interim answer before the final one
            }
            if a.h.message_id != id {
                return Err(self
                    .conn
                    .protocol_error(format!("an answer to message {} while waiting for {id}", a.h.message_id)));
            }
            if a.h.command != command as u16 {
                return Err(self
                    .conn
                    .protocol_error(format!("command {} answered request {id} ({command:?})", a.h.command)));
            }
            let body = match a.body {
                Body::Frame(r) => self.conn.bytes(r).to_vec(),
                Body::Read(_) => Vec::new(),
            };
            return Ok((a.h, body));
        }
    }

    /// Waits for the connection by `ends` (and within the silence timeout
    /// since the server's last byte), then moves bytes both ways; Ctrl-C
    /// ends it at once.
    fn wait(&mut self, ends: Deadline) -> io::Result<()> {
        ends.left(&self.stop).map_err(|e| self.io_error(e))?;
        if self.conn.last_heard().elapsed() >= TIMEOUT {
            return Err(self.io_error(io::ErrorKind::TimedOut.into()));
        }
        self.conn.wait().and_then(|()| self.conn.read_some(None)).map_err(|e| self.io_error(e))
    }

    fn io_error(&self, e: io::Error) -> io::Error {
        let server = &self.conn.server;
        match e.kind() {
            io::ErrorKind::UnexpectedEof => io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("the SMB server {server} closed the connection"),
            ),
            io::ErrorKind::TimedOut if e.get_ref().is_some() => {
                io::Error::new(e.kind(), format!("the SMB server {server}: {e}"))
            }
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the SMB server {server} did not answer within {} s", TIMEOUT.as_secs()),
            ),
            _ => io::Error::new(e.kind(), format!("the SMB server {server}: {e}")),
        }
    }
}

/// The client GUID, preauth salt and NTLM client challenge: nonces, so a
/// failing getrandom ends the login (zeros would be accepted by servers and
/// make the NTLMv2 response replayable).
fn random<const N: usize>(server: &str) -> io::Result<[u8; N]> {
    random_from(server, getrandom::fill)
}

pub(super) fn random_from<const N: usize>(
    server: &str,
    fill: impl FnOnce(&mut [u8]) -> Result<(), getrandom::Error>,
) -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    fill(&mut b).map_err(|e| {
        io::Error::other(format!(
            "no random numbers for the login to the SMB server {server} (getrandom: {e}); check /dev/urandom and \
             the seccomp policy"
        ))
    })?;
    Ok(b)
}
