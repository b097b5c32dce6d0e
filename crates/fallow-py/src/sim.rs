//! `simulate`, `compare` and `policies`: the simulator and the policy
//! registry, returning plain data (the JSON of `fallow simulate` /
//! `fallow compare` / `fallow policies`). `fallow.simulate` and
//! `fallow.compare` wrap them with result objects and pandas frames (and
//! give the keyword arguments their explicit signatures).
//!
//! The input and BG keyword arguments convert once, in [`request`], into
//! the core's [`sim::Request`]: its defaults and checks are the CLI's too.

use crate::conversion::{DeviceArg, Value};
use crate::errors::{interruptible, parameter, Result};
use crate::json::to_python;
use crate::page::Page;
use crate::trace::PyTrace;
use fallow_core::policy;
use fallow_core::sim::{self, simulate_cancellable as run, Prepared, SimResult, SourcedPart};
use fallow_core::trace::DEFAULT_GAP_NS;
use fallow_core::tune::online::{OnlineConfig, Report, Runner};
use fallow_core::Trace;
use fallow_report::describe::{describe_device, trace_title, Subject};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Serialize;
use std::borrow::Cow;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The keyword arguments of one call, taken one by one; [`Kwargs::finish`]
/// refuses any left over (as Python does for an unknown keyword).
pub(crate) struct Kwargs<'py>(Option<Bound<'py, PyDict>>);

/// `threads=`: None (the core's default: one per core, or
/// `FALLOW_THREADS`), else at least 1.
pub(crate) fn threads_arg(kw: &Kwargs<'_>) -> Result<usize> {
    match kw.get::<usize>("threads")? {
        None => Ok(fallow_core::tune::default_threads()),
        Some(0) => Err(parameter("threads", "must be at least 1")),
        Some(n) => Ok(n),
    }
}

impl<'py> Kwargs<'py> {
    pub(crate) fn new(kw: Option<&Bound<'py, PyDict>>) -> Result<Self> {
        // a copy: the caller's dict is not ours to empty
        Ok(Kwargs(kw.map(|d| d.copy()).transpose()?))
    }

    /// The argument `name`, if given and not None.
    pub(crate) fn raw(&self, name: &str) -> Result<Option<Bound<'py, PyAny>>> {
        let Some(d) = &self.0 else { return Ok(None) };
        let v = d.get_item(name)?;
        d.del_item(name).ok();
        Ok(v.filter(|v| !v.is_none()))
    }

    /// The argument `name` converted to `T`, a wrong type named by the argument.
    pub(crate) fn get<T: FromPyObject<'py>>(&self, name: &str) -> Result<Option<T>> {
        self.raw(name)?
            .map(|v| {
                v.extract::<T>()
                    .map_err(|e| parameter(name, format!("{}", e.value(v.py()))))
            })
            .transpose()
    }

    /// A text argument parsed by the core (`bg="exp:5ms"`), its error the core's.
    pub(crate) fn parsed<T>(&self, name: &str) -> Result<Option<T>>
    where
        T: std::str::FromStr<Err = fallow_core::Error>,
    {
        Ok(match self.get::<String>(name)? {
            Some(s) => Some(s.parse::<T>()?),
            None => None,
        })
    }

    /// A size argument (bytes or `"64KiB"`), named by the argument.
    pub(crate) fn size(&self, name: &str) -> Result<Option<u64>> {
        let v = self.get::<Value>(name)?;
        Ok(v.map(|v| v.0.bytes(name)).transpose()?)
    }

    /// A duration argument (seconds or `"2ms"`) in ns, named by the argument.
    pub(crate) fn duration_ns(&self, name: &str) -> Result<Option<u64>> {
        let v = self.get::<Value>(name)?;
        Ok(v.map(|v| v.0.duration_ns(name)).transpose()?)
    }

    /// Refuse keywords nobody took.
    pub(crate) fn finish(self) -> Result<()> {
        match self.0.as_ref().and_then(|d| d.keys().iter().next()) {
            Some(k) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "unexpected keyword argument {}",
                k.repr()?
            ))
            .into()),
            None => Ok(()),
        }
    }
}

