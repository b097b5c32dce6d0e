//! `cdf-estimates(T)` (CDF/w-estimates): idle-wait as `cdf-based`, then run
//! at most
//!
//! ```text
//! T · (90th percentile of idle intervals − idle wait) / mean BG service time
//! ```
//!
//! BG requests in the interval (Mi et al. §4, Eq. 1). The count assumes the
//! interval is long (as long as the 90th percentile) and `0 < T ≤ 1` scales
//! it down; T is the knob that holds the FG slowdown to its target (§4.1:
//! 7 %), "close to 1 under idle intervals of high variability and less than
//! 1 for low-variability intervals" (§4). The paper's only stated value is
//! T = 1 (§4.3, Fig. 5(I)), which is the default here; `fallow tune` finds
//! the T that meets a given budget.
//!
//! Eq. 1 is a real number, and with long BG requests (7× FG, §4.1) it is
//! often below 1, where rounding down would starve BG work — which §4.2
//! says this policy avoids. The fractional part is therefore carried to the
//! next interval: over many intervals the policy runs Eq. 1's value on
//! average (0.4 gives 0, 0, 1, 0, 1, …), deterministically, and T acts as a
//! continuous knob. The mean BG service time is the model's at the request
//! size the policy uses.
//!
//! Warm-up: Eq. 1 needs the 90th percentile, so until `warmup` idle
//! intervals have been seen the policy starts no BG work at all — it exists
//! to protect the FG target, so it errs on the quiet side (unlike
//! `cdf-based`, which does not wait while warming up).

use super::cdf_based::{CdfBasedConfig, IdleCdf};
use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "cdf-estimates",
    aliases: &[],
    summary: "wait as cdf-based, then at most Eq. 1's T·(p90(idle) − wait)/mean BG requests (CDF/w-estimates)",
    keys: &[
        Param::new("T", ParamKind::Number("FACTOR"), "1"),
        Param::new("angle", ParamKind::Number("DEGREES"), "30"),
        Param::new("warmup", ParamKind::Count, "32").note("first intervals, quiet"),
        Param::new("min_wait", ParamKind::Duration, "0s").note("floor under the wait").example("50ms"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: CdfEstimates::build,
    knob: Some(Knob::factor("T", 0.01, 100.0)),
    size_param: None,
    interval_rule: None,
};

/// Parameters of [`CdfEstimates`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CdfEstimatesConfig {
    /// Eq. 1's factor T, in (0, 1] in the paper (any positive value allowed).
    pub t: f64,
    /// Angle, warm-up and request size, as for `cdf-based`.
    pub cdf: CdfBasedConfig,
}

impl Default for CdfEstimatesConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(CdfEstimatesConfig::take)
    }
}

impl CdfEstimatesConfig {
    /// Take `T=` and cdf-based's keys, each not given from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(CdfEstimatesConfig {
            t: take_t(p)?,
            cdf: CdfBasedConfig::take(p)?,
        })
    }
}

/// Take `T=` (a positive number).
pub(crate) fn take_t(p: &mut Params) -> Result<f64> {
    let t = p.number("T")?;
    if t > 0.0 {
        Ok(t)
    } else {
        Err(Error::invalid(
            "policy T",
            format!("must be positive, got {t}"),
        ))
    }
}

/// Turns the real-valued request counts of Eq. 1/Eq. 2 into whole requests,
/// carrying the fraction to the next interval (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Budget {
    carry: f64,
}

impl Budget {
    /// Whole requests for an interval whose equation gives `x`.
    pub(crate) fn take(&mut self, x: f64) -> u64 {
        if x.is_nan() || x <= 0.0 {
            return 0;
        }
        // 1e15 requests is beyond any trace; the cap keeps the cast exact
        let total = (self.carry + x).min(1e15);
        let whole = total.floor();
        self.carry = total - whole;
        whole as u64
    }
}

/// Start `n` requests after `wait_ns`, or nothing.
pub(crate) fn burst(wait_ns: u64, size: u64, n: u64) -> Decision {
    if n == 0 {
        return Decision::Quiet;
    }
    Decision::Start(Start {
        max_requests: n,
        ..Start::until_fg(wait_ns, size)
    })
}

