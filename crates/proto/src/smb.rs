//! The SMB client: `smb://[DOMAIN;][USER@]HOST[:PORT]/SHARE[/DIR]` targets.
//!
//! A minimal SMB2/3 client written for headroom (MS-SMB2): NEGOTIATE of 2.1,
//! 3.0, 3.0.2 or 3.1.1 (its preauthentication integrity with SHA-512) with
//! large MTU, SESSION_SETUP with NTLMv2 (or an anonymous session), TREE_CONNECT, CREATE of the test file, and READ,
//! WRITE (write-through for `--sync dsync`) and FLUSH pipelined on one TCP
//! connection per worker (with several sources, each worker's connection
//! leaves from its turn of them: one session per connection, not SMB
//! multichannel, which binds several channels to one session). The queue depth is the number of requests in
//! flight on that connection, each charged 1 credit per 64 KiB; when the
//! server's credits do not cover the depth asked, the depth granted is
//! recorded (the probe warns). A server that requires signing gets signed
//! requests (HMAC-SHA256 on 2.1, AES-CMAC on 3.x: `sign.rs`); a server
//! that does not require it gets none, as Samba's own clients do by default.
//! A session or share that requires encryption, or `?encrypt=` in the URL,
//! gets every message in a TRANSFORM_HEADER (`seal.rs`: AES-128-CCM on
//! 3.0.x; AES-128-GCM, AES-128-CCM, AES-256-GCM or AES-256-CCM on 3.1.1).
//!
//! Why not the `smb` crate (smb-rs 0.12): it pulls in sspi (Kerberos, a
//! TLS stack), reqwest and tokio, and its client is async, so an engine that
//! blocks in poll(2) on its own socket would wrap a runtime and channels per
//! worker. What headroom needs (one file, read, write, flush, NTLMv2) is a
//! few hundred lines of wire format that are tested here.
//!
//! In layers: the wire format (`wire`, `ntlm`, `sign`, `seal`); one connection
//! (`conn`, on `crate::frame`: requests out with message ids, credits and
//! signatures, answers in, a READ's data straight into its buffer, the
//! socket's buffers, waits and the errors of a connection that ended); a
//! connection's setup and tear-down one request at a time (`session`:
//! `Session::call` pushes one request and receives answers until its own);
//! and a worker's pipelined I/O (`engine`: many requests in flight within
//! the credits, each answer judged). Both receive through `conn`. Here, the
//! share: the test file, the logins' target and what the server granted.
//!
//! The test file is `headroom-disk-<pid>.tmp`, created exclusively and
//! opened with delete-on-close (unless `--keep`): the server removes it when
//! the share's handle closes, also when headroom dies, as soon as the
//! server notices the connection is gone. Only a server that dies itself
//! leaves it behind; the error then names it.
//!
//! With [`TargetOptions::named_file`] (`flushcheck`) the URL's last path
//! component is the file: created exclusively, or opened as it is when it
//! exists (the caller judges its content), never delete-on-close.

#[cfg(test)]
mod captured_frames;
mod conn;
mod engine;
mod ntlm;
mod seal;
mod session;
mod sign;
#[cfg(test)]
mod tests;
mod wire;

