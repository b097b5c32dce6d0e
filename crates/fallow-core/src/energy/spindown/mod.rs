//! Spin-down policies: one [`SpinDown`] trait, one file per policy, and a
//! [`registry`] that the simulation, the CLI's `--policy NAME:k=v` and the
//! tests read. The same shape as [`crate::policy`], whose [`Params`] parser
//! they share.
//!
//! A policy is asked once per disk idle interval, when the disk falls idle
//! (the last local request completed), how long to wait before spinning
//! down (SARD seed, Figure 1: the idle timeout); it is told how the interval
//! ended. It sees only the past, like a real power manager.

mod adaptive;
mod always_on;
mod predictive;
mod timeout;

pub use adaptive::{Adaptive, AdaptiveConfig};
pub use always_on::AlwaysOn;
pub use predictive::{Predictive, PredictiveConfig};
pub use timeout::{Timeout, TimeoutConfig};

use super::power::PowerModel;
use crate::error::{Error, Result};
pub use crate::policy::Params;

/// What a policy is given when the disk falls idle.
#[derive(Debug, Clone, Copy)]
pub struct IdleCtx<'a> {
    /// When the disk fell idle, ns on the trace clock.
    pub now_ns: u64,
    /// The disk's power model (for the break-even time).
    pub power: &'a PowerModel,
}

/// A disk spin-down policy.
pub trait SpinDown: Send {
    /// Registry name (`timeout`).
    fn name(&self) -> &str;

    /// The disk fell idle at `ctx.now_ns`: spin down after this long
    /// without a local request (`None`: stay spinning until the next one).
    fn on_idle(&mut self, ctx: &IdleCtx<'_>) -> Option<u64>;

    /// The idle interval ended with a local request after `idle_ns`;
    /// `spun_down` if the disk was spun down in it. Default: nothing.
    fn on_idle_end(&mut self, idle_ns: u64, spun_down: bool) {
        let _ = (idle_ns, spun_down);
    }
}

/// A duration parameter that may be `never` (`None`).
pub(crate) fn duration_or_never(
    p: &mut Params,
    key: &str,
    default: Option<u64>,
) -> Result<Option<u64>> {
    match p.take(key) {
        None => Ok(default),
        Some(v) if matches!(v.trim(), "never" | "inf" | "off") => Ok(None),
        Some(v) => crate::units::parse_duration_ns(&v)
            .map(Some)
            .map_err(|e| Error::invalid(format!("spin-down policy {key}"), e.to_string())),
    }
}

/// One registry entry.
pub struct Entry {
    /// Name on the command line.
    pub name: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// Parameters with units and defaults.
    pub params: &'static str,
    /// True for the reference that never spins down.
    pub reference: bool,
    /// Build from parameters.
    pub build: fn(Params) -> Result<Box<dyn SpinDown>>,
}

/// Every spin-down policy, alphabetically. Adding one is its file, its
/// `mod` line and one entry here.
pub fn registry() -> &'static [Entry] {
    static REGISTRY: &[Entry] = &[
        Entry {
            name: "adaptive",
            summary: "timeout that doubles after a spin-down that did not pay off (next request within the break-even time) and shrinks after one that did (Douglis et al. 1995)",
            params: "t=DURATION (start, default 10s), min=DURATION (1s), max=DURATION (5min), grow=FACTOR (2), shrink=FACTOR (0.75)",
            reference: false,
            build: Adaptive::build,
        },
        Entry {
            name: "always-on",
            summary: "never spin down: the reference without power management",
            params: "(none)",
            reference: true,
            build: AlwaysOn::build,
        },
        Entry {
            name: "predictive",
            summary: "spin down early when an idle interval k ≤ 9 places back was large ((CV+1)·mean) and P_k(large→large) ≥ rho, else fall back to a timeout (Mi et al. §5)",
            params: "rho=PROBABILITY (default 0.5), wait=DURATION (timeout when large is predicted, 1s), else=DURATION|never (timeout otherwise, 10s), warmup=N (32 intervals), lags=N (1..9, default 9)",
            reference: false,
            build: Predictive::build,
        },
        Entry {
            name: "timeout",
            summary: "spin down after t without a local request (the fixed timeout of the SARD seed, Figure 1)",
            params: "t=DURATION (default 10s)",
            reference: false,
            build: Timeout::build,
        },
    ];
    REGISTRY
}

/// Build a policy from `name[:k=v,…]`.
pub fn build(spec: &str) -> Result<Box<dyn SpinDown>> {
    let (name, params) = Params::parse(spec)?;
    (entry(&name)?.build)(params)
}

/// The registry entry of `name` (`fixed` and `timeout` are the same).
pub fn entry(name: &str) -> Result<&'static Entry> {
    let name = match name.trim() {
        "fixed" | "fixed-timeout" => "timeout",
        "on" | "none" => "always-on",
        n => n,
    };
    registry().iter().find(|e| e.name == name).ok_or_else(|| {
        Error::invalid(
            "spin-down policy",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_alphabetical_and_builds_defaults() {
        let names: Vec<&str> = registry().iter().map(|e| e.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        for e in registry() {
            let p = build(e.name).unwrap();
            assert_eq!(p.name(), e.name);
        }
    }

    #[test]
    fn unknown_names_and_parameters_are_errors() {
        let e = build("sleepy").err().unwrap().to_string();
        assert!(
            e.contains("unknown policy `sleepy`") && e.contains("timeout"),
            "{e}"
        );
        let e = build("timeout:x=3").err().unwrap().to_string();
        assert!(e.contains("unknown parameter `x`"), "{e}");
        let e = build("timeout:t=soon").err().unwrap().to_string();
        assert!(e.contains("soon"), "{e}");
    }
}
