//! The one error type of `fallow-live`. Every variant names the file,
//! device or parameter at fault; messages are lowercase.

use std::path::PathBuf;

/// Errors of `fallow-live`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or device could not be opened, read, written or queried.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The file or device.
        path: PathBuf,
        /// What was being done (`cannot open for reading`, `fsync failed`).
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file has content that cannot be parsed (a stat file, a checkpoint).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the field or line.
        message: String,
    },
    /// A parameter given by the caller is out of range or inconsistent.
    #[error("invalid {name}: {message}")]
    Invalid {
        /// The parameter (`--size`, `--window`, `policy`).
        name: String,
        /// Why it is invalid.
        message: String,
    },
    /// A checkpoint exists but belongs to another scrub (target, size,
    /// order, request size or regions differ).
    #[error("{path}: {message}")]
    CheckpointMismatch {
        /// The checkpoint file.
        path: PathBuf,
        /// What differs and what to do.
        message: String,
    },
    /// The device or file cannot do what was asked (SCSI VERIFY on a loop
    /// device, a clairvoyant policy live).
    #[error("{0}")]
    Unsupported(String),
    /// An error from fallow-core (building a policy, parsing a unit).
    #[error(transparent)]
    Core(#[from] fallow_core::Error),
    /// A setting the user gave is wrong, in words that name the flag or the
    /// config file, table and key (`f.toml: [run] slice: 0 ns: use 1 ms
    /// to 60 s`).
    #[error("{0}")]
    Setting(String),
    /// The policy could not be built; names the spec and where it came from.
    #[error("policy {spec} (from {from}): {why}")]
    Policy {
        /// The spec.
        spec: String,
        /// `--policy`, `config`, `tune result` or `default`.
        from: String,
        /// Why.
        why: Box<Error>,
    },
    /// An error with what it concerns in front (`FILE: [run] device`, `the
    /// command (pid N) continues, unpaused and unwatched`).
    #[error("{context}: {why}")]
    Context {
        /// What the error concerns.
        context: String,
        /// The error.
        why: Box<Error>,
        /// Whether the caller's input is at fault.
        bad_input: bool,
    },
    /// The monitor thread stopped unexpectedly.
    #[error("the I/O monitor stopped: {0}")]
    Monitor(String),
}

/// Result alias of `fallow-live`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::Invalid`].
    pub fn invalid(name: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Invalid {
            name: name.into(),
            message: message.into(),
        }
    }

    /// `self` after `context`, whose fault as `self` is (`None`: as is).
    pub fn named(self, context: Option<&str>) -> Self {
        match context {
            Some(c) => Error::Context {
                context: c.to_string(),
                bad_input: self.is_bad_input(),
                why: Box::new(self),
            },
            None => self,
        }
    }

    /// `self` after `context`, as a failure of the machine, not of the input.
    pub fn failed(self, context: impl Into<String>) -> Self {
        Error::Context {
            context: context.into(),
            why: Box::new(self),
            bad_input: false,
        }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            what: what.into(),
            source,
        }
    }

    /// True when the caller's input is at fault (a missing or unreadable
    /// target, a bad flag, a checkpoint of another scrub), as opposed to a
    /// failure of the machine (a full disk, a broken device). The CLI maps
    /// this to exit status 2.
    pub fn is_bad_input(&self) -> bool {
        use std::io::ErrorKind as K;
        match self {
            Error::Io { source, .. } => matches!(
                source.kind(),
                K::NotFound | K::PermissionDenied | K::IsADirectory | K::InvalidInput
            ),
            Error::Parse { .. }
            | Error::Invalid { .. }
            | Error::CheckpointMismatch { .. }
            | Error::Unsupported(_)
            | Error::Setting(_) => true,
            Error::Policy { why, .. } => why.is_bad_input(),
            Error::Context { bad_input, .. } => *bad_input,
            Error::Core(e) => !matches!(e, fallow_core::Error::Io { .. }),
            Error::Monitor(_) => false,
        }
    }
}
