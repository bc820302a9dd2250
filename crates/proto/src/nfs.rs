//! The NFS client: `nfs://HOST[:PORT]/EXPORT[/DIR][?version=3|4]` targets,
//! through libnfs (the reference user-space NFS client that fio's nfs engine
//! and qemu use; bound by hand in [`ffi`]), with no kernel mount.
//!
//! What it owns: finding the export (the longest entry of the server's MOUNT
//! export list that leads the URL's path; NFSv4 looks the path up in the
//! server's namespace), creating headroom's own test file there with an
//! exclusive create and removing it when the share is dropped (or, with
//! `TargetOptions::named_file`, the file the URL names: created the same
//! way, or opened as it is when it exists, never removed), and one
//! connection per worker whose queue depth is the number of READ/WRITE RPCs
//! outstanding on the wire ([`NfsEngine`]); with several sources each
//! worker's libnfs context is held to its turn of their interfaces
//! (nconnect-style: one context, so one TCP connection, per worker). Fsync is an NFS COMMIT; `dsync`
//! opens the file O_SYNC, so libnfs sends every WRITE as FILE_SYNC (NFSv3) or
//! DATA_SYNC4 (NFSv4). libnfs's own page cache and readahead stay off (its
//! default), so every read is an RPC. Every failure is a typed
//! [`ProtoError`]: libnfs's code and text sorted, and a failure that is not
//! the server's answer explained by one connect of headroom's own ([`fault`]),
//! so a refused or unreachable server never reads as the user's mistake.
//!
//! Long (about 1,010 lines): one file per C library binding, so every `unsafe` call into libnfs (the
//! context, the export list, the share and the engine's callbacks) is read in one place; about 900
//! lines of code, the rest its unit tests.

mod fault;
mod ffi;

use crate::url::{NfsUrl, NfsVersion, Server};
use crate::ProtoError;
use headroom_disk::{
    BufferPool, Completion, IoEngine, IoKind, IoUnit, Setting, Share, ShareIo, ShareKind, SyncMode, TargetOptions,
};
use headroom_result::ProtocolInfo;
use headroom_units::setting::Message;
use std::ffi::{c_int, c_void, CStr, CString};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a server may stay silent while requests are outstanding before
/// the run ends with an error (a dead server never hangs a run).
pub const SERVER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long removing the test file may take once the server was lost.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(3);

/// The longest wait on libnfs's socket between two looks at a deadline or
/// the stop flag.
const SERVICE_SLICE: Duration = Duration::from_millis(100);

/// Largest NFSv4 WRITE libnfs 4.0 can send: it encodes an NFSv4 COMPOUND
/// into a fixed 4 KiB buffer (ZDR_ENCODEBUF_MINSIZE; NFSv3 WRITEs get a
/// buffer sized to their data). 3840 bytes fitted with Ganesha's handles in
/// the lab; 3 KiB leaves room for a 128-byte handle and a long AUTH_SYS
/// machine name. libnfs 5 lifts the limit.
pub const V4_WRITE_MAX: u64 = 3072;

/// Largest NFSv4 READ headroom asks for: libnfs 4.0 neither splits NFSv4
/// reads nor asks the server its maximum (it does for NFSv3: FSINFO), and
/// caps NFSv3 transfers at 1 MiB (NFS_MAX_XFER_SIZE).
pub const V4_READ_MAX: u64 = 1 << 20;