/// The CDF/w-estimates policy.
#[derive(Debug, Clone)]
pub struct CdfEstimates {
    /// Its parameters.
    pub config: CdfEstimatesConfig,
    cdf: IdleCdf,
    budget: Budget,
}

impl CdfEstimates {
    /// A policy with these parameters and no history.
    pub fn new(config: CdfEstimatesConfig) -> Self {
        CdfEstimates {
            cdf: IdleCdf::new(config.cdf.angle_deg),
            budget: Budget::default(),
            config,
        }
    }

    /// Build from `T=`, `angle=`, `warmup=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = CdfEstimatesConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(CdfEstimates::new(config)))
    }
}

impl Policy for CdfEstimates {
    fn name(&self) -> &str {
        "cdf-estimates"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        if self.cdf.count() < self.config.cdf.warmup.max(1) {
            return Decision::Quiet;
        }
        let size = self.config.cdf.size_bytes.unwrap_or(ctx.bg_size_bytes);
        let e = self.cdf.estimate();
        let wait_ns = self.config.cdf.floored(e.wait_ns);
        // Eq. 1
        let x = self.config.t * (e.p90_ns - wait_ns as f64) / ctx.bg_service.mean_ns(size);
        burst(wait_ns, size, self.budget.take(x))
    }

    fn on_idle_end(&mut self, idle_ns: u64, _collided: bool) {
        self.cdf.observe(idle_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;

    fn decide(p: &mut dyn Policy, mean_bg_ns: u64) -> Decision {
        let svc = BgService::Exponential {
            mean_ns: mean_bg_ns,
        };
        crate::policy::testing::on_idle_at(p, 0, svc, 4096)
    }

    #[test]
    fn budget_carries_the_fraction() {
        let mut b = Budget::default();
        let got: Vec<u64> = (0..5).map(|_| b.take(0.4)).collect();
        // running sums 0.4, 0.8, 1.2, 1.6, 2.0
        assert_eq!(got, [0, 0, 1, 0, 1]);
        assert_eq!(b.take(2.5), 2);
        assert_eq!(b.take(0.5), 1);
        assert_eq!(b.take(-3.0), 0);
        assert_eq!(b.take(f64::NAN), 0);
    }

    #[test]
    fn low_cv_no_wait_and_eq1_budget_by_hand() {
        // 1..=1000 ms (CV 0.58 < 1): wait 0, p90 = 900 ms to within a bin
        // (≤ 1/32 relative). T = 0.5, mean BG 10 ms: Eq. 1 gives
        // 0.5 · 900 / 10 = 45 requests (44 or 46 at the bin's edges).
        let mut p = CdfEstimates::new(CdfEstimatesConfig {
            t: 0.5,
            ..CdfEstimatesConfig::default()
        });
        for i in 1..=1000u64 {
            p.on_idle_end(i * 1_000_000, false);
        }
        let Decision::Start(s) = decide(&mut p, 10_000_000) else {
            panic!("should start")
        };
        assert_eq!(s.after_ns, 0);
        assert!((44..=46).contains(&s.max_requests), "{}", s.max_requests);
        // exactly Eq. 1 on the histogram's own p90 (no carry yet)
        let e = p.cdf.compute();
        assert_eq!(s.max_requests, (0.5 * e.p90_ns / 10e6).floor() as u64);
        assert!(!s.consult_each && s.spacing_ns == 0);
    }

    #[test]
    fn high_cv_waits_and_counts_from_the_wait() {
        // Lomax idle intervals (shape 3, scale 200 ms: mean 100 ms, CV √3):
        // wait = 200·((1.5/tan 30°)^¼ − 1) ms ≈ 53.92 ms and p90 =
        // 200·(10^⅓ − 1) ms ≈ 230.9 ms; with T = 1 and 5 ms BG requests
        // Eq. 1 gives (230.9 − 53.92)/5 ≈ 35.4.
        let lambda = 200e6;
        let mut p = CdfEstimates::new(CdfEstimatesConfig::default());
        for x in crate::policy::cdf_based::tests::lomax3(100_000, lambda) {
            p.on_idle_end(x, false);
        }
        let Decision::Start(s) = decide(&mut p, 5_000_000) else {
            panic!("should start")
        };
        let wait = crate::policy::cdf_based::tests::lomax3_wait(lambda);
        assert!(
            (s.after_ns as f64 - wait).abs() < 0.02 * wait,
            "{}",
            s.after_ns
        );
        let p90 = lambda * (10f64.powf(1.0 / 3.0) - 1.0);
        let x = (p90 - wait) / 5e6;
        assert!((x - 35.4).abs() < 0.05, "hand value {x}");
        assert!((34..=36).contains(&s.max_requests), "{}", s.max_requests);
    }

    #[test]
    fn quiet_while_warming_up_and_when_eq1_is_zero() {
        let mut p = CdfEstimates::new(CdfEstimatesConfig {
            cdf: CdfBasedConfig {
                warmup: 10,
                ..CdfBasedConfig::default()
            },
            ..CdfEstimatesConfig::default()
        });
        for _ in 0..9 {
            p.on_idle_end(1_000_000, false);
            assert_eq!(decide(&mut p, 1_000), Decision::Quiet);
        }
        p.on_idle_end(1_000_000, false);
        // all intervals 1 ms: p90 ≈ 1 ms, wait 0; 1 ms / 10 ms = 0.1 per
        // interval: the 10th interval gets the first request
        let got: Vec<u64> = (0..20)
            .map(|_| match decide(&mut p, 10_000_000) {
                Decision::Quiet => 0,
                Decision::Start(s) => s.max_requests,
            })
            .collect();
        assert_eq!(got.iter().sum::<u64>(), 2, "{got:?}");
    }

    /// Bursts whose reads leave 2 ms gaps inside them (four per burst)
    /// between 4–8 s gaps: the histogram's body is the 2 ms cluster, so
    /// its wait is a few ms and BG work would start inside a burst;
    /// `min_wait=50ms` raises the wait to 50 ms, and Eq. 1 counts from it.
    #[test]
    fn min_wait_floors_the_wait_and_eq1_counts_from_it() {
        let gaps: Vec<u64> = (0..500u64)
            .map(|i| {
                if i % 5 == 4 {
                    4_000_000_000 + (i * 40_000_000) % 4_000_000_000
                } else {
                    2_000_000
                }
            })
            .collect();
        let with = |spec: &str| {
            let mut p = ENTRY.build_with(Params::parse(spec).unwrap().1).unwrap();
            for &g in &gaps {
                p.on_idle_end(g, false);
            }
            match decide(p.as_mut(), 10_000_000) {
                Decision::Start(s) => s,
                Decision::Quiet => panic!("{spec}: should start"),
            }
        };
        let plain = with("cdf-estimates:T=0.5");
        assert!(plain.after_ns < 50_000_000, "{}", plain.after_ns);
        assert!(plain.after_ns >= 2_000_000, "{}", plain.after_ns);
        let floored = with("cdf-estimates:T=0.5,min_wait=50ms");
        assert_eq!(floored.after_ns, 50_000_000);
        // Eq. 1 from the floored wait, on the same histogram's p90
        let mut cdf = IdleCdf::new(30.0);
        gaps.iter().for_each(|&g| cdf.observe(g));
        let p90 = cdf.compute().p90_ns;
        assert!(p90 > 4e9, "{p90}");
        assert_eq!(floored.max_requests, (0.5 * (p90 - 50e6) / 10e6).floor() as u64);
        // cdf-based floors its wait too, warm-up included
        let b = |spec: &str| {
            let e = super::super::cdf_based::ENTRY;
            let mut p = e.build_with(Params::parse(spec).unwrap().1).unwrap();
            match decide(p.as_mut(), 10_000_000) {
                Decision::Start(s) => s.after_ns,
                Decision::Quiet => panic!("{spec}: should start"),
            }
        };
        assert_eq!(b("cdf-based"), 0);
        assert_eq!(b("cdf-based:min_wait=50ms"), 50_000_000);
    }

    #[test]
    fn parameters_are_checked() {
        let b = |s: &str| ENTRY.build_with(Params::parse(s).unwrap().1);
        assert!(b("cdf-estimates:T=0.3,angle=20,warmup=50,size=64KiB").is_ok());
        assert!(b("cdf-estimates:T=0").is_err());
        assert!(b("cdf-estimates:min_wait=soon").is_err());
        assert!(b("cdf-estimates:T=-1").is_err());
        assert!(b("cdf-estimates:rho=0.5").is_err());
    }
}
