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

/// One structured field of an error ([`Error::fields`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// A number (a line, a byte offset, a record, a device id).
    Int(u64),
    /// A text (a path, a field or parameter name, an MSR `host:disk` device).
    Text(String),
    /// Does not apply here (a line for a binary file).
    None,
}

impl Error {
    /// The error's structured fields by name, for front ends that expose
    /// them (Python's exception attributes), so no front end takes the
    /// variants apart itself: a bad record, an empty or unrecognised file
    /// give `path`, `line`, `offset`, `record` and `field` (what does not
    /// apply as [`Field::None`]); a bad parameter gives `name`, an unknown
    /// device `name` (`device`) and `device` (its id, or its MSR
    /// `host:disk` name); an unreadable file its `path`. Empty otherwise.
    pub fn fields(&self) -> Vec<(&'static str, Field)> {
        let text = |s: &str| Field::Text(s.to_string());
        let path = |p: &std::path::Path| Field::Text(p.display().to_string());
        let none = || Field::None;
        match self {
            Error::Record {
                path: p,
                location,
                field,
                ..
            } => {
                let n = location.number();
                let at = |here: bool| if here { Field::Int(n) } else { Field::None };
                vec![
                    ("path", path(p)),
                    ("line", at(matches!(location, Location::Line(_)))),
                    ("offset", at(matches!(location, Location::Offset(_)))),
                    ("record", at(matches!(location, Location::Record(_)))),
                    ("field", text(field)),
                ]
            }
            Error::Empty { path: p, .. } | Error::UnknownFormat { path: p, .. } => vec![
                ("path", path(p)),
                ("line", none()),
                ("offset", none()),
                ("record", none()),
                ("field", none()),
            ],
            Error::NoSuchDevice { device, .. } => {
                let id = device.parse::<u32>();
                let device = id.map_or_else(|_| text(device), |id| Field::Int(id.into()));
                vec![("name", text("device")), ("device", device)]
            }
            Error::InvalidParameter { name, .. } => vec![("name", text(name))],
            Error::Io { path: p, .. } => vec![("path", path(p))],
            Error::Unsupported(_) | Error::Interrupted => vec![],
        }
    }
}

impl Location {
    /// The line, byte offset or record number itself.
    pub fn number(self) -> u64 {
        match self {
            Location::Line(n) | Location::Offset(n) | Location::Record(n) => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_name_the_place_and_leave_the_rest_none() {
        let e = Error::Record {
            path: PathBuf::from("/t/a.csv"),
            location: Location::Offset(4096),
            field: "size",
            message: "bad".into(),
        };
        assert_eq!(
            e.fields(),
            [
                ("path", Field::Text("/t/a.csv".into())),
                ("line", Field::None),
                ("offset", Field::Int(4096)),
                ("record", Field::None),
                ("field", Field::Text("size".into())),
            ]
        );
        let line = Error::Record {
            path: PathBuf::from("x"),
            location: Location::Line(7),
            field: "op",
            message: String::new(),
        };
        assert_eq!(line.fields()[1], ("line", Field::Int(7)));
        assert_eq!(line.fields()[2], ("offset", Field::None));
        let empty = Error::Empty {
            path: PathBuf::from("e"),
            detail: String::new(),
        };
        let names: Vec<_> = empty.fields().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["path", "line", "offset", "record", "field"]);
        assert!(empty.fields()[1..].iter().all(|(_, v)| *v == Field::None));
    }

    #[test]
    fn fields_of_devices_and_parameters() {
        let dev = |d: &str| Error::NoSuchDevice {
            path: PathBuf::from("t"),
            device: d.into(),
            available: "0".into(),
        };
        assert_eq!(dev("3").fields()[1], ("device", Field::Int(3)));
        assert_eq!(
            dev("hm:0").fields()[1],
            ("device", Field::Text("hm:0".into()))
        );
        assert_eq!(dev("3").fields()[0], ("name", Field::Text("device".into())));
        assert_eq!(
            Error::invalid("bg_size", "too big").fields(),
            [("name", Field::Text("bg_size".into()))]
        );
        assert!(Error::Interrupted.fields().is_empty());
        assert!(Error::Unsupported("x".into()).fields().is_empty());
    }
}
