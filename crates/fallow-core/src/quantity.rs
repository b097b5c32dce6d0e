//! A size or a duration as a front end receives it (a number, or a text
//! with a unit), converted once here, with errors naming the front end's
//! parameter (`net_latency`, `bg_size`: Python's keyword spelling). The
//! CLI parses its flags' text with [`crate::units`] directly.

use crate::error::{Error, Result};
use crate::units::{parse_bytes, parse_duration_ns};

/// A value as given, before its unit is known.
#[derive(Debug, Clone, PartialEq)]
pub enum Quantity {
    /// A non-negative whole number: bytes for a size, seconds for a duration.
    Int(u64),
    /// Any other number: seconds for a duration (refused as a size).
    Float(f64),
    /// A text with a unit: `"64KiB"`, `"2ms"`.
    Text(String),
    /// Anything else, by its description (refused, naming the parameter).
    Other(String),
}

/// A core error about a parameter, named by the front end's `name`; the
/// core's own name (`duration`, `size`, `spin-down policy t`) stays in the
/// message. Other errors pass unchanged.
pub fn renamed(name: &str, e: Error) -> Error {
    match e {
        Error::InvalidParameter {
            name: inner,
            message,
        } => Error::invalid(name, format!("{inner}: {message}")),
        other => other,
    }
}

impl Quantity {
    /// A duration in ns: seconds as a number, or a text such as `"2ms"`.
    pub fn duration_ns(&self, name: &str) -> Result<u64> {
        let s = match self {
            Quantity::Int(n) => *n as f64,
            Quantity::Float(s) => *s,
            Quantity::Text(t) => return parse_duration_ns(t).map_err(|e| renamed(name, e)),
            Quantity::Other(_) => {
                return Err(Error::invalid(
                    name,
                    "must be seconds or a duration such as \"2ms\"",
                ))
            }
        };
        if s.is_finite() && s >= 0.0 {
            Ok((s * 1e9).round() as u64)
        } else {
            Err(Error::invalid(
                name,
                format!("must be a non-negative duration, got {s}"),
            ))
        }
    }

    /// A size of at least one byte: bytes as a whole number, or a text
    /// such as `"64KiB"`.
    pub fn bytes(&self, name: &str) -> Result<u64> {
        let b = match self {
            Quantity::Int(n) => *n,
            Quantity::Text(t) => parse_bytes(t).map_err(|e| renamed(name, e))?,
            Quantity::Float(_) | Quantity::Other(_) => {
                return Err(Error::invalid(
                    name,
                    "must be a number of bytes or a size such as \"64KiB\"",
                ))
            }
        };
        if b == 0 {
            return Err(Error::invalid(name, "must be at least 1 byte"));
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(r: Result<u64>) -> String {
        match r {
            Err(Error::InvalidParameter { name, .. }) => name,
            other => panic!("expected an invalid parameter, got {other:?}"),
        }
    }

    #[test]
    fn durations_are_seconds_or_text() {
        assert_eq!(Quantity::Int(2).duration_ns("d").unwrap(), 2_000_000_000);
        assert_eq!(Quantity::Float(0.25).duration_ns("d").unwrap(), 250_000_000);
        assert_eq!(
            Quantity::Text("3ms".into()).duration_ns("d").unwrap(),
            3_000_000
        );
        for bad in [
            Quantity::Float(-1.0),
            Quantity::Float(f64::NAN),
            Quantity::Text("soon".into()),
            Quantity::Other("[1]".into()),
        ] {
            assert_eq!(name_of(bad.duration_ns("bg_wait")), "bg_wait", "{bad:?}");
        }
    }

    #[test]
    fn sizes_are_bytes_or_text_and_never_zero() {
        assert_eq!(Quantity::Int(512).bytes("s").unwrap(), 512);
        assert_eq!(Quantity::Text("64KiB".into()).bytes("s").unwrap(), 65_536);
        for bad in [
            Quantity::Int(0),
            Quantity::Text("0".into()),
            Quantity::Text("lots".into()),
            Quantity::Float(1.5),
        ] {
            assert_eq!(name_of(bad.bytes("bg_size")), "bg_size", "{bad:?}");
        }
    }
}