use crate::transport::{self, Origin, Spread};
use crate::url::SmbUrl;
use crate::ProtoError;
use engine::SmbEngine;
use headroom_disk::{IoEngine, Setting, Share, ShareIo, ShareKind, TargetOptions};
use headroom_result::ProtocolInfo;
use headroom_units::setting::Message;
use session::Session;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wire::{status, Command, FileId};

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
    sources: &[crate::Source],
) -> Result<Box<dyn Share>, ProtoError> {
    let login = Login::from(url, credentials)?;
    let spread = Spread::new(sources);
    let addrs = transport::resolve(&url.server.addr())
        .map_err(|e| ProtoError::Unreachable(format!("smb://{}: {e}", url.server)))?;
    let (dir, name) =
        if opts.named_file { named_file(url)? } else { (url.dir.clone(), headroom_disk::test_file_name()) };
    let path = if dir.is_empty() { name.clone() } else { format!("{}\\{name}", dir.replace('/', "\\")) };
    let shown = format!(
        "smb://{}{}/{}/{}",
        url.user.as_ref().map(|u| format!("{u}@")).unwrap_or_default(),
        url.server,
        url.share,
        path.replace('\\', "/")
    );
    let target = Target {
        addrs,
        source: spread.for_job(0).clone(),
        server: url.server.clone(),
        share: url.share.clone(),
        login,
        shown: shown.clone(),
        stop: Arc::clone(&opts.stop),
        encrypt: url.encrypt,
    };
    let mut session = Session::connect(&target, 1).map_err(|e| ProtoError::io(&e))?;
    // A named file is someone's to keep: never delete-on-close.
    let keep = opts.keep || opts.named_file;
    let options = wire::FILE_NON_DIRECTORY_FILE | if keep { 0 } else { wire::FILE_DELETE_ON_CLOSE };
    let rw = wire::access::READ_DATA
        | wire::access::WRITE_DATA
        | wire::access::READ_ATTRIBUTES
        | wire::access::WRITE_ATTRIBUTES
        | wire::access::DELETE;
    let create = |session: &mut Session, access, disposition| {
        session
            .call(Command::Create, &wire::create(&path, access, disposition, options))
            .map_err(|e| ProtoError::io(&e).context(format_args!("creating {shown}")))
    };
    let mut existed = false;
    let (mut h, mut body) = if opts.named_file && !opts.writes {
        existed = true;
        create(&mut session, wire::access::READ_DATA | wire::access::READ_ATTRIBUTES, wire::FILE_OPEN)?
    } else {
        create(&mut session, rw, wire::FILE_CREATE)?
    };
    if opts.named_file && h.status.0 == status::OBJECT_NAME_COLLISION {
        // Opened as it is: the caller reads it before writing anything.
        existed = true;
        (h, body) = create(&mut session, rw, wire::FILE_OPEN)?;
    }
    let (file, end_of_file) = match h.status.0 {
        status::SUCCESS => wire::parse_create(&body).map_err(|e| ProtoError::Protocol(format!("{shown}: {e}")))?,
        status::OBJECT_NAME_NOT_FOUND if existed => {
            return Err(ProtoError::Usage(format!("{shown}: no such file on the share; give the file `write` wrote")))
        }
        status::OBJECT_PATH_NOT_FOUND | status::OBJECT_NAME_NOT_FOUND | status::NOT_A_DIRECTORY => {
            return Err(ProtoError::Usage(format!(
                "no directory '{dir}' in share '{}' on {} ({}); give an existing directory, e.g. smb://{}/{}",
                url.share, url.server, h.status, url.server, url.share
            )))
        }
        status::OBJECT_NAME_COLLISION => {
            return Err(ProtoError::Usage(format!(
                "{shown} exists already and headroom only writes files it creates: remove it if it is a leftover"
            )))
        }
        status::FILE_IS_A_DIRECTORY => {
            return Err(ProtoError::Usage(format!(
                "{shown} is a directory; name a file (example: {shown}/flushcheck.bin)"
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
        size: opts.size.unwrap_or(if existed { end_of_file } else { opts.default_size }),
        existed,
        capacity: if existed { end_of_file } else { opts.size.unwrap_or(opts.default_size) },
        owner: Mutex::new(Some((session, file))),
        granted: Arc::new(Mutex::new(granted)),
        server_gone: Arc::new(AtomicBool::new(false)),
        spread,
    }))
}

/// The directory and the file name a named file's URL gives
/// (`smb://HOST/SHARE/[DIR/]FILE`).
fn named_file(url: &SmbUrl) -> Result<(String, String), ProtoError> {
    let trimmed = url.dir.trim_end_matches('/');
    match trimmed.rsplit_once('/') {
        _ if trimmed.is_empty() => Err(ProtoError::Usage(format!(
            "smb://{}/{}: the URL names no file; give the file after the share (example: smb://{}/{}/flushcheck.bin)",
            url.server, url.share, url.server, url.share
        ))),
        Some((dir, name)) => Ok((dir.to_string(), name.to_string())),
        None => Ok((String::new(), trimmed.to_string())),
    }
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
            return Err(ProtoError::Invalid(
                Message::text(format!(
                    "smb://{user}@{}/{}: no password for '{user}'; set HEADROOM_SMB_PASSWORD or give ",
                    url.server, url.share
                ))
                .and(Setting::Credentials)
                .then(" FILE with HEADROOM_SMB_PASSWORD=... (leave the user out for a guest session)"),
            ));
        }
        Ok(Login { user, password: password.unwrap_or_default(), domain })
    }
}

/// Where and as whom every connection of one share goes.
#[derive(Debug, Clone)]
struct Target {
    /// The server's addresses, tried in turn.
    addrs: Vec<SocketAddr>,
    /// Where the connection leaves from (`--bind`, `--interface`; a
    /// worker's target has its job's turn of them).
    source: crate::Source,
    server: crate::url::Server,
    share: String,
    login: Login,
    /// The test file's URL, for messages.
    shown: String,
    /// Ctrl-C: every wait ends at once.
    stop: Arc<AtomicBool>,
    /// `?encrypt=`: encrypt even where the server does not require it.
    encrypt: Option<crate::url::SmbEncrypt>,
}

