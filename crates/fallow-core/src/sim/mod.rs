//! The trace-driven FG/BG simulator.
//!
//! One non-preemptive server. FG requests keep their trace arrival times; a
//! [`Policy`] decides when BG work runs in the idle intervals. An FG request
//! that arrives while a BG request is in service waits for it to finish
//! (plus an optional switch penalty): a *collision*.
//!
//! The simulator works on busy periods, not requests (docs/simulation.md,
//! "The model"): a collision delays the first request of a busy period by `d`, and
//! the whole busy period shifts by `d`; the shift eats into the following
//! idle interval and, when that interval is shorter, carries into the next
//! busy period. For a FCFS single server (every synthetic workload) this is
//! exact: within a busy period each request starts when the one before it
//! completes, so all of them move by `d`. For traces recorded with several
//! requests in flight it is the standard approximation.
//!
//! Cost grows with busy periods and with collided requests, not with BG
//! work: where the BG service model allows (constant or size-based service;
//! exponential service run until FG arrives) the number of BG requests that
//! fit an idle interval is computed, not stepped ([`BgService::burst`]).
//!
//! Randomness comes from one seeded stream owned by the run, so a run is
//! reproducible to the byte; the baseline (no BG work) is the trace itself.

mod lineup;
mod metrics;
mod parts;
mod request;

// the BG side of a run's settings (SimConfig) lives with the service models
pub use crate::service::{BgService, BgWork, Burst};
pub use lineup::{default_specs, lineup, run_lineup, Lineup, LineupEvent};
pub use metrics::{BgMetrics, FgMetrics, MeanFigures, SimResult, Totals};
pub use parts::{simulate_split, simulate_split_cancellable, Part, SourcedPart, Split};
pub use request::{
    Defaults, Input, Request, Workload, DEFAULT_BG_SERVICE, DEFAULT_BG_SIZE_BYTES, DEFAULT_BG_WORK,
    DEFAULT_REQUESTS, DEFAULT_REQUEST_SIZE_BYTES, DEFAULT_RETUNE_WINDOW, DEFAULT_SEED,
    DEFAULT_SWITCH_PENALTY_NS, DEFAULT_WORKLOAD_SERVICE, DEFAULT_WRITE_FRACTION,
    SYNTHETIC_CAPACITY_BYTES,
};

use crate::error::{Error, Result};
use crate::period::{completions_of, Periods};
use crate::policy::{Ctx, Decision, Policy};
use crate::polled::{cancelled, CANCEL_EVERY_REQUESTS};
use crate::service::ServiceModel;
use crate::trace::{Op, Trace};
use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::OnceLock;

/// Settings of a run besides the policy.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// BG service time model.
    pub bg_service: BgService,
    /// How much BG work there is.
    pub bg_work: BgWork,
    /// BG request size when the policy does not choose, bytes.
    pub bg_size_bytes: u64,
    /// Extra delay added to every collision (repositioning), ns.
    pub switch_penalty_ns: u64,
    /// Seed of the run's random stream.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            bg_service: BgService::Exponential {
                mean_ns: 10_000_000,
            },
            bg_work: BgWork::Endless,
            bg_size_bytes: 65_536,
            switch_penalty_ns: 0,
            seed: DEFAULT_SEED,
        }
    }
}

/// A trace prepared once for many runs (compare, tune): its busy periods,
/// baseline response times and their histogram.
#[derive(Debug, Clone)]
pub struct Prepared {
    periods: Periods,
    /// Baseline response time of each FG request, ns, in arrival order.
    baseline_rt_ns: Vec<u64>,
    /// Arrival and write flag of each FG request (for arrival-driven BG work).
    arrival_ns: Vec<u64>,
    is_write: Vec<bool>,
    baseline_hist: Histogram<u64>,
    /// The baseline's buckets and figures, computed once by the first run
    /// that needs them (every run reports the baseline's, and a run that
    /// delayed nothing has them as its own).
    baseline_figures: OnceLock<BaselineFigures>,
    baseline_sum_ns: u128,
    span_ns: u64,
    busy_total_ns: u64,
}

/// The baseline's distribution: its histogram's buckets, which a run's
/// delayed requests change, and its figures.
#[derive(Debug, Clone)]
struct BaselineFigures {
    buckets: metrics::Buckets,
    distribution: metrics::Distribution,
}

