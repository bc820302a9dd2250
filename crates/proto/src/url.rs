//! The target URLs, validated before anything connects:
//!
//! - `nfs://HOST[:PORT]/EXPORT[/DIR][?version=3|4]`
//! - `iscsi://HOST[:PORT]/IQN/LUN`
//! - `nbd://HOST[:PORT][/EXPORT]`
//! - `smb://[[DOMAIN;]USER@]HOST[:PORT]/SHARE[/DIR][?encrypt=yes|CIPHER]`
//!
//! A password in the URL is refused: it would sit in the shell history and
//! the process list. Credentials come from [`crate::Credentials`].
//!
//! Long (about 550 lines): the four schemes' types, their one parser each and
//! the checks they share are kept together so that a form and its refusals
//! read side by side; about 470 lines of code, the rest its unit tests.

use std::fmt;

/// A URL headroom cannot use; the message says what and how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlError(String);

fn bad(url: &str, what: impl fmt::Display, form: &str) -> UrlError {
    UrlError(format!("'{url}': {what}; write it as {form}"))
}

/// Host and port of a server; the port is the protocol's default unless given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Name or address, IPv6 without brackets.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Server {
    /// `host:port` for connecting (`[v6]:port` for IPv6).
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.addr())
    }
}

/// NFS version to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NfsVersion {
    /// NFSv3 (MOUNT protocol for the export).
    V3,
    /// NFSv4 (one namespace, port 2049 only).
    V4,
}

/// `nfs://HOST[:PORT]/EXPORT[/DIR]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NfsUrl {
    /// The server (port 2049 by default).
    pub server: Server,
    /// Export and directory, absolute (`/export/dir`); which leading part is
    /// the export is the server's to say (its export list).
    pub path: String,
    /// `?version=3|4`; None: the client's choice.
    pub version: Option<NfsVersion>,
}

/// `iscsi://HOST[:PORT]/IQN/LUN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IscsiUrl {
    /// The portal (port 3260 by default).
    pub server: Server,
    /// Target name (`iqn.`, `eui.` or `naa.` form).
    pub target: String,
    /// Logical unit number.
    pub lun: u16,
}

/// `nbd://HOST[:PORT][/EXPORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdUrl {
    /// The server (port 10809 by default).
    pub server: Server,
    /// Export name; empty: the server's default export.
    pub export: String,
}

/// An SMB 3 cipher (MS-SMB2 2.2.3.1.2), by the name users write in
/// `?encrypt=`; the discriminant is its CipherId on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum SmbCipher {
    /// AES-128-CCM: the only cipher of SMB 3.0 and 3.0.2.
    Aes128Ccm = 1,
    /// AES-128-GCM (3.1.1).
    Aes128Gcm = 2,
    /// AES-256-CCM (3.1.1).
    Aes256Ccm = 3,
    /// AES-256-GCM (3.1.1).
    Aes256Gcm = 4,
}

impl SmbCipher {
    /// Every cipher, in the order headroom offers them (GCM first: it is
    /// the cheaper one per byte on CPUs with carry-less multiply).
    pub const ALL: [SmbCipher; 4] =
        [SmbCipher::Aes128Gcm, SmbCipher::Aes128Ccm, SmbCipher::Aes256Gcm, SmbCipher::Aes256Ccm];

    /// The name users write and results record.
    pub fn name(self) -> &'static str {
        match self {
            SmbCipher::Aes128Ccm => "aes-128-ccm",
            SmbCipher::Aes128Gcm => "aes-128-gcm",
            SmbCipher::Aes256Ccm => "aes-256-ccm",
            SmbCipher::Aes256Gcm => "aes-256-gcm",
        }
    }

    /// The cipher of a CipherId.
    pub fn from_id(id: u16) -> Option<SmbCipher> {
        SmbCipher::ALL.into_iter().find(|c| *c as u16 == id)
    }
}

/// `?encrypt=` of an SMB URL: encrypt even where the server does not ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmbEncrypt {
    /// `yes`: whichever cipher the server picks.
    Any,
    /// Only this cipher is offered.
    Only(SmbCipher),
}

/// `smb://[[DOMAIN;]USER@]HOST[:PORT]/SHARE[/DIR][?encrypt=yes|CIPHER]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmbUrl {
    /// The server (port 445 by default).
    pub server: Server,
    /// User to authenticate as; None: from the credentials, else guest.
    pub user: Option<String>,
    /// NTLM domain (`DOMAIN;USER@`).
    pub domain: Option<String>,
    /// Share name.
    pub share: String,
    /// Directory inside the share, without leading or trailing `/`; empty: its root.
    pub dir: String,
    /// `?encrypt=`: None encrypts only where the server or share requires it.
    pub encrypt: Option<SmbEncrypt>,
}

