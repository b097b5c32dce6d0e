//! `aggressive`: start BG work the moment the device falls idle and run it
//! back to back until an FG request arrives — a priority queue with no
//! preemption (Eggert & Touch §2.1: a zero-length preemption interval;
//! Busy Bee's "aggressive" mode).

use super::{Ctx, Decision, Entry, Param, ParamKind, Params, Policy, Start};
use crate::error::Result;

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "aggressive",
    aliases: &[],
    summary: "start BG work the moment the device is idle; stop when FG arrives",
    keys: &[
        Param::new("size", ParamKind::Bytes, "").note("default: the run's BG size").example("64KiB"),
    ],
    clairvoyant: false,
    build: Aggressive::build,
    knob: None,
    size_param: None,
    interval_rule: None,
};

/// The aggressive policy.
#[derive(Debug, Clone, Default)]
pub struct Aggressive {
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Aggressive {
    /// Build from `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let size_bytes = p.bytes("size")?;
        p.finish_keys()?;
        Ok(Box::new(Aggressive { size_bytes }))
    }
}

impl Policy for Aggressive {
    fn name(&self) -> &str {
        "aggressive"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        Decision::Start(Start::until_fg(
            0,
            self.size_bytes.unwrap_or(ctx.bg_size_bytes),
        ))
    }
}
