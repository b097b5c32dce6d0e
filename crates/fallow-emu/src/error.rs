//! The error type of `fallow-emu`: each variant names the file or mount
//! point at fault.

use std::path::PathBuf;

/// Errors of `fallow-emu`. Messages are lowercase and name the path.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image file could not be opened or inspected.
    #[error("image {path}: {source}")]
    Image {
        /// The image file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The image is not something the emulator can serve.
    #[error("image {path}: {message}")]
    BadImage {
        /// The image file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The mount point is missing or not a directory.
    #[error("mount point {path}: {message}")]
    BadMountpoint {
        /// The mount point.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// FUSE is not available here (`/dev/fuse` missing or not usable).
    #[error("fuse is not available: {0}")]
    NoFuse(String),
    /// Mounting failed.
    #[error("cannot mount the emulated disk on {path}: {source}")]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Unmounting failed.
    #[error("cannot unmount {path}: {source}")]
    Unmount {
        /// The mount point.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Loop devices still use the emulated disk, so it cannot be unmounted.
    #[error("{path} is in use by {holders}: detach them first (losetup -d)")]
    Busy {
        /// The emulated disk file.
        path: PathBuf,
        /// The loop devices over it, e.g. `/dev/loop3`.
        holders: String,
    },
    /// A parameter is malformed or out of range.
    #[error("{what}: {message}")]
    InvalidParameter {
        /// The parameter (`--fail`, `model`, …).
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The stat file could not be written.
    #[error("stat file {path}: {source}")]
    StatFile {
        /// The stat file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