/// Prepares a test file in the directory `url` names on an NFS server.
pub fn open(url: &NfsUrl, opts: &TargetOptions, sources: &[crate::Source]) -> Result<Box<dyn Share>, ProtoError> {
    ffi::load().map_err(ProtoError::Usage)?;
    // A named file: its directory is what the server resolves, as for a test file's.
    let (named, url) = if opts.named_file { named_file(url)? } else { (None, url.clone()) };
    let url = &url;
    let size = opts.size.unwrap_or(opts.default_size);
    if size == 0 && named.is_none() {
        return Err(ProtoError::Invalid(
            Message::text(format!("{}: ", shown(url)))
                .and(Setting::Size)
                .then(" must be more than 0 bytes, e.g. ")
                .and(Setting::Size)
                .then(" 1G"),
        ));
    }
    let spread = crate::transport::Spread::new(sources);
    let workers = spread
        .all()
        .iter()
        .map(|source| Ok(Peer { server: url.server.clone(), interface: interface_of(url, source)? }))
        .collect::<Result<Vec<Peer>, ProtoError>>()?;
    let peer = workers[0].clone();
    let (version, export, dir, no_v3) = resolve_export(url, &peer)?;
    let ctx = Ctx::connect(&peer, version, &export).map_err(|e| match &no_v3 {
        // Typed by the NFSv4 attempt's fault: the last word on the server.
        Some(v3) => e.map(|e| {
            format!("{}: the server answered neither NFSv3 (its export list: {v3}) nor NFSv4 ({e})", shown(url))
        }),
        None => mount_error(url, version, &export, e),
    })?;
    let dir_path = if dir.is_empty() { "/".to_string() } else { format!("/{dir}") };
    let st = ctx.stat(&dir_path).map_err(|e| {
        let advice = advice_for(&e, "; give a directory that exists on the server");
        e.map(|e| format!("{}: directory '{dir_path}' of export {export} cannot be examined ({e}){advice}", shown(url)))
    })?;
    if st.nfs_mode & libc::S_IFMT as u64 != libc::S_IFDIR as u64 {
        return Err(ProtoError::Usage(format!(
            "{}: '{}' in export {export} is not a directory; give the directory headroom may create its test file in",
            shown(url),
            dir_path
        )));
    }
    let name = named.clone().unwrap_or_else(headroom_disk::test_file_name);
    let file = if dir.is_empty() { format!("/{name}") } else { format!("/{dir}/{name}") };
    let file_url = format!("nfs://{}{}/{}", url.server.addr(), url.path.trim_end_matches('/'), name);
    let found = named.as_ref().and_then(|_| ctx.stat(&file).ok());
    if let Some(st) = &found {
        if st.nfs_mode & libc::S_IFMT as u64 != libc::S_IFREG as u64 {
            return Err(ProtoError::Usage(format!(
                "{file_url} exists and is not a regular file; name a file of its own"
            )));
        }
    } else if named.is_some() && !opts.writes {
        return Err(ProtoError::Usage(format!("{file_url}: no such file on the server; give the file `write` wrote")));
    } else {
        let fh = ctx.create_exclusive(&file).map_err(|e| {
            // SAFETY: getuid cannot fail.
            let uid = unsafe { libc::getuid() };
            let advice =
                format!("; the directory must be writable by this user (uid {uid}), or the export must not squash it");
            let advice = advice_for(&e, &advice);
            e.map(|e| format!("{}: cannot create the test file {file_url}: {e}{advice}", shown(url)))
        })?;
        ctx.close(fh);
    }
    let size = opts.size.or(found.as_ref().map(|st| st.nfs_size)).unwrap_or(size);
    // A named file is someone's to keep: never removed.
    let keep = opts.keep || named.is_some();
    let mut info = ProtocolInfo {
        name: "nfs".into(),
        version: Some(version.number().into()),
        server: url.server.addr(),
        queue_depth_granted: None,
        granted: ctx.granted(version, None),
        ..ProtocolInfo::default()
    };
    ctx.origin(&peer).record(&mut info);
    // A second Ctrl-C exits at once, without this share's Drop: the file
    // is then removed over a fresh connection (headroom_disk::remove_test_files_now).
    let at_exit = (!keep).then(|| {
        let (peer, export, file) = (peer.clone(), export.clone(), file.clone());
        headroom_disk::register_remote_test_file(Box::new(move || {
            let _ = Ctx::connect_within(&peer, version, &export, CLEANUP_TIMEOUT).and_then(|c| c.unlink(&file));
        }))
    });
    Ok(Box::new(NfsShare {
        server: url.server.clone(),
        peer,
        workers,
        spread,
        version,
        export,
        file,
        file_url,
        size,
        keep,
        existed: found.is_some(),
        capacity: found.as_ref().map_or(size, |st| st.nfs_size),
        control: Mutex::new(Some(ctx)),
        info: Mutex::new(info),
        gone: Arc::new(AtomicBool::new(false)),
        at_exit,
    }))
}

/// A named file's URL (`nfs://HOST/EXPORT/[DIR/]FILE`) split into the file
/// name and the URL of its directory.
fn named_file(url: &NfsUrl) -> Result<(Option<String>, NfsUrl), ProtoError> {
    let trimmed = url.path.trim_end_matches('/');
    match trimmed.rsplit_once('/') {
        Some((dir, name)) if !dir.is_empty() && !name.is_empty() => {
            Ok((Some(name.to_string()), NfsUrl { path: dir.to_string(), ..url.clone() }))
        }
        _ => Err(ProtoError::Usage(format!(
            "{}: the URL names no file; give the file after the export's directory \
             (example: nfs://{}/export/flushcheck.bin)",
            shown(url),
            url.server.addr()
        ))),
    }
}

/// The interface libnfs's sockets are held to: `--interface`, or for
/// `--bind` the interface holding that address (libnfs binds no source
/// address of its own; the kernel then picks that interface's address).
fn interface_of(url: &NfsUrl, source: &crate::Source) -> Result<Option<String>, ProtoError> {
    if let Some(nic) = &source.interface {
        return Ok(Some(nic.clone()));
    }
    let Some(addr) = source.bind else { return Ok(None) };
    headroom_sys::interface_with_address(addr).map(Some).ok_or_else(|| {
        use headroom_net::SourceSetting::{Bind, Interface};
        let why = Message::of(Bind)
            .then(format!(" {addr}: libnfs cannot bind a source address and no interface holds {addr}; use "))
            .and(Interface)
            .then(" NIC");
        ProtoError::Usage(format!("{}: {}", shown(url), headroom_net::spelled_source(&why)))
    })
}

/// `advice` when `e` is the user's to fix; nothing for the server's or the
/// network's fault, which no change of the URL mends.
fn advice_for<'a>(e: &ProtoError, advice: &'a str) -> &'a str {
    match e {
        ProtoError::Usage(_) | ProtoError::Invalid(_) | ProtoError::Auth(_) => advice,
        _ => "",
    }
}

/// An interface name libnfs cannot take (a C string ends at NUL).
fn nul_in_interface() -> ProtoError {
    let setting = Message::of(headroom_net::SourceSetting::Interface);
    ProtoError::Usage(format!("NUL byte in {}", headroom_net::spelled_source(&setting)))
}

/// A server and the interface every connection to it leaves through.
#[derive(Debug, Clone)]
struct Peer {
    server: Server,
    interface: Option<String>,
}

fn shown(url: &NfsUrl) -> String {
    format!("nfs://{}{}", url.server.addr(), url.path)
}

impl NfsVersion {
    fn number(self) -> &'static str {
        match self {
            NfsVersion::V3 => "3",
            NfsVersion::V4 => "4",
        }
    }
}

/// Which version to speak, which leading part of the path is the export, the
/// directory inside it (no leading `/`), and why NFSv3 was not used when the
/// URL left the choice to headroom and the server has no MOUNT service.
type Resolved = (NfsVersion, String, String, Option<String>);

