//! Which policy to deploy: every deployable policy with a knob is
//! [`tune`](super::tune)d for one budget over one size list, ranked by the
//! BG throughput it gets within the budget, and each rank is explained in
//! one line from the trace's idle-time character — the same statistics as
//! [`characterize`](crate::characterize) (idle-interval CV, Mi et al.'s
//! lag-pair clustering of long intervals, Busy Bee's cluster window size).

use super::{tune, Budget, Choice, Guarantee, SearchMode, TuneConfig};
use crate::error::Result;
use crate::policy;
use crate::sim::{simulate, Prepared, SimConfig};
use crate::stats;
use serde::Serialize;
use std::collections::HashMap;

/// The trace features the explanations use.
#[derive(Debug, Clone, Serialize)]
pub struct Traits {
    /// Idle intervals.
    pub idle_intervals: u64,
    /// CV of the idle-interval lengths.
    pub idle_cv: f64,
    /// Share of idle intervals that are long (above (CV+1)·mean).
    pub long_fraction: f64,
    /// P(long next | long now) at lag 1 (`None`: no long interval).
    pub long_after_long: Option<f64>,
    /// Long intervals cluster: P(long after long) is at least twice the
    /// share of long intervals and at least 0.2.
    pub long_intervals_cluster: bool,
    /// Busy Bee's cluster window size (Eq. 1), in busy periods.
    pub busy_cws: u32,
    /// Whether Σ P_lag reached 0.8 within 20 lags.
    pub busy_cws_reached: bool,
}

impl Traits {
    /// The features of `prep`'s idle intervals and busy periods.
    pub fn of(prep: &Prepared) -> Traits {
        let p = prep.periods();
        let idle_s: Vec<f64> = p.idle_len_ns.iter().map(|&x| x as f64 / 1e9).collect();
        let idle = stats::Summary::of(&idle_s);
        let lp = stats::LagPairs::of(&idle_s, 1);
        let long_fraction = 1.0 - lp.small_fraction;
        let long_after_long = lp.lags.first().and_then(|l| l.large_large);
        let busy = stats::busy_clusters(&p.busy_requests, 20);
        Traits {
            idle_intervals: idle.count,
            idle_cv: idle.cv,
            long_fraction,
            long_after_long,
            long_intervals_cluster: long_after_long
                .is_some_and(|ll| ll >= 0.2 && ll >= 2.0 * long_fraction),
            busy_cws: busy.cws,
            busy_cws_reached: busy.cws_reached,
        }
    }

    /// One phrase: `idle times are highly variable (CV 7.4) and long
    /// intervals do not cluster`.
    pub fn phrase(&self) -> String {
        let cv = self.idle_cv;
        let var = if cv >= 2.0 {
            format!("idle times are highly variable (CV {cv:.1})")
        } else if cv >= 1.0 {
            format!("idle times are moderately variable (CV {cv:.1})")
        } else {
            format!("idle times are regular (CV {cv:.1})")
        };
        let cluster = match self.long_after_long {
            Some(ll) if self.long_intervals_cluster => format!(
                "long intervals cluster (P(long after long) {:.2} against {:.2} overall)",
                ll, self.long_fraction
            ),
            Some(_) => "long intervals do not cluster".to_string(),
            None => "there are no long intervals".to_string(),
        };
        let busy = if self.busy_cws_reached {
            format!("busy periods cluster within {} periods", self.busy_cws)
        } else {
            "busy periods do not cluster".to_string()
        };
        format!("{var} and {cluster}; {busy}")
    }
}

/// One policy in the ranking.
#[derive(Debug, Clone, Serialize)]
pub struct Ranked {
    /// 1 for the best; 0: not ranked (no BG work within the budget, or
    /// no setting meets it).
    pub rank: usize,
    /// Registry name.
    pub policy: String,
    /// Its tuned setting (`None`: nothing meets the budget).
    pub best: Option<Choice>,
    /// Throughput relative to the next feasible policy down (`0.18` = 18 %
    /// more), for the top entry; relative to the top for the others.
    pub relative: Option<f64>,
    /// One line: why it ranks where it does.
    pub reason: String,
    /// What its tuned setting is guaranteed to be: `exact` (the best point
    /// of the knob ladder at every size) or `coarse-grid`.
    pub guarantee: Guarantee,
    /// Mean size of the BG requests its best setting completes, bytes, for
    /// a policy that chooses its own request sizes (adaptive-size): the
    /// size it actually reaches, where `best.request_size_bytes` is only
    /// the size it starts from. `None` for other policies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_bg_request_bytes: Option<f64>,
    /// Set when the policy never finished learning on this trace and so
    /// behaved as the policy named here throughout (Busy Bee on a trace
    /// shorter than its learning window is `fixed-wait` at its idle wait):
    /// it is then ranked below that policy, never above it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub never_learned: Option<String>,
}

