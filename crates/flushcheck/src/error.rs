//! Why a flushcheck could not run: each variant a line the user reads, the
//! settings it names typed ([`Setting`]) for the front end to spell.

use headroom_units::setting::Message;
use std::fmt;
use std::path::PathBuf;

/// What a flushcheck run is set by, named in [`FlushError::Invalid`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// Bytes per block written and acknowledged.
    Block,
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Setting::Block => "block size",
        })
    }
}

/// Why a flushcheck could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    /// The file is not one flushcheck may use (exists and is not its own, unreadable header...).
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why, with what to do.
        reason: String,
    },
    /// A setting does not fit the file or export.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file or export.
        path: PathBuf,
        /// Why, naming the setting to change.
        reason: Message<Setting>,
    },
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The listener could not be reached or refused.
    #[error(transparent)]
    Net(#[from] headroom_net::NetError),
    /// The listener's ledger failed.
    #[error("flushcheck ledger: {0}")]
    Ledger(String),
}

/// The front end's words for each library's settings a [`FlushError`] may
/// name: flushcheck's own, a share's refusal (disk's), the listener's (net's).
#[derive(Clone, Copy)]
pub struct Spelling {
    /// flushcheck's settings.
    pub own: fn(Setting) -> &'static str,
    /// A disk target's settings (a share refusing `--sync` or a block size).
    pub disk: fn(headroom_disk::Setting) -> &'static str,
    /// The listener connection's settings.
    pub net: headroom_net::NetSpelling,
}

impl FlushError {
    /// The error's line with each setting it names written as `spell`
    /// spells it; `Display` names them plainly.
    pub fn spelled(&self, spell: Spelling) -> String {
        match self {
            FlushError::Invalid { path, reason } => format!("{}: {}", path.display(), reason.spelled(spell.own)),
            // A share's connect answers in io::Error, a refused setting typed inside.
            FlushError::Io { path, source } => {
                match source.get_ref().and_then(|e| e.downcast_ref::<headroom_disk::DiskError>()) {
                    Some(inner) => format!("{}: {}", path.display(), inner.spelled(spell.disk)),
                    None => self.to_string(),
                }
            }
            FlushError::Net(e) => e.spelled(spell.net),
            other => other.to_string(),
        }
    }

    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> FlushError + '_ {
        move |source| FlushError::Io { path: path.to_path_buf(), source }
    }
}
