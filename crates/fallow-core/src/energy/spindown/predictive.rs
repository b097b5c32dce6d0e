//! `predictive`: spin down early in idle intervals predicted to be long,
//! from the burstiness of idle intervals (Mi et al., *Efficient
//! Management of Idleness in Storage Systems*, §5). Mi et al. name
//! spin-down as the extreme long background job — "spinning them back up
//! and ready for work is orders of magnitude larger than serving a single
//! request" — one that must only run in intervals known to be long.
//!
//! As in §5, idle intervals are small or large, split at `(CV + 1) ·
//! mean` of the intervals seen so far (§3.2), and the policy measures
//! online, for every lag k = 1..9, how often the interval k places after a
//! large one is large too ("pairs do not include consecutive observations
//! only, but also those that are separated by up to 9 observations"). The
//! next interval is predicted large when, for some lag k, the interval k
//! places back was large and P_k(large → large) is at least ρ. Then the
//! disk spins down after the short `wait`; otherwise the `else` timeout
//! applies (`never`: spin down only on a prediction, the pure §5 use of
//! the long background job).
//!
//! Why every lag: on the HP workstation trace a large interval is almost
//! never followed directly by another (P_1 = 0.03: the disk wakes for a
//! burst of a few requests), but the third interval after it is large with
//! probability 0.66 — the lag-1 rule of `bursty-cdf-estimates` would never
//! fire there.
//!
//! Choices the paper leaves open (as in `bursty-cdf-estimates`): each
//! interval is classified once, when it ends, against the split known
//! then; pairs are counted after `warmup` intervals. Until the warm-up is
//! over the `else` timeout applies.

use super::{Entry, IdleCtx, Param, ParamKind, Params, SpinDown, duration_or_never};
use crate::error::{Error, Result};

/// Registry entry: what `fallow energy --policy` and `fallow spindown` read.
pub const ENTRY: Entry = Entry {
    name: "predictive",
    aliases: &[],
    summary: "spin down early when an idle interval k ≤ 9 places back was large ((CV+1)·mean) and P_k(large→large) ≥ rho, else fall back to a timeout (Mi et al. §5)",
    keys: &[
        Param::new("rho", ParamKind::Number("PROBABILITY"), "0.5"),
        Param::new("wait", ParamKind::Duration, "1s").note("timeout when large is predicted"),
        Param::new("else", ParamKind::Other("DURATION|never"), "10s").note("timeout otherwise").example("never"),
        Param::new("warmup", ParamKind::Count, "32").note("intervals"),
        // every lag Mi et al. count pairs at (MAX_LAG)
        Param::new("lags", ParamKind::Count, "9").note("1..9"),
    ],
    reference: false,
    build: Predictive::build,
};

/// Parameters of [`Predictive`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictiveConfig {
    /// Least measured P(large → large) for predicting large, in [0, 1].
    pub rho: f64,
    /// Timeout when a large interval is predicted, ns.
    pub wait_ns: u64,
    /// Timeout otherwise, ns (`None`: stay on).
    pub else_ns: Option<u64>,
    /// Intervals observed before predictions start.
    pub warmup: u64,
    /// Largest lag whose pairs predict (1..=9).
    pub lags: usize,
}

impl Default for PredictiveConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(PredictiveConfig::take)
    }
}

impl PredictiveConfig {
    /// Take `rho=`, `wait=`, `else=`, `warmup=` and `lags=`, each not given
    /// from the key table, and check them.
    fn take(p: &mut Params) -> Result<Self> {
        let rho = p.number("rho")?;
        if !(0.0..=1.0).contains(&rho) {
            return Err(Error::invalid(
                "predictive rho",
                format!("must be a probability in [0, 1], got {rho}"),
            ));
        }
        let wait_ns = p.duration_ns("wait")?;
        let else_ns = duration_or_never(p, "else")?;
        let warmup = p.number("warmup")?;
        if warmup < 0.0 || warmup.fract() != 0.0 {
            return Err(Error::invalid(
                "predictive warmup",
                format!("must be a whole number of intervals, got {warmup}"),
            ));
        }
        let lags = p.number("lags")?;
        if !(1.0..=MAX_LAG as f64).contains(&lags) || lags.fract() != 0.0 {
            return Err(Error::invalid(
                "predictive lags",
                format!("must be a whole number from 1 to {MAX_LAG}, got {lags}"),
            ));
        }
        Ok(PredictiveConfig {
            rho,
            wait_ns,
            else_ns,
            warmup: warmup as u64,
            lags: lags as usize,
        })
    }
}

