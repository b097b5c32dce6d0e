//! `tune`: the most BG throughput a policy gets within an FG budget,
//! returning plain data (the JSON of `fallow tune --json` without the
//! CLI's `input` description and `reproduce` commands). `fallow.tune`
//! wraps it with result objects and pandas frames.

use crate::errors::{interruptible, parameter, Result};
use crate::json::to_python;
use crate::sim::{page_arg, request, subject, threads_arg, Kwargs};
use crate::trace::PyTrace;
use fallow_core::policy;
use fallow_core::tune::{self as tuning, Budget, SearchMode, TuneConfig};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Candidate sizes: None (the CLI's default), a spec (`"64KiB..4MiB/10"`,
/// `"64KiB,1MiB"`), bytes, or a list of bytes / sizes; parsed by the core.
fn sizes_arg(v: Option<Bound<'_, PyAny>>) -> Result<Vec<u64>> {
    let Some(v) = v else {
        return Ok(tuning::default_sizes());
    };
    let text = |i: &Bound<'_, PyAny>| {
        i.extract::<u64>()
            .map(|n| n.to_string())
            .or_else(|_| i.extract::<String>())
    };
    let many = || -> PyResult<String> {
        let items = v.extract::<Vec<Bound<'_, PyAny>>>()?;
        Ok(items
            .iter()
            .map(text)
            .collect::<PyResult<Vec<_>>>()?
            .join(","))
    };
    let spec = text(&v).or_else(|_| many()).map_err(|_| {
        let hint = "must be a range such as \"64KiB..4MiB/10\", a number of bytes, \
                    or a list of sizes such as [65536, \"1MiB\"]";
        parameter("sizes", hint)
    })?;
    Ok(tuning::parse_sizes(&spec)?)
}

/// Tune a policy's aggressiveness knob and BG request size for one or more
/// FG budgets on a trace (one device) or a synthetic workload. Returns the
/// plain result of one budget, or a list for several. See `fallow.tune`.
#[pyfunction]
#[pyo3(signature = (trace=None, policy="", budget="1ms", **options))]
pub fn tune<'py>(
    py: Python<'py>,
    trace: Option<PyRef<'py, PyTrace>>,
    policy: &str,
    budget: &str,
    options: Option<&Bound<'py, PyDict>>,
) -> Result<Bound<'py, PyAny>> {
    if policy.is_empty() {
        return Err(parameter(
            "policy",
            "give a policy such as policy=\"fixed-wait\" (see fallow.policies())",
        ));
    }
    // a bad policy, budget or size fails before any work
    policy::build(policy)?;
    let kw = Kwargs::new(options)?;
    // Ctrl-C sets it; the search stops within one batch of settings
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cfg = TuneConfig {
        budgets: Budget::parse_list(budget)?,
        sizes: sizes_arg(kw.raw("sizes")?)?,
        max_delay_ns: kw.duration_ns("max_delay")?,
        threads: threads_arg(&kw)?,
        fast: true,
        search: SearchMode::parse(&kw.get::<String>("search")?.unwrap_or_else(|| "auto".into()))?,
        auto_limit_visits: tuning::AUTO_EXACT_LIMIT_VISITS,
        cancel: Some(cancel.clone()),
    };
    let req = request(trace.as_deref(), &kw)?;
    kw.finish()?;
    let sim = req.config();
    let (t, base) = interruptible(py, cancel.clone(), || {
        let prep = req.prepare_cancellable(&cancel)?;
        let t = tuning::tune(&prep, policy, &sim, &cfg, &|_, _| {})?;
        Ok((t, tuning::baseline(&prep, &sim)?))
    })?;
    let docs = t.reports(&base);
    match docs.as_slice() {
        [one] => to_python(py, one),
        _ => to_python(py, &docs),
    }
}

