//! `fallow recommend`: every deployable policy with a knob tuned for one FG
//! budget and ranked by the BG throughput it reaches, each with a one-line
//! reason drawn from the trace's idleness (or `--json`: the core's
//! `Recommendation`).

use crate::args::{parse_budget, parse_duration, parse_search, parse_sizes, threads, Sizes};
use crate::args::{BgArgs, InputArgs};
use crate::human::{bytes, num, secs};
use crate::output::{self, Style};
use crate::prepare::prepare;
use crate::progress::TuningBar;
use crate::reproduce::{shell_quote, simulate_args};
use crate::table::{Cell, Column, CsvArg, Table};
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::tune::{self, recommend::Recommendation, Budget, SearchMode};
use std::fmt::Write as _;

/// Arguments of `fallow recommend`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow recommend ajw.1week.srt --device 0 --budget 2ms \\
      --bg size:base=8ms,knee=64KiB,rate=100MB --max-delay 50ms
  fallow recommend --workload hyperexp:cv=4 --utilization 0.2 --requests 20000 \\
      --budget 5% --json

Every deployable policy with a knob is tuned as `fallow tune` would (see docs/tuning.md) and
ranked by BG throughput within the budget, ties to the lower added delay; a policy that does
no BG work within the budget, or cannot meet it, is listed unranked (rank 0 in --json). --json
prints an object with budget, budget_text, sizes, traits, ranking (rank, policy, best,
relative, reason, guarantee: exact or coarse-grid, reproduce and reproduce_args: the `fallow
simulate` command of the entry's setting, mean_bg_request_bytes for a policy that adapts its
request size, never_learned: the policy it behaved as when it never finished learning),
simulations, search, throughput_tolerance and schema_version. Throughputs within 1 % of the
best left rank by the lower added FG delay.

Progress: a bar on a terminal that moves with every batch of settings of the policy being
tuned; FALLOW_PROGRESS=lines prints one line per update on stderr, never hides it.")]
pub struct RecommendArgs {
    /// The FG budget: a mean slowdown (`5%`) or a mean added delay per FG
    /// request (`1ms`).
    #[arg(long, value_name = "SPEC", value_parser = parse_budget)]
    pub budget: Budget,

    /// Candidate BG request sizes: `LO..HI` (30 log-spaced), `LO..HI/N`, or a
    /// list `64KiB,256KiB,1MiB`. [default: 64KiB..4MiB/5]
    #[arg(long, value_name = "SIZES", value_parser = parse_sizes)]
    pub sizes: Option<Sizes>,

    /// Most delay one BG request may add to an FG request: sizes whose
    /// service time plus the switch penalty exceed it are excluded.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_delay: Option<u64>,

    /// Print the recommendation as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub csv: CsvArg,

    /// How fixed-wait and lossless-waiting are searched, as for `fallow
    /// tune --search`: `exact` (the whole knob ladder, provably best; slow
    /// on long traces), `coarse` (1-2-5 grid plus bisection, a heuristic),
    /// `auto` (exact when estimated at about 10 s of one core or less).
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = parse_search)]
    pub search: SearchMode,

    /// Sizes simulated at once. [default: the number of cores, or FALLOW_THREADS]
    #[arg(long, value_name = "N", value_parser = crate::args::threads_parser())]
    pub threads: Option<u64>,

    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub bg: BgArgs,
}

/// Run `fallow recommend`.
pub fn run(args: RecommendArgs) -> Result<()> {
    let input = prepare(&args.input)?;
    let sim = args.bg.config(args.input.seed);
    let sizes = args
        .sizes
        .clone()
        .map_or_else(tune::recommend::default_sizes, |s| s.0);
    // moves with every setting evaluated, not only between policies
    let bar = TuningBar::new(format!("tuning for {}: ", args.budget))?;
    let result = tune::recommend::recommend(
        &input.prep,
        &sim,
        args.budget,
        &sizes,
        args.max_delay,
        threads(args.threads),
        args.search,
        &|policy, policies, done, total| bar.step(policy, policies, done, total),
        None,
    );
    bar.finish();
    let rec = result.with_context(|| format!("recommending for --budget {}", args.budget))?;
    // as compare does: say which candidates were left out, and why
    for s in &rec.skipped {
        eprintln!("fallow: skipping {s}");
    }
    if args.json {
        output::print(&output::json_text(&json_doc(&args, &sim, &rec)?)?)
    } else if args.csv.csv {
        output::print(&ranking_table(&rec).csv())
    } else {
        output::print(&table(&args, &input, &sim, &rec))
    }
}

/// `--json`: the core's `Recommendation`, each ranking entry with a setting
/// also carrying the `fallow simulate` command that reproduces it, as one
/// shell line (`reproduce`) and as arguments after `fallow`
/// (`reproduce_args`), as `fallow tune --json` does for its answers.
fn json_doc(
    args: &RecommendArgs,
    sim: &fallow_core::sim::SimConfig,
    rec: &Recommendation,
) -> Result<serde_json::Value> {
    let mut doc = serde_json::to_value(rec)?;
    let entries = doc["ranking"].as_array_mut();
    for (entry, r) in entries.into_iter().flatten().zip(&rec.ranking) {
        let Some(c) = &r.best else { continue };
        let a = simulate_args(&args.input, sim, c);
        let line = std::iter::once("fallow".to_string())
            .chain(a.iter().map(|x| shell_quote(x)))
            .collect::<Vec<_>>()
            .join(" ");
        entry["reproduce"] = line.into();
        entry["reproduce_args"] = a.into();
    }
    Ok(doc)
}

