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

mod aggressive;
mod fixed_wait;

pub use aggressive::Aggressive;
pub use fixed_wait::{FixedWait, FixedWaitConfig};

use crate::error::{Error, Result};
use crate::sim::BgService;
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

    /// A busy period of `busy_ns` serving `requests` FG requests ended.
    fn on_busy_end(&mut self, busy_ns: u64, requests: u32) {
        let _ = (busy_ns, requests);
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
}

/// Every policy, alphabetically. Adding a policy is its file, its `mod`
/// line above and one entry here.
pub fn registry() -> &'static [Entry] {
    &[
        Entry {
            name: "aggressive",
            summary: "start BG work the moment the device is idle; stop when FG arrives",
            params: "size=BYTES (default: the run's BG size)",
            clairvoyant: false,
            build: Aggressive::build,
        },
        Entry {
            name: "fixed-wait",
            summary: "wait t after the last FG completion, then BG back to back until FG arrives (Waiting, conservative)",
            params: "t=DURATION (default 100ms), size=BYTES",
            clairvoyant: false,
            build: FixedWait::build,
        },
    ]
}

/// Build a policy from `name[:k=v,…]`.
pub fn build(spec: &str) -> Result<Box<dyn Policy>> {
    let (name, params) = Params::parse(spec)?;
    let name = match name.as_str() {
        "waiting" | "conservative" => "fixed-wait".to_string(),
        _ => name,
    };
    let entry = registry().iter().find(|e| e.name == name).ok_or_else(|| {
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
    })?;
    (entry.build)(params)
}