impl Prepared {
    /// Prepare a trace: its completions (recorded, or from `service` through
    /// a FCFS queue), busy periods and baseline response times.
    pub fn new(trace: &Trace, service: Option<&ServiceModel>, seed: u64) -> Result<Prepared> {
        Prepared::new_until(trace, service, seed, None)
    }

    /// [`Prepared::new`] that stops with [`Error::Interrupted`] soon after
    /// `cancel` is set: each linear pass over the requests reads it every
    /// [`crate::polled::CANCEL_EVERY_REQUESTS`], so Ctrl-C in Python is
    /// answered while a trace of tens of millions of requests is prepared
    /// (about a second of work at 20 M), not only while it is simulated.
    pub fn new_cancellable(
        trace: &Trace,
        service: Option<&ServiceModel>,
        seed: u64,
        cancel: &AtomicBool,
    ) -> Result<Prepared> {
        Prepared::new_until(trace, service, seed, Some(cancel))
    }

    fn new_until(
        trace: &Trace,
        service: Option<&ServiceModel>,
        seed: u64,
        cancel: Option<&AtomicBool>,
    ) -> Result<Prepared> {
        if trace.devices().len() > 1 {
            return Err(Error::Unsupported(format!(
                "{}: the trace holds several devices; select one to simulate (--device ID)",
                trace.report().path.display()
            )));
        }
        let (completion, _) = completions_of(trace, service, seed, cancel)?;
        let periods = crate::period::extract_cancellable(trace.arrival_ns(), &completion, cancel)
            .ok_or(Error::Interrupted)?;
        let arrival_ns = trace.arrival_ns();
        let mut baseline_rt_ns: Vec<u64> = Vec::with_capacity(arrival_ns.len());
        let mut baseline_hist = new_histogram();
        let mut baseline_sum_ns = 0u128;
        for (arrivals, completions) in arrival_ns
            .chunks(CANCEL_EVERY_REQUESTS)
            .zip(completion.chunks(CANCEL_EVERY_REQUESTS))
        {
            if cancelled(cancel) {
                return Err(Error::Interrupted);
            }
            for (&a, &c) in arrivals.iter().zip(completions) {
                let rt = c - a;
                record(&mut baseline_hist, rt);
                baseline_sum_ns += rt as u128;
                baseline_rt_ns.push(rt);
            }
        }
        // First arrival to last completion (modelled ones included): the
        // device's own span, whatever its time zero.
        let span_ns = completion
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(arrival_ns.last().copied().unwrap_or(0))
            - arrival_ns.first().copied().unwrap_or(0);
        if cancelled(cancel) {
            return Err(Error::Interrupted);
        }
        Ok(Prepared {
            busy_total_ns: periods.busy_total_ns(),
            periods,
            baseline_rt_ns,
            arrival_ns: arrival_ns.to_vec(),
            is_write: trace.op().iter().map(|&o| o == Op::Write).collect(),
            baseline_hist,
            baseline_figures: OnceLock::new(),
            baseline_sum_ns,
            span_ns,
        })
    }

    /// The busy periods and idle intervals of the baseline.
    pub fn periods(&self) -> &Periods {
        &self.periods
    }

    /// Number of FG requests.
    pub fn requests(&self) -> usize {
        self.baseline_rt_ns.len()
    }

    /// The baseline's buckets and figures (computed by the first caller).
    fn baseline_figures(&self) -> &BaselineFigures {
        self.baseline_figures.get_or_init(|| {
            let buckets = metrics::buckets(&self.baseline_hist);
            let distribution = metrics::Distribution::of(&self.baseline_hist, &buckets);
            BaselineFigures {
                buckets,
                distribution,
            }
        })
    }

    /// Mean FG response time without BG work, ns.
    pub fn baseline_mean_ns(&self) -> f64 {
        self.baseline_sum_ns as f64 / self.requests().max(1) as f64
    }

    /// From the first arrival to the last completion, ns.
    pub fn span_ns(&self) -> u64 {
        self.span_ns
    }

