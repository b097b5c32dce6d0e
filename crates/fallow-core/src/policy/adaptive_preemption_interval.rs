//! `adaptive-preemption-interval`: the preemption-interval machine
//! ([`PreemptionInterval`]) whose interval length adapts to its own event
//! counters, as Eggert & Touch propose for future work (§5.2): "a rapidly
//! increasing `B[f]` counter indicates that many idletime preemptions delay
//! foreground requests and the preemption interval should increase …
//! the preemption interval could shrink slowly over time", TCP-like.
//!
//! After every idle interval the policy reads the counters: if `B[f]` grew
//! (the FG arrival found BG in service) the interval is multiplied by
//! `grow`; otherwise (the arrival found P or I: `P[f]` or `I[f]` grew) it is
//! multiplied by `1 − shrink`. It is kept within `[min, max]`. Decisions use
//! the new length from the next idle interval on.
//!
//! Defaults: start at 10 ms, `grow` = 2 (the multiplicative back-off of
//! TCP's window, mirrored), `shrink` = 1/32 (slow decrease), bounds 1 ms and
//! 10 s. Where the interval settles: while it stays inside the bounds,
//! `ln(p_now/p_0) = N_B[f]·ln(grow) + N_other·ln(1 − shrink)`, so over a long
//! run the fraction of idle intervals that end in a `B[f]` tends to
//! `q* = −ln(1 − shrink) / (ln grow − ln(1 − shrink))` — 4.38 % with the
//! defaults — whatever the workload, provided a longer interval makes a
//! collision less likely. `grow` and `shrink` therefore choose the
//! collision rate; the workload chooses the interval that gives it.

use super::preemption_interval::{
    IntervalCounters, IntervalEvent, IntervalState, PreemptionInterval, PreemptionIntervalConfig,
    BATCH, SIZE, START, VARIANT,
};
use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy};
use crate::error::{Error, Result};
use crate::service::{BgService, BgWork};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "adaptive-preemption-interval",
    aliases: &[],
    summary: "preemption interval that doubles on a B[f] event (FG found BG in service) and shrinks by 1/32 otherwise (Eggert & Touch §5.2)",
    keys: &[
        Param::new("p", ParamKind::Duration, "10ms").note("start"),
        VARIANT,
        START,
        BATCH,
        SIZE,
        Param::new("min", ParamKind::Duration, "1ms"),
        Param::new("max", ParamKind::Duration, "10s"),
        Param::new("grow", ParamKind::Number("FACTOR"), "2"),
        // Eggert & Touch's 1/32
        Param::new("shrink", ParamKind::Number("FRACTION"), "0.03125"),
    ],
    clairvoyant: false,
    build: AdaptivePreemptionInterval::build,
    knob: Some(Knob::wait("p")),
    size_param: None,
    interval_rule: None,
};

/// Parameters of [`AdaptivePreemptionInterval`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptivePreemptionIntervalConfig {
    /// The machine; `interval_ns` is the starting length, ns.
    pub machine: PreemptionIntervalConfig,
    /// Shortest interval, ns (> 0: growth is multiplicative).
    pub min_ns: u64,
    /// Longest interval, ns.
    pub max_ns: u64,
    /// Factor applied on a `B[f]` event (> 1).
    pub grow: f64,
    /// Fraction taken off after an idle interval without `B[f]` (0 < shrink < 1).
    pub shrink: f64,
}

impl Default for AdaptivePreemptionIntervalConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(AdaptivePreemptionIntervalConfig::take)
    }
}

