//! `autoregressive(c)`: Practical Scrubbing's *AR* policy (Amvrosiadis,
//! Oprea, Schroeder, DSN 2012, §V-B1, Eq. 1). At the start of every idle
//! interval, predict its length X_t from the previous ones with an AR(p)
//! model, X_t = μ + Σ a_i (X_{t−i} − μ) + ε_t, the order p chosen by AIC;
//! if the prediction exceeds the threshold `c`, start BG work at once and
//! keep it up until an FG request arrives ("once it starts issuing scrub
//! requests it continues until a foreground request arrives").
//!
//! The paper does not say how much history the model sees or how often it
//! is refitted. We fit by Yule–Walker ([`ArFit::by_aic`], orders
//! 0..=`max-order`) over a sliding window of the last `history` idle
//! intervals and refit every `refit` intervals: fitting per interval would
//! cost O(history·p) at every decision for a model that barely moves. The
//! series is the idle lengths as the device saw them (after any shift a
//! collision caused), learned from [`Policy::on_idle_end`] only. Until the
//! first fit (it needs 2·max-order + 10 intervals) there is no prediction
//! and the policy stays quiet. [`IdlePredictor`] is shared with
//! `ar-waiting`.

use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};
use crate::stats::ArFit;

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "autoregressive",
    aliases: &[],
    summary: "BG from the start of an idle interval until FG arrives if its AR(p) predicted length exceeds c (AR)",
    keys: &[
        Param::new("c", ParamKind::Duration, "100ms"),
        Param::new("history", ParamKind::Count, "2000").note("intervals fitted"),
        Param::new("max-order", ParamKind::Count, "8"),
        Param::new("refit", ParamKind::Count, "100").note("intervals between fits"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: Autoregressive::build,
    knob: Some(Knob::wait("c")),
    size_param: None,
    interval_rule: None,
};

/// Parameters of the AR(p) idle-length predictor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictorConfig {
    /// Idle intervals the model is fitted on (the most recent ones).
    pub history: usize,
    /// Highest AR order tried by AIC.
    pub max_order: usize,
    /// Refit after this many new idle intervals.
    pub refit_every: usize,
}

impl Default for PredictorConfig {
    /// The defaults of autoregressive's key table.
    fn default() -> Self {
        ENTRY.read_defaults(|p| PredictorConfig::from_params(p, ENTRY.name))
    }
}

impl PredictorConfig {
    /// Take `history=`, `max-order=` and `refit=` from `p`, each not given
    /// from its key table.
    pub(crate) fn from_params(p: &mut Params, policy: &str) -> Result<Self> {
        let mut whole = |key: &str, min: f64| -> Result<usize> {
            let v = p.number(key)?;
            if v < min || v.fract() != 0.0 || v > 1e9 {
                return Err(Error::invalid(
                    format!("{policy}:{key}"),
                    format!("must be a whole number ≥ {min}"),
                ));
            }
            Ok(v as usize)
        };
        let c = PredictorConfig {
            history: whole("history", 1.0)?,
            max_order: whole("max-order", 0.0)?,
            refit_every: whole("refit", 1.0)?,
        };
        if c.history < 2 * c.max_order + 10 {
            return Err(Error::invalid(
                format!("{policy}:history"),
                format!(
                    "must be at least 2·max-order + 10 = {} intervals",
                    2 * c.max_order + 10
                ),
            ));
        }
        Ok(c)
    }
}

/// Predicts the length of the next idle interval from the previous ones.
#[derive(Debug, Clone, Default)]
pub struct IdlePredictor {
    config: PredictorConfig,
    /// Past idle lengths, seconds, oldest first; trimmed to `history`
    /// now and then (amortised O(1) per interval).
    past_s: Vec<f64>,
    since_fit: usize,
    fit: Option<ArFit>,
}

impl IdlePredictor {
    /// An empty predictor.
    pub fn new(config: PredictorConfig) -> Self {
        IdlePredictor {
            config,
            ..IdlePredictor::default()
        }
    }

    /// An idle interval of `idle_ns` ended.
    pub fn observe(&mut self, idle_ns: u64) {
        self.past_s.push(idle_ns as f64 / 1e9);
        if self.past_s.len() >= 2 * self.config.history {
            self.past_s.drain(..self.past_s.len() - self.config.history);
        }
        self.since_fit += 1;
        let n = self.past_s.len().min(self.config.history);
        let enough = n >= 2 * self.config.max_order + 10;
        if enough && (self.fit.is_none() || self.since_fit >= self.config.refit_every) {
            let window = &self.past_s[self.past_s.len() - n..];
            // a constant window cannot be fitted: keep the last model
            if let Some(f) = ArFit::by_aic(window, self.config.max_order) {
                self.fit = Some(f);
            }
            self.since_fit = 0;
        }
    }

    /// Predicted length of the idle interval starting now, ns (`None`
    /// before the first fit).
    pub fn predict_ns(&self) -> Option<f64> {
        self.fit
            .as_ref()
            .map(|f| f.predict(&self.past_s).max(0.0) * 1e9)
    }

    /// The model in use.
    pub fn fit(&self) -> Option<&ArFit> {
        self.fit.as_ref()
    }
}

/// Parameters of [`Autoregressive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoregressiveConfig {
    /// Fire when the predicted idle length exceeds this, ns.
    pub threshold_ns: u64,
    /// The predictor's history and refit schedule.
    pub predictor: PredictorConfig,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Default for AutoregressiveConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(AutoregressiveConfig::take)
    }
}

