//! Pareto fronts: what a policy trades over its whole knob range, at one
//! request size. The knob is swept over the coarse 1-2-5 values of its
//! [`ladder`](super::ladder) (19 values for a wait from 100 µs to 100 s),
//! each value simulated once; the front is the subset of points that no
//! other point of the same policy beats on both BG throughput (more is
//! better) and mean added FG delay (less is better). A policy without a
//! knob gives a single point. Clairvoyant entries (oracle,
//! lossless-waiting) are swept the same way and serve as the ceiling.

use super::Search;
use crate::error::{Error, Result};
use crate::policy;
use crate::sim::{BgService, Prepared, SimConfig};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// One simulated setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParetoPoint {
    /// The full spec simulated (`fixed-wait:t=200ms`).
    pub spec: String,
    /// The knob's value as written (`None`: the policy has no knob).
    pub knob: Option<String>,
    /// BG bytes per second of the trace.
    pub bg_throughput_bytes_per_s: f64,
    /// Mean delay added to each FG request, s.
    pub fg_mean_added_delay_s: f64,
    /// Relative slowdown of the mean FG response time.
    pub fg_slowdown: f64,
    /// Fraction of FG requests delayed.
    pub fg_collision_rate: f64,
    /// Share of idle time spent on BG work.
    pub idle_used_fraction: f64,
}

impl ParetoPoint {
    /// True if `self` is at least as good as `other` on both throughput and
    /// added delay, and strictly better on one.
    pub fn dominates(&self, other: &ParetoPoint) -> bool {
        let (t, u) = (
            self.bg_throughput_bytes_per_s,
            other.bg_throughput_bytes_per_s,
        );
        let (d, e) = (self.fg_mean_added_delay_s, other.fg_mean_added_delay_s);
        t >= u && d <= e && (t > u || d < e)
    }
}

/// One policy's sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Front {
    /// Registry name.
    pub policy: String,
    /// A clairvoyant reference (an upper bound, not deployable).
    pub clairvoyant: bool,
    /// Name of the knob swept (`None`: a single point).
    pub knob: Option<&'static str>,
    /// BG request size, bytes.
    pub request_size_bytes: u64,
    /// Every point, most conservative setting first.
    pub points: Vec<ParetoPoint>,
    /// The non-dominated points, least added delay first (equal points kept once).
    pub front: Vec<ParetoPoint>,
}

/// The non-dominated subset of `points` (max throughput, min added delay),
/// least added delay first; of several equal points one is kept.
pub fn front_of(points: &[ParetoPoint]) -> Vec<ParetoPoint> {
    let mut out: Vec<ParetoPoint> = Vec::new();
    for p in points {
        if points.iter().any(|q| q.dominates(p)) {
            continue;
        }
        let same = |q: &ParetoPoint| {
            q.bg_throughput_bytes_per_s == p.bg_throughput_bytes_per_s
                && q.fg_mean_added_delay_s == p.fg_mean_added_delay_s
        };
        if !out.iter().any(same) {
            out.push(p.clone());
        }
    }
    out.sort_by(|a, b| {
        a.fg_mean_added_delay_s
            .total_cmp(&b.fg_mean_added_delay_s)
            .then(
                a.bg_throughput_bytes_per_s
                    .total_cmp(&b.bg_throughput_bytes_per_s),
            )
    });
    out
}

/// The policies `pareto` sweeps when none are named (the CLI's `fallow
/// pareto` and Python's `fallow.pareto`): every registry entry that can
/// run under the BG model `bg`, in registry order. One that chooses its
/// own request sizes needs a model that charges for size; it is left out,
/// and the second list says why (as `compare`'s default line-up does).
pub fn default_policies(bg: &BgService) -> Result<(Vec<String>, Vec<String>)> {
    let lineup = crate::sim::lineup(None, bg)?;
    let names = policy::registry()
        .iter()
        .filter(|e| lineup.policies.iter().any(|(spec, _)| spec == e.name))
        .map(|e| e.name.to_string())
        .collect();
    Ok((names, lineup.skipped))
}