impl AdaptivePreemptionIntervalConfig {
    /// Take `p=` (start), `min=`, `max=`, `grow=`, `shrink=` and the
    /// machine's keys, each not given from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(AdaptivePreemptionIntervalConfig {
            machine: PreemptionIntervalConfig::take(p, ENTRY.name)?,
            min_ns: p.duration_ns("min")?,
            max_ns: p.duration_ns("max")?,
            grow: p.number("grow")?,
            shrink: p.number("shrink")?,
        })
    }

    /// The long-run fraction of idle intervals ending in `B[f]` while the
    /// interval stays inside its bounds (module doc).
    pub fn equilibrium_collision_fraction(&self) -> f64 {
        let down = -(1.0 - self.shrink).ln();
        down / (self.grow.ln() + down)
    }
}

/// The adaptive preemption-interval policy.
#[derive(Debug, Clone)]
pub struct AdaptivePreemptionInterval {
    config: AdaptivePreemptionIntervalConfig,
    machine: PreemptionInterval,
    /// Current length, ns, kept fractional so that slow shrinking of a short
    /// interval is not lost to rounding.
    interval: f64,
}

impl AdaptivePreemptionInterval {
    /// A policy starting at `config.machine.interval_ns` (clamped to the bounds).
    pub fn new(config: AdaptivePreemptionIntervalConfig) -> Self {
        let interval =
            (config.machine.interval_ns as f64).clamp(config.min_ns as f64, config.max_ns as f64);
        let mut machine = PreemptionInterval::new(config.machine);
        machine.set_interval_ns(interval.round() as u64);
        AdaptivePreemptionInterval {
            config,
            machine,
            interval,
        }
    }

    /// Build from `p=` (start), `min=`, `max=`, `grow=`, `shrink=`, and the
    /// machine's `variant=`, `start=`, `batch=`, `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        const NAME: &str = "adaptive-preemption-interval";
        let config = AdaptivePreemptionIntervalConfig::take(&mut p)?;
        p.finish_keys()?;
        if config.min_ns == 0 || config.min_ns > config.max_ns {
            return Err(Error::invalid(
                format!("{NAME}:min"),
                "must be positive and at most max",
            ));
        }
        if config.grow <= 1.0 {
            return Err(Error::invalid(format!("{NAME}:grow"), "must exceed 1"));
        }
        if !(config.shrink > 0.0 && config.shrink < 1.0) {
            return Err(Error::invalid(
                format!("{NAME}:shrink"),
                "must lie strictly between 0 and 1",
            ));
        }
        Ok(Box::new(AdaptivePreemptionInterval::new(config)))
    }

    /// Its parameters.
    pub fn config(&self) -> &AdaptivePreemptionIntervalConfig {
        &self.config
    }

    /// The interval the next idle interval will use, ns.
    pub fn interval_ns(&self) -> u64 {
        self.machine.config().interval_ns
    }

    /// The machine's state × event counters.
    pub fn counters(&self) -> &IntervalCounters {
        self.machine.counters()
    }
}

