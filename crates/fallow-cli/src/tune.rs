//! `fallow tune`: the most BG throughput a policy gets within an FG budget
//! (Practical Scrubbing §V-C/D, Table III): the policy's aggressiveness
//! knob bisected per request size, then the best size; a Table-III-style
//! table (or `--json`), the OS's idle class at 64 KiB beside it, and the
//! exact `fallow simulate` command that reproduces each answer.

use crate::args::{BgArgs, InputArgs};
use crate::human::{bytes, num, secs};
use crate::output::{self, Style};
use crate::prepare::{prepare, InputInfo};
use crate::progress::Progress;
use crate::reproduce::{shell_quote, simulate_args};
use crate::table::{Cell, Column, CsvArg, Table};
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::sim::SimConfig;
use fallow_core::tune::{self, Budget, Choice, SearchMode, TuneConfig, Tuned, Tuning};
use serde::Serialize;
use std::fmt::Write as _;

/// Arguments of `fallow tune`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow tune ajw.1week.srt --device 0 --policy waiting --budget 1ms,2ms,4ms \\
      --bg size:base=8ms,knee=64KiB,rate=100MB --max-delay 50ms
  fallow tune --workload hyperexp:cv=4 --utilization 0.2 --requests 20000 \\
      --policy cdf-estimates --budget 5% --sizes 64KiB,256KiB,1MiB --json
  fallow tune --workload mmpp:cv=9,burst=1000 --utilization 0.2 --requests 1000000 \\
      --policy waiting --budget 1ms --search coarse

