//! `simulate`, `compare` and `policies`: the simulator and the policy
//! registry, returning plain data (the JSON of `fallow simulate` /
//! `fallow compare` / `fallow policies`). `fallow.simulate` and
//! `fallow.compare` wrap them with result objects and pandas frames.

use crate::device::DeviceArg;
use crate::errors::{parameter, to_py, without_gil};
use crate::json::to_python;
use crate::trace::{service_model, PyTrace};
use fallow_core::policy::{self, Policy};
use fallow_core::sim::{simulate as run, BgService, BgWork, Prepared, SimConfig, SimResult};
use fallow_core::tune::online::{OnlineConfig, OnlineTuner, Report, DEFAULT_WINDOW};
use fallow_core::tune::Budget;
use fallow_core::units::{parse_bytes, parse_duration_ns};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Serialize;
use std::borrow::Cow;

/// FG service of synthetic workloads when none is given (as the CLI).
const DEFAULT_WORKLOAD_SERVICE: &str = "exp:10ms";

/// A size given as bytes (int) or text (`"64KiB"`).
pub(crate) fn size_arg(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    let b = match v.extract::<u64>() {
        Ok(b) => b,
        Err(_) => parse_bytes(&v.extract::<String>().map_err(|_| {
            parameter(
                name,
                "must be a number of bytes or a size such as \"64KiB\"",
            )
        })?)
        .map_err(to_py)?,
    };
    if b == 0 {
        return Err(parameter(name, "must be at least 1 byte"));
    }
    Ok(b)
}

/// A duration given as seconds (int or float) or text (`"2ms"`), in ns.
pub(crate) fn duration_arg(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    match v.extract::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok((s * 1e9).round() as u64),
        Ok(s) => Err(parameter(
            name,
            format!("must be a non-negative duration, got {s}"),
        )),
        Err(_) => parse_duration_ns(
            &v.extract::<String>()
                .map_err(|_| parameter(name, "must be seconds or a duration such as \"2ms\""))?,
        )
        .map_err(to_py),
    }
}

/// Everything but the policy: the input and the BG settings.
pub(crate) struct Setup<'a> {
    /// The trace, or the selected device's part of it.
    trace: Option<Cow<'a, fallow_core::Trace>>,
    service: Option<ServiceModel>,
    workload: Option<SyntheticWorkload>,
    pub(crate) cfg: SimConfig,
}

impl<'a> Setup<'a> {
    /// Read every argument, so a bad one fails before any work.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        trace: Option<&'a PyTrace>,
        device: Option<DeviceArg>,
        service: Option<&str>,
        workload: Option<&str>,
        arrival_rate: Option<f64>,
        utilization: Option<f64>,
        requests: usize,
        request_size: &Bound<'_, PyAny>,
        write_fraction: f64,
        bg: &str,
        bg_size: &Bound<'_, PyAny>,
        bg_work: &str,
        switch_penalty: &Bound<'_, PyAny>,
        seed: u64,
    ) -> PyResult<Setup<'a>> {
        let cfg = SimConfig {
            bg_service: bg.parse::<BgService>().map_err(to_py)?,
            bg_work: bg_work.parse::<BgWork>().map_err(to_py)?,
            bg_size_bytes: size_arg("bg_size", bg_size)?,
            switch_penalty_ns: duration_arg("switch_penalty", switch_penalty)?,
            seed,
        };
        let service = service_model(service)?;
        match (trace, workload) {
            (Some(_), Some(_)) => Err(parameter(
                "workload",
                "give a trace or a workload, not both",
            )),
            (None, None) => Err(parameter(
                "workload",
                "give a trace, or a synthetic workload such as workload=\"poisson\"",
            )),
            (Some(t), None) => {
                let t = &t.inner;
                let selected = match crate::device::resolve(t, device.as_ref())? {
                    Some(id) => Cow::Owned(t.select_device(id).map_err(to_py)?),
                    None if t.devices().len() > 1 => return Err(crate::device::choose_one(t)),
                    None => Cow::Borrowed(t),
                };
                Ok(Setup {
                    trace: Some(selected),
                    service,
                    workload: None,
                    cfg,
                })
            }
            (None, Some(spec)) => {
                if !(0.0..=1.0).contains(&write_fraction) {
                    return Err(parameter(
                        "write_fraction",
                        format!("must be between 0 and 1, got {write_fraction}"),
                    ));
                }
                let service = match service {
                    Some(s) => s,
                    None => DEFAULT_WORKLOAD_SERVICE.parse().map_err(to_py)?,
                };
                let size = size_arg("request_size", request_size)?;
                let arrivals =
                    ArrivalProcess::from_spec(spec, arrival_rate, utilization, &service, size)
                        .map_err(to_py)?;
                Ok(Setup {
                    trace: None,
                    service: None,
                    workload: Some(SyntheticWorkload {
                        arrivals,
                        requests,
                        service,
                        request_size_bytes: u32::try_from(size)
                            .map_err(|_| parameter("request_size", "is too large"))?,
                        capacity_bytes: 1_000_000_000_000,
                        write_fraction,
                        seed,
                    }),
                    cfg,
                })
            }
        }
    }

    /// Generate or model the FG requests and prepare them (GIL released by the caller).
    pub(crate) fn prepare(&self) -> fallow_core::Result<Prepared> {
        match (&self.trace, &self.workload) {
            (Some(t), _) => Prepared::new(t, self.service.as_ref(), self.cfg.seed),
            (None, Some(w)) => Prepared::new(&w.generate()?, None, self.cfg.seed),
            (None, None) => unreachable!("Setup::new checks"),
        }
    }
}

