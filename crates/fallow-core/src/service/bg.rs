//! Background work: how much there is ([`BgWork`]) and how long one BG
//! request takes ([`BgService`]).
//!
//! Service models: exponential with a mean (Mi et al. §4.1), constant, and
//! size-based — flat up to a knee (64 KiB by default) and linear in size
//! beyond it, the shape of Practical Scrubbing Fig. 4.

use crate::error::{Error, Result};
use crate::units::{parse_bytes, parse_duration_ns};
use rand::Rng;
use rand_distr::{Binomial, Distribution, Exp, Gamma, Poisson};
use rand_pcg::Pcg64Mcg;
use std::fmt;
use std::str::FromStr;

/// Service time of one BG request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BgService {
    /// Exponential with this mean, whatever the size.
    Exponential {
        /// Mean, ns.
        mean_ns: u64,
    },
    /// Always this long, whatever the size.
    Constant {
        /// Service time, ns.
        ns: u64,
    },
    /// `base_ns` up to `knee_bytes`, then `base_ns + (size − knee)/rate`.
    SizeBased {
        /// Service time of requests up to the knee, ns.
        base_ns: u64,
        /// Size up to which service time is flat, bytes.
        knee_bytes: u64,
        /// Transfer rate beyond the knee, bytes per second.
        rate_bytes_per_s: f64,
    },
}

impl BgService {
    /// Mean service time of a request of `size_bytes`, ns.
    pub fn mean_ns(&self, size_bytes: u64) -> f64 {
        match *self {
            BgService::Exponential { mean_ns } => mean_ns as f64,
            BgService::Constant { ns } => ns as f64,
            BgService::SizeBased {
                base_ns,
                knee_bytes,
                rate_bytes_per_s,
            } => {
                base_ns as f64
                    + size_bytes.saturating_sub(knee_bytes) as f64 / rate_bytes_per_s * 1e9
            }
        }
    }

    /// True when a larger request takes longer (size-based service beyond
    /// its knee). Exponential and constant service take as long for 4 MiB
    /// as for 64 KiB: under them a policy or a tuner that chooses request
    /// sizes would find the largest free ([`crate::sim::check_sizes`]).
    pub fn charges_for_size(&self) -> bool {
        matches!(self, BgService::SizeBased { rate_bytes_per_s, .. } if rate_bytes_per_s.is_finite())
    }

    /// True when every request of a size takes the same time.
    pub fn is_deterministic(&self) -> bool {
        !matches!(self, BgService::Exponential { .. })
    }

    /// Draw one service time, ns (at least 1).
    pub fn sample_ns(&self, size_bytes: u64, rng: &mut Pcg64Mcg) -> u64 {
        match *self {
            BgService::Exponential { mean_ns } => {
                let x: f64 = Exp::new(1.0).expect("rate 1").sample(rng);
                ((x * mean_ns as f64).round() as u64).max(1)
            }
            // integer already: skip the float round trip (a libm call in the hot loop)
            BgService::Constant { ns } => ns.max(1),
            _ => (self.mean_ns(size_bytes).round() as u64).max(1),
        }
    }

    /// Back-to-back requests of `size_bytes` starting at time 0 with `spacing_ns`
    /// of idle between them, at most `max` of them, and an FG arrival at
    /// `available_ns`: how many complete, and how long the one in service
    /// when FG arrives still has to run (0 if none). Closed form where the
    /// model allows it, `None` otherwise (the engine then steps).
    ///
    /// Exponential service with no spacing: completions form a Poisson
    /// process while BG runs, so an unbounded burst completes
    /// N ~ Poisson(available/mean) requests and the interrupted one has an
    /// exponential residual (memorylessness); a bounded burst is drawn
    /// exactly in O(1) too (see `bounded_exponential_burst`). With spacing,
    /// the requests are drawn in blocks whose service sums are Gamma
    /// variates (see `spaced_exponential_burst`): O(log(available/mean)).
    pub fn burst(
        &self,
        size_bytes: u64,
        available_ns: u64,
        max: u64,
        spacing_ns: u64,
        rng: &mut Pcg64Mcg,
    ) -> Option<Burst> {
        if max == 0 || available_ns == 0 {
            return Some(Burst::default());
        }
        match *self {
            BgService::Exponential { mean_ns } => {
                if spacing_ns != 0 {
                    return Some(spaced_exponential_burst(
                        mean_ns,
                        available_ns,
                        max,
                        spacing_ns,
                        rng,
                    ));
                }
                if max != u64::MAX {
                    return Some(self.bounded_exponential_burst(mean_ns, available_ns, max, rng));
                }
                let lambda = available_ns as f64 / mean_ns as f64;
                let n = if lambda < 1e-12 {
                    0
                } else {
                    let p: f64 = Poisson::new(lambda).ok()?.sample(rng);
                    p as u64
                };
                // Unbounded: the burst ends only at the FG arrival, which
                // finds the (n+1)-th request in service.
                Some(Burst {
                    completed: n,
                    residual_ns: self.sample_ns(size_bytes, rng),
                    busy_ns: available_ns,
                    end_ns: available_ns,
                })
            }
            _ => {
                let s = self.sample_ns(size_bytes, rng); // deterministic here: no draw
                let cycle = s + spacing_ns;
                // requests start at k·cycle for k = 0, 1, …; those starting before
                // `available` run; the last of them may be cut by the FG arrival.
                let started = (available_ns - 1) / cycle + 1;
                if started > max {
                    return Some(Burst {
                        completed: max,
                        residual_ns: 0,
                        busy_ns: max.saturating_mul(s),
                        end_ns: (max - 1) * cycle + s,
                    });
                }
                let last_start = (started - 1) * cycle;
                let last_end = last_start + s;
                if last_end <= available_ns {
                    Some(Burst {
                        completed: started,
                        residual_ns: 0,
                        busy_ns: started * s,
                        end_ns: last_end,
                    })
                } else {
                    Some(Burst {
                        completed: started - 1,
                        residual_ns: last_end - available_ns,
                        busy_ns: (started - 1) * s + (available_ns - last_start),
                        end_ns: available_ns,
                    })
                }
            }
        }
    }

    /// At most `max` back-to-back exponential requests before `available_ns`.
    ///
    /// The max-th completion of a Poisson process of rate 1/mean comes at
    /// τ ~ Gamma(max, mean). If τ ≤ available the burst ends there. Otherwise,
    /// given τ, the first max − 1 completions are uniform on [0, τ] (order
    /// statistics of a Poisson process), so N ~ Binomial(max − 1, available/τ)
    /// complete before the FG arrival, and the request in service ends at the
    /// smallest of the k = max − 1 − N remaining points, i.e. after
    /// (τ − available)·(1 − U^{1/k}), or at τ itself when k = 0. Exact, O(1),
    /// so the engine's cost does not grow with the BG work a budget allows.
    fn bounded_exponential_burst(
        &self,
        mean_ns: u64,
        available_ns: u64,
        max: u64,
        rng: &mut Pcg64Mcg,
    ) -> Burst {
        let available = available_ns as f64;
        let tau = Gamma::new(max as f64, mean_ns as f64)
            .map(|g| g.sample(rng))
            .unwrap_or(f64::INFINITY);
        if tau <= available {
            let end = (tau.round() as u64).clamp(1, available_ns);
            return Burst {
                completed: max,
                residual_ns: 0,
                busy_ns: end,
                end_ns: end,
            };
        }
        let n = Binomial::new(max - 1, (available / tau).clamp(0.0, 1.0))
            .map(|b| b.sample(rng))
            .unwrap_or(0);
        let k = max - 1 - n;
        let gap = tau - available;
        let residual = if k == 0 {
            gap
        } else {
            let u: f64 = rng.random();
            gap * (1.0 - u.powf(1.0 / k as f64))
        };
        Burst {
            completed: n,
            residual_ns: (residual.round() as u64).max(1),
            busy_ns: available_ns,
            end_ns: available_ns,
        }
    }
}

/// Blocks shorter than this are drawn one request at a time.
const SPACED_BLOCK_MIN: u64 = 16;

