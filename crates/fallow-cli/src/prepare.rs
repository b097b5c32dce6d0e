//! The prepared input of the trace-driven commands (`simulate`, `compare`,
//! `tune`, `recommend`, `pareto`, `simulate --then`): the FG requests read
//! or generated from the shared input flags ([`InputArgs`]), turned into
//! busy periods ready for many runs, and described in words.

use crate::args::{BgArgs, InputArgs};
use crate::human::{bytes, count, num, pct, secs};
use crate::input;
use crate::output::describe_model;
use anyhow::{Context, Result};
use fallow_core::policy;
use fallow_core::sim::{self, Prepared, SimResult};
use fallow_core::workload::ArrivalProcess;
use serde::Serialize;

/// A prepared input and how to describe it.
pub struct Input {
    /// Busy periods and baseline response times, ready for many runs.
    pub prep: Prepared,
    /// File name, or `synthetic workload`.
    pub title: String,
    /// One line on what the input is.
    pub detail: String,
    /// The path of a trace, or the workload spec.
    pub source: String,
    /// The synthetic arrival process, exactly (parses back).
    pub arrivals: Option<String>,
}

impl Input {
    /// Share of the span the device serves FG requests (no BG work).
    pub fn fg_utilization(&self) -> f64 {
        let span = self.prep.span_ns() as f64;
        if span > 0.0 {
            self.prep.periods().busy_total_ns() as f64 / span
        } else {
            0.0
        }
    }
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
        describe_device(&selected),
        path.display().to_string(),
    )
}

/// The last part of a path, for titles.
pub fn file_name(path: &std::path::Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `device 0 of 2`.
pub fn describe_device(selected: &input::Selected) -> String {
    format!(
        "device {}{}",
        fallow_core::trace::device_label(&selected.devices, selected.device),
        if selected.devices.len() > 1 {
            format!(" of {}", selected.devices.len())
        } else {
            String::new()
        }
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
    let mut parts = vec![device];
    parts.push(format!(
        "{} requests over {}",
        count(prep.requests() as u64),
        secs(prep.span_ns() as f64 / 1e9)
    ));
    parts.push(match &a.service {
        Some(m) => format!(
            "completions modelled: {}, seed {}",
            describe_model(&m.to_string()),
            a.seed
        ),
        None => "completion times recorded".into(),
    });
    Ok(Input {
        prep,
        title,
        detail: parts.join(" · "),
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
    let detail = format!(
        "{} requests of {}, {} ({} req/s, inter-arrival CV {}), {}, {} writes, seed {}",
        count(a.requests as u64),
        bytes(a.request_size),
        describe_arrivals(&arrivals),
        num(arrivals.mean_rate_per_s()),
        num(arrivals.interarrival_cv()),
        describe_model(&service.to_string()),
        pct(a.write_fraction),
        a.seed
    );
    Ok(Input {
        prep,
        title: "synthetic workload".into(),
        detail,
        source: spec.to_string(),
        arrivals: Some(arrivals.to_string()),
    })
}

/// An arrival process in words: `two-state MMPP arrivals (59.7/s for ~16.8 s,
/// 0.309/s for ~16.8 s)`.
pub fn describe_arrivals(p: &ArrivalProcess) -> String {
    match *p {
        ArrivalProcess::Poisson { .. } => "Poisson arrivals".into(),
        ArrivalProcess::Erlang { k, .. } => format!("Erlang-{k} inter-arrival times"),
        ArrivalProcess::Lognormal { .. } => "lognormal inter-arrival times".into(),
        ArrivalProcess::Hyperexponential { .. } => "hyperexponential inter-arrival times".into(),
        ArrivalProcess::Mmpp2 {
            rate_per_s,
            switch_per_s,
        } => format!(
            "two-state MMPP arrivals ({}/s for ~{}, {}/s for ~{})",
            num(rate_per_s[0]),
            secs(1.0 / switch_per_s[0]),
            num(rate_per_s[1]),
            secs(1.0 / switch_per_s[1])
        ),
    }
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
            description: input.detail.clone(),
            arrivals: input.arrivals.clone(),
            requests: input.prep.requests() as u64,
            fg_utilization: input.fg_utilization(),
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