/// A result with the spec it was run with (the JSON of `fallow compare`),
/// and the knob's trajectory of a re-tuned run.
#[derive(Serialize)]
struct Run<'a> {
    spec: &'a str,
    #[serde(flatten)]
    result: &'a SimResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    retune: Option<Report>,
}

pub(crate) fn build(spec: &str) -> PyResult<Box<dyn Policy>> {
    policy::build(spec).map_err(to_py)
}

/// Simulate one policy over a trace (one device) or a synthetic workload.
/// Returns the plain result (the keys of `fallow simulate --json`, plus
/// `spec`). See `fallow.simulate` for the arguments.
#[pyfunction]
#[pyo3(signature = (trace=None, policy="", *, device=None, service=None, workload=None, arrival_rate=None, utilization=None, requests=100_000, request_size=None, write_fraction=0.5, bg="exp:10ms", bg_size=None, bg_work="endless", switch_penalty=None, seed=1, retune=None, retune_window=DEFAULT_WINDOW, retune_every=None))]
#[allow(clippy::too_many_arguments)]
pub fn simulate<'py>(
    py: Python<'py>,
    trace: Option<PyRef<'py, PyTrace>>,
    policy: &str,
    device: Option<DeviceArg>,
    service: Option<&str>,
    workload: Option<&str>,
    arrival_rate: Option<f64>,
    utilization: Option<f64>,
    requests: usize,
    request_size: Option<Bound<'py, PyAny>>,
    write_fraction: f64,
    bg: &str,
    bg_size: Option<Bound<'py, PyAny>>,
    bg_work: &str,
    switch_penalty: Option<Bound<'py, PyAny>>,
    seed: u64,
    retune: Option<&str>,
    retune_window: usize,
    retune_every: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    if policy.is_empty() {
        return Err(parameter(
            "policy",
            "give a policy such as policy=\"fixed-wait:t=100ms\" (see fallow.policies())",
        ));
    }
    let mut pol = build(policy)?;
    let d = Defaults::new(py);
    let setup = Setup::new(
        trace.as_deref(),
        device,
        service,
        workload,
        arrival_rate,
        utilization,
        requests,
        request_size.as_ref().unwrap_or(&d.request_size),
        write_fraction,
        bg,
        bg_size.as_ref().unwrap_or(&d.bg_size),
        bg_work,
        switch_penalty.as_ref().unwrap_or(&d.zero),
        seed,
    )?;
    let mut tuner = match retune {
        Some(budget) => Some(
            OnlineTuner::new(
                policy,
                OnlineConfig {
                    budget: budget.parse::<Budget>().map_err(to_py)?,
                    window: retune_window,
                    every: retune_every.unwrap_or((retune_window / 4).max(1)),
                    switch_penalty_ns: setup.cfg.switch_penalty_ns,
                    seed,
                },
            )
            .map_err(to_py)?,
        ),
        None => None,
    };
    let r = without_gil(py, || {
        let prep = setup.prepare()?;
        match &mut tuner {
            Some(t) => run(&prep, t, &setup.cfg),
            None => run(&prep, pol.as_mut(), &setup.cfg),
        }
    })?;
    to_python(
        py,
        &Run {
            spec: policy,
            result: &r,
            retune: tuner.as_ref().map(OnlineTuner::report),
        },
    )
}