/// Sweep `policy_spec` (a registry name, optionally with fixed parameters;
/// not its knob) over the coarse ladder at `size` bytes per BG request,
/// `threads` settings at once (the result does not depend on it).
pub fn pareto(
    prep: &Prepared,
    policy_spec: &str,
    sim: &SimConfig,
    size: u64,
    threads: usize,
) -> Result<Front> {
    pareto_with_progress(prep, policy_spec, sim, size, threads, &|_, _| {}, None)
}

/// [`pareto`], calling `progress(done, total)` once before the first
/// setting and after every setting evaluated (from the worker threads), so
/// a bar moves within a policy's sweep. With `cancel` set (Python's
/// Ctrl-C), no further setting starts and the sweep returns
/// [`Error::Interrupted`] once the settings running end.
pub fn pareto_with_progress(
    prep: &Prepared,
    policy_spec: &str,
    sim: &SimConfig,
    size: u64,
    threads: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
    cancel: Option<&AtomicBool>,
) -> Result<Front> {
    let cancelled = || cancel.is_some_and(|c| c.load(Ordering::Relaxed));
    let search = Search::new(prep, policy_spec, sim, size, true)?;
    let steps: Vec<usize> = if search.ladder.is_empty() {
        vec![0]
    } else {
        search.coarse()
    };
    let done = AtomicUsize::new(0);
    let total = steps.len() as u64;
    progress(0, total);
    let results = crate::polled::map_indexed(steps.len(), threads, |k| {
        if cancelled() {
            return None;
        }
        let r = search.run(&[(size, steps[k])], u128::MAX);
        let r = r.into_iter().next().expect("one setting asked").map(|c| {
            let c = c.expect("no cap, so always evaluated");
            ParetoPoint {
                spec: c.spec,
                knob: c.knob,
                bg_throughput_bytes_per_s: c.bg_throughput_bytes_per_s,
                fg_mean_added_delay_s: c.fg_mean_added_delay_s,
                fg_slowdown: c.fg_slowdown,
                fg_collision_rate: c.fg_collision_rate,
                idle_used_fraction: c.idle_used_fraction,
            }
        });
        progress(done.fetch_add(1, Ordering::Relaxed) as u64 + 1, total);
        Some(r)
    });
    if cancelled() {
        return Err(Error::Interrupted);
    }
    let points: Vec<ParetoPoint> = results
        .into_iter()
        .map(|r| r.expect("not cancelled, so every setting ran"))
        .collect::<Result<_>>()?;
    Ok(Front {
        policy: search.entry.name.to_string(),
        clairvoyant: search.entry.clairvoyant,
        knob: search.knob.map(|k| k.name),
        request_size_bytes: size,
        front: front_of(&points),
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: f64, d: f64) -> ParetoPoint {
        ParetoPoint {
            spec: format!("{t}/{d}"),
            knob: None,
            bg_throughput_bytes_per_s: t,
            fg_mean_added_delay_s: d,
            fg_slowdown: 0.0,
            fg_collision_rate: 0.0,
            idle_used_fraction: 0.0,
        }
    }

    #[test]
    fn the_front_keeps_only_non_dominated_points() {
        let pts = vec![
            p(1.0, 1.0),
            p(2.0, 1.0), // dominates the first
            p(3.0, 3.0),
            p(2.5, 4.0), // dominated by (3, 3)
            p(3.0, 3.0), // equal: kept once
            p(0.0, 0.0),
        ];
        let f = front_of(&pts);
        let got: Vec<(f64, f64)> = f
            .iter()
            .map(|q| (q.bg_throughput_bytes_per_s, q.fg_mean_added_delay_s))
            .collect();
        assert_eq!(got, [(0.0, 0.0), (2.0, 1.0), (3.0, 3.0)]);
    }
}