/// Throughput within this fraction of a better-ranked policy's is a tie
/// that goes to the lower added FG delay (1 %: a 0.006 % edge bought with
/// 43 % more FG delay, as on HP disk 0 at 2 ms, is no reason to rank first).
pub const THROUGHPUT_TOLERANCE: f64 = 0.01;

/// The result of [`recommend`].
#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    /// The budget.
    pub budget: Budget,
    /// As written back.
    pub budget_text: String,
    /// Request sizes tried for every policy, bytes.
    pub sizes: Vec<u64>,
    /// Trace features behind the reasons.
    pub traits: Traits,
    /// Best first; then, unranked, policies that do no BG work within the
    /// budget and those with no feasible setting, by name.
    pub ranking: Vec<Ranked>,
    /// Distinct simulations run.
    pub simulations: u64,
    /// The search mode asked for (`auto`, `exact`, `coarse`); each
    /// policy's `guarantee` says which search ran.
    pub search: SearchMode,
    /// Candidates left out, each with why: a policy that chooses its own
    /// request sizes under a BG model that does not charge for size
    /// ([`crate::sim::check_sizes`]), as `compare` leaves it out.
    pub skipped: Vec<String>,
    /// [`THROUGHPUT_TOLERANCE`]: throughputs this close rank by added delay.
    pub throughput_tolerance: f64,
}

/// The policies [`recommend`] tunes: deployable (not clairvoyant) registry
/// entries with a knob, in registry order.
pub fn candidates() -> Vec<&'static str> {
    policy::registry()
        .iter()
        .filter(|e| !e.clairvoyant && e.knob.is_some())
        .map(|e| e.name)
        .collect()
}

/// The request sizes `recommend` tries when none are given (the CLI's
/// `--sizes` and Python's `sizes=`): 5 log-spaced from 64 KiB to 4 MiB.
pub fn default_sizes() -> Vec<u64> {
    super::log_spaced(64 << 10, 4 << 20, 5)
}

