//! `fallow compare`: run several policies on one prepared input (a trace or
//! a synthetic workload, prepared once) and compare what each costs the
//! foreground with what it gets done: a table, `--json` (a list of
//! results) and `--html` (slowdown against BG throughput, FG response-time
//! CCDFs).
//!
//! Policies run in parallel, one per thread, each with the same seed, so a
//! policy's row is the same whatever else is compared with it.

use crate::args::{threads, BgArgs, InputArgs};
use crate::atomic::OverwriteArg;
use crate::human::signed_pct;
use crate::human::{count, num, pct, secs};
use crate::output::{self, Style};
use crate::prepare::{build_policy, prepare, Input, Run};
use crate::progress::Progress;
use crate::table::{Cell, Column, CsvArg, Table};
use anyhow::Result;
use clap::Args;
use fallow_core::outpath::OutputKind;
use fallow_core::sim::{LineupEvent, SimResult};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Arguments of `fallow compare`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow compare ajw.1week.srt --device 0 --bg exp:10ms --html compare.html
      every policy with its default parameters, plus the clairvoyant references
  fallow compare --workload lognormal:cv=3 --utilization 0.3 --requests 200000 \\
      --policy aggressive --policy fixed-wait:t=50ms --policy fixed-wait:t=200ms --json

--json prints a list with one object per policy: its spec and the keys of `fallow simulate --json`.")]
pub struct CompareArgs {
    /// A policy to run, `NAME[:k=v,…]`; repeat for several. [default: every
    /// policy in `fallow policies` with its default parameters, the
    /// clairvoyant references last]
    #[arg(long = "policy", short = 'p', value_name = "POLICY")]
    pub policies: Vec<String>,

    /// Print the results as a JSON list instead of the table.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub csv: CsvArg,

    /// Also write a self-contained HTML page with the table and plots.
    #[arg(long, value_name = "OUT.html", help_heading = crate::atomic::OUTPUT_FILES)]
    pub html: Option<PathBuf>,

    /// Policies simulated at once. [default: the number of cores, or FALLOW_THREADS]
    #[arg(long, value_name = "N", value_parser = crate::args::threads_parser())]
    pub threads: Option<u64>,

    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub bg: BgArgs,

    #[command(flatten)]
    pub out: OverwriteArg,
}

/// Run `fallow compare`.
pub fn run(args: CompareArgs) -> Result<()> {
    if let Some(p) = &args.html {
        let guard = args.out.guard(args.input.trace.as_deref());
        crate::atomic::check(&guard, p, OutputKind::HtmlReport, "--html")?;
    }
    // Build every policy before reading anything: a typo fails at once,
    // naming its --policy; the line-up itself is the core's (as Python's)
    let explicit = !args.policies.is_empty();
    for spec in &args.policies {
        build_policy(spec)?;
    }
    let cfg = args.bg.config(args.input.seed);
    // a policy that chooses its request sizes needs a BG model that charges
    // for size: the default line-up says why it leaves one out, an
    // explicit one fails
    let lineup =
        fallow_core::sim::lineup(explicit.then(|| args.policies.clone()), &cfg.bg_service)?;
    for line in &lineup.skipped {
        eprintln!("fallow: {line}");
    }
    let policies = lineup.policies;
    let input = prepare(&args.input)?;
    let threads = threads(args.threads);
    let bar = progress(policies.len(), input.prep.requests())?;
    let results = fallow_core::sim::run_lineup(&input.prep, policies, &cfg, threads, None, &|e| {
        if let Some(b) = &bar {
            match e {
                LineupEvent::Started(spec) => b.set_message(spec.to_string()),
                LineupEvent::Finished => b.inc(1),
            }
        }
    });
    if let Some(b) = bar {
        b.finish();
    }
    let runs: Vec<(String, SimResult)> = results
        .into_iter()
        .map(|(spec, r)| r.map(|r| (spec, r)))
        .collect::<Result<_, _>>()?;

    if let Some(path) = &args.html {
        let written =
            fallow_report::compare::write(path, &input.subject, &args.bg.describe(), &runs);
        crate::atomic::written(path, written)?;
    }
    if args.json {
        let list: Vec<Run<'_>> = runs
            .iter()
            .map(|(spec, result)| Run { spec, result })
            .collect();
        output::print(&output::json_list_text(&list)?)?;
        if let Some(path) = &args.html {
            eprintln!("fallow: wrote the HTML page to {}", path.display());
        }
    } else if args.csv.csv {
        output::print(&runs_table(&runs).csv())?;
        if let Some(path) = &args.html {
            eprintln!("fallow: wrote the HTML page to {}", path.display());
        }
    } else {
        let mut text = table(&input, &args.bg, &runs);
        if let Some(path) = &args.html {
            let _ = writeln!(text, "\nHTML: {}", path.display());
        }
        output::print(&text)?;
    }
    Ok(())
}