/// The ranking for `--csv`: one row per policy, the best setting's figures
/// blank where no setting meets the budget (rank 0: none does BG work).
fn ranking_table(rec: &Recommendation) -> Table {
    let mut t = Table::new(vec![
        Column::new("rank", "rank"),
        Column::new("policy", "policy"),
        Column::new("best spec", "spec"),
        Column::new("req. size", "request_size_bytes"),
        Column::new("BG", "bg_throughput_bytes_per_s"),
        Column::new("added delay", "fg_mean_added_delay_s"),
        Column::new("reason", "reason"),
    ]);
    for r in &rec.ranking {
        let best = r.best.as_ref().filter(|_| r.rank > 0);
        let mut row = vec![
            Cell::int(r.rank.to_string(), r.rank as u64),
            Cell::text(r.policy.clone()),
        ];
        match best {
            Some(c) => row.extend([
                Cell::text(c.spec.clone()),
                Cell::int(bytes(c.request_size_bytes), c.request_size_bytes),
                Cell::num(
                    format!("{} MB/s", num(c.bg_throughput_bytes_per_s / 1e6)),
                    c.bg_throughput_bytes_per_s,
                ),
                Cell::num(secs(c.fg_mean_added_delay_s), c.fg_mean_added_delay_s),
            ]),
            None => row.extend([Cell::empty(), Cell::empty(), Cell::empty(), Cell::empty()]),
        }
        row.push(Cell::text(r.reason.clone()));
        t.push(row);
    }
    t
}

fn table(
    args: &RecommendArgs,
    input: &crate::prepare::Input,
    sim: &fallow_core::sim::SimConfig,
    rec: &Recommendation,
) -> String {
    let st = Style::for_stdout();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        st.bold(&format!(
            "{} · recommend for {}",
            input.subject.title, rec.budget_text
        ))
    );
    for line in output::wrap(&input.subject.detail, 96) {
        let _ = writeln!(s, "  {}", st.dim(&line));
    }
    let _ = writeln!(s, "  {}", st.dim(&args.bg.describe()));
    let _ = writeln!(
        s,
        "  {}",
        st.dim(&format!(
            "{} policies · {} sizes · {} simulations",
            rec.ranking.len(),
            rec.sizes.len(),
            rec.simulations
        ))
    );
    let exact: Vec<&str> = rec
        .ranking
        .iter()
        .filter(|r| r.guarantee == tune::Guarantee::Exact)
        .map(|r| r.policy.as_str())
        .collect();
    let exact = if exact.is_empty() {
        "none".to_string()
    } else {
        exact.join(", ")
    };
    let _ = writeln!(
        s,
        "  {}",
        st.dim(&format!(
            "search {}: exact (the best point of the whole knob ladder) for {exact}; \
             coarse grid plus bisection for the others",
            rec.search
        ))
    );
    let _ = writeln!(s);
    let head = format!(
        "  {:<5}{:<30}{:<38}{:>11}{:>14}{:>14}",
        "rank", "policy", "best spec", "req. size", "BG", "added delay"
    );
    let _ = writeln!(s, "{}", st.bold(&head));
    for r in &rec.ranking {
        match &r.best {
            Some(_) if r.rank == 0 => {
                let _ = writeln!(
                    s,
                    "  {:<5}{:<30}no BG work within the budget",
                    "-", r.policy
                );
            }
            Some(c) => {
                let _ = writeln!(
                    s,
                    "  {:<5}{:<30}{:<38}{:>11}{:>14}{:>14}",
                    r.rank,
                    r.policy,
                    c.spec,
                    bytes(c.request_size_bytes),
                    format!("{} MB/s", num(c.bg_throughput_bytes_per_s / 1e6)),
                    secs(c.fg_mean_added_delay_s)
                );
            }
            None => {
                let _ = writeln!(s, "  {:<5}{:<30}no setting meets the budget", "-", r.policy);
            }
        }
        for line in output::wrap(&r.reason, 90) {
            let _ = writeln!(s, "       {}", st.dim(&line));
        }
    }
    if let Some(c) = rec
        .ranking
        .first()
        .filter(|r| r.rank == 1)
        .and_then(|r| r.best.as_ref())
    {
        let a = simulate_args(&args.input, sim, c);
        let cmd: Vec<String> = std::iter::once("fallow".to_string())
            .chain(a.iter().map(|x| shell_quote(x)))
            .collect();
        let _ = writeln!(s);
        let _ = writeln!(s, "{}", st.bold("Reproduce the top entry"));
        let _ = writeln!(s, "  {}", cmd.join(" "));
    }
    s.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}