fn resolve_export(url: &NfsUrl, peer: &Peer) -> Result<Resolved, ProtoError> {
    if url.version == Some(NfsVersion::V4) {
        // NFSv4 has one namespace: mount the whole path, create the file at its root.
        return Ok((NfsVersion::V4, url.path.clone(), String::new(), None));
    }
    let exports = match export_list(&url.server.host, peer.interface.as_deref(), SERVER_TIMEOUT) {
        Ok(list) => list,
        // No MOUNT service: an NFSv4-only server, unless v3 was asked for.
        Err(e) if url.version.is_none() => {
            return Ok((NfsVersion::V4, url.path.clone(), String::new(), Some(e.to_string())))
        }
        Err(e) => {
            return Err(e.map(|e| {
                format!(
                    "{}: cannot list the server's exports (MOUNT protocol via the portmapper, port 111): {e}; \
                     if the server speaks only NFSv4, add ?version=4",
                    shown(url)
                )
            }))
        }
    };
    match longest_export(&exports, &url.path) {
        Some((export, dir)) => Ok((NfsVersion::V3, export, dir, None)),
        None => Err(ProtoError::Usage(format!(
            "{}: no export of {} leads the path {} (it exports {}); write nfs://{}/EXPORT[/DIR]",
            shown(url),
            url.server.host,
            url.path,
            if exports.is_empty() { "nothing".to_string() } else { exports.join(", ") },
            url.server.addr()
        ))),
    }
}

/// The longest of `exports` that is `path` or a leading run of its segments,
/// and the rest of `path` (the directory inside the export, no leading `/`).
fn longest_export(exports: &[String], path: &str) -> Option<(String, String)> {
    exports
        .iter()
        .filter_map(|e| {
            let trimmed = e.trim_end_matches('/');
            let rest = path.strip_prefix(trimmed)?;
            (rest.is_empty() || rest.starts_with('/'))
                .then(|| (if trimmed.is_empty() { "/".to_string() } else { trimmed.to_string() }, rest))
        })
        .max_by_key(|(e, _)| e.len())
        .map(|(e, rest)| (e, rest.trim_matches('/').to_string()))
}

fn mount_error(url: &NfsUrl, version: NfsVersion, export: &str, e: ProtoError) -> ProtoError {
    let what = match version {
        NfsVersion::V3 => format!("mounting export {export} over NFSv3 failed"),
        NfsVersion::V4 => format!("looking up {export} in the server's NFSv4 namespace failed"),
    };
    e.context(format_args!("{}: {what}", shown(url)))
}

/// The server's export list (MOUNTPROC3_EXPORT), waiting at most `timeout`;
/// a failure that is not the server's answer is explained by a connect to
/// the portmapper.
fn export_list(host: &str, interface: Option<&str>, timeout: Duration) -> Result<Vec<String>, ProtoError> {
    export_list_once(host, interface, timeout).map_err(|e| fault::explained(e, host, &[fault::PORTMAPPER], interface))
}

fn export_list_once(host: &str, interface: Option<&str>, timeout: Duration) -> Result<Vec<String>, ProtoError> {
    struct Answer {
        done: bool,
        result: Result<Vec<String>, ProtoError>,
    }
    unsafe extern "C" fn on_exports(
        rpc: *mut ffi::rpc_context,
        status: c_int,
        data: *mut c_void,
        private: *mut c_void,
    ) {
        // SAFETY: `private` is the Answer below, alive until the loop ends;
        // `data` is an `exports *` on success, else an error string or NULL.
        let answer = &mut *(private as *mut Answer);
        answer.done = true;
        answer.result = if status == ffi::RPC_STATUS_SUCCESS {
            let mut list = Vec::new();
            let mut node = if data.is_null() { std::ptr::null_mut() } else { *(data as *mut *mut ffi::exportnode) };
            while !node.is_null() {
                if !(*node).ex_dir.is_null() {
                    list.push(CStr::from_ptr((*node).ex_dir).to_string_lossy().into_owned());
                }
                node = (*node).ex_next;
            }
            Ok(list)
        } else {
            // RPC_STATUS_* says no more than the text does.
            Err(fault::sort(0, rpc_error(rpc)))
        };
    }
    let host_c = CString::new(host).map_err(|_| ProtoError::Usage("the host name holds a NUL byte".into()))?;
    let nic = interface.map(CString::new).transpose().map_err(|_| nul_in_interface())?;
    // SAFETY: a fresh context, destroyed below on every path.
    let rpc = unsafe { ffi::rpc_init_context() };
    if rpc.is_null() {
        return Err(ProtoError::Usage("libnfs could not create an RPC context".into()));
    }
    if let Some(nic) = &nic {
        // SAFETY: rpc is valid; libnfs copies the name (and `nic` outlives the context anyway).
        unsafe { ffi::rpc_set_interface(rpc, nic.as_ptr()) };
    }
    let mut answer = Answer { done: false, result: Err(ProtoError::Lost("no answer".into())) };
    // SAFETY: rpc is valid; the callback's private data outlives the loop,
    // and destroying the context cancels a call still pending.
    let result = unsafe {
        if ffi::mount_getexports_async(rpc, host_c.as_ptr(), on_exports, &mut answer as *mut Answer as *mut c_void) != 0
        {
            Err(fault::sort(-1, rpc_error(rpc)))
        } else {
            let deadline = Instant::now() + timeout;
            let mut failed = None;
            while !answer.done && failed.is_none() {
                if Instant::now() >= deadline {
                    failed = Some(ProtoError::Lost(format!("no answer from {host} within {} s", timeout.as_secs())));
                    break;
                }
                let (fd, events) = (ffi::rpc_get_fd(rpc), ffi::rpc_which_events(rpc) as i16);
                // A failed poll services nothing, as a timeout would; the deadline ends the loop.
                let revents = c_int::from(crate::os::poll(fd, events, SERVICE_SLICE).unwrap_or(0));
                if ffi::rpc_service(rpc, revents) < 0 && !answer.done {
                    // The socket or the reply's decoding failed, not a status the server sent.
                    failed = Some(ProtoError::Protocol(rpc_error(rpc)));
                }
            }
            match failed {
                Some(e) => Err(e),
                None => std::mem::replace(&mut answer.result, Ok(Vec::new())),
            }
        }
    };
    // SAFETY: created above, not used after.
    unsafe { ffi::rpc_destroy_context(rpc) };
    result
}

