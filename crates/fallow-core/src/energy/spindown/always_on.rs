//! `always-on`: never spin down. The reference every power-managed run is
//! normalised to besides the standalone disk (SARD §IV-B2: "compared
//! to an always-on scheme with no energy saving mechanism").

use super::{Entry, IdleCtx, Params, SpinDown};
use crate::error::Result;

/// Registry entry: what `fallow energy --policy` and `fallow spindown` read.
pub const ENTRY: Entry = Entry {
    name: "always-on",
    aliases: &["on", "none"],
    summary: "never spin down: the reference without power management",
    keys: &[],
    reference: true,
    build: AlwaysOn::build,
};

/// The always-on reference.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysOn;

impl AlwaysOn {
    /// Build (no parameters).
    pub fn build(p: Params) -> Result<Box<dyn SpinDown>> {
        p.finish_keys()?;
        Ok(Box::new(AlwaysOn))
    }
}

impl SpinDown for AlwaysOn {
    fn name(&self) -> &str {
        "always-on"
    }

    fn on_idle(&mut self, _ctx: &IdleCtx<'_>) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::PowerModel;

    #[test]
    fn never_spins_down() {
        let power = PowerModel::default();
        let mut p = AlwaysOn;
        for now_ns in [0, 1, u64::MAX] {
            assert_eq!(
                p.on_idle(&IdleCtx {
                    now_ns,
                    power: &power
                }),
                None
            );
        }
    }
}
