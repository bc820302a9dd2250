//! The SMB client: `smb://[DOMAIN;][USER@]HOST[:PORT]/SHARE[/DIR]` targets.
//!
//! A minimal SMB2/3 client written for headroom (MS-SMB2): NEGOTIATE of 2.1,
//! 3.0 or 3.0.2 with large MTU (not 3.1.1: see [`wire::DIALECTS`]), SESSION_SETUP with NTLMv2 (or an
//! anonymous session), TREE_CONNECT, CREATE of the test file, and READ,
//! WRITE (write-through for `--sync dsync`) and FLUSH pipelined on one TCP
//! connection per worker. The queue depth is the number of requests in
//! flight on that connection, each charged 1 credit per 64 KiB; when the
//! server's credits do not cover the depth asked, the depth granted is
//! recorded (the probe warns). A server that requires signing gets signed
//! requests (HMAC-SHA256 on 2.1, AES-CMAC on 3.0.x: `sign.rs`); a server
//! that does not require it gets none, as Samba's own clients do by default.
//! Encryption is not done: a share that requires it is refused.
//!
//! Why not the `smb` crate (smb-rs 0.12): it pulls in sspi (Kerberos, a
//! TLS stack), reqwest and tokio, and its client is async, so an engine that
//! blocks in poll(2) on its own socket would wrap a runtime and channels per
//! worker. What headroom needs (one file, read, write, flush, NTLMv2) is a
//! few hundred lines of wire format that are tested here.
//!
//! The test file is `headroom-disk-<pid>.tmp`, created exclusively and
//! opened with delete-on-close (unless `--keep`): the server removes it when
//! the share's handle closes, also when headroom dies, as soon as the
//! server notices the connection is gone. Only a server that dies itself
//! leaves it behind; the error then names it.

#[cfg(test)]
mod captured_frames;
mod ntlm;
mod sign;
mod wire;

use crate::transport::{self, Origin};
use crate::url::SmbUrl;
use crate::wait::{self, Deadline};
use crate::ProtoError;
use headroom_disk::{BufferPool, Completion, IoEngine, IoKind, IoUnit, Share, ShareIo, ShareKind};
use headroom_disk::{SyncMode, TargetOptions};
use headroom_result::ProtocolInfo;
use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wire::{status, Command, FileId, NtStatus, RequestHeader, HEADER};

/// A server that answers nothing for this long is taken for dead.
const TIMEOUT: Duration = Duration::from_secs(8);
/// Connecting, NEGOTIATE, SESSION_SETUP, TREE_CONNECT and the credit ECHOs
/// together: a server that trickles bytes cannot hold a login open longer.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(if cfg!(test) { 3 } else { 15 });
/// Any one request, from its sending to its final answer (interim answers
/// included): the SCSI layer's default command timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(if cfg!(test) { 3 } else { 30 });
/// Credits asked for on top of what a request consumes, until the window is full.
const CREDIT_ASK: u16 = 256;

/// Prepares a target on an SMB server: connects, authenticates, and creates
/// the test file in the URL's directory.
pub fn open(
    url: &SmbUrl,
    opts: &TargetOptions,
    credentials: &crate::Credentials,
    source: &crate::Source,
) -> Result<Box<dyn Share>, ProtoError> {
    let login = Login::from(url, credentials)?;
    let addrs = transport::resolve(&url.server.addr())
        .map_err(|e| ProtoError::Unreachable(format!("smb://{}: {e}", url.server)))?;
    let name = headroom_disk::test_file_name();
    let path = if url.dir.is_empty() { name.clone() } else { format!("{}\\{name}", url.dir.replace('/', "\\")) };
    let shown = format!(
        "smb://{}{}/{}/{}",
        url.user.as_ref().map(|u| format!("{u}@")).unwrap_or_default(),
        url.server,
        url.share,
        path.replace('\\', "/")
    );
    let target = Target {
        addrs,
        source: source.clone(),
        server: url.server.clone(),
        share: url.share.clone(),
        login,
        shown: shown.clone(),
        stop: Arc::clone(&opts.stop),
    };
    let mut session = Session::connect(&target, 1).map_err(|e| ProtoError::io(&e))?;
    let options = wire::FILE_NON_DIRECTORY_FILE | if opts.keep { 0 } else { wire::FILE_DELETE_ON_CLOSE };
    let rw = wire::access::READ_DATA
        | wire::access::WRITE_DATA
        | wire::access::READ_ATTRIBUTES
        | wire::access::WRITE_ATTRIBUTES
        | wire::access::DELETE;
    let (h, body) = session
        .call(Command::Create, &wire::create(&path, rw, wire::FILE_CREATE, options))
        .map_err(|e| ProtoError::io(&e).context(format_args!("creating {shown}")))?;
    let file = match h.status.0 {
        status::SUCCESS => wire::parse_create(&body).map_err(|e| ProtoError::Protocol(format!("{shown}: {e}")))?.0,
        status::OBJECT_PATH_NOT_FOUND | status::OBJECT_NAME_NOT_FOUND | status::NOT_A_DIRECTORY => {
            return Err(ProtoError::Usage(format!(
                "no directory '{}' in share '{}' on {} ({}); give an existing directory, e.g. smb://{}/{}",
                url.dir, url.share, url.server, h.status, url.server, url.share
            )))
        }
        status::OBJECT_NAME_COLLISION => {
            return Err(ProtoError::Usage(format!(
                "{shown} exists already and headroom only writes files it creates: remove it if it is a leftover"
            )))
        }
        status::ACCESS_DENIED => {
            return Err(ProtoError::Usage(format!(
                "creating {shown}: access denied ({}); the user needs write access to the directory",
                h.status
            )))
        }
        _ => return Err(ProtoError::Usage(format!("creating {shown}: the server answered {}", h.status))),
    };
    let granted = Granted::from_session(&session, &target.source);
    Ok(Box::new(SmbShare {
        target,
        path,
        size: opts.size.unwrap_or(opts.default_size),
        owner: Mutex::new(Some((session, file))),
        granted: Arc::new(Mutex::new(granted)),
        server_gone: Arc::new(AtomicBool::new(false)),
    }))
}