fn rpc_error(rpc: *mut ffi::rpc_context) -> String {
    // SAFETY: libnfs keeps the error string in the context; copied at once.
    let p = unsafe { ffi::rpc_get_error(rpc) };
    tidy_error(p)
}

/// libnfs's error text, or a placeholder; one line.
fn tidy_error(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return "unknown error".into();
    }
    // SAFETY: a NUL-terminated string owned by libnfs, copied at once.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy();
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.is_empty() {
        "unknown error".into()
    } else {
        s
    }
}

/// One libnfs context (one TCP connection, mounted), destroyed on drop.
struct Ctx(*mut ffi::nfs_context);

// SAFETY: a context is used by one thread at a time: each worker owns its
// own, and the share's is behind a Mutex.
unsafe impl Send for Ctx {}

impl Ctx {
    /// Connects to `peer` and mounts `export`; a failure that is not the
    /// server's answer is explained by a connect to the ports libnfs used.
    fn connect(peer: &Peer, version: NfsVersion, export: &str) -> Result<Ctx, ProtoError> {
        Self::connect_within(peer, version, export, SERVER_TIMEOUT).map_err(|e| {
            let port = peer.server.port;
            let ports: &[u16] = match version {
                NfsVersion::V3 => &[fault::PORTMAPPER, port],
                NfsVersion::V4 => &[port],
            };
            fault::explained(e, &peer.server.host, ports, peer.interface.as_deref())
        })
    }

    /// [`Ctx::connect`] unexplained (a cleanup's quick try), each RPC (then
    /// each sync call) given up after `timeout`.
    fn connect_within(peer: &Peer, version: NfsVersion, export: &str, timeout: Duration) -> Result<Ctx, ProtoError> {
        let server = &peer.server;
        // SAFETY: a fresh context, owned by the returned Ctx.
        let ctx = Ctx(unsafe { ffi::nfs_init_context() });
        if ctx.0.is_null() {
            return Err(ProtoError::Usage("libnfs could not create a context".into()));
        }
        let nul = |what: &str| ProtoError::Usage(format!("NUL byte in {what}"));
        let host = CString::new(server.host.as_str()).map_err(|_| nul("the host"))?;
        let export_c = CString::new(export).map_err(|_| nul("the export"))?;
        let nic = peer.interface.as_deref().map(CString::new).transpose().map_err(|_| nul_in_interface())?;
        // SAFETY: ctx.0 is valid; the strings live across the calls.
        unsafe {
            if let Some(nic) = &nic {
                // SO_BINDTODEVICE on every socket the context opens (portmapper, MOUNT, NFS).
                ffi::nfs_set_interface(ctx.0, nic.as_ptr());
            }
            ffi::nfs_set_version(ctx.0, if version == NfsVersion::V4 { 4 } else { 3 });
            // The sync calls below (mount, create, stat, unlink) give up after this.
            ffi::nfs_set_timeout(ctx.0, timeout.as_millis() as c_int);
            // SYN retries: an unreachable server fails in ~3 s (1) or ~7 s
            // (2), not the kernel's 2 minutes.
            ffi::nfs_set_tcp_syncnt(ctx.0, if timeout < SERVER_TIMEOUT { 1 } else { 2 });
            // A dropped connection is an error for the run, never a silent reconnect.
            ffi::nfs_set_autoreconnect(ctx.0, 0);
            if server.port != 2049 {
                // libnfs 4.0 takes the NFS port only from a URL's options.
                let opt = CString::new(format!("nfs://{}/?nfsport={}", server.host, server.port)).expect("no NUL");
                let parsed = ffi::nfs_parse_url_dir(ctx.0, opt.as_ptr());
                if !parsed.is_null() {
                    ffi::nfs_destroy_url(parsed);
                }
            }
            let rc = ffi::nfs_mount(ctx.0, host.as_ptr(), export_c.as_ptr());
            if rc != 0 {
                return Err(ctx.failed(rc));
            }
        }
        Ok(ctx)
    }

