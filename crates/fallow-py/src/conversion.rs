//! Python values into core types, once (polars' `conversion/` is the
//! model): [`Parsed`] for what the core parses from text, [`Value`] for a
//! size or a duration, [`DeviceArg`] for `device=`. Checks and defaults
//! stay in the core; a conversion only says what Python handed over.

use crate::errors::{parameter, PyFallowError, Result};
use fallow_core::quantity::Quantity;
use fallow_core::trace::DeviceSel;
use fallow_core::Trace;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};
use std::str::FromStr;

/// A value the core parses from text (`"exp:5ms"`, `"ms"`, `"hm:0"`):
/// a parse error is the core's, naming its parameter; a non-string is a
/// `TypeError` naming the argument, as for any `str` argument.
pub struct Parsed<T>(pub T);

impl<'py, T: FromStr<Err = fallow_core::Error>> FromPyObject<'py> for Parsed<T> {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        let text = ob.downcast::<PyString>()?.to_cow()?;
        Ok(Parsed(text.parse().map_err(PyFallowError::from)?))
    }
}

/// A size or a duration as given: a number or a text with a unit, read by
/// [`Quantity`] with the argument's name. Never fails: what is neither is
/// refused by the core, naming the argument.
pub struct Value(pub Quantity);

impl<'py> FromPyObject<'py> for Value {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        let q = if let Ok(s) = ob.downcast::<PyString>() {
            Quantity::Text(s.to_cow()?.into_owned())
        } else if let Ok(n) = ob.extract::<u64>() {
            Quantity::Int(n)
        } else if let Ok(x) = ob.extract::<f64>() {
            Quantity::Float(x)
        } else {
            Quantity::Other(ob.repr().map_or_else(|_| "?".into(), |r| r.to_string()))
        };
        Ok(Value(q))
    }
}

/// A device as the caller named it: an id (`0`) or an MSR `host:disk`
/// name (`"hm:0"`), as `--device` takes it; resolved against the trace by
/// [`Trace::resolve_device`].
#[derive(Debug, Clone)]
pub struct DeviceArg(pub DeviceSel);

impl<'py> FromPyObject<'py> for DeviceArg {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        if ob.is_instance_of::<PyString>() {
            return Ok(DeviceArg(ob.extract::<Parsed<DeviceSel>>()?.0));
        }
        // ints and numpy integers (through __index__), not floats
        let int = ob.is_instance_of::<PyInt>() || ob.hasattr("__index__")?;
        let err = match ob.extract::<i64>().ok().filter(|_| int) {
            Some(n) => match u32::try_from(n) {
                Ok(id) => return Ok(DeviceArg(DeviceSel::Id(id))),
                Err(_) => format!("{n} is not a device id (0 to {})", u32::MAX),
            },
            None => format!(
                "{} is neither a device id (an int) nor an MSR `host:disk` name (a str such as \"hm:0\")",
                ob.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ),
        };
        Err(parameter("device", err).into())
    }
}

/// The id of the device `arg` names in `trace`, if one is named.
pub fn resolve(trace: &Trace, arg: Option<&DeviceArg>) -> Result<Option<u32>> {
    Ok(arg.map(|a| trace.resolve_device(&a.0)).transpose()?)
}
