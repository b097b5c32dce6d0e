//! `characterize`: every idleness analysis of one device's trace, as the
//! plain data behind `fallow analyze --json`.

use crate::conversion::{DeviceArg, Parsed};
use crate::errors::{without_gil, Result};
use crate::json::to_python;
use crate::page::Page;
use crate::trace::PyTrace;
use fallow_core::analyze::AnalyzeRequest;
use fallow_core::{CharacterizeOptions, ServiceModel};
use pyo3::prelude::*;

/// Characterise a trace: idle and busy summaries, CDF, remaining idle time,
/// concentration, lag pairs, Busy Bee's P_lag and CWS, ACF, AR fit,
/// periodicity and request rate. Returns a plain dict (the JSON of
/// `fallow analyze`); `fallow.characterize` wraps it with pandas frames.
///
/// `device` selects one device (required when the trace has several);
/// `service` (`exp:5ms`, `const:1ms`, `disk`) models completions for traces
/// without them (or replaces recorded ones), seeded by `seed`.
#[pyfunction]
#[pyo3(signature = (trace, device=None, service=None, seed=fallow_core::sim::DEFAULT_SEED, acf_max_lag=50, ar_max_order=10, rate_bin_s=None, curve_points=200))]
#[allow(clippy::too_many_arguments)]
pub fn characterize<'py>(
    py: Python<'py>,
    trace: &PyTrace,
    device: Option<DeviceArg>,
    service: Option<Parsed<ServiceModel>>,
    seed: u64,
    acf_max_lag: usize,
    ar_max_order: usize,
    rate_bin_s: Option<f64>,
    curve_points: usize,
) -> Result<Bound<'py, PyAny>> {
    let opts = options(
        service,
        seed,
        acf_max_lag,
        ar_max_order,
        rate_bin_s,
        curve_points,
    );
    let t = &trace.inner;
    let devices = t.devices();
    let device = t.sim_device(device.as_ref().map(|d| &d.0))?;
    let c = without_gil(py, || match device {
        Some(id) => fallow_core::characterize(&t.select_device(id)?, devices, device, &opts),
        None => fallow_core::characterize(t, devices, None, &opts),
    })?;
    to_python(py, &c)
}

/// The characterisation options from Python's keywords.
fn options(
    service: Option<Parsed<ServiceModel>>,
    seed: u64,
    acf_max_lag: usize,
    ar_max_order: usize,
    rate_bin_s: Option<f64>,
    curve_points: usize,
) -> CharacterizeOptions {
    CharacterizeOptions {
        service: service.map(|s| s.0),
        seed,
        acf_max_lag,
        ar_max_order,
        rate_bin_ns: rate_bin_s.map_or(0, |s| (s * 1e9).round() as u64),
        curve_points,
    }
}

/// `fallow analyze`: characterise one device (the busiest unless `device`
/// names one) and state its headline findings. Returns the plain dict of
/// `fallow analyze --json`: the characterisation's keys and `findings`.
/// With `html`, also writes `fallow analyze --html`'s report there (the
/// CLI's page, byte for byte; the path checked as the CLI checks it:
/// never the trace's own file, a device node, or a file fallow did not
/// write unless `overwrite`).
#[pyfunction]
#[pyo3(signature = (trace, device=None, service=None, seed=fallow_core::sim::DEFAULT_SEED, acf_max_lag=50, ar_max_order=10, rate_bin_s=None, curve_points=200, html=None, overwrite=false))]
#[allow(clippy::too_many_arguments)]
pub fn analyze<'py>(
    py: Python<'py>,
    trace: &PyTrace,
    device: Option<DeviceArg>,
    service: Option<Parsed<ServiceModel>>,
    seed: u64,
    acf_max_lag: usize,
    ar_max_order: usize,
    rate_bin_s: Option<f64>,
    curve_points: usize,
    html: Option<std::path::PathBuf>,
    overwrite: bool,
) -> Result<Bound<'py, PyAny>> {
    // checked before the work, as the CLI does
    let page = Page::checked(html, overwrite, [trace.inner.report().path.as_path()])?;
    let request = AnalyzeRequest {
        device: device.map(|d| d.0),
        options: options(
            service,
            seed,
            acf_max_lag,
            ar_max_order,
            rate_bin_s,
            curve_points,
        ),
    };
    let t = &trace.inner;
    let a = without_gil(py, || {
        let a = fallow_core::analyze::analyze(t, &request)?;
        let (c, f) = (&a.characterization, &a.findings);
        page.write(|p| fallow_report::analysis::write(p, c, f, None, None))?;
        Ok::<_, fallow_core::Error>(a)
    })?;
    to_python(py, &a)
}

/// `fallow analyze PATH --device all`: every device of the file at `path`
/// in one streaming pass, one row each (`fallow_core::fleet`). Returns the
/// plain dict of `fallow analyze PATH --device all --json`. With `html`,
/// also writes the CLI's fleet page there, byte for byte (the path checked
/// as for [`analyze`]).
#[pyfunction]
#[pyo3(signature = (path, format=None, skip_bad=false, service=None, seed=fallow_core::sim::DEFAULT_SEED, html=None, overwrite=false))]
#[allow(clippy::too_many_arguments)]
pub fn analyze_all_devices<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    format: Option<Parsed<fallow_core::trace::Format>>,
    skip_bad: bool,
    service: Option<Parsed<ServiceModel>>,
    seed: u64,
    html: Option<std::path::PathBuf>,
    overwrite: bool,
) -> Result<Bound<'py, PyAny>> {
    let page = Page::checked(html, overwrite, [path.as_path()])?;
    let opts = fallow_core::trace::ReadOptions {
        format: format.map(|f| f.0),
        skip_bad,
        ..Default::default()
    };
    let service = service.map(|s| s.0);
    let fleet = without_gil(py, || {
        let fleet = fallow_core::fleet::fleet_of(&path, &opts, service.as_ref(), seed)?;
        page.write(|p| fallow_report::fleet::write(p, &fleet))?;
        Ok::<_, fallow_core::Error>(fleet)
    })?;
    to_python(py, &fleet)
}
