//! SMB2/3 messages on the wire (MS-SMB2 section 2.2): the direct-TCP frame,
//! the 64-byte sync header, the request bodies headroom sends and the
//! response fields it reads. Pure byte layout, no I/O; every parser checks
//! lengths first, so a hostile or broken server gives an error, never a
//! panic.
//!
//! Long (about 620 lines) because it is the byte layout of every SMB2 message headroom sends or
//! reads, kept together as a protocol reference; about 510 lines of code, the rest its unit tests.

use crate::url::SmbCipher;
use std::fmt;

/// Bytes of the SMB2 header.
pub const HEADER: usize = 64;

/// SMB2 commands headroom uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Command {
    /// Dialect and capabilities.
    Negotiate = 0,
    /// Authentication (NTLMSSP legs).
    SessionSetup = 1,
    /// Share.
    TreeConnect = 3,
    /// Open or create a file.
    Create = 5,
    /// Close a handle.
    Close = 6,
    /// Make written data stable.
    Flush = 7,
    /// Read.
    Read = 8,
    /// Write.
    Write = 9,
    /// No-op, used to gather credits.
    Echo = 13,
}

/// SMB2 dialects headroom offers: 2.1 is the first with multi-credit I/O.
pub const DIALECTS: [u16; 4] = [0x0210, 0x0300, 0x0302, 0x0311];
/// The 3.1.1 dialect: negotiate contexts, preauthentication integrity.
pub const SMB_311: u16 = 0x0311;

/// The dialect as users know it.
pub fn dialect_name(d: u16) -> String {
    match d {
        0x0202 => "2.0.2".into(),
        0x0210 => "2.1".into(),
        0x0300 => "3.0".into(),
        0x0302 => "3.0.2".into(),
        0x0311 => "3.1.1".into(),
        other => format!("0x{other:04x}"),
    }
}

/// Header flags.
pub const FLAG_RESPONSE: u32 = 0x1;
/// SESSION_SETUP response SessionFlags: a guest (1) or anonymous (2)
/// session, which has no key to sign with.
pub const SESSION_FLAG_GUEST_OR_NULL: u16 = 0x1 | 0x2;
/// The response is asynchronous (interim STATUS_PENDING or its final answer).
pub const FLAG_ASYNC: u32 = 0x2;
/// SESSION_SETUP response SessionFlags: the server encrypts this session.
pub const SESSION_FLAG_ENCRYPT_DATA: u16 = 0x4;
/// TREE_CONNECT response ShareFlags (SHI1005_FLAGS_ENCRYPT_DATA): the
/// share takes only encrypted requests.
pub const SHARE_FLAG_ENCRYPT_DATA: u32 = 0x8000;
/// SMB2_GLOBAL_CAP_ENCRYPTION: 3.0 and 3.0.2 encrypt with AES-128-CCM.
const CAP_ENCRYPTION: u32 = 0x40;
/// Negotiate context types (MS-SMB2 2.2.3.1).
const CTX_PREAUTH: u16 = 1;
const CTX_ENCRYPTION: u16 = 2;
/// The preauthentication hash: SHA-512, the only one defined.
const HASH_SHA512: u16 = 1;
/// Negotiate contexts taken in one answer: Windows sends at most about
/// eight; more is a hostile server making the client walk.
const MAX_CONTEXTS: usize = 32;

/// NTSTATUS values headroom tells apart.
pub mod status {
    /// Success.
    pub const SUCCESS: u32 = 0;
    /// Interim response: the final one follows.
    pub const PENDING: u32 = 0x0000_0103;
    /// NTLMSSP's first leg done, send the next.
    pub const MORE_PROCESSING_REQUIRED: u32 = 0xC000_0016;
    /// Read at or past the end.
    pub const END_OF_FILE: u32 = 0xC000_0011;
    /// Wrong user or password.
    pub const LOGON_FAILURE: u32 = 0xC000_006D;
    /// Not allowed.
    pub const ACCESS_DENIED: u32 = 0xC000_0022;
    /// Exists already (FILE_CREATE).
    pub const OBJECT_NAME_COLLISION: u32 = 0xC000_0035;
    /// No such file.
    pub const OBJECT_NAME_NOT_FOUND: u32 = 0xC000_0034;
    /// No such directory.
    pub const OBJECT_PATH_NOT_FOUND: u32 = 0xC000_003A;
    /// No such share.
    pub const BAD_NETWORK_NAME: u32 = 0xC000_00CC;
    /// The disk is full.
    pub const DISK_FULL: u32 = 0xC000_007F;
    /// Over quota.
    pub const QUOTA_EXCEEDED: u32 = 0xC000_0044;
    /// Not a directory.
    pub const NOT_A_DIRECTORY: u32 = 0xC000_0103;
    /// A directory where a file was asked for (FILE_NON_DIRECTORY_FILE).
    pub const FILE_IS_A_DIRECTORY: u32 = 0xC000_00BA;
}

