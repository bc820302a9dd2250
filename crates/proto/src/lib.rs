//! headroom's own storage protocol clients: `nfs://`, `iscsi://`, `nbd://`
//! and `smb://` targets for the disk engine, measured without a kernel mount
//! (no root, no mount options hidden, no kernel client cache or readahead
//! between the tool and the wire).
//!
//! What it owns:
//! - the target URLs and their validation ([`ShareUrl`]);
//! - credentials, from the environment or a file, never the command line
//!   ([`Credentials`]);
//! - the deadlines and the Ctrl-C check every client's waits share (`wait`:
//!   a login, a request, each has an end that trickled bytes cannot move);
//! - why a client failed, typed by whose fault it is ([`ProtoError`]);
//! - every TCP connection's resolving, source (`--bind`, `--interface`),
//!   deadline and Ctrl-C (`transport`), and the NFS client's interface;
//! - a framed connection: whole frames out and in over a non-blocking
//!   socket, or a lost connection or Ctrl-C within the deadline (`frame`);
//! - one module per protocol, each implementing headroom-disk's
//!   [`Share`](headroom_disk::Share) (one prepared target) and
//!   [`IoEngine`](headroom_disk::IoEngine) (one connection per worker, the
//!   queue depth as the protocol's own pipelining).
//!
//! What it must not do: run tests, time I/O or keep statistics (the disk
//! engine's runner does, the same way as for a local path), print, or parse
//! command lines.

mod credentials;
mod error;
mod frame;
mod iscsi_keys;
mod os;
mod transport;
mod url;
mod wait;

pub mod iscsi;
#[cfg(feature = "nbd")]
pub mod nbd;
#[cfg(feature = "nfs")]
pub mod nfs;
pub mod smb;

/// Entry points for the fuzz targets (feature `fuzzing`): each takes what a
/// hostile server could send and must neither panic nor hang.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::iscsi::fuzz_target as iscsi_target;
    #[cfg(feature = "nbd")]
    pub use crate::nbd::fuzz_server as nbd_server;
    pub use crate::smb::fuzz_server as smb_server;
}

pub use credentials::{Credentials, CredentialsError, CredentialsSetting};
pub use error::ProtoError;
pub use headroom_net::Source;
pub use iscsi_keys::IscsiKeys;
pub use url::{
    DiskPath, IscsiUrl, NbdUrl, NfsUrl, NfsVersion, Server, ShareTarget, ShareUrl, SmbCipher, SmbEncrypt, SmbUrl,
    UrlError, FILE_SERVER_DAEMONS,
};

use headroom_disk::{DiskError, Share, ShareOpener, TargetOptions};

/// The schemes headroom's clients speak.
pub const SCHEMES: [&str; 4] = ["nfs", "iscsi", "nbd", "smb"];

/// Opens every scheme of [`SCHEMES`] with the credentials given.
#[derive(Debug, Clone, Default)]
pub struct Opener {
    credentials: Credentials,
    sources: Vec<Source>,
    iscsi_keys: IscsiKeys,
    share: Option<ShareTarget>,
}

impl Opener {
    /// An opener that authenticates with `credentials`.
    pub fn new(credentials: Credentials) -> Self {
        Opener { credentials, sources: Vec::new(), iscsi_keys: IscsiKeys::default(), share: None }
    }

    /// Every connection leaves from `source` (`--bind`, `--interface`;
    /// checked by the caller with [`Source::check`]).
    pub fn from_source(self, source: Source) -> Self {
        self.from_sources(vec![source])
    }

    /// Job N's connection leaves from `sources[N mod len]` (`--bind A,B`,
    /// `--interface a,b`; each checked by the caller with [`Source::check`]).
    pub fn from_sources(mut self, sources: Vec<Source>) -> Self {
        self.sources = sources;
        self
    }

    /// An iSCSI login offers `keys` instead of headroom's own choice (`--iscsi`).
    pub fn with_iscsi_keys(mut self, keys: IscsiKeys) -> Self {
        self.iscsi_keys = keys;
        self
    }

    /// The share the command checked: opening it takes its parsed URL
    /// instead of parsing the text the disk engine hands over again.
    pub fn for_share(mut self, share: ShareTarget) -> Self {
        self.share = Some(share);
        self
    }
}

impl ShareOpener for Opener {
    fn handles(&self, target: &str) -> bool {
        headroom_disk::looks_like_url(target)
    }

    fn open(&self, target: &str, opts: &TargetOptions) -> Result<Box<dyn Share>, DiskError> {
        // The disk engine (below this crate) names its target by text; an
        // opener not given its share (a test's) checks that text here.
        let parsed;
        let url = match &self.share {
            Some(share) if share.as_str() == target => share.url(),
            _ => {
                parsed = ShareUrl::parse(target).map_err(|e| DiskError::Usage(e.to_string()))?;
                &parsed
            }
        };
        match url {
            ShareUrl::Nfs(u) => os::open_nfs(u, opts, &self.sources),
            ShareUrl::Iscsi(u) => os::open_iscsi(u, opts, &self.credentials, &self.sources, &self.iscsi_keys),
            ShareUrl::Nbd(u) => os::open_nbd(u, opts, &self.sources),
            ShareUrl::Smb(u) => os::open_smb(u, opts, &self.credentials, &self.sources),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_disk::PeerFault;
    use std::net::TcpListener;

    fn open(target: &str) -> DiskError {
        let opts = TargetOptions { default_size: 1 << 20, ..TargetOptions::default() };
        Opener::default().open(target, &opts).expect_err("no server to open")
    }

    fn fault(e: &DiskError) -> Option<PeerFault> {
        match e {
            DiskError::Peer { fault, .. } => Some(*fault),
            _ => None,
        }
    }

    #[test]
    fn nobody_listening_is_the_servers_fault_not_a_usage_error() {
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        for target in [format!("iscsi://{closed}/iqn.2024-01.x:t/1"), format!("smb://{closed}/share")] {
            let e = open(&target);
            assert_eq!(fault(&e), Some(PeerFault::Refused), "{target}: {e:?}");
            assert!(!e.is_usage() && e.to_string().contains(&closed.to_string()), "{e}");
        }
    }

    #[test]
    fn a_name_that_does_not_resolve_is_unreachable() {
        // .invalid never resolves (RFC 6761).
        let e = open("smb://no-such-host.invalid/share");
        assert_eq!(fault(&e), Some(PeerFault::Unreachable), "{e:?}");
        assert!(e.to_string().starts_with("smb://no-such-host.invalid"), "{e}");
    }

    #[test]
    fn a_server_that_hangs_up_during_login_is_lost() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for _ in 0..2 {
                let (s, _) = l.accept().unwrap();
                drop(s); // before a byte of the protocol
            }
        });
        for target in [format!("iscsi://{addr}/iqn.2024-01.x:t/1"), format!("smb://{addr}/share")] {
            let e = open(&target);
            assert_eq!(fault(&e), Some(PeerFault::Lost), "{target}: {e:?}");
        }
        server.join().unwrap();
    }

    #[test]
    fn a_missing_password_stays_the_users_mistake() {
        let e = Opener::new(Credentials::default())
            .open("smb://alice@127.0.0.1:1/share", &TargetOptions::default())
            .expect_err("no password");
        assert!(matches!(e, DiskError::Invalid(_)) && e.is_usage(), "{e:?}");
    }
}