/// Who authenticates; `Debug` hides the password.
#[derive(Clone)]
struct Login {
    user: String,
    password: String,
    domain: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Login({:?}\\{:?})", self.domain, self.user)
    }
}

impl Login {
    fn from(url: &SmbUrl, c: &crate::Credentials) -> Result<Login, ProtoError> {
        let user = url.user.clone().or_else(|| c.get("HEADROOM_SMB_USER").map(str::to_string)).unwrap_or_default();
        let domain =
            url.domain.clone().or_else(|| c.get("HEADROOM_SMB_DOMAIN").map(str::to_string)).unwrap_or_default();
        let password = c.get("HEADROOM_SMB_PASSWORD").map(str::to_string);
        if !user.is_empty() && password.is_none() {
            return Err(ProtoError::Usage(format!(
                "smb://{user}@{}/{}: no password for '{user}'; set HEADROOM_SMB_PASSWORD or give --credentials FILE \
                 with HEADROOM_SMB_PASSWORD=... (leave the user out for a guest session)",
                url.server, url.share
            )));
        }
        Ok(Login { user, password: password.unwrap_or_default(), domain })
    }
}

/// Where and as whom every connection of one share goes.
#[derive(Debug, Clone)]
struct Target {
    /// The server's addresses, tried in turn.
    addrs: Vec<SocketAddr>,
    /// Where every connection leaves from (`--bind`, `--interface`).
    source: crate::Source,
    server: crate::url::Server,
    share: String,
    login: Login,
    /// The test file's URL, for messages.
    shown: String,
    /// Ctrl-C: every wait ends at once.
    stop: Arc<AtomicBool>,
}

/// What the server granted, as recorded in the probe's spec.protocol.
#[derive(Debug, Clone, Default)]
struct Granted {
    dialect: u16,
    signing: bool,
    max_read: u32,
    max_write: u32,
    max_transact: u32,
    /// The most credits one connection held.
    credits: u32,
    /// Requests in flight the credits allowed, when fewer than asked.
    depth_capped: Option<u32>,
    /// Where the first connection left from (all leave from the same source).
    origin: Origin,
}

impl Granted {
    fn from_session(s: &Session, source: &crate::Source) -> Granted {
        Granted {
            dialect: s.neg.dialect,
            signing: s.signing.is_some(),
            max_read: s.neg.max_read,
            max_write: s.neg.max_write,
            max_transact: s.neg.max_transact,
            credits: s.credits,
            depth_capped: None,
            origin: Origin::of(&s.sock, source),
        }
    }
}

/// One test file on an SMB share.
struct SmbShare {
    target: Target,
    /// Share-relative path, `\`-separated.
    path: String,
    size: u64,
    /// The connection holding the delete-on-close handle.
    owner: Mutex<Option<(Session, FileId)>>,
    granted: Arc<Mutex<Granted>>,
    /// A worker already said the server went away (and named the file left).
    server_gone: Arc<AtomicBool>,
}

impl std::fmt::Debug for SmbShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmbShare").field("url", &self.target.shown).field("size", &self.size).finish()
    }
}

impl Share for SmbShare {
    fn url(&self) -> String {
        self.target.shown.clone()
    }

