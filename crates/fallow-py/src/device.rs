//! The `device=` argument: an id (`0`) or an MSR `host:disk` name
//! (`"hm:0"`), as `--device` takes it on the command line. Only converted
//! here: the name is parsed by the core's [`DeviceSel`] and resolved
//! against the trace by [`fallow_core::Trace::resolve_device`].

use crate::errors::{parameter, to_py};
use fallow_core::trace::DeviceSel;
use fallow_core::Trace;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};

/// A device as the caller named it.
#[derive(Debug, Clone)]
pub struct DeviceArg(pub DeviceSel);

impl<'py> FromPyObject<'py> for DeviceArg {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(s) = ob.downcast::<PyString>() {
            return s
                .to_cow()?
                .parse::<DeviceSel>()
                .map(DeviceArg)
                .map_err(to_py);
        }
        // ints and numpy integers (through __index__)
        let int = ob.downcast::<PyInt>().is_ok() || ob.hasattr("__index__")?;
        match ob.extract::<i64>().ok().filter(|_| int) {
            Some(n) => u32::try_from(n).map(|id| DeviceArg(DeviceSel::Id(id))).map_err(|_| {
                parameter(
                    "device",
                    format!("{n} is not a device id (0 to {})", u32::MAX),
                )
            }),
            None => Err(parameter(
                "device",
                format!(
                    "{} is neither a device id (an int) nor an MSR `host:disk` name (a str such as \"hm:0\")",
                    ob.repr().map_or_else(|_| "?".into(), |r| r.to_string())
                ),
            )),
        }
    }
}

/// The id of the device `arg` names in `trace`, if one is named.
pub fn resolve(trace: &Trace, arg: Option<&DeviceArg>) -> PyResult<Option<u32>> {
    arg.map(|a| trace.resolve_device(&a.0).map_err(to_py))
        .transpose()
}

/// "the trace holds N devices (…); choose one with device=", naming MSR
/// devices `host:disk` as `Trace.devices()` does.
pub fn choose_one(trace: &Trace) -> PyErr {
    let devices = trace.devices();
    let names: Vec<String> = devices
        .iter()
        .map(|d| d.name.clone().unwrap_or_else(|| d.id.to_string()))
        .collect();
    parameter(
        "device",
        format!(
            "the trace holds {} devices ({}); choose one with device=",
            devices.len(),
            names.join(", ")
        ),
    )
}
