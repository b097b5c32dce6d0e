//! Background scheduling policies: one [`Policy`] trait, one file per policy,
//! and a [`registry`] that everything else reads (the simulator, the live
//! runtime, the CLI's `--policy NAME:k=v`, Python).
//!
//! A policy sees the world only through the trait: it is told when the
//! device falls idle, when a BG request completes, when an idle interval
//! ends and when a busy period ends; it gets the time and a seeded RNG
//! through [`Ctx`], and answers with a [`Decision`]. It never reads a clock,
//! spawns a thread or touches a device, so the same code runs in the
//! simulator and live. Clairvoyant reference policies say so
//! ([`Policy::clairvoyant`]) and are the only ones shown the future.

mod adaptive_preemption_interval;
mod adaptive_size;
mod aggressive;
mod ar_waiting;
mod autoregressive;
mod bursty_cdf_estimates;
mod busy_bee;
mod cdf_based;
mod cdf_estimates;
mod credit_skip;
mod deadline;
mod fixed_rate;
mod fixed_wait;
mod kernel_idle_class;
mod lossless_waiting;
mod mean_based;
mod oracle;
mod preemption_interval;
#[cfg(test)]
mod testing;

pub use adaptive_preemption_interval::{
    AdaptivePreemptionInterval, AdaptivePreemptionIntervalConfig,
};
pub use adaptive_size::{AdaptiveSize, AdaptiveSizeConfig, SizeMode};
pub use aggressive::Aggressive;
pub use ar_waiting::{ArWaiting, ArWaitingConfig};
pub use autoregressive::{Autoregressive, AutoregressiveConfig, IdlePredictor, PredictorConfig};
pub use bursty_cdf_estimates::{BurstyCdfEstimates, BurstyCdfEstimatesConfig};
pub use busy_bee::{BusyBee, BusyBeeConfig, Window as BusyBeeWindow};
pub use cdf_based::{CdfBased, CdfBasedConfig, IdleCdf, IdleEstimate};
pub use cdf_estimates::{CdfEstimates, CdfEstimatesConfig};
pub use credit_skip::{CreditSkip, CreditSkipConfig, CreditUnit};
pub use deadline::{Deadline, DeadlineConfig, Work as DeadlineWork};
pub use fixed_rate::{FixedRate, FixedRateConfig};
pub use fixed_wait::{FixedWait, FixedWaitConfig};
pub use kernel_idle_class::{IoScheduler, KernelIdleClass, KernelIdleClassConfig};
pub use lossless_waiting::{LosslessWaiting, LosslessWaitingConfig};
pub use mean_based::MeanBased;
pub use oracle::{Oracle, OracleChoice, OracleConfig};
pub use preemption_interval::{
    next_state, IntervalCounters, IntervalEvent, IntervalStart, IntervalState, IntervalVariant,
    PreemptionInterval, PreemptionIntervalConfig,
};

use crate::error::{Error, Result};
use crate::period::Periods;
use crate::service::{BgService, BgWork};
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;

/// What a policy is given when it is asked for a decision.
pub struct Ctx<'a> {
    /// Current time on the trace clock, ns.
    pub now_ns: u64,
    /// When the device fell idle (the current idle interval's start), ns.
    pub idle_start_ns: u64,
    /// Arrival of the last FG request before this idle interval, ns (for
    /// intervals measured from FG start rather than FG end).
    pub last_fg_arrival_ns: u64,
    /// The run's seeded random stream.
    pub rng: &'a mut Pcg64Mcg,
    /// BG service model, for policies that size their work by it.
    pub bg_service: &'a BgService,
    /// BG request size when the policy does not choose one, bytes.
    pub bg_size_bytes: u64,
    /// Length of the idle interval that is starting, ns: only for
    /// clairvoyant policies (`None` for all others).
    pub future_idle_ns: Option<u64>,
}

impl Ctx<'_> {
    /// Mean service time of a BG request of the default size, ns.
    pub fn bg_mean_ns(&self) -> f64 {
        self.bg_service.mean_ns(self.bg_size_bytes)
    }
}

/// A policy's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start no BG work until the next idle interval.
    Quiet,
    /// Start BG work `after_ns` from now (if the device is still idle then).
    Start(Start),
}

/// BG work to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    /// Delay from now before the first request, ns.
    pub after_ns: u64,
    /// Size of each request, bytes.
    pub size_bytes: u64,
    /// Most requests to run back to back (`u64::MAX`: until FG arrives).
    pub max_requests: u64,
    /// Idle time left between successive requests, ns.
    pub spacing_ns: u64,
    /// Ask the policy again after every request instead of after the burst.
    pub consult_each: bool,
}

