//! Figures of each part of one run over two traces played one after the
//! other ([`Trace::concat`](crate::trace::Trace::concat)), as Busy Bee
//! §5.3 plays Trace2 then Trace1 to see a policy through a workload change.
//!
//! The run is not cut in two: the policy carries its state across the
//! switch, and a collision at the first arrival of the second part delays
//! the second part. The first part's figures come from a second run of a
//! fresh, identical policy on the first part alone
//! ([`Prepared::prefix`]): the simulator walks busy periods in order and
//! draws from one seeded stream in that order, and a policy that is not
//! clairvoyant decides from the past only, so that run is, draw for draw,
//! the start of the whole run. The second part is the whole minus the
//! first. The idle gap between the parts (and the BG work done in it)
//! belongs to the second part.

use super::{simulate_until, BgWork, Prepared, SimConfig, SimResult};
use crate::error::{Error, Result};
use crate::policy::Policy;
use serde::Serialize;
use std::sync::atomic::AtomicBool;

/// What one part of a run cost the foreground and got done.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Part {
    /// FG requests in the part.
    pub requests: u64,
    /// Length of the part, s (the second part includes the gap before it).
    pub span_s: f64,
    /// Mean FG response time without BG work, s.
    pub baseline_mean_response_s: f64,
    /// Mean delay BG work added to each FG request of the part, s.
    pub mean_added_delay_s: f64,
    /// Relative slowdown of the part's mean FG response time.
    pub slowdown: f64,
    /// FG requests of the part that BG work delayed.
    pub delayed_requests: u64,
    /// Idle intervals whose ending FG arrival found BG work in service.
    pub collisions: u64,
    /// BG bytes completed in the part.
    pub bg_bytes: u64,
    /// BG bytes per second of the part.
    pub bg_throughput_bytes_per_s: f64,
}

/// A part of a run and the trace it came from: an element of the
/// `parts` list of `fallow simulate --then --json` and Python's
/// `simulate(then=)`.
#[derive(Debug, Serialize)]
pub struct SourcedPart<'a> {
    /// The trace the part comes from.
    pub source: String,
    /// Its figures.
    #[serde(flatten)]
    pub part: &'a Part,
}

impl SourcedPart<'_> {
    /// The two parts of a [`Split`], each with the trace it came from.
    pub fn pair(parts: &[Part; 2], sources: [String; 2]) -> Vec<SourcedPart<'_>> {
        sources
            .into_iter()
            .zip(parts)
            .map(|(source, part)| SourcedPart { source, part })
            .collect()
    }
}

/// A run and its two parts.
#[derive(Debug, Clone)]
pub struct Split {
    /// The whole run.
    pub whole: SimResult,
    /// The first part (the first `first_requests` FG requests) and the rest.
    pub parts: [Part; 2],
}

/// Run `policy` over `prep` and report its first `first_requests` FG
/// requests and the rest apart. `fresh` must be a new policy built exactly
/// as `policy` was (it replays the first part). `first_requests` must end
/// a busy period: true of a concatenation with a gap.
///
/// Fails for clairvoyant policies (told about the whole trace before the
/// run, so the first part alone would not be the same run) and for BG work
/// spawned by FG writes (its rate is set from the whole trace).
pub fn simulate_split(
    prep: &Prepared,
    first_requests: usize,
    policy: &mut dyn Policy,
    fresh: &mut dyn Policy,
    cfg: &SimConfig,
) -> Result<Split> {
    split_until(prep, first_requests, policy, fresh, cfg, None)
}

/// [`simulate_split`] that stops with [`Error::Interrupted`] soon after
/// `cancel` is set (as [`super::simulate_cancellable`] does).
pub fn simulate_split_cancellable(
    prep: &Prepared,
    first_requests: usize,
    policy: &mut dyn Policy,
    fresh: &mut dyn Policy,
    cfg: &SimConfig,
    cancel: &AtomicBool,
) -> Result<Split> {
    split_until(prep, first_requests, policy, fresh, cfg, Some(cancel))
}

