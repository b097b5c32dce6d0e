//! `fallow simulate`: run one BG scheduling policy over a trace or a
//! synthetic workload and report what it costs the foreground and what it
//! gets done (terminal summary or `--json`).
//!
//! The input and BG flags ([`InputArgs`], [`BgArgs`]) and the preparation
//! of the input ([`prepare`]) are shared with `fallow compare`.

use crate::human::{bytes, count, num, pct, secs};
use crate::input::{self, ReadArgs};
use crate::output::{self, describe_model, Style};
use crate::progress::Progress;
use crate::retune::{self, Runner};
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::policy;
use fallow_core::sim::{
    self, simulate, simulate_split, BgService, BgWork, Prepared, SimConfig, SimResult,
};
use fallow_core::trace::DeviceSel;
use fallow_core::workload::ArrivalProcess;
use fallow_core::ServiceModel;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Where the FG requests come from: a trace, or a synthetic workload.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// The trace file (gzip is read transparently); or give --workload instead.
    #[arg(value_name = "TRACE", required_unless_present = "workload")]
    pub trace: Option<PathBuf>,

    /// Device to simulate, by its id in the trace (blkparse: MAJOR,MINOR; MSR of several hosts: HOST:DISK). [default: the device with the most requests]
    #[arg(long, short = 'd', value_name = "ID", conflicts_with = "workload")]
    pub device: Option<DeviceSel>,

    /// A synthetic FG workload instead of a trace, by its arrival process:
    /// `poisson`, `erlang:k=4` (or `erlang:cv=0.5`), `lognormal:cv=3`,
    /// `hyperexp:cv=4`, `mmpp:cv=9,burst=1000` (two-state MMPP fitted to the
    /// CV of inter-arrival times and the mean number of arrivals per burst)
    /// or `mmpp:rates=40/1,sojourn=20s/60s`. The mean rate comes from
    /// --arrival-rate, --utilization or `rate=R` in the spec.
    #[arg(long, value_name = "ARRIVALS", conflicts_with = "trace")]
    pub workload: Option<String>,

    /// Mean arrival rate of the synthetic workload, requests per second.
    #[arg(
        long,
        value_name = "PER_S",
        requires = "workload",
        conflicts_with = "utilization"
    )]
    pub arrival_rate: Option<f64>,

    /// FG utilisation of the synthetic workload (0.3 = 30 %): sets the
    /// arrival rate to FRACTION / mean service time.
    #[arg(long, value_name = "FRACTION", requires = "workload")]
    pub utilization: Option<f64>,

    /// Number of synthetic FG requests.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub requests: usize,

    /// Size of every synthetic FG request (B, KiB, MiB, …).
    #[arg(long, value_name = "SIZE", default_value = "4KiB", value_parser = parse_size)]
    pub request_size: u64,

    /// Fraction of synthetic FG requests that are writes (they spawn BG
    /// work with --bg-work writes:R).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    pub write_fraction: f64,

    /// FG service-time model. For a trace: turns arrivals into completions
    /// through a FCFS queue (needed when the trace has no completion times;
    /// replaces recorded ones if given). For a synthetic workload: its
    /// service times [default: exp:10ms]. `const:5ms`, `exp:5ms`,
    /// `lognormal:5ms,cv=2`, `hyperexp:5ms,cv=4` or
    /// `disk[:rpm=7200,seek=0.6ms..16ms,rate=150MB,capacity=1TB]`.
    #[arg(long, value_name = "MODEL")]
    pub service: Option<ServiceModel>,

    /// Seed of every random stream (workload, service model, BG service):
    /// the same seed gives the same result, byte for byte.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,

    #[command(flatten)]
    pub read: ReadArgs,
}

/// The BG work and its device model.
#[derive(Debug, Clone, Args)]
pub struct BgArgs {
    /// BG service-time model: `exp:MEAN` (exponential), `const:T`, or
    /// `size[:base=8ms,knee=64KiB,rate=100MB]` (flat up to the knee, then
    /// linear in size, as in Practical Scrubbing Fig. 4).
    #[arg(long, value_name = "MODEL", default_value = "exp:10ms")]
    pub bg: BgService,