/// Tune every [`candidates`] policy for `budget` over `sizes` and rank them.
/// `progress(policy index, policies, settings done, settings)` is called
/// before each policy and as its search advances (the settings of the
/// policy being tuned), from several threads.
///
/// Ranked: policies whose best point within the budget does BG work, by
/// throughput; throughputs within [`THROUGHPUT_TOLERANCE`] of the best
/// left go to the lower added delay (then by name). A policy that never
/// finished learning ranks right below what it behaved as. After them,
/// unranked (`rank` 0): a policy whose best point does no BG work at all
/// (within the budget it does nothing), then one that cannot meet the
/// budget at any setting.
// the settings of TuneConfig that recommend exposes, one argument each
#[allow(clippy::too_many_arguments)]
pub fn recommend(
    prep: &Prepared,
    sim: &SimConfig,
    budget: Budget,
    sizes: &[u64],
    max_delay_ns: Option<u64>,
    threads: usize,
    search: SearchMode,
    progress: &(dyn Fn(usize, usize, u64, u64) + Sync),
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> Result<Recommendation> {
    let cfg = TuneConfig {
        budgets: vec![budget],
        sizes: sizes.to_vec(),
        max_delay_ns,
        threads,
        fast: true,
        search,
        auto_limit_visits: super::AUTO_EXACT_LIMIT_VISITS,
        // each policy's search reads it (tune stops within one batch)
        cancel,
    };
    let TunedCandidates {
        mut tuned,
        guarantees,
        skipped,
        simulations,
    } = tune_candidates(prep, sim, &cfg, progress)?;
    let working = order_by_throughput(&mut tuned);
    let runs = BestRuns::of(prep, sim, &tuned, cfg.cancel.as_deref())?;
    below_what_it_behaved_as(&mut tuned[..working], &runs.unlearned);
    let traits = Traits::of(prep);
    let ranking = ranked_entries(tuned, &guarantees, &runs, budget, &traits.phrase());
    Ok(Recommendation {
        budget,
        budget_text: budget.to_string(),
        sizes: sizes.to_vec(),
        traits,
        ranking,
        simulations,
        search,
        skipped,
        throughput_tolerance: THROUGHPUT_TOLERANCE,
    })
}

/// What [`tune_candidates`] found.
struct TunedCandidates {
    /// (policy, its best setting within the budget), in registry order.
    tuned: Vec<(String, Option<Choice>)>,
    /// Each tuned policy's search guarantee.
    guarantees: HashMap<String, Guarantee>,
    /// Candidates left out, each with why.
    skipped: Vec<String>,
    /// Distinct simulations run.
    simulations: u64,
}

/// Tune every [`candidates`] policy with `cfg` (one budget), leaving out a
/// policy that chooses its own request sizes under a BG model that does
/// not charge for size.
fn tune_candidates(
    prep: &Prepared,
    sim: &SimConfig,
    cfg: &TuneConfig,
    progress: &(dyn Fn(usize, usize, u64, u64) + Sync),
) -> Result<TunedCandidates> {
    let names = candidates();
    let mut found = TunedCandidates {
        tuned: Vec::new(),
        guarantees: HashMap::new(),
        skipped: Vec::new(),
        simulations: 0,
    };
    for (i, name) in names.iter().enumerate() {
        progress(i, names.len(), 0, 0);
        if policy::build(name)?.chooses_size() {
            if let Err(e) = crate::sim::check_sizes(&sim.bg_service, Some(name), 1) {
                found.skipped.push(format!("{name}: {e}"));
                continue;
            }
        }
        let t = tune(prep, name, sim, cfg, &|d, n| progress(i, names.len(), d, n))?;
        found.simulations += t.simulations;
        found.guarantees.insert(t.policy.clone(), t.guarantee);
        found
            .tuned
            .push((t.policy, t.budgets.into_iter().next().and_then(|b| b.best)));
    }
    progress(names.len(), names.len(), 0, 0);
    Ok(found)
}

/// 0: does BG work within the budget, 1: does none, 2: cannot meet it.
fn budget_class(c: &Option<Choice>) -> u8 {
    match c {
        Some(c) if c.bg_throughput_bytes_per_s > 0.0 => 0,
        Some(_) => 1,
        None => 2,
    }
}

/// Sort `tuned` by [`budget_class`], then most throughput first, ties to the
/// lower added delay, then by name; then let throughputs within
/// [`THROUGHPUT_TOLERANCE`] go by delay. Returns how many do BG work.
fn order_by_throughput(tuned: &mut [(String, Option<Choice>)]) -> usize {
    tuned.sort_by(|(an, a), (bn, b)| {
        budget_class(a)
            .cmp(&budget_class(b))
            .then_with(|| match (a, b) {
                (Some(a), Some(b)) => b
                    .bg_throughput_bytes_per_s
                    .total_cmp(&a.bg_throughput_bytes_per_s)
                    .then(a.fg_mean_added_delay_s.total_cmp(&b.fg_mean_added_delay_s))
                    .then(an.cmp(bn)),
                _ => an.cmp(bn),
            })
    });
    let working = tuned.iter().filter(|(_, c)| budget_class(c) == 0).count();
    within_tolerance_by_delay(&mut tuned[..working]);
    working
}

/// What each policy reached and whether it learned, from one run of its
/// best setting.
struct BestRuns {
    /// Mean BG request size, bytes, of a policy that chooses its own sizes.
    mean_sizes: HashMap<String, f64>,
    /// A policy that never finished learning → what it behaved as.
    unlearned: HashMap<String, String>,
}

impl BestRuns {
    /// One simulation of each policy's best setting that does BG work:
    /// Busy Bee's to see whether it learned, a size-choosing policy's for
    /// the sizes it reached.
    fn of(
        prep: &Prepared,
        sim: &SimConfig,
        tuned: &[(String, Option<Choice>)],
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<BestRuns> {
        let mut runs = BestRuns {
            mean_sizes: HashMap::new(),
            unlearned: HashMap::new(),
        };
        let cancelled = || cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed));
        for (name, best) in tuned {
            if cancelled() {
                return Err(crate::error::Error::Interrupted);
            }
            let Some(c) = best.as_ref().filter(|c| c.bg_throughput_bytes_per_s > 0.0) else {
                continue;
            };
            let cfg = SimConfig {
                bg_size_bytes: c.bg_size_bytes,
                ..sim.clone()
            };
            if name == "busy-bee" {
                let (_, params) = policy::Params::parse(&c.spec)?;
                let mut bb = policy::BusyBee::from_params(params)?;
                simulate(prep, &mut bb, &cfg)?;
                if bb.learned().is_none() {
                    runs.unlearned
                        .insert(name.clone(), "fixed-wait".to_string());
                }
            } else if policy::build(&c.spec)?.chooses_size() {
                let r = simulate(prep, policy::build(&c.spec)?.as_mut(), &cfg)?;
                if r.bg.completed > 0 {
                    runs.mean_sizes
                        .insert(name.clone(), r.bg.bytes as f64 / r.bg.completed as f64);
                }
            }
        }
        Ok(runs)
    }
}