/// Run several policies on one input, prepared once; returns a list of
/// plain results in the order given (default: every registered policy with
/// default parameters, clairvoyant references last). See `fallow.compare`.
#[pyfunction]
#[pyo3(signature = (trace=None, policies=None, *, device=None, service=None, workload=None, arrival_rate=None, utilization=None, requests=100_000, request_size=None, write_fraction=0.5, bg="exp:10ms", bg_size=None, bg_work="endless", switch_penalty=None, seed=1))]
#[allow(clippy::too_many_arguments)]
pub fn compare<'py>(
    py: Python<'py>,
    trace: Option<PyRef<'py, PyTrace>>,
    policies: Option<Vec<String>>,
    device: Option<DeviceArg>,
    service: Option<&str>,
    workload: Option<&str>,
    arrival_rate: Option<f64>,
    utilization: Option<f64>,
    requests: usize,
    request_size: Option<Bound<'py, PyAny>>,
    write_fraction: f64,
    bg: &str,
    bg_size: Option<Bound<'py, PyAny>>,
    bg_work: &str,
    switch_penalty: Option<Bound<'py, PyAny>>,
    seed: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let default_lineup = policies.is_none();
    let specs = policies.unwrap_or_else(|| {
        let reg = policy::registry();
        reg.iter()
            .filter(|e| !e.clairvoyant)
            .chain(reg.iter().filter(|e| e.clairvoyant))
            .map(|e| e.name.to_string())
            .collect()
    });
    let built = specs
        .iter()
        .map(|s| build(s))
        .collect::<PyResult<Vec<_>>>()?;
    let d = Defaults::new(py);
    let setup = Setup::new(
        trace.as_deref(),
        device,
        service,
        workload,
        arrival_rate,
        utilization,
        requests,
        request_size.as_ref().unwrap_or(&d.request_size),
        write_fraction,
        bg,
        bg_size.as_ref().unwrap_or(&d.bg_size),
        bg_work,
        switch_penalty.as_ref().unwrap_or(&d.zero),
        seed,
    )?;
    // as the CLI's compare: the default line-up leaves out a policy that
    // chooses its own request sizes under a BG model that does not charge
    // for size (the core's check), with a warning saying why; one named
    // explicitly fails in `run`
    let mut specs = specs;
    let mut built = built;
    if default_lineup {
        let mut keep = Vec::with_capacity(specs.len());
        for (spec, p) in specs.into_iter().zip(built) {
            let check = if p.chooses_size() {
                fallow_core::sim::check_sizes(&setup.cfg.bg_service, Some(p.name()), 1)
            } else {
                Ok(())
            };
            match check {
                Ok(()) => keep.push((spec, p)),
                Err(e) => {
                    py.import("warnings")?
                        .call_method1("warn", (format!("skipping {spec}: {e}"),))?;
                }
            }
        }
        (specs, built) = keep.into_iter().unzip();
    }
    let results = without_gil(py, || {
        let prep = setup.prepare()?;
        built
            .iter_mut()
            .map(|p| run(&prep, p.as_mut(), &setup.cfg))
            .collect::<fallow_core::Result<Vec<_>>>()
    })?;
    let runs: Vec<Run<'_>> = specs
        .iter()
        .zip(&results)
        .map(|(spec, result)| Run {
            spec,
            result,
            retune: None,
        })
        .collect();
    to_python(py, &runs)
}

/// The policy registry: a list of dicts with `name`, `summary`, `params`
/// and `clairvoyant` (the JSON of `fallow policies`).
#[pyfunction]
pub fn policies(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    policy::registry()
        .iter()
        .map(|e| {
            let d = PyDict::new(py);
            d.set_item("name", e.name)?;
            d.set_item("summary", e.summary)?;
            d.set_item("params", e.params)?;
            d.set_item("clairvoyant", e.clairvoyant)?;
            Ok(d)
        })
        .collect()
}

/// Default values of the size and duration arguments, as Python objects.
pub(crate) struct Defaults<'py> {
    pub(crate) request_size: Bound<'py, PyAny>,
    pub(crate) bg_size: Bound<'py, PyAny>,
    pub(crate) zero: Bound<'py, PyAny>,
}

impl<'py> Defaults<'py> {
    pub(crate) fn new(py: Python<'py>) -> Self {
        Defaults {
            request_size: 4096u64.into_pyobject(py).expect("int").into_any(),
            bg_size: 65536u64.into_pyobject(py).expect("int").into_any(),
            zero: 0u64.into_pyobject(py).expect("int").into_any(),
        }
    }
}
