//! `tune`: the most BG throughput a policy gets within an FG budget,
//! returning plain data (the JSON of `fallow tune --json` without the
//! CLI's `input` description and `reproduce` commands). `fallow.tune`
//! wraps it with result objects and pandas frames.

use crate::errors::{interruptible, parameter, to_py};
use crate::json::to_python;
use crate::sim::{build, duration_arg, Defaults, Setup};
use crate::trace::PyTrace;
use fallow_core::tune::{
    self as tuning, Budget, Choice, KnobInfo, SearchMode, SizeRow, TuneConfig,
};
use pyo3::prelude::*;
use serde::Serialize;

/// The answer for one budget (the JSON of `fallow tune --json` for one budget).
#[derive(Serialize)]
struct Doc<'a> {
    policy: &'a str,
    knob: &'a Option<KnobInfo>,
    max_delay_s: Option<f64>,
    budget: &'a Budget,
    budget_text: &'a str,
    best: Option<&'a Choice>,
    sizes: &'a [SizeRow],
    baseline: &'a Choice,
    simulations: u64,
    guarantee: tuning::Guarantee,
    search: tuning::SearchMode,
}

/// Candidate sizes: None (the CLI's default), a spec (`"64KiB..4MiB/10"`,
/// `"64KiB,1MiB"`), bytes, or a list of bytes / sizes; parsed by the core.
fn sizes_arg(v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<u64>> {
    let Some(v) = v else {
        return Ok(tuning::default_sizes());
    };
    let item = |i: &Bound<'_, PyAny>| {
        i.extract::<u64>()
            .map(|n| n.to_string())
            .or_else(|_| i.extract::<String>())
    };
    let text = if let Ok(s) = v.extract::<String>() {
        s
    } else if let Ok(n) = v.extract::<u64>() {
        n.to_string()
    } else {
        v.extract::<Vec<Bound<'_, PyAny>>>()
            .and_then(|items| items.iter().map(item).collect::<PyResult<Vec<_>>>())
            .map_err(|_| {
                parameter(
                    "sizes",
                    "must be a range such as \"64KiB..4MiB/10\", a number of bytes, \
                     or a list of sizes such as [65536, \"1MiB\"]",
                )
            })?
            .join(",")
    };
    tuning::parse_sizes(&text).map_err(to_py)
}

/// Tune a policy's aggressiveness knob and BG request size for one or more
/// FG budgets on a trace (one device) or a synthetic workload. Returns the
/// plain result of one budget, or a list for several. See `fallow.tune`.
#[pyfunction]
#[pyo3(signature = (trace=None, policy="", budget="1ms", *, sizes=None, max_delay=None, threads=None, search="auto", device=None, service=None, workload=None, arrival_rate=None, utilization=None, requests=100_000, request_size=None, write_fraction=0.5, bg="exp:10ms", bg_size=None, bg_work="endless", switch_penalty=None, seed=1))]
#[allow(clippy::too_many_arguments)]
pub fn tune<'py>(
    py: Python<'py>,
    trace: Option<PyRef<'py, PyTrace>>,
    policy: &str,
    budget: &str,
    sizes: Option<Bound<'py, PyAny>>,
    max_delay: Option<Bound<'py, PyAny>>,
    threads: Option<usize>,
    search: &str,
    device: Option<crate::device::DeviceArg>,
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
    if policy.is_empty() {
        return Err(parameter(
            "policy",
            "give a policy such as policy=\"fixed-wait\" (see fallow.policies())",
        ));
    }
    // a bad policy, budget or size fails before any work
    build(policy)?;
    // Ctrl-C sets it; the search stops within one batch of settings
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cfg = TuneConfig {
        budgets: Budget::parse_list(budget).map_err(to_py)?,
        sizes: sizes_arg(sizes.as_ref())?,
        max_delay_ns: max_delay
            .as_ref()
            .map(|v| duration_arg("max_delay", v))
            .transpose()?,
        threads: match threads {
            None => tuning::default_threads(),
            Some(0) => return Err(parameter("threads", "must be at least 1")),
            Some(n) => n,
        },
        fast: true,
        search: SearchMode::parse(search).map_err(to_py)?,
        auto_limit_visits: tuning::AUTO_EXACT_LIMIT_VISITS,
        cancel: Some(cancel.clone()),
    };
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
    let (t, base) = interruptible(py, cancel, || {
        let prep = setup.prepare()?;
        let t = tuning::tune(&prep, policy, &setup.cfg, &cfg, &|_, _| {})?;
        Ok((t, tuning::baseline(&prep, &setup.cfg)?))
    })?;
    let docs: Vec<Doc<'_>> = t
        .budgets
        .iter()
        .map(|b| Doc {
            policy: &t.policy,
            knob: &t.knob,
            max_delay_s: t.max_delay_s,
            budget: &b.budget,
            budget_text: &b.budget_text,
            best: b.best.as_ref(),
            sizes: &b.sizes,
            baseline: &base,
            simulations: t.simulations,
            guarantee: t.guarantee,
            search: t.search,
        })
        .collect();
    match docs.as_slice() {
        [one] => to_python(py, one),
        _ => to_python(py, &docs),
    }
}
