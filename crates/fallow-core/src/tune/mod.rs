//! Tuning for a budget: the most BG throughput a policy gets without
//! costing the foreground more than a [`Budget`] (Practical Scrubbing
//! §V-C/D and Table III, generalised to every policy in the registry).
//!
//! For each candidate request size (sizes whose single BG request, plus the
//! switch penalty, would delay an FG request by more than the maximum are
//! excluded), the policy's aggressiveness [`Knob`](crate::policy::Knob)
//! (the wait threshold of fixed-wait, T of the estimate policies, Busy
//! Bee's idle wait, …) is bisected over a [`ladder`] of values to the most
//! aggressive setting that meets the budget; the size with the largest BG
//! throughput wins.
//!
//! ## Bisection on a function that is only monotone enough
//! More aggressive settings cost the foreground more *on the whole*, but
//! not step by step: a slightly shorter wait can move where BG requests
//! fall in an interval and make one collision's residual smaller, so the
//! feasible settings need not form one bracket. The search therefore
//! (1) simulates the whole coarse 1-2-5 grid of the ladder (19 values for
//! a wait from 100 µs to 100 s), without assuming monotonicity; (2) takes
//! the most aggressive feasible coarse value and bisects between it and
//! the next coarse value (infeasible, by (1)) with the invariant
//! "conservative end feasible, aggressive end not"; (3) reports not the
//! bracket's feasible end but the best feasible point *seen*: every
//! simulation is cached by (size, ladder step), and the answer is the
//! cached feasible point with the most BG throughput. So the tuned point
//! beats every feasible coarse-grid setting at every candidate size, and
//! finer ripples cost at most one coarse step. A size whose every coarse
//! setting breaks the budget is infeasible.
//!
//! Each thread keeps several sizes going, as many as the one-pass sweep
//! walks together ([`fast::LANES`]), and evaluates their next settings in
//! one pass; each size still takes exactly the steps it would alone
//! (`SizeSearch`), so the answers do not depend on it.
//!
//! Simulations are shared between budgets: tuning `1ms,2ms,4ms` costs
//! little more than tuning `1ms`, and because the best point of a smaller
//! budget is in the cache, a larger budget never gets less throughput. The
//! flip side: a budget tuned together with others may find a better point
//! than tuned alone (never a worse one).
//!
//! Every figure reported is a [`SimResult`] of [`simulate`] with the
//! reported policy spec and the given [`SimConfig`] (BG size set to the
//! chosen request size), so `fallow simulate` with those reproduces it
//! exactly.

mod budget;
pub mod fast;
pub mod ladder;
pub mod online;
pub mod pareto;
pub mod recommend;
mod report;
mod sizes;

pub use budget::Budget;
pub use fast::{FastSweep, Setting};
pub use ladder::{ladder, Step};
pub use report::{Answer, BudgetReport};
pub use sizes::{default_sizes, log_spaced, parse_sizes};

use crate::error::{Error, Result};
use crate::policy::{self, Entry, IntervalRule, Knob, KnobKind, MoreAggressive, Params};
use crate::sim::{simulate, MeanFigures, Prepared, SimConfig};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What to tune for.
#[derive(Debug, Clone)]
pub struct TuneConfig {
    /// The budgets, each tuned separately (simulations shared).
    pub budgets: Vec<Budget>,
    /// Candidate request sizes, bytes.
    pub sizes: Vec<u64>,
    /// Most delay one BG request may add to an FG request, ns: larger
    /// sizes are excluded (service time of one request + switch penalty;
    /// the mean for exponential service).
    pub max_delay_ns: Option<u64>,
    /// Sizes simulated at once (the results do not depend on it).
    pub threads: usize,
    /// Evaluate settings by the one-pass sweep where the policy and the
    /// run allow it ([`fast`]); `false` simulates every setting (same
    /// answers, slower: for checking).
    pub fast: bool,
    /// Exact search of the whole ladder, the coarse search, or the exact
    /// one when its estimated cost is small enough ([`SearchMode`]).
    pub search: SearchMode,
    /// [`SearchMode::Auto`]'s limit on the exact search's estimated work,
    /// interval visits ([`AUTO_EXACT_LIMIT_VISITS`] by default).
    pub auto_limit_visits: u64,
    /// Set from another thread to stop the search: `tune` then returns
    /// [`Error::Interrupted`] within one batch of settings (Python's
    /// Ctrl-C).
    pub cancel: Option<Arc<AtomicBool>>,
}

impl TuneConfig {
    /// `budgets` over the default sizes, no maximum delay, one thread.
    pub fn new(budgets: Vec<Budget>) -> TuneConfig {
        TuneConfig {
            budgets,
            sizes: default_sizes(),
            max_delay_ns: None,
            threads: 1,
            fast: true,
            search: SearchMode::Auto,
            auto_limit_visits: AUTO_EXACT_LIMIT_VISITS,
            cancel: None,
        }
    }
}

/// How [`tune`] searches the knob ladder of a policy whose interval rule
/// the one-pass sweep evaluates (fixed-wait, lossless-waiting, oracle with
/// deterministic BG service and endless BG work). Every other policy or run
/// has no exact search and always gets the coarse one; the result's
/// [`Guarantee`] says which ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SearchMode {
    /// Every ladder step at every size ([`Guarantee::Exact`]): provably the
    /// best point of the ladder, at a cost that grows with idle intervals
    /// × ladder steps × sizes (9 s of CPU on HP disk 0 with 30 sizes; about
    /// 210 s of CPU for 1 M MMPP requests, 3 budgets × 30 sizes, measured
    /// in the dev profile: docs/tuning.md).
    Exact,
    /// The coarse 1-2-5 grid plus bisection ([`Guarantee::CoarseGrid`]):
    /// seconds on any trace, no proof of optimality between grid points.
    Coarse,
    /// Exact when its estimated work ([`exact_work_visits`]) is at most
    /// [`TuneConfig::auto_limit_visits`], else coarse.
    #[default]
    Auto,
}

impl SearchMode {
    /// The name used by the CLI and Python: `exact`, `coarse`, `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Exact => "exact",
            SearchMode::Coarse => "coarse",
            SearchMode::Auto => "auto",
        }
    }

    /// Parse `exact`, `coarse` or `auto`.
    pub fn parse(s: &str) -> Result<SearchMode> {
        match s.trim() {
            "exact" => Ok(SearchMode::Exact),
            "coarse" => Ok(SearchMode::Coarse),
            "auto" => Ok(SearchMode::Auto),
            other => Err(Error::invalid(
                "search",
                format!("`{other}` is not a search mode; use auto, exact or coarse"),
            )),
        }
    }

    /// Whether the exact search runs, given that it applies and its
    /// estimated work in interval visits.
    pub fn picks_exact(self, work_visits: u64, limit_visits: u64) -> bool {
        match self {
            SearchMode::Exact => true,
            SearchMode::Coarse => false,
            SearchMode::Auto => work_visits <= limit_visits,
        }
    }
}