/// A parsed target URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareUrl {
    /// `nfs://`
    Nfs(NfsUrl),
    /// `iscsi://`
    Iscsi(IscsiUrl),
    /// `nbd://`
    Nbd(NbdUrl),
    /// `smb://`
    Smb(SmbUrl),
}

/// So a command line can hand the text to clap's value parser and carry the
/// checked URL from there.
impl std::str::FromStr for ShareUrl {
    type Err = UrlError;

    fn from_str(text: &str) -> Result<ShareUrl, UrlError> {
        ShareUrl::parse(text)
    }
}

/// A share URL as the user wrote it, checked once at the command line and
/// carried from there: the text names the target in every output (and is
/// what the disk crate, below this one, opens through [`crate::Opener`]);
/// the parsed URL answers what the job asks of it (its server, its daemons,
/// whether it is a whole export).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareTarget {
    text: String,
    url: ShareUrl,
}

impl ShareTarget {
    /// The URL as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed URL.
    pub fn url(&self) -> &ShareUrl {
        &self.url
    }
}

impl std::str::FromStr for ShareTarget {
    type Err = UrlError;

    fn from_str(text: &str) -> Result<ShareTarget, UrlError> {
        Ok(ShareTarget { text: text.to_string(), url: ShareUrl::parse(text)? })
    }
}

/// What a command's PATH names: a path on this machine, or a share URL
/// checked when the argument was read (the only place a command's URL is
/// parsed; the opener is handed the parsed URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskPath {
    /// A file, directory or device here (or, with `--remote`, on the server).
    Local(std::path::PathBuf),
    /// `nfs://`, `iscsi://`, `nbd://` or `smb://`.
    Share(ShareTarget),
}

impl DiskPath {
    /// `path` as a command line gives it: text that looks like a URL
    /// (`scheme://`, [`headroom_disk::looks_like_url`]) must be one of
    /// headroom's; anything else is a path.
    pub fn parse(path: &std::path::Path) -> Result<DiskPath, UrlError> {
        let text = path.to_string_lossy();
        if headroom_disk::looks_like_url(&text) {
            return text.parse().map(DiskPath::Share);
        }
        Ok(DiskPath::Local(path.to_path_buf()))
    }

    /// The share, when PATH is a URL.
    pub fn share(&self) -> Option<&ShareTarget> {
        match self {
            DiskPath::Share(s) => Some(s),
            DiskPath::Local(_) => None,
        }
    }
}

/// nfsd: the kernel server's threads; the rest user-space servers.
const NFS_DAEMONS: &[&str] = &["nfsd", "ganesha.nfsd", "unfsd"];
/// Every file server's daemons, for a mounted share whose protocol is unknown.
pub const FILE_SERVER_DAEMONS: &[&str] = &["nfsd", "ganesha.nfsd", "unfsd", "smbd", "tgtd", "nbdkit"];
const NFS_FORM: &str = "nfs://HOST[:PORT]/EXPORT[/DIR]";
const ISCSI_FORM: &str = "iscsi://HOST[:PORT]/IQN/LUN, e.g. iscsi://nas/iqn.2005-10.org.freenas.ctl:vm/0";
const NBD_FORM: &str = "nbd://HOST[:PORT][/EXPORT]";
const SMB_FORM: &str =
    "smb://[USER@]HOST[:PORT]/SHARE[/DIR][?encrypt=yes|aes-128-gcm|aes-128-ccm|aes-256-gcm|aes-256-ccm]";

impl ShareUrl {
    /// The server the URL names.
    pub fn server(&self) -> &Server {
        match self {
            ShareUrl::Nfs(u) => &u.server,
            ShareUrl::Iscsi(u) => &u.server,
            ShareUrl::Nbd(u) => &u.server,
            ShareUrl::Smb(u) => &u.server,
        }
    }

