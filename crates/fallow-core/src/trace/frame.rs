//! Columns handed in by data-frame front ends (Python's `from_columns`,
//! `from_pandas`, `from_polars`): times that arrive as floats in some unit,
//! offsets and sizes in units of bytes, and the choice of one device of a
//! trace for per-device results. The front ends only convert; every check
//! lives here, once.

use super::Trace;
use crate::error::{Error, Location, Result};
use std::borrow::Cow;
use std::path::PathBuf;

/// Whole nanoseconds from float times in units of `unit_ns` ns. With
/// `unit_ns == 1` every value must be a whole number (a fraction of a ns
/// means the caller passed seconds or ms as ns, which truncation would
/// turn into zeros silently). Coarser units are rounded to the nearest ns
/// (`0.1` s is not exact in binary). Negative, NaN and infinite values,
/// and values past the ns clock, are errors naming the column and record.
pub fn ns_from_f64(column: &'static str, values: &[f64], unit_ns: u64) -> Result<Vec<u64>> {
    let bad = |i: usize, message: String| Error::Record {
        path: PathBuf::from("<columns>"),
        location: Location::Record(i as u64),
        field: column,
        message,
    };
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if !v.is_finite() || v < 0.0 {
                return Err(bad(i, format!("{v} is not a non-negative finite time")));
            }
            if unit_ns == 1 && v.fract() != 0.0 {
                return Err(bad(
                    i,
                    format!(
                        "{v} is not a whole number of ns; times in `{column}` are integer ns \
                         (for seconds or ms give the time unit, e.g. time_unit=\"s\")"
                    ),
                ));
            }
            let ns = (v * unit_ns as f64).round();
            // 2^63 ns is 292 years; beyond it the f64 → u64 cast saturates.
            if ns >= 9.223_372_036_854_776e18 {
                return Err(bad(i, format!("{v} overflows the ns clock")));
            }
            Ok(ns as u64)
        })
        .collect()
}

/// `values × unit_bytes` (offsets or sizes given in sectors, KiB…), an
/// error naming the column and record on overflow.
pub fn scale_bytes(column: &'static str, values: &[u64], unit_bytes: u64) -> Result<Vec<u64>> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            v.checked_mul(unit_bytes).ok_or_else(|| Error::Record {
                path: PathBuf::from("<columns>"),
                location: Location::Record(i as u64),
                field: column,
                message: format!("{v} × {unit_bytes} bytes overflows 64 bits"),
            })
        })
        .collect()
}

/// Sizes in bytes as the trace stores them (u32), an error naming the
/// record when one does not fit.
pub fn sizes_u32(values: &[u64]) -> Result<Vec<u32>> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            u32::try_from(v).map_err(|_| Error::Record {
                path: PathBuf::from("<columns>"),
                location: Location::Record(i as u64),
                field: "size_bytes",
                message: format!("{v} bytes is too large for one request (at most 4 GiB)"),
            })
        })
        .collect()
}

impl Trace {
    /// The requests of `device`, or the whole trace when it has a single
    /// device and none is named. A trace of several devices with none
    /// named is an error listing them: busy and idle periods of several
    /// devices merged into one timeline describe no device.
    pub fn one_device(&self, device: Option<u32>) -> Result<Cow<'_, Trace>> {
        let devices = self.devices();
        match device {
            Some(id) => {
                if devices.len() == 1 && devices[0].id == id {
                    Ok(Cow::Borrowed(self))
                } else {
                    self.select_device(id).map(Cow::Owned)
                }
            }
            None if devices.len() <= 1 => Ok(Cow::Borrowed(self)),
            None => Err(Error::invalid(
                "device",
                format!(
                    "the trace has {} devices ({}); name one (device=...) rather than merge their periods",
                    devices.len(),
                    devices
                        .iter()
                        .map(|d| format!("{} with {} requests", d.id, d.requests))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Op;

    #[test]
    fn float_seconds_as_ns_are_an_error_not_zeros() {
        // Issue 17: 0.25 (seconds) passed as arrival_ns became 0.
        let e = ns_from_f64("arrival_ns", &[0.0, 0.25], 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("record 1") && e.contains("`arrival_ns`") && e.contains("time_unit"),
            "{e}"
        );
        assert_eq!(
            ns_from_f64("arrival_ns", &[0.0, 1500.0], 1).unwrap(),
            [0, 1500]
        );
        assert_eq!(
            ns_from_f64("arrival_ns", &[0.1, 0.25, 2.000_001], 1_000_000_000).unwrap(),
            [100_000_000, 250_000_000, 2_000_001_000]
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e19] {
            assert!(ns_from_f64("x", &[bad], 1).is_err(), "{bad}");
        }
        assert_eq!(scale_bytes("offset_bytes", &[3], 512).unwrap(), [1536]);
        assert!(scale_bytes("offset_bytes", &[u64::MAX], 512).is_err());
    }

    #[test]
    fn several_devices_need_one_named() {
        let t = Trace::from_columns(
            vec![0, 10, 20],
            Some(vec![5, 15, 25]),
            vec![0; 3],
            vec![512; 3],
            vec![Op::Read; 3],
            vec![0, 1, 1],
        )
        .unwrap();
        let e = t.one_device(None).unwrap_err().to_string();
        assert!(e.contains("2 devices") && e.contains("device="), "{e}");
        assert_eq!(t.one_device(Some(1)).unwrap().len(), 2);
        assert!(t.one_device(Some(7)).is_err());
        let one = t.select_device(1).unwrap();
        assert!(matches!(one.one_device(None).unwrap(), Cow::Borrowed(_)));
    }
}