What the answer guarantees (\"guarantee\" in --json, docs/tuning.md; --search picks it):
  exact        fixed-wait (waiting), lossless-waiting, oracle and preemption-interval at its
               defaults, with const: or size: BG service and endless BG work: every step of the
               knob ladder at every size is evaluated (or proved unable to win by its throughput
               bound): the best point of the ladder.
  coarse-grid  every other policy or run, --search coarse, or --search auto when the exact
               search is estimated above ~10 s of one core (a note then gives the estimate
               and says --search exact forces it): at least as good as every feasible point of the
               1-2-5 grid; the bisection between grid points assumes the added delay falls as
               the knob grows more conservative, which no proof backs (a heuristic). No policy
               is bracketed: the added delay is a sawtooth in the knob even for fixed-wait (a
               1 ms longer wait: -26 % or +46 % on an MSR trace, docs/tuning.md), and the
               policies with state choose their waits from what they learned.

Progress: a bar on a terminal that moves with every batch of settings; FALLOW_PROGRESS=lines
prints one line per update on stderr instead (logs, CI), FALLOW_PROGRESS=never hides it.

Each policy's knob (what tune searches) is listed in docs/tuning.md. --json prints one object
whatever the number of budgets: schema_version, input, policy, knob, max_delay_s, guarantee,
guarantee_text, search, exact_estimate_s, exact_estimate_basis (bound, or pilot: measured on one
size), exact_bound_bytes_per_s (where coarse ran though exact applies: a proven bound on any
setting's BG throughput), search_note, method, simulations, baseline, and budgets: a list with, per budget, budget,
budget_text, best (policy, spec, params, request_size_bytes, bg_size_bytes,
bg_throughput_bytes_per_s, fg_mean_added_delay_s, fg_slowdown, fg_collision_rate, knob,
reproduce, reproduce_args) and sizes (the per-size table).")]
pub struct TuneArgs {
    /// The policy, `NAME[:k=v,…]`: its knob and request size are searched,
    /// the parameters given stay fixed. `waiting` is fixed-wait.
    #[arg(long, short = 'p', value_name = "POLICY")]
    pub policy: String,

    /// The FG budget: a mean slowdown (`5%`) or a mean added delay per FG
    /// request (`1ms`); several, comma-separated, are tuned together.
    #[arg(long, value_name = "SPEC[,SPEC…]", value_parser = parse_budgets)]
    pub budget: Budgets,

    /// Candidate BG request sizes: `LO..HI` (30 log-spaced), `LO..HI/N`, or a
    /// list `64KiB,256KiB,1MiB`. [default: 64KiB..4MiB]
    #[arg(long, value_name = "SIZES", value_parser = parse_sizes)]
    pub sizes: Option<Sizes>,

    /// Most delay one BG request may add to an FG request: sizes whose
    /// service time plus the switch penalty exceed it are excluded.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_delay: Option<u64>,

    /// Print the result as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub csv: CsvArg,

    /// Simulate every setting even where the one-pass sweep over the idle
    /// intervals applies (fixed-wait, lossless-waiting, oracle with
    /// constant or size-based BG service): the same exact search and the
    /// same answers, much slower; for checking.
    #[arg(long)]
    pub no_fast: bool,

    /// How the knob ladder of fixed-wait, lossless-waiting and oracle is
    /// searched: `exact` (every step at every size: provably the best point
    /// of the ladder; can take minutes on long traces), `coarse` (1-2-5 grid
    /// plus bisection: seconds, a heuristic between grid points), `auto`
    /// (exact, under the progress bar, when estimated at under a minute of
    /// wall time on the threads used; else coarse, saying so with the
    /// estimate and a proven bound on any setting's throughput). Other
    /// policies are always searched coarse.
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

use crate::args::{
    parse_budgets, parse_duration, parse_search, parse_sizes, threads, Budgets, Sizes,
};

/// A choice with the command that reproduces it.
#[derive(Debug, Serialize)]
struct Reproducible<'a> {
    #[serde(flatten)]
    choice: &'a Choice,
    /// `fallow simulate …` as one shell line.
    reproduce: String,
    /// The same as arguments (after `fallow`).
    reproduce_args: Vec<String>,
}

/// The JSON of `fallow tune --json`: one object whatever the number of
/// budgets, one entry of `budgets` per budget in the order given.
#[derive(Debug, Serialize)]
struct Doc<'a> {
    input: &'a InputInfo,
    policy: &'a str,
    knob: &'a Option<tune::KnobInfo>,
    max_delay_s: Option<f64>,
    guarantee: tune::Guarantee,
    guarantee_text: &'a str,
    search: SearchMode,
    exact_estimate_s: Option<f64>,
    exact_estimate_basis: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exact_bound_bytes_per_s: Option<f64>,
    search_note: Option<String>,
    method: &'a str,
    simulations: u64,
    baseline: &'a Reproducible<'a>,
    budgets: Vec<tune::Answer<'a, Reproducible<'a>>>,
}

/// `--search auto`'s limit on the exact search, seconds of wall time.
const AUTO_EXACT_WALL_S: f64 = 60.0;

/// Run `fallow tune`.
pub fn run(args: TuneArgs) -> Result<()> {
    let budgets: Vec<Budget> = args.budget.0.clone();
    // a bad policy fails before any reading
    crate::prepare::build_policy(&args.policy)?;
    let input = prepare(&args.input)?;
    let sim = args.bg.config(args.input.seed);
    let cfg = TuneConfig {
        budgets,
        sizes: args.sizes.clone().map_or_else(tune::default_sizes, |s| s.0),
        max_delay_ns: args.max_delay,
        threads: threads(args.threads),
        fast: !args.no_fast,
        search: args.search,
        // auto runs the exact search, under the progress bar, when it is
        // estimated to take under a minute of wall time on these threads
        auto_limit_visits: tune::auto_limit_visits_for_wall(
            AUTO_EXACT_WALL_S,
            threads(args.threads)
                .min(std::thread::available_parallelism().map_or(1, std::num::NonZero::get)),
        ),
        cancel: None,
    };
    let bar = Progress::new(
        "steps",
        "{msg} [{wide_bar}] {pos}/{len} steps {eta}",
        0,
        true,
    )?;
    if let Some(b) = &bar {
        b.set_message(format!(
            "tuning {} over {} sizes",
            args.policy,
            cfg.sizes.len()
        ));
    }
    let result = tune::tune(&input.prep, &args.policy, &sim, &cfg, &|done, total| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    });
    if let Some(b) = bar {
        b.finish();
    }
    let t = result.with_context(|| format!("tuning --policy {}", args.policy))?;
    let base = tune::baseline(&input.prep, &sim)?;
    let info = InputInfo::new(&input, &args.bg, args.input.seed);
    let base_r = reproducible(&args, &sim, &base);
    if args.json {
        let doc = Doc {
            input: &info,
            policy: &t.policy,
            knob: &t.knob,
            max_delay_s: t.max_delay_s,
            guarantee: t.guarantee,
            guarantee_text: t.guarantee.describe(),
            search: t.search,
            exact_estimate_s: t.exact_estimate_s,
            exact_estimate_basis: t.exact_estimate_basis,
            exact_bound_bytes_per_s: t.exact_bound_bytes_per_s,
            search_note: t.search_note(),
            method: t.method,
            simulations: t.simulations,
            baseline: &base_r,
            budgets: t
                .budgets
                .iter()
                .map(|b| b.answer(|c| reproducible(&args, &sim, c)))
                .collect(),
        };
        let text = output::json_text(&doc)?;
        output::print(&text)
    } else if args.csv.csv {
        output::print(&budgets_table(&t, base_r.choice).csv())
    } else {
        output::print(&table(&args, &input, &sim, &t, &base_r))
    }
}