    fn kind(&self) -> ShareKind {
        ShareKind::TestFile
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn capacity(&self) -> u64 {
        self.size
    }

    fn block_size(&self) -> u64 {
        1
    }

    fn connect(&self, io: ShareIo) -> io::Result<Box<dyn IoEngine + Send>> {
        let charge = u32::from(wire::credit_charge(io.buf_size as u32));
        let want = (io.depth as u32 * charge).max(1);
        let mut session = Session::connect(&self.target, want)?;
        let limit = if io.write { session.neg.max_write.min(session.neg.max_read) } else { session.neg.max_read };
        if io.buf_size as u64 > u64::from(limit) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a block of {} bytes is more than the server's MaxReadSize/MaxWriteSize ({} / {} bytes); \
                     use a smaller --bs",
                    io.buf_size, session.neg.max_read, session.neg.max_write
                ),
            ));
        }
        let mut access = wire::access::READ_DATA | wire::access::READ_ATTRIBUTES;
        if io.write {
            access |= wire::access::WRITE_DATA | wire::access::WRITE_ATTRIBUTES;
        }
        let (h, body) = session.call(Command::Create, &wire::create(&self.path, access, wire::FILE_OPEN, 0))?;
        if h.status.0 != status::SUCCESS {
            return Err(io::Error::other(format!("opening {}: the server answered {}", self.target.shown, h.status)));
        }
        let (file, _) = wire::parse_create(&body).map_err(io::Error::other)?;
        {
            let mut g = self.granted.lock().expect("granted lock");
            g.credits = g.credits.max(session.credits);
            let allowed = session.credits / charge;
            if (allowed as usize) < io.depth {
                g.depth_capped = Some(g.depth_capped.map_or(allowed, |d| d.min(allowed)));
            }
        }
        session.sock.set_nonblocking(true)?;
        Ok(Box::new(SmbEngine {
            bufs: BufferPool::new(io.depth.max(1), io.buf_size.max(1), 4096),
            session,
            file,
            write_through: io.sync == SyncMode::Dsync,
            waiting: VecDeque::new(),
            queued: Vec::new(),
            inflight: HashMap::new(),
            out: VecDeque::new(),
            rx: Rx::default(),
            done: Vec::new(),
            granted: Arc::clone(&self.granted),
            peak_credits: 0,
            server_gone: Arc::clone(&self.server_gone),
            shown: self.target.shown.clone(),
        }))
    }

    fn info(&self) -> ProtocolInfo {
        let g = self.granted.lock().expect("granted lock").clone();
        let mut granted = std::collections::BTreeMap::new();
        granted.insert("MaxReadSize".to_string(), u64::from(g.max_read));
        granted.insert("MaxWriteSize".to_string(), u64::from(g.max_write));
        granted.insert("MaxTransactSize".to_string(), u64::from(g.max_transact));
        granted.insert("credits".to_string(), u64::from(g.credits));
        granted.insert("signing".to_string(), u64::from(g.signing));
        ProtocolInfo {
            name: "smb".into(),
            version: Some(wire::dialect_name(g.dialect)),
            server: self.target.server.addr(),
            queue_depth_granted: g.depth_capped,
            granted,
            source_address: g.origin.address.map(|a| a.to_string()),
            interface: g.origin.interface,
        }
    }
}