impl Start {
    /// Back-to-back requests of `size_bytes` after `after_ns`, until FG arrives.
    pub fn until_fg(after_ns: u64, size_bytes: u64) -> Self {
        Start {
            after_ns,
            size_bytes,
            max_requests: u64::MAX,
            spacing_ns: 0,
            consult_each: false,
        }
    }
}

/// A background scheduling policy.
pub trait Policy: Send {
    /// Registry name (`fixed-wait`).
    fn name(&self) -> &str;

    /// True for reference policies that see the future (oracle, lossless-waiting).
    fn clairvoyant(&self) -> bool {
        false
    }

    /// The device just fell idle (no FG request outstanding) at `ctx.now_ns`.
    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision;

    /// A burst (or, with `consult_each`, a request) finished at `ctx.now_ns`
    /// and the device is still idle; `done` BG requests completed in this
    /// idle interval so far. Default: nothing more this interval.
    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        let _ = (ctx, done);
        Decision::Quiet
    }

    /// An FG arrival ended an idle interval of `idle_ns` (from the last FG
    /// completion, BG work included); `collided` if it found BG in service.
    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        let _ = (idle_ns, collided);
    }

    /// A busy period of `busy_ns` serving `requests` FG requests ended:
    /// the device's, from its first FG arrival to its last FG completion,
    /// waits behind BG work included. When such a wait carries one busy
    /// period past the next FG arrival the device never falls idle, and
    /// the two come as one (the simulator and the live driver alike).
    fn on_busy_end(&mut self, busy_ns: u64, requests: u32) {
        let _ = (busy_ns, requests);
    }

    /// True for a policy that chooses its own request sizes (adaptive-size):
    /// the simulator then refuses a BG service model that takes as long for
    /// every size ([`crate::sim::check_sizes`]). Default: false (the run's
    /// `--bg-size`, or a size parameter, sets the size).
    fn chooses_size(&self) -> bool {
        false
    }

    /// What the user should know about how the policy ran (a rule that
    /// fell back, a parameter never learned), one sentence each; shown by
    /// `fallow simulate` and in its JSON (`notes`). Default: nothing.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Called once by [`crate::sim::simulate`] before the run with the
    /// trace's baseline busy periods and idle intervals. Only clairvoyant
    /// references may use it (`oracle` learns how long the x % longest
    /// intervals are); the live runtime never calls it. Default: nothing.
    fn prepare(&mut self, periods: &Periods) {
        let _ = periods;
    }

    /// Called once by [`crate::sim::simulate`] before the run with the BG
    /// side of its settings: the run is simulated, so the BG service model is the
    /// truth and the engine computes a burst's requests exactly. A policy
    /// that asks for one request at a time only to hear of each completion
    /// may then ask for whole bursts and work out each request's times
    /// from the model: the same run, with one call per idle interval
    /// instead of one per BG request. The live driver never calls it (a
    /// real device's service times are not the model's). Default: nothing.
    fn simulated(&mut self, bg_service: &BgService, bg_work: &BgWork) {
        let _ = (bg_service, bg_work);
    }
}

/// Parameters as given on the command line (`fixed-wait:t=1s` → `{t: "1s"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    values: BTreeMap<String, String>,
    policy: String,
}

impl Params {
    /// Parse `name[:k=v,k=v]` into the name and its parameters.
    pub fn parse(spec: &str) -> Result<(String, Params)> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let name = name.trim().to_string();
        let mut values = BTreeMap::new();
        for kv in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                Error::invalid("policy", format!("`{spec}`: `{kv}` is not key=value"))
            })?;
            values.insert(k.trim().to_string(), v.trim().to_string());
        }
        Ok((
            name.clone(),
            Params {
                values,
                policy: name,
            },
        ))
    }

    /// True if the parameter was given.
    pub fn contains(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// Take a parameter (removing it, so leftovers can be reported).
    pub fn take(&mut self, key: &str) -> Option<String> {
        self.values.remove(key)
    }

    /// Take a duration parameter, ns.
    pub fn duration_ns(&mut self, key: &str, default: u64) -> Result<u64> {
        match self.take(key) {
            Some(v) => crate::units::parse_duration_ns(&v).map_err(|e| self.wrap(key, e)),
            None => Ok(default),
        }
    }

    /// Take a size parameter, bytes.
    pub fn bytes(&mut self, key: &str, default: Option<u64>) -> Result<Option<u64>> {
        match self.take(key) {
            Some(v) => crate::units::parse_bytes(&v)
                .map(Some)
                .map_err(|e| self.wrap(key, e)),
            None => Ok(default),
        }
    }

    /// Take a number parameter.
    pub fn number(&mut self, key: &str, default: f64) -> Result<f64> {
        match self.take(key) {
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| {
                    Error::invalid(
                        format!("{}:{key}", self.policy),
                        format!("`{v}` is not a number"),
                    )
                }),
            None => Ok(default),
        }
    }

    fn wrap(&self, key: &str, e: Error) -> Error {
        Error::invalid(format!("{}:{key}", self.policy), e.to_string())
    }

    /// Fail on parameters nobody took.
    pub fn finish(self, known: &[&str]) -> Result<()> {
        if let Some(k) = self.values.keys().next() {
            return Err(Error::invalid(
                format!("policy {}", self.policy),
                format!("unknown parameter `{k}` (known: {})", known.join(", ")),
            ));
        }
        Ok(())
    }
}