fn reproducible<'a>(args: &TuneArgs, sim: &SimConfig, c: &'a Choice) -> Reproducible<'a> {
    let a = simulate_args(&args.input, sim, c);
    Reproducible {
        choice: c,
        reproduce: std::iter::once("fallow".to_string())
            .chain(a.iter().map(|s| shell_quote(s)))
            .collect::<Vec<_>>()
            .join(" "),
        reproduce_args: a,
    }
}

/// The best setting per budget and the baseline for `--csv` (the text
/// table's rows; blank figures where no setting meets a budget).
fn budgets_table(t: &Tuning, base: &Choice) -> Table {
    let mut table = Table::new(vec![
        Column::new("budget", "budget"),
        Column::new("policy", "policy"),
        Column::new("throughput", "bg_throughput_bytes_per_s"),
        Column::new("added delay", "fg_mean_added_delay_s"),
        Column::new("slowdown", "fg_slowdown"),
        Column::new(t.knob.as_ref().map_or("knob", |k| k.name), "knob"),
        Column::new("req. size", "request_size_bytes"),
    ]);
    let row = |label: &str, c: Option<&Choice>| -> Vec<Cell> {
        let mut row = vec![Cell::text(label)];
        match c {
            Some(c) => row.extend([
                Cell::text(c.policy.clone()),
                Cell::num(
                    format!("{} MB/s", num(c.bg_throughput_bytes_per_s / 1e6)),
                    c.bg_throughput_bytes_per_s,
                ),
                Cell::num(secs(c.fg_mean_added_delay_s), c.fg_mean_added_delay_s),
                Cell::num(format!("{:.2} %", c.fg_slowdown * 100.0), c.fg_slowdown),
                Cell::text(c.knob.clone().unwrap_or_default()),
                Cell::int(bytes(c.request_size_bytes), c.request_size_bytes),
            ]),
            None => row.extend(std::iter::repeat_with(Cell::empty).take(6)),
        }
        row
    };
    for b in &t.budgets {
        table.push(row(&b.budget_text, b.best.as_ref()));
    }
    table.push(row("baseline", Some(base)));
    table
}