    /// The names (comm) of the processes that usually serve this protocol on
    /// a server: user-space daemons and kernel threads.
    pub fn server_daemons(&self) -> &'static [&'static str] {
        match self {
            ShareUrl::Nfs(_) => NFS_DAEMONS,
            ShareUrl::Iscsi(_) => &["tgtd", "iscsi_trx", "iscsi_ttx", "istgt"],
            ShareUrl::Nbd(_) => &["nbdkit", "qemu-nbd", "nbd-server"],
            ShareUrl::Smb(_) => &["smbd"],
        }
    }

    /// Parses and checks `text`.
    pub fn parse(text: &str) -> Result<ShareUrl, UrlError> {
        let (scheme, _) = text.split_once("://").ok_or_else(|| {
            UrlError(format!("'{text}' is not a URL; use nfs://, iscsi://, nbd:// or smb://, or a local path"))
        })?;
        let form = match scheme.to_ascii_lowercase().as_str() {
            "nfs" => NFS_FORM,
            "iscsi" => ISCSI_FORM,
            "nbd" => NBD_FORM,
            "smb" => SMB_FORM,
            other => {
                let hint = suggest(other).map(|s| format!(" (did you mean {s}://?)")).unwrap_or_default();
                return Err(UrlError(format!(
                    "'{text}': unknown scheme '{other}'{hint}; headroom speaks nfs://, iscsi://, nbd:// and smb://"
                )));
            }
        };
        // The URL parser would resolve `a/../b` to `b` silently; say it instead.
        let after_host = text[scheme.len() + 3..].split_once('/').map_or("", |(_, path)| path);
        if after_host.split(['/', '?']).any(|s| s == ".." || s.eq_ignore_ascii_case("%2e%2e")) {
            return Err(bad(text, "'..' in the path", form));
        }
        let url = ::url::Url::parse(text).map_err(|e| bad(text, e, form))?;
        if url.password().is_some() {
            return Err(UrlError(format!(
                "'{}': a password in the URL would be kept in the shell history and shown in the process list; \
                 remove it and set HEADROOM_SMB_PASSWORD / HEADROOM_ISCSI_PASSWORD or use --credentials FILE",
                redact(text)
            )));
        }
        if url.fragment().is_some() {
            return Err(bad(text, "a URL fragment (#...) means nothing here", form));
        }
        match scheme.to_ascii_lowercase().as_str() {
            "nfs" => parse_nfs(text, &url).map(ShareUrl::Nfs),
            "iscsi" => parse_iscsi(text, &url).map(ShareUrl::Iscsi),
            "nbd" => parse_nbd(text, &url).map(ShareUrl::Nbd),
            _ => parse_smb(text, &url).map(ShareUrl::Smb),
        }
    }

    /// Whether the URL names a whole export (an iSCSI LUN, an NBD export)
    /// rather than a directory for a test file: someone's data, never
    /// written without `--destructive`.
    pub fn is_whole_export(&self) -> bool {
        matches!(self, ShareUrl::Iscsi(_) | ShareUrl::Nbd(_))
    }

    /// The scheme: nfs, iscsi, nbd or smb.
    pub fn scheme(&self) -> &'static str {
        match self {
            ShareUrl::Nfs(_) => "nfs",
            ShareUrl::Iscsi(_) => "iscsi",
            ShareUrl::Nbd(_) => "nbd",
            ShareUrl::Smb(_) => "smb",
        }
    }
}

fn suggest(scheme: &str) -> Option<&'static str> {
    match scheme {
        "cifs" | "samba" | "smb2" | "smb3" => Some("smb"),
        "nfs3" | "nfs4" => Some("nfs"),
        "iscsis" | "iqn" => Some("iscsi"),
        "nbds" | "nbd+unix" => Some("nbd"),
        _ => None,
    }
}

/// `text` with any password replaced by `***`, for messages.
fn redact(text: &str) -> String {
    match ::url::Url::parse(text) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => text.to_string(),
    }
}

fn server(text: &str, url: &::url::Url, default_port: u16, form: &str) -> Result<Server, UrlError> {
    let host = match url.host() {
        Some(::url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(bad(text, "no server name", form)),
    };
    if host.is_empty() {
        return Err(bad(text, "no server name", form));
    }
    let port = url.port().unwrap_or(default_port);
    if port == 0 {
        return Err(bad(text, "port 0 is not a port", form));
    }
    Ok(Server { host, port })
}

fn decoded(text: &str, part: &str, form: &str) -> Result<String, UrlError> {
    percent_encoding::percent_decode_str(part)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| bad(text, format!("'{part}' is not valid UTF-8 once decoded"), form))
}

fn no_query(text: &str, url: &::url::Url, form: &str) -> Result<(), UrlError> {
    match url.query() {
        Some(q) => Err(bad(text, format!("unknown option '?{q}'"), form)),
        None => Ok(()),
    }
}

fn no_user(text: &str, url: &::url::Url, form: &str) -> Result<(), UrlError> {
    if url.username().is_empty() {
        Ok(())
    } else {
        Err(bad(text, format!("this protocol has no user name ('{}@')", url.username()), form))
    }
}

