//! `adaptive`: a timeout that learns from the outcome of its own
//! spin-downs, after Douglis, Krishnan and Bershad, *Adaptive Disk
//! Spin-down Policies for Mobile Computers* (1995; SARD's reference [33],
//! cited by Mi et al. §2 for adaptive idle waits). A spin-down that is
//! followed by a request sooner than the break-even time cost more energy
//! than staying on, and the user waited for the spin-up for nothing: the
//! timeout grows (× `grow`). A spin-down that paid off lets the timeout
//! shrink (× `shrink`), to catch more of the idle time next time. Bounded
//! by `min` and `max`.
//!
//! Choices: multiplicative steps in both directions (Douglis et al. study
//! several; multiplicative adapts over the decades of idle lengths disks
//! see); the break-even time comes from the power model
//! ([`PowerModel::break_even_ns`](crate::energy::PowerModel::break_even_ns)), measured from the spin-down; intervals
//! too short to reach the timeout say nothing about it and change nothing.

use super::{Entry, IdleCtx, Param, ParamKind, Params, SpinDown};
use crate::error::{Error, Result};

/// Registry entry: what `fallow energy --policy` and `fallow spindown` read.
pub const ENTRY: Entry = Entry {
    name: "adaptive",
    aliases: &[],
    summary: "timeout that doubles after a spin-down that did not pay off (next request within the break-even time) and shrinks after one that did (Douglis et al. 1995)",
    keys: &[
        Param::new("t", ParamKind::Duration, "10s").note("start"),
        Param::new("min", ParamKind::Duration, "1s"),
        Param::new("max", ParamKind::Duration, "5min"),
        Param::new("grow", ParamKind::Number("FACTOR"), "2"),
        Param::new("shrink", ParamKind::Number("FACTOR"), "0.75"),
    ],
    reference: false,
    build: Adaptive::build,
};

/// Parameters of [`Adaptive`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveConfig {
    /// Timeout of the first interval, ns.
    pub start_ns: u64,
    /// Least timeout, ns.
    pub min_ns: u64,
    /// Largest timeout, ns.
    pub max_ns: u64,
    /// Factor after a spin-down that did not pay off (> 1).
    pub grow: f64,
    /// Factor after one that did (in (0, 1]).
    pub shrink: f64,
}

impl Default for AdaptiveConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(AdaptiveConfig::take)
    }
}

impl AdaptiveConfig {
    /// Take `t=`, `min=`, `max=`, `grow=` and `shrink=`, each not given
    /// from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(AdaptiveConfig {
            start_ns: p.duration_ns("t")?,
            min_ns: p.duration_ns("min")?,
            max_ns: p.duration_ns("max")?,
            grow: p.number("grow")?,
            shrink: p.number("shrink")?,
        })
    }
}

/// The adaptive-timeout policy.
#[derive(Debug, Clone)]
pub struct Adaptive {
    /// Its parameters.
    pub config: AdaptiveConfig,
    timeout_ns: u64,
    /// Break-even time of the disk, learnt from the first decision.
    break_even_ns: u64,
}

impl Adaptive {
    /// A policy with these parameters and no history.
    pub fn new(config: AdaptiveConfig) -> Self {
        Adaptive {
            timeout_ns: config.start_ns.clamp(config.min_ns, config.max_ns),
            break_even_ns: 0,
            config,
        }
    }

    /// The timeout it would use now, ns.
    pub fn timeout_ns(&self) -> u64 {
        self.timeout_ns
    }

    /// Build from `t=`, `min=`, `max=`, `grow=`, `shrink=`.
    pub fn build(mut p: Params) -> Result<Box<dyn SpinDown>> {
        let config = AdaptiveConfig::take(&mut p)?;
        p.finish_keys()?;
        if config.min_ns > config.max_ns {
            return Err(Error::invalid(
                "adaptive min",
                "must not exceed max".to_string(),
            ));
        }
        if config.grow < 1.0 {
            return Err(Error::invalid(
                "adaptive grow",
                format!("must be at least 1, got {}", config.grow),
            ));
        }
        if !(config.shrink > 0.0 && config.shrink <= 1.0) {
            return Err(Error::invalid(
                "adaptive shrink",
                format!("must be in (0, 1], got {}", config.shrink),
            ));
        }
        Ok(Box::new(Adaptive::new(config)))
    }
}

impl SpinDown for Adaptive {
    fn name(&self) -> &str {
        "adaptive"
    }

    fn on_idle(&mut self, ctx: &IdleCtx<'_>) -> Option<u64> {
        self.break_even_ns = ctx.power.break_even_ns();
        Some(self.timeout_ns)
    }

    fn on_idle_end(&mut self, idle_ns: u64, spun_down: bool) {
        if !spun_down {
            return;
        }
        let asleep_ns = idle_ns.saturating_sub(self.timeout_ns);
        let factor = if asleep_ns < self.break_even_ns {
            self.config.grow
        } else {
            self.config.shrink
        };
        let t = (self.timeout_ns as f64 * factor).round();
        self.timeout_ns =
            (t.min(u64::MAX as f64) as u64).clamp(self.config.min_ns, self.config.max_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::PowerModel;

    const S: u64 = 1_000_000_000;

    #[test]
    fn grows_after_a_wasted_spin_down_and_shrinks_after_a_good_one() {
        let power = PowerModel::default(); // break-even 18.01 s
        let ctx = IdleCtx {
            now_ns: 0,
            power: &power,
        };
        let mut p = Adaptive::new(AdaptiveConfig::default());
        assert_eq!(p.on_idle(&ctx), Some(10 * S));
        // spun down at 10 s, next request 5 s later: wasted -> 20 s
        p.on_idle_end(15 * S, true);
        assert_eq!(p.on_idle(&ctx), Some(20 * S));
        // an interval shorter than the timeout changes nothing
        p.on_idle_end(3 * S, false);
        assert_eq!(p.on_idle(&ctx), Some(20 * S));
        // spun down at 20 s, next request 100 s later: paid off -> 15 s
        p.on_idle_end(120 * S, true);
        assert_eq!(p.on_idle(&ctx), Some(15 * S));
        // asleep for 18.0 s < 18.012 s break-even: still wasted -> 30 s
        p.on_idle_end(33 * S, true);
        assert_eq!(p.on_idle(&ctx), Some(30 * S));
    }

    #[test]
    fn stays_within_bounds() {
        let power = PowerModel::default();
        let ctx = IdleCtx {
            now_ns: 0,
            power: &power,
        };
        let mut p = Adaptive::new(AdaptiveConfig {
            start_ns: 4 * S,
            min_ns: 2 * S,
            max_ns: 6 * S,
            ..AdaptiveConfig::default()
        });
        for _ in 0..5 {
            let t = p.on_idle(&ctx).unwrap();
            p.on_idle_end(t + S, true);
        }
        assert_eq!(p.timeout_ns(), 6 * S);
        for _ in 0..10 {
            let t = p.on_idle(&ctx).unwrap();
            p.on_idle_end(t + 1000 * S, true);
        }
        assert_eq!(p.timeout_ns(), 2 * S);
    }

    #[test]
    fn rejects_bad_parameters() {
        use crate::energy::spindown::build;
        assert!(build("adaptive:min=10s,max=1s").is_err());
        assert!(build("adaptive:grow=0.5").is_err());
        assert!(build("adaptive:shrink=0").is_err());
        assert!(build("adaptive:t=30s,grow=3").is_ok());
    }
}