/// An NTSTATUS with its name where headroom knows it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NtStatus(pub u32);

impl fmt::Display for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            status::SUCCESS => "STATUS_SUCCESS",
            status::PENDING => "STATUS_PENDING",
            status::MORE_PROCESSING_REQUIRED => "STATUS_MORE_PROCESSING_REQUIRED",
            status::END_OF_FILE => "STATUS_END_OF_FILE",
            status::LOGON_FAILURE => "STATUS_LOGON_FAILURE",
            status::ACCESS_DENIED => "STATUS_ACCESS_DENIED",
            status::OBJECT_NAME_COLLISION => "STATUS_OBJECT_NAME_COLLISION",
            status::OBJECT_NAME_NOT_FOUND => "STATUS_OBJECT_NAME_NOT_FOUND",
            status::OBJECT_PATH_NOT_FOUND => "STATUS_OBJECT_PATH_NOT_FOUND",
            status::FILE_IS_A_DIRECTORY => "STATUS_FILE_IS_A_DIRECTORY",
            status::BAD_NETWORK_NAME => "STATUS_BAD_NETWORK_NAME",
            status::DISK_FULL => "STATUS_DISK_FULL",
            status::QUOTA_EXCEEDED => "STATUS_QUOTA_EXCEEDED",
            status::NOT_A_DIRECTORY => "STATUS_NOT_A_DIRECTORY",
            0xC000_000D => "STATUS_INVALID_PARAMETER",
            0xC000_0001 => "STATUS_UNSUCCESSFUL",
            0xC000_00BB => "STATUS_NOT_SUPPORTED",
            0xC000_0033 => "STATUS_OBJECT_NAME_INVALID",
            0xC000_0043 => "STATUS_SHARING_VIOLATION",
            0xC000_0185 => "STATUS_IO_DEVICE_ERROR",
            _ => return write!(f, "NTSTATUS 0x{:08x}", self.0),
        };
        f.write_str(name)
    }
}

impl fmt::Debug for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl NtStatus {
    /// What kind of failure an I/O completion reports for this status (the
    /// platform's error number for it: `os::io_error_code`).
    pub fn error_kind(self) -> std::io::ErrorKind {
        use std::io::ErrorKind;
        match self.0 {
            status::DISK_FULL | status::QUOTA_EXCEEDED => ErrorKind::StorageFull,
            status::ACCESS_DENIED => ErrorKind::PermissionDenied,
            status::OBJECT_NAME_NOT_FOUND | status::OBJECT_PATH_NOT_FOUND => ErrorKind::NotFound,
            _ => ErrorKind::Other,
        }
    }
}

/// What a request header carries.
#[derive(Debug, Clone, Copy)]
pub struct RequestHeader {
    /// The command.
    pub command: Command,
    /// Credits this request consumes (1 per 64 KiB of data, at least 1).
    pub credit_charge: u16,
    /// Credits asked for in the response.
    pub credit_request: u16,
    /// First message id of the request (it uses `credit_charge` of them).
    pub message_id: u64,
    /// Tree, 0 before TREE_CONNECT.
    pub tree_id: u32,
    /// Session, 0 before SESSION_SETUP answers.
    pub session_id: u64,
}

/// Appends the direct-TCP length prefix and the header for a frame whose
/// body (after the header) is `body_len` bytes.
pub fn put_frame_start(out: &mut Vec<u8>, h: &RequestHeader, body_len: usize) {
    let len = (HEADER + body_len) as u32;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(b"\xfeSMB");
    put16(out, 64);
    put16(out, h.credit_charge);
    put32(out, 0); // ChannelSequence / Reserved
    put16(out, h.command as u16);
    put16(out, h.credit_request);
    put32(out, 0); // Flags
    put32(out, 0); // NextCommand
    put64(out, h.message_id);
    put32(out, 0); // Reserved (ProcessId)
    put32(out, h.tree_id);
    put64(out, h.session_id);
    out.extend_from_slice(&[0u8; 16]); // Signature
}

