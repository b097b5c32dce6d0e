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

/// The policies, alphabetically: each line declares a policy's module and
/// puts its `ENTRY` in the [`registry`]. Adding a policy is its file and
/// one line here.
macro_rules! policies {
    ($($module:ident,)*) => {
        $(mod $module;)*
        static REGISTRY: &[Entry] = &[$($module::ENTRY,)*];
    };
}
policies! {
    adaptive_preemption_interval,
    adaptive_size,
    aggressive,
    ar_waiting,
    autoregressive,
    bursty_cdf_estimates,
    busy_bee,
    cdf_based,
    cdf_estimates,
    credit_skip,
    deadline,
    fixed_rate,
    fixed_wait,
    kernel_idle_class,
    lossless_waiting,
    mean_based,
    oracle,
    preemption_interval,
}
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
use crate::registry::Registry;
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
    /// In simulation only, a schedule of due times for the rest of the
    /// interval (fixed-rate's), which the engine draws in closed form where
    /// the BG service model allows it ([`BgService::scheduled_burst`]) and
    /// then reports its completed count through [`Policy::on_burst_cut`].
    /// Where it does not (and in the live driver, which ignores it) the
    /// rest of the `Start` applies: a policy that sets it asks for one
    /// request with `consult_each`, the same run one request at a time.
    pub schedule: Option<crate::service::Schedule>,
    /// In simulation only, BG requests in batches: the idle time left after
    /// a batch's last request is the batch's own, `spacing_ns` applies
    /// inside a batch ([`crate::service::BatchGaps`]; preemption-interval's
    /// `batch=N`). The engine draws such a burst in closed form
    /// ([`BgService::batched_burst`]); the live driver never sees one (a
    /// policy asks for it only when told it runs simulated).
    pub batch: Option<crate::service::BatchGaps>,
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
            schedule: None,
            batch: None,
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

    /// The burst last asked (a `Start` without `consult_each`, which the
    /// engine computed in closed form) was under way when an FG arrival
    /// ended the idle interval: `completed` of its requests completed
    /// strictly before the arrival (the one after them was in service, or
    /// completed at the arrival's very ns). Called just before
    /// [`Policy::on_idle_end`]; a policy that asks for whole bursts and
    /// cannot work out the count itself (random service) learns it here.
    /// Default: nothing.
    fn on_burst_cut(&mut self, completed: u64) {
        let _ = completed;
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

/// Parameters as given on the command line (`fixed-wait:t=1s` → `{t: "1s"}`),
/// with the key table of the entry they are built through: a key not given
/// takes its default from there ([`Entry::build_with`]), so a default is
/// written once, in its key's row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    values: BTreeMap<String, String>,
    policy: String,
    keys: &'static [Param],
}