/// The Table-III-style table, the per-size detail of each budget, and the
/// reproducing commands.
fn table(
    args: &TuneArgs,
    input: &crate::prepare::Input,
    sim: &SimConfig,
    t: &Tuning,
    base: &Reproducible<'_>,
) -> String {
    let st = Style::for_stdout();
    let mut s = String::new();
    let knob = t.knob.as_ref();
    let _ = writeln!(
        s,
        "{}",
        st.bold(&format!("{} · tune {}", input.subject.title, t.policy))
    );
    for line in output::wrap(&input.subject.detail, 96) {
        let _ = writeln!(s, "  {}", st.dim(&line));
    }
    let _ = writeln!(s, "  {}", st.dim(&args.bg.describe()));
    let mut how = match knob {
        Some(k) => format!(
            "knob {} from {} to {} ({} values, {} is more aggressive)",
            k.name, k.range[0], k.range[1], k.steps, k.more_aggressive
        ),
        None => "no knob: request sizes only".into(),
    };
    let n_sizes = t.budgets.first().map_or(0, |b| b.sizes.len());
    let _ = write!(how, "; {n_sizes} sizes");
    if let Some(m) = t.max_delay_s {
        let _ = write!(how, ", at most {} per request", secs(m));
    }
    let _ = match t.method {
        "sweep" => write!(how, "; {} settings by one-pass sweep", t.simulations),
        _ => write!(how, "; {} simulations", t.simulations),
    };
    let _ = write!(how, "; {}", t.guarantee.describe());
    let _ = writeln!(s, "  {}", st.dim(&how));
    if let Some(note) = t.search_note() {
        let _ = writeln!(s, "  {note}");
    }
    let _ = writeln!(s);
    let knob_head = knob.map_or("knob", |k| k.name);
    let head = format!(
        "  {:<12}{:>14}{:>14}{:>12}{:>14}{:>12}",
        "budget", "throughput", "added delay", "slowdown", knob_head, "req. size"
    );
    let _ = writeln!(s, "{}", st.bold(&head));
    let row = |label: &str, c: Option<&Choice>| match c {
        Some(c) => format!(
            "  {:<12}{:>14}{:>14}{:>12}{:>14}{:>12}",
            label,
            format!("{} MB/s", num(c.bg_throughput_bytes_per_s / 1e6)),
            secs(c.fg_mean_added_delay_s),
            format!("{:.2} %", c.fg_slowdown * 100.0),
            c.knob.clone().unwrap_or_else(|| "–".into()),
            bytes(c.request_size_bytes)
        ),
        None => format!("  {label:<12}{:>14}", "no setting meets it"),
    };
    for b in &t.budgets {
        let _ = writeln!(s, "{}", row(&b.budget_text, b.best.as_ref()));
    }
    let base_label = format!("{} (defaults, 64 KiB)", base.choice.policy);
    let _ = writeln!(s, "{}", st.dim(&row("baseline", Some(base.choice))));
    let _ = writeln!(s, "  {}", st.dim(&format!("baseline: {base_label}")));
    let _ = writeln!(s);
    for b in &t.budgets {
        size_detail(&mut s, &st, b);
    }
    let _ = writeln!(s, "{}", st.bold("Reproduce"));
    for b in &t.budgets {
        if let Some(c) = &b.best {
            let r = reproducible(args, sim, c);
            let _ = writeln!(s, "  {}: {}", b.budget_text, r.reproduce);
        }
    }
    let _ = writeln!(s, "  baseline: {}", base.reproduce);
    s.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}

/// Best throughput per size for one budget, as a compact list.
fn size_detail(s: &mut String, st: &Style, b: &Tuned) {
    let _ = writeln!(
        s,
        "{}",
        st.bold(&format!("Per size, budget {}", b.budget_text))
    );
    let mut line = String::new();
    let mut lines = Vec::new();
    for r in &b.sizes {
        let cell = match (&r.best, r.status) {
            (Some(c), _) => format!(
                "{} {}{}",
                bytes(r.request_size_bytes),
                num(c.bg_throughput_bytes_per_s / 1e6),
                c.knob.as_ref().map_or(String::new(), |k| format!(" @{k}"))
            ),
            (None, status) => format!("{} {status}", bytes(r.request_size_bytes)),
        };
        if line.len() + cell.len() > 92 {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push_str(" · ");
        }
        line.push_str(&cell);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    for l in lines {
        let _ = writeln!(s, "  {}", st.dim(&l));
    }
    let _ = writeln!(
        s,
        "  {}",
        st.dim("(MB/s at the most aggressive setting within the budget)")
    );
    let _ = writeln!(s);
}
