//! The prepared input of the trace-driven commands (`simulate`, `compare`,
//! `tune`, `recommend`, `pareto`, `simulate --then`): the FG requests read
//! or generated from the shared input flags ([`InputArgs`]), turned into
//! busy periods ready for many runs, and described in words.

use crate::args::{BgArgs, InputArgs};
use crate::input;
use anyhow::{Context, Result};
use fallow_core::policy;
use fallow_core::sim::{self, Prepared, SimResult};
use fallow_report::describe::Subject;
pub use fallow_report::describe::{describe_device, file_name};
use serde::Serialize;

/// A prepared input and how to describe it.
pub struct Input {
    /// Busy periods and baseline response times, ready for many runs.
    pub prep: Prepared,
    /// Its title, one line on it and its FG utilisation, as pages show them.
    pub subject: Subject,
    /// The path of a trace, or the workload spec.
    pub source: String,
    /// The synthetic arrival process, exactly (parses back).
    pub arrivals: Option<String>,
}

/// Read (or generate) the FG requests and prepare them for simulation.
pub fn prepare(a: &InputArgs) -> Result<Input> {
    if let Some(spec) = &a.workload {
        return prepare_workload(a, spec);
    }
    let path = a.trace.as_ref().expect("clap requires TRACE or --workload");
    let trace = input::read(path, &a.read)?;
    let selected = input::select_device(trace, a.device.clone())?;
    prepare_trace(
        a,
        &selected.trace,
        file_name(path),
        describe_device(&selected.devices, selected.device),
        path.display().to_string(),
    )
}

/// Prepare a trace of one device (completions modelled with `--service`
/// if given), described as `title`, `device` and `source`.
pub fn prepare_trace(
    a: &InputArgs,
    trace: &fallow_core::Trace,
    title: String,
    device: String,
    source: String,
) -> Result<Input> {
    let spinner = input::spinner("preparing", trace.len());
    let prep = a
        .request(sim::Input::Trace(std::borrow::Cow::Borrowed(trace)))
        .prepare();
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let prep = prep?;
    let subject = Subject::of_trace(&prep, title, device, a.service.as_ref(), a.seed);
    Ok(Input {
        prep,
        subject,
        source,
        arrivals: None,
    })
}

fn prepare_workload(a: &InputArgs, spec: &str) -> Result<Input> {
    // the core checks the flags (errors name the parameter; `flag_of` in
    // lib.rs maps it back to the flag) and fits the arrival process
    let req = a.request(sim::Input::Workload(sim::Workload {
        arrivals: spec.to_string(),
        arrival_rate_per_s: a.arrival_rate,
        utilization: a.utilization,
        requests: a.requests,
        request_size_bytes: a.request_size,
        write_fraction: a.write_fraction,
    }));
    let workload = req.synthetic()?.expect("a workload input");
    let (arrivals, service) = (workload.arrivals, workload.service);
    let spinner = input::spinner("generating the workload", a.requests);
    let prep = req.prepare();
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let prep = prep?;
    let sim::Input::Workload(w) = &req.input else {
        unreachable!("a workload request")
    };
    let subject = Subject::of_workload(&prep, w, &arrivals, &service, a.seed);
    Ok(Input {
        prep,
        subject,
        source: spec.to_string(),
        arrivals: Some(arrivals.to_string()),
    })
}

/// Build a policy from its spec; a bad spec is the user's fault (exit 2).
pub fn build_policy(spec: &str) -> Result<Box<dyn policy::Policy>> {
    policy::build(spec).with_context(|| format!("--policy {spec}"))
}

/// What was run on what, in the JSON of `simulate` and `compare`.
#[derive(Debug, Serialize)]
pub struct InputInfo {
    /// Trace path or workload spec.
    pub source: String,
    /// One line on the input.
    pub description: String,
    /// A synthetic workload's arrival process, exactly (parses back), or null.
    pub arrivals: Option<String>,
    /// FG requests.
    pub requests: u64,
    /// FG utilisation without BG work.
    pub fg_utilization: f64,
    /// The BG settings in words.
    pub bg: String,
    /// BG request size, bytes.
    pub bg_size_bytes: u64,
    /// Switch penalty, seconds.
    pub switch_penalty_s: f64,
    /// Seed of the run.
    pub seed: u64,
}

impl InputInfo {
    /// Describe `input` run with `bg`.
    pub fn new(input: &Input, bg: &BgArgs, seed: u64) -> InputInfo {
        InputInfo {
            source: input.source.clone(),
            description: input.subject.detail.clone(),
            arrivals: input.arrivals.clone(),
            requests: input.prep.requests() as u64,
            fg_utilization: input.subject.fg_utilization,
            bg: bg.describe(),
            bg_size_bytes: bg.bg_size,
            switch_penalty_s: bg.switch_penalty as f64 / 1e9,
            seed,
        }
    }
}

/// One run: the policy as given and its result (the result's keys at the top level).
#[derive(Debug, Serialize)]
pub struct Run<'a> {
    /// The policy spec as given (`fixed-wait:t=1s`).
    pub spec: &'a str,
    /// The result.
    #[serde(flatten)]
    pub result: &'a SimResult,
}
