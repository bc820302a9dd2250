//! Why a protocol client failed, typed by whose fault it is: the user's
//! (a wrong URL or option, rejected credentials) or the server's and the
//! network's (a name that does not resolve, nobody listening, a server lost
//! or speaking outside its protocol), so an outage never reads as a usage
//! error. Every variant carries the full one-line message the user sees.
//!
//! What it owns: [`ProtoError`], sorting an `io::Error` into it by kind, and
//! its conversion into headroom-disk's [`DiskError`]. What it must not do:
//! word messages (each client does, naming its URL) or decide exit codes.

use headroom_disk::{DiskError, PeerFault, Setting};
use headroom_units::setting::Message;
use std::io;

/// Why a client could not open or keep a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The target or an option is wrong (no such share, LUN or export, a
    /// size too big): the user's to fix.
    #[error("{0}")]
    Usage(String),
    /// As [`ProtoError::Usage`], naming the disk settings to change (`--size`,
    /// `--sync`, `--credentials`): the front end spells them.
    #[error("{0}")]
    Invalid(Message<Setting>),
    /// The server rejected the credentials or this client (CHAP, NTLM, an
    /// ACL): the user's to fix.
    #[error("{0}")]
    Auth(String),
    /// The server could not be reached: its name resolves to nothing, no
    /// route, or the connect found nobody within its deadline.
    #[error("{0}")]
    Unreachable(String),
    /// The server's host answered the connect with a reset: nothing listens
    /// on that port.
    #[error("{0}")]
    Refused(String),
    /// The connection was lost: closed, reset, or silent past its deadline.
    #[error("{0}")]
    Lost(String),
    /// The server sent what its protocol does not allow.
    #[error("{0}")]
    Protocol(String),
    /// Ctrl-C ended a wait.
    #[error("{0}")]
    Stopped(String),
}

impl ProtoError {
    /// Sorts `e` by its kind, keeping its message as the whole line.
    pub fn io(e: &io::Error) -> ProtoError {
        // An Invalid that went through io::Error (a worker's connect) stays typed.
        if let Some(DiskError::Invalid(m)) = e.get_ref().and_then(|inner| inner.downcast_ref()) {
            return ProtoError::Invalid(m.clone());
        }
        ProtoError::of_kind(e.kind(), e.to_string())
    }

    /// `message` sorted by the kind of the `io::Error` it explains.
    pub fn of_kind(kind: io::ErrorKind, message: String) -> ProtoError {
        use io::ErrorKind as K;
        match kind {
            K::Interrupted => ProtoError::Stopped(message),
            K::ConnectionRefused => ProtoError::Refused(message),
            K::HostUnreachable | K::NetworkUnreachable | K::NetworkDown | K::AddrNotAvailable => {
                ProtoError::Unreachable(message)
            }
            K::ConnectionAborted
            | K::ConnectionReset
            | K::BrokenPipe
            | K::UnexpectedEof
            | K::NotConnected
            | K::TimedOut
            | K::WouldBlock => ProtoError::Lost(message),
            K::InvalidData => ProtoError::Protocol(message),
            K::PermissionDenied => ProtoError::Auth(message),
            // A status the server answered (no such share, no space, ...)
            // or an option it cannot serve: the target as asked is wrong.
            _ => ProtoError::Usage(message),
        }
    }

    /// The same fault with `prefix: ` before its message.
    pub fn context(self, prefix: impl std::fmt::Display) -> ProtoError {
        self.map(|m| format!("{prefix}: {m}"))
    }

    /// The same fault with its message rewritten by `f`.
    pub fn map(self, f: impl FnOnce(String) -> String) -> ProtoError {
        use ProtoError as P;
        match self {
            P::Usage(m) => P::Usage(f(m)),
            P::Invalid(m) => P::Invalid(rewrite_typed(m, f)),
            P::Auth(m) => P::Auth(f(m)),
            P::Unreachable(m) => P::Unreachable(f(m)),
            P::Refused(m) => P::Refused(f(m)),
            P::Lost(m) => P::Lost(f(m)),
            P::Protocol(m) => P::Protocol(f(m)),
            P::Stopped(m) => P::Stopped(f(m)),
        }
    }
}