fn split_until(
    prep: &Prepared,
    first_requests: usize,
    policy: &mut dyn Policy,
    fresh: &mut dyn Policy,
    cfg: &SimConfig,
    cancel: Option<&AtomicBool>,
) -> Result<Split> {
    if policy.clairvoyant() || fresh.clairvoyant() {
        return Err(Error::invalid(
            "split",
            format!(
                "{} is a clairvoyant reference: it sees the whole trace before the run, so its parts cannot be told apart",
                policy.name()
            ),
        ));
    }
    if matches!(cfg.bg_work, BgWork::PerFgWrite { .. }) {
        return Err(Error::invalid(
            "split",
            "BG work spawned by FG writes is sized from the whole trace; use endless, requests:N or bytes:SIZE",
        ));
    }
    let first_prep = prep.prefix(first_requests)?;
    let whole = simulate_until(prep, policy, cfg, cancel)?;
    let first = simulate_until(&first_prep, fresh, cfg, cancel)?;
    let a = part_of(&first);
    let n = whole.fg.requests.saturating_sub(first.fg.requests);
    // sums, not means, subtract
    let added_s = whole.fg.mean_added_delay_s * whole.fg.requests as f64
        - first.fg.mean_added_delay_s * first.fg.requests as f64;
    let baseline_s = whole.fg.baseline_mean_response_s * whole.fg.requests as f64
        - first.fg.baseline_mean_response_s * first.fg.requests as f64;
    let delayed_requests = whole
        .fg
        .delayed_requests
        .saturating_sub(first.fg.delayed_requests);
    // nothing delayed: exactly 0, not the rounding left by the subtraction
    let added_s = if delayed_requests == 0 { 0.0 } else { added_s };
    let span_s = whole.span_s - first.span_s;
    let bg_bytes = whole.bg.bytes.saturating_sub(first.bg.bytes);
    let mean = |sum: f64| {
        if n > 0 {
            (sum / n as f64).max(0.0)
        } else {
            0.0
        }
    };
    let b = Part {
        requests: n,
        span_s,
        baseline_mean_response_s: mean(baseline_s),
        mean_added_delay_s: mean(added_s),
        slowdown: if baseline_s > 0.0 {
            (added_s / baseline_s).max(0.0)
        } else {
            0.0
        },
        delayed_requests,
        collisions: whole.fg.collisions.saturating_sub(first.fg.collisions),
        bg_bytes,
        bg_throughput_bytes_per_s: if span_s > 0.0 {
            bg_bytes as f64 / span_s
        } else {
            0.0
        },
    };
    Ok(Split {
        whole,
        parts: [a, b],
    })
}