impl std::fmt::Display for SearchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SearchMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<SearchMode> {
        SearchMode::parse(s)
    }
}

/// Interval visits per second of one core, as [`exact_work_visits`] counts
/// them: measured on HP disk 0 (docs/tuning.md, "Choosing the search"),
/// 4.13e9 estimated visits in 9.0 s of CPU (the throughput bound skips
/// part of the estimate, so this is a rate of the estimate, not of real
/// visits): the divisor of [`Tuning::exact_estimate_s`].
pub const EXACT_VISITS_PER_S: f64 = 4.5e8;

/// Interval walks per second of one core as [`FastSweep::visits`] counts
/// them (real walks, not the bound's): the divisor of a pilot's estimate
/// (`auto` runs the exact search on one size when the bound is over its
/// limit, docs/tuning.md). HP disk 0's exact search (3 budgets, 30 sizes,
/// the bound's calibration run below) walks 1.535e9 intervals, a count
/// that does not depend on the build; that search took 9.0–9.3 s of CPU
/// in a release build: 1.65e8 per second.
pub const PILOT_VISITS_PER_S: f64 = 1.65e8;

/// The exact search's limit for `fallow tune`'s `auto` when it shows a
/// progress bar: what `threads` threads walk in `wall_s` seconds at
/// [`EXACT_VISITS_PER_S`] (run exact, with a moving bar, when it takes
/// under a minute: docs/tuning.md, "Choosing the search").
pub fn auto_limit_visits_for_wall(wall_s: f64, threads: usize) -> u64 {
    (wall_s * threads.max(1) as f64 * EXACT_VISITS_PER_S) as u64
}

/// [`SearchMode::Auto`]'s default limit: 10 s of one core at
/// [`EXACT_VISITS_PER_S`] (4.5e9 visits), about what a user waits for an
/// interactive command. HP disk 0 with 30 sizes (4.1e9) is under it; a
/// trace of 1 M requests with 30 sizes is far over it.
pub const AUTO_EXACT_LIMIT_VISITS: u64 = (10.0 * EXACT_VISITS_PER_S) as u64;

/// One size's answer per budget, with the settings evaluated.
type PerBudget = Vec<(Option<Choice>, u64)>;

/// Upper bound on the exact search's work, interval visits: every ladder
/// step of every size not excluded walks every idle interval once (the
/// throughput bound skips some steps, so the real work is often less).
/// Known before the search: the interval count, ladder length, sizes.
pub fn exact_work_visits(intervals: usize, ladder_steps: usize, sizes: usize) -> u64 {
    let w = (intervals as u128)
        .saturating_mul(ladder_steps.max(1) as u128)
        .saturating_mul(sizes as u128);
    u64::try_from(w).unwrap_or(u64::MAX)
}

/// Sizes simulated at once when none is given: `FALLOW_THREADS` if set to a
/// thread count (see [`crate::trace::threads_from_env`]), else the number
/// of cores; never more than four per core.
pub fn default_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    crate::trace::threads_from_env()
        .ok()
        .flatten()
        .unwrap_or(cores)
        .min(cores.saturating_mul(4))
        .max(1)
}

/// A policy setting and what it did: one simulation.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    /// Registry name (`fixed-wait`).
    pub policy: String,
    /// The full spec to simulate (`fixed-wait:t=205ms`).
    pub spec: String,
    /// Its parameters as written (`{"t": "205ms"}`).
    pub params: BTreeMap<String, String>,
    /// BG request size, bytes.
    pub request_size_bytes: u64,
    /// The run's BG size (`--bg-size`), bytes: the request size unless the
    /// policy takes its size as a parameter.
    pub bg_size_bytes: u64,
    /// BG bytes per second of the trace.
    pub bg_throughput_bytes_per_s: f64,
    /// Mean delay added to each FG request, s.
    pub fg_mean_added_delay_s: f64,
    /// Relative slowdown of the mean FG response time.
    pub fg_slowdown: f64,
    /// Fraction of FG requests delayed.
    pub fg_collision_rate: f64,
    /// Fraction of the idle time spent on BG work.
    pub idle_used_fraction: f64,
    /// The knob's value as written, if the policy has a knob.
    pub knob: Option<String>,
}

impl Choice {
    fn new(
        search_policy: &str,
        spec: String,
        params: BTreeMap<String, String>,
        request_size_bytes: u64,
        bg_size_bytes: u64,
        f: &MeanFigures,
        knob: Option<String>,
    ) -> Choice {
        Choice {
            policy: search_policy.to_string(),
            spec,
            params,
            request_size_bytes,
            bg_size_bytes,
            bg_throughput_bytes_per_s: f.bg_throughput_bytes_per_s,
            fg_mean_added_delay_s: f.mean_added_delay_s,
            fg_slowdown: f.slowdown,
            fg_collision_rate: f.collision_rate,
            idle_used_fraction: f.idle_used_fraction,
            knob,
        }
    }
}

/// One candidate size under one budget.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    /// Request size, bytes.
    pub request_size_bytes: u64,
    /// Delay one BG request adds to an FG request that finds it starting, s.
    pub single_request_delay_s: f64,
    /// `ok`, `infeasible` (even the most conservative setting breaks the
    /// budget) or `excluded` (one request exceeds the maximum delay).
    pub status: &'static str,
    /// The best feasible setting at this size.
    pub best: Option<Choice>,
    /// Simulations this size needed for this budget (cache hits included).
    pub steps: u64,
}

/// The answer for one budget.
#[derive(Debug, Clone, Serialize)]
pub struct Tuned {
    /// The budget.
    pub budget: Budget,
    /// The budget as written back (`1ms`, `5%`).
    pub budget_text: String,
    /// The best setting over all sizes (`None`: nothing meets the budget).
    pub best: Option<Choice>,
    /// Every candidate size.
    pub sizes: Vec<SizeRow>,
}

/// The knob searched, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct KnobInfo {
    /// Parameter name.
    pub name: &'static str,
    /// `duration` or `number`.
    pub kind: &'static str,
    /// `smaller` or `larger` values are more aggressive.
    pub more_aggressive: &'static str,
    /// Most conservative and most aggressive values searched.
    pub range: [String; 2],
    /// Values on the ladder.
    pub steps: usize,
}