impl Params {
    /// Parse `name[:k=v,k=v]` into the name and its parameters (no key
    /// table yet: the entry the name selects brings it).
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
                keys: &[],
            },
        ))
    }

    /// The same parameters with `keys` as their key table, where a key not
    /// given takes its default.
    pub(crate) fn with_keys(self, keys: &'static [Param]) -> Params {
        Params { keys, ..self }
    }

    /// No parameters given, with the same key table: every read gives the
    /// table's default.
    pub fn defaults(&self) -> Params {
        Params {
            values: BTreeMap::new(),
            policy: self.policy.clone(),
            keys: self.keys,
        }
    }

    /// True if the parameter was given.
    pub fn contains(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// Take a parameter (removing it, so leftovers can be reported).
    pub fn take(&mut self, key: &str) -> Option<String> {
        self.values.remove(key)
    }

    /// The default of `key` in the key table (`None`: no row, or a row
    /// without a default, like `size=`'s "the run's size").
    fn table_default(&self, key: &str) -> Option<&'static str> {
        self.keys
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.default)
            .filter(|d| !d.is_empty())
    }

    /// Take a parameter, or its key's default from the key table when it
    /// was not given; an error when the table has none to give.
    pub fn value(&mut self, key: &str) -> Result<String> {
        match self.take(key) {
            Some(v) => Ok(v),
            None => self.table_default(key).map(String::from).ok_or_else(|| {
                Error::invalid(
                    format!("{}:{key}", self.policy),
                    "needs a value (its key table gives no default)",
                )
            }),
        }
    }

    /// Take a duration parameter, ns (default: the key table's).
    pub fn duration_ns(&mut self, key: &str) -> Result<u64> {
        let v = self.value(key)?;
        crate::units::parse_duration_ns(&v).map_err(|e| self.wrap(key, e))
    }

    /// Take a duration parameter, ns, with `default_ns` when not given: for
    /// specs that have no registry entry (the peer's disk spec). A policy's
    /// defaults come from its key table ([`Params::duration_ns`]).
    pub fn duration_ns_or(&mut self, key: &str, default_ns: u64) -> Result<u64> {
        match self.take(key) {
            Some(v) => crate::units::parse_duration_ns(&v).map_err(|e| self.wrap(key, e)),
            None => Ok(default_ns),
        }
    }

    /// Take a size parameter, bytes (default: the key table's; `None` where
    /// it has none, such as `size=`, whose default is the run's size).
    pub fn bytes(&mut self, key: &str) -> Result<Option<u64>> {
        match self
            .take(key)
            .or_else(|| self.table_default(key).map(String::from))
        {
            Some(v) => crate::units::parse_bytes(&v)
                .map(Some)
                .map_err(|e| self.wrap(key, e)),
            None => Ok(None),
        }
    }

    /// Take a size parameter that always has a value, bytes (default: the
    /// key table's; an error where it has none).
    pub fn bytes_value(&mut self, key: &str) -> Result<u64> {
        let v = self.value(key)?;
        crate::units::parse_bytes(&v).map_err(|e| self.wrap(key, e))
    }

    /// Take a number parameter (default: the key table's).
    pub fn number(&mut self, key: &str) -> Result<f64> {
        let v = self.value(key)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| {
                Error::invalid(
                    format!("{}:{key}", self.policy),
                    format!("`{v}` is not a number"),
                )
            })
    }

    fn wrap(&self, key: &str, e: Error) -> Error {
        Error::invalid(format!("{}:{key}", self.policy), e.to_string())
    }

    /// Fail on parameters nobody took, listing the keys of the key table
    /// as the known ones.
    pub fn finish_keys(self) -> Result<()> {
        let known: Vec<&str> = self.keys.iter().map(|p| p.key).collect();
        self.finish(&known)
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

/// What `read` makes of no parameters with `keys` as their key table: the
/// table's defaults, as a config's `Default` takes them (through the same
/// code as `build`, so the two cannot differ). A default that does not
/// parse is a bug in the table, which the registry tests build and catch.
pub(crate) fn read_defaults<T>(
    name: &'static str,
    keys: &'static [Param],
    read: impl FnOnce(&mut Params) -> Result<T>,
) -> T {
    let mut p = Params {
        policy: name.to_string(),
        keys,
        ..Params::default()
    };
    read(&mut p).unwrap_or_else(|e| panic!("{name}'s key table: {e}"))
}

/// The parameters as `fallow policies` shows them, one `key=TYPE (note,
/// default VALUE)` per row of `keys`, in the table's order.
pub(crate) fn params_help(keys: &[Param]) -> String {
    if keys.is_empty() {
        return "(none)".to_string();
    }
    keys.iter().map(Param::help).collect::<Vec<_>>().join(", ")
}

/// One registry entry.
pub struct Entry {
    /// Name on the command line, in configs and in Python.
    pub name: &'static str,
    /// Other names that select the policy (`waiting` for `fixed-wait`).
    pub aliases: &'static [&'static str],
    /// One-line summary.
    pub summary: &'static str,
    /// The key table: every key `build` accepts, with its kind and its
    /// default (the one place a default is written; the help text, the
    /// knob's default and the config's `Default` read it).
    pub keys: &'static [Param],
    /// True for clairvoyant references.
    pub clairvoyant: bool,
    /// Build from parameters that carry this entry's key table: call
    /// [`Entry::build_with`], which attaches it.
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

crate::registry::describe_by_fields!(Entry);

impl Entry {
    /// Build from `params`, a key not given taking its default from this
    /// entry's key table (so a copy of an entry with a changed default
    /// builds with that default).
    pub fn build_with(&self, params: Params) -> Result<Box<dyn Policy>> {
        (self.build)(params.with_keys(self.keys))
    }

    /// The parameters with units and defaults, as `fallow policies` shows
    /// them: generated from the key table.
    pub fn params_help(&self) -> String {
        params_help(self.keys)
    }

    /// The knob's default as written on the command line: its key's
    /// default in the key table (where `tune` starts).
    pub fn knob_default(&self) -> Option<&'static str> {
        let knob = self.knob?;
        let row = self.keys.iter().find(|p| p.key == knob.name)?;
        Some(row.default).filter(|d| !d.is_empty())
    }

    /// What `read` (a config's reader, the one `build` uses) makes of no
    /// parameters: the key table's defaults, for the config's `Default`.
    /// Panics if a default does not parse, a bug the registry tests catch.
    pub fn read_defaults<T>(&self, read: impl FnOnce(&mut Params) -> Result<T>) -> T {
        read_defaults(self.name, self.keys, read)
    }
}