    /// Where this context's connection left from.
    fn origin(&self, peer: &Peer) -> crate::transport::Origin {
        // SAFETY: the context is valid; the descriptor is borrowed for the call only.
        let fd = unsafe { ffi::nfs_get_fd(self.0) };
        let source = crate::Source { bind: None, interface: peer.interface.clone() };
        if fd < 0 {
            return crate::transport::Origin { address: None, interface: source.interface };
        }
        // SAFETY: fd is the context's open socket, alive while self is.
        crate::transport::Origin::of(&unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }, &source)
    }

    fn error(&self) -> String {
        // SAFETY: the context is valid; the string is copied at once.
        tidy_error(unsafe { ffi::nfs_get_error(self.0) })
    }

    /// The failure of a sync call that returned `rc`.
    fn failed(&self, rc: c_int) -> ProtoError {
        fault::sort(rc, self.error())
    }

    fn cpath(path: &str) -> Result<CString, ProtoError> {
        CString::new(path).map_err(|_| ProtoError::Usage("NUL byte in the path".into()))
    }

    fn stat(&self, path: &str) -> Result<ffi::nfs_stat_64, ProtoError> {
        let p = Self::cpath(path)?;
        let mut st = ffi::nfs_stat_64::default();
        // SAFETY: valid context, path and out-parameter.
        match unsafe { ffi::nfs_stat64(self.0, p.as_ptr(), &mut st) } {
            0 => Ok(st),
            rc => Err(self.failed(rc)),
        }
    }

    fn create_exclusive(&self, path: &str) -> Result<*mut ffi::nfsfh, ProtoError> {
        let p = Self::cpath(path)?;
        let mut fh = std::ptr::null_mut();
        // SAFETY: valid context, path and out-parameter. O_EXCL: an NFSv3
        // GUARDED create, which fails on a file that exists.
        match unsafe { ffi::nfs_create(self.0, p.as_ptr(), libc::O_RDWR | libc::O_EXCL, 0o644, &mut fh) } {
            0 => Ok(fh),
            rc => Err(self.failed(rc)),
        }
    }

    fn open(&self, path: &str, flags: c_int) -> Result<*mut ffi::nfsfh, ProtoError> {
        let p = Self::cpath(path)?;
        let mut fh = std::ptr::null_mut();
        // SAFETY: valid context, path and out-parameter.
        match unsafe { ffi::nfs_open(self.0, p.as_ptr(), flags, &mut fh) } {
            0 => Ok(fh),
            rc => Err(self.failed(rc)),
        }
    }

    fn close(&self, fh: *mut ffi::nfsfh) {
        // SAFETY: fh was opened on this context and is not used after.
        unsafe { ffi::nfs_close(self.0, fh) };
    }

    fn unlink(&self, path: &str) -> Result<(), ProtoError> {
        let p = Self::cpath(path)?;
        // SAFETY: valid context and path.
        match unsafe { ffi::nfs_unlink(self.0, p.as_ptr()) } {
            0 => Ok(()),
            rc => Err(self.failed(rc)),
        }
    }

    /// rsize and wsize in use, and RPC requests per I/O of `io_size`. NFSv3:
    /// what the server granted (FSINFO rtmax/wtmax, capped at 1 MiB by
    /// libnfs). NFSv4: libnfs 4.0 does not ask, so headroom's own limits.
    fn granted(&self, version: NfsVersion, io_size: Option<u64>) -> std::collections::BTreeMap<String, u64> {
        let (rsize, wsize) = match version {
            // SAFETY: valid, mounted context.
            NfsVersion::V3 => unsafe { (ffi::nfs_get_readmax(self.0), ffi::nfs_get_writemax(self.0)) },
            NfsVersion::V4 => (V4_READ_MAX, V4_WRITE_MAX),
        };
        let mut g = std::collections::BTreeMap::from([("rsize".to_string(), rsize), ("wsize".to_string(), wsize)]);
        if let Some(io) = io_size {
            g.insert("rpcs_per_read".into(), io.div_ceil(rsize.max(1)));
            g.insert("rpcs_per_write".into(), io.div_ceil(wsize.max(1)));
        }
        g
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: created in connect, not used after; pending callbacks are
        // cancelled inside (their targets outlive this call).
        unsafe { ffi::nfs_destroy_context(self.0) };
    }
}

/// A test file on an NFS server; removed when dropped unless `--keep`.
struct NfsShare {
    server: Server,
    /// The server and the interface the share's own connections (creating
    /// and removing the file) leave through: job 0's.
    peer: Peer,
    /// One per source: job N's connection uses `workers[spread.turn(N)]`.
    workers: Vec<Peer>,
    spread: crate::transport::Spread,
    version: NfsVersion,
    export: String,
    /// The test file, from the export's root.
    file: String,
    file_url: String,
    size: u64,
    keep: bool,
    /// The URL named a file that was there before.
    existed: bool,
    /// The file's own end when it was there before (its first bytes are
    /// read before anything is written); `size` otherwise.
    capacity: u64,
    /// The connection that created the file, kept to remove it.
    control: Mutex<Option<Ctx>>,
    info: Mutex<ProtocolInfo>,
    /// A worker found the server gone and said which file is left.
    gone: Arc<AtomicBool>,
    /// Its entry in headroom-disk's removals for a second Ctrl-C.
    at_exit: Option<u64>,
}

impl std::fmt::Debug for NfsShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NfsShare").field("file_url", &self.file_url).field("size", &self.size).finish()
    }
}

impl Share for NfsShare {
    fn url(&self) -> String {
        self.file_url.clone()
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
        let fail = |what: &str, e: ProtoError| {
            io::Error::from(e.map(|e| format!("NFS server {}: {what} {}: {e}", self.server.addr(), self.file_url)))
        };
        let peer = &self.workers[self.spread.turn(io.job)];
        let ctx = Ctx::connect(peer, self.version, &self.export)
            .map_err(|e| self.spread.named(io.job, fail("cannot connect for", e)))?;
        self.spread.note(io.job, ctx.origin(peer));
        let mut flags = if io.write { libc::O_RDWR } else { libc::O_RDONLY };
        if io.write && io.sync == SyncMode::Dsync {
            // libnfs then sends each WRITE stable: FILE_SYNC (v3), DATA_SYNC4 (v4).
            flags |= libc::O_SYNC;
        }
        let fh = ctx.open(&self.file, flags).map_err(|e| fail("cannot open", e))?;
        // From here the engine's own watchdog (SERVER_TIMEOUT without any
        // reply) ends a silent server with a message naming it; libnfs's
        // per-request timeout would fail each I/O with a bare EINTR.
        // SAFETY: valid context.
        unsafe { ffi::nfs_set_timeout(ctx.0, -1) };
        let (max_read, max_write) = match self.version {
            NfsVersion::V3 => (u64::MAX, u64::MAX),
            NfsVersion::V4 => (V4_READ_MAX, V4_WRITE_MAX),
        };
        let granted = ctx.granted(self.version, Some(io.buf_size as u64));
        self.info.lock().unwrap_or_else(|p| p.into_inner()).granted = granted;
        Ok(Box::new(NfsEngine {
            ctx: Some(ctx),
            fh,
            buffers: BufferPool::new(io.depth.max(1), io.buf_size.max(1), 4096),
            queued: Vec::with_capacity(io.depth),
            inner: Box::new(Inner { done: Vec::with_capacity(io.depth * 2), failure: None }),
            inflight: 0,
            max_read,
            max_write,
            broken: None,
            server: self.server.addr(),
            file_url: self.file_url.clone(),
            gone: Arc::clone(&self.gone),
        }))
    }