/// The result of [`tune`].
#[derive(Debug, Clone, Serialize)]
pub struct Tuning {
    /// Registry name of the policy.
    pub policy: String,
    /// The knob searched (`None`: the policy has none; only sizes are tried).
    pub knob: Option<KnobInfo>,
    /// Maximum delay of one request, s, if given.
    pub max_delay_s: Option<f64>,
    /// One answer per budget, in the order given.
    pub budgets: Vec<Tuned>,
    /// Distinct settings evaluated (by simulation or by the sweep).
    pub simulations: u64,
    /// How settings were evaluated: `sweep` (the one-pass sweep over the
    /// idle intervals, [`fast`]) or `simulation`.
    pub method: &'static str,
    /// What the answer is guaranteed to be (module docs).
    pub guarantee: Guarantee,
    /// The search mode asked for.
    pub search: SearchMode,
    /// Estimated work of the exact search, interval visits
    /// ([`exact_work_visits`]); `None` when no exact search applies.
    pub exact_work_visits: Option<u64>,
    /// The exact search's estimated CPU time, seconds of one core: the
    /// bound above at [`EXACT_VISITS_PER_S`], or, where `auto` measured the
    /// search on one size first (`exact_estimate_basis` = `pilot`), the
    /// walks that size took ([`FastSweep::visits`]) × the sizes, at
    /// [`PILOT_VISITS_PER_S`].
    pub exact_estimate_s: Option<f64>,
    /// Where `exact_estimate_s` comes from: `bound` (intervals × ladder
    /// steps × sizes, known before the search) or `pilot` (the exact search
    /// run on one size); `None` when no exact search applies.
    pub exact_estimate_basis: Option<&'static str>,
    /// Intervals the sweep walked in this run, the pilot's included
    /// ([`FastSweep::visits`]; `None` without the sweep): the work the
    /// estimates are checked against (the tune bench prints it beside the
    /// CPU time).
    pub walked_visits: Option<u64>,
    /// Where the sweep applies but the coarse search ran (`auto` over its
    /// limit, or `coarse` asked): a proven upper bound on the BG
    /// throughput of every setting at every size not excluded, bytes/s —
    /// so on every budget's exact optimum, and on what the coarse answer
    /// may miss. From the sorted idle lengths alone
    /// ([`FastSweep::started_upper_bound`]: only the `c` intervals longer
    /// than a setting's wait are used, each for at most its length `L`
    /// after the wait, so at most `(Σ(L − wait) + c·(s − 1)) / s`
    /// requests of service `s` start), the largest over every ladder step
    /// and size; loose, since it ignores the budget. `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_bound_bytes_per_s: Option<f64>,
}

/// [`Tuning::exact_bound_bytes_per_s`]: the largest
/// [`FastSweep::started_upper_bound`] over every ladder step and size, in
/// bytes/s of the span (every step is bounded, not only the most
/// aggressive one, so no monotonicity is assumed; two look-ups each).
fn throughput_bound(
    search: &Search<'_>,
    sizes: impl Iterator<Item = u64>,
    span_ns: u64,
) -> Option<f64> {
    let (rule, sweep) = search.fast.as_ref()?;
    let span_s = span_ns as f64 / 1e9;
    if span_s <= 0.0 {
        return None;
    }
    let mut most = 0.0f64;
    for size in sizes {
        for step in &search.ladder {
            let n = sweep.started_upper_bound(*rule, step.value, size, search.sim);
            most = most.max(n as f64 * size as f64 / span_s);
        }
    }
    Some(most)
}

impl Tuning {
    /// Whether [`SearchMode::Auto`] chose the coarse search because the
    /// exact one was estimated too costly.
    pub fn auto_fell_back(&self) -> bool {
        self.search == SearchMode::Auto
            && self.guarantee == Guarantee::CoarseGrid
            && self.exact_work_visits.is_some()
    }

    /// One line saying the coarse search ran because the exact one was
    /// estimated too costly, and how to force it; `None` otherwise.
    pub fn search_note(&self) -> Option<String> {
        if !self.auto_fell_back() {
            return None;
        }
        let basis = match self.exact_estimate_basis {
            Some("pilot") => "measured on one size and scaled to all",
            _ => "bounded by intervals × ladder steps × sizes",
        };
        let mut note = format!(
            "search auto chose coarse: the exact search is estimated at ~{:.0} s of one core \
             ({basis}; bound {:.1e} interval visits); --search exact forces it",
            self.exact_estimate_s.unwrap_or(0.0),
            self.exact_work_visits.unwrap_or(0) as f64,
        );
        if let Some(bound) = self.exact_bound_bytes_per_s {
            let answered = self
                .budgets
                .iter()
                .map(|b| {
                    let got = b.best.as_ref().map_or(0.0, |c| c.bg_throughput_bytes_per_s);
                    format!("{} {:.3} MB/s", b.budget_text, got / 1e6)
                })
                .collect::<Vec<_>>()
                .join(", ");
            note.push_str(&format!(
                "; no setting can exceed {:.3} MB/s (a proven bound from the idle lengths \
                 alone, ignoring the budget), so the coarse answers ({answered}) miss at \
                 most the difference",
                bound / 1e6
            ));
        }
        Some(note)
    }
}

/// What a tuned answer is guaranteed to be, per size and overall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// The best point of the whole ladder: every step was evaluated, or
    /// proved unable to win by its throughput bound (policies with an
    /// interval rule, deterministic BG service, endless BG work).
    Exact,
    /// At least as good as every feasible point of the coarse 1-2-5 grid;
    /// finer steps are found by bisection, which assumes the added delay
    /// falls as the policy grows more conservative — not proved, and
    /// not true on every trace (every other policy or run).
    CoarseGrid,
}

impl Guarantee {
    /// One sentence for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Guarantee::Exact => "exact: the best point of the whole ladder at every size",
            Guarantee::CoarseGrid => {
                "coarse grid: at least every feasible 1-2-5 grid point; the bisection between them is a heuristic"
            }
        }
    }
}

/// How one policy is searched: its spec without the knob and size, and its ladder.
struct Search<'a> {
    entry: &'static Entry,
    /// Parameters the user fixed, `k=v,…` (may be empty).
    fixed: String,
    knob: Option<Knob>,
    ladder: Vec<Step>,
    prep: &'a Prepared,
    sim: &'a SimConfig,
    /// The policy's interval rule and the trace's sorted idle intervals,
    /// when the policy has a rule, no fixed parameters, and the run allows
    /// the sweep (`fast::FastSweep::new`): then the whole ladder is searched
    /// ([`Search::exact_size`]).
    fast: Option<(IntervalRule, FastSweep<'a>)>,
    /// Evaluate settings by the sweep (else by simulating them: `--no-fast`).
    sweep: bool,
    /// Order and bound the exact search's steps as it first did
    /// ([`FastSweep::started_upper_bound`]) instead of by
    /// [`FastSweep::started_no_shift`]: [`tune_exact_reference`].
    reference: bool,
}

