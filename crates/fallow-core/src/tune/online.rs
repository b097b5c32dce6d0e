//! Online re-tuning: [`OnlineTuner`] is a [`Policy`] that runs any policy
//! of the registry and, as it runs, re-fits that policy's aggressiveness
//! knob to a [`Budget`] over a sliding window of the idle/busy history it
//! has been shown, so no offline analysis of the workload is needed.
//!
//! This is the direction Mi et al. close on (§7: "self-adjusting various
//! parameters … a policy that is free of any input from offline
//! analysis"), with Busy Bee's windows (§4, §5.1: Threshold and CWS are
//! computed from the histogram of one time window and used in the next,
//! "which allows the algorithm to adapt well … to changing workloads").
//! Busy Bee §5.3 tests that adaptation by concatenating two traces; see
//! [`Trace::concat`](crate::trace::Trace::concat) and
//! [`simulate_split`](crate::sim::simulate_split).
//!
//! ## What it does
//! - It records what the [`Policy`] trait tells it and nothing else:
//!   busy periods (`on_busy_end`: length, FG requests), idle intervals
//!   (`on_idle_end`: length, collided) and the time of each decision
//!   ([`Ctx`]), keeping the last `window` idle intervals and the busy
//!   periods around them. It is never told the future (it is not
//!   clairvoyant and ignores `prepare`), so the same object runs in the
//!   simulator and live.
//! - Every `every` idle intervals, at the next `on_idle`, it builds a small
//!   trace from the window ([`Prepared::from_periods`]) and searches the
//!   knob's [`ladder`](super::ladder()) on it with `tune`'s
//!   coarse-then-fine steps, starting from the value in use (the window
//!   moves little between refits): up the coarse 1-2-5 grid while the
//!   budget is met, or down until it is, then a bisection to the next
//!   coarse value; the answer is the feasible point seen with the most BG
//!   throughput. A refit costs at most (coarse values + bisection steps)
//!   runs over `window` intervals, 19 + 9 for a wait, and a dozen when the
//!   value moves by less than a coarse step.
//! - A change is not left to the next scheduled refit: when the idle
//!   intervals since the last refit collided far more often than its
//!   window predicted for the value in use (over 4 Poisson standard
//!   deviations, plus 4), the workload has changed under it. The window
//!   then restarts from those intervals and a refit runs at once (no
//!   sooner than `every / 8` intervals after the last one, so at most 8
//!   refits per `every` intervals). This only guards the budget: a change
//!   that makes the value too conservative is followed by the window.
//! - If the value changed, the inner policy is rebuilt with it and warmed
//!   up by replaying the window through `on_busy_end` / `on_idle_end`, so
//!   policies that learn from idle history (cdf-based, autoregressive, …)
//!   do not restart cold. State a policy builds in `on_idle` (deadline's
//!   progress, busy-bee's time windows) restarts.
//! - Until the first refit (the first `every` idle intervals) it runs the
//!   knob's most conservative ladder value (a wait of 100 s, T = 0.01, …):
//!   almost no BG work rather than the registry default, which is not safe
//!   on every workload (a 100 ms wait breaks a 1 ms budget on a busy disk).
//!   When no ladder value meets the budget on a window, it also falls back
//!   to the most conservative value.
//!
//! ## The window, and what it approximates
//! - Idle intervals are recorded as they were before BG work delayed the
//!   busy period before them: FG arrivals never move, so an interval
//!   starts its busy period's length after the busy period's first
//!   arrival (the decision time of the interval before plus its length),
//!   and whatever the decision time is later than that was delay. In the
//!   simulator, whose busy lengths are the baseline's, this recovers the
//!   baseline exactly; live, where a busy period is measured with the
//!   delay in it, the delay stays in the history (conservative).
//! - A busy period told twice without an idle interval between (a delay
//!   swallowed a short interval) is recorded as one busy period; two idle
//!   intervals without a busy period between as one interval.
//! - Per-request response times are synthesised from (requests, length) of
//!   each busy period ([`Prepared::from_periods`]): exact for the added
//!   delay, an upper bound for the slowdown.
//! - The window runs assume endless BG work (the trait does not say how
//!   much is left), take the BG service model and size from [`Ctx`], and
//!   the switch penalty from [`OnlineConfig`]. Every candidate starts cold
//!   on the window. Runs of one refit share a seed (common random numbers).

use super::{ladder, Budget, Step};
use crate::error::{Error, Result};
use crate::policy::{self, Ctx, Decision, Entry, Knob, Params, Policy};
use crate::sim::{simulate, BgWork, Prepared, SimConfig};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};

/// Idle intervals in the window when none is given.
pub const DEFAULT_WINDOW: usize = crate::sim::DEFAULT_RETUNE_WINDOW;

/// Idle intervals between refits when none is given: a quarter of the
/// window (at least one); the CLI's `--every` and Python's `retune_every`.
pub fn default_every(window: usize) -> usize {
    (window / 4).max(1)
}

/// How the tuner re-fits.
#[derive(Debug, Clone, PartialEq)]
pub struct OnlineConfig {
    /// What the foreground may lose, checked on each window.
    pub budget: Budget,
    /// Idle intervals in the sliding window.
    pub window: usize,
    /// Idle intervals between refits.
    pub every: usize,
    /// Switch penalty of a collision, ns, as the run's (the trait does not
    /// tell it).
    pub switch_penalty_ns: u64,
    /// Seed of the window runs (the k-th refit, from 1, uses `seed + k`).
    pub seed: u64,
}

impl OnlineConfig {
    /// `budget` over the default window (2000 intervals), refit every
    /// quarter window, no switch penalty, seed 1.
    pub fn new(budget: Budget) -> OnlineConfig {
        OnlineConfig {
            budget,
            window: DEFAULT_WINDOW,
            every: DEFAULT_WINDOW / 4,
            switch_penalty_ns: 0,
            seed: crate::dist::DEFAULT_SEED,
        }
    }

    /// `budget` re-tuned over a run with settings `sim` (its switch
    /// penalty and seed): `window` intervals (default [`DEFAULT_WINDOW`]),
    /// a refit every `every` (default [`default_every`] of the window).
    /// What `fallow simulate --retune` and `fallow.simulate(retune=)` run.
    pub fn for_run(
        budget: Budget,
        window: Option<usize>,
        every: Option<usize>,
        sim: &crate::sim::SimConfig,
    ) -> OnlineConfig {
        let window = window.unwrap_or(DEFAULT_WINDOW);
        OnlineConfig {
            budget,
            window,
            every: every.unwrap_or_else(|| default_every(window)),
            switch_penalty_ns: sim.switch_penalty_ns,
            seed: sim.seed,
        }
    }
}

/// The policy a simulation runs: as given, or wrapped in the online tuner
/// (`fallow simulate --retune`, Python's `simulate(retune=)`).
pub enum Runner {
    /// The policy as given.
    Plain(Box<dyn Policy>),
    /// The policy with its knob re-fitted online.
    Retuned(Box<OnlineTuner>),
}