impl Drop for SmbShare {
    fn drop(&mut self) {
        let Some((mut session, file)) = self.owner.lock().map(|mut o| o.take()).unwrap_or(None) else { return };
        // Removing the test file is what Ctrl-C is waiting for: not stopped by it.
        session.stop = Arc::default();
        let result = session.call(Command::Close, &wire::close(&file));
        let failed = match result {
            Ok((h, _)) if h.status.0 == status::SUCCESS => None,
            Ok((h, _)) => Some(h.status.to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = failed {
            if !self.server_gone.load(Ordering::Relaxed) {
                eprintln!("headroom: could not remove {} ({why}); remove it by hand", self.target.shown);
            }
        }
    }
}

/// One authenticated, tree-connected TCP connection.
#[derive(Debug)]
struct Session {
    sock: TcpStream,
    next_id: u64,
    /// Credits held: message ids the server lets us use.
    credits: u32,
    session_id: u64,
    tree_id: u32,
    neg: wire::Negotiated,
    /// Set once authenticated when the server requires signed messages.
    signing: Option<sign::SigningKey>,
    /// For messages.
    server: String,
    /// Ctrl-C: every wait ends at once.
    stop: Arc<AtomicBool>,
    /// The login's end, while logging in: each request's deadline is no later.
    login_ends: Option<Deadline>,
}

impl Session {
    /// Connects, negotiates, authenticates, connects the tree, then gathers
    /// `want` credits with ECHOs (Samba grants at most 32 more per answer).
    fn connect(t: &Target, want: u32) -> io::Result<Session> {
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

    fn protocol_error(&self, what: impl std::fmt::Display) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, format!("the SMB server {} broke the protocol: {what}", self.server))
    }

    /// The header of the next request, consuming `charge` credits.
    fn header(&mut self, command: Command, charge: u16) -> RequestHeader {
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
    fn call(&mut self, command: Command, body: &[u8]) -> io::Result<(wire::ResponseHeader, Vec<u8>)> {
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

fn random_from<const N: usize>(
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

/// A request being sent: its header and body, then maybe a buffer's data.
struct Outgoing {
    head: Vec<u8>,
    data: Option<(u16, usize)>,
    sent: usize,
}

/// What the bytes arriving next are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The 4-byte direct-TCP prefix, into `head`.
    Prefix,
    /// The header and a READ response's head, into `head`.
    Head,
    /// Padding before a READ's data, dropped.
    SkipPre(usize),
    /// A READ's data, straight into its buffer: (buffer, bytes so far, total).
    Data(u16, usize, usize),
    /// Bytes after a READ's data, dropped.
    SkipPost(usize),
    /// The rest of any other answer, into `rest`.
    Rest,
}

/// The frame being received.
struct Rx {
    phase: Phase,
    /// Prefix, then up to [`RX_HEAD`] bytes of the frame.
    head: Vec<u8>,
    /// Frame length from the prefix.
    frame: usize,
    /// The frame after `head`, for answers other than a READ's data.
    rest: Vec<u8>,
    /// Bytes a streamed READ delivered.
    read: Option<usize>,
}

impl Default for Rx {
    fn default() -> Self {
        Rx { phase: Phase::Prefix, head: Vec::with_capacity(4 + RX_HEAD), frame: 0, rest: Vec::new(), read: None }
    }
}

/// Bytes of a frame read before deciding where the rest goes: the header
/// and a READ response's 16-byte head.
const RX_HEAD: usize = HEADER + 16;

/// One worker's pipelined connection.
struct SmbEngine {
    session: Session,
    file: FileId,
    bufs: BufferPool,
    write_through: bool,
    /// Queued since the last commit.
    queued: Vec<IoUnit>,
    /// Committed, waiting for credits.
    waiting: VecDeque<IoUnit>,
    /// Sent, by message id, with when it was issued.
    inflight: HashMap<u64, (IoUnit, Instant)>,
    out: VecDeque<Outgoing>,
    rx: Rx,
    done: Vec<Completion>,
    granted: Arc<Mutex<Granted>>,
    /// The most credits held, for [`Granted::credits`].
    peak_credits: u32,
    server_gone: Arc<AtomicBool>,
    shown: String,
}

impl SmbEngine {
    /// Turns waiting I/Os into requests while the credits allow.
    fn issue(&mut self) {
        while let Some(io) = self.waiting.front().copied() {
            let charge = if io.kind == IoKind::Fsync { 1 } else { wire::credit_charge(io.len) };
            if self.session.credits < u32::from(charge) {
                break;
            }
            self.waiting.pop_front();
            let (command, body, data) = match io.kind {
                IoKind::Read => (Command::Read, wire::read(&self.file, io.offset, io.len), None),
                IoKind::Write => (
                    Command::Write,
                    wire::write(&self.file, io.offset, io.len, self.write_through),
                    Some((io.buf_index, io.len as usize)),
                ),
                IoKind::Fsync => (Command::Flush, wire::flush(&self.file), None),
            };
            let h = self.session.header(command, charge);
            let mut head = Vec::with_capacity(4 + HEADER + body.len());
            wire::put_frame_start(&mut head, &h, body.len() + data.map_or(0, |d| d.1));
            head.extend_from_slice(&body);
            if let Some(key) = &self.session.signing {
                let payload: &[u8] = match data {
                    Some((i, len)) => &self.bufs.slice_mut(i as usize)[..len],
                    None => &[],
                };
                let (header, body) = head[4..].split_at_mut(HEADER);
                key.sign_in_place(header, &[body, payload]);
            }
            self.inflight.insert(h.message_id, (io, Instant::now()));
            self.out.push_back(Outgoing { head, data, sent: 0 });
        }
    }

    /// Sends what the socket takes now. Returns whether anything was sent.
    fn send(&mut self) -> io::Result<bool> {
        let mut progress = false;
        while let Some(o) = self.out.front_mut() {
            let data: &[u8] = match o.data {
                Some((i, len)) => &self.bufs.slice_mut(i as usize)[..len],
                None => &[],
            };
            let total = o.head.len() + data.len();
            let r = if o.sent < o.head.len() {
                self.session.sock.write_vectored(&[IoSlice::new(&o.head[o.sent..]), IoSlice::new(data)])
            } else {
                self.session.sock.write(&data[o.sent - o.head.len()..])
            };
            match r {
                Ok(0) => return Err(self.gone()),
                Ok(n) => {
                    o.sent += n;
                    progress = true;
                    if o.sent == total {
                        self.out.pop_front();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(e)),
            }
        }
        Ok(progress)
    }

    /// Reads what arrived and completes I/Os. Returns whether anything was read.
    fn receive(&mut self) -> io::Result<bool> {
        let mut progress = false;
        loop {
            let sock = &mut self.session.sock;
            let rx = &mut self.rx;
            let r = match rx.phase {
                Phase::Prefix | Phase::Head => {
                    let want = if rx.phase == Phase::Prefix { 4 } else { 4 + RX_HEAD.min(rx.frame) };
                    let at = rx.head.len();
                    rx.head.resize(want, 0);
                    let r = sock.read(&mut rx.head[at..]);
                    rx.head.truncate(at + *r.as_ref().unwrap_or(&0));
                    r
                }
                Phase::SkipPre(n) | Phase::SkipPost(n) => {
                    let mut sink = [0u8; 256];
                    sock.read(&mut sink[..n.min(256)])
                }
                Phase::Data(buf, got, total) => sock.read(&mut self.bufs.slice_mut(buf as usize)[got..total]),
                Phase::Rest => {
                    let at = rx.rest.len();
                    rx.rest.resize(rx.frame - (rx.head.len() - 4), 0);
                    let r = sock.read(&mut rx.rest[at..]);
                    rx.rest.truncate(at + *r.as_ref().unwrap_or(&0));
                    r
                }
            };
            match r {
                Ok(0) => return Err(self.gone()),
                Ok(n) => {
                    progress = true;
                    self.advance(n)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(progress),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(e)),
            }
        }
    }

    /// Moves the receive state on after `n` bytes arrived; completes a frame.
    fn advance(&mut self, n: usize) -> io::Result<()> {
        let rx = &mut self.rx;
        match rx.phase {
            Phase::Prefix => {
                if rx.head.len() == 4 {
                    let prefix: [u8; 4] = rx.head[..4].try_into().expect("4 bytes");
                    rx.frame = wire::frame_len(prefix).map_err(|e| self.session.protocol_error(e))?;
                    rx.phase = Phase::Head;
                }
                return Ok(());
            }
            Phase::Head => {
                if rx.head.len() < 4 + RX_HEAD.min(rx.frame) {
                    return Ok(());
                }
                self.rx.phase = self.after_head()?;
            }
            Phase::SkipPre(left) => {
                self.rx.phase = match left - n {
                    0 => match self.rx.read {
                        Some(len) => Phase::Data(self.read_buffer()?, 0, len),
                        None => Phase::Rest,
                    },
                    more => Phase::SkipPre(more),
                };
            }
            Phase::Data(buf, got, total) => {
                let got = got + n;
                let pre = self.pre_skip();
                let rx = &mut self.rx;
                rx.phase = if got < total {
                    Phase::Data(buf, got, total)
                } else {
                    let after = rx.frame - (rx.head.len() - 4) - rx.read.unwrap_or(0) - pre;
                    if after > 0 {
                        Phase::SkipPost(after)
                    } else {
                        Phase::Prefix
                    }
                };
            }
            Phase::SkipPost(left) => rx.phase = if left > n { Phase::SkipPost(left - n) } else { Phase::Prefix },
            Phase::Rest => {
                rx.phase = if rx.head.len() - 4 + rx.rest.len() < rx.frame { Phase::Rest } else { Phase::Prefix };
            }
        }
        if self.rx.phase == Phase::Prefix {
            self.complete_frame()?;
        }
        Ok(())
    }

    /// Bytes of padding between a READ response's head and its data.
    fn pre_skip(&self) -> usize {
        let body = &self.rx.head[4 + HEADER..];
        (body[2] as usize).saturating_sub(RX_HEAD)
    }

    fn read_buffer(&self) -> io::Result<u16> {
        let h = wire::parse_header(&self.rx.head[4..]).map_err(|e| self.session.protocol_error(e))?;
        Ok(self.inflight.get(&h.message_id).expect("checked in after_head").0.buf_index)
    }

    /// Where the rest of a frame goes, once its head is in: a successful
    /// READ's data straight into the I/O's buffer, anything else into memory.
    fn after_head(&mut self) -> io::Result<Phase> {
        let frame = self.rx.frame;
        let h = wire::parse_header(&self.rx.head[4..]).map_err(|e| self.session.protocol_error(e))?;
        if h.command == Command::Read as u16 && h.status.0 == status::SUCCESS && frame >= RX_HEAD {
            // Only a READ's answer goes into its buffer; a READ answer to
            // anything else is refused whole by `result`.
            if let Some((io, _)) = self.inflight.get(&h.message_id).filter(|(io, _)| io.kind == IoKind::Read) {
                let (offset, len) =
                    wire::parse_read(&self.rx.head[4 + HEADER..]).map_err(|e| self.session.protocol_error(e))?;
                if offset < RX_HEAD || offset + len > frame || len > io.len as usize {
                    return Err(self.session.protocol_error(format!(
                        "a READ answer of {len} bytes at offset {offset} in a frame of {frame} bytes (asked {})",
                        io.len
                    )));
                }
                self.rx.read = Some(len);
                let pre = offset - RX_HEAD;
                return Ok(match (pre, len) {
                    (_, 0) if frame > RX_HEAD => Phase::SkipPost(frame - RX_HEAD),
                    (_, 0) => Phase::Prefix,
                    (0, _) => Phase::Data(io.buf_index, 0, len),
                    _ => Phase::SkipPre(pre),
                });
            }
        }
        Ok(if frame > RX_HEAD { Phase::Rest } else { Phase::Prefix })
    }

    fn complete_frame(&mut self) -> io::Result<()> {
        let rx = std::mem::take(&mut self.rx);
        let h = wire::parse_header(&rx.head[4..]).map_err(|e| self.session.protocol_error(e))?;
        if wire::le32(&rx.head[4..], 20) != 0 {
            return Err(self.session.protocol_error("a compounded answer to a request that was not compounded"));
        }
        self.session.credits = self.session.credits.saturating_add(u32::from(h.credits));
        self.peak_credits = self.peak_credits.max(self.session.credits);
        if h.message_id == u64::MAX || h.status.0 == status::PENDING {
            return Ok(()); // an oplock break, or an interim answer (credits only)
        }
        let Some((io, _)) = self.inflight.remove(&h.message_id) else {
            return Err(self
                .session
                .protocol_error(format!("an answer to message {} that was never sent", h.message_id)));
        };
        let result = match rx.read {
            Some(len) => len as i64,
            None => {
                let mut body = rx.head[4 + HEADER..].to_vec();
                body.extend_from_slice(&rx.rest);
                self.result(&h, io, &body)?
            }
        };
        self.done.push(Completion { tag: io.tag, result });
        Ok(())
    }

    /// The completion result of an answer that was read whole.
    fn result(&mut self, h: &wire::ResponseHeader, io: IoUnit, body: &[u8]) -> io::Result<i64> {
        let expected = match io.kind {
            IoKind::Read => Command::Read,
            IoKind::Write => Command::Write,
            IoKind::Fsync => Command::Flush,
        };
        if h.command != expected as u16 {
            return Err(self
                .session
                .protocol_error(format!("command {} answered request {} ({expected:?})", h.command, h.message_id)));
        }
        Ok(match (io.kind, h.status.0) {
            (IoKind::Read, status::END_OF_FILE) => 0,
            (IoKind::Read, status::SUCCESS) => {
                return Err(self.session.protocol_error(format!(
                    "a READ answer of {} bytes, too short to hold its data (request {})",
                    body.len() + HEADER,
                    h.message_id
                )))
            }
            (IoKind::Write, status::SUCCESS) => {
                let count = wire::parse_write(body).map_err(|e| self.session.protocol_error(e))?;
                if count > io.len {
                    return Err(self.session.protocol_error(format!(
                        "a WRITE of {} bytes answered as {count} bytes written (request {})",
                        io.len, h.message_id
                    )));
                }
                i64::from(count)
            }
            (IoKind::Fsync, status::SUCCESS) => 0,
            (_, s) => -i64::from(NtStatus(s).errno()),
        })
    }

    fn gone(&self) -> io::Error {
        self.lost(io::Error::new(io::ErrorKind::ConnectionAborted, "it closed the connection"))
    }

    /// The connection broke mid-test: say so once, naming the file that
    /// stays if the server itself died (delete-on-close needs a live server).
    fn lost(&self, e: io::Error) -> io::Error {
        self.server_gone.store(true, Ordering::Relaxed);
        let cause = e.to_string().split(" (os error").next().unwrap_or_default().to_lowercase();
        io::Error::new(
            e.kind(),
            format!(
                "the SMB server {} went away mid-test ({cause}); if the server died, {} is left on it",
                self.session.server, self.shown
            ),
        )
    }
}

impl IoEngine for SmbEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.bufs.slice_mut(index as usize)
    }

    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        if usize::from(io.buf_index) >= self.bufs.len() || io.len as usize > self.bufs.buf_len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "I/O outside the engine's buffers"));
        }
        self.queued.push(io);
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        self.waiting.extend(self.queued.drain(..));
        self.issue();
        self.send().map(|_| ())
    }

    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let mut last = Instant::now();
        loop {
            let sent = self.send()?;
            let got = self.receive()?;
            self.issue();
            if sent || got {
                last = Instant::now();
            }
            if self.done.len() >= min || (self.inflight.is_empty() && self.waiting.is_empty() && self.out.is_empty()) {
                break;
            }
            if sent || got {
                continue;
            }
            if self.inflight.is_empty() && self.out.is_empty() {
                return Err(self
                    .session
                    .protocol_error(format!("it granted {} credits, too few for one request", self.session.credits)));
            }
            if self.session.stop.load(Ordering::Relaxed) {
                return Err(wait::stopped("an SMB request"));
            }
            let oldest = self.inflight.values().map(|(_, at)| *at).min().unwrap_or_else(Instant::now);
            if oldest.elapsed() >= REQUEST_TIMEOUT {
                self.server_gone.store(true, Ordering::Relaxed);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the SMB server {} did not complete a request within {} s; {} may be left on it",
                        self.session.server,
                        REQUEST_TIMEOUT.as_secs(),
                        self.shown
                    ),
                ));
            }
            let left = TIMEOUT.saturating_sub(last.elapsed());
            if left.is_zero() {
                self.server_gone.store(true, Ordering::Relaxed);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the SMB server {} did not answer for {} s; {} may be left on it",
                        self.session.server,
                        TIMEOUT.as_secs(),
                        self.shown
                    ),
                ));
            }
            let events = libc::POLLIN | if self.out.is_empty() { 0 } else { libc::POLLOUT };
            transport::poll(self.session.sock.as_raw_fd(), events, left.min(wait::SLICE))?;
        }
        out.append(&mut self.done);
        Ok(())
    }
}