impl<'a> Search<'a> {
    /// Check `policy_spec` (no knob, no size given) and set up its search;
    /// the spec is built once at `first_size` so a bad fixed parameter
    /// fails here.
    fn new(
        prep: &'a Prepared,
        policy_spec: &str,
        sim: &'a SimConfig,
        first_size: u64,
        allow_fast: bool,
    ) -> Result<Search<'a>> {
        let (name, params) = Params::parse(policy_spec)?;
        let entry = policy::entry(&name)?;
        let fixed = policy_spec
            .split_once(':')
            .map(|(_, r)| r.trim().to_string())
            .unwrap_or_default();
        if let Some(k) = &entry.knob {
            if params.contains(k.name) {
                return Err(Error::invalid(
                    format!("policy {}", entry.name),
                    format!("`{}` is the parameter tune searches; leave it out", k.name),
                ));
            }
        }
        let size_key = entry.size_param.unwrap_or("size");
        if params.contains(size_key) {
            return Err(Error::invalid(
                format!("policy {}", entry.name),
                format!("`{size_key}` is the request size tune searches; leave it out"),
            ));
        }
        let search = Search {
            entry,
            knob: entry.knob,
            ladder: entry.knob.as_ref().map(ladder).unwrap_or_default(),
            fixed: fixed.clone(),
            prep,
            sim,
            fast: match entry.interval_rule {
                Some(rule) if fixed.is_empty() => FastSweep::new(prep, sim).map(|f| (rule, f)),
                _ => None,
            },
            sweep: allow_fast,
            reference: false,
        };
        // a bad fixed parameter fails here, once, not in every thread
        policy::build(&search.setting(first_size, 0).0)?;
        Ok(search)
    }
}

