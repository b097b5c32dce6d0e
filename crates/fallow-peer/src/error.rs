//! The one error type of `fallow-peer`: each variant names what it is
//! about (a file, a flag, a peer, a device) so a user can act on it.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors of `fallow-peer`. Messages are lowercase.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be opened, read or listed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A setting or argument is unusable (bad input: exit status 2 in the
    /// CLI).
    #[error("{what}: {message}")]
    Invalid {
        /// The flag, field or value at fault (`--dir`, `disk state`, …).
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// The disk's power state could not be queried.
    #[error("{device}: {message}")]
    Device {
        /// The block device.
        device: PathBuf,
        /// What failed.
        message: String,
    },
    /// A peer could not be reached, answered badly or refused.
    #[error("peer {addr}: {message}")]
    Peer {
        /// The peer's address.
        addr: SocketAddr,
        /// What went wrong.
        message: String,
    },
    /// A message on the data channel is malformed.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A socket could not be bound or the runtime could not start.
    #[error("{what}: {source}")]
    Net {
        /// What was being set up (`tcp listener 10.0.0.1:7946`, …).
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The FUSE file system could not be mounted.
    #[error("mounting {mountpoint}: {message}")]
    Mount {
        /// The mount point.
        mountpoint: PathBuf,
        /// What failed.
        message: String,
    },
    /// An error of the core library (durations, the power model, spin-down
    /// policies).
    #[error(transparent)]
    Core(#[from] fallow_core::Error),
}

impl Error {
    /// An [`Error::Invalid`].
    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }

    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// True when the user's input is at fault (a bad flag value, a missing
    /// directory), not the system: the CLI exits with status 2.
    pub fn is_bad_input(&self) -> bool {
        match self {
            Error::Invalid { .. } => true,
            Error::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::PermissionDenied
                    | std::io::ErrorKind::NotADirectory
                    | std::io::ErrorKind::InvalidInput
            ),
            Error::Core(e) => !matches!(e, fallow_core::Error::Io { .. }),
            _ => false,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
