//! # fallow-py
//!
//! The `fallow._fallow` extension module: PyO3 bindings of `fallow-core`,
//! plus the whole `fallow` command line ([`cli`], `fallow-cli`'s library)
//! for the package's `fallow` console script. The `fallow` Python package
//! (python/fallow) wraps it with pandas frames, plots and Parquet interop.
//!
//! One file per area, mirroring the core: [`trace`] (the `Trace` class and
//! `read_trace`), [`stats`] (`characterize`, `analyze`, `analyze_all_devices`), [`workload`] (`synthetic`),
//! [`sim`] (`simulate`, `compare`, `policies`), [`tune`] (`tune`, `pareto`, `recommend`),
//! [`energy`] (`energy`), [`live`] (`scrub`), [`scrubplan`] (`scrub_plan`);
//! [`conversion`] converts Python values into core types; [`page`] checks
//! and writes the HTML pages (`html=`).
//! [`errors`] is the one place where core errors become Python exceptions
//! and holds the one helper that releases the GIL around long calls.
//! Methods are thin: they convert arguments, call the core, convert results.
#![deny(missing_docs)]

pub mod cli;
pub mod conversion;
pub mod energy;
pub mod errors;
mod json;
pub mod live;
mod page;
pub mod scrubplan;
pub mod sim;
pub mod stats;
pub mod trace;
pub mod tune;
pub mod workload;

use pyo3::prelude::*;

/// The compiled core of fallow (use the `fallow` package instead).
#[pymodule]
fn _fallow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // Benchmarks refuse to time a debug build by mistake.
    m.add("_debug_build", cfg!(debug_assertions))?;
    // The first key of every CLI `--json`; the results' `to_json()` carry it too.
    m.add("SCHEMA_VERSION", fallow_core::JSON_SCHEMA_VERSION)?;
    errors::register(m)?;
    m.add_class::<trace::PyTrace>()?;
    m.add_class::<sim::PolicyInfo>()?;
    m.add_function(wrap_pyfunction!(trace::read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(stats::characterize, m)?)?;
    m.add_function(wrap_pyfunction!(stats::analyze, m)?)?;
    m.add_function(wrap_pyfunction!(stats::analyze_all_devices, m)?)?;
    m.add_function(wrap_pyfunction!(workload::synthetic, m)?)?;
    m.add_function(wrap_pyfunction!(sim::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(sim::compare, m)?)?;
    m.add_function(wrap_pyfunction!(sim::policies, m)?)?;
    m.add_function(wrap_pyfunction!(sim::defaults, m)?)?;
    m.add_function(wrap_pyfunction!(tune::tune, m)?)?;
    m.add_function(wrap_pyfunction!(tune::pareto, m)?)?;
    m.add_function(wrap_pyfunction!(tune::recommend, m)?)?;
    m.add_function(wrap_pyfunction!(energy::energy, m)?)?;
    m.add_function(wrap_pyfunction!(live::scrub, m)?)?;
    m.add_function(wrap_pyfunction!(scrubplan::scrub_plan, m)?)?;
    m.add_function(wrap_pyfunction!(cli::cli_main, m)?)?;
    Ok(())
}
