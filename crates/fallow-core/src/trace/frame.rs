//! Columns handed in by data-frame front ends (Python's `from_columns`,
//! `from_pandas`, `from_polars`): times that arrive as floats in some unit,
//! offsets and sizes in units of bytes, and the choice of one device of a
//! trace for per-device results. The front ends only convert; every check
//! lives here, once.

use super::{DeviceSel, Op, Trace};
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

/// Whole nanoseconds from signed integer times in units of `unit_ns` ns
/// (numpy int64 columns; datetime64/timedelta64 as ns with `unit_ns == 1`).
/// A negative is the error [`ns_from_f64`] gives for it, naming the first;
/// the rest scale as integers ([`scale_bytes`]), exact past 2^53 where an
/// f64 round trip is not.
pub fn ns_from_i64(column: &'static str, values: &[i64], unit_ns: u64) -> Result<Vec<u64>> {
    if let Some(i) = values.iter().position(|&x| x < 0) {
        let probe: Vec<f64> = values[..=i].iter().map(|&x| x as f64).collect();
        ns_from_f64(column, &probe, unit_ns)?;
    }
    let as_u: Vec<u64> = values.iter().map(|&x| x.max(0) as u64).collect();
    scale_bytes(column, &as_u, unit_ns)
}

/// The columns a data-frame front end hands over: times already in ns
/// ([`ns_from_f64`], [`ns_from_i64`]), offsets and sizes in units of
/// `offset_unit_bytes` / `size_unit_bytes`. A missing column is zeros
/// (reads on device 0).
#[derive(Debug, Clone, Default)]
pub struct Columns {
    /// Arrival times, ns (any order, any origin).
    pub arrival_ns: Vec<u64>,
    /// Completion times, ns on the same clock.
    pub completion_ns: Option<Vec<u64>>,
    /// Offsets in units of `offset_unit_bytes`.
    pub offset: Option<Vec<u64>>,
    /// Bytes per unit of `offset` (512 for sectors).
    pub offset_unit_bytes: u64,
    /// Sizes in units of `size_unit_bytes`.
    pub size: Option<Vec<u64>>,
    /// Bytes per unit of `size`.
    pub size_unit_bytes: u64,
    /// True for writes.
    pub is_write: Option<Vec<bool>>,
    /// Device ids.
    pub device: Option<Vec<u32>>,
}

impl Columns {
    /// The trace, sorted by arrival and rebased to the first; errors name
    /// the column and record (overflowing offsets, sizes over 4 GiB,
    /// columns of different lengths).
    pub fn into_trace(self) -> Result<Trace> {
        let n = self.arrival_ns.len();
        let offset = match self.offset {
            Some(c) => scale_bytes("offset_bytes", &c, self.offset_unit_bytes)?,
            None => vec![0; n],
        };
        let size = match self.size {
            Some(c) => sizes_u32(&scale_bytes("size_bytes", &c, self.size_unit_bytes)?)?,
            None => vec![0; n],
        };
        let op = self.is_write.map_or_else(
            || vec![Op::Read; n],
            |c| {
                c.iter()
                    .map(|&w| if w { Op::Write } else { Op::Read })
                    .collect()
            },
        );
        let device = self.device.unwrap_or_else(|| vec![0; n]);
        Trace::from_columns(
            self.arrival_ns,
            self.completion_ns,
            offset,
            size,
            op,
            device,
        )
    }
}

impl Trace {
    /// The device a simulation runs on: the one `sel` names, or none for
    /// a trace of one device (the whole trace). Several devices without a
    /// choice is an error listing them (MSR devices as `host:disk`).
    pub fn sim_device(&self, sel: Option<&DeviceSel>) -> Result<Option<u32>> {
        let id = sel.map(|s| self.resolve_device(s)).transpose()?;
        let devices = self.devices();
        if id.is_some() || devices.len() <= 1 {
            return Ok(id);
        }
        let names: Vec<String> = devices
            .iter()
            .map(|d| d.name.clone().unwrap_or_else(|| d.id.to_string()))
            .collect();
        Err(Error::invalid(
            "device",
            format!(
                "the trace holds {} devices ({}); choose one with device=",
                devices.len(),
                names.join(", ")
            ),
        ))
    }

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

    #[test]
    fn float_seconds_as_ns_are_an_error_not_zeros() {
        // 0.25 (seconds) passed as arrival_ns once became 0.
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
    #[test]
    fn signed_times_scale_exactly_and_refuse_negatives() {
        // 2^53 + 1 is not an f64: an integer path must keep it.
        let big = (1i64 << 53) + 1;
        assert_eq!(
            ns_from_i64("arrival_ns", &[0, 7, big], 1).unwrap(),
            [0, 7, (1u64 << 53) + 1]
        );
        assert_eq!(
            ns_from_i64("arrival_ns", &[2, 3], 1000).unwrap(),
            [2000, 3000]
        );
        let e = ns_from_i64("completion_ns", &[5, -3, -4], 1).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("record 1") && e.contains("`completion_ns`") && e.contains("-3"),
            "{e}"
        );
        // (2^63 - 1) × 3 ns is past 2^64
        assert!(ns_from_i64("arrival_ns", &[i64::MAX], 3).is_err());
    }

    #[test]
    fn columns_default_to_zero_reads_and_scale_units() {
        let t = Columns {
            arrival_ns: vec![30, 10],
            offset: Some(vec![2, 1]),
            offset_unit_bytes: 512,
            size: Some(vec![8, 4]),
            size_unit_bytes: 1024,
            ..Columns::default()
        }
        .into_trace()
        .unwrap();
        // sorted by arrival, rebased: 10 → 0, 30 → 20
        assert_eq!(t.arrival_ns(), [0, 20]);
        assert_eq!(t.offset_bytes(), [512, 1024]);
        assert_eq!(t.size_bytes(), [4096, 8192]);
        assert_eq!(t.op(), [Op::Read, Op::Read]);
        assert_eq!(t.device(), [0, 0]);
        let huge = Columns {
            arrival_ns: vec![0],
            size: Some(vec![1 << 32]),
            size_unit_bytes: 1,
            offset_unit_bytes: 1,
            ..Columns::default()
        };
        let e = huge.into_trace().unwrap_err().to_string();
        assert!(e.contains("size_bytes") && e.contains("4 GiB"), "{e}");
    }

    #[test]
    fn a_simulation_needs_one_device_named() {
        let t = Trace::from_columns(
            vec![0, 10, 20],
            None,
            vec![0; 3],
            vec![512; 3],
            vec![Op::Read; 3],
            vec![4, 9, 9],
        )
        .unwrap();
        let e = t.sim_device(None).unwrap_err().to_string();
        assert!(
            e.contains("holds 2 devices (4, 9)") && e.contains("device="),
            "{e}"
        );
        assert_eq!(t.sim_device(Some(&DeviceSel::Id(9))).unwrap(), Some(9));
        // a plain id passes; selecting it is what refuses an unknown one
        assert_eq!(t.sim_device(Some(&DeviceSel::Id(5))).unwrap(), Some(5));
        assert!(t.select_device(5).is_err());
        let one = t.select_device(4).unwrap();
        assert_eq!(one.sim_device(None).unwrap(), None);
    }
}