impl Search<'_> {
    /// Ladder indices of the coarse grid, most conservative first (step
    /// 0 alone when the policy has no knob: only sizes are tried).
    fn coarse(&self) -> Vec<usize> {
        if self.ladder.is_empty() {
            return vec![0];
        }
        (0..self.ladder.len())
            .filter(|&i| self.ladder[i].coarse || i + 1 == self.ladder.len())
            .collect()
    }

    /// Steps one budget's search takes at most for one size.
    fn max_steps(&self) -> u64 {
        let coarse = self.coarse();
        let mut gap = coarse[0];
        for w in coarse.windows(2) {
            gap = gap.max(w[1] - w[0]);
        }
        let bisect = (usize::BITS - gap.saturating_sub(1).leading_zeros()) as u64;
        coarse.len() as u64 + bisect
    }

    /// Spec, parameters and run settings of ladder step `i` at `size`.
    fn setting(&self, size: u64, i: usize) -> (String, BTreeMap<String, String>, SimConfig) {
        let mut params = BTreeMap::new();
        let mut cfg = self.sim.clone();
        match self.entry.size_param {
            Some(p) => {
                params.insert(p.to_string(), size.to_string());
            }
            None => cfg.bg_size_bytes = size,
        }
        if let Some(k) = &self.knob {
            params.insert(k.name.to_string(), self.ladder[i].text.clone());
        }
        let mut parts: Vec<String> = Vec::new();
        if !self.fixed.is_empty() {
            parts.push(self.fixed.clone());
        }
        parts.extend(params.iter().map(|(k, v)| format!("{k}={v}")));
        let spec = if parts.is_empty() {
            self.entry.name.to_string()
        } else {
            format!("{}:{}", self.entry.name, parts.join(","))
        };
        // the user's fixed parameters belong to the reported params too
        for kv in self.fixed.split(',').filter(|s| !s.trim().is_empty()) {
            if let Some((k, v)) = kv.split_once('=') {
                params.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        (spec, params, cfg)
    }

    /// Evaluate settings `(size, ladder step)`: by the one-pass sweep
    /// when the search has one (several in one pass, [`FastSweep::totals_many`]),
    /// else by simulating each. `None`: the sweep stopped once the delay
    /// added passed `cap_added_ns` (over every budget).
    fn run(&self, asks: &[(u64, usize)], cap_added_ns: u128) -> Vec<Result<Option<Choice>>> {
        let choice = |size: u64, i: usize, figures: &MeanFigures| {
            let (spec, params, cfg) = self.setting(size, i);
            Choice::new(
                self.entry.name,
                spec,
                params,
                size,
                cfg.bg_size_bytes,
                figures,
                self.knob.map(|_| self.ladder[i].text.clone()),
            )
        };
        match self.fast.as_ref().filter(|_| self.sweep) {
            Some((rule, sweep)) => {
                let settings: Vec<Setting> = asks
                    .iter()
                    .map(|&(size, i)| Setting {
                        value: self.ladder.get(i).map_or(0.0, |s| s.value),
                        size_bytes: size,
                        cap_added_ns: Some(cap_added_ns),
                    })
                    .collect();
                // the sweep reads only the service and the penalty from the run settings
                let totals = sweep.totals_many(*rule, &settings, self.sim);
                totals
                    .iter()
                    .zip(asks)
                    .map(|(t, &(size, i))| Ok(t.map(|t| choice(size, i, &self.prep.figures(&t)))))
                    .collect()
            }
            None => asks
                .iter()
                .map(|&(size, i)| {
                    let (spec, _, cfg) = self.setting(size, i);
                    let mut pol = policy::build(&spec)?;
                    let r = simulate(self.prep, pol.as_mut(), &cfg)?;
                    Ok(Some(choice(size, i, &r.mean_figures())))
                })
                .collect(),
        }
    }

    /// Total added delay (ns) above which a setting breaks every budget:
    /// the largest budget's limit, with a margin for float rounding.
    fn cap_added_ns(&self, budgets: &[Budget]) -> u128 {
        let n = self.prep.requests() as f64;
        let most = budgets
            .iter()
            .map(|b| match *b {
                Budget::AddedDelay { ns } => ns as f64 * n,
                Budget::Slowdown { fraction } => fraction * self.prep.baseline_mean_ns() * n,
            })
            .fold(0.0, f64::max);
        (most * (1.0 + 1e-6)) as u128 + 1
    }
}

/// The exact search at one size (module docs, "Exact where the sweep
/// applies"): every ladder step is evaluated by the one-pass sweep unless
/// its throughput bound is below the best feasible point every budget
/// already has. Per budget, the best point and the settings evaluated at
/// this size (shared between budgets).
impl Search<'_> {
    fn exact_size(
        &self,
        size: u64,
        budgets: &[Budget],
        stop: &dyn Fn() -> bool,
        tick: &dyn Fn(u64),
    ) -> Result<Vec<(Option<Choice>, u64)>> {
        let Some((rule, sweep)) = &self.fast else {
            return Err(Error::invalid("tune", "the exact search needs the sweep"));
        };
        let steps = self.ladder.len().max(1);
        let value = |i: usize| self.ladder.get(i).map_or(0.0, |s| s.value);
        // (bound on BG requests started, ladder step), largest bound first;
        // ties: the more conservative step first
        let bounds: Vec<u64> = if self.reference {
            (0..steps)
                .map(|i| sweep.started_upper_bound(*rule, value(i), size, self.sim))
                .collect()
        } else {
            let values: Vec<f64> = (0..steps).map(value).collect();
            sweep.started_no_shift(*rule, &values, size, self.sim)
        };
        let mut order: Vec<(u64, usize)> = bounds.into_iter().zip(0..steps).collect();
        order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let limit_ns = |b: &Budget| -> u128 { self.cap_added_ns(std::slice::from_ref(b)) };
        // per budget: (BG requests started, added ns, ladder step) of the best feasible point
        let mut best: Vec<Option<(u64, f64, usize)>> = vec![None; budgets.len()];
        let mut evaluated = 0u64;
        let mut at = 0;
        while at < order.len() {
            if stop() {
                return Err(Error::Interrupted);
            }
            // the next settings some budget still needs: bound ≥ its best
            // (equal may tie on throughput with a lower delay)
            let open = |bound: u64, best: &[Option<(u64, f64, usize)>]| {
                best.iter().any(|b| b.is_none_or(|(n, _, _)| bound >= n))
            };
            let mut batch: Vec<usize> = Vec::with_capacity(fast::LANES * 4);
            let mut skipped = 0u64;
            while at < order.len() && batch.len() < fast::LANES * 4 {
                let (bound, i) = order[at];
                if !open(bound, &best) {
                    // sorted by bound, and the bests only grow: no later
                    // step can win either
                    skipped = (order.len() - at) as u64;
                    at = order.len();
                    break;
                }
                at += 1;
                batch.push(i);
            }
            tick(skipped);
            if batch.is_empty() {
                break;
            }
            // the largest bound in the batch decides which budgets it serves
            let batch_bound = order[at - batch.len()].0;
            // the cap: the largest limit among budgets still open
            let cap = budgets
                .iter()
                .zip(&best)
                .filter(|(_, b)| b.is_none_or(|(n, _, _)| batch_bound >= n))
                .map(|(b, _)| limit_ns(b))
                .max()
                .unwrap_or(u128::MAX);
            let settings: Vec<Setting> = batch
                .iter()
                .map(|&i| Setting {
                    value: value(i),
                    size_bytes: size,
                    cap_added_ns: Some(cap),
                })
                .collect();
            // (BG requests started, mean added delay s, its figures) per
            // setting; `None`: over the cap, so over every budget still open
            let points: Vec<Option<(u64, MeanFigures)>> = if self.sweep {
                sweep
                    .totals_many(*rule, &settings, self.sim)
                    .into_iter()
                    .map(|t| t.map(|t| (t.bg_completed, self.prep.figures(&t))))
                    .collect()
            } else {
                let mut v = Vec::with_capacity(batch.len());
                for &i in &batch {
                    let (spec, _, cfg) = self.setting(size, i);
                    let mut pol = policy::build(&spec)?;
                    let r = simulate(self.prep, pol.as_mut(), &cfg)?;
                    v.push(Some((r.bg.completed, r.mean_figures())));
                }
                v
            };
            evaluated += batch.len() as u64;
            tick(batch.len() as u64);
            for (&i, p) in batch.iter().zip(&points) {
                let Some((started, f)) = p else { continue };
                for (b, slot) in budgets.iter().zip(best.iter_mut()) {
                    if !b.meets_means(f.slowdown, f.mean_added_delay_s) {
                        continue;
                    }
                    // most requests, then the least added delay, then the
                    // more conservative step (lower ladder index)
                    let better = slot.is_none_or(|(n, a, j)| {
                        started
                            .cmp(&n)
                            .then(a.total_cmp(&f.mean_added_delay_s))
                            .then(j.cmp(&i))
                            .is_gt()
                    });
                    if better {
                        *slot = Some((*started, f.mean_added_delay_s, i));
                    }
                }
            }
        }
        // the chosen points, re-evaluated once for their figures
        best.iter()
            .map(|b| {
                let c = match b {
                    Some((_, _, i)) => self.run(&[(size, *i)], u128::MAX).remove(0)?,
                    None => None,
                };
                Ok((c, evaluated))
            })
            .collect()
    }
}

/// Where one budget's search at one size stands (the order of the module docs).
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Scanning the coarse grid: its `k`-th value next, and the most
    /// aggressive feasible one so far.
    Coarse { k: usize, last_ok: Option<usize> },
    /// Bisecting between ladder steps `lo` (feasible) and `hi` (not).
    Bisect { lo: usize, hi: usize },
}

/// One size's search for every budget, as a state machine: a thread keeps
/// several sizes going and evaluates their next settings together (in one
/// pass of the sweep), while each size takes exactly the steps it would
/// alone.
struct SizeSearch {
    size: u64,
    /// Ladder step → its figures (`None`: over every budget), shared
    /// between budgets.
    cache: HashMap<usize, Option<Choice>>,
    /// The budget being searched.
    budget: usize,
    /// Settings this budget's search has asked for (cache hits included).
    steps: u64,
    phase: Phase,
    /// Best feasible point and steps of each budget done.
    done: Vec<(Option<Choice>, u64)>,
}

impl SizeSearch {
    fn new(size: u64) -> SizeSearch {
        SizeSearch {
            size,
            cache: HashMap::new(),
            budget: 0,
            steps: 0,
            phase: Phase::Coarse {
                k: 0,
                last_ok: None,
            },
            done: Vec::new(),
        }
    }