/// Credits a request moving `len` bytes consumes (MS-SMB2 3.2.4.1.5).
pub fn credit_charge(len: u32) -> u16 {
    (len.max(1) as u64).div_ceil(65536) as u16
}

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// UTF-16LE of `s`.
pub fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// NEGOTIATE body offering `dialects`, large MTU, signing enabled (not
/// required), encryption with `ciphers` (the capability flag as well as
/// 3.1.1's context: Samba ignores the context without the flag), and when
/// 3.1.1 is offered its negotiate contexts: preauthentication integrity
/// (SHA-512, `salt`) and the ciphers.
pub fn negotiate(dialects: &[u16], client_guid: [u8; 16], salt: [u8; 32], ciphers: &[SmbCipher]) -> Vec<u8> {
    let v311 = dialects.contains(&SMB_311);
    let contexts: u16 = if !v311 {
        0
    } else if ciphers.is_empty() {
        1
    } else {
        2
    };
    let mut b = Vec::with_capacity(160);
    put16(&mut b, 36);
    put16(&mut b, dialects.len() as u16);
    put16(&mut b, 1); // SecurityMode: signing enabled
    put16(&mut b, 0);
    let encrypt = if ciphers.is_empty() { 0 } else { CAP_ENCRYPTION };
    put32(&mut b, 0x4 | encrypt); // SMB2_GLOBAL_CAP_LARGE_MTU
    b.extend_from_slice(&client_guid);
    let ctx_at = b.len();
    put32(&mut b, 0); // NegotiateContextOffset (3.1.1), patched below; else ClientStartTime 0
    put16(&mut b, contexts); // NegotiateContextCount
    put16(&mut b, 0);
    for d in dialects {
        put16(&mut b, *d);
    }
    if !v311 {
        return b;
    }
    pad8(&mut b);
    let offset = (HEADER + b.len()) as u32;
    b[ctx_at..ctx_at + 4].copy_from_slice(&offset.to_le_bytes());
    // SMB2_PREAUTH_INTEGRITY_CAPABILITIES: one hash (SHA-512) and a salt.
    put16(&mut b, CTX_PREAUTH);
    put16(&mut b, 2 + 2 + 2 + 32);
    put32(&mut b, 0);
    put16(&mut b, 1);
    put16(&mut b, 32);
    put16(&mut b, HASH_SHA512);
    b.extend_from_slice(&salt);
    if !ciphers.is_empty() {
        // SMB2_ENCRYPTION_CAPABILITIES: the ciphers, preferred first.
        pad8(&mut b);
        put16(&mut b, CTX_ENCRYPTION);
        put16(&mut b, 2 + 2 * ciphers.len() as u16);
        put32(&mut b, 0);
        put16(&mut b, ciphers.len() as u16);
        for c in ciphers {
            put16(&mut b, *c as u16);
        }
    }
    b
}

/// Pads a body so the next negotiate context starts 8-byte aligned
/// (counted from the header's start).
fn pad8(b: &mut Vec<u8>) {
    while !(HEADER + b.len()).is_multiple_of(8) {
        b.push(0);
    }
}

/// What NEGOTIATE answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Dialect chosen.
    pub dialect: u16,
    /// The server requires signed messages.
    pub signing_required: bool,
    /// Largest IOCTL/transaction, bytes.
    pub max_transact: u32,
    /// Largest READ, bytes.
    pub max_read: u32,
    /// Largest WRITE, bytes.
    pub max_write: u32,
    /// The cipher the session would encrypt with: 3.1.1's choice from the
    /// ciphers offered, AES-128-CCM on 3.0.x when the server can encrypt;
    /// None when it cannot.
    pub cipher: Option<SmbCipher>,
}

