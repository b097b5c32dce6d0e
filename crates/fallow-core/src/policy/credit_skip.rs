//! `credit-skip`: the preemption-interval machine ([`PreemptionInterval`])
//! that may skip the interval when switching from FG to BG work, paid for
//! with credits earned by undisturbed FG work — Eggert & Touch's
//! fixed-overhead idletime scheduling (§5.1): "consider a policy that
//! permits a 10% reduction of foreground performance. Whenever the resource
//! serves ten foreground requests without incurring a preemption delay, it
//! can immediately switch to idletime use … the ratio between the number
//! of serviced foreground requests that did not incur preemptions and the
//! total number of preemptions bounds foreground performance". §5.1 also
//! asks for a *leaky bucket* bounding the saved credits, so that a long
//! quiet history cannot be spent in one transient burst of skips.
//!
//! The bucket, in credits:
//! - **earn**: +1 per FG request served without a preemption delay
//!   (`unit=request`, §5.1), or +1 per idle interval that ended without a
//!   collision (`unit=interval`); requests of a busy period delayed by a
//!   collision (and of busy periods the delay carried into) earn nothing;
//! - **cap**: the bucket holds at most `cap` credits; earnings beyond it
//!   overflow and are lost, so at most `cap / n` skips can follow each other;
//! - **spend**: when the device falls idle with at least `n` credits the
//!   preemption interval is skipped (BG may start at once);
//! - **cost**: every collision (an FG arrival that found BG in service,
//!   skipped interval or not) takes `n` credits, down to 0.
//!
//! Every skip is paid by a collision when BG work is endless, so skips ≤
//! (undelayed FG requests) / `n`: with `n` = 10, at most one preemption per
//! ten undisturbed requests is added to what the plain machine causes.
//! Intervals that are not skipped behave exactly as `preemption-interval`
//! with the same parameters.

use super::preemption_interval::{
    IntervalCounters, PreemptionInterval, PreemptionIntervalConfig, BATCH, SIZE, START, VARIANT,
};
use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy};
use crate::error::{Error, Result};
use crate::service::{BgService, BgWork};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "credit-skip",
    aliases: &[],
    summary: "preemption interval skipped when n credits (undisturbed FG requests) are saved; a collision costs n; leaky bucket capped (Eggert & Touch §5.1)",
    keys: &[
        Param::new("p", ParamKind::Duration, "100ms"),
        VARIANT,
        START,
        BATCH,
        SIZE,
        // §5.1's example: a 10 % foreground budget
        Param::new("n", ParamKind::Count, "10").note("credits per skip and per collision"),
        // at most ten skips in a row
        Param::new("cap", ParamKind::Count, "100").note("bucket size"),
        Param::new("unit", ParamKind::Choice(&["request", "interval"]), "request").note("what earns a credit").example("interval"),
    ],
    clairvoyant: false,
    build: CreditSkip::build,
    knob: Some(Knob::wait("p")),
    size_param: None,
    interval_rule: None,
};

/// What earns a credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditUnit {
    /// An FG request served without a preemption delay (§5.1).
    Request,
    /// An idle interval that ended without a collision.
    Interval,
}

/// Parameters of [`CreditSkip`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditSkipConfig {
    /// The machine whose FG→BG interval may be skipped.
    pub machine: PreemptionIntervalConfig,
    /// Credits a skip needs and a collision costs.
    pub n: u64,
    /// Most credits the bucket holds.
    pub cap: u64,
    /// What earns a credit.
    pub unit: CreditUnit,
}

impl Default for CreditSkipConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(CreditSkipConfig::take)
    }
}

impl CreditSkipConfig {
    /// Take `n=`, `cap=`, `unit=` and the machine's keys, each not given
    /// from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        const NAME: &str = "credit-skip";
        let machine = PreemptionIntervalConfig::take(p, NAME)?;
        let whole = |p: &mut Params, key: &str| -> Result<u64> {
            let v = p.number(key)?;
            if v >= 1.0 && v.fract() == 0.0 && v < 9e15 {
                Ok(v as u64)
            } else {
                Err(Error::invalid(
                    format!("{NAME}:{key}"),
                    format!("`{v}` is not a positive whole number"),
                ))
            }
        };
        let n = whole(p, "n")?;
        let cap = whole(p, "cap")?;
        let unit = match p.value("unit")?.as_str() {
            "request" => CreditUnit::Request,
            "interval" => CreditUnit::Interval,
            v => {
                return Err(Error::invalid(
                    format!("{NAME}:unit"),
                    format!("`{v}` (request or interval)"),
                ))
            }
        };
        Ok(CreditSkipConfig {
            machine,
            n,
            cap,
            unit,
        })
    }
}

/// The credit-skip policy.
#[derive(Debug, Clone)]
pub struct CreditSkip {
    config: CreditSkipConfig,
    machine: PreemptionInterval,
    credits: u64,
    earned: u64,
    skips: u64,
    /// The busy period being reported was delayed by a collision.
    delayed: bool,
}

impl CreditSkip {
    /// An empty bucket.
    pub fn new(config: CreditSkipConfig) -> Self {
        CreditSkip {
            config,
            machine: PreemptionInterval::new(config.machine),
            credits: 0,
            earned: 0,
            skips: 0,
            delayed: false,
        }
    }