impl Runner {
    /// `spec`, wrapped in the online tuner when `retune` is given.
    pub fn new(spec: &str, retune: Option<OnlineConfig>) -> Result<Runner> {
        Ok(match retune {
            Some(cfg) => Runner::Retuned(Box::new(OnlineTuner::new(spec, cfg)?)),
            None => Runner::Plain(policy::build(spec)?),
        })
    }

    /// The policy to simulate.
    pub fn policy(&mut self) -> &mut dyn Policy {
        match self {
            Runner::Plain(p) => p.as_mut(),
            Runner::Retuned(t) => t.as_mut(),
        }
    }

    /// The re-tuning's report (None for a policy as given).
    pub fn report(&self) -> Option<Report> {
        match self {
            Runner::Plain(_) => None,
            Runner::Retuned(t) => Some(t.report()),
        }
    }
}

/// One point of the knob's trajectory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refit {
    /// When the value took effect, s on the trace clock (the start of the
    /// idle interval whose decision first used it).
    pub time_s: f64,
    /// Idle intervals seen before it.
    pub intervals: u64,
    /// The knob's value as written (`42.6ms`).
    pub knob: String,
    /// As parsed (ns for durations).
    pub value: f64,
    /// The fit on the window (`None` for the start value and a back-off).
    pub fit: Option<WindowFit>,
    /// The BG request size chosen with it, bytes, when the size is
    /// refitted too ([`OnlineTuner::set_sizes`]); `None`: the run's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// True when a live run backed off to this value because the slowdown
    /// it measured was over its budget ([`OnlineTuner::back_off`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub backed_off: bool,
}

/// What a refit saw on its window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowFit {
    /// True when collisions since the last refit called it early (a
    /// change), false when `every` intervals had passed.
    pub early: bool,
    /// Idle intervals in the window.
    pub intervals: usize,
    /// False when no value met the budget (the most conservative one is used).
    pub met: bool,
    /// The chosen value's mean added delay per FG request on the window, s.
    pub mean_added_delay_s: f64,
    /// Its relative slowdown on the window.
    pub slowdown: f64,
    /// Its BG throughput on the window, bytes per second.
    pub bg_throughput_bytes_per_s: f64,
    /// Window runs this refit took.
    pub simulations: u32,
}

/// What a re-tuned run did with its knob (the `retune` object of
/// `fallow simulate --json` and of `fallow.simulate(..., retune=)`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The budget as written back (`1ms`, `5%`).
    pub budget: String,
    /// The knob re-fitted (`t`).
    pub knob: &'static str,
    /// Idle intervals in the window.
    pub window: usize,
    /// Idle intervals between refits.
    pub every: usize,
    /// The inner policy's spec in use at the end (`fixed-wait:t=1.12s`).
    pub final_spec: String,
    /// The start value, then one point per refit.
    pub history: Vec<Refit>,
}

/// A policy from the registry whose knob is re-fitted online (module docs).
pub struct OnlineTuner {
    entry: &'static Entry,
    knob: Knob,
    /// Parameters the user fixed, `k=v,…` (may be empty).
    fixed: String,
    ladder: Vec<Step>,
    /// Ladder indices scanned first, most conservative first.
    coarse: Vec<usize>,
    cfg: OnlineConfig,
    inner: Box<dyn Policy>,
    /// Ladder index in use.
    current: usize,
    /// Busy periods of the window (length ns, requests), one more than
    /// idle intervals once a busy period has ended.
    busy: VecDeque<(u64, u32)>,
    /// Idle intervals of the window (length ns, collided).
    idle: VecDeque<(u64, bool)>,
    /// The last event recorded was a busy period's end.
    after_busy: bool,
    /// When the last busy period recorded started (its first FG arrival),
    /// ns, if known.
    busy_start_ns: Option<u64>,
    /// When the current idle interval started, ns (set at its `on_idle`).
    idle_start_ns: Option<u64>,
    /// How late the last busy period ended, ns: by how much BG work
    /// delayed it, so the idle interval after it was that much shorter.
    late_ns: u64,
    /// Idle intervals since the last refit, and how many of them collided.
    since_refit: usize,
    collided_since: u64,
    /// Collisions per idle interval the last refit expects of its value.
    expected_collisions: Option<f64>,
    intervals: u64,
    history: Vec<Refit>,
    /// Told the idle intervals seen after each refit (a front end's
    /// progress: a refit is the unit of work that takes time).
    on_refit: Option<RefitHook>,
    /// BG request sizes a refit chooses among, bytes, ascending (empty:
    /// the size is not refitted, the run's is used).
    sizes: Vec<u64>,
    /// The size chosen by the last refit, bytes (`None` before one).
    size_bytes: Option<u64>,
    /// Refit also once this long passed since the last refit (or the
    /// first decision) with at least one new idle interval
    /// ([`OnlineTuner::set_refit_after_ns`]); `None`: on counts only.
    refit_after_ns: Option<u64>,
    /// When the last refit (or the first decision) was, ns.
    last_refit_ns: Option<u64>,
}

/// A tuner's window: busy periods (length ns, FG requests) and idle
/// intervals (length ns, collided), oldest first ([`OnlineTuner::window`]).
pub type Window = (Vec<(u64, u32)>, Vec<(u64, bool)>);

/// What [`OnlineTuner::on_refit`] calls after each refit, with the idle
/// intervals seen so far.
pub type RefitHook = Box<dyn FnMut(u64) + Send>;

impl OnlineTuner {
    /// Wrap `spec` (`fixed-wait`, `busy-bee:window=1h`: a registry policy
    /// without its knob) and re-fit its knob to `cfg.budget`.
    pub fn new(spec: &str, cfg: OnlineConfig) -> Result<OnlineTuner> {
        let (name, params) = Params::parse(spec)?;
        let entry = policy::entry(&name)?;
        if entry.clairvoyant {
            return Err(Error::invalid(
                format!("policy {}", entry.name),
                "a clairvoyant reference sees the future; online re-tuning needs a deployable policy",
            ));
        }
        let knob = entry.knob.ok_or_else(|| {
            Error::invalid(
                format!("policy {}", entry.name),
                "has no knob to re-tune (see `fallow policies`)",
            )
        })?;
        if params.contains(knob.name) {
            return Err(Error::invalid(
                format!("policy {}", entry.name),
                format!(
                    "`{}` is the parameter re-tuning sets; leave it out",
                    knob.name
                ),
            ));
        }
        if cfg.window < 2 {
            return Err(Error::invalid(
                "retune window",
                format!(
                    "{} idle intervals: give at least 2 (default {DEFAULT_WINDOW})",
                    cfg.window
                ),
            ));
        }
        if cfg.every == 0 || cfg.every > cfg.window {
            return Err(Error::invalid(
                "retune every",
                format!(
                    "{} idle intervals: give 1 to the window ({})",
                    cfg.every, cfg.window
                ),
            ));
        }
        let ladder = ladder(&knob);
        let last = ladder.len().saturating_sub(1);
        let coarse = (0..ladder.len())
            .filter(|&i| ladder[i].coarse || i == 0 || i == last)
            .collect();
        let fixed = spec
            .split_once(':')
            .map(|(_, r)| r.trim().to_string())
            .unwrap_or_default();
        // a bad fixed parameter fails here, once
        let inner = policy::build(&spec_of(entry.name, &fixed, &knob, &ladder[0]))?;
        Ok(OnlineTuner {
            entry,
            knob,
            fixed,
            ladder,
            coarse,
            cfg,
            inner,
            current: 0,
            busy: VecDeque::new(),
            idle: VecDeque::new(),
            after_busy: false,
            busy_start_ns: None,
            idle_start_ns: None,
            late_ns: 0,
            since_refit: 0,
            collided_since: 0,
            expected_collisions: None,
            intervals: 0,
            history: Vec::new(),
            on_refit: None,
            sizes: Vec::new(),
            size_bytes: None,
            refit_after_ns: None,
            last_refit_ns: None,
        })
    }