/// Fuzzing: `data` is what an SMB server says, direct-TCP frames. The
/// response parsers (and NTLM's challenge and answer) read each; then a worker's
/// engine, with a READ, a WRITE and a FLUSH in flight (message ids 1, 2, 3),
/// receives it over a socketpair as a stream of frames.
#[cfg(feature = "fuzzing")]
pub fn fuzz_server(data: &[u8]) {
    use std::os::unix::net::UnixStream;
    let mut rest = data;
    while let Some(prefix) = rest.get(..4) {
        let Ok(len) = wire::frame_len(prefix.try_into().expect("4 bytes")) else { break };
        let Some(frame) = rest.get(4..4 + len) else { break };
        rest = &rest[4 + len..];
        let Ok(h) = wire::parse_header(frame) else { continue };
        let body = &frame[HEADER..];
        let _ = (h.status.errno(), wire::parse_negotiate(body), wire::parse_create(body), wire::parse_read(body));
        let _ = wire::parse_write(body);
        if let Ok((_, token)) = wire::parse_session_setup(body) {
            if let Ok(c) = ntlm::parse_challenge(token) {
                let id = ntlm::Identity { user: "u", password: "p", domain: "d" };
                let _ = ntlm::authenticate(&id, &ntlm::negotiate(), &c, [1; 8], 0);
            }
        }
    }
    let Ok((mut server, client)) = UnixStream::pair() else { return };
    let _ = server.write_all(data);
    let _ = server.shutdown(std::net::Shutdown::Write);
    let _ = client.set_nonblocking(true);
    let mut engine = SmbEngine::detached(TcpStream::from(std::os::fd::OwnedFd::from(client)), Arc::default());
    let _ = engine.receive();
    // Dropped before `server`: its CLOSE must not meet a closed peer (SIGPIPE).
    drop(engine);
    drop(server);
}