    /// Go on through settings already evaluated; the ladder step the search
    /// needs next, or `None` once every budget is done.
    fn next(
        &mut self,
        coarse: &[usize],
        budgets: &[Budget],
        max_steps: u64,
        tick: &dyn Fn(u64),
    ) -> Option<usize> {
        loop {
            let b = budgets.get(self.budget)?;
            let want = match self.phase {
                Phase::Coarse { k, .. } => coarse.get(k).copied(),
                Phase::Bisect { lo, hi } => (hi - lo > 1).then(|| lo + (hi - lo) / 2),
            };
            let Some(i) = want else {
                // (2) bisect from the most aggressive feasible coarse value
                // to the next one (invariant: lo feasible, hi not)
                if let Phase::Coarse { last_ok, .. } = self.phase {
                    if let Some(k) = last_ok.filter(|&k| k + 1 < coarse.len()) {
                        self.phase = Phase::Bisect {
                            lo: coarse[k],
                            hi: coarse[k + 1],
                        };
                        continue;
                    }
                }
                self.finish_budget(b, max_steps, tick);
                continue;
            };
            let ok = match self.cache.get(&i) {
                None => return Some(i),
                Some(c) => c
                    .as_ref()
                    .is_some_and(|c| b.meets_means(c.fg_slowdown, c.fg_mean_added_delay_s)),
            };
            self.steps += 1;
            tick(1);
            self.phase = match self.phase {
                // (1) the coarse grid, in full
                Phase::Coarse { k, last_ok } => Phase::Coarse {
                    k: k + 1,
                    last_ok: if ok { Some(k) } else { last_ok },
                },
                Phase::Bisect { lo, hi } => {
                    if ok {
                        Phase::Bisect { lo: i, hi }
                    } else {
                        Phase::Bisect { lo, hi: i }
                    }
                }
            };
        }
    }

    /// Budget `b` is searched: keep its best point, start the next budget.
    fn finish_budget(&mut self, b: &Budget, max_steps: u64, tick: &dyn Fn(u64)) {
        tick(max_steps.saturating_sub(self.steps));
        // the best feasible point seen at this size (see the module docs)
        let best = self
            .cache
            .iter()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
            .filter(|(_, c)| b.meets_means(c.fg_slowdown, c.fg_mean_added_delay_s))
            .max_by(|(i, a), (j, c)| {
                a.bg_throughput_bytes_per_s
                    .total_cmp(&c.bg_throughput_bytes_per_s)
                    .then(c.fg_mean_added_delay_s.total_cmp(&a.fg_mean_added_delay_s))
                    .then(j.cmp(i))
            })
            .map(|(_, c)| c.clone());
        self.done.push((best, self.steps));
        self.budget += 1;
        self.steps = 0;
        self.phase = Phase::Coarse {
            k: 0,
            last_ok: None,
        };
    }
}

/// Delay one BG request of `size` adds to an FG request that finds it
/// starting: its service time (the mean for exponential service) plus the
/// switch penalty, ns.
pub fn single_request_delay_ns(sim: &SimConfig, size: u64) -> f64 {
    sim.bg_service.mean_ns(size) + sim.switch_penalty_ns as f64
}

