//! Core results (serde `Serialize`) to plain Python data (dict, list,
//! float, int, str, None) through JSON, so Python sees exactly the keys of
//! `fallow analyze --json`.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use serde::Serialize;

static JSON_LOADS: GILOnceCell<Py<PyAny>> = GILOnceCell::new();

/// Convert any serialisable value to plain Python objects.
pub fn to_python<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> crate::errors::Result<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| crate::errors::FallowError::new_err(format!("cannot convert result: {e}")))?;
    let loads = JSON_LOADS.get_or_try_init(py, || {
        py.import("json")?.getattr("loads").map(Bound::unbind)
    })?;
    Ok(loads.bind(py).call1((text,))?)
}