impl SmbEngine {
    /// An engine on a connected socket, logged in as far as it knows, with
    /// a 4 KiB READ (message id 1), a 512-byte WRITE (2) and a FLUSH (3)
    /// in flight: for fuzzing and the hostile-server tests.
    #[cfg(any(test, feature = "fuzzing"))]
    fn detached(sock: TcpStream, stop: Arc<AtomicBool>) -> SmbEngine {
        let _ = sock.set_nonblocking(true);
        let session = Session {
            sock,
            next_id: 4,
            credits: 1,
            session_id: 1,
            tree_id: 1,
            neg: wire::Negotiated {
                dialect: 0x0300,
                signing_required: false,
                max_transact: 1 << 20,
                max_read: 1 << 20,
                max_write: 1 << 20,
            },
            signing: None,
            server: "fuzz".into(),
            stop,
            login_ends: None,
        };
        let now = Instant::now();
        let io = |kind, len, buf_index, tag| (IoUnit { kind, offset: 0, len, buf_index, tag }, now);
        SmbEngine {
            bufs: BufferPool::new(2, 4096, 4096),
            session,
            file: [0; 16],
            write_through: false,
            waiting: VecDeque::new(),
            queued: Vec::new(),
            inflight: HashMap::from([
                (1, io(IoKind::Read, 4096, 0, 1)),
                (2, io(IoKind::Write, 512, 1, 2)),
                (3, io(IoKind::Fsync, 0, 0, 3)),
            ]),
            out: VecDeque::new(),
            rx: Rx::default(),
            done: Vec::new(),
            granted: Arc::default(),
            peak_credits: 0,
            server_gone: Arc::default(),
            shown: "smb://fuzz/share/file".into(),
        }
    }
}

