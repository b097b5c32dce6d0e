//! Spin-down policies: one [`SpinDown`] trait, one file per policy, and a
//! [`registry`] that the simulation, the CLI's `--policy NAME:k=v` and the
//! tests read. The same shape as [`crate::policy`], whose [`Params`] parser
//! they share.
//!
//! A policy is asked once per disk idle interval, when the disk falls idle
//! (the last local request completed), how long to wait before spinning
//! down (SARD, Figure 1: the idle timeout); it is told how the interval
//! ended. It sees only the past, like a real power manager.

/// The spin-down policies, alphabetically: each line declares a policy's
/// module and puts its `ENTRY` in the [`registry`]. Adding one is its file
/// and one line here.
macro_rules! spindowns {
    ($($module:ident,)*) => {
        $(mod $module;)*
        static REGISTRY: &[Entry] = &[$($module::ENTRY,)*];
    };
}
spindowns! {
    adaptive,
    always_on,
    predictive,
    timeout,
}

pub use adaptive::{Adaptive, AdaptiveConfig};
pub use always_on::AlwaysOn;
pub use predictive::{Predictive, PredictiveConfig};
pub use timeout::{Timeout, TimeoutConfig};

use super::power::PowerModel;
use crate::error::{Error, Result};
pub use crate::policy::{Param, ParamKind, Params};
use crate::registry::Registry;

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

/// A duration parameter that may be `never` (`None`); not given, the key
/// table's default.
pub(crate) fn duration_or_never(p: &mut Params, key: &str) -> Result<Option<u64>> {
    match p.value(key)? {
        v if matches!(v.trim(), "never" | "inf" | "off") => Ok(None),
        v => crate::units::parse_duration_ns(&v)
            .map(Some)
            .map_err(|e| Error::invalid(format!("spin-down policy {key}"), e.to_string())),
    }
}

/// One registry entry.
pub struct Entry {
    /// Name on the command line.
    pub name: &'static str,
    /// Other names that select the policy (`fixed` for `timeout`).
    pub aliases: &'static [&'static str],
    /// One-line summary.
    pub summary: &'static str,
    /// The key table: every key `build` accepts, with its default (the one
    /// place it is written).
    pub keys: &'static [Param],
    /// True for the reference that never spins down.
    pub reference: bool,
    /// Build from parameters that carry this entry's key table: call
    /// [`Entry::build_with`], which attaches it.
    pub build: fn(Params) -> Result<Box<dyn SpinDown>>,
}

impl Entry {
    /// Build from `params`, a key not given taking its default from this
    /// entry's key table.
    pub fn build_with(&self, params: Params) -> Result<Box<dyn SpinDown>> {
        (self.build)(params.with_keys(self.keys))
    }

    /// The parameters with units and defaults, generated from the key table.
    pub fn params_help(&self) -> String {
        crate::policy::params_help(self.keys)
    }

    /// What `read` (a config's reader, the one `build` uses) makes of no
    /// parameters: the key table's defaults, for the config's `Default`.
    pub fn read_defaults<T>(&self, read: impl FnOnce(&mut Params) -> Result<T>) -> T {
        crate::policy::read_defaults(self.name, self.keys, read)
    }
}

crate::registry::describe_by_fields!(Entry);

/// Every spin-down policy, alphabetically (the `spindowns!` list above).
pub fn registry() -> &'static [Entry] {
    REGISTRY
}

/// The spin-down registry: lookup by name or alias, and its consistency check.
pub fn spindowns() -> Registry<Entry> {
    Registry::new("spin-down policy", REGISTRY)
}

/// Build a policy from `name[:k=v,…]`, its defaults from its entry's key table.
pub fn build(spec: &str) -> Result<Box<dyn SpinDown>> {
    let (name, params) = Params::parse(spec)?;
    entry(&name)?.build_with(params)
}

/// The registry entry of `name` or of an alias (`fixed` and `timeout` are
/// the same, as its entry says).
pub fn entry(name: &str) -> Result<&'static Entry> {
    // the registry's lookup; the message keeps its wording ("unknown policy")
    spindowns().find(name).map_err(|_| {
        Error::invalid(
            "spin-down policy",
            format!(
                "unknown policy `{}` (known: {})",
                name.trim(),
                spindowns().names().collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_sorted_and_unique_and_every_default_builds() {
        assert_eq!(spindowns().check(), Ok(()));
        for e in registry() {
            let p = build(e.name).unwrap();
            assert_eq!(p.name(), e.name);
            for a in e.aliases {
                assert_eq!(build(a).unwrap().name(), e.name, "alias {a}");
            }
        }
    }

    #[test]
    fn every_documented_key_is_accepted_and_no_other() {
        for e in registry() {
            let table: Vec<&str> = e.keys.iter().map(|k| k.key).collect();
            for k in e.keys {
                let spec = format!("{}:{}={}", e.name, k.key, k.example);
                build(&spec).unwrap_or_else(|err| panic!("{spec}: {err}"));
            }
            let err = build(&format!("{}:no-such-key=1", e.name))
                .err()
                .unwrap()
                .to_string();
            assert!(
                err.contains(&format!(
                    "unknown parameter `no-such-key` (known: {})",
                    table.join(", ")
                )),
                "{err}"
            );
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