/// Most lags Mi et al. count pairs at.
pub const MAX_LAG: usize = 9;

/// The predictive policy.
#[derive(Debug, Clone)]
pub struct Predictive {
    /// Its parameters.
    pub config: PredictiveConfig,
    /// Running count, mean and sum of squared deviations (Welford), ns.
    n: u64,
    mean_ns: f64,
    m2: f64,
    /// Classes of the last `MAX_LAG` intervals after warm-up, newest first.
    recent: [Option<bool>; MAX_LAG],
    /// Per lag (index k−1): pairs starting with a large interval, and
    /// those of them ending with one.
    from_large: [u64; MAX_LAG],
    large_large: [u64; MAX_LAG],
}

impl Predictive {
    /// A policy with these parameters and no history.
    pub fn new(config: PredictiveConfig) -> Self {
        Predictive {
            config,
            n: 0,
            mean_ns: 0.0,
            m2: 0.0,
            recent: [None; MAX_LAG],
            from_large: [0; MAX_LAG],
            large_large: [0; MAX_LAG],
        }
    }

    /// Build from `rho=`, `wait=`, `else=`, `warmup=` and `lags=`.
    pub fn build(mut p: Params) -> Result<Box<dyn SpinDown>> {
        let config = PredictiveConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(Predictive::new(config)))
    }

    /// The small/large split `(CV + 1) · mean`, ns (population CV).
    pub fn split_ns(&self) -> f64 {
        if self.n == 0 || self.mean_ns <= 0.0 {
            return f64::INFINITY;
        }
        let sd = (self.m2 / self.n as f64).sqrt();
        sd + self.mean_ns // (sd/mean + 1) · mean
    }

    /// Measured P(large → large) at lag `k` (1..=9; `None` before any
    /// large interval had a successor k places later).
    pub fn p_large_large(&self, k: usize) -> Option<f64> {
        let i = k.checked_sub(1).filter(|&i| i < MAX_LAG)?;
        (self.from_large[i] > 0).then(|| self.large_large[i] as f64 / self.from_large[i] as f64)
    }

    /// True when the next interval is predicted large.
    pub fn predicts_large(&self) -> bool {
        (1..=self.config.lags.min(MAX_LAG)).any(|k| {
            self.recent[k - 1] == Some(true)
                && self.p_large_large(k).is_some_and(|p| p >= self.config.rho)
        })
    }
}

impl SpinDown for Predictive {
    fn name(&self) -> &str {
        "predictive"
    }

    fn on_idle(&mut self, _ctx: &IdleCtx<'_>) -> Option<u64> {
        if self.predicts_large() {
            Some(self.config.wait_ns)
        } else {
            self.config.else_ns
        }
    }