    /// The mean figures of a run with these totals. The engine and tune's
    /// one-pass sweep both report through here, so equal totals give
    /// bit-identical figures.
    pub fn figures(&self, t: &Totals) -> MeanFigures {
        let n = self.requests().max(1) as f64;
        let baseline_mean = self.baseline_mean_ns();
        let mean = baseline_mean + t.added_ns as f64 / n;
        let span_s = self.span_ns as f64 / 1e9;
        let fg_busy = self.busy_total_ns as f64;
        let bg_device_ns = (t.bg_busy_ns + t.bg_overrun_ns) as f64;
        MeanFigures {
            mean_response_s: mean / 1e9,
            slowdown: if baseline_mean > 0.0 {
                mean / baseline_mean - 1.0
            } else {
                0.0
            },
            mean_added_delay_s: t.added_ns as f64 / n / 1e9,
            collision_rate: t.delayed_requests as f64 / n,
            bg_throughput_bytes_per_s: if span_s > 0.0 {
                t.bg_bytes as f64 / span_s
            } else {
                0.0
            },
            utilization: if self.span_ns > 0 {
                ((fg_busy + bg_device_ns) / self.span_ns as f64).min(1.0)
            } else {
                0.0
            },
            idle_used_fraction: if t.idle_total_ns > 0 {
                t.bg_busy_ns as f64 / t.idle_total_ns as f64
            } else {
                0.0
            },
        }
    }

    /// A trace known only by its busy periods (length, FG requests) and
    /// the idle intervals between them (one fewer), as a policy sees it
    /// through `on_busy_end` / `on_idle_end`; the first busy period starts
    /// at 0.
    ///
    /// Per-request times are synthesised: a busy period of `n` requests and
    /// length `L` is `n` requests served back to back, each arriving as the
    /// one before it completes, so their response times sum to `L` (split
    /// as evenly as integer ns allow). The added-delay accounting is exact
    /// (a collision delays every request of the busy period). Of all FCFS
    /// single-server schedules with that `n` and `L`, this has the smallest
    /// baseline response times (each request waits for none), so the
    /// slowdown it gives is an upper bound of the true one: a slowdown
    /// budget is checked conservatively.
    pub fn from_periods(
        busy_len_ns: &[u64],
        busy_requests: &[u32],
        idle_len_ns: &[u64],
    ) -> Result<Prepared> {
        if busy_len_ns.is_empty() || busy_len_ns.len() != busy_requests.len() {
            return Err(Error::invalid(
                "busy periods",
                format!(
                    "{} lengths and {} request counts: give as many of each, at least one",
                    busy_len_ns.len(),
                    busy_requests.len()
                ),
            ));
        }
        if idle_len_ns.len() + 1 != busy_len_ns.len() {
            return Err(Error::invalid(
                "idle intervals",
                format!(
                    "{} idle intervals between {} busy periods: there must be one fewer",
                    idle_len_ns.len(),
                    busy_len_ns.len()
                ),
            ));
        }
        if let Some(j) = busy_requests.iter().position(|&n| n == 0) {
            return Err(Error::invalid(
                "busy periods",
                format!("busy period {j} has no request"),
            ));
        }
        if let Some(j) = idle_len_ns.iter().position(|&i| i == 0) {
            return Err(Error::invalid(
                "idle intervals",
                format!("idle interval {j} is empty (idle intervals are > 0)"),
            ));
        }
        let requests: usize = busy_requests.iter().map(|&n| n as usize).sum();
        let mut periods = Periods::default();
        let mut baseline_rt_ns = Vec::with_capacity(requests);
        let mut arrival_ns = Vec::with_capacity(requests);
        // sized to the window's response times, not 41 days: a refit runs
        // dozens of simulations on it
        let mut baseline_hist = small_histogram();
        let mut baseline_sum_ns = 0u128;
        let mut t = 0u64;
        for (j, (&len, &n)) in busy_len_ns.iter().zip(busy_requests).enumerate() {
            periods.busy_start_ns.push(t);
            periods.busy_len_ns.push(len);
            periods.busy_requests.push(n);
            let n = u128::from(n);
            for i in 0..n {
                // request i is served over [t + i·L/n, t + (i+1)·L/n)
                let from = (i * len as u128 / n) as u64;
                let to = ((i + 1) * len as u128 / n) as u64;
                arrival_ns.push(t + from);
                baseline_rt_ns.push(to - from);
                record(&mut baseline_hist, to - from);
                baseline_sum_ns += (to - from) as u128;
            }
            t = t.checked_add(len).ok_or_else(overflow)?;
            if let Some(&idle) = idle_len_ns.get(j) {
                periods.idle_start_ns.push(t);
                periods.idle_len_ns.push(idle);
                t = t.checked_add(idle).ok_or_else(overflow)?;
            }
        }
        Ok(Prepared {
            busy_total_ns: periods.busy_total_ns(),
            periods,
            is_write: vec![false; baseline_rt_ns.len()],
            baseline_rt_ns,
            arrival_ns,
            baseline_hist,
            baseline_figures: OnceLock::new(),
            baseline_sum_ns,
            span_ns: t,
        })
    }