/// What the server granted, as recorded in the probe's spec.protocol.
#[derive(Debug, Clone, Default)]
struct Granted {
    dialect: u16,
    signing: bool,
    /// The cipher every message was sealed with; None: not encrypted.
    cipher: Option<crate::url::SmbCipher>,
    max_read: u32,
    max_write: u32,
    max_transact: u32,
    /// The most credits one connection held.
    credits: u32,
    /// Requests in flight the credits allowed, when fewer than asked.
    depth_capped: Option<u32>,
    /// Where the first connection left from (each job's: `SmbShare::spread`).
    origin: Origin,
}

impl Granted {
    fn from_session(s: &Session, source: &crate::Source) -> Granted {
        Granted {
            dialect: s.neg.dialect,
            signing: s.conn.signing.is_some(),
            cipher: s.conn.seal.as_ref().map(|k| k.cipher()),
            max_read: s.neg.max_read,
            max_write: s.neg.max_write,
            max_transact: s.neg.max_transact,
            credits: s.conn.credits,
            depth_capped: None,
            origin: Origin::of(s.conn.socket(), source),
        }
    }
}

/// One test file on an SMB share.
struct SmbShare {
    target: Target,
    /// Share-relative path, `\`-separated.
    path: String,
    size: u64,
    /// The URL named a file that was there before.
    existed: bool,
    /// The file's own end when it was there before (its first bytes are
    /// read before anything is written); `size` otherwise.
    capacity: u64,
    /// The connection holding the delete-on-close handle.
    owner: Mutex<Option<(Session, FileId)>>,
    granted: Arc<Mutex<Granted>>,
    /// A worker already said the server went away (and named the file left).
    server_gone: Arc<AtomicBool>,
    /// Where each job's connection leaves from.
    spread: Spread,
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

    fn existed(&self) -> bool {
        self.existed
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn block_size(&self) -> u64 {
        1
    }

    fn connect(&self, io: ShareIo) -> io::Result<Box<dyn IoEngine + Send>> {
        let charge = u32::from(wire::credit_charge(io.buf_size as u32));
        let want = (io.depth as u32 * charge).max(1);
        let target = Target { source: self.spread.for_job(io.job).clone(), ..self.target.clone() };
        let mut session = Session::connect(&target, want).map_err(|e| self.spread.named(io.job, e))?;
        self.spread.note(io.job, Origin::of(session.conn.socket(), &target.source));
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
            g.credits = g.credits.max(session.conn.credits);
            let allowed = session.conn.credits / charge;
            if (allowed as usize) < io.depth {
                g.depth_capped = Some(g.depth_capped.map_or(allowed, |d| d.min(allowed)));
            }
        }
        Ok(Box::new(SmbEngine::new(
            session,
            file,
            &io,
            Arc::clone(&self.granted),
            Arc::clone(&self.server_gone),
            self.target.shown.clone(),
        )))
    }

    fn info(&self) -> ProtocolInfo {
        let g = self.granted.lock().expect("granted lock").clone();
        let mut granted = std::collections::BTreeMap::new();
        granted.insert("MaxReadSize".to_string(), u64::from(g.max_read));
        granted.insert("MaxWriteSize".to_string(), u64::from(g.max_write));
        granted.insert("MaxTransactSize".to_string(), u64::from(g.max_transact));
        granted.insert("credits".to_string(), u64::from(g.credits));
        granted.insert("signing".to_string(), u64::from(g.signing));
        let mut info = ProtocolInfo {
            name: "smb".into(),
            version: Some(wire::dialect_name(g.dialect)),
            cipher: g.cipher.map(|c| c.name().to_string()),
            server: self.target.server.addr(),
            queue_depth_granted: g.depth_capped,
            granted,
            source_address: g.origin.address.map(|a| a.to_string()),
            interface: g.origin.interface,
            sources: Vec::new(),
        };
        self.spread.record(&mut info);
        info
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

/// Fuzzing: `data` is what an SMB server says, direct-TCP frames. The
/// response parsers (and NTLM's challenge and answer) read each; then a worker's
/// engine, with a READ, a WRITE and a FLUSH in flight (message ids 1, 2, 3),
/// receives it over a socketpair as a stream of frames.
#[cfg(feature = "fuzzing")]
pub fn fuzz_server(data: &[u8]) {
    use std::io::Write;
    use std::net::TcpStream;
    use std::os::unix::net::UnixStream;
    let mut rest = data;
    while let Some(prefix) = rest.get(..4) {
        let Ok(len) = wire::frame_len(prefix.try_into().expect("4 bytes")) else { break };
        let Some(frame) = rest.get(4..4 + len) else { break };
        rest = &rest[4 + len..];
        let Ok(h) = wire::parse_header(frame) else { continue };
        let body = &frame[wire::HEADER..];
        let all = crate::url::SmbCipher::ALL;
        let _ = (
            h.status.error_kind(),
            wire::parse_negotiate(body, &all),
            wire::parse_create(body),
            wire::parse_read(body),
        );
        let _ = (wire::parse_write(body), wire::parse_tree_connect(body));
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