impl AutoregressiveConfig {
    /// Take `c=`, the predictor's keys and `size=`, each not given from the
    /// key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(AutoregressiveConfig {
            threshold_ns: p.duration_ns("c")?,
            predictor: PredictorConfig::from_params(p, "autoregressive")?,
            size_bytes: p.bytes("size")?,
        })
    }
}

/// The AR policy.
#[derive(Debug, Clone, Default)]
pub struct Autoregressive {
    /// Its parameters.
    pub config: AutoregressiveConfig,
    predictor: IdlePredictor,
}

impl Autoregressive {
    /// A policy with these parameters.
    pub fn new(config: AutoregressiveConfig) -> Self {
        Autoregressive {
            config,
            predictor: IdlePredictor::new(config.predictor),
        }
    }

    /// Build from `c=`, `history=`, `max-order=`, `refit=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = AutoregressiveConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(Autoregressive::new(config)))
    }

    /// The predictor (for inspection).
    pub fn predictor(&self) -> &IdlePredictor {
        &self.predictor
    }
}

impl Policy for Autoregressive {
    fn name(&self) -> &str {
        "autoregressive"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        match self.predictor.predict_ns() {
            Some(x) if x > self.config.threshold_ns as f64 => Decision::Start(Start::until_fg(
                0,
                self.config.size_bytes.unwrap_or(ctx.bg_size_bytes),
            )),
            _ => Decision::Quiet,
        }
    }

    fn on_idle_end(&mut self, idle_ns: u64, _collided: bool) {
        self.predictor.observe(idle_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;
    use rand::SeedableRng;

    pub(crate) fn decide(p: &mut dyn Policy) -> Decision {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let svc = BgService::Constant { ns: 1_000_000 };
        let mut ctx = Ctx {
            now_ns: 0,
            idle_start_ns: 0,
            last_fg_arrival_ns: 0,
            rng: &mut rng,
            bg_service: &svc,
            bg_size_bytes: 4096,
            future_idle_ns: None,
        };
        p.on_idle(&mut ctx)
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn alternating_intervals_are_predicted() {
        // Idle lengths alternate 10 ms, 1000 ms: an AR(1) with a = −1 around
        // μ = 505 ms predicts the next exactly. After a long one, short
        // (505 − 495 = 10 ms); after a short one, long (1000 ms). With
        // c = 500 ms the policy fires exactly before the long ones.
        let mut p = Autoregressive::new(AutoregressiveConfig {
            threshold_ns: 500 * MS,
            predictor: PredictorConfig {
                history: 200,
                max_order: 3,
                refit_every: 10,
            },
            size_bytes: None,
        });
        let mut fired = vec![];
        for k in 0..100u64 {
            let next = if k % 2 == 0 { 10 * MS } else { 1000 * MS };
            fired.push(matches!(decide(&mut p), Decision::Start(_)));
            p.on_idle_end(next, false);
        }
        // before 2·3 + 10 = 16 intervals: no model, quiet
        assert!(fired[..16].iter().all(|&f| !f));
        for (k, &f) in fired.iter().enumerate().skip(16) {
            assert_eq!(f, k % 2 == 1, "interval {k}");
        }
        let x = p.predictor().predict_ns().unwrap();
        // the last observed was 1000 ms (k = 99): the next is predicted short
        // (Yule–Walker's biased autocovariances shrink |a| slightly below 1)
        assert!((x - 10.0 * MS as f64).abs() < 30.0 * MS as f64, "{x}");
    }

    #[test]
    fn constant_history_has_no_model_then_fires_with_its_size() {
        let mut p = Autoregressive::new(AutoregressiveConfig {
            threshold_ns: 400 * MS,
            predictor: PredictorConfig {
                history: 20,
                max_order: 2,
                refit_every: 5,
            },
            size_bytes: Some(1 << 20),
        });
        // 0.5 s is exact in binary: the variance is exactly 0, no AR fit
        for _ in 0..30 {
            p.on_idle_end(500 * MS, false);
        }
        assert!(p.predictor().fit().is_none());
        assert_eq!(decide(&mut p), Decision::Quiet);
        // alternate 0.25 s / 0.75 s: after a 0.25 s interval a 0.75 s one is
        // predicted (above c = 0.4 s): fire at once, until FG, at 1 MiB
        for k in 0..40 {
            p.on_idle_end(if k % 2 == 0 { 750 * MS } else { 250 * MS }, false);
        }
        match decide(&mut p) {
            Decision::Start(s) => {
                assert_eq!((s.after_ns, s.size_bytes), (0, 1 << 20));
                assert_eq!(s.max_requests, u64::MAX);
            }
            Decision::Quiet => panic!("{:?}", p.predictor().predict_ns()),
        }
        p.on_idle_end(750 * MS, false);
        assert_eq!(decide(&mut p), Decision::Quiet);
    }

    #[test]
    fn history_is_bounded() {
        let mut pr = IdlePredictor::new(PredictorConfig {
            history: 50,
            max_order: 2,
            refit_every: 1,
        });
        for k in 0..1_000u64 {
            pr.observe((k % 7 + 1) * MS);
        }
        assert!(pr.past_s.len() < 100);
        assert!(crate::policy::build("autoregressive:c=1s,history=10,max-order=5").is_err());
        assert!(crate::policy::build("autoregressive:c=1s,history=500").is_ok());
    }
}
