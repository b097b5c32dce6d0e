//! `bursty-cdf-estimates(T, ρ)` (Bursty+CDF/w-estimates): `cdf-estimates`
//! that also exploits burstiness of idle intervals (Mi et al. §5).
//!
//! Idle intervals are split into small and large at `(CV + 1) · mean`
//! (§3.2). The policy learns online how often a large interval follows a
//! large one (the (large, large) pair at lag 1, Fig. 2(d) and Fig. 7). When
//! the last idle interval was large and that probability is at least ρ, the
//! next interval is predicted large, and instead of Eq. 1 the number of BG
//! requests is
//!
//! ```text
//! T · ((CV + 1) · mean − idle wait) / mean BG service time       (Eq. 2)
//! ```
//!
//! "which implies that the length of the incoming idle interval is at least
//! the 'large' value" (§5). Otherwise it is exactly `cdf-estimates`: same
//! wait, Eq. 1, fraction carried between intervals, quiet while warming up.
//!
//! Choices the paper leaves open:
//! - Each interval is classified once, when it ends, against the split
//!   known then (mean and CV are exact running values), and pairs are
//!   counted only after warm-up, when the split means something. Recounting
//!   the whole history whenever the split moves would cost O(history).
//! - The paper builds the pair table for lags 1..9 but predicts only the
//!   next interval; lag 1 is the one that does that.
//! - ρ defaults to 0.5: predict large when a large follow-up is more likely
//!   than not (the bursty workload of Fig. 2(d) has 0.65 at lag 1).

use super::cdf_based::{CdfBasedConfig, IdleCdf};
use super::cdf_estimates::{burst, take_t, Budget};
use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy};
use crate::error::{Error, Result};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "bursty-cdf-estimates",
    aliases: &[],
    summary: "cdf-estimates, but after a large idle interval, when P(large→large) ≥ rho, run Eq. 2's T·((CV+1)·mean − wait)/mean BG (Bursty+CDF/w-estimates)",
    keys: &[
        Param::new("T", ParamKind::Number("FACTOR"), "1"),
        Param::new("rho", ParamKind::Number("PROBABILITY"), "0.5"),
        Param::new("angle", ParamKind::Number("DEGREES"), "30"),
        Param::new("warmup", ParamKind::Count, "32").note("first intervals, quiet"),
        Param::new("min_wait", ParamKind::Duration, "0s").note("floor under the wait").example("50ms"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: BurstyCdfEstimates::build,
    knob: Some(Knob::factor("T", 0.01, 100.0)),
    size_param: None,
    interval_rule: None,
};

/// Parameters of [`BurstyCdfEstimates`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstyCdfEstimatesConfig {
    /// Factor T of Eq. 1 and Eq. 2.
    pub t: f64,
    /// Least measured P(large → large) at lag 1 for using Eq. 2, in [0, 1].
    pub rho: f64,
    /// Angle, warm-up and request size, as for `cdf-based`.
    pub cdf: CdfBasedConfig,
}

impl Default for BurstyCdfEstimatesConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(BurstyCdfEstimatesConfig::take)
    }
}

impl BurstyCdfEstimatesConfig {
    /// Take `T=`, `rho=` and cdf-based's keys, each not given from the key
    /// table.
    fn take(p: &mut Params) -> Result<Self> {
        let t = take_t(p)?;
        let rho = p.number("rho")?;
        if !(0.0..=1.0).contains(&rho) {
            return Err(Error::invalid(
                "policy rho",
                format!("must be a probability in [0, 1], got {rho}"),
            ));
        }
        let cdf = CdfBasedConfig::take(p)?;
        Ok(BurstyCdfEstimatesConfig { t, rho, cdf })
    }
}

/// The Bursty+CDF/w-estimates policy.
#[derive(Debug, Clone)]
pub struct BurstyCdfEstimates {
    /// Its parameters.
    pub config: BurstyCdfEstimatesConfig,
    cdf: IdleCdf,
    budget: Budget,
    /// Class of the last idle interval (`true`: large), after warm-up.
    last_large: Option<bool>,
    /// Lag-1 pairs starting with a large interval, and those ending with one.
    from_large: u64,
    large_large: u64,
}

impl BurstyCdfEstimates {
    /// A policy with these parameters and no history.
    pub fn new(config: BurstyCdfEstimatesConfig) -> Self {
        BurstyCdfEstimates {
            cdf: IdleCdf::new(config.cdf.angle_deg),
            budget: Budget::default(),
            last_large: None,
            from_large: 0,
            large_large: 0,
            config,
        }
    }

    /// Build from `T=`, `rho=`, `angle=`, `warmup=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = BurstyCdfEstimatesConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(BurstyCdfEstimates::new(config)))
    }

    /// Measured P(large → large) at lag 1 (`None` before any large interval
    /// had a successor).
    pub fn p_large_large(&self) -> Option<f64> {
        (self.from_large > 0).then(|| self.large_large as f64 / self.from_large as f64)
    }

    /// True when the next interval is predicted large.
    pub fn predicts_large(&self) -> bool {
        self.last_large == Some(true) && self.p_large_large().is_some_and(|p| p >= self.config.rho)
    }
}

