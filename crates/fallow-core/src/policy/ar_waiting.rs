//! `ar-waiting(t, c)`: Practical Scrubbing's *AR+Waiting* (Amvrosiadis,
//! Oprea, Schroeder, DSN 2012, §V-B3): "it waits for a time threshold t and
//! if the system has been idle for that long it starts firing, provided that
//! the auto-regression prediction for the length of this idle interval is
//! larger than some time threshold c". Both conditions must hold; once
//! firing, BG requests go back to back until an FG request arrives.
//!
//! The prediction is made at the start of the interval by the same AR(p)
//! predictor as `autoregressive` ([`IdlePredictor`]: AIC order, sliding
//! history, periodic refit; see `autoregressive.rs`). Without a model yet
//! (too little history) the AR condition cannot hold and the policy is
//! quiet. The paper sweeps t for c at the 20th/40th/60th/80th percentile of
//! the AR predictions it observed.

use super::autoregressive::{IdlePredictor, PredictorConfig};
use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::Result;

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "ar-waiting",
    aliases: &[],
    summary: "wait t, then BG until FG arrives, if the AR(p) prediction of the idle length exceeds c (AR+Waiting)",
    keys: &[
        Param::new("t", ParamKind::Duration, "100ms"),
        Param::new("c", ParamKind::Duration, "100ms"),
        Param::new("history", ParamKind::Count, "2000").note("intervals fitted"),
        Param::new("max-order", ParamKind::Count, "8"),
        Param::new("refit", ParamKind::Count, "100").note("intervals between fits"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: ArWaiting::build,
    knob: Some(Knob::wait("t")),
    size_param: None,
    interval_rule: None,
};

/// Parameters of [`ArWaiting`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArWaitingConfig {
    /// Idle wait before the first BG request, ns.
    pub wait_ns: u64,
    /// Fire only when the predicted idle length exceeds this, ns.
    pub threshold_ns: u64,
    /// The predictor's history and refit schedule.
    pub predictor: PredictorConfig,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Default for ArWaitingConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(ArWaitingConfig::take)
    }
}

impl ArWaitingConfig {
    /// Take `t=`, `c=`, the predictor's keys and `size=`, each not given
    /// from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(ArWaitingConfig {
            wait_ns: p.duration_ns("t")?,
            threshold_ns: p.duration_ns("c")?,
            predictor: PredictorConfig::from_params(p, "ar-waiting")?,
            size_bytes: p.bytes("size")?,
        })
    }
}

/// The AR+Waiting policy.
#[derive(Debug, Clone, Default)]
pub struct ArWaiting {
    /// Its parameters.
    pub config: ArWaitingConfig,
    predictor: IdlePredictor,
}

impl ArWaiting {
    /// A policy with these parameters.
    pub fn new(config: ArWaitingConfig) -> Self {
        ArWaiting {
            config,
            predictor: IdlePredictor::new(config.predictor),
        }
    }

    /// Build from `t=`, `c=`, `history=`, `max-order=`, `refit=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = ArWaitingConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(ArWaiting::new(config)))
    }

    /// The predictor (for inspection).
    pub fn predictor(&self) -> &IdlePredictor {
        &self.predictor
    }
}

impl Policy for ArWaiting {
    fn name(&self) -> &str {
        "ar-waiting"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        match self.predictor.predict_ns() {
            Some(x) if x > self.config.threshold_ns as f64 => Decision::Start(Start::until_fg(
                self.config.wait_ns,
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
    use crate::sim::{simulate, BgService, Prepared, SimConfig};
    use crate::trace::{Op, Trace};

    const MS: u64 = 1_000_000;

    /// One-request busy periods of 10 ms separated by `gaps`.
    fn trace(gaps: &[u64]) -> Prepared {
        let mut arrival = vec![0u64];
        for &g in gaps {
            arrival.push(arrival.last().unwrap() + 10 * MS + g);
        }
        let completion: Vec<u64> = arrival.iter().map(|a| a + 10 * MS).collect();
        let n = arrival.len();
        let t = Trace::from_columns(
            arrival,
            Some(completion),
            vec![0; n],
            vec![4096; n],
            vec![Op::Read; n],
            vec![0; n],
        )
        .unwrap();
        Prepared::new(&t, None, 0).unwrap()
    }

    #[test]
    fn needs_both_the_prediction_and_the_wait() {
        // Gaps alternate 40 ms and 400 ms (60 pairs). With history 20 and
        // max order 2 the model exists from the 14th interval on and predicts
        // ~400 ms after a 40 ms gap and ~40 ms after a 400 ms one. c = 200 ms
        // picks the 400 ms gaps; t = 100 ms then leaves 300 ms of each for
        // BG work: 30 constant 10 ms requests, never a collision. A 40 ms
        // gap is never used (prediction), and t = 450 ms would use nothing.
        let gaps: Vec<u64> = (0..120)
            .map(|k| if k % 2 == 0 { 40 * MS } else { 400 * MS })
            .collect();
        let prep = trace(&gaps);
        let cfg = SimConfig {
            bg_service: BgService::Constant { ns: 10 * MS },
            ..SimConfig::default()
        };
        let run = |t_ms: u64| {
            let mut p = ArWaiting::new(ArWaitingConfig {
                wait_ns: t_ms * MS,
                threshold_ns: 200 * MS,
                predictor: PredictorConfig {
                    history: 20,
                    max_order: 2,
                    refit_every: 1,
                },
                size_bytes: None,
            });
            simulate(&prep, &mut p, &cfg).unwrap()
        };
        let r = run(100);
        // 400 ms gaps are the odd ones, 1, 3, …, 119; with ≥ 14 gaps seen:
        // gaps 15, 17, …, 119 → 53 of them
        assert_eq!(r.fg.collisions, 0);
        assert_eq!(r.bg.completed, 53 * 30);
        assert_eq!(run(450).bg.completed, 0);
    }
}