/// At most `max` exponential requests (mean `mean_ns`) with `spacing_ns` of
/// idle after each completion, the first starting at 0, and an FG arrival
/// at `available_ns`: the same outcome, in distribution, as drawing each
/// request's service in turn (what the engine does one request at a time),
/// in O(log(available/mean)) draws however long the interval.
///
/// While the rest `R` of the interval holds many cycles, a block of
/// `m ≈ R / (2·(mean + spacing))` requests is drawn at once: the sum of `m`
/// independent exponential services is a Gamma(m, mean) variate `G`, and
/// the block ends with request `m + 1` starting at `G + m·spacing`. If that
/// lies before the arrival the whole block ran (the next block starts
/// there, and the services after it are independent of it). If not — rare,
/// `G` would have to exceed twice its mean — the arrival falls inside the
/// block, and the block is split: given the sum `G` of `m` services, the
/// first `m₁` of them sum to `G·B`, `B ~ Beta(m₁, m − m₁)` (the Dirichlet
/// split of independent Gammas), and the half holding the arrival is split
/// again, down to a single request, whose service is then known. Each block
/// takes about half the rest, so a 584-year interval of 10 ms requests
/// needs about 40 blocks. Times are rounded to ns per block rather than per
/// request (the step-by-step draws round each service): a difference of at
/// most half a ns per request in the block, far below any service time.
fn spaced_exponential_burst(
    mean_ns: u64,
    available_ns: u64,
    max: u64,
    spacing_ns: u64,
    rng: &mut Pcg64Mcg,
) -> Burst {
    let mean = mean_ns.max(1) as f64;
    let exp = Exp::new(1.0).expect("rate 1");
    // one request's service, as BgService::sample_ns draws it
    let one = |rng: &mut Pcg64Mcg| -> u64 {
        let x: f64 = exp.sample(rng);
        ((x * mean).round() as u64).max(1)
    };
    let mut t = 0u64; // start of the next request, ns
    let mut out = Burst::default();
    // A request of service `x` starting at `t`: false when the burst ended.
    let step = |out: &mut Burst, t: &mut u64, x: u64| -> bool {
        let end = t.saturating_add(x);
        if end > available_ns {
            out.busy_ns += available_ns - *t;
            out.residual_ns = end - available_ns;
            out.end_ns = available_ns;
            return false;
        }
        out.busy_ns += x;
        out.completed += 1;
        out.end_ns = end;
        let next = end.saturating_add(spacing_ns);
        if out.completed == max || next >= available_ns {
            return false;
        }
        *t = next;
        true
    };
    loop {
        let rest = available_ns - t;
        let cycle = mean + spacing_ns as f64;
        // keep the last request out of a block, so `max` ends the burst in `step`
        let m = ((rest as f64 / cycle / 2.0) as u64).min(max - out.completed - 1);
        if m < SPACED_BLOCK_MIN {
            let x = one(rng);
            if !step(&mut out, &mut t, x) {
                return out;
            }
            continue;
        }
        let g = Gamma::new(m as f64, mean)
            .map(|d| d.sample(rng))
            .unwrap_or(f64::INFINITY);
        let g_ns = g.round() as u64;
        let block_ns = g_ns.saturating_add(spacing_ns.saturating_mul(m));
        if t.saturating_add(block_ns) < available_ns {
            out.busy_ns += g_ns;
            out.completed += m;
            out.end_ns = t + g_ns + spacing_ns * (m - 1);
            t += block_ns;
            continue;
        }
        // the arrival falls inside the block: split it down to one request
        let (mut m, mut g) = (m, g);
        while m > 1 {
            let m1 = m / 2;
            let share = rand_distr::Beta::new(m1 as f64, (m - m1) as f64)
                .map(|d| d.sample(rng))
                .unwrap_or(0.5);
            let g1 = g * share;
            let g1_ns = g1.round() as u64;
            let first_ns = g1_ns.saturating_add(spacing_ns.saturating_mul(m1));
            if t.saturating_add(first_ns) < available_ns {
                // the first half ran whole
                out.busy_ns += g1_ns;
                out.completed += m1;
                out.end_ns = t + g1_ns + spacing_ns * (m1 - 1);
                t += first_ns;
                m -= m1;
                g -= g1;
            } else {
                m = m1;
                g = g1;
            }
        }
        let x = (g.round() as u64).max(1);
        if !step(&mut out, &mut t, x) {
            return out;
        }
    }
}

/// A schedule of due times for BG requests (fixed-rate's): request `j`
/// (from 0) is due at `j·period_ns − overdue_ns` from the burst's start
/// (at the start for those already due: a backlog), and starts at its due
/// time or when the request before it completes, whichever is later, until
/// the FG arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Time between successive due times, ns (> 0).
    pub period_ns: u64,
    /// How long before the burst's start request 0 fell due, ns.
    pub overdue_ns: u64,
}

/// What a scheduled burst ([`BgService::scheduled_burst`]) did before the
/// FG arrival.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScheduledBurst {
    /// BG requests that completed by the FG arrival.
    pub completed: u64,
    /// Remaining service of the request in service at the FG arrival, ns
    /// (0: none; then every request due before the arrival completed).
    pub residual_ns: u64,
    /// Device time spent on BG work before the arrival, ns.
    pub busy_ns: u64,
}

impl BgService {
    /// True where [`BgService::scheduled_burst`] draws a schedule in
    /// closed form (exponential service).
    pub fn scheduled_burst_exists(&self) -> bool {
        matches!(self, BgService::Exponential { .. })
    }

    /// Requests on a [`Schedule`] from time 0 until an FG arrival at
    /// `available_ns`, drawn in closed form under exponential service in
    /// `O(log(available / period))` draws for a load away from 1 (see
    /// `scheduled_exponential_burst`); `None` for the other models (the
    /// caller then runs the schedule one request at a time).
    pub fn scheduled_burst(
        &self,
        available_ns: u64,
        schedule: Schedule,
        rng: &mut Pcg64Mcg,
    ) -> Option<ScheduledBurst> {
        match *self {
            BgService::Exponential { mean_ns } if available_ns > 0 && schedule.period_ns > 0 => {
                Some(scheduled_exponential_burst(mean_ns, available_ns, schedule, rng).0)
            }
            _ => None,
        }
    }
}

/// A run of consecutive requests of a scheduled burst, counted from the
/// most recent arrival before the FG arrival: `k1..k2` of them, their
/// services summing to `s1` and `s2` ns.
#[derive(Debug, Clone, Copy)]
struct Run {
    k1: u64,
    k2: u64,
    s1: f64,
    s2: f64,
}

/// A scheduled draw splits runs longer than 1/`COARSE_RUNS` of its due
/// requests best-first and the shorter ones depth-first (in
/// `scheduled_exponential_burst_coarse`).
const COARSE_RUNS: u64 = 1 << 12;

/// A [`Run`] waiting to be split, ordered by the most its interior can reach.
struct Pending {
    bound: f64,
    run: Run,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // ties (f64 bounds of distinct runs can round equal on long
        // intervals) go to the earlier run, so the order of splits, and
        // with it the random stream, does not hang on the heap's layout
        self.bound
            .total_cmp(&o.bound)
            .then_with(|| o.run.k1.cmp(&self.run.k1))
    }
}

/// Split `run` at its middle: the services of its first half are a Beta
/// share of its sum (the Dirichlet split of independent exponentials).
fn split_run(run: Run, rng: &mut Pcg64Mcg) -> (Run, Run) {
    let mid = run.k1 + (run.k2 - run.k1) / 2;
    let share = rand_distr::Beta::new((mid - run.k1) as f64, (run.k2 - mid) as f64)
        .map(|d| d.sample(rng))
        .unwrap_or(0.5);
    let s_mid = run.s1 + (run.s2 - run.s1) * share;
    (
        Run {
            k2: mid,
            s2: s_mid,
            ..run
        },
        Run {
            k1: mid,
            s1: s_mid,
            ..run
        },
    )
}

