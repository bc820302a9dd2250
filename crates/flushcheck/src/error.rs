//! Why a flushcheck could not run: each variant a line the user reads.

use std::path::PathBuf;

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

impl FlushError {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> FlushError + '_ {
        move |source| FlushError::Io { path: path.to_path_buf(), source }
    }
}