/// One parameter of a policy (`t` of `fixed-wait:t=1s`): a row of its
/// entry's key table. Written with [`Param::new`] and, where needed,
/// [`Param::note`], [`Param::example`] and [`Param::requires`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// The key.
    pub key: &'static str,
    /// What its values are.
    pub kind: ParamKind,
    /// The value the key takes when not given, as written on the command
    /// line (`100ms`); empty where there is none to write (`size=`: the
    /// run's size; busy-bee's `threshold=`: learned). The only place the
    /// default is written: `build`, the config's `Default`, the help text
    /// and the knob's default all read it here.
    pub default: &'static str,
    /// What the help says of the key beside its default (`start`,
    /// `intervals`, `bucket size`), empty for nothing.
    pub note: &'static str,
    /// A value the policy accepts (its default unless written apart): the
    /// registry test builds `name:key=example` for every key.
    pub example: &'static str,
    /// Other parameters this one needs beside it (`k=v[,k=v]`, empty for
    /// none): BFQ's `timeout` needs `scheduler=bfq`.
    pub requires: &'static str,
}

impl Param {
    /// A key of `kind` with `default` (empty: none), its default as its
    /// example, no note and no prerequisite.
    pub const fn new(key: &'static str, kind: ParamKind, default: &'static str) -> Param {
        Param {
            key,
            kind,
            default,
            note: "",
            example: default,
            requires: "",
        }
    }

    /// The same row with `note` in the help (`start`, `intervals`).
    pub const fn note(self, note: &'static str) -> Param {
        Param { note, ..self }
    }

    /// The same row with `example` as the value the registry test tries
    /// (for a key without a default, or to try a value other than it).
    pub const fn example(self, example: &'static str) -> Param {
        Param { example, ..self }
    }

    /// The same row needing `requires` (`k=v[,k=v]`) beside it.
    pub const fn requires(self, requires: &'static str) -> Param {
        Param { requires, ..self }
    }

    /// The row as the help shows it: `key=TYPE (note, default VALUE)`,
    /// the parenthesis holding what the row has of the two.
    pub fn help(&self) -> String {
        let said = match (self.note, self.default) {
            ("", "") => String::new(),
            (note, "") => format!(" ({note})"),
            ("", default) => format!(" (default {default})"),
            (note, default) => format!(" ({note}, default {default})"),
        };
        format!("{}={}{said}", self.key, self.kind.shown())
    }
}