    /// Refit the BG request size too, among `sizes` (bytes; the sizes the
    /// executor allows): each refit runs the knob's walk once per size on
    /// the window, with that size in the runs, and keeps the feasible
    /// (size, value) with the most BG throughput (ties: less delay, then
    /// the smaller size, then the more conservative value). The chosen
    /// size is given to the inner policy as the run's size at each
    /// decision ([`Ctx::bg_size_bytes`]): at a request boundary. Refused
    /// for a policy that chooses its own sizes or whose size is fixed in
    /// its spec.
    pub fn set_sizes(&mut self, sizes: &[u64]) -> Result<()> {
        let what = || format!("policy {}", self.entry.name);
        if self.inner.chooses_size() {
            return Err(Error::invalid(what(), "chooses its own request sizes"));
        }
        if Params::parse(&format!("x:{}", self.fixed))
            .map(|(_, p)| p.contains("size"))
            .unwrap_or(false)
        {
            return Err(Error::invalid(
                what(),
                "its size is fixed in the spec (`size=`); leave it out to refit it",
            ));
        }
        if sizes.is_empty() || sizes.contains(&0) {
            return Err(Error::invalid(
                "refitted sizes",
                "give at least one size, each of at least 1 byte",
            ));
        }
        let mut v = sizes.to_vec();
        v.sort_unstable();
        v.dedup();
        self.sizes = v;
        Ok(())
    }

    /// The request size the last refit chose, bytes (`None`: the size is
    /// not refitted, or no refit yet: the run's).
    pub fn size_bytes(&self) -> Option<u64> {
        self.size_bytes
    }

    /// Call `hook` after each refit with the idle intervals seen so far,
    /// for progress (a 1 M-request run refits ~1,000 times over
    /// several seconds).
    pub fn on_refit(&mut self, hook: RefitHook) {
        self.on_refit = Some(hook);
    }

    /// The knob's trajectory: the start value, then one point per refit.
    pub fn history(&self) -> &[Refit] {
        &self.history
    }

    /// The settings, the value in use and the trajectory so far.
    pub fn report(&self) -> Report {
        Report {
            budget: self.cfg.budget.to_string(),
            knob: self.knob.name,
            window: self.cfg.window,
            every: self.cfg.every,
            final_spec: self.spec(),
            history: self.history.clone(),
        }
    }

    /// The knob re-fitted.
    pub fn knob(&self) -> &Knob {
        &self.knob
    }

    /// The settings.
    pub fn config(&self) -> &OnlineConfig {
        &self.cfg
    }

    /// The knob's value in use, as written.
    pub fn value(&self) -> &str {
        &self.ladder[self.current].text
    }

    /// The inner policy's spec in use (`fixed-wait:t=42.6ms`).
    pub fn spec(&self) -> String {
        self.spec_at(self.current)
    }

    fn spec_at(&self, i: usize) -> String {
        spec_of(self.entry.name, &self.fixed, &self.knob, &self.ladder[i])
    }

    /// The window as recorded: busy periods (length ns, FG requests) and
    /// the idle intervals between them (length ns, collided), oldest
    /// first; once a busy period has ended there is one more busy period
    /// than idle intervals. What a live run keeps across runs
    /// ([`OnlineTuner::seed_window`]).
    pub fn window(&self) -> Window {
        (
            self.busy.iter().copied().collect(),
            self.idle.iter().copied().collect(),
        )
    }

    /// Start from a window recorded by an earlier run (a resumed or
    /// scheduled scrub): `busy` must hold one more period than `idle`
    /// (the window ends in a busy period, as [`OnlineTuner::window`]
    /// gives it after one). The oldest entries beyond the window are
    /// dropped. The first decision then refits on it instead of running
    /// the most conservative value for `every` intervals.
    pub fn seed_window(&mut self, busy: &[(u64, u32)], idle: &[(u64, bool)]) -> Result<()> {
        if busy.len() != idle.len() + 1 {
            return Err(Error::invalid(
                "retune window",
                format!(
                    "{} busy periods and {} idle intervals: want one more busy period than idle intervals",
                    busy.len(),
                    idle.len()
                ),
            ));
        }
        let skip = idle.len().saturating_sub(self.cfg.window);
        self.idle = idle[skip..].iter().copied().collect();
        self.busy = busy[skip..].iter().copied().collect();
        self.after_busy = true;
        self.intervals = self.idle.len() as u64;
        // refit at the first decision when there is anything to fit on
        self.since_refit = if self.idle.is_empty() {
            0
        } else {
            self.cfg.every
        };
        Ok(())
    }

    /// Keep only the newest `idle_intervals` idle intervals of the window
    /// (and the busy periods between and around them): a live run that
    /// sees its FG change forgets the old FG's intervals, which would
    /// otherwise fit the new FG's refits to gaps it does not have.
    pub fn keep_newest(&mut self, idle_intervals: usize) {
        let drop = self.idle.len().saturating_sub(idle_intervals);
        self.idle.drain(..drop);
        self.busy.drain(..drop.min(self.busy.len()));
    }

    /// Keep only the newest busy periods that hold `reads` FG requests
    /// (the first that reaches the count included) and the idle intervals
    /// between and after them. What a live run keeps when its FG changes
    /// is counted in the new FG's reads, not in intervals: a bursty FG has
    /// one interval a burst (20 reads), so the newest 100 intervals at a
    /// switch to single reads reached back over the whole bursty half, and
    /// its gaps held the refits at a 1.7 s wait for 35 s after the switch
    /// was seen (docs/live.md).
    pub fn keep_newest_reads(&mut self, reads: u64) {
        let (mut held, mut periods) = (0u64, 0usize);
        for &(_, n) in self.busy.iter().rev() {
            if held >= reads {
                break;
            }
            held += u64::from(n);
            periods += 1;
        }
        // busy periods lead idle intervals by one once a busy period ended
        let lead = self.busy.len().saturating_sub(self.idle.len());
        self.keep_newest(periods.saturating_sub(lead));
    }