    /// BG request size when the policy does not choose one.
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = parse_size)]
    pub bg_size: u64,

    /// How much BG work there is: `endless` (scrubbing), `requests:N`,
    /// `bytes:SIZE`, or `writes:R` (every FG write spawns BG work, in all R
    /// times the FG work, e.g. writes:100%; BG response time is measured).
    #[arg(long, value_name = "WORK", default_value = "endless")]
    pub bg_work: BgWork,

    /// Extra delay of an FG request that finds BG work in service
    /// (repositioning): ns, us, ms, s; a bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub switch_penalty: u64,
}

impl BgArgs {
    /// The run's settings.
    pub fn config(&self, seed: u64) -> SimConfig {
        SimConfig {
            bg_service: self.bg,
            bg_work: self.bg_work,
            bg_size_bytes: self.bg_size,
            switch_penalty_ns: self.switch_penalty,
            seed,
        }
    }

    /// One line: `exp:10ms BG service, 64 KiB requests, endless`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "BG service {}, {} requests, {}",
            describe_bg(&self.bg),
            bytes(self.bg_size),
            describe_work(&self.bg_work)
        );
        if self.switch_penalty > 0 {
            let _ = write!(
                s,
                ", switch penalty {}",
                secs(self.switch_penalty as f64 / 1e9)
            );
        }
        s
    }
}

fn parse_size(s: &str) -> Result<u64, String> {
    match fallow_core::units::parse_bytes(s) {
        Ok(0) => Err("must be at least 1 byte".into()),
        Ok(b) => Ok(b),
        Err(e) => Err(e.to_string()),
    }
}

use crate::args::parse_duration;

/// A BG service model in words.
pub fn describe_bg(m: &BgService) -> String {
    match *m {
        BgService::Exponential { mean_ns } => {
            format!("exponential, mean {}", secs(mean_ns as f64 / 1e9))
        }
        BgService::Constant { ns } => format!("constant {}", secs(ns as f64 / 1e9)),
        BgService::SizeBased {
            base_ns,
            knee_bytes,
            rate_bytes_per_s,
        } => format!(
            "{} up to {}, then {} MB/s",
            secs(base_ns as f64 / 1e9),
            bytes(knee_bytes),
            num(rate_bytes_per_s / 1e6)
        ),
    }
}

/// How much BG work, in words.
pub fn describe_work(w: &BgWork) -> String {
    match *w {
        BgWork::Endless => "endless work".into(),
        BgWork::Requests(n) => format!("{} requests of work", count(n)),
        BgWork::Bytes(b) => format!("{} of work", bytes(b)),
        BgWork::PerFgWrite { ratio } => {
            format!("work spawned by FG writes ({} of FG work)", pct(ratio))
        }
    }
}

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

impl InputArgs {
    /// The core's request for `input` with these flags: service model and
    /// seed; the BG settings stay at the core's defaults (the preparation
    /// does not use them; [`BgArgs::config`] gives a run's).
    pub fn request<'a>(&self, input: sim::Input<'a>) -> sim::Request<'a> {
        let mut req = sim::Request::new(input);
        req.service = self.service.clone();
        req.seed = self.seed;
        req
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

/// Arguments of `fallow simulate`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow simulate --workload poisson --arrival-rate 0.3 --service exp:1s --requests 1000000 \\
      --bg exp:2s --policy fixed-wait:t=1s --seed 1 --json
  fallow simulate ajw.1week.srt --device 0 --policy fixed-wait:t=100ms --bg size --bg-size 64KiB
  fallow simulate --workload mmpp:cv=9,burst=1000 --utilization 0.3 --policy aggressive

`fallow policies` lists the policies and their parameters. The JSON document (--json) has the
keys spec, input, fg (mean_response_s, baseline_mean_response_s, slowdown, mean_added_delay_s,
p50/p90/p99/p999_response_s, collision_rate, delayed_requests, collisions, ccdf, baseline_ccdf),
bg (completed, bytes, throughput_bytes_per_s, mean_response_s, spawned, busy_s), utilization,
idle_total_s, idle_used_fraction, idle_intervals, span_s, notes (the policy's notes on how it
ran, e.g. busy-bee's Threshold rule); with --retune, retune (budget, knob,
window, every, final_spec, history: [time_s, intervals, knob, value, fit]); with --then, parts
(source, requests, span_s, mean_added_delay_s, slowdown, bg_throughput_bytes_per_s, …). Times
are in seconds.

  fallow simulate ajw.1week.srt --device 0 --then pgbench.csv.gz --policy fixed-wait \\
      --retune 1ms --window 2000 --every 500
      the wait re-fitted online as the workload changes from one trace to the other")]