/// Tune `policy_spec` (a registry name, optionally with parameters to keep
/// fixed: `busy-bee:window=1h`) on `prep` for every budget of `cfg`.
/// `progress(done, total)` is called as the search advances (from several
/// threads when `cfg.threads > 1`).
pub fn tune(
    prep: &Prepared,
    policy_spec: &str,
    sim: &SimConfig,
    cfg: &TuneConfig,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Tuning> {
    tune_with(prep, policy_spec, sim, cfg, progress, false)
}

/// [`tune`] with the exact search as it first was: the same
/// settings evaluated the same way, but ordered and bounded out by the
/// looser [`FastSweep::started_upper_bound`], so it walks more of them.
/// Every answer (each budget's and each size's best point) equals
/// [`tune`]'s; only the settings evaluated (`steps`, `simulations`) and
/// the work differ. Kept as the reference the tests and the tune bench
/// compare the faster search against.
pub fn tune_exact_reference(
    prep: &Prepared,
    policy_spec: &str,
    sim: &SimConfig,
    cfg: &TuneConfig,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Tuning> {
    tune_with(prep, policy_spec, sim, cfg, progress, true)
}

fn tune_with(
    prep: &Prepared,
    policy_spec: &str,
    sim: &SimConfig,
    cfg: &TuneConfig,
    progress: &(dyn Fn(u64, u64) + Sync),
    reference: bool,
) -> Result<Tuning> {
    if cfg.budgets.is_empty() {
        return Err(Error::invalid("budget", "give at least one budget"));
    }
    if cfg.sizes.is_empty() {
        return Err(Error::invalid("sizes", "give at least one request size"));
    }
    // the tuner chooses among sizes: the model must charge for them
    crate::sim::check_sizes(&sim.bg_service, None, cfg.sizes.len())?;
    let mut search = Search::new(prep, policy_spec, sim, cfg.sizes[0], cfg.fast)?;
    search.reference = reference;
    let entry = search.entry;

    let excluded = |size: u64| {
        cfg.max_delay_ns
            .is_some_and(|m| single_request_delay_ns(sim, size) > m as f64)
    };
    let stop = || {
        cfg.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    };
    let SearchChoice {
        exact,
        work,
        estimate_s,
        basis,
        pilot,
    } = choose_search(&search, cfg, &excluded, &stop)?;
    let per_size = if exact {
        search.ladder.len().max(1) as u64
    } else {
        search.max_steps() * cfg.budgets.len() as u64
    };
    let total = per_size * cfg.sizes.len() as u64;
    let done = AtomicU64::new(0);
    let tick = |n: u64| {
        if n > 0 {
            let d = done.fetch_add(n, Ordering::Relaxed) + n;
            progress(d, total);
        }
    };
    progress(0, total);
    let searches = SizeSearches {
        search: &search,
        cfg,
        excluded: &excluded,
        stop: &stop,
        tick: &tick,
        per_size,
        next: AtomicUsize::new(0),
        sims: AtomicU64::new(0),
        results: Mutex::new((0..cfg.sizes.len()).map(|_| None).collect()),
    };
    if let Some((at, res)) = pilot {
        searches
            .sims
            .fetch_add(res.first().map_or(0, |x| x.1), Ordering::Relaxed);
        searches.set(at, Ok(res));
        tick(per_size);
    }
    searches.run(exact);
    let (per_size_results, simulations) = searches.into_answers()?;
    let budgets = per_budget_answers(cfg, sim, &per_size_results, &excluded);
    Ok(Tuning {
        policy: entry.name.to_string(),
        knob: knob_info(entry, &search.ladder),
        max_delay_s: cfg.max_delay_ns.map(|n| n as f64 / 1e9),
        budgets,
        simulations,
        method: if search.fast.is_some() && search.sweep {
            "sweep"
        } else {
            "simulation"
        },
        guarantee: if exact {
            Guarantee::Exact
        } else {
            Guarantee::CoarseGrid
        },
        search: cfg.search,
        exact_work_visits: work,
        exact_estimate_s: estimate_s,
        exact_estimate_basis: basis,
        walked_visits: search.fast.as_ref().map(|(_, f)| f.visits()),
        exact_bound_bytes_per_s: if exact {
            None
        } else {
            throughput_bound(
                &search,
                cfg.sizes.iter().copied().filter(|&s| !excluded(s)),
                prep.span_ns(),
            )
        },
    })
}

/// One size's per-budget answers, or why its search failed.
type SizeResult = Result<PerBudget>;

/// The per-size searches of one [`tune_with`], shared by its threads: each
/// thread takes the next size of `cfg.sizes` and leaves its answers in
/// `results`; an error stops the handing out of sizes.
struct SizeSearches<'w, 's> {
    search: &'w Search<'s>,
    cfg: &'w TuneConfig,
    /// Sizes whose single request is over `--max-delay`: not searched.
    excluded: &'w (dyn Fn(u64) -> bool + Sync),
    /// The cancel flag is set.
    stop: &'w (dyn Fn() -> bool + Sync),
    /// Settings done, for progress.
    tick: &'w (dyn Fn(u64) + Sync),
    /// Settings of one size, for progress.
    per_size: u64,
    /// The next index of `cfg.sizes` to hand out.
    next: AtomicUsize,
    /// Simulations run.
    sims: AtomicU64,
    /// Per size of `cfg.sizes`, once done.
    results: Mutex<Vec<Option<SizeResult>>>,
}

impl SizeSearches<'_, '_> {
    fn set(&self, i: usize, r: SizeResult) {
        self.results.lock().expect("no panics")[i] = Some(r);
    }

    /// Hand out no more sizes (after an error or a cancel).
    fn stop_handing_out(&self) {
        self.next.store(self.cfg.sizes.len(), Ordering::Relaxed);
    }

    /// Search every size on `cfg.threads` threads: with the exact search
    /// or the coarse grid and bisection.
    fn run(&self, exact: bool) {
        let search = self.search;
        let coarse = search.coarse();
        let max_steps = search.max_steps();
        let cap = search.cap_added_ns(&self.cfg.budgets);
        // sizes each thread keeps going: as many as the sweep walks in one pass
        let lanes = if search.fast.is_some() && search.sweep {
            fast::LANES
        } else {
            1
        };
        std::thread::scope(|s| {
            for _ in 0..self.cfg.threads.clamp(1, self.cfg.sizes.len()) {
                s.spawn(|| {
                    if exact {
                        self.exact_sizes();
                    } else {
                        self.stepped_sizes(lanes, &coarse, max_steps, cap);
                    }
                });
            }
        });
    }

    /// One thread of the exact search: one size at a time, its whole ladder.
    fn exact_sizes(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&size) = self.cfg.sizes.get(i) else {
                break;
            };
            if self.results.lock().expect("no panics")[i].is_some() {
                continue; // the pilot's size
            }
            let r = if (self.excluded)(size) {
                (self.tick)(self.per_size);
                Ok(Vec::new())
            } else {
                self.search
                    .exact_size(size, &self.cfg.budgets, self.stop, self.tick)
            };
            if let Ok(r) = &r {
                self.sims
                    .fetch_add(r.first().map_or(0, |x| x.1), Ordering::Relaxed);
            } else {
                self.stop_handing_out();
            }
            self.set(i, r);
        }
    }

    /// One thread of the coarse-grid search: up to `lanes` sizes going at
    /// once, each asking for its next setting, evaluated together.
    fn stepped_sizes(&self, lanes: usize, coarse: &[usize], max_steps: u64, cap: u128) {
        // (index in cfg.sizes, its search)
        let mut going: Vec<(usize, SizeSearch)> = Vec::new();
        loop {
            while going.len() < lanes {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                let Some(&size) = self.cfg.sizes.get(i) else {
                    break;
                };
                if (self.excluded)(size) {
                    (self.tick)(self.per_size);
                    self.set(i, Ok(Vec::new()));
                } else {
                    going.push((i, SizeSearch::new(size)));
                }
            }
            if going.is_empty() {
                break;
            }
            // each size's next setting (asks[g] for going[g]); finished sizes leave
            let mut asks = Vec::with_capacity(going.len());
            let mut g = 0;
            while g < going.len() {
                match going[g]
                    .1
                    .next(coarse, &self.cfg.budgets, max_steps, self.tick)
                {
                    Some(step) => {
                        asks.push((going[g].1.size, step));
                        g += 1;
                    }
                    None => {
                        let (i, done) = going.swap_remove(g);
                        self.set(i, Ok(done.done));
                    }
                }
            }
            if (self.stop)() {
                for (i, _) in going.drain(..) {
                    self.set(i, Err(Error::Interrupted));
                }
                self.stop_handing_out();
                break;
            }
            self.sims.fetch_add(asks.len() as u64, Ordering::Relaxed);
            let evaluated = self.search.run(&asks, cap);
            // backwards, so that a failed size's removal moves only sizes already fed
            for (g, r) in evaluated.into_iter().enumerate().rev() {
                match r {
                    Ok(c) => {
                        going[g].1.cache.insert(asks[g].1, c);
                    }
                    Err(e) => {
                        let (i, _) = going.swap_remove(g);
                        self.set(i, Err(e));
                        // stop handing out sizes; the error is reported below
                        self.stop_handing_out();
                    }
                }
            }
        }
    }

    /// Each size's answers in the order of `cfg.sizes` (none for a size
    /// skipped after an error), or the first error; and the simulations run.
    fn into_answers(self) -> Result<(Vec<PerBudget>, u64)> {
        let mut per_size_results = Vec::with_capacity(self.cfg.sizes.len());
        for r in self.results.into_inner().expect("no panics") {
            match r {
                Some(r) => per_size_results.push(r?),
                None => per_size_results.push(Vec::new()), // skipped after an error
            }
        }
        Ok((per_size_results, self.sims.into_inner()))
    }
}

/// Whether the exact search runs, and what `--json` says of the choice.
struct SearchChoice {
    exact: bool,
    /// The bound on the exact search's work, interval visits (where the
    /// sweep applies).
    work: Option<u64>,
    estimate_s: Option<f64>,
    /// `bound` or `pilot`: what the estimate rests on.
    basis: Option<&'static str>,
    /// (index of the pilot's size, its per-budget answers) when `auto`
    /// ran the pilot in full and goes on with the exact search.
    pilot: Option<(usize, PerBudget)>,
}

