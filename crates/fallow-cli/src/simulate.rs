//! `fallow simulate`: run one BG scheduling policy over a trace or a
//! synthetic workload and report what it costs the foreground and what it
//! gets done (terminal summary or `--json`).
//!
//! The input and BG flags ([`InputArgs`], [`BgArgs`]) are the shared args
//! module's; the preparation of the input is [`crate::prepare`]'s.

use crate::args::{BgArgs, InputArgs};
use crate::human::{bytes, count, num, pct, secs, signed_pct};
use crate::input;
use crate::output::{self, Style};
use crate::prepare::{prepare, Input, InputInfo, Run};
use crate::progress::Progress;
use crate::retune;
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::sim::{simulate, simulate_split, SimResult, SourcedPart};
use fallow_core::trace::DEFAULT_GAP_NS;
use fallow_core::tune::online::Runner;
use serde::Serialize;
use std::fmt::Write as _;

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

/// Run `fallow simulate`.
pub fn run(args: SimulateArgs) -> Result<()> {
    let seed = args.input.seed;
    // a bad policy fails before any reading
    let mut runner = retune::runner(&args.policy, &args.retune, &args.bg, seed)?;
    let (input, first) = match &args.retune.then {
        Some(then) => {
            let (input, n) = retune::prepare_then(
                &args.input,
                then,
                args.retune.then_device.clone(),
                args.retune.gap.unwrap_or(DEFAULT_GAP_NS),
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
        Some(n) => {
            retune::runner(&args.policy, &args.retune, &args.bg, seed).and_then(|mut fresh| {
                simulate_split(&input.prep, n, runner.policy(), fresh.policy(), &cfg)
                    .map(|s| (s.whole, Some(s.parts)))
                    .context("--then")
            })
        }
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
    let retune = runner.report();
    let parts = parts.as_ref().map(|p| {
        let then = args.retune.then.as_ref().expect("parts come from --then");
        SourcedPart::pair(p, retune::part_sources(&args.input, then))
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
        st.bold(&format!("{} · {spec}", input.subject.title)),
        if r.clairvoyant {
            "  (clairvoyant reference: an upper bound, not deployable)"
        } else {
            ""
        }
    );
    for line in output::wrap(&input.subject.detail, 96) {
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
        pct(input.subject.fg_utilization),
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
