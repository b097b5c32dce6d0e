//! Requests logged at their completion with a latency (bcc `biosnoop`,
//! fio latency logs): the arrival is `completion − latency`, which can fall
//! before the log's time zero (the first line's request was issued before
//! the tool printed anything). Such records are kept until the end of the
//! input, then shifted so that no time is negative and handed to the
//! builder in arrival order: the log's line order is completion order, not
//! a disorder worth reporting.

use super::RawRequest;
use super::ReadContext;
use crate::error::{Location, Result};

/// One request as such a log gives it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Logged {
    /// Where it was, for messages.
    pub loc: Location,
    /// Completion time on the log's clock, ns.
    pub completion_ns: u64,
    /// Completion minus arrival, ns.
    pub latency_ns: u64,
    /// The request, without its times.
    pub req: RawRequest,
}

/// Push every logged request, in arrival order; times are shifted by the
/// largest amount an arrival reaches before zero (the report's `origin_ns`
/// then counts from that earlier instant).
pub(crate) fn push_all(ctx: &mut ReadContext<'_>, mut logged: Vec<Logged>) -> Result<()> {
    let shift = logged
        .iter()
        .map(|l| l.latency_ns.saturating_sub(l.completion_ns))
        .max()
        .unwrap_or(0);
    // Stable, so requests arriving at one instant keep their line order.
    logged.sort_by_key(|l| (l.completion_ns + shift).saturating_sub(l.latency_ns));
    for l in logged {
        let Some(completion_ns) = l.completion_ns.checked_add(shift) else {
            ctx.bad(
                l.loc,
                "time",
                format!(
                    "{} ns shifted by {shift} ns (the longest latency before time zero) overflows",
                    l.completion_ns
                ),
            )?;
            continue;
        };
        let req = RawRequest {
            arrival_ns: completion_ns - l.latency_ns,
            completion_ns: Some(completion_ns),
            ..l.req
        };
        ctx.push(l.loc, req)?;
    }
    Ok(())
}