fn part_of(r: &SimResult) -> Part {
    Part {
        requests: r.fg.requests,
        span_s: r.span_s,
        baseline_mean_response_s: r.fg.baseline_mean_response_s,
        mean_added_delay_s: r.fg.mean_added_delay_s,
        slowdown: r.fg.slowdown,
        delayed_requests: r.fg.delayed_requests,
        collisions: r.fg.collisions,
        bg_bytes: r.bg.bytes,
        bg_throughput_bytes_per_s: r.bg.throughput_bytes_per_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy;
    use crate::sim::{simulate, BgService};
    use crate::trace::{Op, Trace};

    const MS: u64 = 1_000_000;

    fn cfg(bg: BgService) -> SimConfig {
        SimConfig {
            bg_service: bg,
            ..SimConfig::default()
        }
    }

    #[test]
    fn from_periods_by_hand() {
        // busy 10 ms (2 requests), idle 100 ms, busy 5 ms (1 request)
        let prep = Prepared::from_periods(&[10 * MS, 5 * MS], &[2, 1], &[100 * MS]).unwrap();
        assert_eq!(prep.requests(), 3);
        assert_eq!(prep.span_ns(), 115 * MS);
        assert_eq!(prep.periods().busy_start_ns, [0, 110 * MS]);
        assert_eq!(prep.periods().idle_start_ns, [10 * MS]);
        // response times 5, 5, 5 ms
        assert_eq!(prep.baseline_mean_ns(), 5e6);
        // fixed-wait(50 ms), constant 30 ms BG: 50→80 completes, 80→110 is
        // cut at 100 with 10 ms left; the one request of busy period 2 waits
        // 10 ms: 10/3 ms per request, slowdown (10/3)/5
        let mut p = policy::build("fixed-wait:t=50ms").unwrap();
        let r = simulate(&prep, p.as_mut(), &cfg(BgService::Constant { ns: 30 * MS })).unwrap();
        assert!((r.fg.mean_added_delay_s - 0.01 / 3.0).abs() < 1e-12);
        assert!((r.fg.slowdown - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(r.bg.completed, 2);
        assert_eq!(r.fg.collisions, 1);
    }

    #[test]
    fn from_periods_checks_its_input() {
        for (b, n, i, why) in [
            (vec![], vec![], vec![], "at least one"),
            (vec![1, 2], vec![1], vec![3], "as many of each"),
            (vec![1, 2], vec![1, 1], vec![], "one fewer"),
            (vec![1, 2], vec![1, 0], vec![3], "has no request"),
            (vec![1, 2], vec![1, 1], vec![0], "is empty"),
        ] {
            let e = Prepared::from_periods(&b, &n, &i).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
    }

    /// Busy periods [0,10] (2 requests: 0→5, 3→10), [40,50], [100,120]
    /// (2 requests), in ms.
    fn small() -> Trace {
        let a: Vec<u64> = [0, 3, 40, 100, 105].iter().map(|v| v * MS).collect();
        let c: Vec<u64> = [5, 10, 50, 110, 120].iter().map(|v| v * MS).collect();
        let n = a.len();
        Trace::from_columns(
            a,
            Some(c),
            vec![0; n],
            vec![4096; n],
            vec![Op::Read; n],
            vec![0; n],
        )
        .unwrap()
    }

    #[test]
    fn prefix_ends_at_a_busy_period() {
        let prep = Prepared::new(&small(), None, 1).unwrap();
        let p = prep.prefix(3).unwrap();
        assert_eq!(p.requests(), 3);
        assert_eq!(p.span_ns(), 50 * MS);
        assert_eq!(p.periods().busy_len_ns, [10 * MS, 10 * MS]);
        assert_eq!(p.periods().idle_len_ns, [30 * MS]);
        // (5 + 7 + 10) / 3 ms
        assert!((p.baseline_mean_ns() - 22e6 / 3.0).abs() < 1e-6);
        for bad in [0, 1, 4, 6] {
            let e = prep.prefix(bad).unwrap_err().to_string();
            assert!(e.contains("do not end a busy period"), "{bad}: {e}");
        }
        assert_eq!(prep.prefix(5).unwrap().span_ns(), prep.span_ns());
    }

    #[test]
    fn two_identical_halves_have_identical_figures() {
        // The same trace twice, 20 ms apart; fixed-wait(25 ms) leaves the gap
        // alone, and constant BG service draws nothing: each half must then
        // be the same run as the trace alone.
        let a = small();
        let both = Trace::concat(&a, &a, 20 * MS).unwrap();
        let prep = Prepared::new(&both, None, 1).unwrap();
        let cfg = cfg(BgService::Constant { ns: 20 * MS });
        let build = || policy::build("fixed-wait:t=25ms").unwrap();
        let (mut p, mut q) = (build(), build());
        let s = simulate_split(&prep, 5, p.as_mut(), q.as_mut(), &cfg).unwrap();
        let alone = simulate(&Prepared::new(&a, None, 1).unwrap(), build().as_mut(), &cfg).unwrap();
        let [x, y] = &s.parts;
        for part in [x, y] {
            assert_eq!(part.requests, 5);
            assert_eq!(part.bg_bytes, alone.bg.bytes);
            assert_eq!(part.collisions, alone.fg.collisions);
            assert_eq!(part.delayed_requests, alone.fg.delayed_requests);
            assert!((part.mean_added_delay_s - alone.fg.mean_added_delay_s).abs() < 1e-12);
            assert!((part.slowdown - alone.fg.slowdown).abs() < 1e-9);
        }
        assert!(alone.fg.collisions > 0 && alone.bg.bytes > 0);
        assert!((x.span_s - 0.120).abs() < 1e-12);
        assert!((y.span_s - 0.140).abs() < 1e-12); // the gap belongs to the second
        assert_eq!(s.whole.bg.bytes, x.bg_bytes + y.bg_bytes);
    }

    #[test]
    fn a_split_run_stops_when_cancelled_and_runs_the_same_when_not() {
        let a = small();
        let both = Trace::then(&a, &a, 20 * MS).unwrap();
        let prep = Prepared::new(&both, None, 1).unwrap();
        let cfg = cfg(BgService::Constant { ns: 20 * MS });
        let build = || policy::build("fixed-wait:t=25ms").unwrap();
        let (mut p, mut q) = (build(), build());
        let set = AtomicBool::new(true);
        let r = simulate_split_cancellable(&prep, 5, p.as_mut(), q.as_mut(), &cfg, &set);
        assert!(matches!(r, Err(Error::Interrupted)), "{r:?}");
        let (mut p, mut q) = (build(), build());
        let unset = AtomicBool::new(false);
        let s = simulate_split_cancellable(&prep, 5, p.as_mut(), q.as_mut(), &cfg, &unset).unwrap();
        let (mut p, mut q) = (build(), build());
        let plain = simulate_split(&prep, 5, p.as_mut(), q.as_mut(), &cfg).unwrap();
        assert_eq!(s.parts, plain.parts);
    }

    #[test]
    fn clairvoyant_and_write_driven_runs_are_refused() {
        let prep = Prepared::new(&small(), None, 1).unwrap();
        let c = SimConfig::default();
        let (mut p, mut q) = (
            policy::build("oracle").unwrap(),
            policy::build("oracle").unwrap(),
        );
        assert!(simulate_split(&prep, 3, p.as_mut(), q.as_mut(), &c).is_err());
        let w = SimConfig {
            bg_work: BgWork::PerFgWrite { ratio: 1.0 },
            ..SimConfig::default()
        };
        let (mut p, mut q) = (
            policy::build("aggressive").unwrap(),
            policy::build("aggressive").unwrap(),
        );
        assert!(simulate_split(&prep, 3, p.as_mut(), q.as_mut(), &w).is_err());
    }
}