impl Drop for SmbEngine {
    fn drop(&mut self) {
        if let Ok(mut g) = self.granted.lock() {
            g.credits = g.credits.max(self.peak_credits);
        }
        // Best effort: the handle goes with the connection anyway.
        if self.inflight.is_empty() && self.out.is_empty() && self.session.sock.set_nonblocking(false).is_ok() {
            let _ = self.session.call(Command::Close, &wire::close(&self.file));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// One SMB2 response frame (prefix included).
    fn frame(command: Command, status: u32, message_id: u64, body: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; HEADER];
        h[..4].copy_from_slice(b"\xfeSMB");
        h[4..6].copy_from_slice(&64u16.to_le_bytes());
        h[8..12].copy_from_slice(&status.to_le_bytes());
        h[12..14].copy_from_slice(&(command as u16).to_le_bytes());
        h[14..16].copy_from_slice(&1u16.to_le_bytes());
        h[16..20].copy_from_slice(&wire::FLAG_RESPONSE.to_le_bytes());
        h[24..32].copy_from_slice(&message_id.to_le_bytes());
        h.extend_from_slice(body);
        let mut f = (h.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&h);
        f
    }

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    /// Runs `f` on a thread; None when it has not returned within `limit`.
    fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(limit).ok()
    }

    /// Sends `bytes` one every 200 ms, for as long as the peer listens.
    fn trickle(mut sock: TcpStream, bytes: Vec<u8>) {
        std::thread::spawn(move || {
            for b in bytes.iter().cycle() {
                if sock.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
    }

    #[test]
    fn a_write_answered_by_a_read_response_is_refused() {
        let (client, mut server) = pair();
        let mut engine = SmbEngine::detached(client, Arc::default());
        let mut body = vec![17u8, 0, 80, 0];
        body.extend_from_slice(&512u32.to_le_bytes());
        body.extend_from_slice(&[0; 8]);
        body.extend_from_slice(&[7; 512]);
        server.write_all(&frame(Command::Read, status::SUCCESS, 2, &body)).unwrap();
        let mut out = Vec::new();
        let e = engine.getevents(1, &mut out).expect_err("a READ answer to a WRITE");
        assert!(e.to_string().contains("answered request 2 (Write)"), "{e}");
        assert!(out.is_empty());
    }

    #[test]
    fn a_write_answered_with_more_bytes_than_sent_is_refused() {
        let (client, mut server) = pair();
        let mut engine = SmbEngine::detached(client, Arc::default());
        let mut body = vec![17u8, 0, 0, 0];
        body.extend_from_slice(&4096u32.to_le_bytes()); // 512 were sent
        body.extend_from_slice(&[0; 8]);
        server.write_all(&frame(Command::Write, status::SUCCESS, 2, &body)).unwrap();
        let e = engine.getevents(1, &mut Vec::new()).expect_err("more written than sent");
        assert!(e.to_string().contains("answered as 4096 bytes written"), "{e}");
    }

    #[test]
    fn a_server_trickling_bytes_cannot_hold_a_request_for_ever() {
        let (client, server) = pair();
        // An interim answer, one byte at a time: bytes keep coming, no answer does.
        trickle(server, frame(Command::Read, status::PENDING, 1, &[9, 0, 0, 0, 0, 0, 0, 0, 0]));
        let r = within(Duration::from_secs(20), move || {
            let mut engine = SmbEngine::detached(client, Arc::default());
            engine.getevents(1, &mut Vec::new())
        });
        let e = r.expect("the request's deadline ends the wait").expect_err("no answer came");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("did not complete a request within 3 s"), "{e}");
    }

    #[test]
    fn ctrl_c_ends_a_wait_for_an_answer_at_once() {
        let (client, server) = pair();
        trickle(server, vec![0]);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            flag.store(true, Ordering::SeqCst);
        });
        let r = within(Duration::from_secs(2), move || {
            let mut engine = SmbEngine::detached(client, stop);
            engine.getevents(1, &mut Vec::new())
        });
        let e = r.expect("Ctrl-C ends the wait within 2 s").expect_err("stopped");
        assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
    }