/// Parses a NEGOTIATE response body; on 3.1.1 its negotiate contexts,
/// which must hold one SHA-512 preauthentication context and at most one
/// cipher from `offered`.
pub fn parse_negotiate(body: &[u8], offered: &[SmbCipher]) -> Result<Negotiated, String> {
    need(body, 64, "NEGOTIATE response")?;
    let dialect = le16(body, 4);
    let caps = le32(body, 24);
    let mut n = Negotiated {
        dialect,
        signing_required: le16(body, 2) & 0x2 != 0,
        max_transact: le32(body, 28),
        max_read: le32(body, 32),
        max_write: le32(body, 36),
        cipher: None,
    };
    if dialect != SMB_311 {
        if dialect >= 0x0300 && caps & CAP_ENCRYPTION != 0 && offered.contains(&SmbCipher::Aes128Ccm) {
            n.cipher = Some(SmbCipher::Aes128Ccm);
        }
        return Ok(n);
    }
    let count = le16(body, 6) as usize;
    if count == 0 || count > MAX_CONTEXTS {
        return Err(format!("a 3.1.1 NEGOTIATE answer with {count} negotiate contexts (1 to {MAX_CONTEXTS})"));
    }
    let offset = le32(body, 60) as usize;
    let mut at = offset
        .checked_sub(HEADER)
        .filter(|a| *a >= 64)
        .ok_or_else(|| format!("negotiate contexts at offset {offset}, inside the NEGOTIATE answer's head"))?;
    let mut preauth = false;
    let mut cipher_seen = false;
    for i in 0..count {
        at = at.next_multiple_of(8);
        let head = body.get(at..at + 8).ok_or_else(|| format!("negotiate context {i} at {at} runs past the answer"))?;
        let (kind, len) = (le16(head, 0), le16(head, 2) as usize);
        let data = body
            .get(at + 8..at + 8 + len)
            .ok_or_else(|| format!("negotiate context {i} ({len} bytes) runs past the answer"))?;
        match kind {
            CTX_PREAUTH => {
                need(data, 6, "preauthentication context")?;
                let (hashes, salt) = (le16(data, 0), le16(data, 2) as usize);
                if preauth || hashes != 1 || le16(data, 4) != HASH_SHA512 || 6 + salt > len {
                    return Err(format!(
                        "a preauthentication context with {hashes} hashes (first 0x{:04x}), a {salt}-byte salt in \
                         {len} bytes{}: one SHA-512 (1) expected",
                        le16(data, 4),
                        if preauth { ", twice" } else { "" }
                    ));
                }
                preauth = true;
            }
            CTX_ENCRYPTION => {
                need(data, 4, "encryption context")?;
                let (ciphers, id) = (le16(data, 0), le16(data, 2));
                if cipher_seen || ciphers != 1 {
                    return Err(format!("an encryption context naming {ciphers} ciphers (one expected), or twice"));
                }
                cipher_seen = true;
                n.cipher = match SmbCipher::from_id(id) {
                    _ if id == 0 => None, // no cipher in common
                    Some(c) if offered.contains(&c) => Some(c),
                    _ => return Err(format!("the cipher 0x{id:04x}, which headroom did not offer")),
                };
            }
            _ => {} // compression, netname, signing...: nothing headroom asked for
        }
        at += 8 + len;
    }
    if !preauth {
        return Err("a 3.1.1 NEGOTIATE answer without its preauthentication context".into());
    }
    Ok(n)
}

/// SESSION_SETUP body carrying `token` (an NTLMSSP message).
pub fn session_setup(token: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + token.len());
    put16(&mut b, 25);
    b.push(0); // Flags
    b.push(1); // SecurityMode: signing enabled
    put32(&mut b, 0); // Capabilities
    put32(&mut b, 0); // Channel
    put16(&mut b, (HEADER + 24) as u16);
    put16(&mut b, token.len() as u16);
    put64(&mut b, 0); // PreviousSessionId
    b.extend_from_slice(token);
    b
}

/// The security token of a SESSION_SETUP response, and its SessionFlags.
pub fn parse_session_setup(body: &[u8]) -> Result<(u16, &[u8]), String> {
    need(body, 8, "SESSION_SETUP response")?;
    let flags = le16(body, 2);
    let token = buffer(body, le16(body, 4) as usize, le16(body, 6) as usize, "SESSION_SETUP security buffer")?;
    Ok((flags, token))
}

/// TREE_CONNECT body for `\\server\share`.
pub fn tree_connect(unc: &str) -> Vec<u8> {
    let path = utf16(unc);
    let mut b = Vec::with_capacity(8 + path.len());
    put16(&mut b, 9);
    put16(&mut b, 0);
    put16(&mut b, (HEADER + 8) as u16);
    put16(&mut b, path.len() as u16);
    b.extend_from_slice(&path);
    b
}

/// The ShareFlags of a TREE_CONNECT response.
pub fn parse_tree_connect(body: &[u8]) -> Result<u32, String> {
    need(body, 16, "TREE_CONNECT response")?;
    Ok(le32(body, 4))
}

/// Access rights (MS-SMB2 2.2.13.1.1).
pub mod access {
    /// Read data.
    pub const READ_DATA: u32 = 0x1;
    /// Write data.
    pub const WRITE_DATA: u32 = 0x2;
    /// Read attributes.
    pub const READ_ATTRIBUTES: u32 = 0x80;
    /// Write attributes.
    pub const WRITE_ATTRIBUTES: u32 = 0x100;
    /// Delete (needed for delete-on-close).
    pub const DELETE: u32 = 0x10000;
}