/// Every policy's knob swept over its coarse ladder at one request size
/// (`bg_size`), with the non-dominated points kept: the JSON of `fallow
/// pareto --json` (a list of fronts). `policies`: names or specs (`None`:
/// every policy that can run under the BG model, as the CLI). Ctrl-C stops
/// it between settings. See `fallow.pareto`.
#[pyfunction]
#[pyo3(signature = (trace=None, policies=None, **options))]
pub fn pareto<'py>(
    py: Python<'py>,
    trace: Option<PyRef<'py, PyTrace>>,
    policies: Option<Vec<String>>,
    options: Option<&Bound<'py, PyDict>>,
) -> Result<Bound<'py, PyAny>> {
    let kw = Kwargs::new(options)?;
    let trace = trace.as_deref();
    let threads = threads_arg(&kw)?;
    let req = request(trace, &kw)?;
    let page = page_arg(trace, &kw)?;
    kw.finish()?;
    let sim = req.config();
    let names = match policies {
        Some(p) if p.is_empty() => {
            return Err(parameter(
                "policies",
                "give at least one policy, or None for every policy",
            ))
        }
        Some(p) => p,
        None => {
            let (names, skipped) = tuning::pareto::default_policies(&sim.bg_service)?;
            warn_skipped(py, &skipped)?;
            names
        }
    };
    // a bad policy fails before any work
    for p in &names {
        policy::build(p)?;
    }
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fronts = interruptible(py, cancel.clone(), || {
        let prep = req.prepare_cancellable(&cancel)?;
        let fronts = names
            .iter()
            .map(|p| {
                let progress = &|_, _| {};
                tuning::pareto::pareto_with_progress(
                    &prep,
                    p,
                    &sim,
                    sim.bg_size_bytes,
                    threads,
                    progress,
                    Some(&cancel),
                )
            })
            .collect::<fallow_core::Result<Vec<_>>>()?;
        let input = subject(trace, &req, &prep)?;
        let bg = fallow_report::describe::bg_settings(&sim);
        page.write(|p| fallow_report::pareto::write(p, &input, &bg, &fronts))?;
        Ok(fronts)
    })?;
    to_python(py, &fronts)
}

/// Every deployable policy with a knob tuned for one FG budget and ranked
/// by the BG throughput it reaches: the JSON of `fallow recommend --json`
/// without the CLI's `reproduce` commands. Ctrl-C stops it within one batch
/// of settings. See `fallow.recommend`.
#[pyfunction]
#[pyo3(signature = (trace=None, budget="1ms", **options))]
pub fn recommend<'py>(
    py: Python<'py>,
    trace: Option<PyRef<'py, PyTrace>>,
    budget: &str,
    options: Option<&Bound<'py, PyDict>>,
) -> Result<Bound<'py, PyAny>> {
    let budget: Budget = budget.parse()?;
    let kw = Kwargs::new(options)?;
    let sizes = match kw.raw("sizes")? {
        None => tuning::recommend::default_sizes(),
        given => sizes_arg(given)?,
    };
    let max_delay_ns = kw.duration_ns("max_delay")?;
    let threads = threads_arg(&kw)?;
    let search = SearchMode::parse(&kw.get::<String>("search")?.unwrap_or_else(|| "auto".into()))?;
    let req = request(trace.as_deref(), &kw)?;
    kw.finish()?;
    let sim = req.config();
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rec = interruptible(py, cancel.clone(), || {
        let prep = req.prepare_cancellable(&cancel)?;
        tuning::recommend::recommend(
            &prep,
            &sim,
            budget,
            &sizes,
            max_delay_ns,
            threads,
            search,
            &|_, _, _, _| {},
            Some(cancel.clone()),
        )
    })?;
    warn_skipped(py, &rec.skipped)?;
    to_python(py, &rec)
}

/// Candidates left out of a default line-up, as `UserWarning`s (as
/// `fallow.compare` warns).
fn warn_skipped(py: Python<'_>, skipped: &[String]) -> Result<()> {
    for why in skipped {
        py.import("warnings")?.call_method1("warn", (why,))?;
    }
    Ok(())
}