/// Move a policy of `working` (the ranked ones) that never learned to
/// right below what it behaved as.
fn below_what_it_behaved_as(
    working: &mut [(String, Option<Choice>)],
    unlearned: &HashMap<String, String>,
) {
    for (name, like) in unlearned {
        let at = working.iter().position(|(n, _)| n == name);
        let like_at = working.iter().position(|(n, _)| n == like);
        if let (Some(at), Some(like_at)) = (at, like_at) {
            if at < like_at {
                // to right after `like`; those in between move up one
                working[at..=like_at].rotate_left(1);
            }
        }
    }
}

/// The BG throughput of a policy that does BG work within the budget
/// (only those are ranked), bytes/s.
fn ranked_throughput(c: &Option<Choice>) -> Option<f64> {
    c.as_ref()
        .map(|c| c.bg_throughput_bytes_per_s)
        .filter(|&t| t > 0.0)
}

/// The ranking's entries from `tuned` in its final order, each with its
/// reason; `phrase` is the trace's [`Traits::phrase`].
fn ranked_entries(
    tuned: Vec<(String, Option<Choice>)>,
    guarantees: &HashMap<String, Guarantee>,
    runs: &BestRuns,
    budget: Budget,
    phrase: &str,
) -> Vec<Ranked> {
    let named_throughput =
        |(n, c): &(String, Option<Choice>)| ranked_throughput(c).map(|t| (n.clone(), t));
    let leaders = Leaders {
        top: tuned.first().and_then(named_throughput),
        runner_up: tuned.get(1).and_then(named_throughput),
    };
    tuned
        .into_iter()
        .enumerate()
        .map(|(i, (name, best))| {
            let never_learned = runs.unlearned.get(&name).cloned();
            let mean_bg_request_bytes = runs.mean_sizes.get(&name).copied();
            let (relative, reason) = explain_place(&name, &best, i, budget, phrase, &leaders);
            let reason = match (&never_learned, &best) {
                (Some(like), Some(c)) => format!(
                    "{name}: never finished learning on this trace (no learning window of \
                     at least 10 busy periods completed): it behaved as {like} at its idle \
                     wait throughout{}",
                    setting(c)
                ),
                _ => reason,
            };
            let reason = match mean_bg_request_bytes {
                Some(m) => format!(
                    "{reason}; its BG requests averaged {} (it adapts its size)",
                    mean_size(m)
                ),
                None => reason,
            };
            Ranked {
                mean_bg_request_bytes,
                never_learned,
                guarantee: guarantees
                    .get(&name)
                    .copied()
                    .unwrap_or(Guarantee::CoarseGrid),
                rank: if ranked_throughput(&best).is_some() {
                    i + 1
                } else {
                    0
                },
                policy: name,
                best,
                relative,
                reason,
            }
        })
        .collect()
}

/// The first two places of the ranking, (policy, throughput in bytes/s),
/// when they do BG work within the budget.
struct Leaders {
    top: Option<(String, f64)>,
    runner_up: Option<(String, f64)>,
}

