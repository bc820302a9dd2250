//! One SMB connection's setup and tear-down: connecting, NEGOTIATE,
//! SESSION_SETUP with NTLMv2 (and the signing key when the server requires
//! it), TREE_CONNECT, the credit ECHOs, and one request at a time with its
//! final answer ([`Session::call`]: CREATE and CLOSE of the test file), each
//! within the login's and the request's deadlines.
//!
//! What it owns: [`Session`] (message ids, credits, the session and tree
//! ids, the negotiated limits) and the login's errors. What it must not do:
//! pipeline I/O (the worker's engine, `engine`, takes the socket after setup).

use super::wire::{self, status, Command, RequestHeader, HEADER};
use super::{ntlm, sign, Login, Target, CREDIT_ASK, LOGIN_TIMEOUT, REQUEST_TIMEOUT, TIMEOUT};
use crate::transport;
use crate::wait::Deadline;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One authenticated, tree-connected TCP connection.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) sock: TcpStream,
    pub(super) next_id: u64,
    /// Credits held: message ids the server lets us use.
    pub(super) credits: u32,
    pub(super) session_id: u64,
    pub(super) tree_id: u32,
    pub(super) neg: wire::Negotiated,
    /// Set once authenticated when the server requires signed messages.
    pub(super) signing: Option<sign::SigningKey>,
    /// For messages.
    pub(super) server: String,
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
        sock.set_read_timeout(Some(TIMEOUT))?;
        sock.set_write_timeout(Some(TIMEOUT))?;
        let mut s = Session {
            sock,
            next_id: 0,
            credits: 1,
            session_id: 0,
            tree_id: 0,
            neg: wire::Negotiated { dialect: 0, signing_required: false, max_transact: 0, max_read: 0, max_write: 0 },
            signing: None,
            server,
            stop: Arc::clone(&t.stop),
            login_ends: Some(login_ends),
        };
        let (guid, salt) = (random(&s.server)?, random(&s.server)?);
        let (h, body) = s.call(Command::Negotiate, &wire::negotiate(&wire::DIALECTS, guid, salt))?;
        s.expect(&h, status::SUCCESS, "NEGOTIATE")?;
        s.neg = wire::parse_negotiate(&body).map_err(|e| s.protocol_error(e))?;
        if s.neg.dialect < 0x0210 || !wire::DIALECTS.contains(&s.neg.dialect) {
            return Err(s.protocol_error(format!(
                "the server chose dialect {}, headroom speaks SMB 2.1, 3.0 and 3.0.2",
                wire::dialect_name(s.neg.dialect)
            )));
        }
        s.authenticate(&t.login)?;
        let (h, _) =
            s.call(Command::TreeConnect, &wire::tree_connect(&format!("\\\\{}\\{}", t.server.host, t.share)))?;
        match h.status.0 {
            status::SUCCESS => s.tree_id = h.tree_id,
            status::BAD_NETWORK_NAME => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "no share '{}' on {} ({}); list the shares with `smbclient -L {} -U USER`",
                        t.share, s.server, h.status, t.server.host
                    ),
                ))
            }
            status::ACCESS_DENIED => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("share '{}' on {}: access denied ({}) for this user", t.share, s.server, h.status),
                ))
            }
            _ => return Err(io::Error::other(format!("connecting to share '{}': {}", t.share, h.status))),
        }
        let mut rounds = 0;
        while s.credits < want && rounds < 64 {
            let before = s.credits;
            let (h, _) = s.call(Command::Echo, &wire::echo())?;
            s.expect(&h, status::SUCCESS, "ECHO")?;
            if s.credits <= before {
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
        self.session_id = h.session_id;
        let (_, token) = wire::parse_session_setup(&body).map_err(|e| self.protocol_error(e))?;
        let challenge = ntlm::parse_challenge(token).map_err(|e| self.protocol_error(e))?;
        let id = ntlm::Identity { user: &login.user, password: &login.password, domain: &login.domain };
        let client_challenge = random(&self.server)?;
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
                let (flags, _) = wire::parse_session_setup(&body).map_err(|e| self.protocol_error(e))?;
                // A guest or anonymous session has no key: such sessions are
                // not signed (MS-SMB2 3.2.5.3.1), whatever the server requires.
                if let (Some(key), 0) = (session_key, flags & wire::SESSION_FLAG_GUEST_OR_NULL) {
                    self.signing = Some(sign::SigningKey::for_dialect(self.neg.dialect, key));
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
                        self.server, h.status
                    ),
                ))
            }
            _ => Err(io::Error::other(format!("SESSION_SETUP on {}: the server answered {}", self.server, h.status))),
        }
    }

    fn expect(&self, h: &wire::ResponseHeader, want: u32, what: &str) -> io::Result<()> {
        if h.status.0 == want {
            Ok(())
        } else {
            Err(io::Error::other(format!("{what} on the SMB server {}: {}", self.server, h.status)))
        }
    }

    pub(super) fn protocol_error(&self, what: impl std::fmt::Display) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, format!("the SMB server {} broke the protocol: {what}", self.server))
    }

    /// The header of the next request, consuming `charge` credits.
    pub(super) fn header(&mut self, command: Command, charge: u16) -> RequestHeader {
        let h = RequestHeader {
            command,
            credit_charge: charge,
            credit_request: charge.saturating_add(CREDIT_ASK),
            message_id: self.next_id,
            tree_id: self.tree_id,
            session_id: self.session_id,
        };
        self.next_id += u64::from(charge.max(1));
        self.credits = self.credits.saturating_sub(u32::from(charge.max(1)));
        h
    }

    /// One request and its final answer (blocking; set-up and tear-down only).
    pub(super) fn call(&mut self, command: Command, body: &[u8]) -> io::Result<(wire::ResponseHeader, Vec<u8>)> {
        let charge = u16::from(command != Command::Negotiate);
        let h = self.header(command, charge);
        let mut frame = Vec::with_capacity(4 + HEADER + body.len());
        wire::put_frame_start(&mut frame, &h, body.len());
        frame.extend_from_slice(body);
        if let Some(key) = &self.signing {
            let (header, body) = frame[4..].split_at_mut(HEADER);
            key.sign_in_place(header, &[body]);
        }
        let mut ends = Deadline::after(REQUEST_TIMEOUT, "an SMB request");
        if let Some(login) = self.login_ends {
            ends = ends.min(login);
        }
        self.transfer(Some(&frame), &mut [], ends)?;
        loop {
            let mut prefix = [0u8; 4];
            self.transfer(None, &mut prefix, ends)?;
            let len = wire::frame_len(prefix).map_err(|e| self.protocol_error(e))?;
            let mut msg = vec![0u8; len];
            self.transfer(None, &mut msg, ends)?;
            let r = wire::parse_header(&msg).map_err(|e| self.protocol_error(e))?;
            self.credits = self.credits.saturating_add(u32::from(r.credits));
            if r.message_id == u64::MAX || r.status.0 == status::PENDING {
                continue; // an oplock break, or an interim answer before the final one
            }
            if r.message_id != h.message_id {
                return Err(self.protocol_error(format!(
                    "an answer to message {} while waiting for {}",
                    r.message_id, h.message_id
                )));
            }
            if r.command != command as u16 {
                return Err(self
                    .protocol_error(format!("command {} answered request {} ({command:?})", r.command, h.message_id)));
            }
            msg.drain(..HEADER);
            return Ok((r, msg));
        }
    }

    /// Sends `out` whole, or fills `into`, by `ends` (and within the silence
    /// timeout between bytes); Ctrl-C ends it at once.
    fn transfer(&mut self, out: Option<&[u8]>, into: &mut [u8], ends: Deadline) -> io::Result<()> {
        let total = out.map_or(into.len(), <[u8]>::len);
        let (mut done, mut heard) = (0, Instant::now());
        while done < total {
            let slice = ends.left(&self.stop).map_err(|e| self.io_error(e))?;
            if heard.elapsed() >= TIMEOUT {
                return Err(self.io_error(io::ErrorKind::TimedOut.into()));
            }
            let r = match out {
                Some(out) => self.sock.set_write_timeout(Some(slice)).and_then(|()| self.sock.write(&out[done..])),
                None => self.sock.set_read_timeout(Some(slice)).and_then(|()| self.sock.read(&mut into[done..])),
            };
            match r {
                Ok(0) => return Err(self.io_error(io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => (done, heard) = (done + n, Instant::now()),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
        Ok(())
    }

    fn io_error(&self, e: io::Error) -> io::Error {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("the SMB server {} closed the connection", self.server),
            ),
            io::ErrorKind::TimedOut if e.get_ref().is_some() => {
                io::Error::new(e.kind(), format!("the SMB server {}: {e}", self.server))
            }
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the SMB server {} did not answer within {} s", self.server, TIMEOUT.as_secs()),
            ),
            _ => io::Error::new(e.kind(), format!("the SMB server {}: {e}", self.server)),
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