/// Exponential requests (mean `mean_ns`) on `schedule` until an FG arrival
/// at `available_ns`: the same outcome, in distribution, as starting each
/// request at its due time or at the completion before it (what the
/// engine does one request at a time), however many requests fall due.
///
/// The schedule is a single FIFO server fed by deterministic arrivals (a
/// backlog at 0, then one every period) that works whenever a request is
/// due, so the work left at the arrival `L` is Lindley's (Loynes'
/// construction): `W = max(0, max_k X(k))`, `X(k) = S(k) − E(k)`, where
/// `S(k)` sums the services of the `k` most recent requests due before `L`
/// and `E(k)` is the time from the k-th most recent due time to `L`. The
/// `U` most recent requests are unfinished at `L`, `U` the least `k` with
/// `S(k) ≥ W`; the oldest of them is in service with `W − S(U−1)` left;
/// the rest completed; the work done is the total `S(n)` less `W`.
///
/// `S` is drawn top-down: the total as a Gamma(n, mean) variate, each run
/// of requests split at its middle by a Beta share of its sum. Inside a
/// run `k1..k2`, `X ≤ S(k2) − E(k1+1)`; the run with the highest such
/// bound is split until no bound beats the highest `X` found, and the run
/// holding `U` is then split down to one request. The bound falls behind
/// the maximum geometrically with distance from it when the load
/// `mean / period` is away from 1 (O(log n) splits), and as √n at a load
/// of 1. Times are in f64: at a 584-year interval a few µs of rounding in
/// the residual, far below a service time.
fn scheduled_exponential_burst(
    mean_ns: u64,
    available_ns: u64,
    schedule: Schedule,
    rng: &mut Pcg64Mcg,
) -> (ScheduledBurst, u64) {
    scheduled_exponential_burst_coarse(mean_ns, available_ns, schedule, None, rng)
}

/// [`scheduled_exponential_burst`] with the length below which runs are
/// split depth-first given (`None`: the due count / [`COARSE_RUNS`]); the
/// tests give it to exercise both phases on short intervals.
fn scheduled_exponential_burst_coarse(
    mean_ns: u64,
    available_ns: u64,
    schedule: Schedule,
    coarse_len: Option<u64>,
    rng: &mut Pcg64Mcg,
) -> (ScheduledBurst, u64) {
    let due = DueBefore::new(available_ns, schedule);
    let n = due.n;
    let total = Gamma::new(n as f64, mean_ns.max(1) as f64)
        .map(|g| g.sample(rng))
        .unwrap_or(f64::INFINITY);
    let mut search = Search {
        due,
        best: (0.0, 0),
        splits: 0,
        rng,
    };
    let x_n = total - search.due.since(n);
    if x_n > search.best.0 {
        search.best = (x_n, n);
    }
    let root = Run {
        k1: 0,
        k2: n,
        s1: 0.0,
        s2: total,
    };
    // Two phases, because the order of splits does not change the draw's
    // law (each split's Beta share depends only on its run) but does
    // change its cost. Best-first (highest bound first) splits the fewest
    // runs, but at a load of 1 its heap grows to about √n runs and a
    // 584-year draw spent 70 % of its time in the heap's cache misses;
    // depth-first keeps the next run on top of a stack but, splitting
    // before the highest point is found, split 1.3-2.8 times as many. So
    // runs of at least 1/[`COARSE_RUNS`] of the requests are split
    // best-first (a heap of at most a few thousand), which finds the highest point to
    // within a coarse run's reach; the runs shorter than that are then
    // split depth-first, the one with the higher bound first.
    let coarse_len = coarse_len.unwrap_or((n / COARSE_RUNS).max(2));
    let (fine, mut leaves) = search.best_first(root, coarse_len);
    search.depth_first(fine, &mut leaves);
    let Search { best, splits, .. } = search;
    // the best grew after some runs were kept: drop those it rules out
    leaves.retain(|run| run.s2 >= best.0 - best.0.abs() * 1e-9);
    let w = best.0;
    if w <= 0.0 {
        let b = ScheduledBurst {
            completed: n,
            residual_ns: 0,
            busy_ns: (total.round() as u64).min(available_ns),
        };
        return (b, splits);
    }
    let (run, splits_to_u) = run_holding_u(&leaves, w, best.1, rng);
    let unfinished = run.k2;
    let b = ScheduledBurst {
        completed: n - unfinished,
        residual_ns: ((w - run.s1).round() as u64).max(1),
        busy_ns: ((total - w).round().max(0.0) as u64).min(available_ns),
    };
    (b, splits + splits_to_u)
}

/// The requests due before an FG arrival at `l` on a schedule of period
/// `r`, the first `o` overdue: `n` of them (j·r − o < l), and the time
/// from each to the arrival.
struct DueBefore {
    l: u128,
    r: u128,
    o: u128,
    n: u64,
}

impl DueBefore {
    fn new(available_ns: u64, schedule: Schedule) -> DueBefore {
        let l = u128::from(available_ns);
        let r = u128::from(schedule.period_ns.max(1));
        let o = u128::from(schedule.overdue_ns);
        // fits u64 as L + o does
        let n = ((l + o - 1) / r + 1) as u64;
        DueBefore { l, r, o, n }
    }

    /// E(k): the time from the k-th most recent due time to the arrival.
    fn since(&self, k: u64) -> f64 {
        if k == 0 {
            0.0
        } else {
            let due = (u128::from(self.n - k) * self.r).saturating_sub(self.o);
            (self.l - due) as f64
        }
    }

    /// Inside a run `k1..k2`, X ≤ S(k2) − E(k1+1).
    fn bound(&self, run: &Run) -> f64 {
        run.s2 - self.since(run.k1 + 1)
    }
}

/// The search for W = max(0, max_k X(k)) over the split runs: the highest
/// X found and where, and the splits made (the tests count them).
struct Search<'a> {
    due: DueBefore,
    best: (f64, u64),
    splits: u64,
    rng: &'a mut Pcg64Mcg,
}

impl Search<'_> {
    /// Split `run` at its middle; X at the split point may be the best.
    fn split(&mut self, run: Run) -> (Run, Run) {
        self.splits += 1;
        let (a, b) = split_run(run, self.rng);
        let x_mid = a.s2 - self.due.since(a.k2);
        if x_mid > self.best.0 {
            self.best = (x_mid, a.k2);
        }
        (a, b)
    }

    /// The coarse phase: runs of at least `coarse_len` requests split
    /// highest bound first. Returns the runs left for the fine phase
    /// (with their bounds) and the leaves (a root of one request).
    fn best_first(&mut self, root: Run, coarse_len: u64) -> (Vec<(Run, f64)>, Vec<Run>) {
        let mut leaves = Vec::new();
        let mut fine = Vec::new();
        let mut heap = std::collections::BinaryHeap::new();
        if root.k2 >= 2 {
            heap.push(Pending {
                bound: self.due.bound(&root),
                run: root,
            });
        } else {
            leaves.push(root);
        }
        while let Some(Pending { bound: top, run }) = heap.pop() {
            if top <= self.best.0 {
                // the rest cannot beat the best: they may only hold U
                fine.push((run, top));
                fine.extend(heap.drain().map(|p| (p.run, p.bound)));
                break;
            }
            if run.k2 - run.k1 < coarse_len {
                fine.push((run, top));
                continue;
            }
            let (a, b) = self.split(run);
            for run in [a, b] {
                let bound = self.due.bound(&run);
                if run.k2 - run.k1 >= coarse_len && bound > self.best.0 {
                    heap.push(Pending { bound, run });
                } else {
                    fine.push((run, bound));
                }
            }
        }
        (fine, leaves)
    }

    /// The fine phase: depth first over the rest, highest bound on top;
    /// the runs that may hold U go to `leaves`.
    fn depth_first(&mut self, mut fine: Vec<(Run, f64)>, leaves: &mut Vec<Run>) {
        // `ceiling[i]` is the highest bound among `stack[..=i]`, so
        // W ≤ max(best, ceiling) at every moment.
        fine.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut stack: Vec<(Run, f64)> = Vec::with_capacity(fine.len() + 128);
        let mut ceiling: Vec<f64> = Vec::with_capacity(fine.len() + 128);
        let push = |stack: &mut Vec<(Run, f64)>, ceiling: &mut Vec<f64>, run: Run, b: f64| {
            let c = ceiling.last().map_or(b, |&c| c.max(b));
            stack.push((run, b));
            ceiling.push(c);
        };
        for (run, b) in fine {
            push(&mut stack, &mut ceiling, run, b);
        }
        // A run that is not split may hold U, the least k with S(k) ≥ W, only
        // if S(k1) < W ≤ S(k2); W lies in [best, max(best, ceiling)], so a
        // run is kept only if it straddles that range (at a load of 1 most
        // runs lie far from U: keeping every run kept 3.3 million, 100 MB,
        // over 584 years, for the one holding U). The margins cover f64
        // rounding of the sums.
        let keep = |run: &Run, best: f64, w_hi: f64| {
            run.s1 < w_hi + w_hi.abs() * 1e-9 && run.s2 >= best - best.abs() * 1e-9
        };
        while let Some((run, b)) = stack.pop() {
            ceiling.pop();
            let best = self.best.0;
            let w_hi = ceiling.last().map_or(best, |&c| c.max(best)).max(b);
            if b <= best || run.k2 - run.k1 < 2 {
                if keep(&run, best, w_hi) {
                    leaves.push(run);
                }
                continue;
            }
            let (a, c) = self.split(run);
            let (ba, bc) = (self.due.bound(&a), self.due.bound(&c));
            if ba >= bc {
                push(&mut stack, &mut ceiling, c, bc);
                push(&mut stack, &mut ceiling, a, ba);
            } else {
                push(&mut stack, &mut ceiling, a, ba);
                push(&mut stack, &mut ceiling, c, bc);
            }
        }
    }
}