    /// The first `requests` FG requests on their own, as if the trace ended
    /// there: a run of a policy on it is, request for request, the start
    /// of the same run on the whole trace (for policies that are not
    /// clairvoyant). `requests` must end a busy period.
    pub fn prefix(&self, requests: usize) -> Result<Prepared> {
        let mut k = 0usize; // busy periods kept
        let mut n = 0usize;
        while n < requests && k < self.periods.busy_requests.len() {
            n += self.periods.busy_requests[k] as usize;
            k += 1;
        }
        if n != requests || k == 0 {
            return Err(Error::invalid(
                "split",
                format!(
                    "{requests} requests do not end a busy period (the trace has {} requests in {} busy periods)",
                    self.requests(),
                    self.periods.busy_requests.len()
                ),
            ));
        }
        let p = &self.periods;
        let periods = Periods {
            busy_start_ns: p.busy_start_ns[..k].to_vec(),
            busy_len_ns: p.busy_len_ns[..k].to_vec(),
            busy_requests: p.busy_requests[..k].to_vec(),
            idle_start_ns: p.idle_start_ns[..k - 1].to_vec(),
            idle_len_ns: p.idle_len_ns[..k - 1].to_vec(),
        };
        let baseline_rt_ns = self.baseline_rt_ns[..n].to_vec();
        let mut baseline_hist = new_histogram();
        let mut baseline_sum_ns = 0u128;
        for &rt in &baseline_rt_ns {
            record(&mut baseline_hist, rt);
            baseline_sum_ns += rt as u128;
        }
        Ok(Prepared {
            span_ns: periods.busy_start_ns[k - 1] + periods.busy_len_ns[k - 1],
            busy_total_ns: periods.busy_total_ns(),
            periods,
            baseline_rt_ns,
            arrival_ns: self.arrival_ns[..n].to_vec(),
            is_write: self.is_write[..n].to_vec(),
            baseline_hist,
            baseline_figures: OnceLock::new(),
            baseline_sum_ns,
        })
    }
}

fn overflow() -> Error {
    Error::invalid(
        "periods",
        "the busy periods and idle intervals overflow 584 years of ns",
    )
}