/// Why `name`, with its tuned setting `best`, is at place `i` (from 0),
/// and its throughput relative to the others ([`Ranked::relative`]).
fn explain_place(
    name: &str,
    best: &Option<Choice>,
    i: usize,
    budget: Budget,
    phrase: &str,
    leaders: &Leaders,
) -> (Option<f64>, String) {
    match (best, i) {
        (None, _) => (
            None,
            format!(
                "{name}: no setting meets {budget} at any size; even its most \
                 conservative setting costs the foreground too much"
            ),
        ),
        (Some(c), _) if c.bg_throughput_bytes_per_s <= 0.0 => (
            None,
            format!(
                "{name}: not ranked: within {budget} it does no BG work at all \
                 (its best point starts no request)"
            ),
        ),
        (Some(c), 0) => explain_top(name, c, budget, phrase, &leaders.runner_up),
        (Some(c), _) => {
            let (top_name, top_tp) = leaders.top.clone().expect("a feasible top entry");
            let rel = if top_tp > 0.0 {
                Some(c.bg_throughput_bytes_per_s / top_tp - 1.0)
            } else {
                None
            };
            let how = match rel {
                Some(r) if r < 0.0 => format!("{:.0} % less than {top_name}", -r * 100.0),
                Some(r) if r > 0.0 => format!(
                    "{:.3} % more than {top_name}, within the {:.0} % tolerance, \
                     at a higher added delay",
                    r * 100.0,
                    THROUGHPUT_TOLERANCE * 100.0
                ),
                _ => format!("as much as {top_name}, at no lower added delay"),
            };
            (rel, format!("{name}: {how}{}", setting(c)))
        }
    }
}

/// Why `name`, with its tuned setting `c`, ranks first: its gain over the
/// `runner_up`, or that it alone does BG work within the budget.
fn explain_top(
    name: &str,
    c: &Choice,
    budget: Budget,
    phrase: &str,
    runner_up: &Option<(String, f64)>,
) -> (Option<f64>, String) {
    match runner_up {
        Some((other, t)) if *t > 0.0 => {
            let gain = c.bg_throughput_bytes_per_s / t - 1.0;
            let how = if gain < 0.0 {
                format!(
                    "{name} is within {:.0} % of {other}'s throughput ({:.3} % less) \
                     at a lower added delay",
                    THROUGHPUT_TOLERANCE * 100.0,
                    -gain * 100.0
                )
            } else {
                format!("{name} gains {:.0} % over {other}", gain * 100.0)
            };
            (Some(gain), format!("{phrase}: {how}{}", setting(c)))
        }
        Some((other, _)) => (
            None,
            format!(
                "{phrase}: {name} gets BG work done within {budget}, \
                 {other} none{}",
                setting(c)
            ),
        ),
        None => (
            None,
            format!(
                "{phrase}: {name} is the only policy that does BG work within {budget}{}",
                setting(c)
            ),
        ),
    }
}

/// Reorder `ranked` (best throughput first) so that each place goes to the
/// lowest added delay among the policies whose throughput is within
/// [`THROUGHPUT_TOLERANCE`] of the best one left: one pass, first to last.
fn within_tolerance_by_delay(ranked: &mut [(String, Option<Choice>)]) {
    let tp = |c: &Option<Choice>| c.as_ref().map_or(0.0, |c| c.bg_throughput_bytes_per_s);
    let delay = |c: &Option<Choice>| {
        c.as_ref()
            .map_or(f64::INFINITY, |c| c.fg_mean_added_delay_s)
    };
    for i in 0..ranked.len() {
        // the best throughput left is the first: the slice is sorted by it
        let floor = tp(&ranked[i].1) * (1.0 - THROUGHPUT_TOLERANCE);
        let pick = (i..ranked.len())
            .take_while(|&j| tp(&ranked[j].1) >= floor)
            .min_by(|&a, &b| {
                delay(&ranked[a].1)
                    .total_cmp(&delay(&ranked[b].1))
                    .then(a.cmp(&b))
            })
            .unwrap_or(i);
        // move it up, keeping the others' order
        ranked[i..=pick].rotate_right(1);
    }
}

/// `3.31 MiB`, `180.0 KiB`: a mean request size.
fn mean_size(bytes: f64) -> String {
    if bytes >= (1 << 20) as f64 {
        format!("{:.2} MiB", bytes / (1 << 20) as f64)
    } else {
        format!("{:.1} KiB", bytes / 1024.0)
    }
}

/// ` (t=205ms, 1048576 B requests)`.
fn setting(c: &Choice) -> String {
    let size = c.request_size_bytes;
    let size = if size % (1 << 20) == 0 {
        format!("{} MiB", size >> 20)
    } else if size % 1024 == 0 {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    };
    match &c.knob {
        Some(k) => {
            let name = policy::entry(&c.policy)
                .ok()
                .and_then(|e| e.knob)
                .map_or("knob", |kn| kn.name);
            format!(" (best at {name}={k}, {size} requests)")
        }
        None => format!(" (best at {size} requests)"),
    }
}
