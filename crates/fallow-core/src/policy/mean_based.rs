//! `mean-based`: idle-wait for the mean service time of one BG request, then
//! run BG requests back to back until an FG request arrives.
//!
//! This is the baseline of Mi et al. §4 ("Mean-Based … defines the idle wait
//! as the mean service time of background jobs. After the idle wait elapses,
//! the system serves background jobs until a foreground job arrives"), which
//! they take from Eggert & Touch (§3.1 of Mi et al. discusses why one fixed
//! wait suits neither low- nor high-CV idle times). The mean is that of the
//! BG service model at the request size the policy uses, so a size-based
//! device model waits longer for larger requests.

use super::{Ctx, Decision, Entry, Param, ParamKind, Params, Policy, Start};
use crate::error::Result;

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "mean-based",
    aliases: &[],
    summary: "wait the mean BG service time, then BG until FG arrives (Mi et al. baseline)",
    keys: &[
        Param::new("size", ParamKind::Bytes, "").note("default: the run's BG size").example("64KiB"),
    ],
    clairvoyant: false,
    build: MeanBased::build,
    knob: None,
    size_param: None,
    interval_rule: None,
};

/// The mean-based policy.
#[derive(Debug, Clone, Default)]
pub struct MeanBased {
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl MeanBased {
    /// Build from `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let size_bytes = p.bytes("size")?;
        p.finish_keys()?;
        Ok(Box::new(MeanBased { size_bytes }))
    }
}

impl Policy for MeanBased {
    fn name(&self) -> &str {
        "mean-based"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        let size = self.size_bytes.unwrap_or(ctx.bg_size_bytes);
        let wait_ns = ctx.bg_service.mean_ns(size).round() as u64;
        Decision::Start(Start::until_fg(wait_ns, size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;

    fn decide(p: &mut MeanBased, service: BgService, size: u64) -> Decision {
        crate::policy::testing::on_idle_at(p, 1_000, service, size)
    }

    #[test]
    fn waits_the_mean_bg_service_time() {
        let mut p = MeanBased::default();
        let d = decide(&mut p, BgService::Exponential { mean_ns: 7_000_000 }, 4096);
        assert_eq!(d, Decision::Start(Start::until_fg(7_000_000, 4096)));
    }

    #[test]
    fn the_mean_is_that_of_the_size_used() {
        // size-based: 8 ms flat to 64 KiB, then 100 MB/s: 1 MiB takes
        // 8 ms + (1048576 − 65536) B / 1e8 B/s = 8 ms + 9.8304 ms.
        let s: BgService = "size:base=8ms,knee=64KiB,rate=100MB".parse().unwrap();
        let mut p = MeanBased {
            size_bytes: Some(1 << 20),
        };
        let d = decide(&mut p, s, 4096);
        assert_eq!(d, Decision::Start(Start::until_fg(17_830_400, 1 << 20)));
        // the run's size when the policy has none
        let mut p = MeanBased::default();
        assert_eq!(
            decide(&mut p, s, 4096),
            Decision::Start(Start::until_fg(8_000_000, 4096))
        );
    }

    #[test]
    fn builds_and_rejects_unknown_parameters() {
        let b = |s: &str| ENTRY.build_with(Params::parse(s).unwrap().1);
        assert!(b("mean-based:size=1MiB").is_ok());
        assert!(b("mean-based:t=1s").is_err());
    }
}
