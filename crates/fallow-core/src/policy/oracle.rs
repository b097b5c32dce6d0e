//! `oracle(x)` — CLAIRVOYANT reference, not deployable: use exactly the
//! x % longest idle intervals of the trace, whole, and no others.
//!
//! Practical Scrubbing §V-B (Fig. 14): "a clairvoyant Oracle that can
//! accurately predict the x % longest idle intervals and only utilize those,
//! maximizing the amount of idle time one can utilize for a collision rate
//! of x %". In a chosen interval BG work starts the moment the device falls
//! idle and runs until the FG arrival ends the interval, so the whole
//! interval is used; as in the paper, that arrival is charged as a
//! collision (it finds a BG request in service — a non-preemptive device
//! cannot stop exactly at an arrival whose time the request's own random
//! service length does not know). Using k intervals thus costs k
//! collisions, and no policy that runs BG until FG arrives can use more
//! idle time with k collisions than the k longest intervals hold: this is
//! the ceiling of the idle-time-used vs collisions plot.
//!
//! Which intervals: the oracle knows the length of the interval that is
//! starting (`Ctx::future_idle_ns`, as the device will actually see it,
//! shortened by any shift its own earlier collisions caused) and uses it
//! when it is at least a threshold θ. With `min=DURATION`, θ is given. With
//! `x=PERCENT`, θ is the length of the `round(x/100 · n)`-th longest of the
//! trace's n idle intervals, learned through [`Policy::prepare`] (called by
//! the simulator before the run; without it the oracle uses nothing): the
//! x % longest intervals — exactly x % when lengths are distinct, all of
//! those tied at θ otherwise. Deciding on the actual length rather than on
//! the baseline position is what makes it the better-informed policy: an
//! interval that a shift shortened below θ is left alone, and the oracle
//! with threshold θ uses exactly the intervals `lossless-waiting(θ − 1 ns)`
//! uses (Practical Scrubbing finds the two "very close").

use super::{Ctx, Decision, Entry, IntervalRule, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};
use crate::period::Periods;

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "oracle",
    aliases: &[],
    summary: "CLAIRVOYANT upper bound: only the x % longest idle intervals, each used whole (one collision each)",
    keys: &[
        Param::new("x", ParamKind::Number("PERCENT"), "10"),
        Param::new("min", ParamKind::Duration, "").note("instead of x").example("1s"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: true,
    build: Oracle::build,
    knob: Some(Knob::factor("x", 0.01, 100.0)),
    size_param: None,
    interval_rule: Some(IntervalRule::WholeIfAmongLongestPercent),
};

/// Which idle intervals the oracle uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OracleChoice {
    /// The longest `percent` % of the trace's idle intervals.
    Percent(f64),
    /// Every idle interval at least this long, ns.
    MinNs(u64),
}

/// Parameters of [`Oracle`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OracleConfig {
    /// Which intervals to use.
    pub choice: OracleChoice,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Default for OracleConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(OracleConfig::take)
    }
}

impl OracleConfig {
    /// Take `x=` or `min=` (not both; neither: the key table's `x`) and `size=`.
    fn take(p: &mut Params) -> Result<Self> {
        let choice = match p.take("min") {
            Some(_) if p.contains("x") => {
                return Err(Error::invalid(
                    "policy oracle",
                    "give x=PERCENT or min=DURATION, not both",
                ))
            }
            Some(v) => OracleChoice::MinNs(crate::units::parse_duration_ns(&v)?),
            None => {
                let v = p.value("x")?;
                let x = v.trim_end_matches('%').trim().parse::<f64>().ok();
                match x {
                    Some(x) if (0.0..=100.0).contains(&x) => OracleChoice::Percent(x),
                    _ => {
                        return Err(Error::invalid(
                            "policy oracle:x",
                            format!("`{v}` is not a percentage in [0, 100]"),
                        ))
                    }
                }
            }
        };
        Ok(OracleConfig {
            choice,
            size_bytes: p.bytes("size")?,
        })
    }
}

/// The oracle (clairvoyant).
#[derive(Debug, Clone, Default)]
pub struct Oracle {
    /// Its parameters.
    pub config: OracleConfig,
    /// Least length of a used interval, ns (`None`: use nothing); set by
    /// `prepare` for `Percent`.
    threshold_ns: Option<u64>,
}

impl Oracle {
    /// An oracle with these parameters.
    pub fn new(config: OracleConfig) -> Self {
        Oracle {
            config,
            threshold_ns: match config.choice {
                OracleChoice::MinNs(min) => Some(min),
                OracleChoice::Percent(_) => None,
            },
        }
    }

    /// Build from `x=PERCENT` or `min=DURATION` (not both), and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = OracleConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(Oracle::new(config)))
    }

    /// The threshold in use, ns (`None`: nothing is used).
    pub fn threshold_ns(&self) -> Option<u64> {
        self.threshold_ns
    }
}