/// One registry entry.
pub struct Entry {
    /// Name on the command line, in configs and in Python.
    pub name: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// Parameters with units and defaults.
    pub params: &'static str,
    /// True for clairvoyant references.
    pub clairvoyant: bool,
    /// Build from parameters.
    pub build: fn(Params) -> Result<Box<dyn Policy>>,
    /// The parameter `tune` searches to make the policy more or less
    /// aggressive (`None`: the policy has none; only its request size is tuned).
    pub knob: Option<Knob>,
    /// The parameter that sets the policy's request size when it does not
    /// take the run's BG size (`None`: the run's BG size, `--bg-size`).
    pub size_param: Option<&'static str>,
    /// How the policy uses an idle interval, when that depends only on the
    /// interval's length and the knob: then `tune` evaluates settings in
    /// one pass over the idle intervals instead of simulating
    /// (`tune::fast`). `None` for every policy with state or randomness.
    pub interval_rule: Option<IntervalRule>,
}

/// A policy's whole behaviour as a function of an idle interval's length
/// `L` (as the device sees it, after shifts) and its knob: BG requests of
/// the run's size back to back from an offset until the FG arrival.
/// Declared by the policy's registry entry and checked against the
/// simulator by tests, so `tune` never needs to know a policy's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalRule {
    /// Start at `t` if `L > t` (fixed-wait: Practical Scrubbing's Waiting;
    /// preemption-interval at its defaults, with `p` for `t`).
    WaitThenRun,
    /// Start at once if `L > t` (lossless-waiting).
    WholeIfLonger,
    /// Start at once if `L ≥ θ`, θ the `round(x/100 · n)`-th longest of
    /// the trace's `n` idle intervals (oracle's `x`); nothing if that rank is 0.
    WholeIfAmongLongestPercent,
}

/// What a knob's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnobKind {
    /// A duration; the range is in ns and values are written `205ms`.
    Duration,
    /// A plain number (factor, degrees, percent).
    Number,
}

/// Which way a knob makes a policy more aggressive (more BG work, more
/// FG slowdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoreAggressive {
    /// Smaller values are more aggressive (a shorter wait).
    Smaller,
    /// Larger values are more aggressive (a larger factor).
    Larger,
}

/// A policy's aggressiveness parameter, as `tune` searches it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knob {
    /// Parameter name in `NAME:k=v` (`t`, `T`, `idle-wait`).
    pub name: &'static str,
    /// Duration or number.
    pub kind: KnobKind,
    /// Least value searched (ns for durations).
    pub min: f64,
    /// Largest value searched (ns for durations).
    pub max: f64,
    /// Which way is more aggressive.
    pub more_aggressive: MoreAggressive,
    /// The policy's default, as written on the command line.
    pub default: &'static str,
}

impl Knob {
    /// A duration knob searched from 100 µs to 100 s.
    const fn wait(name: &'static str, default: &'static str) -> Knob {
        Knob {
            name,
            kind: KnobKind::Duration,
            min: 1e5,
            max: 1e11,
            more_aggressive: MoreAggressive::Smaller,
            default,
        }
    }

    /// A number knob from `min` to `max`, larger = more aggressive.
    const fn factor(name: &'static str, min: f64, max: f64, default: &'static str) -> Knob {
        Knob {
            name,
            kind: KnobKind::Number,
            min,
            max,
            more_aggressive: MoreAggressive::Larger,
            default,
        }
    }
}

