//! Shared by the policies' unit tests: ask a policy for its decision when
//! the device falls idle, without an engine around it.

use super::{Ctx, Decision, Policy};
use crate::service::BgService;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// `p.on_idle` at `now_ns` (the idle interval starts then, and the last FG
/// request arrived then), with BG service `svc`, default size `size_bytes`,
/// a fixed seed and no view of the future.
pub(crate) fn on_idle_at(
    p: &mut dyn Policy,
    now_ns: u64,
    svc: BgService,
    size_bytes: u64,
) -> Decision {
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let mut ctx = Ctx {
        now_ns,
        idle_start_ns: now_ns,
        last_fg_arrival_ns: now_ns,
        rng: &mut rng,
        bg_service: &svc,
        bg_size_bytes: size_bytes,
        future_idle_ns: None,
    };
    p.on_idle(&mut ctx)
}