/// Length of the `k`-th longest of `lengths` (`None` for k = 0).
fn kth_longest(lengths: &[u64], k: usize) -> Option<u64> {
    if k == 0 || lengths.is_empty() {
        return None;
    }
    let k = k.min(lengths.len());
    let mut v = lengths.to_vec();
    let (_, &mut kth, _) = v.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
    Some(kth)
}

impl Policy for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn clairvoyant(&self) -> bool {
        true
    }

    fn prepare(&mut self, periods: &Periods) {
        if let OracleChoice::Percent(x) = self.config.choice {
            let n = periods.idle_len_ns.len();
            let k = (x / 100.0 * n as f64).round() as usize;
            self.threshold_ns = kth_longest(&periods.idle_len_ns, k);
        }
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        match (self.threshold_ns, ctx.future_idle_ns) {
            (Some(min), Some(len)) if len >= min => {
                let size = self.config.size_bytes.unwrap_or(ctx.bg_size_bytes);
                Decision::Start(Start::until_fg(0, size))
            }
            _ => Decision::Quiet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn periods(idle: &[u64]) -> Periods {
        Periods {
            busy_start_ns: vec![0; idle.len() + 1],
            busy_len_ns: vec![1; idle.len() + 1],
            busy_requests: vec![1; idle.len() + 1],
            idle_start_ns: vec![0; idle.len()],
            idle_len_ns: idle.to_vec(),
        }
    }

    /// Drive the oracle over the intervals as the engine does (no shifts):
    /// which intervals does it use?
    fn used(o: &mut Oracle, idle: &[u64]) -> Vec<bool> {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let svc = BgService::Constant { ns: 1 };
        o.prepare(&periods(idle));
        let mut out = vec![];
        for &l in idle {
            let mut ctx = Ctx {
                now_ns: 0,
                idle_start_ns: 0,
                last_fg_arrival_ns: 0,
                rng: &mut rng,
                bg_service: &svc,
                bg_size_bytes: 4096,
                future_idle_ns: Some(l),
            };
            let d = o.on_idle(&mut ctx);
            if let Decision::Start(s) = d {
                assert_eq!(s, Start::until_fg(0, 4096), "whole interval");
            }
            out.push(d != Decision::Quiet);
            o.on_idle_end(l, d != Decision::Quiet);
        }
        out
    }

    #[test]
    fn uses_exactly_the_longest_x_percent() {
        let idle = [5, 50, 7, 100, 3, 60, 8, 9, 1, 2];
        // 30 % of 10 = 3: lengths 100, 60, 50
        let mut o = Oracle::new(OracleConfig {
            choice: OracleChoice::Percent(30.0),
            size_bytes: None,
        });
        let u = used(&mut o, &idle);
        let want = [
            false, true, false, true, false, true, false, false, false, false,
        ];
        assert_eq!(u, want);
        // 0 % and 100 %
        o.config.choice = OracleChoice::Percent(0.0);
        assert!(used(&mut o, &idle).iter().all(|&b| !b));
        o.config.choice = OracleChoice::Percent(100.0);
        assert!(used(&mut o, &idle).iter().all(|&b| b));
    }

    #[test]
    fn ties_at_the_threshold_are_all_used() {
        let idle = [4, 9, 4, 4, 9, 1];
        // 50 % of 6 = 3: the 3rd longest is 4, and all three 4s tie
        let mut o = Oracle::new(OracleConfig {
            choice: OracleChoice::Percent(50.0),
            size_bytes: None,
        });
        assert_eq!(used(&mut o, &idle), [true, true, true, true, true, false]);
        assert_eq!(o.threshold_ns(), Some(4));
    }

    #[test]
    fn unprepared_percent_uses_nothing() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let svc = BgService::Constant { ns: 1 };
        let mut o = Oracle::new(OracleConfig::default());
        let mut ctx = Ctx {
            now_ns: 0,
            idle_start_ns: 0,
            last_fg_arrival_ns: 0,
            rng: &mut rng,
            bg_service: &svc,
            bg_size_bytes: 4096,
            future_idle_ns: Some(u64::MAX),
        };
        assert_eq!(o.on_idle(&mut ctx), Decision::Quiet);
    }

    #[test]
    fn min_uses_intervals_at_least_that_long() {
        let idle = [5, 50, 7, 100];
        let mut o = Oracle::new(OracleConfig {
            choice: OracleChoice::MinNs(7),
            size_bytes: None,
        });
        assert_eq!(used(&mut o, &idle), [false, true, true, true]);
    }

    #[test]
    fn clairvoyant_and_built_from_parameters() {
        let b = |s: &str| ENTRY.build_with(Params::parse(s).unwrap().1);
        assert!(b("oracle").unwrap().clairvoyant());
        assert!(b("oracle:x=5%").is_ok());
        assert!(b("oracle:min=10ms").is_ok());
        assert!(b("oracle:x=5,min=10ms").is_err());
        assert!(b("oracle:x=101").is_err());
        assert!(b("oracle:t=1s").is_err());
    }
}
