//! `fallow._fallow.Trace`: a block trace as columns, wrapping
//! [`fallow_core::Trace`], plus `read_trace`.

use crate::conversion::{resolve, DeviceArg, Parsed};
use crate::errors::{without_gil, Result};
use crate::json::to_python;
use fallow_core::period::{idle_lengths_of, periods_of};
use fallow_core::trace::{
    ns_from_f64, ns_from_i64, scale_bytes, Columns, Op, PlainOptions, ReadOptions, TimeUnit,
};
use fallow_core::ServiceModel;
use numpy::{AllowTypeChange, IntoPyArray, PyArray1, PyArrayLike1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// A block trace: requests as columns (struct of arrays), sorted by
/// arrival, times in integer nanoseconds since the first arrival.
///
/// Build one with `fallow.read_trace(path)`, `fallow.synthetic(...)` or
/// `Trace.from_columns(...)`. Column properties return fresh numpy arrays.
#[pyclass(module = "fallow._fallow", name = "Trace", frozen)]
pub struct PyTrace {
    pub(crate) inner: fallow_core::Trace,
}

impl From<fallow_core::Trace> for PyTrace {
    fn from(inner: fallow_core::Trace) -> Self {
        PyTrace { inner }
    }
}

/// A time column in ns from any array-like: unsigned or signed integers
/// (scaled by the unit), floats (checked by the core: a fraction of a ns
/// is an error, not a truncation), or numpy datetime64/timedelta64 (taken
/// as ns whatever the unit).
fn times_ns(
    py: Python<'_>,
    values: &Bound<'_, PyAny>,
    column: &'static str,
    unit_ns: u64,
) -> Result<Vec<u64>> {
    let np = py.import("numpy")?;
    let arr = np.call_method1("asarray", (values,))?;
    let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
    match kind.as_str() {
        "f" => {
            let v: PyArrayLike1<'_, f64, AllowTypeChange> = arr.extract()?;
            Ok(ns_from_f64(column, &v.as_array().to_vec(), unit_ns)?)
        }
        "M" | "m" => {
            let kind = if kind == "M" {
                "datetime64[ns]"
            } else {
                "timedelta64[ns]"
            };
            let ns = arr
                .call_method1("astype", (kind,))?
                .call_method1("astype", ("int64",))?;
            let v: PyArrayLike1<'_, i64, AllowTypeChange> = ns.extract()?;
            Ok(ns_from_i64(column, &v.as_array().to_vec(), 1)?)
        }
        "i" => {
            let v: PyArrayLike1<'_, i64, AllowTypeChange> = arr.extract()?;
            Ok(ns_from_i64(column, &v.as_array().to_vec(), unit_ns)?)
        }
        _ => {
            let v: PyArrayLike1<'_, u64, AllowTypeChange> = arr.extract()?;
            Ok(scale_bytes(column, &v.as_array().to_vec(), unit_ns)?)
        }
    }
}

#[pymethods]
impl PyTrace {
    /// Build a trace from columns (any array-likes, cast by numpy).
    ///
    /// `arrival_ns` is required; the others default to zeros (reads on
    /// device 0). Rows need not be sorted: they are sorted by arrival and
    /// times are rebased so the first arrival is at 0.
    ///
    /// Times are integer ns unless `time_unit` (`ns`, `us`, `ms`, `s`) says
    /// otherwise; floats must then be whole ns (a fraction is an error, not
    /// a silent truncation: `0.25` passed as ns was seconds). numpy
    /// datetime64/timedelta64 columns are taken as ns. `offset_unit_bytes`
    /// and `size_unit_bytes` scale offsets and sizes (512 for sectors).
    #[staticmethod]
    #[pyo3(signature = (arrival_ns, completion_ns=None, offset_bytes=None, size_bytes=None, is_write=None, device=None, time_unit=None, offset_unit_bytes=1, size_unit_bytes=1))]
    #[allow(clippy::too_many_arguments)]
    fn from_columns(
        py: Python<'_>,
        arrival_ns: &Bound<'_, PyAny>,
        completion_ns: Option<&Bound<'_, PyAny>>,
        offset_bytes: Option<PyArrayLike1<'_, u64, AllowTypeChange>>,
        size_bytes: Option<PyArrayLike1<'_, u64, AllowTypeChange>>,
        is_write: Option<PyArrayLike1<'_, bool, AllowTypeChange>>,
        device: Option<PyArrayLike1<'_, u32, AllowTypeChange>>,
        time_unit: Option<Parsed<TimeUnit>>,
        offset_unit_bytes: u64,
        size_unit_bytes: u64,
    ) -> Result<Self> {
        let unit_ns = time_unit.map_or(1, |u| u.0.ns() as u64);
        let columns = Columns {
            arrival_ns: times_ns(py, arrival_ns, "arrival_ns", unit_ns)?,
            completion_ns: completion_ns
                .map(|c| times_ns(py, c, "completion_ns", unit_ns))
                .transpose()?,
            offset: offset_bytes.map(|c| c.as_array().to_vec()),
            offset_unit_bytes,
            size: size_bytes.map(|c| c.as_array().to_vec()),
            size_unit_bytes,
            is_write: is_write.map(|c| c.as_array().to_vec()),
            device: device.map(|c| c.as_array().to_vec()),
        };
        without_gil(py, move || columns.into_trace()).map(PyTrace::from)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Arrival times, ns since the first arrival (uint64, non-decreasing).
    #[getter]
    fn arrival_ns<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.arrival_ns())
    }

    /// Completion times, ns on the same clock (uint64), or None when the source had none.
    #[getter]
    fn completion_ns<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<u64>>> {
        self.inner
            .completion_ns()
            .map(|c| PyArray1::from_slice(py, c))
    }

    /// Byte offsets (uint64).
    #[getter]
    fn offset_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.offset_bytes())
    }

    /// Request sizes in bytes (uint32).
    #[getter]
    fn size_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.size_bytes())
    }

    /// True for writes (bool).
    #[getter]
    fn is_write<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<bool>> {
        self.inner
            .op()
            .iter()
            .map(|&o| o == Op::Write)
            .collect::<Vec<_>>()
            .into_pyarray(py)
    }

    /// Device ids (uint32).
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.device())
    }

    /// True when the trace has completion times.
    #[getter]
    fn has_completions(&self) -> bool {
        self.inner.completion_ns().is_some()
    }

    /// Devices with their request counts: `[{"id": 0, "requests": 24708}, ...]`.
    fn devices<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>> {
        to_python(py, &self.inner.devices())
    }

    /// The requests of one device as a trace of their own (time zero kept):
    /// an id, or an MSR `host:disk` name such as `"hm:0"`.
    fn select_device(&self, py: Python<'_>, id: DeviceArg) -> Result<Self> {
        let id = resolve(&self.inner, Some(&id))?.unwrap_or_default();
        without_gil(py, || self.inner.select_device(id)).map(PyTrace::from)
    }

    /// From the first arrival to the last arrival or completion, ns.
    #[getter]
    fn span_ns(&self) -> u64 {
        self.inner.span_ns()
    }

    /// What reading noticed: path, format, skipped and reordered records, origin.
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>> {
        to_python(py, self.inner.report())
    }

    /// Write the trace to `path` in the format its extension chooses, as
    /// `fallow convert -o` does (`.fbt` or any other: fallow's binary
    /// format; `.parquet`, `.arrow`, …: columnar; `.csv`: MSR CSV),
    /// atomically. The path is checked as the CLI checks `-o`: never the
    /// trace's own file, a device node or a FIFO, nor a file fallow did
    /// not write unless `overwrite`. Returns the format's name.
    #[pyo3(signature = (path, overwrite=false))]
    fn write(&self, py: Python<'_>, path: PathBuf, overwrite: bool) -> Result<&'static str> {
        let guard =
            fallow_core::outpath::OutputGuard::new(overwrite).input(&self.inner.report().path);
        let t = &self.inner;
        let format = without_gil(py, || {
            fallow_core::outpath::write_trace(t, &path, &guard, "path")
        })?;
        Ok(format.name())
    }

    /// Idle interval lengths in ns (uint64); see `idle_intervals`.
    #[pyo3(signature = (service=None, seed=fallow_core::sim::DEFAULT_SEED, device=None))]
    fn idle_intervals_ns<'py>(
        &self,
        py: Python<'py>,
        service: Option<Parsed<ServiceModel>>,
        seed: u64,
        device: Option<u32>,
    ) -> Result<Bound<'py, PyArray1<u64>>> {
        let lengths = without_gil(py, || {
            let trace = self.inner.one_device(device)?;
            idle_lengths_of(&trace, service.map(|s| s.0).as_ref(), seed)
        })?;
        Ok(lengths.into_pyarray(py))
    }

    /// Busy periods as a dict of arrays: `start_ns`, `length_ns` (uint64)
    /// and `requests` (uint32). See `idle_intervals`.
    #[pyo3(signature = (service=None, seed=fallow_core::sim::DEFAULT_SEED, device=None))]
    fn busy_periods_ns<'py>(
        &self,
        py: Python<'py>,
        service: Option<Parsed<ServiceModel>>,
        seed: u64,
        device: Option<u32>,
    ) -> Result<Bound<'py, PyDict>> {
        let p = without_gil(py, || {
            let trace = self.inner.one_device(device)?;
            periods_of(&trace, service.map(|s| s.0).as_ref(), seed).map(|(p, _)| p)
        })?;
        let d = PyDict::new(py);
        d.set_item("start_ns", p.busy_start_ns.into_pyarray(py))?;
        d.set_item("length_ns", p.busy_len_ns.into_pyarray(py))?;
        d.set_item("requests", p.busy_requests.into_pyarray(py))?;
        Ok(d)
    }
}

/// Read a trace file (format detected unless given; gzip is transparent).
///
/// The file is read and parsed with the GIL released.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (path, format=None, skip_bad=false, time_unit=None, offset_unit_bytes=None, size_unit_bytes=None, completion_column=false))]
pub fn read_trace(
    py: Python<'_>,
    path: PathBuf,
    format: Option<Parsed<fallow_core::trace::Format>>,
    skip_bad: bool,
    time_unit: Option<Parsed<TimeUnit>>,
    offset_unit_bytes: Option<u64>,
    size_unit_bytes: Option<u64>,
    completion_column: bool,
) -> Result<PyTrace> {
    let defaults = PlainOptions::default();
    let opts = ReadOptions {
        format: format.map(|f| f.0),
        skip_bad,
        plain: PlainOptions {
            time_unit: time_unit.map_or(defaults.time_unit, |u| u.0),
            offset_unit_bytes: offset_unit_bytes.unwrap_or(defaults.offset_unit_bytes),
            size_unit_bytes: size_unit_bytes.unwrap_or(defaults.size_unit_bytes),
            completion: completion_column,
        },
    };
    without_gil(py, || fallow_core::read_trace(&path, &opts)).map(PyTrace::from)
}