    fn info(&self) -> ProtocolInfo {
        let mut info = self.info.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.spread.record(&mut info);
        info
    }
}

impl Drop for NfsShare {
    fn drop(&mut self) {
        if let Some(id) = self.at_exit {
            headroom_disk::forget_remote_test_file(id);
        }
        if self.keep {
            return;
        }
        let control = self.control.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        let gone = self.gone.load(Ordering::Relaxed);
        // After a worker lost the server, its control connection may hang
        // until the timeout: one quick fresh connection tries instead.
        let first = match (&control, gone) {
            (Some(ctx), false) => ctx.unlink(&self.file),
            _ => Err(ProtoError::Lost("the server was lost".into())),
        };
        drop(control);
        // The control connection may have died with a server that is back:
        // one fresh connection tries again.
        let timeout = if gone { CLEANUP_TIMEOUT } else { SERVER_TIMEOUT };
        let result = first.or_else(|_| {
            Ctx::connect_within(&self.peer, self.version, &self.export, timeout).and_then(|ctx| ctx.unlink(&self.file))
        });
        if let Err(e) = result {
            if !gone {
                eprintln!("headroom: the test file {} is left on the server ({e}); remove it by hand", self.file_url);
            }
        }
    }
}

/// Completions the callbacks hand back; boxed so its address stays put.
struct Inner {
    done: Vec<Completion>,
    /// The first failed request's code and libnfs's text for it.
    failure: Option<(c_int, String)>,
}

/// One I/O of the runner, sent as one or more RPC requests (see
/// [`NfsEngine::max_read`]); completes when the last of them does.
struct Parent {
    inner: *mut Inner,
    tag: u64,
    pending: usize,
    bytes: i64,
    error: Option<i64>,
}

/// One request in flight: its I/O, and for a read, where its data goes.
/// Owned by libnfs from submission to callback.
struct Request {
    parent: *mut Parent,
    kind: IoKind,
    dst: *mut u8,
    len: usize,
}

unsafe extern "C" fn on_complete(err: c_int, _nfs: *mut ffi::nfs_context, data: *mut c_void, private: *mut c_void) {
    // SAFETY: `private` is the Request boxed in `commit`, handed back exactly
    // once; its Parent lives until its last request completes; `inner`
    // outlives the context (the engine destroys the context first); `dst` is
    // inside the I/O's buffer, untouched by the runner until the I/O's
    // completion; on success `data` holds `err` bytes read, on failure
    // libnfs's NUL-terminated error text (or NULL).
    let req = Box::from_raw(private as *mut Request);
    let parent = &mut *req.parent;
    let result = i64::from(err);
    if result < 0 {
        parent.error.get_or_insert(result);
        // On failure `data` is libnfs's text (NULL in the unit tests).
        let text = if data.is_null() { "unknown error".into() } else { tidy_error(data as *const std::ffi::c_char) };
        (*parent.inner).failure.get_or_insert((err, text));
    } else {
        match req.kind {
            IoKind::Read => {
                let n = (result as usize).min(req.len);
                if n > 0 && !data.is_null() {
                    std::ptr::copy_nonoverlapping(data as *const u8, req.dst, n);
                }
                parent.bytes += n as i64;
            }
            IoKind::Write => parent.bytes += result,
            IoKind::Fsync => {}
        }
    }
    parent.pending -= 1;
    if parent.pending == 0 {
        let parent = Box::from_raw(req.parent);
        (*parent.inner).done.push(Completion { tag: parent.tag, result: parent.error.unwrap_or(parent.bytes) });
    }
}

/// One worker's connection: `depth` READ/WRITE/COMMIT RPCs outstanding at once.
pub struct NfsEngine {
    ctx: Option<Ctx>,
    fh: *mut ffi::nfsfh,
    buffers: BufferPool,
    queued: Vec<IoUnit>,
    inner: Box<Inner>,
    inflight: usize,
    /// Largest read per RPC request headroom sends: unlimited for NFSv3
    /// (libnfs itself splits at rsize and sends the parts at once); 1 MiB for
    /// NFSv4, which libnfs 4.0 does not split.
    max_read: u64,
    /// Largest write per RPC request: unlimited for NFSv3 (libnfs splits at
    /// wsize); [`V4_WRITE_MAX`] for NFSv4.
    max_write: u64,
    /// Why the connection can no longer be used.
    broken: Option<ProtoError>,
    server: String,
    file_url: String,
    gone: Arc<AtomicBool>,
}

// SAFETY: the engine (its context, file handle and buffers) is used by one
// worker thread at a time; libnfs keeps no thread-local state.
unsafe impl Send for NfsEngine {}