/// Path segments, decoded, without empty ones (`//` and a trailing `/`).
fn segments(text: &str, url: &::url::Url, form: &str) -> Result<Vec<String>, UrlError> {
    url.path().split('/').filter(|s| !s.is_empty()).map(|s| decoded(text, s, form)).collect()
}

fn parse_nfs(text: &str, url: &::url::Url) -> Result<NfsUrl, UrlError> {
    no_user(text, url, NFS_FORM)?;
    let server = server(text, url, 2049, NFS_FORM)?;
    let mut version = None;
    for (key, value) in url.query_pairs() {
        match (key.as_ref(), value.as_ref()) {
            ("version" | "vers", "3") => version = Some(NfsVersion::V3),
            ("version" | "vers", "4" | "4.0" | "4.1") => version = Some(NfsVersion::V4),
            (k, v) => {
                return Err(bad(text, format!("unknown option '{k}={v}' (only version=3 or version=4)"), NFS_FORM))
            }
        }
    }
    let parts = segments(text, url, NFS_FORM)?;
    if parts.is_empty() {
        return Err(bad(text, "no export (the path the server exports)", NFS_FORM));
    }
    Ok(NfsUrl { server, path: format!("/{}", parts.join("/")), version })
}

fn parse_iscsi(text: &str, url: &::url::Url) -> Result<IscsiUrl, UrlError> {
    no_user(text, url, ISCSI_FORM)?;
    no_query(text, url, ISCSI_FORM)?;
    let server = server(text, url, 3260, ISCSI_FORM)?;
    let parts = segments(text, url, ISCSI_FORM)?;
    let [target, lun] = parts.as_slice() else {
        return Err(bad(text, "expected a target name and a LUN after the host", ISCSI_FORM));
    };
    let lower = target.to_ascii_lowercase();
    if !(lower.starts_with("iqn.") || lower.starts_with("eui.") || lower.starts_with("naa.")) {
        return Err(bad(text, format!("'{target}' is not an iSCSI name (iqn., eui. or naa.)"), ISCSI_FORM));
    }
    let lun = lun.parse::<u16>().map_err(|_| bad(text, format!("LUN '{lun}' is not a number 0-65535"), ISCSI_FORM))?;
    Ok(IscsiUrl { server, target: target.clone(), lun })
}

fn parse_nbd(text: &str, url: &::url::Url) -> Result<NbdUrl, UrlError> {
    no_user(text, url, NBD_FORM)?;
    no_query(text, url, NBD_FORM)?;
    let server = server(text, url, 10809, NBD_FORM)?;
    // The export name is everything after the first '/', as libnbd and qemu read it.
    let raw = url.path().strip_prefix('/').unwrap_or("");
    let export = decoded(text, raw, NBD_FORM)?;
    if export.len() > 4096 {
        return Err(bad(text, "an export name is at most 4096 bytes (NBD)", NBD_FORM));
    }
    Ok(NbdUrl { server, export })
}

