//! `energy`: disk spin-down and SARD in simulation (`fallow energy`),
//! returning plain data: the core's [`fallow_core::energy::EnergyReport`],
//! serialised as `fallow energy --json` prints it. `fallow.energy` wraps
//! it with a result object and a pandas frame.
//!
//! The arguments convert into the core's [`Options`], which holds their
//! defaults, ranges and rules (`peer_prob` needs `peers`, …); here only the
//! input is read and described.

use crate::conversion::{resolve, DeviceArg, Value};
use crate::errors::{interruptible, parameter, without_gil, Result};
use crate::json::to_python;
use crate::page::Page;
use crate::trace::PyTrace;
use fallow_core::energy::{busiest_device, power_overrides, Options, PowerFile, PowerModel};
use fallow_core::trace::ReadOptions;
use fallow_core::Trace;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// One or several of `T` (`"timeout"` or `["timeout", "oracle"]`), or a
/// `ParameterError` naming the argument with `hint`.
fn one_or_many<'py, T: FromPyObject<'py>>(
    v: Option<Bound<'py, PyAny>>,
    name: &str,
    hint: &str,
) -> Result<Option<Vec<T>>> {
    let Some(v) = v else { return Ok(None) };
    if let Ok(one) = v.extract::<T>() {
        return Ok(Some(vec![one]));
    }
    Ok(Some(
        v.extract::<Vec<T>>().map_err(|_| parameter(name, hint))?,
    ))
}

/// A power model from a TOML file (path, the device's section) or a dict
/// of overrides of the WD2500JD (the file's keys: `idle_w`, `spinup_s`, …).
fn power_arg(v: &Bound<'_, PyAny>, device: Option<u32>) -> Result<PowerModel> {
    if let Ok(d) = v.downcast::<PyDict>() {
        let pairs = d
            .iter()
            .map(|(k, val)| match k.extract::<String>() {
                Ok(k) => Ok((k, val.extract::<Value>()?.0)),
                Err(_) => Err(parameter(
                    "power",
                    "keys must be strings such as \"idle_w\"",
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        return Ok(power_overrides(&pairs)?);
    }
    let path: PathBuf = v.extract().map_err(|_| {
        parameter(
            "power",
            "must be the path of a TOML power file or a dict such as {\"idle_w\": 8.0}",
        )
    })?;
    Ok(PowerFile::read(&path)?.model(device)?)
}

/// Simulate a disk's power states under spin-down policies, alone and with
/// peers serving requests while it sleeps (SARD). Returns the plain result:
/// the JSON of `fallow energy --json`. See `fallow.energy` for the arguments.
#[pyfunction]
#[pyo3(signature = (trace, *, policy=None, device=None, local_fraction=None, peers=None, peer_prob=None, peer_prob_for=None, remote="asleep", files=false, user_data=None, service=None, power=None, net_latency=None, net_bandwidth=None, net_contention=0.2, bg_work=None, bg_size=None, bg=None, bg_wait=None, seed=fallow_core::sim::DEFAULT_SEED, html=None, overwrite=false))]
#[allow(clippy::too_many_arguments)]
pub fn energy<'py>(
    py: Python<'py>,
    trace: Bound<'py, PyAny>,
    policy: Option<Bound<'py, PyAny>>,
    device: Option<DeviceArg>,
    local_fraction: Option<Bound<'py, PyAny>>,
    peers: Option<u32>,
    peer_prob: Option<f64>,
    peer_prob_for: Option<BTreeMap<String, f64>>,
    remote: &str,
    files: bool,
    user_data: Option<String>,
    service: Option<&str>,
    power: Option<Bound<'py, PyAny>>,
    net_latency: Option<Value>,
    net_bandwidth: Option<Value>,
    net_contention: f64,
    bg_work: Option<Value>,
    bg_size: Option<Value>,
    bg: Option<String>,
    bg_wait: Option<Value>,
    seed: u64,
    html: Option<PathBuf>,
    overwrite: bool,
) -> Result<Bound<'py, PyAny>> {
    // Every argument is checked before any work, as the CLI does.
    let q = |v: Option<Value>| v.map(|v| v.0);
    let mut req = Options {
        policy: one_or_many(
            policy,
            "policy",
            "must be a spin-down policy such as \"timeout:t=10s\", a list of them, or None",
        )?,
        local_fraction: one_or_many(
            local_fraction,
            "local_fraction",
            "must be a share such as 0.01 or a list of shares such as [1, 0.1, 0.01]",
        )?,
        peers,
        peer_prob,
        peer_prob_for: peer_prob_for.map(|m| m.into_iter().collect()),
        remote: Some(remote.into()),
        files,
        user_data,
        net_latency: q(net_latency),
        net_bandwidth: q(net_bandwidth),
        net_contention: Some(net_contention),
        bg_work: q(bg_work),
        bg_size: q(bg_size),
        bg,
        bg_wait: q(bg_wait),
        seed: Some(seed),
    }
    .request()?;
    // the spec as given, for `input.completions`
    let service_text = service.map(str::trim);
    req.service = service.map(str::parse).transpose()?;

    // The input: a Trace, or a path (a block trace, or with files=True a
    // file-level CSV, which is one disk).
    let (given, path) = match trace.extract::<PyRef<'py, PyTrace>>() {
        Ok(_) if files => {
            let hint = "files=True reads a file-level CSV: give its path, not a Trace";
            return Err(parameter("trace", hint));
        }
        Ok(t) => (Some(t), PathBuf::new()),
        Err(_) => (
            None,
            trace.extract::<PathBuf>().map_err(|_| {
                parameter(
                    "trace",
                    "must be a fallow.Trace or the path of a trace file",
                )
            })?,
        ),
    };
    let input = match &given {
        Some(t) => t.inner.report().path.clone(),
        None => path.clone(),
    };
    // the power file is an input too, when it is one
    let power_path = power.as_ref().and_then(|v| v.extract::<PathBuf>().ok());
    let inputs = [Some(input.as_path()), power_path.as_deref()];
    let page = Page::checked(html, overwrite, inputs.into_iter().flatten())?;
    if files {
        if device.is_some() {
            let hint = "applies to block traces; a file-level trace is one disk";
            return Err(parameter("device", hint));
        }
        if let Some(v) = &power {
            req.power = power_arg(v, None)?;
        }
        // Ctrl-C sets it; the study stops within a few thousand requests
        let cancel = Arc::new(AtomicBool::new(false));
        let report = interruptible(py, cancel.clone(), || {
            let r = req.run_files(&path, service_text, Some(&cancel))?;
            page.write(|p| fallow_report::energy::write(p, &r))?;
            Ok(r)
        })?;
        return to_python(py, &report);
    }
    let t: Cow<'_, Trace> = match &given {
        Some(t) => Cow::Borrowed(&t.inner),
        None => Cow::Owned(without_gil(py, || {
            fallow_core::read_trace(&path, &ReadOptions::default())
        })?),
    };
    let device = resolve(&t, device.as_ref())?.or_else(|| busiest_device(&t));
    if let Some(v) = &power {
        req.power = power_arg(v, device)?;
    }
    let id = device.unwrap_or(0);
    let cancel = Arc::new(AtomicBool::new(false));
    let report = interruptible(py, cancel.clone(), || {
        let r = req.run_block(&t, id, service_text, Some(&cancel))?;
        page.write(|p| fallow_report::energy::write(p, &r))?;
        Ok(r)
    })?;
    to_python(py, &report)
}
