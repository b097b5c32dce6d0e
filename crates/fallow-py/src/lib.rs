//! PLACEHOLDER
use pyo3::prelude::*;
#[pymodule]
fn _fallow(_m: &Bound<'_, PyModule>) -> PyResult<()> { Ok(()) }