    /// The budget the refits fit to from now on (a live run tightens it
    /// when the slowdown it measures is over the budget it was given).
    pub fn set_budget(&mut self, budget: Budget) {
        self.cfg.budget = budget;
    }

    /// Refit at the next decision that ends a busy period instead of
    /// waiting for `every` intervals (a live run changed the budget the
    /// refits fit to and wants it applied now). Nothing happens before the
    /// window holds an idle interval.
    pub fn request_refit(&mut self) {
        if !self.idle.is_empty() {
            self.since_refit = self.since_refit.max(self.cfg.every);
        }
    }

    /// Refit also at the first decision after `ns` have passed since the
    /// last refit (or the first decision) and at least one idle interval
    /// ended, not only every `every` intervals. A live device can be quiet
    /// for minutes: on a disk that only sees a log write every few
    /// seconds, `every` = 50 intervals took minutes to come, and the run
    /// sat at the least aggressive value (a 100 s wait) all that time.
    /// Offline (`simulate --retune`) the trace's own pace is the clock and
    /// no time trigger is set.
    pub fn set_refit_after_ns(&mut self, ns: Option<u64>) {
        self.refit_after_ns = ns.filter(|&n| n > 0);
    }

    /// The switch penalty of a collision the refits assume from now on, ns
    /// (a live run measures it: one FG read's time, the seek back).
    pub fn set_switch_penalty_ns(&mut self, ns: u64) {
        self.cfg.switch_penalty_ns = ns;
    }

    /// Step back to the next more conservative coarse value of the ladder
    /// at once (a live run measured more slowdown than the window
    /// predicted), recording the point with no fit. False when already
    /// at the most conservative value.
    pub fn back_off(&mut self, now_ns: u64) -> bool {
        if self.current == 0 {
            return false;
        }
        let to = self
            .coarse
            .iter()
            .rev()
            .copied()
            .find(|&i| i < self.current)
            .unwrap_or(0);
        let Ok(p) = policy::build(&self.spec_at(to)) else {
            return false;
        };
        self.inner = p;
        self.current = to;
        let mut point = self.point(now_ns, None);
        point.backed_off = true;
        self.history.push(point);
        true
    }