impl NfsEngine {
    fn ctx(&self) -> *mut ffi::nfs_context {
        self.ctx.as_ref().map_or(std::ptr::null_mut(), |c| c.0)
    }

    /// The connection failed: one error for the run, naming the file left if
    /// the server is gone (the share's drop then stays quiet about it).
    fn fail(&mut self, why: String) -> io::Error {
        let msg = format!(
            "NFS server {} {why}; the test file {} stays on the server unless it comes back before headroom exits",
            self.server, self.file_url
        );
        self.gone.store(true, Ordering::Relaxed);
        let e = ProtoError::Lost(msg);
        self.broken = Some(e.clone());
        io::Error::from(e)
    }

    fn check(&self) -> io::Result<()> {
        match &self.broken {
            Some(e) => Err(io::Error::from(e.clone())),
            None => Ok(()),
        }
    }

    /// One poll(2) on the socket (at most `wait`) and one libnfs service
    /// pass: sends what is queued, reads replies, runs callbacks.
    fn pump(&mut self, wait: Duration) -> io::Result<()> {
        let ctx = self.ctx();
        // SAFETY: the context is valid while self.ctx is Some (always until drop).
        let (fd, events) = unsafe { (ffi::nfs_get_fd(ctx), ffi::nfs_which_events(ctx)) };
        let revents = c_int::from(crate::os::poll(fd, events as i16, wait)?);
        // SAFETY: valid context; callbacks write into self.inner only.
        if unsafe { ffi::nfs_service(ctx, revents) } < 0 {
            let why = Ctx(ctx).error_borrowed();
            return Err(self.fail(format!("dropped the connection ({why})")));
        }
        Ok(())
    }
}

impl Ctx {
    /// The error text of a context this Ctx does not own (no drop).
    fn error_borrowed(self) -> String {
        let me = std::mem::ManuallyDrop::new(self);
        me.error()
    }
}

impl IoEngine for NfsEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.buffers.slice_mut(usize::from(index))
    }

    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        self.check()?;
        if io.kind != IoKind::Fsync && io.len as usize > self.buffers.buf_len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "I/O larger than its buffer"));
        }
        self.queued.push(io);
        Ok(())
    }

    fn commit(&mut self) -> io::Result<()> {
        self.check()?;
        let ctx = self.ctx();
        let inner: *mut Inner = &mut *self.inner;
        for io in std::mem::take(&mut self.queued) {
            let base = self.buffers.ptr(usize::from(io.buf_index));
            let len = u64::from(io.len);
            let chunk = match io.kind {
                IoKind::Read => self.max_read,
                IoKind::Write => self.max_write,
                IoKind::Fsync => u64::MAX,
            };
            let parts = if io.kind == IoKind::Fsync { 1 } else { len.div_ceil(chunk).max(1) as usize };
            let parent = Box::into_raw(Box::new(Parent { inner, tag: io.tag, pending: parts, bytes: 0, error: None }));
            for i in 0..parts {
                let at = i as u64 * chunk.min(len);
                let part = chunk.min(len - at.min(len));
                // SAFETY: `at` is inside the buffer (at < len <= buf_len).
                let dst = unsafe { base.add(at as usize) };
                let req = Box::into_raw(Box::new(Request { parent, kind: io.kind, dst, len: part as usize }));
                // SAFETY: valid context and handle; the buffer stays untouched
                // until the I/O completes; `req` is freed by the callback, or
                // here when libnfs refuses it (then it calls nothing).
                let rc = unsafe {
                    match io.kind {
                        IoKind::Read => {
                            ffi::nfs_pread_async(ctx, self.fh, io.offset + at, part, on_complete, req.cast())
                        }
                        IoKind::Write => ffi::nfs_pwrite_async(
                            ctx,
                            self.fh,
                            io.offset + at,
                            part,
                            dst as *const c_void,
                            on_complete,
                            req.cast(),
                        ),
                        IoKind::Fsync => ffi::nfs_fsync_async(ctx, self.fh, on_complete, req.cast()),
                    }
                };
                if rc != 0 {
                    // SAFETY: libnfs took neither this request nor (when it
                    // is the first) the I/O; parts sent before it keep theirs.
                    drop(unsafe { Box::from_raw(req) });
                    let why = Ctx(ctx).error_borrowed();
                    let msg = format!("libnfs could not send a request to {} ({why})", self.server);
                    self.broken = Some(ProtoError::Lost(msg));
                    return self.check();
                }
            }
            self.inflight += 1;
        }
        // Put the requests on the wire now rather than at the next wait.
        self.pump(Duration::ZERO)
    }

    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let start_len = out.len();
        let mut last_progress = Instant::now();
        loop {
            if let Some((err, text)) = self.inner.failure.take() {
                // A reply libnfs could not take breaks the connection; a
                // status the server answered (ENOSPC, EIO) is the I/O's.
                if let e @ (ProtoError::Protocol(_) | ProtoError::Lost(_)) = fault::sort(err, text) {
                    let what = if matches!(e, ProtoError::Protocol(_)) {
                        "sent a reply libnfs could not take"
                    } else {
                        "lost a request"
                    };
                    let e = e.map(|t| format!("NFS server {} {what} ({t})", self.server));
                    self.broken = Some(e.clone());
                    return Err(io::Error::from(e));
                }
            }
            let got = self.inner.done.len();
            if got > 0 {
                self.inflight = self.inflight.saturating_sub(got);
                out.append(&mut self.inner.done);
                last_progress = Instant::now();
            }
            if out.len() - start_len >= min || self.inflight == 0 {
                return Ok(());
            }
            self.check()?;
            if last_progress.elapsed() >= SERVER_TIMEOUT {
                return Err(self.fail(format!("did not answer for {} s", SERVER_TIMEOUT.as_secs())));
            }
            // 100 ms at most, so the timeout above is checked while blocked.
            self.pump(SERVICE_SLICE)?;
            if min == 0 {
                self.inflight = self.inflight.saturating_sub(self.inner.done.len());
                out.append(&mut self.inner.done);
                return Ok(());
            }
        }
    }
}

