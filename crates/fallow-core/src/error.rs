//! The one error type of `fallow-core`: every variant says where (file, line
//! or byte offset, field) so a user can fix the input.

use std::fmt;
use std::path::PathBuf;

/// Where in an input a problem sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// 1-based line of a text file.
    Line(u64),
    /// Byte offset of a record in a binary file.
    Offset(u64),
    /// 0-based record index (arrays handed in from Python, synthetic data).
    Record(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Offset(n) => write!(f, "byte offset {n}"),
            Location::Record(n) => write!(f, "record {n}"),
        }
    }
}

/// Errors of `fallow-core`. Messages are lowercase and name the input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A record could not be parsed or is inconsistent.
    #[error("{path}: {location}: field `{field}`: {message}")]
    Record {
        /// The file.
        path: PathBuf,
        /// Line or byte offset of the record.
        location: Location,
        /// The field at fault (`timestamp`, `size`, …).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The file holds no usable records.
    #[error("{path}: no requests in trace{detail}")]
    Empty {
        /// The file.
        path: PathBuf,
        /// Extra context, such as how many records were skipped.
        detail: String,
    },
    /// The format could not be recognised.
    #[error("{path}: cannot recognise the trace format ({hint}); pass --format (one of {known})")]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// What the first bytes looked like.
        hint: String,
        /// The format names accepted.
        known: String,
    },
    /// A device id asked for is not in the trace.
    #[error("{path}: no device {device} in trace (devices: {available})")]
    NoSuchDevice {
        /// The file.
        path: PathBuf,
        /// The device asked for (`3`, or `hm:0` in an MSR file of several hosts).
        device: String,
        /// The devices present.
        available: String,
    },
    /// A parameter given by the caller is out of range.
    #[error("invalid {name}: {message}")]
    InvalidParameter {
        /// The parameter (`--service`, `mean`, …).
        name: String,
        /// Why it is invalid.
        message: String,
    },
    /// An analysis needs something the trace does not have.
    #[error("{0}")]
    Unsupported(String),
    /// A long computation was stopped by its caller (Ctrl-C in Python).
    #[error("interrupted")]
    Interrupted,
}

/// Result alias of `fallow-core`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub fn invalid(name: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidParameter {
            name: name.into(),
            message: message.into(),
        }
    }
}
