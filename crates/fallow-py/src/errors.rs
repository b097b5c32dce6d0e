//! The one place where Rust errors become Python exceptions.
//!
//! ```text
//! FallowError                 any fallow failure (also: analysis unsupported for this trace)
//! ├── TraceFormatError        malformed record, empty trace, unknown format
//! │                           (.path, .line / .offset / .record, .field where known)
//! └── ParameterError          an argument out of range or unparsable (.name), unknown device
//! OSError (and subclasses)    the file could not be opened or read (.filename, .errno)
//! ```
//!
//! Every exception carries the core's lowercase message, which already names
//! the file, the place in it and the field.

use fallow_core::error::Field;
use fallow_core::Error;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyOSError};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

create_exception!(
    fallow,
    FallowError,
    PyException,
    "Base class of every error fallow raises (except OSError for unreadable files)."
);
create_exception!(
    fallow,
    TraceFormatError,
    FallowError,
    "A trace file is malformed, empty or of an unknown format.\n\n\
     Attributes: path (str), line (int, 1-based, text formats), offset (int, byte offset, \
     binary formats), record (int, 0-based, arrays), field (str); None where unknown."
);
create_exception!(
    fallow,
    ParameterError,
    FallowError,
    "An argument is out of range or cannot be parsed (a service model, a unit, a device id).\n\n\
     Attributes: name (str or None): the parameter at fault."
);

/// Register the exception classes in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("FallowError", py.get_type::<FallowError>())?;
    m.add("TraceFormatError", py.get_type::<TraceFormatError>())?;
    m.add("ParameterError", py.get_type::<ParameterError>())?;
    Ok(())
}

/// An error on its way to Python: a core error, or one Python raised
/// (polars' `PyPolarsErr` is the model). `?` converts both into it and it
/// into the matching exception, so every binding returns [`Result`] and no
/// call site maps errors by hand (the orphan rule forbids
/// `From<fallow_core::Error> for PyErr` itself).
#[derive(Debug)]
pub enum PyFallowError {
    /// A core error, converted by [`convert`].
    Core(Error),
    /// A Python exception, passed through.
    Python(PyErr),
}

/// The result of every binding.
pub type Result<T> = std::result::Result<T, PyFallowError>;

impl From<Error> for PyFallowError {
    fn from(e: Error) -> Self {
        PyFallowError::Core(e)
    }
}

impl From<PyErr> for PyFallowError {
    fn from(e: PyErr) -> Self {
        PyFallowError::Python(e)
    }
}

impl From<PyFallowError> for PyErr {
    fn from(e: PyFallowError) -> PyErr {
        match e {
            PyFallowError::Core(e) => Python::with_gil(|py| convert(py, e).unwrap_or_else(|e| e)),
            PyFallowError::Python(e) => e,
        }
    }
}

/// Building the exception can itself fail (setting an attribute); that
/// failure is returned as the error in `Err`.
fn convert(py: Python<'_>, err: Error) -> PyResult<PyErr> {
    let msg = err.to_string();
    let e = match &err {
        Error::Io { path, source } => {
            // OSError(errno, strerror, filename) picks the right subclass
            // (FileNotFoundError, PermissionError, …) from errno.
            let filename = path.display().to_string();
            return Ok(match source.raw_os_error() {
                Some(code) => PyOSError::new_err((code, source.to_string(), filename)),
                None => PyOSError::new_err(msg),
            });
        }
        Error::Record { .. } | Error::Empty { .. } | Error::UnknownFormat { .. } => {
            TraceFormatError::new_err(msg)
        }
        Error::NoSuchDevice { .. } | Error::InvalidParameter { .. } => ParameterError::new_err(msg),
        Error::Unsupported(_) => FallowError::new_err(msg),
        Error::Interrupted => PyKeyboardInterrupt::new_err(msg),
    };
    // the core's structured fields as attributes (`.path`, `.line`, `.name`, …)
    for (name, value) in err.fields() {
        let value = match value {
            Field::Int(n) => n.into_py_any(py)?,
            Field::Text(s) => s.into_py_any(py)?,
            Field::None => py.None(),
        };
        e.value(py).setattr(name, value)?;
    }
    Ok(e)
}

/// A `ParameterError` raised by the bindings themselves (argument conversion).
pub fn parameter(name: &str, message: impl Into<String>) -> PyFallowError {
    Error::invalid(name, message).into()
}

/// Run `f` on a worker thread with the GIL released while this thread
/// checks Python's signals every 20 ms: on Ctrl-C (or any signal handler
/// raising) `cancel` is set, `f` is expected to return soon after
/// ([`fallow_core::Error::Interrupted`]), and the handler's exception
/// (KeyboardInterrupt) is raised.
pub fn interruptible<T, F>(
    py: Python<'_>,
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
    f: F,
) -> Result<T>
where
    F: FnOnce() -> fallow_core::Result<T> + Send,
    T: Send,
{
    // a GIL round trip every 20 ms is nothing beside the call; the worst
    // case adds it to the core's own time to notice the flag (0.5 s at
    // most: tests/python/test_interrupt.py)
    let every = std::time::Duration::from_millis(20);
    let check = || Python::with_gil(|py| py.check_signals());
    Ok(py.allow_threads(|| fallow_core::polled::run_polled(&cancel, every, f, check))??)
}

/// Run `f` with the GIL released and convert its error: the one helper
/// around every long call into the core (reading, period extraction,
/// characterisation, generation), so other Python threads keep running.
pub fn without_gil<T, F>(py: Python<'_>, f: F) -> Result<T>
where
    F: FnOnce() -> fallow_core::Result<T> + Send,
    T: Send,
{
    Ok(py.allow_threads(f)?)
}
