//! `fixed-wait(t)`: stay idle for `t` after the last FG completion; if no FG
//! request arrived by then, run BG requests back to back until one does.
//! This is Practical Scrubbing's *Waiting* policy (§V-B2: "no requests are
//! issued unless the system has remained idle for some time t … requests
//! stop being issued only upon the arrival of a foreground request"),
//! Busy Bee's conservative mode and Eggert & Touch's preemption interval
//! started at FG completion with one interval per burst.

use super::{Ctx, Decision, Entry, IntervalRule, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::Result;

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "fixed-wait",
    aliases: &["waiting", "conservative"],
    summary: "wait t after the last FG completion, then BG back to back until FG arrives (Waiting, conservative)",
    keys: &[
        Param::new("t", ParamKind::Duration, "100ms"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: FixedWait::build,
    knob: Some(Knob::wait("t")),
    size_param: None,
    interval_rule: Some(IntervalRule::WaitThenRun),
};

/// Parameters of [`FixedWait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWaitConfig {
    /// Idle wait before BG work starts, ns.
    pub wait_ns: u64,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Default for FixedWaitConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(FixedWaitConfig::take)
    }
}

impl FixedWaitConfig {
    /// Take `t=` and `size=`, each not given from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(FixedWaitConfig {
            wait_ns: p.duration_ns("t")?,
            size_bytes: p.bytes("size")?,
        })
    }
}

/// The fixed-wait policy.
#[derive(Debug, Clone, Default)]
pub struct FixedWait {
    /// Its parameters.
    pub config: FixedWaitConfig,
}

impl FixedWait {
    /// Build from `t=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = FixedWaitConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(FixedWait { config }))
    }
}

impl Policy for FixedWait {
    fn name(&self) -> &str {
        "fixed-wait"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        Decision::Start(Start::until_fg(
            self.config.wait_ns,
            self.config.size_bytes.unwrap_or(ctx.bg_size_bytes),
        ))
    }
}