/// The core request from the input and BG keyword arguments (`device`,
/// `service`, `workload`, `arrival_rate`, `utilization`, `requests`,
/// `request_size`, `write_fraction`, `bg`, `bg_size`, `bg_work`,
/// `switch_penalty`, `seed`); what is not given keeps the core's default.
pub(crate) fn request<'a>(trace: Option<&'a PyTrace>, kw: &Kwargs<'_>) -> Result<sim::Request<'a>> {
    let device: Option<DeviceArg> = kw.get("device")?;
    let spec: Option<String> = kw.get("workload")?;
    // read even for a trace, where they do not apply (as before)
    let mut w = sim::Workload::new(spec.clone().unwrap_or_default());
    w.arrival_rate_per_s = kw.get("arrival_rate")?;
    w.utilization = kw.get("utilization")?;
    w.requests = kw.get("requests")?.unwrap_or(w.requests);
    w.request_size_bytes = kw.size("request_size")?.unwrap_or(w.request_size_bytes);
    w.write_fraction = kw.get("write_fraction")?.unwrap_or(w.write_fraction);
    let input = match (trace, spec) {
        (Some(_), Some(_)) => {
            return Err(parameter(
                "workload",
                "give a trace or a workload, not both",
            ))
        }
        (None, None) => {
            return Err(parameter(
                "workload",
                "give a trace, or a synthetic workload such as workload=\"poisson\"",
            ))
        }
        (Some(t), None) => {
            let t = &t.inner;
            sim::Input::Trace(match t.sim_device(device.as_ref().map(|d| &d.0))? {
                Some(id) => Cow::Owned(t.select_device(id)?),
                None => Cow::Borrowed(t),
            })
        }
        (None, Some(_)) => sim::Input::Workload(w),
    };
    let mut req = sim::Request::new(input);
    req.service = kw.parsed("service")?;
    req.bg_service = kw.parsed("bg")?.unwrap_or(req.bg_service);
    req.bg_work = kw.parsed("bg_work")?.unwrap_or(req.bg_work);
    req.bg_size_bytes = kw.size("bg_size")?.unwrap_or(req.bg_size_bytes);
    let penalty = kw.duration_ns("switch_penalty")?;
    req.switch_penalty_ns = penalty.unwrap_or(req.switch_penalty_ns);
    req.seed = kw.get("seed")?.unwrap_or(req.seed);
    req.validate()?;
    Ok(req)
}

/// `html=` and `overwrite=`, checked against the trace's file (if it has
/// one) before any work.
pub(crate) fn page_arg(trace: Option<&PyTrace>, kw: &Kwargs<'_>) -> Result<Page> {
    let html = kw.get::<std::path::PathBuf>("html")?;
    let overwrite = kw.get::<bool>("overwrite")?.unwrap_or(false);
    let input = trace.map(|t| t.inner.report().path.as_path());
    Page::checked(html, overwrite, input)
}

/// The input of `req` as a page describes it: the words of `fallow compare
/// --html`'s header for the same trace (`trace`, before its device was
/// selected) or workload.
pub(crate) fn subject(
    trace: Option<&PyTrace>,
    req: &sim::Request<'_>,
    prep: &Prepared,
) -> fallow_core::Result<Subject> {
    Ok(match (&req.input, trace) {
        (sim::Input::Workload(w), _) => {
            let s = req.synthetic()?.expect("a workload input");
            Subject::of_workload(prep, w, &s.arrivals, &s.service, req.seed)
        }
        (sim::Input::Trace(one), Some(t)) => {
            let (t, id) = (&t.inner, one.devices().first().map_or(0, |d| d.id));
            let title = trace_title(&t.report().path);
            let device = describe_device(&t.devices(), id);
            Subject::of_trace(prep, title, device, req.service.as_ref(), req.seed)
        }
        (sim::Input::Trace(_), None) => unreachable!("a trace input comes from a trace"),
    })
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
    /// `then=`: each part's figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    parts: Option<Vec<SourcedPart<'a>>>,
}