    fn target(addr: SocketAddr, stop: Arc<AtomicBool>) -> Target {
        Target {
            addrs: vec![addr],
            source: Default::default(),
            server: crate::url::Server { host: "127.0.0.1".into(), port: addr.port() },
            share: "s".into(),
            login: Login { user: String::new(), password: String::new(), domain: String::new() },
            shown: "smb://127.0.0.1/s/f".into(),
            stop,
        }
    }

    /// A server that answers NEGOTIATE with interim answers for ever, a
    /// byte at a time (the login loop that once outlived Ctrl-C).
    fn pending_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (sock, _) = l.accept().unwrap();
            trickle(sock, frame(Command::Negotiate, status::PENDING, 0, &[9, 0, 0, 0, 0, 0, 0, 0, 0]));
        });
        addr
    }

    #[test]
    fn a_login_has_a_deadline_however_the_server_trickles() {
        let addr = pending_server();
        let r = within(Duration::from_secs(20), move || Session::connect(&target(addr, Arc::default()), 1).map(|_| ()));
        let e = r.expect("the login's deadline ends it").expect_err("never logged in");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("the SMB login took more than 3 s"), "{e}");
    }

    #[test]
    fn ctrl_c_ends_a_login_at_once() {
        let addr = pending_server();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            flag.store(true, Ordering::SeqCst);
        });
        let r = within(Duration::from_secs(2), move || Session::connect(&target(addr, stop), 1).map(|_| ()));
        let e = r.expect("Ctrl-C ends the login within 2 s").expect_err("stopped");
        assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
    }

    #[test]
    fn no_random_numbers_no_login() {
        let e = random_from::<8>("nas", |_| Err(getrandom::Error::UNSUPPORTED)).expect_err("getrandom failed");
        assert!(e.to_string().contains("no random numbers for the login to the SMB server nas"), "{e}");
        assert_eq!(
            random_from::<4>("nas", |b| {
                b.fill(5);
                Ok(())
            })
            .unwrap(),
            [5; 4]
        );
    }
}