    /// Build from `n=`, `cap=`, `unit=request|interval` and the machine's
    /// `p=`, `variant=`, `start=`, `batch=`, `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = CreditSkipConfig::take(&mut p)?;
        p.finish_keys()?;
        let CreditSkipConfig { n, cap, .. } = config;
        if cap < n {
            return Err(Error::invalid(
                "credit-skip:cap",
                format!("{cap} is below n = {n}: no interval could ever be skipped"),
            ));
        }
        Ok(Box::new(CreditSkip::new(config)))
    }

    /// Its parameters.
    pub fn config(&self) -> &CreditSkipConfig {
        &self.config
    }

    /// Credits in the bucket now.
    pub fn credits(&self) -> u64 {
        self.credits
    }

    /// Credits earned so far, overflow included.
    pub fn earned(&self) -> u64 {
        self.earned
    }

    /// Preemption intervals skipped so far.
    pub fn skips(&self) -> u64 {
        self.skips
    }

    /// The machine's state × event counters.
    pub fn counters(&self) -> &IntervalCounters {
        self.machine.counters()
    }

    fn earn(&mut self, k: u64) {
        self.earned += k;
        self.credits = (self.credits + k).min(self.config.cap);
    }
}

impl Policy for CreditSkip {
    fn name(&self) -> &str {
        "credit-skip"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        self.delayed = false;
        let skip = self.credits >= self.config.n;
        if skip {
            self.skips += 1;
        }
        self.machine.idle_start(ctx, skip)
    }

    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        self.machine.on_bg_done(ctx, done)
    }

    fn on_burst_cut(&mut self, completed: u64) {
        self.machine.burst_cut_count(completed);
    }

    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        self.machine.on_idle_end(idle_ns, collided);
        if collided {
            self.credits = self.credits.saturating_sub(self.config.n);
            self.delayed = true;
        } else if self.config.unit == CreditUnit::Interval {
            self.earn(1);
        }
    }

    fn simulated(&mut self, bg_service: &BgService, bg_work: &BgWork) {
        self.machine.simulated(bg_service, bg_work);
    }

    fn on_busy_end(&mut self, busy_ns: u64, requests: u32) {
        self.machine.on_busy_end(busy_ns, requests);
        // `delayed` stays set through busy periods the delay carried into
        if self.config.unit == CreditUnit::Request && !self.delayed {
            self.earn(u64::from(requests));
        }
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

    fn policy(n: u64, cap: u64, unit: CreditUnit) -> CreditSkip {
        CreditSkip::new(CreditSkipConfig {
            machine: PreemptionIntervalConfig {
                interval_ns: 50 * MS,
                ..Default::default()
            },
            n,
            cap,
            unit,
        })
    }

    #[test]
    fn ten_undisturbed_requests_buy_one_skip() {
        let mut pol = policy(10, 100, CreditUnit::Request);
        pol.on_busy_end(MS, 9);
        assert_eq!(idle(&mut pol, 0), 50 * MS, "9 credits: no skip");
        pol.on_idle_end(10 * MS, false);
        pol.on_busy_end(MS, 1);
        assert_eq!(pol.credits(), 10);
        assert_eq!(idle(&mut pol, 100 * MS), 0, "10 credits: skip");
        assert_eq!(pol.skips(), 1);
        // the skip collides: it costs n, and the delayed busy period earns nothing
        pol.on_idle_end(10 * MS, true);
        assert_eq!(pol.credits(), 0);
        pol.on_busy_end(MS, 4);
        pol.on_busy_end(MS, 3); // the delay carried into the next busy period
        assert_eq!(pol.credits(), 0);
        assert_eq!(idle(&mut pol, 200 * MS), 50 * MS);
        pol.on_idle_end(MS, false);
        pol.on_busy_end(MS, 2);
        assert_eq!(pol.credits(), 2);
        assert_eq!(pol.earned(), 12);
    }

    #[test]
    fn the_bucket_overflows_at_its_cap() {
        let mut pol = policy(10, 25, CreditUnit::Request);
        pol.on_busy_end(MS, 100);
        assert_eq!((pol.credits(), pol.earned()), (25, 100));
        // two skips, each paid by a collision; the third finds 5 credits
        for (k, want) in [(0, 0), (1, 0), (2, 50 * MS)] {
            assert_eq!(idle(&mut pol, k * 100 * MS), want, "skip {k}");
            pol.on_idle_end(60 * MS, true);
        }
        assert_eq!(pol.skips(), 2);
        assert_eq!(pol.credits(), 0);
    }

    #[test]
    fn interval_credits_come_from_quiet_idle_intervals() {
        let mut pol = policy(3, 3, CreditUnit::Interval);
        pol.on_busy_end(MS, 50); // requests earn nothing in this unit
        for k in 0..3 {
            assert_eq!(idle(&mut pol, k * 100 * MS), 50 * MS);
            pol.on_idle_end(MS, false);
            pol.on_busy_end(MS, 1);
        }
        assert_eq!(idle(&mut pol, 300 * MS), 0);
    }

    #[test]
    fn builds_from_params() {
        let pol = super::super::build("credit-skip:p=20ms,n=5,cap=50,unit=interval").unwrap();
        assert_eq!(pol.name(), "credit-skip");
        for bad in [
            "credit-skip:n=0",
            "credit-skip:n=2.5",
            "credit-skip:n=10,cap=5",
            "credit-skip:unit=byte",
        ] {
            assert!(super::super::build(bad).is_err(), "{bad}");
        }
    }
}