/// Simulate one policy over a trace (one device) or a synthetic workload.
/// Returns the plain result (the keys of `fallow simulate --json`, plus
/// `spec`). The keyword arguments: those of [`request`], `retune`,
/// `retune_window`, `retune_every`, and `then`, `then_device`, `gap` (a
/// second trace played after the first, `fallow simulate --then`); see
/// `fallow.simulate`.
#[pyfunction]
#[pyo3(signature = (trace=None, policy="", **options))]
pub fn simulate<'py>(
    py: Python<'py>,
    trace: Option<PyRef<'py, PyTrace>>,
    policy: &str,
    options: Option<&Bound<'py, PyDict>>,
) -> Result<Bound<'py, PyAny>> {
    if policy.is_empty() {
        return Err(parameter(
            "policy",
            "give a policy such as policy=\"fixed-wait:t=100ms\" (see fallow.policies())",
        ));
    }
    let kw = Kwargs::new(options)?;
    let mut req = request(trace.as_deref(), &kw)?;
    let budget = kw.parsed("retune")?;
    let window = kw.get("retune_window")?;
    let every = kw.get("retune_every")?;
    let then = then_arg(&kw, &req)?;
    kw.finish()?;
    let cfg = req.config();
    // the policy as run, and (with `then`) a fresh one built the same way
    // for the first part alone (`sim::simulate_split`)
    let retune = budget.map(|b| OnlineConfig::for_run(b, window, every, &cfg));
    let mut pol = Runner::new(policy, retune.clone())?;
    let mut fresh = then
        .as_ref()
        .map(|_| Runner::new(policy, retune))
        .transpose()?;
    let first_requests = match (&then, &req.input) {
        (Some(t), sim::Input::Trace(first)) => {
            let n = first.len();
            req.input = sim::Input::Trace(Cow::Owned(Trace::then(first, &t.trace, t.gap_ns)?));
            Some(n)
        }
        _ => None,
    };
    // Ctrl-C sets it; the run stops within a few thousand busy periods
    let cancel = Arc::new(AtomicBool::new(false));
    let (r, parts) = interruptible(py, cancel.clone(), || {
        let prep = req.prepare_cancellable(&cancel)?;
        match (first_requests, fresh.as_mut()) {
            (Some(n), Some(fresh)) => {
                let (p, f) = (pol.policy(), fresh.policy());
                let split = sim::simulate_split_cancellable(&prep, n, p, f, &cfg, &cancel)?;
                Ok((split.whole, Some(split.parts)))
            }
            _ => run(&prep, pol.policy(), &cfg, &cancel).map(|r| (r, None)),
        }
    })?;
    let first_source = trace
        .as_deref()
        .map_or(String::new(), |t| trace_source(&t.inner));
    to_python(
        py,
        &Run {
            spec: policy,
            result: &r,
            retune: pol.report(),
            parts: parts
                .as_ref()
                .zip(then.as_ref())
                .map(|(p, t)| SourcedPart::pair(p, [first_source, t.source.clone()])),
        },
    )
}

/// How a part's `source` names the trace it came from: its file, as the
/// CLI names it.
fn trace_source(t: &Trace) -> String {
    t.report().path.display().to_string()
}

/// `then=`: the second trace (one device's requests) and its source.
struct Then {
    trace: fallow_core::Trace,
    source: String,
    gap_ns: u64,
}

/// `then=` (a `fallow.Trace`), `then_device=` and `gap=` (default 1 s),
/// as `fallow simulate --then TRACE2 --then-device ID --gap DURATION`.
fn then_arg(kw: &Kwargs<'_>, req: &sim::Request<'_>) -> Result<Option<Then>> {
    let then: Option<PyRef<'_, PyTrace>> = kw.get("then")?;
    let device: Option<DeviceArg> = kw.get("then_device")?;
    let gap_ns = kw.duration_ns("gap")?;
    let Some(t) = then else {
        for (name, given) in [("then_device", device.is_some()), ("gap", gap_ns.is_some())] {
            if given {
                return Err(parameter(name, "goes with then= (a second trace)"));
            }
        }
        return Ok(None);
    };
    if !matches!(req.input, sim::Input::Trace(_)) {
        return Err(parameter(
            "then",
            "follows a trace, not a synthetic workload",
        ));
    }
    let t = &t.inner;
    let trace = t
        .one_device(t.sim_device(device.as_ref().map(|d| &d.0))?)?
        .into_owned();
    Ok(Some(Then {
        trace,
        source: trace_source(t),
        gap_ns: gap_ns.unwrap_or(DEFAULT_GAP_NS),
    }))
}