    fn on_idle_end(&mut self, idle_ns: u64, _spun_down: bool) {
        let x = idle_ns as f64;
        self.n += 1;
        let d = x - self.mean_ns;
        self.mean_ns += d / self.n as f64;
        self.m2 += d * (x - self.mean_ns);
        if self.n <= self.config.warmup {
            return;
        }
        let large = x > self.split_ns();
        for (k, was) in self.recent.iter().enumerate() {
            if *was == Some(true) {
                self.from_large[k] += 1;
                self.large_large[k] += u64::from(large);
            }
        }
        self.recent.rotate_right(1);
        self.recent[0] = Some(large);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::PowerModel;

    const S: u64 = 1_000_000_000;

    #[test]
    fn predicts_large_after_large_when_large_ones_cluster() {
        let power = PowerModel::default();
        let ctx = IdleCtx {
            now_ns: 0,
            power: &power,
        };
        let mut p = Predictive::new(PredictiveConfig {
            warmup: 4,
            lags: 1,
            ..PredictiveConfig::default()
        });
        // warm-up: the fallback timeout
        for _ in 0..4 {
            assert_eq!(p.on_idle(&ctx), Some(10 * S));
            p.on_idle_end(S, false);
        }
        // small intervals of 1 s and clusters of three 1000 s ones: after
        // warm-up the split sits well below 1000 s
        let mut predicted = Vec::new();
        for round in 0..6 {
            for len in [1000 * S, 1000 * S, 1000 * S, S, S, S, S, S] {
                predicted.push((round, p.on_idle(&ctx) == Some(S), len));
                p.on_idle_end(len, true);
            }
        }
        // (L,L) pairs: 2 of every 3 pairs from a large interval -> 2/3 ≥ 0.5
        let pll = p.p_large_large(1).unwrap();
        assert!((pll - 2.0 / 3.0).abs() < 0.01, "{pll}");
        // in the last round: the 2nd and 3rd large interval and the first
        // small one after the cluster are predicted large, nothing else
        let last: Vec<bool> = predicted[predicted.len() - 8..]
            .iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(last, [false, true, true, true, false, false, false, false]);
    }

    /// A large interval every third one (L, s, s, L, s, s, …): P_1 = P_2 =
    /// 0, P_3 = 1. Only a policy that looks 3 back predicts, and it
    /// predicts exactly the large ones.
    #[test]
    fn a_large_interval_three_places_back_predicts_the_next() {
        let power = PowerModel::default();
        let ctx = IdleCtx {
            now_ns: 0,
            power: &power,
        };
        for (lags, expect) in [(1, false), (2, false), (3, true), (9, true)] {
            let mut p = Predictive::new(PredictiveConfig {
                warmup: 6,
                lags,
                ..PredictiveConfig::default()
            });
            let mut hits = Vec::new();
            for i in 0..60 {
                let len = if i % 3 == 0 { 1000 * S } else { S };
                if i >= 30 {
                    hits.push((p.on_idle(&ctx) == Some(S), len == 1000 * S));
                }
                p.on_idle_end(len, true);
            }
            for (predicted, large) in hits {
                assert_eq!(predicted, expect && large, "lags {lags}");
            }
        }
    }

    #[test]
    fn without_clustering_it_is_the_fallback_timeout() {
        let power = PowerModel::default();
        let ctx = IdleCtx {
            now_ns: 0,
            power: &power,
        };
        let mut p = Predictive::new(PredictiveConfig {
            warmup: 2,
            else_ns: None,
            lags: 9,
            ..PredictiveConfig::default()
        });
        // isolated large intervals, one every 10: P_k(L→L) = 0 at every lag ≤ 9
        for _ in 0..20 {
            for len in [1000 * S, S, S, S, S, S, S, S, S, S] {
                assert_eq!(p.on_idle(&ctx), None);
                p.on_idle_end(len, false);
            }
        }
        assert_eq!(p.p_large_large(1), Some(0.0));
    }

    #[test]
    fn parameters() {
        use crate::energy::spindown::build;
        assert!(build("predictive:rho=1.5").is_err());
        assert!(build("predictive:warmup=2.5").is_err());
        assert!(build("predictive:lags=10").is_err());
        assert!(build("predictive:lags=0").is_err());
        let power = PowerModel::default();
        let ctx = IdleCtx {
            now_ns: 0,
            power: &power,
        };
        assert_eq!(build("predictive:else=never").unwrap().on_idle(&ctx), None);
        assert_eq!(
            build("predictive:else=3s").unwrap().on_idle(&ctx),
            Some(3 * S)
        );
    }
}