fn parse_smb(text: &str, url: &::url::Url) -> Result<SmbUrl, UrlError> {
    let server = server(text, url, 445, SMB_FORM)?;
    let mut encrypt = None;
    for (key, value) in url.query_pairs() {
        encrypt = Some(match (key.as_ref(), value.as_ref()) {
            ("encrypt", "yes" | "1" | "true" | "required") => SmbEncrypt::Any,
            ("encrypt", v) => match SmbCipher::ALL.into_iter().find(|c| c.name().eq_ignore_ascii_case(v)) {
                Some(c) => SmbEncrypt::Only(c),
                None => return Err(bad(text, format!("unknown cipher '{v}'"), SMB_FORM)),
            },
            (k, v) => return Err(bad(text, format!("unknown option '{k}={v}' (only encrypt=...)"), SMB_FORM)),
        });
    }
    let login = decoded(text, url.username(), SMB_FORM)?;
    let (domain, user) = match login.split_once(';') {
        Some((d, u)) => (Some(d.to_string()).filter(|d| !d.is_empty()), u.to_string()),
        None => (None, login),
    };
    let parts = segments(text, url, SMB_FORM)?;
    let Some((share, dir)) = parts.split_first() else {
        return Err(bad(text, "no share name after the host", SMB_FORM));
    };
    Ok(SmbUrl {
        server,
        user: Some(user).filter(|u| !u.is_empty()),
        domain,
        share: share.clone(),
        dir: dir.join("/"),
        encrypt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        ShareUrl::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn each_scheme_parses_with_its_default_port() {
        let ShareUrl::Nfs(n) = ShareUrl::parse("nfs://nas.lan/export/vm?version=3").unwrap() else { panic!() };
        assert_eq!(
            (n.server.addr(), n.path.as_str(), n.version),
            ("nas.lan:2049".into(), "/export/vm", Some(NfsVersion::V3))
        );
        let ShareUrl::Iscsi(i) = ShareUrl::parse("iscsi://10.0.0.5:3261/iqn.2005-10.org.freenas.ctl:vm/3").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (i.server.addr(), i.target.as_str(), i.lun),
            ("10.0.0.5:3261".into(), "iqn.2005-10.org.freenas.ctl:vm", 3)
        );
        let ShareUrl::Nbd(b) = ShareUrl::parse("nbd://[fd00::2]/disk%20a").unwrap() else { panic!() };
        assert_eq!((b.server.addr(), b.export.as_str()), ("[fd00::2]:10809".into(), "disk a"));
        let ShareUrl::Nbd(b) = ShareUrl::parse("nbd://host").unwrap() else { panic!() };
        assert_eq!(b.export, "");
        let ShareUrl::Smb(s) = ShareUrl::parse("smb://LAB;alice@nas/media/bench/run1").unwrap() else { panic!() };
        assert_eq!(
            (s.server.addr(), s.user.as_deref(), s.domain.as_deref(), s.share.as_str(), s.dir.as_str()),
            ("nas:445".into(), Some("alice"), Some("LAB"), "media", "bench/run1")
        );
        assert_eq!(s.encrypt, None);
        let ShareUrl::Smb(s) = ShareUrl::parse("smb://nas/media?encrypt=yes").unwrap() else { panic!() };
        assert_eq!(s.encrypt, Some(SmbEncrypt::Any));
        let ShareUrl::Smb(s) = ShareUrl::parse("smb://nas/media?encrypt=AES-256-GCM").unwrap() else { panic!() };
        assert_eq!(s.encrypt, Some(SmbEncrypt::Only(SmbCipher::Aes256Gcm)));
        assert!(err("smb://nas/media?encrypt=des").contains("unknown cipher 'des'"));
        assert!(err("smb://nas/media?sign=yes").contains("unknown option 'sign=yes'"));
    }

    #[test]
    fn mistakes_are_named() {
        assert!(err("cifs://nas/share").contains("did you mean smb://"));
        assert!(err("ftp://nas/x").contains("unknown scheme 'ftp'"));
        assert!(err("/mnt/nas").contains("not a URL"));
        let pw = err("smb://alice:hunter2@nas/share");
        assert!(pw.contains("password") && !pw.contains("hunter2"), "{pw}");
        assert!(err("iscsi://nas/iqn.2001-04.com.example:t").contains("a target name and a LUN"));
        assert!(err("iscsi://nas/storage/0").contains("not an iSCSI name"));
        assert!(err("iscsi://nas/iqn.2001-04.com.example:t/lun0").contains("LUN 'lun0'"));
        assert!(err("nfs://nas").contains("no export"));
        assert!(err("nfs://nas/a/../etc").contains("'..'"));
        assert!(err("smb://nas/share/%2e%2e/x").contains("'..'"));
        assert!(err("nfs://nas/x?version=2").contains("version=2"));
        assert!(err("nfs://bob@nas/x").contains("no user name"));
        assert!(err("smb://nas").contains("no share"));
        assert!(err("nbd://nas:0/x").contains("port 0"));
        assert!(err("nbd://nas:99999/x").contains("nbd://HOST"));
        assert!(err("nbd:///x").contains("no server"));
    }

    #[test]
    fn a_path_argument_is_a_share_only_when_it_is_written_as_a_url() {
        use std::path::Path;
        let DiskPath::Share(share) = DiskPath::parse(Path::new("nbd://nas/disk")).unwrap() else { panic!() };
        assert_eq!(share.as_str(), "nbd://nas/disk");
        assert!(matches!(share.url(), ShareUrl::Nbd(b) if b.server.host == "nas"));
        for local in ["/mnt/nas", "relative/dir", "odd:name", "/a/nfs://b"] {
            assert_eq!(DiskPath::parse(Path::new(local)).unwrap(), DiskPath::Local(local.into()), "{local}");
        }
        let e = DiskPath::parse(Path::new("nsf://nas/export")).unwrap_err();
        assert_eq!(e, ShareUrl::parse("nsf://nas/export").unwrap_err());
    }
}