/// CreateDisposition: open an existing file.
pub const FILE_OPEN: u32 = 1;
/// CreateDisposition: create, fail if it exists.
pub const FILE_CREATE: u32 = 2;
/// CreateOptions: the target must not be a directory.
pub const FILE_NON_DIRECTORY_FILE: u32 = 0x40;
/// CreateOptions: delete the file when the last handle closes.
pub const FILE_DELETE_ON_CLOSE: u32 = 0x1000;

/// CREATE body for `name` (share-relative, `\`-separated).
pub fn create(name: &str, desired_access: u32, disposition: u32, options: u32) -> Vec<u8> {
    let name = utf16(name);
    let mut b = Vec::with_capacity(56 + name.len().max(1));
    put16(&mut b, 57);
    b.push(0); // SecurityFlags
    b.push(0); // RequestedOplockLevel: none (no client cache)
    put32(&mut b, 2); // ImpersonationLevel: Impersonation
    put64(&mut b, 0);
    put64(&mut b, 0);
    put32(&mut b, desired_access);
    put32(&mut b, 0x80); // FILE_ATTRIBUTE_NORMAL
    put32(&mut b, 0x7); // share read, write, delete
    put32(&mut b, disposition);
    put32(&mut b, options);
    put16(&mut b, (HEADER + 56) as u16);
    put16(&mut b, name.len() as u16);
    put32(&mut b, 0);
    put32(&mut b, 0);
    if name.is_empty() {
        b.push(0);
    } else {
        b.extend_from_slice(&name);
    }
    b
}

/// A file handle.
pub type FileId = [u8; 16];

/// The FileId and EndOfFile of a CREATE response.
pub fn parse_create(body: &[u8]) -> Result<(FileId, u64), String> {
    need(body, 88, "CREATE response")?;
    let mut id = [0u8; 16];
    id.copy_from_slice(&body[64..80]);
    Ok((id, le64(body, 48)))
}

/// CLOSE body.
pub fn close(id: &FileId) -> Vec<u8> {
    let mut b = Vec::with_capacity(24);
    put16(&mut b, 24);
    put16(&mut b, 0);
    put32(&mut b, 0);
    b.extend_from_slice(id);
    b
}

/// FLUSH body.
pub fn flush(id: &FileId) -> Vec<u8> {
    close(id) // same layout: StructureSize 24, reserved, FileId
}

/// ECHO body.
pub fn echo() -> Vec<u8> {
    vec![4, 0, 0, 0]
}

/// READ body for `len` bytes at `offset`.
pub fn read(id: &FileId, offset: u64, len: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(49);
    put16(&mut b, 49);
    b.push(0x50); // Padding: where the server puts the data (header + 16)
    b.push(0);
    put32(&mut b, len);
    put64(&mut b, offset);
    b.extend_from_slice(id);
    put32(&mut b, 0); // MinimumCount
    put32(&mut b, 0); // Channel
    put32(&mut b, 0); // RemainingBytes
    put16(&mut b, 0);
    put16(&mut b, 0);
    b.push(0); // Buffer
    b
}

/// WRITE body head for `len` bytes at `offset` (the data follows it on the wire).
pub fn write(id: &FileId, offset: u64, len: u32, write_through: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(48);
    put16(&mut b, 49);
    put16(&mut b, (HEADER + 48) as u16);
    put32(&mut b, len);
    put64(&mut b, offset);
    b.extend_from_slice(id);
    put32(&mut b, 0); // Channel
    put32(&mut b, 0); // RemainingBytes
    put16(&mut b, 0);
    put16(&mut b, 0);
    put32(&mut b, u32::from(write_through)); // SMB2_WRITEFLAG_WRITE_THROUGH
    b
}

/// Bytes a WRITE response says were written.
pub fn parse_write(body: &[u8]) -> Result<u32, String> {
    need(body, 16, "WRITE response")?;
    Ok(le32(body, 4))
}

/// A READ response's DataOffset (from the header's start) and DataLength.
pub fn parse_read(body: &[u8]) -> Result<(usize, usize), String> {
    need(body, 16, "READ response")?;
    Ok((body[2] as usize, le32(body, 4) as usize))
}

/// The fields of a response header headroom uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHeader {
    /// The command answered.
    pub command: u16,
    /// Outcome.
    pub status: NtStatus,
    /// Credits granted with this response.
    pub credits: u16,
    /// Flags (response, async...).
    pub flags: u32,
    /// The request's message id.
    pub message_id: u64,
    /// Session id (SESSION_SETUP assigns it).
    pub session_id: u64,
    /// Tree id (TREE_CONNECT assigns it; sync responses only).
    pub tree_id: u32,
}

