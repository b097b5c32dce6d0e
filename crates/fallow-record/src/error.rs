//! The error type of `fallow-record`.

use std::path::PathBuf;

/// Errors of `fallow-record`; each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not running as root: tracefs needs it.
    #[error("recording needs root (tracefs is root-only); run with sudo")]
    NotRoot,
    /// tracefs is not mounted and could not be mounted.
    #[error("tracefs is not mounted at /sys/kernel/tracing or /sys/kernel/debug/tracing, and mounting it failed: {0}")]
    NoTracefs(String),
    /// The kernel has no block tracepoints.
    #[error(
        "{path}: the kernel has no block tracepoints (CONFIG_BLK_DEV_IO_TRACE / tracepoints off?)"
    )]
    NoBlockEvents {
        /// The event directory looked for.
        path: PathBuf,
    },
    /// The device does not exist or is not a whole block device.
    #[error("device {device}: {message}")]
    Device {
        /// The device as given.
        device: String,
        /// What is wrong with it.
        message: String,
    },
    /// A tracefs file could not be read or written.
    #[error("{path}: {source}")]
    Tracefs {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