/// The run holding U: S(k1) < W ≤ S(k2) (the first in k, should rounding
/// let two claim it), split down to one request; with the splits it took.
fn run_holding_u(leaves: &[Run], w: f64, best_k: u64, rng: &mut Pcg64Mcg) -> (Run, u64) {
    let mut run = leaves
        .iter()
        .copied()
        .filter(|run| run.s1 < w && w <= run.s2)
        .min_by_key(|run| run.k1)
        .unwrap_or(Run {
            k1: best_k.saturating_sub(1),
            k2: best_k.max(1),
            s1: 0.0,
            s2: w,
        });
    let mut splits = 0;
    while run.k2 - run.k1 >= 2 {
        splits += 1;
        let (a, b) = split_run(run, rng);
        run = if w <= a.s2 { a } else { b };
    }
    (run, splits)
}

/// Batches in a burst ([`BgService::batched_burst`]): the BG producer
/// queues `size` requests at a time, and the idle time left after a request
/// depends on whether it ended a batch (preemption-interval's `batch=N`).
/// After the `j`-th request of the burst (from 1) the gap is `end_gap_ns`
/// when `(started + j)` is a multiple of `size`, the burst's `spacing_ns`
/// otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchGaps {
    /// Requests per batch (> 0).
    pub size: u64,
    /// Requests of the current batch already run before the burst (< `size`).
    pub started: u64,
    /// Idle time left after the last request of a batch, ns.
    pub end_gap_ns: u64,
}

impl BatchGaps {
    /// Batch ends among the first `m` requests of the burst.
    fn ends(&self, m: u64) -> u64 {
        let size = self.size.max(1);
        ((u128::from(self.started % size) + u128::from(m)) / u128::from(size)) as u64
    }

    /// Total idle time after the first `m` requests of the burst, ns
    /// (exact: u128, as a 584-year interval's gaps may pass u64).
    pub fn gaps_ns(&self, spacing_ns: u64, m: u64) -> u128 {
        let e = self.ends(m);
        u128::from(m - e) * u128::from(spacing_ns) + u128::from(e) * u128::from(self.end_gap_ns)
    }

    /// True when the `j`-th request of the burst (from 1) ends a batch.
    pub fn ends_batch(&self, j: u64) -> bool {
        let size = self.size.max(1);
        (u128::from(self.started % size) + u128::from(j)) % u128::from(size) == 0
    }
}

/// The largest `k` in `lo..=hi` with `fits(k)`, `fits` true at `lo` and
/// monotone (true, then false).
fn last_fitting(mut lo: u64, mut hi: u64, mut fits: impl FnMut(u64) -> bool) -> u64 {
    if fits(hi) {
        return hi;
    }
    // fits(lo), !fits(hi)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

impl BgService {
    /// [`BgService::burst`] with the gaps of [`BatchGaps`]: requests of
    /// `size_bytes` from time 0, at most `max`, `spacing_ns` of idle after
    /// each one inside a batch and `gaps.end_gap_ns` after each batch's
    /// last, until an FG arrival at `available_ns`. The same outcome as
    /// one request at a time: byte for byte under deterministic service
    /// (an exact search over the completion times, O(log n)), in
    /// distribution under exponential service (see
    /// `batched_exponential_burst`, O(log n) draws).
    pub fn batched_burst(
        &self,
        size_bytes: u64,
        available_ns: u64,
        max: u64,
        spacing_ns: u64,
        gaps: BatchGaps,
        rng: &mut Pcg64Mcg,
    ) -> Burst {
        if max == 0 || available_ns == 0 {
            return Burst::default();
        }
        let l = u128::from(available_ns);
        match *self {
            BgService::Exponential { mean_ns } => {
                batched_exponential_burst(mean_ns, available_ns, max, spacing_ns, gaps, rng)
            }
            _ => {
                let s = u128::from(self.sample_ns(size_bytes, rng)); // deterministic: no draw
                                                                     // request k (from 1) starts at (k−1)·s + H(k−1), H the gaps before it
                let start = |k: u64| u128::from(k - 1) * s + gaps.gaps_ns(spacing_ns, k - 1);
                let started = last_fitting(1, max, |k| start(k) < l);
                let last_start = start(started);
                let last_end = last_start + s;
                let started_u = u128::from(started);
                if last_end <= l {
                    Burst {
                        completed: started,
                        residual_ns: 0,
                        busy_ns: (started_u * s).min(u128::from(u64::MAX)) as u64,
                        end_ns: last_end as u64,
                    }
                } else {
                    Burst {
                        completed: started - 1,
                        residual_ns: (last_end - l) as u64,
                        busy_ns: ((started_u - 1) * s + (l - last_start)) as u64,
                        end_ns: available_ns,
                    }
                }
            }
        }
    }
}

/// At most `max` exponential requests (mean `mean_ns`) with the gaps of
/// `gaps` from time 0 and an FG arrival at `available_ns`: the same outcome,
/// in distribution, as drawing each service in turn.
///
/// Request `k` (from 1) completes at `Γ(k) + H(k−1)`, `Γ(k)` the sum of `k`
/// services and `H` the deterministic gaps (nondecreasing), so the count
/// completed by the arrival `L` is `K = max{k : Γ(k) + H(k−1) ≤ L}`. `Γ` is
/// drawn only where the search looks: at `k = 1, 2, 4, …` (each increment a
/// Gamma variate, independent of the past) until a completion lies past
/// `L` (or `max` is reached), then by bisection, the services of a range
/// split by a Beta share of their sum (the Dirichlet split, as `split_run`
/// does), down to `K` and `K + 1`. `Γ(K+1) − Γ(K)` is request `K+1`'s
/// service, kept as its own f64 so it is exact to its own precision when
/// `Γ` is large (584 years of 10 ms requests: `Γ` is a few µs off in
/// absolute terms, the residual is not). O(log n) draws.
fn batched_exponential_burst(
    mean_ns: u64,
    available_ns: u64,
    max: u64,
    spacing_ns: u64,
    gaps: BatchGaps,
    rng: &mut Pcg64Mcg,
) -> Burst {
    let mean = mean_ns.max(1) as f64;
    let l = available_ns as f64;
    let h = |m: u64| gaps.gaps_ns(spacing_ns, m) as f64;
    let gamma = |k: u64, rng: &mut Pcg64Mcg| {
        Gamma::new(k as f64, mean)
            .map(|g| g.sample(rng))
            .unwrap_or(f64::INFINITY)
    };
    // (k, Γ(k)) with request k completed by L, and the next point drawn
    // past it: hi = (k_hi, Γ(k_hi) − Γ(k_lo)) with k_hi not completed by L
    let (mut k_lo, mut g_lo) = (0u64, 0.0f64);
    let mut hi: Option<(u64, f64)> = None;
    let mut step = 1u64;
    while k_lo < max {
        let k = k_lo.saturating_add(step).min(max);
        let d = gamma(k - k_lo, rng);
        if g_lo + d + h(k - 1) <= l {
            k_lo = k;
            g_lo += d;
            step = step.saturating_mul(2);
        } else {
            hi = Some((k, d));
            break;
        }
    }
    let Some((mut k_hi, mut d)) = hi else {
        // all `max` completed by L
        let end = (g_lo + h(max - 1)).round() as u64;
        return Burst {
            completed: max,
            residual_ns: 0,
            busy_ns: (g_lo.round() as u64).min(available_ns),
            end_ns: end.clamp(1, available_ns),
        };
    };
    while k_hi - k_lo > 1 {
        let mid = k_lo + (k_hi - k_lo) / 2;
        let share = rand_distr::Beta::new((mid - k_lo) as f64, (k_hi - mid) as f64)
            .map(|b| b.sample(rng))
            .unwrap_or(0.5);
        let d1 = d * share;
        if g_lo + d1 + h(mid - 1) <= l {
            k_lo = mid;
            g_lo += d1;
            d *= 1.0 - share;
        } else {
            k_hi = mid;
            d = d1;
        }
    }
    let k = k_lo; // completed; request k + 1 has service d
    let next_start = g_lo + h(k);
    if k > 0 && next_start >= l {
        // the arrival finds the device idle in the gap after request k
        let end = ((g_lo + h(k - 1)).round() as u64).clamp(1, available_ns);
        return Burst {
            completed: k,
            residual_ns: 0,
            busy_ns: (g_lo.round() as u64).min(end),
            end_ns: end,
        };
    }
    // request k + 1 is in service at L
    let residual = (next_start + d - l).max(0.0);
    let busy = (l - h(k)).max(0.0);
    Burst {
        completed: k,
        residual_ns: (residual.round() as u64).max(1),
        busy_ns: (busy.round() as u64).min(available_ns),
        end_ns: available_ns,
    }
}

/// Outcome of a burst of BG requests in one idle interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Burst {
    /// BG requests that completed before the FG arrival (or the burst's end).
    pub completed: u64,
    /// Remaining service of the request in progress at the FG arrival, ns (0: none).
    pub residual_ns: u64,
    /// Device time spent on BG work in the interval, ns.
    pub busy_ns: u64,
    /// When the burst ended, ns from its start: the last completion, or
    /// the FG arrival when one cut it.
    pub end_ns: u64,
}