pub struct SimulateArgs {
    /// The policy and its parameters, `NAME[:k=v,…]`, e.g. `fixed-wait:t=1s`.
    #[arg(long, short = 'p', value_name = "POLICY")]
    pub policy: String,

    /// Print the result as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub bg: BgArgs,

    #[command(flatten)]
    pub retune: crate::retune::RetuneArgs,
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

/// Run `fallow simulate`.
pub fn run(args: SimulateArgs) -> Result<()> {
    let seed = args.input.seed;
    // a bad policy fails before any reading
    let mut runner = Runner::new(&args.policy, &args.retune, &args.bg, seed)?;
    let (input, first) = match &args.retune.then {
        Some(then) => {
            let (input, n) = retune::prepare_then(
                &args.input,
                then,
                args.retune.then_device.clone(),
                args.retune.gap,
            )?;
            (input, Some(n))
        }
        None => (prepare(&args.input)?, None),
    };
    let cfg = args.bg.config(seed);
    // --retune refits every --every idle intervals, ~0.3 s per 50 refits on
    // 1 M requests: the bar moves with each refit
    let refits = match &mut runner {
        Runner::Retuned(t) => {
            let total = input.prep.periods().idle_len_ns.len() as u64;
            Progress::new(
                "intervals",
                "re-tuning [{wide_bar}] {pos}/{len} idle intervals {eta}",
                total,
                true,
            )?
            .map(|bar| {
                let bar = std::sync::Arc::new(bar);
                // weak: the bar is finished below while the tuner lives on
                let seen = std::sync::Arc::downgrade(&bar);
                t.on_refit(Box::new(move |n| {
                    if let Some(b) = seen.upgrade() {
                        b.set_position(n.min(total));
                    }
                }));
                (bar, total)
            })
        }
        Runner::Plain(_) => None,
    };
    let spinner = if refits.is_some() {
        None
    } else {
        input::spinner("simulating", input.prep.requests())
    };
    let result = match first {
        // the first part again, on its own, with a fresh policy (see
        // `fallow_core::sim::simulate_split`)
        Some(n) => Runner::new(&args.policy, &args.retune, &args.bg, seed).and_then(|mut fresh| {
            simulate_split(&input.prep, n, runner.policy(), fresh.policy(), &cfg)
                .map(|s| (s.whole, Some(s.parts)))
                .context("--then")
        }),
        None => simulate(&input.prep, runner.policy(), &cfg)
            .map(|r| (r, None))
            .map_err(Into::into),
    };
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    if let Some(bar) = refits.and_then(|(bar, total)| {
        bar.set_position(total);
        std::sync::Arc::into_inner(bar)
    }) {
        bar.finish();
    }
    let (r, parts) = result?;
    let retune = match &runner {
        Runner::Retuned(t) => Some(t.report()),
        Runner::Plain(_) => None,
    };
    let parts: Option<Vec<retune::PartInfo<'_>>> = parts.as_ref().map(|p| {
        let then = args.retune.then.as_ref().expect("parts come from --then");
        retune::part_sources(&args.input, then)
            .into_iter()
            .zip(p)
            .map(|(source, part)| retune::PartInfo { source, part })
            .collect()
    });
    if args.json {
        #[derive(Serialize)]
        struct Doc<'a> {
            input: InputInfo,
            #[serde(flatten)]
            run: Run<'a>,
            #[serde(flatten)]
            extra: retune::Extra<'a>,
        }
        let doc = Doc {
            input: InputInfo::new(&input, &args.bg, seed),
            run: Run {
                spec: &args.policy,
                result: &r,
            },
            extra: retune::Extra { retune, parts },
        };
        output::print(&output::json_text(&doc)?)
    } else {
        let mut text = summary(&args.policy, &input, &args.bg, &r);
        text.push_str(&retune::summary(retune.as_ref(), parts.as_deref()));
        output::print(&text)
    }
}