/// What a parameter's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A duration (`100ms`, `5s`).
    Duration,
    /// A size (`64KiB`, `4MiB`).
    Bytes,
    /// A real number, named in the help by what it is (`FACTOR`,
    /// `PROBABILITY`, `DEGREES`, `PERCENT`, `FRACTION`).
    Number(&'static str),
    /// A whole number (requests, intervals, lags).
    Count,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// Another form, as written in the help (`DURATION|inf`).
    Other(&'static str),
}

impl ParamKind {
    /// The values as the help names them (`DURATION`, `N`, `cfq|bfq`).
    pub fn shown(&self) -> String {
        match self {
            ParamKind::Duration => "DURATION".to_string(),
            ParamKind::Bytes => "BYTES".to_string(),
            ParamKind::Number(what) | ParamKind::Other(what) => what.to_string(),
            ParamKind::Count => "N".to_string(),
            ParamKind::Choice(words) => words.join("|"),
        }
    }
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

/// A policy's aggressiveness parameter, as `tune` searches it. Its default
/// is its key's in the entry's key table ([`Entry::knob_default`]).
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
}

impl Knob {
    /// A duration knob searched from 100 µs to 100 s.
    pub const fn wait(name: &'static str) -> Knob {
        Knob {
            name,
            kind: KnobKind::Duration,
            min: 1e5,
            max: 1e11,
            more_aggressive: MoreAggressive::Smaller,
        }
    }

    /// A number knob from `min` to `max`, larger = more aggressive.
    pub const fn factor(name: &'static str, min: f64, max: f64) -> Knob {
        Knob {
            name,
            kind: KnobKind::Number,
            min,
            max,
            more_aggressive: MoreAggressive::Larger,
        }
    }
}

/// Every policy, alphabetically (the `policies!` list above).
pub fn registry() -> &'static [Entry] {
    REGISTRY
}

/// The policy registry: lookup by name or alias, and its consistency check.
pub fn policies() -> Registry<Entry> {
    Registry::new("policy", REGISTRY)
}

/// The policy the OS offers out of the box (Linux's idle I/O class), the
/// baseline `tune` reports beside its results, as Practical Scrubbing
/// Table III reports CFQ, at 64 KiB and its default parameters.
pub const BASELINE: &str = "kernel-idle-class";

/// Build a policy from `name[:k=v,…]`, its defaults from its entry's key table.
pub fn build(spec: &str) -> Result<Box<dyn Policy>> {
    let (name, params) = Params::parse(spec)?;
    entry(&name)?.build_with(params)
}