impl Drop for NfsEngine {
    fn drop(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            if self.broken.is_none() && self.inflight == 0 {
                // NFSv4 sends CLOSE; NFSv3 only frees the handle.
                ctx.close(self.fh);
            }
            // Destroying the context first: callbacks of requests still in
            // flight run (cancelled) while `inner` is alive.
            drop(ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_longest_leading_export_wins() {
        let ex = list(&["/srv", "/srv/nfs", "/srv/nfs2", "/"]);
        assert_eq!(longest_export(&ex, "/srv/nfs/vm/a"), Some(("/srv/nfs".into(), "vm/a".into())));
        assert_eq!(longest_export(&ex, "/srv/nfs"), Some(("/srv/nfs".into(), "".into())));
        assert_eq!(longest_export(&ex, "/srv/nfsx"), Some(("/srv".into(), "nfsx".into())));
        assert_eq!(longest_export(&ex, "/other/x"), Some(("/".into(), "other/x".into())));
        assert_eq!(longest_export(&list(&["/srv/"]), "/srv/d"), Some(("/srv".into(), "d".into())));
        assert_eq!(longest_export(&list(&["/srv/nfs"]), "/srv"), None);
        assert_eq!(longest_export(&[], "/srv"), None);
    }

    /// An I/O sent as two requests completes once, with both parts' bytes
    /// copied to their places, or with the first error.
    #[test]
    fn split_ios_complete_once() {
        let mut inner = Inner { done: Vec::new(), failure: None };
        let mut buf = vec![0u8; 8];
        for (results, expect) in [([4, 4], 8i64), ([4, -5], -5)] {
            buf.fill(0);
            let parent =
                Box::into_raw(Box::new(Parent { inner: &mut inner, tag: 7, pending: 2, bytes: 0, error: None }));
            for (i, r) in results.into_iter().enumerate() {
                let mut data = [i as u8 + 1; 4];
                // SAFETY: i * 4 < 8, inside buf.
                let dst = unsafe { buf.as_mut_ptr().add(i * 4) };
                let req = Box::into_raw(Box::new(Request { parent, kind: IoKind::Read, dst, len: 4 }));
                assert!(inner.done.is_empty(), "completed before its last part");
                // A failure's data is libnfs's text: none here.
                let data: *mut c_void = if r < 0 { std::ptr::null_mut() } else { data.as_mut_ptr().cast() };
                // SAFETY: what libnfs hands the callback: the request and the data read.
                unsafe { on_complete(r, std::ptr::null_mut(), data, req.cast()) };
            }
            let done: Vec<(u64, i64)> = inner.done.drain(..).map(|c| (c.tag, c.result)).collect();
            assert_eq!(done, [(7, expect)]);
            if expect > 0 {
                assert_eq!(buf, [1, 1, 1, 1, 2, 2, 2, 2]);
            }
        }
    }

    /// The whole opening of a share as the disk engine sees it.
    fn opened(target: &str) -> headroom_disk::DiskError {
        use headroom_disk::ShareOpener;
        let opts = TargetOptions { default_size: 1 << 20, ..TargetOptions::default() };
        crate::Opener::default().open(target, &opts).expect_err("no server to open")
    }

    fn fault(e: &headroom_disk::DiskError) -> Option<headroom_disk::PeerFault> {
        match e {
            headroom_disk::DiskError::Peer { fault, .. } => Some(*fault),
            _ => None,
        }
    }

    #[test]
    fn nobody_listening_is_the_servers_fault_not_a_usage_error() {
        use headroom_disk::PeerFault;
        use std::net::TcpListener;
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let mut targets = vec![format!("nfs://{closed}/export?version=4")];
        // Without ?version, NFSv3's portmapper on port 111 is asked first:
        // only when nobody listens there is the whole answer a refusal.
        if std::net::TcpStream::connect(("127.0.0.1", fault::PORTMAPPER)).is_err() {
            targets.push(format!("nfs://{closed}/export"));
        }
        for target in targets {
            let e = opened(&target);
            assert_eq!(fault(&e), Some(PeerFault::Refused), "{target}: {e:?}");
            let line = e.to_string();
            assert!(line.starts_with(&format!("nfs://{closed}/export: ")), "{line}");
            assert!(line.contains(&format!("cannot connect to {closed}")) && !line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn a_name_that_does_not_resolve_is_unreachable() {
        // .invalid never resolves (RFC 6761).
        for target in ["nfs://no-such-host.invalid/export?version=4", "nfs://no-such-host.invalid/export"] {
            let e = opened(target);
            assert_eq!(fault(&e), Some(headroom_disk::PeerFault::Unreachable), "{target}: {e:?}");
            let line = e.to_string();
            assert!(line.starts_with("nfs://no-such-host.invalid:2049/export: "), "{line}");
            assert!(line.contains("cannot resolve no-such-host.invalid"), "{line}");
        }
    }

    #[test]
    fn libnfs_errors_become_one_line() {
        let text = CString::new("NFS: mount failed\n  reason:\tnope  ").unwrap();
        assert_eq!(tidy_error(text.as_ptr()), "NFS: mount failed reason: nope");
        assert_eq!(tidy_error(std::ptr::null()), "unknown error");
    }
}