/// Parses the 64-byte header at the start of `frame`.
pub fn parse_header(frame: &[u8]) -> Result<ResponseHeader, String> {
    need(frame, HEADER, "SMB2 header")?;
    if &frame[0..4] != b"\xfeSMB" {
        return Err(format!("not an SMB2 message (starts with {:02x?})", &frame[0..4]));
    }
    if le16(frame, 4) != 64 {
        return Err(format!("SMB2 header of size {}, not 64", le16(frame, 4)));
    }
    let flags = le32(frame, 16);
    if flags & FLAG_RESPONSE == 0 {
        return Err("the server sent a request, not a response".into());
    }
    Ok(ResponseHeader {
        command: le16(frame, 12),
        status: NtStatus(le32(frame, 8)),
        credits: le16(frame, 14),
        flags,
        message_id: le64(frame, 24),
        session_id: le64(frame, 40),
        tree_id: if flags & FLAG_ASYNC != 0 { 0 } else { le32(frame, 36) },
    })
}

/// The length in a direct-TCP prefix; the first byte must be zero.
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, String> {
    if prefix[0] != 0 {
        return Err(format!("bad direct-TCP frame prefix {prefix:02x?}"));
    }
    let len = u32::from_be_bytes(prefix) as usize;
    if len < HEADER {
        return Err(format!("a frame of {len} bytes, shorter than an SMB2 header"));
    }
    Ok(len)
}

fn need(b: &[u8], n: usize, what: &str) -> Result<(), String> {
    if b.len() < n {
        Err(format!("{what} of {} bytes, expected at least {n}", b.len()))
    } else {
        Ok(())
    }
}

/// `len` bytes at `offset` counted from the SMB2 header's start, in `body`
/// (which starts right after the header).
fn buffer<'a>(body: &'a [u8], offset: usize, len: usize, what: &str) -> Result<&'a [u8], String> {
    if len == 0 {
        return Ok(&[]);
    }
    let start = offset.checked_sub(HEADER).ok_or_else(|| format!("{what} at offset {offset}, inside the header"))?;
    body.get(start..start + len).ok_or_else(|| format!("{what} ({len} bytes at {offset}) runs past the message"))
}