impl Policy for BurstyCdfEstimates {
    fn name(&self) -> &str {
        "bursty-cdf-estimates"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        if self.cdf.count() < self.config.cdf.warmup.max(1) {
            return Decision::Quiet;
        }
        let size = self.config.cdf.size_bytes.unwrap_or(ctx.bg_size_bytes);
        let e = self.cdf.estimate();
        let horizon_ns = if self.predicts_large() {
            self.cdf.split_ns() // Eq. 2
        } else {
            e.p90_ns // Eq. 1
        };
        let wait_ns = self.config.cdf.floored(e.wait_ns);
        let x = self.config.t * (horizon_ns - wait_ns as f64) / ctx.bg_service.mean_ns(size);
        burst(wait_ns, size, self.budget.take(x))
    }

    fn on_idle_end(&mut self, idle_ns: u64, _collided: bool) {
        self.cdf.observe(idle_ns);
        if self.cdf.count() <= self.config.cdf.warmup {
            return;
        }
        let large = idle_ns as f64 > self.cdf.split_ns();
        if self.last_large == Some(true) {
            self.from_large += 1;
            self.large_large += u64::from(large);
        }
        self.last_large = Some(large);
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

    fn policy(rho: f64) -> BurstyCdfEstimates {
        BurstyCdfEstimates::new(BurstyCdfEstimatesConfig {
            rho,
            cdf: CdfBasedConfig {
                warmup: 0,
                ..CdfBasedConfig::default()
            },
            ..BurstyCdfEstimatesConfig::default()
        })
    }

    #[test]
    fn learns_lag1_large_large_by_hand() {
        // Small intervals of 1 ms and large ones of 1 s. Sequence:
        // 18 small, then L L S L L L S S … The split (CV+1)·mean always
        // lies between 1 ms and 1 s here, so classes are exact.
        let (s, l) = (1_000_000u64, 1_000_000_000u64);
        let mut seq = vec![s; 18];
        seq.extend([l, l, s, l, l, l, s, s]);
        let mut p = policy(0.5);
        for &x in &seq {
            p.on_idle_end(x, false);
            let split = p.cdf.split_ns();
            assert!(split > s as f64 && split < l as f64 || p.cdf.count() < 19);
        }
        // pairs from large: (L,L) (L,S) (L,L) (L,L) (L,S) → 3 of 5
        assert_eq!((p.from_large, p.large_large), (5, 3));
        assert_eq!(p.p_large_large(), Some(0.6));
        // the last interval was small: no prediction
        assert!(!p.predicts_large());
        p.on_idle_end(l, false);
        assert!(p.predicts_large(), "last large and 0.6 ≥ 0.5");
        let mut strict = p.clone();
        strict.config.rho = 0.7;
        assert!(!strict.predicts_large(), "0.6 < 0.7");
    }

    #[test]
    fn eq2_after_a_large_interval_eq1_otherwise() {
        // 90 intervals of 1 ms and 10 of 1 s, large ones in runs of two.
        let (s, l) = (1_000_000u64, 1_000_000_000u64);
        let mut p = policy(0.5);
        for i in 0..100 {
            p.on_idle_end(if i % 20 >= 18 { l } else { s }, false);
        }
        // last was large (i = 99). Pairs from a large interval: (18,19)
        // L→L, (19,20) L→S, … five L→L and four L→S (99 has no successor).
        assert!(p.predicts_large());
        assert_eq!((p.from_large, p.large_large), (9, 5));
        let e = p.cdf.compute();
        // the body is the 1 ms cluster, and the wait ends right after it
        assert!(
            (1_000_000..1_100_000).contains(&e.wait_ns),
            "wait {}",
            e.wait_ns
        );
        let mean_bg = 10_000_000.0;
        // Eq. 2 on the policy's own statistics, computed here by hand:
        // mean = (90·1 + 10·1000)/100 ms = 100.9 ms, population sd =
        // √(E[x²] − mean²) with E[x²] = (90 + 10·10⁶)/100 ms².
        let mean = 100.9e6;
        let sd = ((90.0 + 1e7) / 100.0 - 100.9f64 * 100.9).sqrt() * 1e6;
        let split = (sd / mean + 1.0) * mean;
        assert!((p.cdf.split_ns() - split).abs() < 1.0);
        let want = ((split - e.wait_ns as f64) / mean_bg).floor() as u64;
        assert!((38..=40).contains(&want), "{want}");
        let Decision::Start(st) = decide(&mut p, 10_000_000) else {
            panic!("should start")
        };
        assert_eq!(st.after_ns, e.wait_ns);
        assert_eq!(st.max_requests, want);
        // after a small interval: Eq. 1, whose horizon p90 (~1 ms, inside
        // the body) is no later than the wait: nothing to run
        p.on_idle_end(s, false);
        assert!(!p.predicts_large());
        let e = p.cdf.compute();
        assert!(e.p90_ns <= e.wait_ns as f64);
        assert_eq!(decide(&mut p, 10_000_000), Decision::Quiet);
    }

    #[test]
    fn parameters_are_checked() {
        let b = |s: &str| ENTRY.build_with(Params::parse(s).unwrap().1);
        assert!(b("bursty-cdf-estimates:T=0.5,rho=0.6,angle=30").is_ok());
        assert!(b("bursty-cdf-estimates:rho=1.5").is_err());
        assert!(b("bursty-cdf-estimates:T=0").is_err());
    }
}