impl Policy for AdaptivePreemptionInterval {
    fn name(&self) -> &str {
        "adaptive-preemption-interval"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        self.machine.on_idle(ctx)
    }

    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        self.machine.on_bg_done(ctx, done)
    }

    fn on_burst_cut(&mut self, completed: u64) {
        self.machine.burst_cut_count(completed);
    }

    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        let before = self
            .machine
            .counters()
            .get(IntervalState::Bg, IntervalEvent::Fg);
        self.machine.on_idle_end(idle_ns, collided);
        let c = &self.config;
        self.interval = if self
            .machine
            .counters()
            .get(IntervalState::Bg, IntervalEvent::Fg)
            > before
        {
            self.interval * c.grow
        } else {
            self.interval * (1.0 - c.shrink)
        }
        .clamp(c.min_ns as f64, c.max_ns as f64);
        self.machine.set_interval_ns(self.interval.round() as u64);
    }

    fn simulated(&mut self, bg_service: &BgService, bg_work: &BgWork) {
        self.machine.simulated(bg_service, bg_work);
    }

    fn on_busy_end(&mut self, busy_ns: u64, requests: u32) {
        self.machine.on_busy_end(busy_ns, requests);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;

    const MS: u64 = 1_000_000;

    fn idle(pol: &mut dyn Policy, at: u64) -> u64 {
        let svc = BgService::Constant { ns: 5 * MS };
        match crate::policy::testing::on_idle_at(pol, at, svc, 65_536) {
            Decision::Start(s) => s.after_ns,
            Decision::Quiet => panic!("quiet"),
        }
    }

    fn policy(p_ms: u64, min_ms: u64, max_ms: u64) -> AdaptivePreemptionInterval {
        AdaptivePreemptionInterval::new(AdaptivePreemptionIntervalConfig {
            machine: PreemptionIntervalConfig {
                interval_ns: p_ms * MS,
                ..Default::default()
            },
            min_ns: min_ms * MS,
            max_ns: max_ms * MS,
            ..Default::default()
        })
    }

    #[test]
    fn a_collision_doubles_the_interval_and_quiet_intervals_shrink_it() {
        let mut pol = policy(8, 1, 1000);
        pol.on_busy_end(MS, 1);
        assert_eq!(idle(&mut pol, 0), 8 * MS);
        pol.on_idle_end(20 * MS, true); // BG ran 8..13.., FG at 20 found it: B[f]
        assert_eq!(pol.interval_ns(), 16 * MS);
        assert_eq!(idle(&mut pol, 100 * MS), 16 * MS);
        pol.on_idle_end(5 * MS, false); // FG inside the interval: P[f]
        assert_eq!(pol.interval_ns(), 15_500_000); // 16 ms × 31/32
        assert_eq!(pol.counters().get(IntervalState::Bg, IntervalEvent::Fg), 1);
        assert_eq!(
            pol.counters()
                .get(IntervalState::Preempt, IntervalEvent::Fg),
            1
        );
    }

    #[test]
    fn the_interval_stays_within_its_bounds() {
        let mut pol = policy(8, 2, 20);
        for k in 0..5 {
            idle(&mut pol, k * 1000 * MS);
            pol.on_idle_end(500 * MS, true);
        }
        assert_eq!(pol.interval_ns(), 20 * MS);
        for k in 5..200 {
            idle(&mut pol, k * 1000 * MS);
            pol.on_idle_end(MS, false);
        }
        assert_eq!(pol.interval_ns(), 2 * MS);
    }

    #[test]
    fn log_interval_is_the_signed_event_sum() {
        // 7 collisions and 100 quiet intervals in any order, no bound hit:
        // p = p0 · 2^7 · (31/32)^100
        let mut pol = policy(4, 1, 100_000);
        for k in 0..107u64 {
            let at = k * 10_000 * MS;
            let p = idle(&mut pol, at);
            if k % 15 == 3 && k / 15 < 7 {
                pol.on_idle_end(p + 6 * MS, true);
            } else {
                pol.on_idle_end(p / 2, false);
            }
        }
        let want = 4e6 * 128.0 * (31.0f64 / 32.0).powi(100);
        assert!(
            (pol.interval_ns() as f64 - want).abs() <= 1.0,
            "{}",
            pol.interval_ns()
        );
        let q = AdaptivePreemptionIntervalConfig::default().equilibrium_collision_fraction();
        assert!((q - 0.04382).abs() < 1e-4, "{q}");
    }

    #[test]
    fn builds_from_params() {
        let pol = super::super::build(
            "adaptive-preemption-interval:p=20ms,min=5ms,max=1s,grow=1.5,shrink=0.1,variant=tl",
        )
        .unwrap();
        assert_eq!(pol.name(), "adaptive-preemption-interval");
        for bad in [
            "adaptive-preemption-interval:grow=1",
            "adaptive-preemption-interval:shrink=1",
            "adaptive-preemption-interval:min=0",
            "adaptive-preemption-interval:min=2s,max=1s",
        ] {
            assert!(super::super::build(bad).is_err(), "{bad}");
        }
    }
}