/// The comparison as a table, the baseline (no BG work) first: the text
/// table and `--csv` (fractions and seconds, `clairvoyant` as true/false).
fn runs_table(runs: &[(String, SimResult)]) -> Table {
    let mut t = Table::new(vec![
        Column::new("policy", "policy"),
        Column::new("slowdown", "fg_slowdown"),
        Column::new("added delay", "fg_mean_added_delay_s"),
        Column::new("p99", "fg_p99_response_s"),
        Column::new("delayed", "fg_collision_rate"),
        Column::new("BG MB/s", "bg_throughput_bytes_per_s"),
        Column::new("idle used", "idle_used_fraction"),
        Column::new("", "clairvoyant"),
    ]);
    if let Some((_, first)) = runs.first() {
        let zero = || Cell::num("0", 0.0);
        t.push(vec![
            Cell::text("(no BG work)"),
            zero(),
            zero(),
            Cell::num(
                secs(first.fg.baseline_p99_response_s),
                first.fg.baseline_p99_response_s,
            ),
            zero(),
            zero(),
            zero(),
            Cell::both("", "false"),
        ]);
    }
    for (spec, r) in runs {
        t.push(vec![
            Cell::both(
                if r.clairvoyant {
                    format!("{spec} *")
                } else {
                    spec.clone()
                },
                spec.clone(),
            ),
            Cell::num(signed_pct(r.fg.slowdown), r.fg.slowdown),
            Cell::num(secs(r.fg.mean_added_delay_s), r.fg.mean_added_delay_s),
            Cell::num(secs(r.fg.p99_response_s), r.fg.p99_response_s),
            Cell::num(pct(r.fg.collision_rate), r.fg.collision_rate),
            Cell::num(
                num(r.bg.throughput_bytes_per_s / 1e6),
                r.bg.throughput_bytes_per_s,
            ),
            Cell::num(pct(r.idle_used_fraction), r.idle_used_fraction),
            Cell::both("", r.clairvoyant.to_string()),
        ]);
    }
    t
}

/// A bar over policies, on an interactive stderr, when runs take a while
/// (or lines: [`crate::progress`]). Its step is one policy's simulation;
/// the bar's clock ticks between steps.
fn progress(policies: usize, requests: usize) -> Result<Option<Progress>> {
    let bar = Progress::new(
        "policies",
        "simulating [{wide_bar}] {pos}/{len} policies {elapsed} {msg}",
        policies as u64,
        requests.saturating_mul(policies) >= 2_000_000,
    )?;
    if let Some(b) = &bar {
        b.steady_tick(std::time::Duration::from_millis(500));
    }
    Ok(bar)
}

/// The comparison table, the baseline first.
fn table(input: &Input, bg: &BgArgs, runs: &[(String, SimResult)]) -> String {
    let st = Style::for_stdout();
    let mut s = String::new();
    let _ = writeln!(s, "{}", st.bold(&input.subject.title));
    for line in output::wrap(&input.subject.detail, 96) {
        let _ = writeln!(s, "  {}", st.dim(&line));
    }
    let _ = writeln!(s, "  {}", st.dim(&bg.describe()));
    let _ = writeln!(s);
    let _ = write!(s, "{}", runs_table(runs).text(&st, 0, |_| false));
    let _ = writeln!(
        s,
        "\nslowdown: mean FG response time with BG work over without, − 1; added delay: per FG request;\n\
         delayed: FG requests that waited for BG work; idle used: share of idle time spent on BG work."
    );
    if runs.iter().any(|(_, r)| r.clairvoyant) {
        let _ = writeln!(
            s,
            "* clairvoyant reference: sees the future, an upper bound rather than a deployable policy."
        );
    }
    if let Some((_, r)) = runs.first() {
        let _ = writeln!(
            s,
            "Baseline: mean FG response {} over {} requests, FG utilisation {}.",
            secs(r.fg.baseline_mean_response_s),
            count(r.fg.requests),
            pct(input.subject.fg_utilization)
        );
    }
    s
}