/// The terminal summary of one run.
fn summary(spec: &str, input: &Input, bg: &BgArgs, r: &SimResult) -> String {
    let st = Style::for_stdout();
    let f = &r.fg;
    let b = &r.bg;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}{}",
        st.bold(&format!("{} · {spec}", input.title)),
        if r.clairvoyant {
            "  (clairvoyant reference: an upper bound, not deployable)"
        } else {
            ""
        }
    );
    for line in output::wrap(&input.detail, 96) {
        let _ = writeln!(s, "  {}", st.dim(&line));
    }
    let _ = writeln!(s, "  {}", st.dim(&bg.describe()));
    let _ = writeln!(s);
    let fg_rows = [
        (
            "mean response",
            format!(
                "{} (baseline {})",
                secs(f.mean_response_s),
                secs(f.baseline_mean_response_s)
            ),
        ),
        ("slowdown", signed_pct(f.slowdown)),
        (
            "added delay",
            format!("{} per request", secs(f.mean_added_delay_s)),
        ),
        (
            "p50 / p90",
            format!("{} / {}", secs(f.p50_response_s), secs(f.p90_response_s)),
        ),
        (
            "p99",
            format!(
                "{} (baseline {})",
                secs(f.p99_response_s),
                secs(f.baseline_p99_response_s)
            ),
        ),
        ("p99.9", secs(f.p999_response_s)),
        (
            "delayed",
            format!(
                "{} of requests ({})",
                pct(f.collision_rate),
                count(f.delayed_requests)
            ),
        ),
    ];
    let mut bg_rows = vec![
        (
            "completed",
            format!("{} ({})", count(b.completed), bytes(b.bytes)),
        ),
        (
            "throughput",
            format!("{} MB/s", num(b.throughput_bytes_per_s / 1e6)),
        ),
        ("device time", secs(b.busy_s)),
        (
            "idle used",
            format!("{} of {}", pct(r.idle_used_fraction), secs(r.idle_total_s)),
        ),
        (
            "collisions",
            format!(
                "{} of {} idle intervals",
                count(f.collisions),
                count(r.idle_intervals)
            ),
        ),
    ];
    if let Some(spawned) = b.spawned {
        bg_rows.push(("spawned", count(spawned)));
    }
    if let Some(m) = b.mean_response_s {
        bg_rows.push(("mean response", secs(m)));
    }
    let _ = writeln!(
        s,
        "{}{}",
        output::pad(&st.bold("Foreground"), "Foreground", 46),
        st.bold("Background")
    );
    for i in 0..fg_rows.len().max(bg_rows.len()) {
        let left = fg_rows
            .get(i)
            .map(|(k, v)| format!("  {k:<14}{v}"))
            .unwrap_or_default();
        let right = bg_rows
            .get(i)
            .map(|(k, v)| format!("  {k:<14}{v}"))
            .unwrap_or_default();
        let _ = writeln!(s, "{}{right}", output::pad(&left, &left, 46));
    }
    let _ = writeln!(
        s,
        "\nDevice utilisation {} with BG work ({} FG only), over {}.",
        pct(r.utilization),
        pct(input.fg_utilization()),
        secs(r.span_s)
    );
    if !r.notes.is_empty() {
        let _ = writeln!(s);
        for note in &r.notes {
            for (k, line) in output::wrap(note, 94).iter().enumerate() {
                let _ = writeln!(s, "{} {line}", if k == 0 { "Note:" } else { "     " });
            }
        }
    }
    s.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}

/// `+21.8 %`, `−0.3 %`, `0 %`.
pub fn signed_pct(f: f64) -> String {
    if f > 0.0 {
        format!("+{}", pct(f))
    } else {
        pct(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        bg: BgArgs,
    }

    /// The flags' defaults (written as text for `--help`) are the core's
    /// request defaults, which Python takes too: one default, two spellings.
    #[test]
    fn flag_defaults_are_the_core_request_defaults() {
        let p = Probe::try_parse_from(["probe", "--workload", "poisson"]).unwrap();
        let req = p
            .input
            .request(sim::Input::Workload(sim::Workload::new("poisson")));
        let sim::Input::Workload(w) = &req.input else {
            unreachable!("a workload input")
        };
        assert_eq!(p.input.requests, w.requests);
        assert_eq!(p.input.request_size, w.request_size_bytes);
        assert_eq!(p.input.write_fraction, w.write_fraction);
        assert_eq!(p.input.seed, req.seed);
        assert_eq!(p.bg.config(p.input.seed), req.config());
        assert_eq!(w.requests, 1_000_000);
    }
}