impl fmt::Display for BgService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BgService::Exponential { mean_ns } => write!(f, "exp:{mean_ns}ns"),
            BgService::Constant { ns } => write!(f, "const:{ns}ns"),
            BgService::SizeBased {
                base_ns,
                knee_bytes,
                rate_bytes_per_s,
            } => write!(
                f,
                "size:base={base_ns}ns,knee={knee_bytes}B,rate={rate_bytes_per_s}B"
            ),
        }
    }
}

impl FromStr for BgService {
    type Err = Error;
    /// `exp:2s`, `const:5ms`, `size[:base=8ms,knee=64KiB,rate=100MB]`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |m: String| Error::invalid("bg service", format!("`{s}`: {m}"));
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        match kind.trim() {
            "exp" | "exponential" => {
                let mean_ns = parse_duration_ns(arg)?;
                if mean_ns == 0 {
                    return Err(bad("mean must be positive".into()));
                }
                Ok(BgService::Exponential { mean_ns })
            }
            "const" | "constant" => {
                let ns = parse_duration_ns(arg)?;
                if ns == 0 {
                    return Err(bad("service time must be positive".into()));
                }
                Ok(BgService::Constant { ns })
            }
            "size" => {
                // Practical Scrubbing Fig. 4: ~8 ms flat to 64 KiB on their disks,
                // then bandwidth-bound.
                let (mut base_ns, mut knee_bytes, mut rate) = (8_000_000u64, 65_536u64, 100e6);
                for kv in arg.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
                    let (k, v) = kv
                        .split_once('=')
                        .ok_or_else(|| bad(format!("`{kv}` is not key=value")))?;
                    match k {
                        "base" => base_ns = parse_duration_ns(v)?,
                        "knee" => knee_bytes = parse_bytes(v)?,
                        "rate" => rate = parse_bytes(v)? as f64,
                        _ => {
                            return Err(bad(format!("unknown parameter `{k}` (base, knee, rate)")))
                        }
                    }
                }
                if base_ns == 0 || rate.is_nan() || rate <= 0.0 {
                    return Err(bad("base and rate must be positive".into()));
                }
                Ok(BgService::SizeBased {
                    base_ns,
                    knee_bytes,
                    rate_bytes_per_s: rate,
                })
            }
            other => Err(bad(format!(
                "unknown model `{other}` (exp:MEAN, const:T, size[:base=,knee=,rate=])"
            ))),
        }
    }
}

/// How much BG work there is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BgWork {
    /// Always more (scrubbing a disk that is never done).
    Endless,
    /// A fixed number of requests, then nothing.
    Requests(u64),
    /// A fixed number of bytes, then nothing.
    Bytes(u64),
    /// Busy Bee §5: every FG write spawns BG work; in all, BG work is
    /// `ratio` × FG work (1.0 = 100 %, 10.0 = 1000 %). BG response time is
    /// measured from the spawning write's arrival.
    PerFgWrite {
        /// BG work per unit of FG work.
        ratio: f64,
    },
}

/// Most BG requests `writes:R` may spawn over a run (R × FG requests):
/// each waits in a queue (8 bytes) until served, so a ratio such as
/// `writes:1e9%` would otherwise allocate until the process aborts.
pub const MAX_SPAWNED_BG_REQUESTS: f64 = 1e8;