/// Little-endian u16 at `at` (callers check the length first).
pub fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
/// Little-endian u32 at `at`.
pub fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
/// Little-endian u64 at `at`.
pub fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(command: Command) -> RequestHeader {
        RequestHeader { command, credit_charge: 16, credit_request: 64, message_id: 7, tree_id: 3, session_id: 9 }
    }

    #[test]
    fn a_request_frame_has_the_length_prefix_and_header() {
        let mut out = Vec::new();
        let body = read(&[0xab; 16], 1 << 20, 1 << 20);
        put_frame_start(&mut out, &header(Command::Read), body.len());
        out.extend_from_slice(&body);
        assert_eq!(out.len(), 4 + 64 + 49);
        assert_eq!(u32::from_be_bytes(out[0..4].try_into().unwrap()) as usize, 64 + 49);
        let h = &out[4..];
        assert_eq!(&h[0..4], b"\xfeSMB");
        assert_eq!((le16(h, 6), le16(h, 12), le16(h, 14)), (16, 8, 64));
        assert_eq!((le64(h, 24), le32(h, 36), le64(h, 40)), (7, 3, 9));
        let b = &h[64..];
        assert_eq!((le16(b, 0), b[2], le32(b, 4), le64(b, 8)), (49, 0x50, 1 << 20, 1 << 20));
        assert_eq!(&b[16..32], &[0xab; 16]);
    }

    #[test]
    fn credit_charge_is_one_per_64k() {
        assert_eq!([credit_charge(0), credit_charge(4096), credit_charge(65536)], [1, 1, 1]);
        assert_eq!([credit_charge(65537), credit_charge(1 << 20), credit_charge(8 << 20)], [2, 16, 128]);
    }

    #[test]
    fn negotiate_puts_the_context_on_an_8_byte_boundary() {
        let old = negotiate(&DIALECTS[..3], [1; 16], [2; 32], &[SmbCipher::Aes128Ccm]);
        assert_eq!((old.len(), le32(&old, 28), le16(&old, 32)), (36 + 6, 0, 0), "no contexts below 3.1.1");
        assert_eq!(le32(&old, 8), 0x44, "the encryption capability with ciphers");
        let b = negotiate(&[0x0210, 0x0300, 0x0302, 0x0311], [1; 16], [2; 32], &[]);
        assert_eq!((le16(&b, 32), le32(&b, 8)), (1, 0x4), "no encryption without ciphers");
        let offset = le32(&b, 28) as usize;
        assert_eq!(offset % 8, 0);
        assert_eq!(le16(&b, 2), 4);
        assert_eq!(le16(&b, 36 + 6), 0x0311);
        let ctx = &b[offset - HEADER..];
        assert_eq!((le16(ctx, 0), le16(ctx, 2), le16(ctx, 8), le16(ctx, 12)), (1, 38, 1, 1));
        assert_eq!(&ctx[14..46], &[2; 32]);
        let e = negotiate(&DIALECTS, [1; 16], [2; 32], &[SmbCipher::Aes256Gcm, SmbCipher::Aes128Gcm]);
        assert_eq!((le16(&e, 32), le32(&e, 8)), (2, 0x44), "two contexts, and the capability Samba wants");
        // After the preauthentication context (8 + 38 bytes), aligned.
        let enc = &e[(le32(&e, 28) as usize - HEADER + 8 + 38).next_multiple_of(8)..];
        assert_eq!((HEADER + e.len() - enc.len()) % 8, 0);
        assert_eq!((le16(enc, 0), le16(enc, 2), le16(enc, 8), le16(enc, 10), le16(enc, 12)), (2, 6, 2, 4, 2));
    }

    /// A 3.1.1 NEGOTIATE answer: the 64-byte head, then `contexts` right
    /// after it (offset 128 from the header's start).
    fn answer_311(contexts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut n = vec![0u8; 64];
        n[4..6].copy_from_slice(&SMB_311.to_le_bytes());
        n[6..8].copy_from_slice(&(contexts.len() as u16).to_le_bytes());
        n[60..64].copy_from_slice(&128u32.to_le_bytes());
        for (kind, data) in contexts {
            pad8(&mut n);
            put16(&mut n, *kind);
            put16(&mut n, data.len() as u16);
            put32(&mut n, 0);
            n.extend_from_slice(data);
        }
        n
    }

    #[test]
    fn smb_311_contexts_are_read_and_hostile_ones_refused() {
        let preauth = vec![1, 0, 32, 0, 1, 0].into_iter().chain([7; 32]).collect::<Vec<u8>>();
        let gcm = vec![1, 0, 2, 0];
        let all = SmbCipher::ALL;
        let n = parse_negotiate(&answer_311(&[(1, preauth.clone()), (2, gcm.clone()), (8, vec![0; 3])]), &all).unwrap();
        assert_eq!((n.dialect, n.cipher), (SMB_311, Some(SmbCipher::Aes128Gcm)));
        let none = parse_negotiate(&answer_311(&[(2, vec![1, 0, 0, 0]), (1, preauth.clone())]), &all).unwrap();
        assert_eq!(none.cipher, None, "cipher 0: none in common");
        let err =
            |ctx: &[(u16, Vec<u8>)], offered: &[SmbCipher]| parse_negotiate(&answer_311(ctx), offered).unwrap_err();
        assert!(err(&[(2, gcm.clone())], &all).contains("without its preauthentication"));
        assert!(err(&[(1, preauth.clone()), (2, gcm.clone())], &[SmbCipher::Aes128Ccm]).contains("did not offer"));
        assert!(err(&[(1, vec![1, 0, 32, 0, 2, 0])], &all).contains("SHA-512"), "an unknown hash");
        assert!(err(&[(1, vec![1, 0, 200, 0, 1, 0])], &all).contains("salt"), "a salt longer than its context");
        assert!(err(&[(1, preauth.clone()), (2, vec![2, 0, 2, 0, 1, 0])], &all).contains("2 ciphers"));
        assert!(err(&[(1, preauth.clone()), (1, preauth.clone())], &all).contains("twice"));
        assert!(err(&[], &all).contains("0 negotiate contexts"));
        let mut long = answer_311(&[(1, preauth.clone())]);
        long[66..68].copy_from_slice(&500u16.to_le_bytes());
        assert!(parse_negotiate(&long, &all).unwrap_err().contains("runs past"));
        let mut many = answer_311(&[(1, preauth.clone())]);
        many[6..8].copy_from_slice(&9u16.to_le_bytes());
        assert!(parse_negotiate(&many, &all).unwrap_err().contains("runs past"));
        many[6..8].copy_from_slice(&60000u16.to_le_bytes());
        assert!(parse_negotiate(&many, &all).unwrap_err().contains("60000"));
        let mut inside = answer_311(&[(1, preauth)]);
        inside[60..64].copy_from_slice(&70u32.to_le_bytes());
        assert!(parse_negotiate(&inside, &all).unwrap_err().contains("inside"));
        inside[60..64].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_negotiate(&inside, &all).unwrap_err().contains("runs past"));
        // 3.0.2 with the encryption capability: AES-128-CCM, if offered.
        let mut v302 = vec![0u8; 64];
        v302[4..6].copy_from_slice(&0x0302u16.to_le_bytes());
        v302[24] = 0x40;
        assert_eq!(parse_negotiate(&v302, &all).unwrap().cipher, Some(SmbCipher::Aes128Ccm));
        assert_eq!(parse_negotiate(&v302, &[SmbCipher::Aes128Gcm]).unwrap().cipher, None);
    }

    fn response(status: u32, flags: u32) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[0..4].copy_from_slice(b"\xfeSMB");
        f[4] = 64;
        f[8..12].copy_from_slice(&status.to_le_bytes());
        f[12..14].copy_from_slice(&8u16.to_le_bytes());
        f[14..16].copy_from_slice(&31u16.to_le_bytes());
        f[16..20].copy_from_slice(&flags.to_le_bytes());
        f[24..32].copy_from_slice(&42u64.to_le_bytes());
        f[36..40].copy_from_slice(&5u32.to_le_bytes());
        f
    }

    #[test]
    fn response_headers_are_parsed_and_garbage_refused() {
        let h = parse_header(&response(status::END_OF_FILE, FLAG_RESPONSE)).unwrap();
        assert_eq!((h.command, h.credits, h.message_id, h.tree_id), (8, 31, 42, 5));
        assert_eq!(h.status.to_string(), "STATUS_END_OF_FILE");
        let async_h = parse_header(&response(status::PENDING, FLAG_RESPONSE | FLAG_ASYNC)).unwrap();
        assert_eq!(async_h.tree_id, 0, "async headers carry an AsyncId there, not a tree");
        assert!(parse_header(&response(0, 0)).unwrap_err().contains("request"));
        assert!(parse_header(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap_err().contains("bytes"));
        let mut smb1 = response(0, FLAG_RESPONSE);
        smb1[0..4].copy_from_slice(b"\xffSMB");
        assert!(parse_header(&smb1).unwrap_err().contains("not an SMB2"));
        assert_eq!(NtStatus(0xC000_1234).to_string(), "NTSTATUS 0xc0001234");
    }

    #[test]
    fn frame_prefixes_are_checked() {
        assert_eq!(frame_len([0, 0, 0, 80]).unwrap(), 80);
        assert_eq!(frame_len([0, 0x10, 0, 80]).unwrap(), 0x10_0050);
        assert!(frame_len([0x48, 0x54, 0x54, 0x50]).is_err(), "'HTTP' is no frame");
        assert!(frame_len([0, 0, 0, 10]).is_err());
    }

    #[test]
    fn response_bodies_are_bounds_checked() {
        assert!(parse_negotiate(&[0u8; 10], &[]).is_err());
        let mut n = vec![0u8; 64];
        n[2] = 3;
        n[4..6].copy_from_slice(&0x0302u16.to_le_bytes());
        n[32..36].copy_from_slice(&(8u32 << 20).to_le_bytes());
        let got = parse_negotiate(&n, &[]).unwrap();
        assert_eq!((got.dialect, got.signing_required, got.max_read), (0x0302, true, 8 << 20));
        // A security buffer pointing past the message is an error, not a panic.
        let mut s = vec![0u8; 8];
        s[4..6].copy_from_slice(&72u16.to_le_bytes());
        s[6..8].copy_from_slice(&100u16.to_le_bytes());
        assert!(parse_session_setup(&s).unwrap_err().contains("runs past"));
        s[4..6].copy_from_slice(&10u16.to_le_bytes());
        assert!(parse_session_setup(&s).unwrap_err().contains("inside the header"));
        assert!(parse_create(&[0u8; 40]).is_err());
        assert!(parse_tree_connect(&[0u8; 8]).is_err());
        assert!(parse_read(&[0u8; 3]).is_err());
        assert!(parse_write(&[0u8; 3]).is_err());
    }

    #[test]
    fn create_and_write_bodies_have_their_fixed_sizes() {
        let c = create("dir\\f.tmp", access::READ_DATA, FILE_CREATE, FILE_DELETE_ON_CLOSE);
        assert_eq!(c.len(), 56 + 18);
        assert_eq!((le16(&c, 44), le16(&c, 46), le32(&c, 36), le32(&c, 40)), (120, 18, 2, 0x1000));
        assert_eq!(create("", 1, FILE_OPEN, 0).len(), 57);
        let w = write(&[0; 16], 4096, 512, true);
        assert_eq!((w.len(), le16(&w, 2), le32(&w, 44)), (48, 112, 1));
    }
}
