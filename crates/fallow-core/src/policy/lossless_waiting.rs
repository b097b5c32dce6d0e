//! `lossless-waiting(t)` — CLAIRVOYANT reference, not deployable: the idle
//! intervals `fixed-wait(t)` (Waiting) uses, used from their very start.
//!
//! Practical Scrubbing §V-B (Fig. 14): "a hypothetical policy, Lossless
//! Waiting, which utilizes the same intervals as Waiting, while assuming
//! that we can magically also make use of the time that passes while
//! waiting". Waiting fires in an interval exactly when it is longer than t
//! (the simulator starts BG work at t only if the device is still idle);
//! this policy knows the interval's length (`Ctx::future_idle_ns`) and in
//! those intervals starts BG work at once and runs it until the FG arrival,
//! which — as for Waiting — finds a BG request in service. So it collides
//! in the same intervals as Waiting and uses t more idle time in each: an
//! upper bound on what Waiting's choice of intervals can give.

use super::{Ctx, Decision, Entry, IntervalRule, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::Result;

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "lossless-waiting",
    aliases: &[],
    summary: "CLAIRVOYANT upper bound: the intervals fixed-wait(t) uses, used from their start until FG arrives",
    keys: &[
        // fixed-wait's default: the bound of the setting it bounds
        Param::new("t", ParamKind::Duration, "100ms"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: true,
    build: LosslessWaiting::build,
    knob: Some(Knob::wait("t")),
    size_param: None,
    interval_rule: Some(IntervalRule::WholeIfLonger),
};

/// Parameters of [`LosslessWaiting`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LosslessWaitingConfig {
    /// Waiting's threshold: intervals longer than this are used, ns.
    pub wait_ns: u64,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Default for LosslessWaitingConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(LosslessWaitingConfig::take)
    }
}

impl LosslessWaitingConfig {
    /// Take `t=` and `size=`, each not given from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(LosslessWaitingConfig {
            wait_ns: p.duration_ns("t")?,
            size_bytes: p.bytes("size")?,
        })
    }
}

/// The lossless-waiting policy (clairvoyant).
#[derive(Debug, Clone, Default)]
pub struct LosslessWaiting {
    /// Its parameters.
    pub config: LosslessWaitingConfig,
}

impl LosslessWaiting {
    /// Build from `t=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = LosslessWaitingConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(LosslessWaiting { config }))
    }
}

impl Policy for LosslessWaiting {
    fn name(&self) -> &str {
        "lossless-waiting"
    }

    fn clairvoyant(&self) -> bool {
        true
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        match ctx.future_idle_ns {
            Some(len) if len > self.config.wait_ns => Decision::Start(Start::until_fg(
                0,
                self.config.size_bytes.unwrap_or(ctx.bg_size_bytes),
            )),
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

    fn decide(t_ns: u64, future: Option<u64>) -> Decision {
        let mut p = LosslessWaiting {
            config: LosslessWaitingConfig {
                wait_ns: t_ns,
                size_bytes: None,
            },
        };
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let svc = BgService::Constant { ns: 1_000 };
        let mut ctx = Ctx {
            now_ns: 0,
            idle_start_ns: 0,
            last_fg_arrival_ns: 0,
            rng: &mut rng,
            bg_service: &svc,
            bg_size_bytes: 4096,
            future_idle_ns: future,
        };
        p.on_idle(&mut ctx)
    }

    #[test]
    fn same_intervals_as_waiting_used_from_the_start() {
        // Waiting(10 ms) fires in a 10 ms + 1 ns interval, not in a 10 ms one
        let t = 10_000_000;
        assert_eq!(
            decide(t, Some(t + 1)),
            Decision::Start(Start::until_fg(0, 4096))
        );
        assert_eq!(decide(t, Some(t)), Decision::Quiet);
        assert_eq!(decide(t, Some(1)), Decision::Quiet);
        // never shown the future: nothing (it is clairvoyant or nothing)
        assert_eq!(decide(t, None), Decision::Quiet);
    }

    #[test]
    fn clairvoyant_and_built_from_parameters() {
        let b = |s: &str| ENTRY.build_with(Params::parse(s).unwrap().1);
        assert!(b("lossless-waiting:t=5ms").unwrap().clairvoyant());
        assert!(b("lossless-waiting:x=5").is_err());
    }
}