    /// The knob's walk on `prep` with `sim` (`simulate --retune`'s): the
    /// best feasible ladder index seen, if any, and every run's outcome.
    fn sweep(&self, prep: &Prepared, sim: &SimConfig) -> (Option<usize>, HashMap<usize, Outcome>) {
        let budget = self.cfg.budget;
        let mut seen: HashMap<usize, Outcome> = HashMap::new();
        let mut ok = |i: usize| -> bool {
            seen.entry(i)
                .or_insert_with(|| outcome(prep, &self.spec_at(i), sim, &budget))
                .met
        };
        // A coarse walk from the value in use (the window moves little
        // between refits): up the 1-2-5 grid while feasible, or down until
        // feasible; then bisect to the next coarse value (invariant: lo
        // feasible, hi not). Unlike `tune`, the walk stops at the first
        // change, which bounds a refit at (coarse values + bisection steps)
        // runs and usually needs a dozen.
        let c = &self.coarse;
        let mut k = c.iter().rposition(|&i| i <= self.current).unwrap_or(0);
        let bracket = if ok(c[k]) {
            while k + 1 < c.len() && ok(c[k + 1]) {
                k += 1;
            }
            // (lazily: when the most aggressive value is feasible there is no next)
            (k + 1 < c.len()).then(|| (c[k], c[k + 1]))
        } else {
            let mut found = None;
            while k > 0 {
                k -= 1;
                if ok(c[k]) {
                    found = Some((c[k], c[k + 1]));
                    break;
                }
            }
            found
        };
        if let Some((mut lo, mut hi)) = bracket {
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if ok(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
        }
        // the feasible point seen with the most throughput on the window;
        // ties go to less delay, then to the more conservative value
        let best = seen
            .iter()
            .filter(|(_, o)| o.met)
            .max_by(|(i, a), (j, b)| {
                a.throughput
                    .total_cmp(&b.throughput)
                    .then(b.delay_s.total_cmp(&a.delay_s))
                    .then(j.cmp(i))
            })
            .map(|(&i, _)| i);
        (best, seen)
    }

    /// Re-fit the knob (and the size, [`OnlineTuner::set_sizes`]) on the
    /// window and switch to the new value.
    fn refit(&mut self, ctx: &Ctx<'_>, early: bool) {
        let (busy_len, busy_requests): (Vec<u64>, Vec<u32>) = self.busy.iter().copied().unzip();
        let idle_len: Vec<u64> = self.idle.iter().map(|&(i, _)| i).collect();
        let Ok(prep) = Prepared::from_periods(&busy_len, &busy_requests, &idle_len) else {
            return; // an empty window: keep the value
        };
        let sim_at = |size: u64| SimConfig {
            bg_service: *ctx.bg_service,
            bg_work: BgWork::Endless,
            bg_size_bytes: size,
            switch_penalty_ns: self.cfg.switch_penalty_ns,
            seed: self.cfg.seed.wrapping_add(self.history.len() as u64),
        };
        let sizes = if self.sizes.is_empty() {
            vec![ctx.bg_size_bytes]
        } else {
            self.sizes.clone()
        };
        // per size the same walk (common random numbers: one seed); the
        // best feasible (size, value): most throughput, then less delay,
        // then the smaller size (sizes ascend, a tie keeps the first)
        let mut runs = 0usize;
        let mut best: Option<(u64, usize, Outcome)> = None;
        let mut first_seen = None;
        for &size in &sizes {
            let (b, mut seen) = self.sweep(&prep, &sim_at(size));
            runs += seen.len();
            if let Some(i) = b {
                let o = seen.remove(&i).expect("the best index was run");
                let better = best.as_ref().is_none_or(|(_, _, bo)| {
                    o.throughput
                        .total_cmp(&bo.throughput)
                        .then(bo.delay_s.total_cmp(&o.delay_s))
                        .is_gt()
                });
                if better {
                    best = Some((size, i, o));
                }
            }
            first_seen.get_or_insert(seen);
        }
        let met = best.is_some();
        // none feasible: the most conservative value, at the smallest size
        // (the walk went down to index 0, which its runs hold)
        let (size, chosen, o) = best.unwrap_or_else(|| {
            let size = sizes[0];
            let o = first_seen
                .and_then(|mut seen| seen.remove(&0))
                .unwrap_or_else(|| {
                    runs += 1;
                    outcome(&prep, &self.spec_at(0), &sim_at(size), &self.cfg.budget)
                });
            (size, 0, o)
        });
        if !self.sizes.is_empty() {
            self.size_bytes = Some(size);
        }
        // a short window's most aggressive feasible value collides more
        // than it predicts (it was picked for fitting that sample): no
        // change is called on such a prediction, except right after one
        self.expected_collisions = (early || idle_len.len() >= 2 * self.cfg.every)
            .then(|| o.collisions as f64 / idle_len.len().max(1) as f64);
        let fit = WindowFit {
            early,
            intervals: idle_len.len(),
            met,
            mean_added_delay_s: o.delay_s,
            slowdown: o.slowdown,
            bg_throughput_bytes_per_s: o.throughput,
            simulations: runs as u32,
        };
        if chosen != self.current {
            if let Ok(mut p) = policy::build(&self.spec_at(chosen)) {
                // warm up on the window, as if it had run all along
                for (&(b, n), &(i, c)) in self.busy.iter().zip(&self.idle) {
                    p.on_busy_end(b, n);
                    p.on_idle_end(i, c);
                }
                if let Some(&(b, n)) = self.busy.back() {
                    p.on_busy_end(b, n);
                }
                self.inner = p;
                self.current = chosen;
            }
        }
        self.history.push(self.point(ctx.now_ns, Some(fit)));
    }

    /// More collisions since the last refit than its window predicts for
    /// the value in use, by over 4 Poisson standard deviations (+4, so a
    /// handful is never enough): the workload changed under the value.
    /// Checked no sooner than `every / 8` intervals after a refit, so a
    /// change costs at most 8 refits per `every` intervals.
    fn surprised(&self) -> bool {
        let Some(rate) = self.expected_collisions else {
            return false;
        };
        if self.since_refit < (self.cfg.every / 8).max(1) {
            return false;
        }
        let m = rate * self.since_refit as f64;
        self.collided_since as f64 > m + 4.0 * m.sqrt() + 4.0
    }

    fn point(&self, now_ns: u64, fit: Option<WindowFit>) -> Refit {
        let s = &self.ladder[self.current];
        Refit {
            time_s: now_ns as f64 / 1e9,
            intervals: self.intervals,
            knob: s.text.clone(),
            value: s.value,
            fit,
            size_bytes: self.size_bytes,
            backed_off: false,
        }
    }
}

/// What one window run of one value gave.
struct Outcome {
    met: bool,
    delay_s: f64,
    slowdown: f64,
    throughput: f64,
    collisions: u64,
}

/// Run `spec` on `prep`; a failure (it cannot happen: the spec built at
/// construction and the run's BG size is positive) counts as infeasible.
fn outcome(prep: &Prepared, spec: &str, sim: &SimConfig, budget: &Budget) -> Outcome {
    policy::build(spec)
        .and_then(|mut p| simulate(prep, p.as_mut(), sim))
        .map(|r| Outcome {
            met: budget.meets(&r),
            delay_s: r.fg.mean_added_delay_s,
            slowdown: r.fg.slowdown,
            throughput: r.bg.throughput_bytes_per_s,
            collisions: r.fg.collisions,
        })
        .unwrap_or(Outcome {
            met: false,
            delay_s: f64::INFINITY,
            slowdown: f64::INFINITY,
            throughput: 0.0,
            collisions: u64::MAX,
        })
}

/// `name:fixed,knob=value`.
fn spec_of(name: &str, fixed: &str, knob: &Knob, step: &Step) -> String {
    if fixed.is_empty() {
        format!("{name}:{}={}", knob.name, step.text)
    } else {
        format!("{name}:{fixed},{}={}", knob.name, step.text)
    }
}

impl Policy for OnlineTuner {
    fn name(&self) -> &str {
        self.entry.name
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        if self.history.is_empty() {
            self.history.push(self.point(ctx.now_ns, None));
        }
        if self.after_busy && self.idle_start_ns.is_none() {
            // FG arrivals are never moved, so the busy period that just
            // ended started at its first arrival and, without BG work,
            // would have ended its length later: the rest is delay
            self.idle_start_ns = Some(ctx.now_ns);
            self.late_ns = match (self.busy_start_ns, self.busy.back()) {
                (Some(start), Some(&(len, _))) => {
                    ctx.now_ns.saturating_sub(start.saturating_add(len))
                }
                _ => 0,
            };
        }
        let last_refit_ns = *self.last_refit_ns.get_or_insert(ctx.now_ns);
        // refit at a decision, where the BG service and size are known,
        // and only with the window ending in the busy period just over
        let by_count = self.since_refit >= self.cfg.every;
        let early = !by_count && self.surprised();
        let by_time = self.since_refit >= 1
            && self
                .refit_after_ns
                .is_some_and(|after| ctx.now_ns.saturating_sub(last_refit_ns) >= after);
        if self.after_busy && (by_count || early || by_time) {
            self.last_refit_ns = Some(ctx.now_ns);
            if early {
                // what came before the change describes another workload
                while self.idle.len() > self.since_refit {
                    self.idle.pop_front();
                    self.busy.pop_front();
                }
            }
            self.since_refit = 0;
            self.collided_since = 0;
            self.refit(ctx, early);
            if let Some(hook) = &mut self.on_refit {
                hook(self.intervals);
            }
        }
        // the refitted size is the run's size for the inner policy
        if let Some(size) = self.size_bytes {
            ctx.bg_size_bytes = size;
        }
        self.inner.on_idle(ctx)
    }

    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        if let Some(size) = self.size_bytes {
            ctx.bg_size_bytes = size;
        }
        self.inner.on_bg_done(ctx, done)
    }

    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        self.inner.on_idle_end(idle_ns, collided);
        // the FG arrival that ended the interval starts the next busy period
        self.busy_start_ns = self.idle_start_ns.take().map(|t| t.saturating_add(idle_ns));
        let late_ns = std::mem::take(&mut self.late_ns);
        if self.after_busy {
            // the interval as it was before BG work delayed its start
            self.idle
                .push_back((idle_ns.saturating_add(late_ns), collided));
            self.after_busy = false;
            while self.idle.len() > self.cfg.window {
                self.idle.pop_front();
                self.busy.pop_front();
            }
        } else if let Some(last) = self.idle.back_mut() {
            last.0 = last.0.saturating_add(idle_ns);
            last.1 |= collided;
        } else {
            return; // before any busy period: nothing to pair it with
        }
        self.intervals += 1;
        self.since_refit += 1;
        self.collided_since += u64::from(collided);
    }

    fn on_busy_end(&mut self, busy_ns: u64, requests: u32) {
        self.inner.on_busy_end(busy_ns, requests);
        match self.busy.back_mut() {
            Some(last) if self.after_busy => {
                last.0 = last.0.saturating_add(busy_ns);
                last.1 = last.1.saturating_add(requests);
            }
            _ => self.busy.push_back((busy_ns, requests)),
        }
        self.after_busy = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::BgService;
    use rand::SeedableRng;

    const MS: u64 = 1_000_000;

    fn wait_of(d: Decision) -> Option<u64> {
        match d {
            Decision::Start(s) => Some(s.after_ns),
            Decision::Quiet => None,
        }
    }

    /// Feed `busy` (ms, 1 request each) and `idle` (ms) alternately, asking
    /// for a decision at each idle interval; returns the waits decided.
    fn feed(t: &mut OnlineTuner, idle_ms: &[u64], busy_ms: u64, now: &mut u64) -> Vec<u64> {
        let svc = BgService::Constant { ns: 10 * MS };
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let mut waits = Vec::new();
        for &i in idle_ms {
            t.on_busy_end(busy_ms * MS, 1);
            *now += busy_ms * MS;
            let mut ctx = Ctx {
                now_ns: *now,
                idle_start_ns: *now,
                last_fg_arrival_ns: *now - busy_ms * MS,
                rng: &mut rng,
                bg_service: &svc,
                bg_size_bytes: 65536,
                future_idle_ns: None,
            };
            waits.push(wait_of(t.on_idle(&mut ctx)).expect("fixed-wait always starts"));
            t.on_idle_end(i * MS, false);
            *now += i * MS;
        }
        waits
    }

    /// A quiet device: idle intervals of 2 s, far fewer than `every` = 50
    /// in a minute. Without a time trigger the start value (100 s) stays
    /// for all 20 decisions; with one of 5 s a refit runs at the first
    /// decision at least 5 s after the last (decisions are 2.01 s apart:
    /// the 4th, 7th, 10th, … at 6.03 s, 12.06 s, …), each on the window
    /// so far, and fits a wait under 2 s: every interval is 2 s, so BG
    /// work that ends on the FG arrival adds no delay (constant 10 ms
    /// requests; a wait of w leaves 2 s − w, and the ladder has waits
    /// whose remainder is a whole number of requests).
    #[test]
    fn a_time_trigger_refits_a_quiet_device_between_counts() {
        let idle = vec![2000u64; 20];
        let mut t = tuner("1ms", 400, 50);
        let mut now = 0;
        feed(&mut t, &idle, 10, &mut now);
        assert_eq!(t.history().len(), 1, "no count reached: {:?}", t.history());
        let mut t = tuner("1ms", 400, 50);
        t.set_refit_after_ns(Some(5_000 * MS));
        let mut now = 0;
        let waits = feed(&mut t, &idle, 10, &mut now);
        let h = t.history();
        // first decision at 10 ms; refits at decisions 4, 7, 10, 13, 16, 19
        assert_eq!(
            h[1..].iter().map(|r| r.intervals).collect::<Vec<_>>(),
            [3, 6, 9, 12, 15, 18],
            "{h:?}"
        );
        assert!(waits[..3].iter().all(|&w| w == 100_000 * MS), "{waits:?}");
        let fit = h[1].fit.as_ref().unwrap();
        assert!(fit.met && !fit.early && fit.intervals == 3, "{fit:?}");
        assert!(h[1].value < 2000.0 * MS as f64, "{:?}", h[1]);
        assert_eq!(waits[3], h[1].value as u64);
    }

    #[test]
    fn a_requested_refit_runs_at_the_next_decision() {
        let mut t = tuner("1ms", 100, 50);
        let mut now = 0;
        // nothing in the window yet: a request does nothing
        t.request_refit();
        feed(&mut t, &[1000, 1000, 1000], 10, &mut now);
        // the start point only: 3 of 50 intervals, no refit
        assert_eq!(t.history().len(), 1);
        t.request_refit();
        feed(&mut t, &[1000], 10, &mut now);
        assert_eq!(t.history().len(), 2);
        let fit = t.history()[1].fit.as_ref().unwrap();
        assert_eq!((fit.intervals, fit.early), (3, false));
        // and the schedule restarts from it
        feed(&mut t, &[1000; 10], 10, &mut now);
        assert_eq!(t.history().len(), 2);
    }

    /// A window as a live run records it: 300 idle intervals, heavy
    /// tailed (from a fixed-seed stream), busy periods of 1-3 requests.
    fn recorded_window() -> Window {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let idle: Vec<(u64, bool)> = (0..300)
            .map(|_| {
                // Pareto, shape 1.2, from 2 ms: most gaps short, a few long
                let u = next().max(1e-9);
                (
                    (2.0 * MS as f64 * u.powf(-1.0 / 1.2)).min(20e9) as u64,
                    false,
                )
            })
            .collect();
        let busy = (0..301)
            .map(|_| {
                let n = 1 + (next() * 3.0) as u32;
                (u64::from(n) * 8 * MS, n)
            })
            .collect();
        (busy, idle)
    }

    /// One decision on the window (the first: it refits), with `size` as
    /// the run's size.
    fn decide_once(t: &mut OnlineTuner, size: u64, svc: &BgService) -> Decision {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let mut ctx = Ctx {
            now_ns: 1_000 * MS,
            idle_start_ns: 1_000 * MS,
            last_fg_arrival_ns: 990 * MS,
            rng: &mut rng,
            bg_service: svc,
            bg_size_bytes: size,
            future_idle_ns: None,
        };
        t.on_idle(&mut ctx)
    }

    #[test]
    fn the_size_refit_matches_a_sweep_of_one_retune_per_size() {
        let (busy, idle) = recorded_window();
        let svc = BgService::SizeBased {
            base_ns: 8 * MS,
            knee_bytes: 65_536,
            rate_bytes_per_s: 100e6,
        };
        let sizes = [65_536u64, 262_144, 1 << 20, 4 << 20];
        let mut chosen_sizes = Vec::new();
        for budget in ["100us", "500us", "5ms", "50ms"] {
            let mut t = tuner(budget, 400, 50);
            t.set_sizes(&sizes).unwrap();
            t.seed_window(&busy, &idle).unwrap();
            // the run's own size (8 MiB, not a candidate) is not used
            let d = decide_once(&mut t, 8 << 20, &svc);
            let fit = t.history().last().unwrap().fit.clone().unwrap();
            assert!(fit.met, "{budget}: {fit:?}");
            let size = t.size_bytes().unwrap();
            assert_eq!(t.history().last().unwrap().size_bytes, Some(size));
            // applied at this decision: the policy's request has the size
            match d {
                Decision::Start(s) => assert_eq!(s.size_bytes, size, "{budget}"),
                Decision::Quiet => panic!("{budget}: fixed-wait always starts"),
            }
            // the independent sweep: `simulate --retune`'s tuner, one per
            // size, that size as the run's; the best feasible by throughput
            // (then less delay, then the smaller size)
            let mut best: Option<(u64, String, f64, f64)> = None;
            let mut total_runs = 0;
            for &s in &sizes {
                let mut one = tuner(budget, 400, 50);
                one.seed_window(&busy, &idle).unwrap();
                decide_once(&mut one, s, &svc);
                let f = one.history().last().unwrap().fit.clone().unwrap();
                total_runs += f.simulations;
                if !f.met {
                    continue;
                }
                let better = best.as_ref().is_none_or(|b| {
                    f.bg_throughput_bytes_per_s > b.2
                        || (f.bg_throughput_bytes_per_s == b.2 && f.mean_added_delay_s < b.3)
                });
                if better {
                    best = Some((
                        s,
                        one.value().to_string(),
                        f.bg_throughput_bytes_per_s,
                        f.mean_added_delay_s,
                    ));
                }
            }
            let (s, value, thr, delay) = best.unwrap();
            assert_eq!((size, t.value()), (s, value.as_str()), "{budget}");
            assert_eq!(
                (fit.bg_throughput_bytes_per_s, fit.mean_added_delay_s),
                (thr, delay),
                "{budget}"
            );
            assert_eq!(fit.simulations, total_runs, "{budget}");
            // and the fit is what the simulator gives that (value, size) on
            // the window, run directly
            let (bl, bn): (Vec<u64>, Vec<u32>) = busy.iter().copied().unzip();
            let il: Vec<u64> = idle.iter().map(|i| i.0).collect();
            let prep = Prepared::from_periods(&bl, &bn, &il).unwrap();
            let sim = SimConfig {
                bg_service: svc,
                bg_work: BgWork::Endless,
                bg_size_bytes: size,
                switch_penalty_ns: 0,
                seed: crate::dist::DEFAULT_SEED + 1,
            };
            let mut p = policy::build(&format!("fixed-wait:t={value}")).unwrap();
            let r = simulate(&prep, p.as_mut(), &sim).unwrap();
            assert_eq!(r.bg.throughput_bytes_per_s, thr, "{budget}");
            assert!(
                r.fg.mean_added_delay_s
                    <= budget
                        .parse::<Budget>()
                        .map(|b| match b {
                            Budget::AddedDelay { ns } => ns as f64 / 1e9,
                            Budget::Slowdown { .. } => unreachable!(),
                        })
                        .unwrap()
            );
            chosen_sizes.push((size, value));
        }
        // the budgets pick different sizes (a tight one the smallest, a
        // loose one the largest): the size is chosen, not fixed
        let mut distinct: Vec<u64> = chosen_sizes.iter().map(|c| c.0).collect();
        distinct.dedup();
        assert!(distinct.len() >= 3, "{chosen_sizes:?}");
    }

    #[test]
    fn a_size_refit_is_refused_where_the_size_is_not_the_runs() {
        let mut t = OnlineTuner::new(
            "fixed-wait:size=1MiB",
            OnlineConfig::new("1ms".parse().unwrap()),
        )
        .unwrap();
        let e = t.set_sizes(&[65_536]).unwrap_err().to_string();
        assert!(e.contains("size is fixed"), "{e}");
        let mut t = tuner("1ms", 100, 50);
        assert!(t.set_sizes(&[]).is_err());
        assert!(t.set_sizes(&[0, 65_536]).is_err());
        // without a refit yet, the run's size
        t.set_sizes(&[65_536, 1 << 20]).unwrap();
        assert_eq!(t.size_bytes(), None);
    }

    fn tuner(budget: &str, window: usize, every: usize) -> OnlineTuner {
        let cfg = OnlineConfig {
            window,
            every,
            ..OnlineConfig::new(budget.parse().unwrap())
        };
        OnlineTuner::new("fixed-wait", cfg).unwrap()
    }

    #[test]
    fn starts_conservative_and_refits_every_e_intervals() {
        let mut t = tuner("1ms", 40, 10);
        let mut now = 0;
        // idle intervals alternating 5 ms and 1 s; busy periods 10 ms
        let idle: Vec<u64> = (0..35).map(|k| if k % 2 == 0 { 5 } else { 1000 }).collect();
        let waits = feed(&mut t, &idle, 10, &mut now);
        // the first 10 decisions use the start value, 100 s
        assert!(waits[..10].iter().all(|&w| w == 100_000 * MS), "{waits:?}");
        // refits at the 11th, 21st and 31st decisions
        let h = t.history();
        assert_eq!(h.len(), 4, "{h:?}");
        assert_eq!(h[0].knob, "100s");
        assert!(h[0].fit.is_none());
        assert_eq!(
            h[1..].iter().map(|r| r.intervals).collect::<Vec<_>>(),
            [10, 20, 30]
        );
        assert_eq!(h[1].fit.as_ref().unwrap().intervals, 10);
        assert!(h[1..].iter().all(|r| r.fit.as_ref().unwrap().met));
        // Constant 10 ms BG requests, one FG request per busy period, half
        // the intervals 1 s long. A wait under 5 ms starts BG in every 5 ms
        // interval and collides there (residual 5 ms − wait… up to 10 ms):
        // far over 1 ms per request. A wait t in [5 ms, 10 ms) leaves the
        // 5 ms intervals alone but its last request in a 1 s interval ends
        // t after it (residual t ≥ 5 ms, half the requests delayed: ≥ 2.5
        // ms). 10 ms ends exactly on the FG arrival: no collision, the most
        // requests of any feasible wait. A wait of 1 s or more does nothing.
        let w = h[3].value;
        assert!(
            (5.0 * MS as f64..1000.0 * MS as f64).contains(&w),
            "wait {w}"
        );
        assert_eq!(waits[30], w as u64);
    }

    #[test]
    fn merges_what_it_is_told_twice() {
        let mut t = tuner("1ms", 10, 5);
        t.on_busy_end(3, 1);
        t.on_busy_end(4, 2); // a delay swallowed the interval between
        t.on_idle_end(10, true);
        t.on_idle_end(5, false); // no busy period between: one interval
        t.on_busy_end(1, 1);
        assert_eq!(t.busy, [(7, 3), (1, 1)]);
        assert_eq!(t.idle, [(15, true)]);
        assert_eq!(t.intervals, 2);
    }

    #[test]
    fn the_window_slides() {
        let mut t = tuner("1ms", 3, 3);
        for k in 0..10u64 {
            t.on_busy_end(k, 1);
            t.on_idle_end(100 + k, false);
        }
        t.on_busy_end(10, 1);
        // the last 3 intervals and the 4 busy periods around them
        assert_eq!(
            t.idle.iter().map(|i| i.0).collect::<Vec<_>>(),
            [107, 108, 109]
        );
        assert_eq!(
            t.busy.iter().map(|b| b.0).collect::<Vec<_>>(),
            [7, 8, 9, 10]
        );
    }

    #[test]
    fn specs_it_cannot_retune_say_why() {
        let cfg = || OnlineConfig::new("1ms".parse().unwrap());
        for (spec, why) in [
            ("fixed-wait:t=1s", "`t` is the parameter re-tuning sets"),
            ("aggressive", "has no knob"),
            ("oracle", "clairvoyant"),
            ("nope", "unknown policy"),
            ("fixed-wait:bogus=1", "unknown parameter `bogus`"),
        ] {
            let e = OnlineTuner::new(spec, cfg()).err().expect(spec).to_string();
            assert!(e.contains(why), "{spec}: {e}");
        }
        let bad = |window, every| OnlineConfig {
            window,
            every,
            ..cfg()
        };
        assert!(OnlineTuner::new("fixed-wait", bad(1, 1)).is_err());
        assert!(OnlineTuner::new("fixed-wait", bad(100, 0)).is_err());
        assert!(OnlineTuner::new("fixed-wait", bad(100, 101)).is_err());
        // fixed parameters are kept; an alias resolves
        let t = OnlineTuner::new("waiting:size=1MiB", cfg()).unwrap();
        assert_eq!(t.spec(), "fixed-wait:size=1MiB,t=100s");
        assert_eq!(t.value(), "100s");
    }

    #[test]
    fn records_intervals_as_they_were_before_the_delay() {
        let mut t = tuner("1ms", 10, 5);
        let svc = BgService::Constant { ns: 10 * MS };
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let mut idle_at = |t: &mut OnlineTuner, now_ns: u64| {
            let mut ctx = Ctx {
                now_ns,
                idle_start_ns: now_ns,
                last_fg_arrival_ns: 0,
                rng: &mut rng,
                bg_service: &svc,
                bg_size_bytes: 65536,
                future_idle_ns: None,
            };
            t.on_idle(&mut ctx);
        };
        // busy [0, 10 ms]; idle 10 → 50 ms; the FG arrival at 50 ms finds
        // BG work and its 10 ms busy period ends 7 ms late, at 67 ms; the
        // next FG arrival comes at 100 ms (told: 33 ms of idle time)
        t.on_busy_end(10 * MS, 1);
        idle_at(&mut t, 10 * MS);
        t.on_idle_end(40 * MS, true);
        t.on_busy_end(10 * MS, 1);
        idle_at(&mut t, 67 * MS);
        t.on_idle_end(33 * MS, false);
        // without the BG work: 40 ms, then 100 − 60 = 40 ms
        assert_eq!(t.idle, [(40 * MS, true), (40 * MS, false)]);
    }

    #[test]
    fn a_budget_every_value_meets_gets_the_most_aggressive_value() {
        // regression: the walk up the coarse grid read past its end when
        // even the most aggressive value was feasible
        let mut t = tuner("10s", 40, 10);
        let mut now = 0;
        feed(&mut t, &[5, 1000].repeat(6), 10, &mut now);
        let last = t.history().last().unwrap();
        assert_eq!(last.knob, "100us");
        assert!(last.fit.as_ref().unwrap().met);
    }

    #[test]
    fn a_seeded_window_refits_at_the_first_decision() {
        // the same history as `starts_conservative_and_refits_every_e_intervals`
        // after 30 intervals, recorded by one tuner and given to another
        let mut a = tuner("1ms", 40, 10);
        let mut now = 0;
        let idle: Vec<u64> = (0..30).map(|k| if k % 2 == 0 { 5 } else { 1000 }).collect();
        feed(&mut a, &idle, 10, &mut now);
        a.on_busy_end(10 * MS, 1);
        let (busy, idle_w) = a.window();
        assert_eq!((busy.len(), idle_w.len()), (31, 30));
        let mut b = tuner("1ms", 40, 10);
        b.seed_window(&busy, &idle_w).unwrap();
        let waits = feed(&mut b, &[5], 10, &mut now);
        // no conservative start: the first decision already uses a refit
        let h = b.history();
        assert_eq!(h.len(), 2, "{h:?}");
        assert!(h[1].fit.as_ref().unwrap().met);
        assert!(waits[0] < 100_000 * MS, "{waits:?}");
        // a window longer than the tuner's keeps its newest intervals
        let mut c = tuner("1ms", 4, 2);
        c.seed_window(&busy, &idle_w).unwrap();
        assert_eq!(c.window().1, idle_w[26..].to_vec());
        assert_eq!(c.window().0, busy[26..].to_vec());
        // keeping the newest intervals keeps the busy periods around them,
        // as a window that short would
        let mut d = tuner("1ms", 40, 10);
        d.seed_window(&busy, &idle_w).unwrap();
        d.keep_newest(4);
        assert_eq!(d.window(), c.window());
        d.keep_newest(10);
        assert_eq!(d.window(), c.window());
        // kept by reads: bursts of 20 requests, then single reads; the
        // newest 5 reads are the single ones' 5 busy periods (4 idle
        // intervals between), 25 reach into the bursts by one period
        let bursty_then_single = |t: &mut OnlineTuner| {
            let busy: Vec<(u64, u32)> = (0..10)
                .map(|k| if k < 4 { (260 * MS, 20) } else { (5 * MS, 1) })
                .collect();
            let idle: Vec<(u64, bool)> = (0..9).map(|k| ((k + 1) * 100 * MS, false)).collect();
            t.seed_window(&busy, &idle).unwrap();
            (busy, idle)
        };
        let mut e = tuner("1ms", 40, 10);
        let (busy, idle) = bursty_then_single(&mut e);
        e.keep_newest_reads(5);
        assert_eq!(e.window(), (busy[5..].to_vec(), idle[5..].to_vec()));
        e = tuner("1ms", 40, 10);
        bursty_then_single(&mut e);
        e.keep_newest_reads(25);
        assert_eq!(e.window(), (busy[3..].to_vec(), idle[3..].to_vec()));
        // more reads than the window holds: all of it
        e = tuner("1ms", 40, 10);
        bursty_then_single(&mut e);
        e.keep_newest_reads(1_000);
        assert_eq!(e.window(), (busy.clone(), idle.clone()));
        // after an idle interval with no busy period yet, that interval stays
        e.on_idle_end(7 * MS, false);
        e.keep_newest_reads(2);
        assert_eq!(
            e.window(),
            (busy[8..].to_vec(), vec![idle[8], (7 * MS, false)])
        );
        // inconsistent lengths are refused by name
        let e = c
            .seed_window(&busy[..3], &idle_w[..3])
            .unwrap_err()
            .to_string();
        assert!(e.contains("one more busy period"), "{e}");
    }

    #[test]
    fn back_off_steps_to_the_next_more_conservative_coarse_value() {
        let mut t = tuner("10s", 40, 10);
        let mut now = 0;
        feed(&mut t, &[5, 1000].repeat(6), 10, &mut now);
        assert_eq!(t.value(), "100us");
        let ladder = t.ladder.clone();
        let before = t.current;
        assert!(t.back_off(now));
        // the largest coarse index below the one in use, by brute force
        let want = (0..before)
            .rev()
            .find(|&i| ladder[i].coarse || i == 0)
            .unwrap();
        assert_eq!(t.current, want);
        let last = t.history().last().unwrap();
        assert!(last.backed_off && last.fit.is_none());
        assert_eq!(t.spec(), format!("fixed-wait:t={}", t.ladder[want].text));
        // down to the most conservative value, then no further
        while t.back_off(now) {}
        assert_eq!(t.value(), "100s");
        assert!(!t.back_off(now));
    }
}
