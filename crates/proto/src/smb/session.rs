//! One SMB connection's setup and tear-down: connecting, NEGOTIATE (3.1.1's
//! negotiate contexts and preauthentication hash), SESSION_SETUP with
//! NTLMv2 (the signing key when the server requires it or 3.1.1 wants
//! TREE_CONNECT signed; the encryption keys when the session, the share or
//! the user asks for encryption), TREE_CONNECT, the credit ECHOs, and one request at a time with its
//! final answer ([`Session::call`]: CREATE and CLOSE of the test file), each
//! within the login's and the request's deadlines.
//!
//! What it owns: [`Session`] (the connection, the negotiated limits, the
//! login's deadline) and the errors of the login and of one call. What it
//! must not do: pipeline I/O (the worker's engine, `engine`, takes the
//! connection after setup) or send and receive but through `conn`.

use super::conn::Conn;
use super::seal::Sealer;
use super::wire::{self, status, Command};
use super::{ntlm, sign, Login, Target, LOGIN_TIMEOUT, REQUEST_TIMEOUT, TIMEOUT};
use crate::transport;
use crate::url::{SmbCipher, SmbEncrypt};
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
    /// The session's encryption, ready for a share that requires it, until
    /// TREE_CONNECT says whether it does.
    pub(super) sealer: Option<Sealer>,
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
            neg: wire::Negotiated {
                dialect: 0,
                signing_required: false,
                max_transact: 0,
                max_read: 0,
                max_write: 0,
                cipher: None,
            },
            stop: Arc::clone(&t.stop),
            login_ends: Some(login_ends),
            sealer: None,
        };
        // Every cipher is offered unless the user named one: a session or
        // share that requires encryption is then served whatever it picks.
        let offered = match t.encrypt {
            Some(SmbEncrypt::Only(c)) => vec![c],
            _ => SmbCipher::ALL.to_vec(),
        };
        let (guid, salt) = (random(&s.conn.server)?, random(&s.conn.server)?);
        s.conn.preauth = Some([0; 64]);
        let (h, body) = s.call(Command::Negotiate, &wire::negotiate(&wire::DIALECTS, guid, salt, &offered))?;
        s.expect(&h, status::SUCCESS, "NEGOTIATE")?;
        s.neg = wire::parse_negotiate(&body, &offered).map_err(|e| s.conn.protocol_error(e))?;
        if s.neg.dialect < 0x0210 || !wire::DIALECTS.contains(&s.neg.dialect) {
            return Err(s.conn.protocol_error(format!(
                "the server chose dialect {}, headroom speaks SMB 2.1, 3.0, 3.0.2 and 3.1.1",
                wire::dialect_name(s.neg.dialect)
            )));
        }
        if s.neg.dialect != wire::SMB_311 {
            s.conn.preauth = None;
        }
        let encrypt = s.authenticate(&t.login, t.encrypt)?;
        if encrypt {
            s.conn.seal = s.sealer.take();
        }
        let (h, body) =
            s.call(Command::TreeConnect, &wire::tree_connect(&format!("\\\\{}\\{}", t.server.host, t.share)))?;
        match h.status.0 {
            status::SUCCESS => {
                s.conn.tree_id = h.tree_id;
                let flags = wire::parse_tree_connect(&body).map_err(|e| s.conn.protocol_error(e))?;
                if flags & wire::SHARE_FLAG_ENCRYPT_DATA != 0 && s.conn.seal.is_none() {
                    s.conn.seal = Some(s.sealer.take().ok_or_else(|| s.no_encryption(&offered, "the share"))?);
                }
                // 3.1.1 signs TREE_CONNECT for every authenticated user
                // (MS-SMB2 3.2.4.1.1); after it, only a server that
                // requires signing gets it, as on 3.0.
                if !s.neg.signing_required {
                    s.conn.signing = None;
                }
                s.sealer = None;
            }
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

    /// Why a session cannot encrypt as asked: no key, or no cipher in common.
    fn no_encryption(&self, offered: &[SmbCipher], who: &str) -> io::Error {
        let names: Vec<&str> = offered.iter().map(|c| c.name()).collect();
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{who} asks for encryption but the SMB server {} and headroom have no cipher in common on SMB {} \
                 (offered {}; 3.0 and 3.0.2 have only aes-128-ccm), or the session is a guest one without a key: \
                 log in as a user, or allow another cipher",
                self.conn.server,
                wire::dialect_name(self.neg.dialect),
                names.join(", ")
            ),
        )
    }

    /// Authenticates; whether the session must encrypt from here on (the
    /// server said so, or the user asked).
    fn authenticate(&mut self, login: &Login, asked: Option<SmbEncrypt>) -> io::Result<bool> {
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
                // The final answer is not part of the hash (MS-SMB2 3.2.5.3.1).
                let preauth = self.conn.preauth.take().unwrap_or([0; 64]);
                let (flags, _) = wire::parse_session_setup(&body).map_err(|e| self.conn.protocol_error(e))?;
                // A guest or anonymous session has no key: such sessions are
                // not signed (MS-SMB2 3.2.5.3.1), whatever the server requires.
                let key = session_key.filter(|_| flags & wire::SESSION_FLAG_GUEST_OR_NULL == 0);
                // Signing costs a MAC over every byte: only where the server
                // insists, as a NAS's own clients would (Samba's default), and
                // on 3.1.1 for TREE_CONNECT.
                if let Some(key) = key.filter(|_| self.neg.signing_required || self.neg.dialect == wire::SMB_311) {
                    self.conn.signing = Some(sign::SigningKey::for_dialect(self.neg.dialect, key, &preauth));
                }
                if let (Some(key), Some(cipher)) = (key, self.neg.cipher) {
                    let salt = random(&self.conn.server)?;
                    self.sealer =
                        Some(Sealer::new(self.neg.dialect, cipher, &key, &preauth, self.conn.session_id, salt));
                }
                let encrypt = flags & wire::SESSION_FLAG_ENCRYPT_DATA != 0 || asked.is_some();
                if encrypt && self.sealer.is_none() {
                    let offered = match asked {
                        Some(SmbEncrypt::Only(c)) => vec![c],
                        _ => SmbCipher::ALL.to_vec(),
                    };
                    let who = if asked.is_some() { "the URL's ?encrypt=" } else { "the server's session" };
                    return Err(self.no_encryption(&offered, who));
                }
                Ok(encrypt)
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
            // 3.1.1's preauthentication hash takes every answer of the
            // login but the final SESSION_SETUP (MS-SMB2 3.2.5.3.1).
            let last = command == Command::SessionSetup && a.h.status.0 == status::SUCCESS;
            if let (Some(hash), false) = (self.conn.preauth, last) {
                self.conn.preauth = Some(sign::preauth_chain(&hash, &[self.conn.message(&a.body)]));
            }
            return Ok((a.h, self.conn.body(&a.body).to_vec()));
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