/// `message` rewritten by `f`, its settings kept typed: `f` is given a
/// mark for the message and the text it puts around the mark is kept.
fn rewrite_typed(message: Message<Setting>, f: impl FnOnce(String) -> String) -> Message<Setting> {
    const MARK: &str = "\u{0}";
    let whole = f(MARK.to_string());
    match whole.split_once(MARK) {
        Some((before, "")) => Message::text(before).join(message),
        Some((before, after)) => Message::text(before).join(message).then(after),
        // `f` dropped the message: its line is all there is.
        None => Message::text(whole),
    }
}

impl From<ProtoError> for DiskError {
    fn from(e: ProtoError) -> DiskError {
        let peer = |fault, message| DiskError::Peer { fault, message };
        match e {
            // A stop during a login reads as before (the command names the
            // stop); credentials and targets are the user's.
            ProtoError::Usage(m) | ProtoError::Auth(m) | ProtoError::Stopped(m) => DiskError::Usage(m),
            ProtoError::Invalid(m) => DiskError::Invalid(m),
            ProtoError::Unreachable(m) => peer(PeerFault::Unreachable, m),
            ProtoError::Refused(m) => peer(PeerFault::Refused, m),
            ProtoError::Lost(m) => peer(PeerFault::Lost, m),
            ProtoError::Protocol(m) => peer(PeerFault::Protocol, m),
        }
    }
}

impl From<ProtoError> for io::Error {
    /// For the paths that answer in `io::Error` (a worker's connect): the
    /// kind says the fault, the message is unchanged.
    fn from(e: ProtoError) -> io::Error {
        use io::ErrorKind as K;
        let kind = match &e {
            // Carried typed, for the disk engine to spell (DiskError::spelled).
            ProtoError::Invalid(m) => return io::Error::new(K::InvalidInput, DiskError::Invalid(m.clone())),
            ProtoError::Usage(_) => K::InvalidInput,
            ProtoError::Auth(_) => K::PermissionDenied,
            ProtoError::Unreachable(_) => K::HostUnreachable,
            ProtoError::Refused(_) => K::ConnectionRefused,
            ProtoError::Lost(_) => K::ConnectionAborted,
            ProtoError::Protocol(_) => K::InvalidData,
            ProtoError::Stopped(_) => K::Interrupted,
        };
        io::Error::new(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_not_the_users_mistake() {
        for (kind, fault) in [
            (io::ErrorKind::ConnectionRefused, Some(PeerFault::Refused)),
            (io::ErrorKind::HostUnreachable, Some(PeerFault::Unreachable)),
            (io::ErrorKind::ConnectionReset, Some(PeerFault::Lost)),
            (io::ErrorKind::UnexpectedEof, Some(PeerFault::Lost)),
            (io::ErrorKind::InvalidData, Some(PeerFault::Protocol)),
            (io::ErrorKind::PermissionDenied, None),
            (io::ErrorKind::NotFound, None),
        ] {
            let e = DiskError::from(ProtoError::of_kind(kind, "the line".into()));
            assert_eq!(e.to_string(), "the line");
            match (fault, e) {
                (Some(want), DiskError::Peer { fault, .. }) => assert_eq!(fault, want, "{kind:?}"),
                (None, e @ DiskError::Usage(_)) => assert!(e.is_usage()),
                (want, e) => panic!("{kind:?}: wanted {want:?}, got {e:?}"),
            }
        }
    }

    #[test]
    fn the_kind_survives_a_trip_through_io_error() {
        for e in [ProtoError::Refused("r".into()), ProtoError::Lost("l".into()), ProtoError::Auth("a".into())] {
            let back = ProtoError::io(&io::Error::from(e.clone()));
            assert_eq!(back, e);
        }
        assert_eq!(ProtoError::Lost("x".into()).context("smb://h/s"), ProtoError::Lost("smb://h/s: x".into()));
    }

    #[test]
    fn a_refused_setting_stays_typed_through_context_and_io_error() {
        let size = ProtoError::Invalid(Message::of(Setting::Size).then(" 0"));
        let named = size.context("nfs://h/e");
        assert_eq!(named, ProtoError::Invalid(Message::text("nfs://h/e: ").and(Setting::Size).then(" 0")));
        let back = ProtoError::io(&io::Error::from(named.clone()));
        assert_eq!(back, named);
        let DiskError::Invalid(m) = DiskError::from(back) else { panic!("a usage error") };
        assert_eq!(m.spelled(|_| "--size"), "nfs://h/e: --size 0");
    }
}