/// Every policy, alphabetically. Adding a policy is its file, its `mod`
/// line above and one entry here.
pub fn registry() -> &'static [Entry] {
    // a static, not a promoted temporary: the knobs come from const fns
    static REGISTRY: &[Entry] = &[
        Entry {
            name: "adaptive-preemption-interval",
            summary: "preemption interval that doubles on a B[f] event (FG found BG in service) and shrinks by 1/32 otherwise (Eggert & Touch §5.2)",
            params: "p=DURATION (start, default 10ms), min=DURATION (1ms), max=DURATION (10s), grow=FACTOR (2), shrink=FRACTION (1/32), variant=, start=, batch=, size= as preemption-interval",
            clairvoyant: false,
            build: AdaptivePreemptionInterval::build,
            knob: Some(Knob::wait("p", "10ms")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "adaptive-size",
            summary: "Waiting with a request size that grows within each idle interval (exponential, linear, swapping)",
            params: "mode=exponential|linear|swapping (default exponential), t=DURATION (wait, default 100ms), s=BYTES (start, 64KiB), a=FACTOR (2), b=BYTES (0), max=BYTES (4MiB), swap-after=DURATION|inf (1s)",
            clairvoyant: false,
            build: AdaptiveSize::build,
            knob: Some(Knob::wait("t", "100ms")),
            size_param: Some("s"),
            interval_rule: None,
        },
        Entry {
            name: "aggressive",
            summary: "start BG work the moment the device is idle; stop when FG arrives",
            params: "size=BYTES (default: the run's BG size)",
            clairvoyant: false,
            build: Aggressive::build,
            knob: None,
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "ar-waiting",
            summary: "wait t, then BG until FG arrives, if the AR(p) prediction of the idle length exceeds c (AR+Waiting)",
            params: "t=DURATION (default 100ms), c=DURATION (default 100ms), history=N (2000 intervals), max-order=N (8), refit=N (100 intervals), size=BYTES",
            clairvoyant: false,
            build: ArWaiting::build,
            knob: Some(Knob::wait("t", "100ms")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "autoregressive",
            summary: "BG from the start of an idle interval until FG arrives if its AR(p) predicted length exceeds c (AR)",
            params: "c=DURATION (default 100ms), history=N (2000 intervals), max-order=N (8), refit=N (100 intervals), size=BYTES",
            clairvoyant: false,
            build: Autoregressive::build,
            knob: Some(Knob::wait("c", "100ms")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "bursty-cdf-estimates",
            summary: "cdf-estimates, but after a large idle interval, when P(large→large) ≥ rho, run Eq. 2's T·((CV+1)·mean − wait)/mean BG (Bursty+CDF/w-estimates)",
            params: "T=FACTOR (default 1), rho=PROBABILITY (default 0.5), angle=DEGREES (30), warmup=N (32 intervals), size=BYTES",
            clairvoyant: false,
            build: BurstyCdfEstimates::build,
            knob: Some(Knob::factor("T", 0.01, 100.0, "1")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "busy-bee",
            summary: "conservative (idle wait) for CWS idle intervals after a long busy period, aggressive otherwise; Threshold and CWS relearned every window",
            params: "idle-wait=DURATION (default 100ms), window=DURATION|Nbp (default 5h), max-lag=N (20), rule=p90|top-decile (Threshold: 90th percentile, Fig. 4, the default; top decile where that makes every period long), threshold=N and cws=N (fix instead of learning), size=BYTES",
            clairvoyant: false,
            build: BusyBee::build,
            knob: Some(Knob::wait("idle-wait", "100ms")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "cdf-based",
            summary: "no wait when idle CV < 1, else wait until the idle CDF's slope falls to tan(angle); then BG until FG arrives",
            params: "angle=DEGREES (default 30), warmup=N (32 intervals: no wait before), size=BYTES",
            clairvoyant: false,
            build: CdfBased::build,
            knob: Some(Knob::factor("angle", 1.0, 89.0, "30")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "cdf-estimates",
            summary: "wait as cdf-based, then at most Eq. 1's T·(p90(idle) − wait)/mean BG requests (CDF/w-estimates)",
            params: "T=FACTOR (default 1), angle=DEGREES (30), warmup=N (32 intervals: quiet before), size=BYTES",
            clairvoyant: false,
            build: CdfEstimates::build,
            knob: Some(Knob::factor("T", 0.01, 100.0, "1")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "credit-skip",
            summary: "preemption interval skipped when n credits (undisturbed FG requests) are saved; a collision costs n; leaky bucket capped (Eggert & Touch §5.1)",
            params: "n=N (credits per skip and per collision, default 10), cap=N (bucket size, 100), unit=request|interval (what earns a credit, request), p=, variant=, start=, batch=, size= as preemption-interval",
            clairvoyant: false,
            build: CreditSkip::build,
            knob: Some(Knob::wait("p", "100ms")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "deadline",
            summary: "finite BG work by a deadline: Waiting whose wait shrinks as remaining work nears the idle time left",
            params: "work=N|BYTES (requests or bytes, default 1GiB), by=DURATION (default 1h, from the first decision), t=DURATION (wait without urgency, 100ms), size=BYTES",
            clairvoyant: false,
            build: Deadline::build,
            knob: Some(Knob::wait("t", "100ms")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "fixed-rate",
            summary: "a BG request due every r whatever FG does; due requests wait for idle time (FG first) and run back to back when backlogged (commercial scrubbers)",
            params: "r=DURATION (default 100ms), size=BYTES",
            clairvoyant: false,
            build: FixedRate::build,
            knob: Some(Knob::wait("r", "100ms")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "fixed-wait",
            summary: "wait t after the last FG completion, then BG back to back until FG arrives (Waiting, conservative)",
            params: "t=DURATION (default 100ms), size=BYTES",
            clairvoyant: false,
            build: FixedWait::build,
            knob: Some(Knob::wait("t", "100ms")),
            size_param: None,
            interval_rule: Some(IntervalRule::WaitThenRun),
        },
        Entry {
            name: "kernel-idle-class",
            summary: "Linux idle I/O class: CFQ (100 ms grace after the last FG completion, 8 ms slice idle between requests) or BFQ (one request after 200 ms idle)",
            params: "scheduler=cfq|bfq (default cfq); cfq: grace=DURATION (100ms), slice-idle=DURATION (8ms); bfq: timeout=DURATION (200ms); size=BYTES",
            clairvoyant: false,
            build: KernelIdleClass::build,
            knob: Some(Knob::wait("grace", "100ms")),
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "lossless-waiting",
            summary: "CLAIRVOYANT upper bound: the intervals fixed-wait(t) uses, used from their start until FG arrives",
            params: "t=DURATION (default 100ms), size=BYTES",
            clairvoyant: true,
            build: LosslessWaiting::build,
            knob: Some(Knob::wait("t", "100ms")),
            size_param: None,
            interval_rule: Some(IntervalRule::WholeIfLonger),
        },
        Entry {
            name: "mean-based",
            summary: "wait the mean BG service time, then BG until FG arrives (Mi et al. baseline)",
            params: "size=BYTES (default: the run's BG size)",
            clairvoyant: false,
            build: MeanBased::build,
            knob: None,
            size_param: None,
            interval_rule: None,
        },
        Entry {
            name: "oracle",
            summary: "CLAIRVOYANT upper bound: only the x % longest idle intervals, each used whole (one collision each)",
            params: "x=PERCENT (default 10) or min=DURATION, size=BYTES",
            clairvoyant: true,
            build: Oracle::build,
            knob: Some(Knob::factor("x", 0.01, 100.0, "10")),
            size_param: None,
            interval_rule: Some(IntervalRule::WholeIfAmongLongestPercent),
        },
        Entry {
            name: "preemption-interval",
            summary: "Eggert & Touch's I/F/B/P machine: no BG request starts within p of FG work; four Appendix-A variants; per state×event counters",
            params: "p=DURATION (default 100ms), variant=burst-idle|burst-preempt|request-idle|request-preempt (or tl|tr|bl|br; default burst-idle), start=fg-end|fg-start (default fg-end), batch=N (BG requests queued at a time, default unbounded), size=BYTES",
            clairvoyant: false,
            build: PreemptionInterval::build,
            knob: Some(Knob::wait("p", "100ms")),
            size_param: None,
            // at its defaults (burst-idle, fg-end, no batch) the machine
            // waits p after FG work and then runs BG until FG arrives
            interval_rule: Some(IntervalRule::WaitThenRun),
        },
    ];
    REGISTRY
}

/// The policy the OS offers out of the box (Linux's idle I/O class), the
/// baseline `tune` reports beside its results, as Practical Scrubbing
/// Table III reports CFQ, at 64 KiB and its default parameters.
pub const BASELINE: &str = "kernel-idle-class";

/// Build a policy from `name[:k=v,…]`.
pub fn build(spec: &str) -> Result<Box<dyn Policy>> {
    let (name, params) = Params::parse(spec)?;
    (entry(&name)?.build)(params)
}

/// The registry entry of `name`, or of an alias (`waiting` and
/// `conservative` are `fixed-wait`).
pub fn entry(name: &str) -> Result<&'static Entry> {
    let name = match name.trim() {
        "waiting" | "conservative" => "fixed-wait",
        n => n,
    };
    registry().iter().find(|e| e.name == name).ok_or_else(|| {
        Error::invalid(
            "policy",
            format!(
                "unknown policy `{name}` (known: {})",
                registry()
                    .iter()
                    .map(|e| e.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })
}
