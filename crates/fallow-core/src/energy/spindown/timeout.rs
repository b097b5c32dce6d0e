//! `timeout(t)`: spin the disk down once it has been idle for `t`. "After
//! each request, a timer is started and the device is shut down when the
//! timer exceeds a preset timeout interval. Any disk activity occurring
//! during the timeout period resets the timer" (SARD §II, Figure 1).
//! The policy SARD's simulation and its standalone baseline use.

use super::{Entry, IdleCtx, Param, ParamKind, Params, SpinDown};
use crate::error::Result;

/// Registry entry: what `fallow energy --policy` and `fallow spindown` read.
pub const ENTRY: Entry = Entry {
    name: "timeout",
    aliases: &["fixed", "fixed-timeout"],
    summary: "spin down after t without a local request (the fixed timeout of the SARD seed, Figure 1)",
    keys: &[
        Param::new("t", ParamKind::Duration, "10s"),
    ],
    reference: false,
    build: Timeout::build,
};

/// Parameters of [`Timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutConfig {
    /// Idle time before the spin-down, ns.
    pub timeout_ns: u64,
}

impl Default for TimeoutConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(TimeoutConfig::take)
    }
}

impl TimeoutConfig {
    /// Take `t=`, not given from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(TimeoutConfig {
            timeout_ns: p.duration_ns("t")?,
        })
    }
}

/// The fixed-timeout policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timeout {
    /// Its parameters.
    pub config: TimeoutConfig,
}

impl Timeout {
    /// Build from `t=`.
    pub fn build(mut p: Params) -> Result<Box<dyn SpinDown>> {
        let config = TimeoutConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(Timeout { config }))
    }
}

impl SpinDown for Timeout {
    fn name(&self) -> &str {
        "timeout"
    }

    fn on_idle(&mut self, _ctx: &IdleCtx<'_>) -> Option<u64> {
        Some(self.config.timeout_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::spindown::build;
    use crate::energy::PowerModel;

    #[test]
    fn same_timeout_every_interval_whatever_happened() {
        let power = PowerModel::default();
        let mut p = build("timeout:t=2.5s").unwrap();
        let ctx = IdleCtx {
            now_ns: 7,
            power: &power,
        };
        assert_eq!(p.on_idle(&ctx), Some(2_500_000_000));
        p.on_idle_end(1, false);
        p.on_idle_end(100_000_000_000, true);
        assert_eq!(p.on_idle(&ctx), Some(2_500_000_000));
        assert_eq!(
            build("timeout").unwrap().on_idle(&ctx),
            Some(10_000_000_000)
        );
    }
}