fn new_histogram() -> Histogram<u64> {
    // 3 significant digits from 1 ns to ~41 days, sized up front (about
    // 350 KB) and auto-resizing beyond. Values must go through `record`:
    // `saturating_record` clamps to the current bounds and never resizes,
    // so an auto-sized `Histogram::new(3)` (bounds 1..2) would hold only 2s.
    let mut h = Histogram::new_with_bounds(1, 1 << 52, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// A histogram of the same layout as [`new_histogram`] (so the same
/// values share a bucket) that starts at the smallest size and grows to
/// what is recorded: a window's response times, a run's delayed requests.
fn small_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// Record `v`, growing the histogram if needed.
fn record(h: &mut Histogram<u64>, v: u64) {
    if h.record(v).is_err() {
        // only past u64's range: clamp
        h.saturating_record(v);
    }
}

/// A ready-to-use BG service model that charges for size: Practical
/// Scrubbing Fig. 4's shape with a 2000s disk's figures (8 ms up to 64 KiB,
/// then 100 MB/s), as the README and docs/tuning.md use it.
pub const SIZE_MODEL_EXAMPLE: &str = "size:base=8ms,knee=64KiB,rate=100MB";

/// Refuse a run in which request sizes are chosen — by the policy
/// ([`Policy::chooses_size`]) or by a tuner among `candidate_sizes` — under
/// a BG service model that takes as long for every size
/// ([`BgService::charges_for_size`]): larger requests would look free and
/// the largest would always win (an adaptive-size at 200 MB/s against
/// 4.6 MB/s for every other policy). The error names the setting and a
/// model to use instead.
pub fn check_sizes(bg: &BgService, chooser: Option<&str>, candidate_sizes: usize) -> Result<()> {
    if bg.charges_for_size() {
        return Ok(());
    }
    let who = match chooser {
        Some(policy) => format!("{policy} chooses its own request sizes"),
        None if candidate_sizes > 1 => {
            format!("tuning chooses the request size among {candidate_sizes} candidates")
        }
        None => return Ok(()),
    };
    let single = if chooser.is_none() {
        " or tune one size (--sizes 64KiB)"
    } else {
        ""
    };
    Err(Error::invalid(
        "bg",
        format!(
            "{who}, but the BG service model `{bg}` takes as long for 4 MiB as for 64 KiB, \
             so larger requests would look free; give a model that charges for size, \
             e.g. --bg {SIZE_MODEL_EXAMPLE} (Python: bg=\"{SIZE_MODEL_EXAMPLE}\"){single}"
        ),
    ))
}

/// Run `policy` over a prepared trace. A policy that chooses its request
/// sizes needs a BG model that charges for size ([`check_sizes`]).
pub fn simulate(prep: &Prepared, policy: &mut dyn Policy, cfg: &SimConfig) -> Result<SimResult> {
    simulate_until(prep, policy, cfg, None)
}

/// [`simulate`] that stops with [`Error::Interrupted`] soon after `cancel`
/// is set (it is read every [`CANCEL_EVERY`] busy periods): what lets
/// Python's Ctrl-C stop `fallow.simulate` and `fallow.compare` on a trace
/// of tens of millions of requests.
pub fn simulate_cancellable(
    prep: &Prepared,
    policy: &mut dyn Policy,
    cfg: &SimConfig,
    cancel: &AtomicBool,
) -> Result<SimResult> {
    simulate_until(prep, policy, cfg, Some(cancel))
}

/// Busy periods between two reads of a cancel flag: under a millisecond of
/// work in a release build (Ctrl-C within 0.5 s: tests/python/test_interrupt.py); a
/// relaxed load per 1,024 periods is lost in the period's own work.
pub const CANCEL_EVERY: usize = 1024;

fn simulate_until(
    prep: &Prepared,
    policy: &mut dyn Policy,
    cfg: &SimConfig,
    cancel: Option<&AtomicBool>,
) -> Result<SimResult> {
    if cfg.bg_size_bytes == 0 {
        return Err(Error::invalid("bg size", "must be positive"));
    }
    if policy.chooses_size() {
        check_sizes(&cfg.bg_service, Some(policy.name()), 1)?;
    }
    cfg.bg_work.check_spawn(prep.requests())?;
    let mut run = Run::new(prep, cfg);
    policy.prepare(&prep.periods);
    policy.simulated(&cfg.bg_service, &cfg.bg_work);
    if !run.go(policy, cancel) {
        return Err(Error::Interrupted);
    }
    Ok(run.finish(policy))
}

/// BG work left to do.
enum Supply {
    Endless,
    Requests(u64),
    Bytes(u64),
    /// FIFO of arrival times of spawned BG requests, and the spawn accumulator.
    Queue {
        arrivals: VecDeque<u64>,
        per_write: f64,
        credit: f64,
    },
}

struct Run<'a> {
    prep: &'a Prepared,
    cfg: &'a SimConfig,
    rng: Pcg64Mcg,
    supply: Supply,
    /// The counts the mean figures come from.
    t: Totals,
    /// How the delayed requests change the baseline's buckets.
    delayed: metrics::BucketDelta,
    // arrival-driven BG work
    bg_response_sum_ns: u128,
    bg_response_count: u64,
    bg_spawned: u64,
}

impl<'a> Run<'a> {
    fn new(prep: &'a Prepared, cfg: &'a SimConfig) -> Self {
        let supply = match cfg.bg_work {
            BgWork::Endless => Supply::Endless,
            BgWork::Requests(n) => Supply::Requests(n),
            BgWork::Bytes(b) => Supply::Bytes(b),
            BgWork::PerFgWrite { ratio } => {
                // BG work totals `ratio` × FG work (Busy Bee §5), carried by the
                // writes: each write spawns ratio · N_fg / N_writes requests.
                let writes = prep.is_write.iter().filter(|&&w| w).count();
                let per_write = if writes == 0 {
                    0.0
                } else {
                    ratio * prep.requests() as f64 / writes as f64
                };
                Supply::Queue {
                    arrivals: VecDeque::new(),
                    per_write,
                    credit: 0.0,
                }
            }
        };
        Run {
            prep,
            cfg,
            rng: Pcg64Mcg::seed_from_u64(cfg.seed),
            supply,
            t: Totals::default(),
            delayed: metrics::BucketDelta::default(),
            bg_response_sum_ns: 0,
            bg_response_count: 0,
            bg_spawned: 0,
        }
    }

    /// The whole run; false when `cancel` was set before it ended.
    fn go(&mut self, policy: &mut dyn Policy, cancel: Option<&AtomicBool>) -> bool {
        let p = &self.prep.periods;
        let clairvoyant = policy.clairvoyant();
        let mut shift: u64 = 0; // delay of the current busy period
        let mut first_req = 0usize;
        // The device's busy period under way: its first FG arrival and its
        // FG requests so far. A delay that carries a busy period past the
        // next arrival merges the two: the device never fell idle, so the
        // policy hears one busy period, as the live driver does.
        let mut device_start_ns: Option<u64> = None;
        let mut device_requests = 0u32;
        for j in 0..p.busy_len_ns.len() {
            if j % CANCEL_EVERY == 0
                && cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
            {
                return false;
            }
            let n = p.busy_requests[j] as usize;
            let reqs = first_req..first_req + n;
            first_req += n;
            if shift > 0 {
                self.delay(reqs.clone(), shift);
            }
            if let Supply::Queue { .. } = self.supply {
                self.spawn(reqs);
            }
            let start_ns = *device_start_ns.get_or_insert(p.busy_start_ns[j]);
            device_requests = device_requests.saturating_add(p.busy_requests[j]);
            // the last FG completion, every request of the period moved by `shift`
            // (saturating: a trace may end within a service time of 2^64 ns)
            let end_ns = p.busy_start_ns[j]
                .saturating_add(p.busy_len_ns[j])
                .saturating_add(shift);
            let gap = p.idle_len_ns.get(j).copied();
            if let Some(gap) = gap {
                if gap <= shift {
                    // the shifted busy period runs into the next one: no idle time
                    shift -= gap;
                    continue;
                }
            }
            // From the first FG arrival to the last FG completion, waits
            // behind BG work included (period::extract of the completions
            // with BG work).
            policy.on_busy_end(end_ns - start_ns, device_requests);
            device_start_ns = None;
            device_requests = 0;
            let Some(gap) = gap else {
                break;
            };
            let idle = gap - shift;
            let idle_start = end_ns;
            self.t.idle_total_ns += idle;
            self.t.idle_intervals += 1;
            let last_arrival = self.prep.arrival_ns[first_req - 1];
            let residual = self.idle_interval(policy, idle_start, idle, last_arrival, clairvoyant);
            policy.on_idle_end(idle, residual > 0);
            shift = if residual > 0 {
                self.t.collisions += 1;
                self.t.bg_overrun_ns += residual;
                residual + self.cfg.switch_penalty_ns
            } else {
                0
            };
        }
        true
    }

    /// FG requests `reqs` are delayed by `d`.
    fn delay(&mut self, reqs: std::ops::Range<usize>, d: u64) {
        self.t.delayed_requests += reqs.len() as u64;
        self.t.added_ns += d as u128 * reqs.len() as u128;
        for &rt in &self.prep.baseline_rt_ns[reqs] {
            self.delayed.moved(rt, rt.saturating_add(d));
        }
    }

    /// Writes among `reqs` spawn BG requests (arrival-driven BG work).
    fn spawn(&mut self, reqs: std::ops::Range<usize>) {
        let Supply::Queue {
            arrivals,
            per_write,
            credit,
        } = &mut self.supply
        else {
            return;
        };
        for i in reqs {
            if self.prep.is_write[i] {
                *credit += *per_write;
                while *credit >= 1.0 {
                    *credit -= 1.0;
                    arrivals.push_back(self.prep.arrival_ns[i]);
                    self.bg_spawned += 1;
                }
            }
        }
    }

    /// BG requests of `size` that may still start.
    fn available(&self, size: u64) -> u64 {
        match &self.supply {
            Supply::Endless => u64::MAX,
            Supply::Requests(n) => *n,
            Supply::Bytes(b) => b.div_ceil(size),
            Supply::Queue { arrivals, .. } => arrivals.len() as u64,
        }
    }

    /// `count` BG requests of `size` completed at `at_ns` (absolute; the
    /// last one's completion, used for arrival-driven response times).
    fn complete(&mut self, count: u64, size: u64, at_ns: u64) {
        if count == 0 {
            return;
        }
        self.t.bg_completed = self.t.bg_completed.saturating_add(count);
        match &mut self.supply {
            Supply::Endless => {
                self.t.bg_bytes = self.t.bg_bytes.saturating_add(count.saturating_mul(size))
            }
            Supply::Requests(n) => {
                *n -= count.min(*n);
                self.t.bg_bytes = self.t.bg_bytes.saturating_add(count.saturating_mul(size));
            }
            Supply::Bytes(b) => {
                let done = count.saturating_mul(size).min(*b);
                *b -= done;
                self.t.bg_bytes = self.t.bg_bytes.saturating_add(done);
            }
            Supply::Queue { arrivals, .. } => {
                for _ in 0..count {
                    if let Some(a) = arrivals.pop_front() {
                        self.bg_response_sum_ns += (at_ns - a.min(at_ns)) as u128;
                        self.bg_response_count += 1;
                    }
                }
                self.t.bg_bytes = self.t.bg_bytes.saturating_add(count.saturating_mul(size));
            }
        }
    }

    /// Run one idle interval of `idle` ns starting at `t0`; returns the
    /// residual BG service the next FG arrival finds (0: no collision).
    fn idle_interval(
        &mut self,
        policy: &mut dyn Policy,
        t0: u64,
        idle: u64,
        last_fg_arrival_ns: u64,
        clairvoyant: bool,
    ) -> u64 {
        let mut now = 0u64; // relative to t0
        let mut done = 0u64;
        let mut decision = {
            let mut ctx = Ctx {
                now_ns: t0,
                idle_start_ns: t0,
                last_fg_arrival_ns,
                rng: &mut self.rng,
                bg_service: &self.cfg.bg_service,
                bg_size_bytes: self.cfg.bg_size_bytes,
                future_idle_ns: clairvoyant.then_some(idle),
            };
            policy.on_idle(&mut ctx)
        };
        let stepping_only = matches!(self.supply, Supply::Queue { .. });
        loop {
            let Decision::Start(mut s) = decision else {
                return 0;
            };
            let begin = now.saturating_add(s.after_ns);
            if begin >= idle {
                return 0;
            }
            let size = s.size_bytes.max(1);
            if let Some(schedule) = s.schedule {
                // the rest of the interval on a schedule of due times, in
                // closed form where the model has one (endless work only:
                // the draw knows no supply)
                let drawn = matches!(self.supply, Supply::Endless)
                    .then(|| {
                        self.cfg
                            .bg_service
                            .scheduled_burst(idle - begin, schedule, &mut self.rng)
                    })
                    .flatten();
                if let Some(b) = drawn {
                    self.t.bg_busy_ns += b.busy_ns;
                    let cut = u64::from(b.residual_ns > 0);
                    // the interrupted request completes too, after the FG arrival
                    self.complete(
                        b.completed + cut,
                        size,
                        t0.saturating_add(idle).saturating_add(b.residual_ns),
                    );
                    policy.on_burst_cut(b.completed);
                    return b.residual_ns;
                }
            }
            let max = s.max_requests.min(self.available(size));
            if max == 0 {
                return 0;
            }
            let fast = if s.consult_each || stepping_only {
                None
            } else if let Some(gaps) = s.batch {
                Some(self.cfg.bg_service.batched_burst(
                    size,
                    idle - begin,
                    max,
                    s.spacing_ns,
                    gaps,
                    &mut self.rng,
                ))
            } else {
                self.cfg
                    .bg_service
                    .burst(size, idle - begin, max, s.spacing_ns, &mut self.rng)
            };
            if let Some(b) = fast {
                self.t.bg_busy_ns += b.busy_ns;
                if b.residual_ns > 0 {
                    // the interrupted request completes too, after the FG arrival
                    self.complete(
                        b.completed + 1,
                        size,
                        t0.saturating_add(idle).saturating_add(b.residual_ns),
                    );
                    policy.on_burst_cut(b.completed);
                    return b.residual_ns;
                }
                self.complete(b.completed, size, t0 + begin + b.end_ns);
                if begin + b.end_ns >= idle && b.completed > 0 {
                    // the last request completed at the arrival's very ns
                    policy.on_burst_cut(b.completed - 1);
                }
                done += b.completed;
                now = begin + b.end_ns;
            } else {
                // one request at a time
                let service = self.cfg.bg_service.sample_ns(size, &mut self.rng);
                let end = begin.saturating_add(service);
                if end > idle {
                    self.t.bg_busy_ns += idle - begin;
                    self.complete(1, size, t0.saturating_add(end));
                    return end - idle;
                }
                self.t.bg_busy_ns += service;
                self.complete(1, size, t0 + end);
                done += 1;
                now = end;
                if !s.consult_each && s.max_requests > 1 && now < idle {
                    // continue the same burst
                    s.max_requests = s.max_requests.saturating_sub(1);
                    s.after_ns = s.spacing_ns;
                    if let Some(g) = s.batch.as_mut() {
                        // the request that completed was the burst's first:
                        // the rest is a burst of its own, one further into the batch
                        if g.ends_batch(1) {
                            s.after_ns = g.end_gap_ns;
                        }
                        g.started = (g.started + 1) % g.size.max(1);
                    }
                    decision = Decision::Start(s);
                    continue;
                }
            }
            if now >= idle {
                return 0;
            }
            let mut ctx = Ctx {
                now_ns: t0 + now,
                idle_start_ns: t0,
                last_fg_arrival_ns,
                rng: &mut self.rng,
                bg_service: &self.cfg.bg_service,
                bg_size_bytes: self.cfg.bg_size_bytes,
                future_idle_ns: clairvoyant.then_some(idle - now),
            };
            decision = policy.on_bg_done(&mut ctx, done);
        }
    }

    fn finish(self, policy: &dyn Policy) -> SimResult {
        let prep = self.prep;
        let t = &self.t;
        // the with-BG distribution = the baseline's buckets with the delayed
        // requests moved; the baseline's own when nothing was delayed
        let base = prep.baseline_figures();
        let with_bg = self
            .delayed
            .apply(&prep.baseline_hist, &base.buckets)
            .map(|b| metrics::Distribution::of(&prep.baseline_hist, &b));
        let dist = with_bg.as_ref().unwrap_or(&base.distribution);
        let f = prep.figures(t);
        let s = |ns: u64| ns as f64 / 1e9;
        let [p50, p90, p99, p999] = dist.quantiles_ns.map(s);
        SimResult {
            policy: policy.name().to_string(),
            clairvoyant: policy.clairvoyant(),
            fg: FgMetrics {
                requests: prep.requests() as u64,
                mean_response_s: f.mean_response_s,
                baseline_mean_response_s: prep.baseline_mean_ns() / 1e9,
                slowdown: f.slowdown,
                mean_added_delay_s: f.mean_added_delay_s,
                p50_response_s: p50,
                p90_response_s: p90,
                p99_response_s: p99,
                p999_response_s: p999,
                baseline_p99_response_s: s(base.distribution.p99_ns()),
                collision_rate: f.collision_rate,
                delayed_requests: t.delayed_requests,
                collisions: t.collisions,
                ccdf: dist.ccdf.clone(),
                baseline_ccdf: base.distribution.ccdf.clone(),
            },
            bg: BgMetrics {
                completed: t.bg_completed,
                bytes: t.bg_bytes,
                throughput_bytes_per_s: f.bg_throughput_bytes_per_s,
                mean_response_s: (self.bg_response_count > 0)
                    .then(|| self.bg_response_sum_ns as f64 / self.bg_response_count as f64 / 1e9),
                spawned: matches!(self.supply, Supply::Queue { .. }).then_some(self.bg_spawned),
                busy_s: (t.bg_busy_ns + t.bg_overrun_ns) as f64 / 1e9,
            },
            utilization: f.utilization,
            idle_total_s: t.idle_total_ns as f64 / 1e9,
            idle_used_fraction: f.idle_used_fraction,
            idle_intervals: t.idle_intervals,
            span_s: prep.span_ns as f64 / 1e9,
            notes: policy.notes(),
        }
    }
}
