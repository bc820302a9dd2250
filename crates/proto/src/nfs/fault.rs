//! Why a libnfs call failed, as a [`ProtoError`]. libnfs 4.0 answers a
//! failure with a negative errno (or a bare -1) and a line of text, and its
//! text for a refused connect, an unreachable host and a server that sent
//! garbage is the same ("nfs_service failed"): so a failure that is not
//! plainly the user's is explained by one TCP connect of headroom's own to
//! the ports libnfs needed ([`explained`]), which names the refusal or the
//! unreachable host the way the other clients do.
//!
//! What it owns: sorting libnfs's (return code, text) into a [`ProtoError`]
//! and that one connect. What it must not do: call libnfs or word the
//! messages around the error (nfs.rs names the URL and what it was doing).

use crate::transport;
use crate::ProtoError;
use std::ffi::c_int;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How long the connect that explains a failure may take: a host that drops
/// SYNs is unreachable after this.
const REACH_TIMEOUT: Duration = Duration::from_secs(3);

/// The portmapper, which NFSv3's MOUNT is found through.
pub(super) const PORTMAPPER: u16 = 111;

/// libnfs's failure `text` (one line, kept as the message), sorted by its
/// return code `rc` (-errno, or -1; 0 where the call gave no code) and,
/// where the code says nothing, by what libnfs wrote.
pub(super) fn sort(rc: c_int, text: String) -> ProtoError {
    let has = |s: &str| text.contains(s);
    // A reply libnfs could not decode or take (its status, -EFAULT, would
    // read as a lost connection). A server without the version asked for
    // ("Server responded: Program version mismatch") stays the user's.
    let broken = ["decode", "zdr_", "rejected by server", "not accepted by the server", "Unknown rpc response"];
    if broken.iter().any(|b| has(b)) {
        return ProtoError::Protocol(text);
    }
    match rc.checked_neg().unwrap_or(0) {
        libc::EACCES => ProtoError::Auth(text),
        // -1 is also libnfs's bare failure: only the server's PERM status is the user's.
        libc::EPERM if has("PERM") => ProtoError::Auth(text),
        // A sync call's timeout (nfs_set_timeout), and libnfs's status for a
        // request its RPC layer gave up (the socket closed under it).
        libc::EINTR | libc::ETIMEDOUT | libc::EFAULT => ProtoError::Lost(text),
        _ if has("Failed to start connection") => ProtoError::Unreachable(text),
        _ if has("timed out") => ProtoError::Lost(text),
        // The socket or the RPC layer failed: refused, unreachable or
        // garbage alike; `explained` tells them apart.
        _ if has("nfs_service failed") || has("rpc_service") || has("socket") => ProtoError::Protocol(text),
        // A status the server answered (no such file or export, read-only,
        // no space): the target as asked is wrong.
        _ => ProtoError::Usage(text),
    }
}

/// `e` as it is when it is the user's; otherwise, when a connect to one of
/// `ports` on `host` fails, that connect's error (refused, unreachable, a
/// name that does not resolve), else `e`.
pub(super) fn explained(e: ProtoError, host: &str, ports: &[u16], interface: Option<&str>) -> ProtoError {
    if matches!(e, ProtoError::Usage(_) | ProtoError::Invalid(_) | ProtoError::Auth(_) | ProtoError::Stopped(_)) {
        return e;
    }
    ports.iter().find_map(|port| reach(host, *port, interface)).unwrap_or(e)
}

/// Why `host:port` cannot be connected to from `interface`, or None when it can.
fn reach(host: &str, port: u16, interface: Option<&str>) -> Option<ProtoError> {
    let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let addrs = match transport::resolve(&addr) {
        Ok(a) => a,
        Err(e) => return Some(ProtoError::Unreachable(format!("cannot resolve {host}: {e}"))),
    };
    let source = crate::Source { bind: None, interface: interface.map(str::to_string) };
    match transport::connect(&addrs, &source, REACH_TIMEOUT, &AtomicBool::new(false)) {
        Ok(_) => None,
        Err(e) => Some(ProtoError::of_kind(e.kind(), format!("cannot connect to {addr}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn libnfs_failures_are_sorted_by_whose_fault_they_are() {
        let s = |rc: c_int, t: &str| sort(rc, t.to_string());
        assert_eq!(s(-libc::EACCES, "NFS3ERR_ACCES"), ProtoError::Auth("NFS3ERR_ACCES".into()));
        assert!(matches!(s(-1, "mount/mnt call failed with \"MNT3ERR_PERM\""), ProtoError::Auth(_)));
        assert!(matches!(s(-libc::ENOENT, "NFS4ERR_NOENT"), ProtoError::Usage(_)));
        assert!(matches!(s(-libc::EINTR, "mount_cb: command timed out"), ProtoError::Lost(_)));
        assert!(matches!(s(-libc::EFAULT, "mount_cb: nfs_service failed"), ProtoError::Lost(_)));
        assert!(matches!(s(-libc::EIO, "nfs_service failed"), ProtoError::Protocol(_)));
        let cut = "mount_cb: zdr_replymsg failed in rpc_process_reply: libnfs_rpc_msg failed to decode REPLY";
        assert!(matches!(s(-libc::EFAULT, cut), ProtoError::Protocol(_)));
        let rejected = "stat call failed with \"Message rejected by server\"";
        assert!(matches!(s(-libc::EFAULT, rejected), ProtoError::Protocol(_)));
        let dns = "nfs_mount_async failed. Failed to start connection. Invalid address:x.invalid.";
        assert!(matches!(s(-1, dns), ProtoError::Unreachable(_)));
    }

    #[test]
    fn a_refusal_is_told_from_a_server_that_answered_badly() {
        let open = TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let vague = || ProtoError::Protocol("nfs_service failed".into());
        let e = explained(vague(), "127.0.0.1", &[closed], None);
        assert!(matches!(&e, ProtoError::Refused(m) if m.contains(&format!("127.0.0.1:{closed}"))), "{e:?}");
        // Something listens: libnfs's own word stands.
        assert_eq!(explained(vague(), "127.0.0.1", &[open.local_addr().unwrap().port()], None), vague());
        let e = explained(vague(), "no-such-host.invalid", &[2049], None);
        assert!(matches!(&e, ProtoError::Unreachable(m) if m.contains("no-such-host.invalid")), "{e:?}");
        // The user's mistakes are never second-guessed by a connect.
        let usage = ProtoError::Usage("no such export".into());
        assert_eq!(explained(usage.clone(), "127.0.0.1", &[closed], None), usage);
    }
}