impl BgWork {
    /// Refuse `writes:R` when R × `fg_requests` passes [`MAX_SPAWNED_BG_REQUESTS`].
    pub fn check_spawn(&self, fg_requests: usize) -> Result<()> {
        if let BgWork::PerFgWrite { ratio } = *self {
            let spawned = ratio * fg_requests as f64;
            if spawned > MAX_SPAWNED_BG_REQUESTS {
                return Err(Error::invalid(
                    "bg work",
                    format!(
                        "writes:{}% spawns {spawned:.3e} BG requests over {fg_requests} FG requests; at most {MAX_SPAWNED_BG_REQUESTS:.0e} are simulated: lower the ratio",
                        ratio * 100.0
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl FromStr for BgWork {
    type Err = Error;
    /// `endless`, `requests:1000`, `bytes:10GiB`, `writes:100%` / `writes:10`.
    fn from_str(s: &str) -> Result<Self> {
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        let bad = |m: &str| Error::invalid("bg work", format!("`{s}`: {m}"));
        match kind.trim() {
            "endless" | "" => Ok(BgWork::Endless),
            "requests" => arg
                .trim()
                .parse()
                .map(BgWork::Requests)
                .map_err(|_| bad("requests:N needs a whole number")),
            "bytes" => Ok(BgWork::Bytes(parse_bytes(arg)?)),
            "writes" => {
                let a = arg.trim();
                let ratio = match a.strip_suffix('%') {
                    Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
                    None => a.parse::<f64>(),
                }
                .map_err(|_| bad("writes:R needs a ratio such as 100% or 10"))?;
                if !(ratio > 0.0 && ratio.is_finite()) {
                    return Err(bad("the ratio must be positive"));
                }
                Ok(BgWork::PerFgWrite { ratio })
            }
            _ => Err(bad("use endless, requests:N, bytes:SIZE or writes:RATIO")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn spawned_work_is_bounded_before_the_queue_grows() {
        // writes:1e9% is a ratio of 1e7: 1e10 BG requests over 1000 FG ones
        let w: BgWork = "writes:1e9%".parse().unwrap();
        let e = w.check_spawn(1000).unwrap_err().to_string();
        assert!(e.contains("bg work") && e.contains("1.000e10"), "{e}");
        // the bound itself is allowed: 1e5 × 1000 = 1e8
        let w: BgWork = "writes:100000".parse().unwrap();
        assert!(w.check_spawn(1000).is_ok());
        assert!(w.check_spawn(1001).is_err());
        assert!(BgWork::Endless.check_spawn(usize::MAX).is_ok());
    }

    /// Mean and standard error of the mean of `xs`.
    fn mean_se(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
        (m, (v / n).sqrt())
    }

    /// The figures the closed-form draws are compared on, one list each:
    /// requests completed, whether the last was cut, its residual and the
    /// busy time.
    fn push_figures(v: &mut [Vec<f64>; 4], completed: u64, residual_ns: u64, busy_ns: u64) {
        v[0].push(completed as f64);
        v[1].push(f64::from(u8::from(residual_ns > 0)));
        v[2].push(residual_ns as f64);
        v[3].push(busy_ns as f64);
    }

    /// Each figure's mean agrees between the closed form (`a`) and the
    /// step-by-step draws (`b`) within 5 standard errors.
    fn assert_same_means(a: &[Vec<f64>; 4], b: &[Vec<f64>; 4], case: &str) {
        for (k, what) in ["completed", "cut", "residual", "busy"].iter().enumerate() {
            let ((ma, sa), (mb, sb)) = (mean_se(&a[k]), mean_se(&b[k]));
            let z = (ma - mb).abs() / (sa * sa + sb * sb).sqrt().max(1e-12);
            assert!(
                z < 5.0,
                "{what} at {case}: {ma} ± {sa} closed form, {mb} ± {sb} step by step"
            );
        }
    }

    /// Spaced exponential bursts drawn in Gamma blocks against the
    /// engine's one-request-at-a-time draws (written out here on their own:
    /// each service drawn as `sample_ns` draws it, the next request `spacing`
    /// after a completion, a request runs if it starts before the arrival):
    /// the completed count, the chance the arrival finds a request in
    /// service, the residual and the busy time agree in mean to within 5
    /// standard errors, on short intervals (no block), long ones (blocks
    /// and their splits) and bounded bursts, and a spacing-free burst
    /// (Poisson) agrees too.
    #[test]
    fn spaced_exponential_bursts_match_one_request_at_a_time_in_distribution() {
        let mean_ns = 1_000u64;
        let svc = BgService::Exponential { mean_ns };
        let step_by_step = |available: u64, max: u64, spacing: u64, rng: &mut Pcg64Mcg| {
            let (mut t, mut out) = (0u64, Burst::default());
            while out.completed < max {
                let x = svc.sample_ns(4096, rng);
                if t + x > available {
                    out.busy_ns += available - t;
                    out.residual_ns = t + x - available;
                    out.end_ns = available;
                    break;
                }
                out.busy_ns += x;
                out.completed += 1;
                out.end_ns = t + x;
                if t + x + spacing >= available {
                    break;
                }
                t += x + spacing;
            }
            out
        };
        let cases = [
            // available, max, spacing
            (3_000, u64::MAX, 400),
            (60_000, u64::MAX, 500),
            (200_000, u64::MAX, 1_000),
            (200_000, 70, 300),
            (200_000, u64::MAX, 1),
            (41_000, u64::MAX, 0),
        ];
        let trials = 4_000;
        for (available, max, spacing) in cases {
            let mut a_rng = Pcg64Mcg::seed_from_u64(7);
            let mut b_rng = Pcg64Mcg::seed_from_u64(8);
            let mut a = [vec![], vec![], vec![], vec![]];
            let mut b = [vec![], vec![], vec![], vec![]];
            for _ in 0..trials {
                let x = svc
                    .burst(4096, available, max, spacing, &mut a_rng)
                    .expect("exponential bursts are closed-form");
                let y = step_by_step(available, max, spacing, &mut b_rng);
                assert!(x.completed <= max && x.busy_ns <= available && x.end_ns <= available);
                push_figures(&mut a, x.completed, x.residual_ns, x.busy_ns);
                push_figures(&mut b, y.completed, y.residual_ns, y.busy_ns);
            }
            assert_same_means(
                &a,
                &b,
                &format!("available {available}, max {max}, spacing {spacing}"),
            );
        }
    }

    /// One request at a time with batch gaps, written out on its own: each
    /// service drawn as `sample_ns` draws it, after the `j`-th request the
    /// gap `end_gap` if it filled a batch (counted on from `started`),
    /// `spacing` otherwise; a request runs if it starts before the arrival.
    fn batched_step_by_step(
        svc: &BgService,
        available: u64,
        max: u64,
        spacing: u64,
        gaps: BatchGaps,
        rng: &mut Pcg64Mcg,
    ) -> Burst {
        let (mut t, mut out) = (0u64, Burst::default());
        let mut in_batch = gaps.started;
        while out.completed < max {
            let x = svc.sample_ns(4096, rng);
            if t + x > available {
                out.busy_ns += available - t;
                out.residual_ns = t + x - available;
                out.end_ns = available;
                break;
            }
            out.busy_ns += x;
            out.completed += 1;
            out.end_ns = t + x;
            in_batch += 1;
            let gap = if in_batch == gaps.size {
                in_batch = 0;
                gaps.end_gap_ns
            } else {
                spacing
            };
            if t + x + gap >= available {
                break;
            }
            t += x + gap;
        }
        out
    }

    /// Batched bursts (`batch=N`): under deterministic service the closed
    /// form equals the step-by-step run exactly, every figure, at every
    /// arrival from 1 ns to a few batches (so in every gap, at every
    /// completion and inside every request); a 584-year interval answers
    /// (O(log n)) with the count worked out by hand.
    #[test]
    fn batched_deterministic_bursts_equal_one_request_at_a_time() {
        let svc = BgService::Constant { ns: 7 };
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for size in [1, 2, 5] {
            for started in 0..size {
                for (spacing, end_gap) in [(0, 0), (0, 11), (11, 0), (11, 11), (3, 20)] {
                    let gaps = BatchGaps {
                        size,
                        started,
                        end_gap_ns: end_gap,
                    };
                    for max in [1, 3, u64::MAX] {
                        for available in 1..200 {
                            let x =
                                svc.batched_burst(4096, available, max, spacing, gaps, &mut rng);
                            let y =
                                batched_step_by_step(&svc, available, max, spacing, gaps, &mut rng);
                            assert_eq!(x, y, "L {available} max {max} {gaps:?} spacing {spacing}");
                        }
                    }
                }
            }
        }
        // 584 years of 5 ms requests, batches of 4 with 100 ms after each:
        // a cycle of 120 ms holds 4 requests
        let svc = BgService::Constant { ns: 5_000_000 };
        let gaps = BatchGaps {
            size: 4,
            started: 0,
            end_gap_ns: 100_000_000,
        };
        let l = u64::MAX - 1;
        let b = svc.batched_burst(4096, l, u64::MAX, 0, gaps, &mut rng);
        let cycles = l / 120_000_000;
        let rest = l % 120_000_000;
        let in_last = (rest / 5_000_000).min(4);
        assert_eq!(b.completed, 4 * cycles + in_last);
        assert_eq!(
            b.busy_ns,
            b.completed * 5_000_000 + if in_last < 4 { rest % 5_000_000 } else { 0 }
        );
    }

    /// Batched exponential bursts (`batch=N`, doubling then Beta bisection of
    /// the Gamma sums) against one request at a time: the completed count,
    /// the chance the arrival finds a request in service, the residual and
    /// the busy time agree in mean to within 5 standard errors, at several
    /// arrivals, batch sizes and gaps, with and without a partial first
    /// batch, and bounded.
    #[test]
    fn batched_exponential_bursts_match_one_request_at_a_time_in_distribution() {
        let mean_ns = 1_000u64;
        let svc = BgService::Exponential { mean_ns };
        let cases = [
            // available, max, spacing, batch size, started, end gap
            (700, u64::MAX, 0, 4, 0, 5_000),
            (3_000, u64::MAX, 0, 4, 0, 5_000),
            (3_000, u64::MAX, 0, 4, 3, 5_000),
            (60_000, u64::MAX, 0, 4, 2, 5_000),
            (60_000, u64::MAX, 2_000, 4, 0, 0),
            (60_000, u64::MAX, 2_000, 4, 1, 2_000),
            (200_000, u64::MAX, 500, 1, 0, 3_000),
            (200_000, u64::MAX, 0, 2, 1, 100),
            (200_000, u64::MAX, 300, 5, 4, 0),
            (200_000, 70, 300, 5, 2, 1_000),
            (41_000, u64::MAX, 0, 3, 0, 0),
        ];
        let trials = 4_000;
        for (available, max, spacing, size, started, end_gap_ns) in cases {
            let gaps = BatchGaps {
                size,
                started,
                end_gap_ns,
            };
            let mut a_rng = Pcg64Mcg::seed_from_u64(17);
            let mut b_rng = Pcg64Mcg::seed_from_u64(18);
            let mut a = [vec![], vec![], vec![], vec![]];
            let mut b = [vec![], vec![], vec![], vec![]];
            for _ in 0..trials {
                let x = svc.batched_burst(4096, available, max, spacing, gaps, &mut a_rng);
                let y = batched_step_by_step(&svc, available, max, spacing, gaps, &mut b_rng);
                assert!(x.completed <= max && x.busy_ns <= available && x.end_ns <= available);
                push_figures(&mut a, x.completed, x.residual_ns, x.busy_ns);
                push_figures(&mut b, y.completed, y.residual_ns, y.busy_ns);
            }
            assert_same_means(
                &a,
                &b,
                &format!("available {available}, max {max}, spacing {spacing}, {gaps:?}"),
            );
        }
        // a 584-year interval answers, its mean near the renewal rate
        let gaps = BatchGaps {
            size: 4,
            started: 0,
            end_gap_ns: 100_000_000,
        };
        let svc = BgService::Exponential {
            mean_ns: 10_000_000,
        };
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let l = u64::MAX - 1;
        let b = svc.batched_burst(4096, l, u64::MAX, 0, gaps, &mut rng);
        let expected = l as f64 / 140e6 * 4.0;
        assert!((b.completed as f64 / expected - 1.0).abs() < 1e-4, "{b:?}");
    }

    /// Scheduled exponential bursts drawn top-down against the engine's one
    /// request at a time (written out here on their own: request j due at
    /// j·period − overdue, started at its due time or the completion before
    /// it, each service drawn as `sample_ns` draws it): the completed
    /// count, the chance the arrival finds a request in service, the
    /// residual and the busy time agree in mean to within 5 standard
    /// errors at loads 0.5, 1 and 2, with and without a backlog, on
    /// intervals of one due time to a few hundred.
    #[test]
    fn scheduled_exponential_bursts_match_one_request_at_a_time_in_distribution() {
        let mean_ns = 1_000u64;
        let svc = BgService::Exponential { mean_ns };
        let step_by_step = |available: u64, sched: Schedule, rng: &mut Pcg64Mcg| {
            let (mut free_at, mut out) = (0u64, ScheduledBurst::default());
            for j in 0u64.. {
                let due = (j * sched.period_ns).saturating_sub(sched.overdue_ns);
                let start = due.max(free_at);
                if start >= available {
                    break;
                }
                let end = start + svc.sample_ns(4096, rng);
                if end > available {
                    out.busy_ns += available - start;
                    out.residual_ns = end - available;
                    break;
                }
                out.busy_ns += end - start;
                out.completed += 1;
                free_at = end;
            }
            out
        };
        let cases = [
            // available, period, overdue
            (700, 2_000, 0),
            (30_000, 2_000, 0),
            (30_000, 1_000, 0),
            (30_000, 500, 0),
            (200_000, 2_000, 6_500),
            (200_000, 1_000, 0),
            (200_000, 500, 2_000),
            (200_000, 1_500, 100_000),
        ];
        let trials = 4_000;
        for (available, period_ns, overdue_ns) in cases {
            let sched = Schedule {
                period_ns,
                overdue_ns,
            };
            // as drawn (these intervals are split best-first throughout),
            // depth-first throughout, and best-first down to 8 requests
            for coarse in [None, Some(u64::MAX), Some(8)] {
                let mut a_rng = Pcg64Mcg::seed_from_u64(11);
                let mut b_rng = Pcg64Mcg::seed_from_u64(12);
                let mut a = [vec![], vec![], vec![], vec![]];
                let mut b = [vec![], vec![], vec![], vec![]];
                for _ in 0..trials {
                    let x = match coarse {
                        None => svc
                            .scheduled_burst(available, sched, &mut a_rng)
                            .expect("exponential schedules are closed-form"),
                        Some(c) => {
                            scheduled_exponential_burst_coarse(
                                mean_ns,
                                available,
                                sched,
                                Some(c),
                                &mut a_rng,
                            )
                            .0
                        }
                    };
                    let y = step_by_step(available, sched, &mut b_rng);
                    assert!(x.busy_ns <= available);
                    push_figures(&mut a, x.completed, x.residual_ns, x.busy_ns);
                    push_figures(&mut b, y.completed, y.residual_ns, y.busy_ns);
                }
                assert_same_means(
                    &a,
                    &b,
                    &format!(
                        "available {available}, period {period_ns}, overdue {overdue_ns}, coarse {coarse:?}"
                    ),
                );
            }
        }
        // constant service has no closed form here: the caller steps
        let c = BgService::Constant { ns: 10 };
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert_eq!(
            c.scheduled_burst(
                100,
                Schedule {
                    period_ns: 5,
                    overdue_ns: 0
                },
                &mut rng
            ),
            None
        );
    }

    /// A 584-year interval on a schedule: at load 1/2 every due time but
    /// the last few is served (the count is the due times before the
    /// arrival, less the handful still queued); at load 2 the device never
    /// idles after the first request, so the count is the Poisson count of
    /// back-to-back service, within 6 standard deviations; at load 1 the
    /// count lies between the two. Each is a few thousand draws at most.
    #[test]
    fn a_584_year_schedule_is_drawn_in_few_splits() {
        let mean_ns = 10_000_000u64;
        let svc = BgService::Exponential { mean_ns };
        let l = u64::MAX - 1;
        let mut rng = Pcg64Mcg::seed_from_u64(4);
        let due_before = |period: u64| (l - 1) / period + 1;
        let half = svc
            .scheduled_burst(
                l,
                Schedule {
                    period_ns: 2 * mean_ns,
                    overdue_ns: 0,
                },
                &mut rng,
            )
            .unwrap();
        let n = due_before(2 * mean_ns);
        assert!(
            half.completed <= n && half.completed + 50 >= n,
            "{half:?} of {n}"
        );
        let double = svc
            .scheduled_burst(
                l,
                Schedule {
                    period_ns: mean_ns / 2,
                    overdue_ns: 0,
                },
                &mut rng,
            )
            .unwrap();
        let want = l as f64 / mean_ns as f64;
        assert!(
            (double.completed as f64 - want).abs() < 6.0 * want.sqrt(),
            "{double:?} vs {want}"
        );
        assert!(double.residual_ns > 0 && double.busy_ns <= l);
        let one = svc
            .scheduled_burst(
                l,
                Schedule {
                    period_ns: mean_ns,
                    overdue_ns: 0,
                },
                &mut rng,
            )
            .unwrap();
        assert!(one.completed <= due_before(mean_ns), "{one:?}");
        assert!(one.completed as f64 > want - 6.0 * want.sqrt(), "{one:?}");
    }

    /// The work a scheduled draw does grows as the logarithm of the
    /// interval at a load away from 1: one bound of splits holds for a
    /// day and for 584 years (about 2¹⁸ times as many due times) at loads 0.5,
    /// 0.9, 1.1 and 2, with and without a backlog (measured over 20
    /// seeds: 40-72 at 0.5, 217-396 at 0.9, 170-464 at 1.1, 51-114 at
    /// 2; stepping would take 8.6 million to 3.7 trillion requests). At a
    /// load of exactly 1 it grows as √n (a day: about 8,000 splits; 584 years of
    /// 10 ms requests: 3.3-4.8 million, docs/simulation.md), so a draw that
    /// lost the geometric pruning fails here.
    #[test]
    fn scheduled_draws_split_a_bounded_number_of_times_away_from_load_1() {
        let mean_ns = 10_000_000u64;
        for (load, cap) in [(0.5, 200u64), (0.9, 1000), (1.1, 1000), (2.0, 300)] {
            let period_ns = (mean_ns as f64 / load) as u64;
            for overdue_ns in [0, 100 * period_ns] {
                for l in [86_400_000_000_000u64, u64::MAX - 1] {
                    let most = (0..20)
                        .map(|seed| {
                            let mut rng = Pcg64Mcg::seed_from_u64(seed);
                            let schedule = Schedule {
                                period_ns,
                                overdue_ns,
                            };
                            scheduled_exponential_burst(mean_ns, l, schedule, &mut rng).1
                        })
                        .max()
                        .unwrap();
                    assert!(
                        most <= cap,
                        "load {load}, {l} ns, overdue {overdue_ns}: {most} splits"
                    );
                }
            }
        }
        // the bound tells the two apart: a day at a load of 1 exceeds it
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        let schedule = Schedule {
            period_ns: mean_ns,
            overdue_ns: 0,
        };
        let splits = scheduled_exponential_burst(mean_ns, 86_400_000_000_000, schedule, &mut rng).1;
        assert!(splits > 1000, "{splits}");
    }

    /// A 584-year interval of 10 ms requests 1 ms apart: about 40 blocks,
    /// and the count within 6 standard deviations of the renewal theorem's
    /// (a cycle is 11 ms on average; the count's variance is
    /// L·σ²/μ³ = L·(10 ms)²/(11 ms)³).
    #[test]
    fn a_584_year_spaced_burst_is_drawn_in_few_blocks() {
        let svc = BgService::Exponential {
            mean_ns: 10_000_000,
        };
        let l = u64::MAX - 1;
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let b = svc.burst(4096, l, u64::MAX, 1_000_000, &mut rng).unwrap();
        let mu = 11e6;
        let want = l as f64 / mu;
        let sd = (l as f64 * 1e14 / (mu * mu * mu)).sqrt();
        assert!(
            (b.completed as f64 - want).abs() < 6.0 * sd,
            "{} vs {want} ± {sd}",
            b.completed
        );
        assert!(b.busy_ns <= l && b.end_ns <= l);
    }

    #[test]
    fn constant_bursts_by_hand() {
        let c = BgService::Constant { ns: 10 };
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        // 35 ns available: requests at 0,10,20,30; the last is cut, 5 ns left
        assert_eq!(
            c.burst(4096, 35, u64::MAX, 0, &mut rng),
            Some(Burst {
                completed: 3,
                residual_ns: 5,
                busy_ns: 35,
                end_ns: 35
            })
        );
        // exactly 30: three complete, none cut
        assert_eq!(
            c.burst(4096, 30, u64::MAX, 0, &mut rng),
            Some(Burst {
                completed: 3,
                residual_ns: 0,
                busy_ns: 30,
                end_ns: 30
            })
        );
        // at most 2
        assert_eq!(
            c.burst(4096, 35, 2, 0, &mut rng),
            Some(Burst {
                completed: 2,
                residual_ns: 0,
                busy_ns: 20,
                end_ns: 20
            })
        );
        // spacing 5: starts at 0, 15, 30; the one at 30 is cut with 5 left
        assert_eq!(
            c.burst(4096, 35, u64::MAX, 5, &mut rng),
            Some(Burst {
                completed: 2,
                residual_ns: 5,
                busy_ns: 25,
                end_ns: 35
            })
        );
    }

    #[test]
    fn exponential_burst_matches_stepping_in_distribution() {
        // mean completions in T with back-to-back Exp(m) service is T/m
        let e = BgService::Exponential { mean_ns: 1000 };
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        let n = 100_000;
        let mut sum = 0u64;
        let mut res = 0u64;
        for _ in 0..n {
            let b = e.burst(4096, 5000, u64::MAX, 0, &mut rng).unwrap();
            sum += b.completed;
            res += b.residual_ns;
        }
        let mean = sum as f64 / n as f64;
        assert!(
            (mean - 5.0).abs() < 5.0 * (5.0f64 / n as f64).sqrt(),
            "{mean}"
        );
        let mres = res as f64 / n as f64;
        assert!(
            (mres - 1000.0).abs() < 5.0 * 1000.0 / (n as f64).sqrt(),
            "{mres}"
        );
    }

    #[test]
    fn bounded_exponential_burst_matches_stepping() {
        // Compare the O(1) draw with stepping request by request: the
        // distribution of completions, of the end time when the budget is
        // reached, and of the residual when FG cuts the burst.
        let e = BgService::Exponential { mean_ns: 1000 };
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let (avail, max, n) = (4000u64, 5u64, 200_000);
        let (mut fast_done, mut step_done) = (0u64, 0u64);
        let (mut fast_res, mut step_res) = (0u64, 0u64);
        let (mut fast_full, mut step_full) = (0u64, 0u64);
        for _ in 0..n {
            let b = e.burst(4096, avail, max, 0, &mut rng).unwrap();
            fast_done += b.completed;
            fast_res += b.residual_ns;
            fast_full += (b.completed == max) as u64;
            // stepping
            let (mut t, mut done) = (0u64, 0u64);
            loop {
                let end = t + e.sample_ns(4096, &mut rng);
                if end > avail {
                    step_res += end - avail;
                    break;
                }
                done += 1;
                t = end;
                if done == max {
                    break;
                }
            }
            step_done += done;
            step_full += (done == max) as u64;
        }
        let f = |x: u64| x as f64 / n as f64;
        // P(full) = P(Poisson(4) >= 5) = 0.3711; means agree within 5 SE
        assert!((f(fast_full) - 0.3711).abs() < 5.0 * (0.3711f64 * 0.6289 / n as f64).sqrt());
        assert!((f(step_full) - 0.3711).abs() < 5.0 * (0.3711f64 * 0.6289 / n as f64).sqrt());
        assert!(
            (f(fast_done) - f(step_done)).abs() < 0.03,
            "{} vs {}",
            f(fast_done),
            f(step_done)
        );
        assert!(
            (f(fast_res) - f(step_res)).abs() < 15.0,
            "{} vs {}",
            f(fast_res),
            f(step_res)
        );
    }

    #[test]
    fn size_based_is_flat_then_linear() {
        let s: BgService = "size:base=8ms,knee=64KiB,rate=100MB".parse().unwrap();
        assert_eq!(s.mean_ns(4096), 8e6);
        assert_eq!(s.mean_ns(65536), 8e6);
        // 1 MiB: 8 ms + (1048576-65536)/1e8 s = 8 ms + 9.8304 ms
        assert!((s.mean_ns(1 << 20) - (8e6 + 9.8304e6)).abs() < 1.0);
    }

    #[test]
    fn parses_work() {
        assert_eq!(
            "writes:100%".parse::<BgWork>().unwrap(),
            BgWork::PerFgWrite { ratio: 1.0 }
        );
        assert_eq!(
            "writes:10".parse::<BgWork>().unwrap(),
            BgWork::PerFgWrite { ratio: 10.0 }
        );
        assert_eq!("requests:5".parse::<BgWork>().unwrap(), BgWork::Requests(5));
        assert!("writes:-1".parse::<BgWork>().is_err());
    }
}