/// Run several policies on one input, prepared once; returns a list of
/// plain results in the order given (default: every registered policy with
/// default parameters, clairvoyant references last). The keyword arguments
/// are those of [`request`]; see `fallow.compare`.
#[pyfunction]
#[pyo3(signature = (trace=None, policies=None, **options))]
pub fn compare<'py>(
    py: Python<'py>,
    trace: Option<PyRef<'py, PyTrace>>,
    policies: Option<Vec<String>>,
    options: Option<&Bound<'py, PyDict>>,
) -> Result<Bound<'py, PyAny>> {
    let kw = Kwargs::new(options)?;
    let trace = trace.as_deref();
    let req = request(trace, &kw)?;
    let threads = threads_arg(&kw)?;
    let page = page_arg(trace, &kw)?;
    kw.finish()?;
    let cfg = req.config();
    let lineup = sim::lineup(policies, &cfg.bg_service)?;
    for why in &lineup.skipped {
        py.import("warnings")?.call_method1("warn", (why,))?;
    }
    let cancel = Arc::new(AtomicBool::new(false));
    // side by side, as `fallow compare` runs them (the core's one runner)
    let results = interruptible(py, cancel.clone(), || {
        let prep = req.prepare_cancellable(&cancel)?;
        let runs = sim::run_lineup(
            &prep,
            lineup.policies,
            &cfg,
            threads,
            Some(&cancel),
            &|_| {},
        )
        .into_iter()
        .map(|(spec, r)| r.map(|r| (spec, r)))
        .collect::<fallow_core::Result<Vec<_>>>()?;
        let input = subject(trace, &req, &prep)?;
        let bg = fallow_report::describe::bg_settings(&cfg);
        page.write(|p| fallow_report::compare::write(p, &input, &bg, &runs))?;
        Ok(runs)
    })?;
    let runs: Vec<Run<'_>> = results
        .iter()
        .map(|(spec, result)| Run {
            spec,
            result,
            retune: None,
            parts: None,
        })
        .collect();
    to_python(py, &runs)
}

/// One policy of the registry, as `fallow policies` lists it: a typed,
/// read-only result (`to_dict()` for frames).
#[pyclass(module = "fallow._fallow", frozen, get_all)]
#[derive(Serialize)]
pub struct PolicyInfo {
    /// Registry name (`fixed-wait`).
    name: String,
    /// One line on what it does.
    summary: String,
    /// Its parameters with units and defaults.
    params: String,
    /// True for references that see the future (upper bounds).
    clairvoyant: bool,
}

#[pymethods]
impl PolicyInfo {
    /// The fields as a dict: `name`, `summary`, `params`, `clairvoyant`.
    fn to_dict<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    fn __repr__(&self) -> String {
        format!("<fallow.PolicyInfo {}: {}>", self.name, self.summary)
    }
}

/// The policy registry, in its order.
#[pyfunction]
pub fn policies() -> Vec<PolicyInfo> {
    let info = |e: &policy::Entry| PolicyInfo {
        name: e.name.into(),
        summary: e.summary.into(),
        params: e.params_help(),
        clairvoyant: e.clairvoyant,
    };
    policy::registry().iter().map(info).collect()
}

/// The core's defaults of the keyword arguments, for the Python layer's
/// docs and signatures (one definition: `fallow_core::sim`).
#[pyfunction]
pub fn defaults(py: Python<'_>) -> Result<Bound<'_, PyAny>> {
    to_python(py, &sim::Defaults::default())
}