/// `--search`'s choice (docs/tuning.md, "Choosing the search"): `exact`
/// and `coarse` as asked; `auto` exact when the bound on its work is
/// within the limit, else after a pilot on the middle size measured the
/// whole within it.
fn choose_search(
    search: &Search,
    cfg: &TuneConfig,
    excluded: &dyn Fn(u64) -> bool,
    stop: &dyn Fn() -> bool,
) -> Result<SearchChoice> {
    let work = search.fast.as_ref().map(|(_, sweep)| {
        let sizes = cfg.sizes.iter().filter(|&&s| !excluded(s)).count();
        exact_work_visits(sweep.intervals(), search.ladder.len(), sizes)
    });
    let mut exact = work.is_some_and(|w| cfg.search.picks_exact(w, cfg.auto_limit_visits));
    let mut estimate_s = work.map(|w| w as f64 / EXACT_VISITS_PER_S);
    let mut basis = work.map(|_| "bound");
    // The bound counts every ladder step walking every interval; the real
    // search walks far less (steps bounded out, walks stopped at the cap,
    // long waits visiting few intervals): up to 50× on real traces. Over
    // the limit, auto runs the exact search on the middle size, stopped
    // once it has used its share of the limit, and decides on what it
    // measured. The pilot's answer is kept when exact goes on.
    // (index of the pilot's size, its per-budget answers)
    let mut pilot: Option<(usize, PerBudget)> = None;
    if let (false, SearchMode::Auto, Some((_, sweep))) = (exact, cfg.search, &search.fast) {
        let live: Vec<usize> = (0..cfg.sizes.len())
            .filter(|&i| !excluded(cfg.sizes[i]))
            .collect();
        if let Some(&at) = live.get(live.len() / 2) {
            let sizes = live.len() as f64;
            let limit_s = cfg.auto_limit_visits as f64 / EXACT_VISITS_PER_S;
            let share_visits = (limit_s / sizes * PILOT_VISITS_PER_S) as u64;
            let before = sweep.visits();
            let ticked = AtomicU64::new(0);
            let over = || sweep.visits() - before > share_visits;
            let r = search.exact_size(cfg.sizes[at], &cfg.budgets, &|| stop() || over(), &|k| {
                ticked.fetch_add(k, Ordering::Relaxed);
            });
            let used = (sweep.visits() - before) as f64;
            basis = Some("pilot");
            match r {
                Ok(res) => {
                    let s = used * sizes / PILOT_VISITS_PER_S;
                    estimate_s = Some(s);
                    if s <= limit_s {
                        exact = true;
                        pilot = Some((at, res));
                    }
                }
                Err(Error::Interrupted) if !stop() => {
                    // over its share: scaled by the share of the ladder done
                    let steps = search.ladder.len().max(1) as f64;
                    let done = (ticked.load(Ordering::Relaxed) as f64).clamp(1.0, steps);
                    estimate_s = Some(used * steps / done * sizes / PILOT_VISITS_PER_S);
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(SearchChoice {
        exact,
        work,
        estimate_s,
        basis,
        pilot,
    })
}

/// Per budget: each size's best setting (`per_size[i][budget]`, its
/// answer and the settings it took) as a row, and the best size (most
/// throughput; a tie goes to the smaller size, listed first).
fn per_budget_answers(
    cfg: &TuneConfig,
    sim: &SimConfig,
    per_size: &[Vec<(Option<Choice>, u64)>],
    excluded: &dyn Fn(u64) -> bool,
) -> Vec<Tuned> {
    cfg.budgets
        .iter()
        .enumerate()
        .map(|(bi, b)| {
            let sizes: Vec<SizeRow> = cfg
                .sizes
                .iter()
                .zip(per_size)
                .map(|(&size, r)| {
                    let (best, steps) = r.get(bi).cloned().unwrap_or((None, 0));
                    SizeRow {
                        request_size_bytes: size,
                        single_request_delay_s: single_request_delay_ns(sim, size) / 1e9,
                        status: if excluded(size) {
                            "excluded"
                        } else if best.is_some() {
                            "ok"
                        } else {
                            "infeasible"
                        },
                        best,
                        steps,
                    }
                })
                .collect();
            // most throughput; a tie goes to the smaller size (listed first)
            let best = sizes
                .iter()
                .filter_map(|r| r.best.as_ref())
                .fold(None::<&Choice>, |acc, c| match acc {
                    Some(a) if a.bg_throughput_bytes_per_s >= c.bg_throughput_bytes_per_s => {
                        Some(a)
                    }
                    _ => Some(c),
                })
                .cloned();
            Tuned {
                budget: *b,
                budget_text: b.to_string(),
                best,
                sizes,
            }
        })
        .collect()
}

/// What `--json` says of the knob searched, and the ladder's range.
fn knob_info(entry: &Entry, l: &[Step]) -> Option<KnobInfo> {
    entry.knob.as_ref().map(|k| KnobInfo {
        name: k.name,
        kind: match k.kind {
            KnobKind::Duration => "duration",
            KnobKind::Number => "number",
        },
        more_aggressive: match k.more_aggressive {
            MoreAggressive::Smaller => "smaller",
            MoreAggressive::Larger => "larger",
        },
        range: [l[0].text.clone(), l[l.len() - 1].text.clone()],
        steps: l.len(),
    })
}

/// The OS's out-of-the-box policy ([`policy::BASELINE`], Linux's idle I/O
/// class) at its default parameters and 64 KiB requests, as Practical
/// Scrubbing Table III reports CFQ beside the tuned results.
pub fn baseline(prep: &Prepared, sim: &SimConfig) -> Result<Choice> {
    const SIZE: u64 = 64 << 10;
    let entry = policy::entry(policy::BASELINE)?;
    let mut cfg = sim.clone();
    let mut params = BTreeMap::new();
    let spec = match entry.size_param {
        Some(p) => {
            params.insert(p.to_string(), SIZE.to_string());
            format!("{}:{p}={SIZE}", entry.name)
        }
        None => {
            cfg.bg_size_bytes = SIZE;
            entry.name.to_string()
        }
    };
    let mut pol = policy::build(&spec)?;
    let r = simulate(prep, pol.as_mut(), &cfg)?;
    Ok(Choice::new(
        entry.name,
        spec,
        params,
        SIZE,
        cfg.bg_size_bytes,
        &r.mean_figures(),
        entry.knob_default().map(str::to_string),
    ))
}