/// The registry entry of `name`, or of an alias (`waiting` and
/// `conservative` are `fixed-wait`, as its entry says).
pub fn entry(name: &str) -> Result<&'static Entry> {
    policies().find(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys an "unknown parameter" error lists as known.
    fn known_keys(spec: &str) -> Vec<String> {
        let err = build(spec).err().expect(spec).to_string();
        assert!(err.contains("unknown parameter `no-such-key`"), "{err}");
        let list = err.split("(known: ").nth(1).expect(&err);
        let list = &list[..list.find(')').expect(&err)];
        list.split(", ")
            .filter(|k| !k.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn registry_is_sorted_and_unique_and_every_default_builds() {
        assert_eq!(policies().check(), Ok(()));
        for e in registry() {
            let p = build(e.name).unwrap_or_else(|err| panic!("{}: {err}", e.name));
            assert_eq!(p.name(), e.name);
            assert_eq!(p.clairvoyant(), e.clairvoyant, "{}", e.name);
            for a in e.aliases {
                assert_eq!(build(a).unwrap().name(), e.name, "alias {a}");
            }
        }
        assert_eq!(entry("waiting").unwrap().name, "fixed-wait");
        assert_eq!(entry("conservative").unwrap().name, "fixed-wait");
    }

    /// True if `v` is a value of `kind` as written on the command line.
    fn is_of_kind(kind: ParamKind, v: &str) -> bool {
        match kind {
            ParamKind::Duration => crate::units::parse_duration_ns(v).is_ok(),
            ParamKind::Bytes => crate::units::parse_bytes(v).is_ok(),
            ParamKind::Number(_) => v.parse::<f64>().is_ok(),
            ParamKind::Count => v.parse::<u64>().is_ok(),
            ParamKind::Choice(words) => words.contains(&v),
            ParamKind::Other(form) => !form.is_empty() && !v.is_empty(),
        }
    }

    #[test]
    fn every_documented_key_is_accepted_with_its_example() {
        for e in registry() {
            for k in e.keys {
                // the example, and the default where there is one, are values of its kind
                assert!(
                    is_of_kind(k.kind, k.example),
                    "{}:{} example `{}` is no {:?}",
                    e.name,
                    k.key,
                    k.example,
                    k.kind
                );
                assert!(
                    k.default.is_empty() || is_of_kind(k.kind, k.default),
                    "{}:{} default `{}` is no {:?}",
                    e.name,
                    k.key,
                    k.default,
                    k.kind
                );
                let spec = match k.requires {
                    "" => format!("{}:{}={}", e.name, k.key, k.example),
                    r => format!("{}:{r},{}={}", e.name, k.key, k.example),
                };
                build(&spec).unwrap_or_else(|err| panic!("{spec}: {err}"));
            }
        }
    }

    #[test]
    fn the_help_is_the_key_table() {
        const KEYS: &[Param] = &[
            Param::new("t", ParamKind::Duration, "100ms"),
            Param::new("p", ParamKind::Duration, "10ms").note("start"),
            Param::new("cap", ParamKind::Count, "100").note("bucket size"),
            Param::new("rule", ParamKind::Choice(&["p90", "top-decile"]), "p90"),
            Param::new("T", ParamKind::Number("FACTOR"), "1"),
            Param::new("threshold", ParamKind::Count, "").note("learned"),
            Param::new("size", ParamKind::Bytes, "").example("64KiB"),
        ];
        assert_eq!(
            params_help(KEYS),
            "t=DURATION (default 100ms), p=DURATION (start, default 10ms), \
             cap=N (bucket size, default 100), rule=p90|top-decile (default p90), \
             T=FACTOR (default 1), threshold=N (learned), size=BYTES"
        );
        assert_eq!(params_help(&[]), "(none)");
        // the example is the default unless written apart
        assert_eq!(KEYS[0].example, "100ms");
        assert_eq!(KEYS[6].example, "64KiB");
    }

    #[test]
    fn the_knobs_default_is_its_keys() {
        let e = entry("fixed-wait").unwrap();
        assert_eq!(e.knob_default(), Some("100ms"));
        assert_eq!(entry("aggressive").unwrap().knob_default(), None);
        for e in registry().iter().filter(|e| e.knob.is_some()) {
            let d = e.knob_default();
            assert!(d.is_some(), "{}: its knob's key has no default", e.name);
        }
    }

    #[test]
    fn a_key_given_nowhere_with_no_default_is_an_error() {
        const KEYS: &[Param] = &[Param::new("t", ParamKind::Duration, "")];
        let (_, p) = Params::parse("x:").unwrap();
        let mut p = p.with_keys(KEYS);
        let err = p.duration_ns("t").unwrap_err().to_string();
        assert!(err.contains("x:t") && err.contains("no default"), "{err}");
        assert_eq!(p.bytes("size").unwrap(), None);
    }

    #[test]
    fn unknown_keys_are_refused_and_every_accepted_key_is_in_the_table() {
        for e in registry() {
            let table: Vec<&str> = e.keys.iter().map(|k| k.key).collect();
            // with the defaults, and with each key's prerequisites (BFQ's keys)
            let mut specs = vec![format!("{}:no-such-key=1", e.name)];
            specs.extend(e.keys.iter().filter(|k| !k.requires.is_empty()).map(|k| {
                format!(
                    "{}:{},{}={},no-such-key=1",
                    e.name, k.requires, k.key, k.example
                )
            }));
            for spec in specs {
                for key in known_keys(&spec) {
                    assert!(
                        table.contains(&key.as_str()),
                        "{spec}: `{key}` is accepted but not in the entry's keys"
                    );
                }
            }
        }
    }

    #[test]
    fn a_misnamed_policy_lists_the_known_ones() {
        let err = build("fixed_wait").err().unwrap().to_string();
        assert!(
            err.contains("unknown policy `fixed_wait` (known: adaptive-preemption-interval,"),
            "{err}"
        );
    }
}
