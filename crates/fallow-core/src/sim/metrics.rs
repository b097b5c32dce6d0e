//! What a simulation run reports (docs/simulation.md, "Metrics").
//! Field names are the stable JSON keys of `fallow simulate --json`.

use super::{record, small_histogram};
use hdrhistogram::Histogram;
use serde::Serialize;

/// Metrics of one run.
#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    /// Policy name.
    pub policy: String,
    /// True for clairvoyant references (upper bounds, not deployable).
    pub clairvoyant: bool,
    /// Foreground metrics.
    pub fg: FgMetrics,
    /// Background metrics.
    pub bg: BgMetrics,
    /// Fraction of the span the device served FG or BG work.
    pub utilization: f64,
    /// Idle time the device had (after shifts), seconds.
    pub idle_total_s: f64,
    /// Fraction of that idle time spent serving BG work (collided requests
    /// count only up to the FG arrival).
    pub idle_used_fraction: f64,
    /// Idle intervals the device had.
    pub idle_intervals: u64,
    /// From the first FG arrival to the last FG completion (baseline), seconds.
    pub span_s: f64,
    /// The policy's notes on how it ran ([`crate::policy::Policy::notes`]).
    pub notes: Vec<String>,
}

impl SimResult {
    /// Its mean figures (the same numbers, gathered).
    pub fn mean_figures(&self) -> MeanFigures {
        MeanFigures {
            mean_response_s: self.fg.mean_response_s,
            slowdown: self.fg.slowdown,
            mean_added_delay_s: self.fg.mean_added_delay_s,
            collision_rate: self.fg.collision_rate,
            bg_throughput_bytes_per_s: self.bg.throughput_bytes_per_s,
            utilization: self.utilization,
            idle_used_fraction: self.idle_used_fraction,
        }
    }
}

/// Foreground metrics.
#[derive(Debug, Clone, Serialize)]
pub struct FgMetrics {
    /// FG requests.
    pub requests: u64,
    /// Mean response time with BG work, seconds.
    pub mean_response_s: f64,
    /// Mean response time without BG work, seconds.
    pub baseline_mean_response_s: f64,
    /// Relative slowdown: mean with BG / mean without − 1.
    pub slowdown: f64,
    /// Mean delay added per FG request, seconds.
    pub mean_added_delay_s: f64,
    /// Median response time, seconds (3 significant digits).
    pub p50_response_s: f64,
    /// 90th percentile response time, seconds.
    pub p90_response_s: f64,
    /// 99th percentile response time, seconds.
    pub p99_response_s: f64,
    /// 99.9th percentile response time, seconds.
    pub p999_response_s: f64,
    /// 99th percentile without BG work, seconds.
    pub baseline_p99_response_s: f64,
    /// Fraction of FG requests delayed by BG work.
    pub collision_rate: f64,
    /// FG requests delayed.
    pub delayed_requests: u64,
    /// Idle intervals whose ending FG arrival found BG work in service.
    pub collisions: u64,
    /// CCDF of response time: `[seconds, P(RT > seconds)]`.
    pub ccdf: Vec<(f64, f64)>,
    /// The same without BG work.
    pub baseline_ccdf: Vec<(f64, f64)>,
}

/// Background metrics.
#[derive(Debug, Clone, Serialize)]
pub struct BgMetrics {
    /// BG requests completed (including those that collided: they finish).
    pub completed: u64,
    /// BG bytes completed.
    pub bytes: u64,
    /// Bytes per second over the trace span.
    pub throughput_bytes_per_s: f64,
    /// Mean BG response time from arrival, seconds (arrival-driven BG work only).
    pub mean_response_s: Option<f64>,
    /// BG requests spawned by FG writes (arrival-driven BG work only).
    pub spawned: Option<u64>,
    /// Device time spent on BG work, seconds: in idle time, plus the part of
    /// collided requests that ran on after the FG arrival.
    pub busy_s: f64,
}

/// The counts a run accumulates, from which its mean figures follow
/// ([`Prepared::figures`](super::Prepared::figures)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Delay added to FG requests, summed, ns.
    pub added_ns: u128,
    /// FG requests delayed.
    pub delayed_requests: u64,
    /// Idle intervals whose ending FG arrival found BG work in service.
    pub collisions: u64,
    /// BG requests completed.
    pub bg_completed: u64,
    /// BG bytes completed.
    pub bg_bytes: u64,
    /// BG service inside idle time, ns.
    pub bg_busy_ns: u64,
    /// BG service past FG arrivals (collision residuals), ns.
    pub bg_overrun_ns: u64,
    /// Idle time the device had after shifts, ns.
    pub idle_total_ns: u64,
    /// Idle intervals the device had after shifts.
    pub idle_intervals: u64,
}

/// The mean figures of a run (everything but percentiles and CCDFs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanFigures {
    /// Mean FG response time with BG work, s.
    pub mean_response_s: f64,
    /// Relative slowdown of the mean FG response time.
    pub slowdown: f64,
    /// Mean delay added per FG request, s.
    pub mean_added_delay_s: f64,
    /// Fraction of FG requests delayed.
    pub collision_rate: f64,
    /// BG bytes per second of the span.
    pub bg_throughput_bytes_per_s: f64,
    /// Fraction of the span the device served FG or BG work.
    pub utilization: f64,
    /// Fraction of the idle time spent on BG work.
    pub idle_used_fraction: f64,
}

/// A response-time distribution as its histogram's recorded buckets:
/// (the lowest value a bucket holds, its count), ascending by value. The
/// figures read them in one pass ([`Distribution::of`]), and a run's
/// delayed requests change them by a few buckets ([`BucketDelta`]), so a
/// run never copies or walks a whole histogram of the trace (a refit's
/// dozens of runs spent most of their time doing that).
pub(crate) type Buckets = Vec<(u64, u64)>;

/// The recorded buckets of `h`.
pub(crate) fn buckets(h: &Histogram<u64>) -> Buckets {
    h.iter_recorded()
        .map(|v| {
            (
                h.lowest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect()
}

/// The quantiles and CCDF a run reports, as hdrhistogram computes them on
/// the histogram the buckets came from (its `value_at_quantile`, `min`,
/// `max`), ns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Distribution {
    /// The 50th, 90th, 99th and 99.9th percentiles, ns.
    pub(crate) quantiles_ns: [u64; 4],
    /// CCDF points (s, fraction above).
    pub(crate) ccdf: Vec<(f64, f64)>,
}

/// The quantiles [`Distribution`] holds, in its order.
pub(crate) const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

impl Distribution {
    /// The figures of `buckets`, whose values are equivalent as in
    /// `layout` (a histogram of the same lowest value and significant
    /// digits: its size does not change which bucket a value is in).
    pub(crate) fn of(layout: &Histogram<u64>, buckets: &[(u64, u64)]) -> Distribution {
        let total: u64 = buckets.iter().map(|&(_, c)| c).sum();
        // hdrhistogram's value_at_quantile: the first bucket whose running
        // count reaches ⌈q·total⌉ (at least 1), at its highest equivalent;
        // 0 when nothing was recorded
        let mut quantiles_ns = [0u64; 4];
        if total > 0 {
            let mut running = 0u64;
            // the bucket the running count last reached: a quantile whose
            // target it already covers falls in it too (they ascend)
            let mut at = 0u64;
            let mut next = buckets.iter();
            for (q, out) in QUANTILES.iter().zip(&mut quantiles_ns) {
                let target = ((q * total as f64).ceil() as u64).max(1);
                while running < target {
                    let Some(&(low, count)) = next.next() else {
                        break;
                    };
                    running += count;
                    at = low;
                }
                *out = layout.highest_equivalent(at);
            }
        }
        Distribution {
            quantiles_ns,
            ccdf: ccdf_of(layout, buckets, total),
        }
    }

    /// The 99th percentile, ns.
    pub(crate) fn p99_ns(&self) -> u64 {
        self.quantiles_ns[2]
    }
}

/// CCDF points at log-spaced response times from the histogram.
#[cfg(test)]
pub(crate) fn ccdf(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    ccdf_of(h, &buckets(h), h.len())
}

/// [`ccdf`] of a histogram's recorded `buckets` (`total` values), their
/// values equivalent as in `layout`.
fn ccdf_of(layout: &Histogram<u64>, buckets: &[(u64, u64)], total: u64) -> Vec<(f64, f64)> {
    let (Some(&(first, _)), Some(&(last, _))) = (buckets.first(), buckets.last()) else {
        return Vec::new();
    };
    if total == 0 {
        return Vec::new();
    }
    // the histogram's min() (0 when a value was 0) and max()
    let lo = first.max(1) as f64;
    let hi = layout.highest_equivalent(last).max(1) as f64;
    // One pass over the recorded buckets (ascending) instead of a
    // `count_between` scan per point: a bucket is at or below x when its
    // lowest equivalent value is, which is what `count_between(0, x)` counts.
    let mut buckets = buckets.iter().copied().peekable();
    let mut at_or_below = 0u64;
    crate::stats::log_grid(lo, hi, 100)
        .into_iter()
        .map(|x| {
            while let Some(&(low, count)) = buckets.peek() {
                if low > x as u64 {
                    break;
                }
                at_or_below += count;
                buckets.next();
            }
            (
                x / 1e9,
                (total - at_or_below.min(total)) as f64 / total as f64,
            )
        })
        .collect()
}

/// How a run's delayed requests change the baseline's buckets: each
/// leaves the bucket of its baseline response time for the bucket of its
/// delayed one. Up to [`FEW_MOVES`] they are kept as they come and sorted
/// at the end (a refit's runs on a window of a few thousand requests:
/// growing two histograms per run cost more than the run); beyond that,
/// in two histograms of the baseline's layout, O(1) a request and bounded
/// by the layout, not by the trace.
#[derive(Debug, Default)]
pub(crate) struct BucketDelta {
    /// (baseline, delayed) response times, ns, while there are few.
    few: Vec<(u64, u64)>,
    /// The baseline and the delayed response times once there are many.
    many: Option<(Histogram<u64>, Histogram<u64>)>,
}

/// Moves kept as they come before [`BucketDelta`] turns to histograms.
const FEW_MOVES: usize = 1 << 16;

impl BucketDelta {
    /// A request moved from `old_ns` to `new_ns`.
    pub(crate) fn moved(&mut self, old_ns: u64, new_ns: u64) {
        let (left, entered) = match &mut self.many {
            Some((left, entered)) => (left, entered),
            None if self.few.len() < FEW_MOVES => {
                self.few.push((old_ns, new_ns));
                return;
            }
            None => {
                let (mut left, mut entered) = (small_histogram(), small_histogram());
                for (old, new) in std::mem::take(&mut self.few) {
                    record(&mut left, old);
                    record(&mut entered, new);
                }
                let (left, entered) = self.many.insert((left, entered));
                (left, entered)
            }
        };
        record(left, old_ns);
        record(entered, new_ns);
    }

    /// `base` with the changes applied, its values equivalent as in
    /// `layout`; `None` when nothing moved (the distribution is the
    /// baseline's).
    pub(crate) fn apply(self, layout: &Histogram<u64>, base: &[(u64, u64)]) -> Option<Buckets> {
        let (left, entered) = match self.many {
            Some((left, entered)) => (buckets(&left), buckets(&entered)),
            None if self.few.is_empty() => return None,
            None => {
                let side = |values: Vec<u64>| {
                    let mut values = values;
                    values.sort_unstable();
                    let mut out: Buckets = Vec::new();
                    for v in values {
                        let bucket = layout.lowest_equivalent(v);
                        match out.last_mut() {
                            Some((b, c)) if *b == bucket => *c += 1,
                            _ => out.push((bucket, 1)),
                        }
                    }
                    out
                };
                let (old, new) = self.few.into_iter().unzip();
                (side(old), side(new))
            }
        };
        let mut out = Vec::with_capacity(base.len() + entered.len());
        let (mut base, mut left, mut entered) = (
            base.iter().peekable(),
            left.iter().peekable(),
            entered.iter().peekable(),
        );
        while let Some(bucket) = [base.peek(), left.peek(), entered.peek()]
            .into_iter()
            .flatten()
            .map(|&&(b, _)| b)
            .min()
        {
            let mut count = 0i128;
            for (side, sign) in [(&mut base, 1i128), (&mut left, -1), (&mut entered, 1)] {
                if let Some(&(_, c)) = side.next_if(|&&(b, _)| b == bucket) {
                    count += sign * i128::from(c);
                }
            }
            assert!(count >= 0, "delayed requests are a subset of the baseline");
            if count > 0 {
                out.push((bucket, count as u64));
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pass_ccdf_equals_count_between() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 1 << 40, 3).unwrap();
        let mut x = 7u64;
        for _ in 0..20_000 {
            // a spread of values over six decades
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            h.record(1 + (x >> 44) * ((x >> 20) % 1000 + 1)).unwrap();
        }
        let total = h.len();
        let lo = h.min().max(1) as f64;
        let hi = h.max().max(1) as f64;
        let want: Vec<(f64, f64)> = crate::stats::log_grid(lo, hi, 100)
            .into_iter()
            .map(|x| {
                let below = h.count_between(0, x as u64);
                (x / 1e9, (total - below.min(total)) as f64 / total as f64)
            })
            .collect();
        assert_eq!(ccdf(&h), want);
    }

    /// An LCG's next value (the tests' own stream).
    fn next(x: &mut u64) -> u64 {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *x >> 11
    }

    /// The figures as hdrhistogram gives them on the with-BG histogram
    /// built the old way: the baseline cloned, the delayed requests' old
    /// values subtracted and their new ones added.
    fn by_hdrhistogram(base: &Histogram<u64>, moves: &[(u64, u64)]) -> Distribution {
        let (mut old, mut new) = (small_histogram(), small_histogram());
        for &(o, n) in moves {
            old.record(o).unwrap();
            new.record(n).unwrap();
        }
        let mut h = base.clone();
        if !moves.is_empty() {
            h.subtract(&old).unwrap();
            h.add(&new).unwrap();
        }
        Distribution {
            quantiles_ns: QUANTILES.map(|q| h.value_at_quantile(q)),
            ccdf: ccdf(&h),
        }
    }

    #[test]
    fn figures_from_buckets_and_moves_equal_hdrhistograms_own() {
        let mut x = 11u64;
        // (baseline values, delayed requests, largest delay): small and
        // large traces, delays inside one bucket and past the baseline's
        // range, zeros
        for (values, delayed, max_delay) in [
            (1usize, 1usize, 10u64),
            (50, 0, 0),
            (50, 50, 1),
            (2_000, 300, 5_000_000),
            (5_000, 5_000, 1 << 40),
            (40_000, 39_000, 2_000_000_000),
            // past the moves kept as they come: histograms
            (100_000, FEW_MOVES + 1000, 3_000_000),
            (200, 100, 0),
        ] {
            let mut base = small_histogram();
            let rts: Vec<u64> = (0..values)
                .map(|i| match i % 97 {
                    0 => 0,
                    _ => 1 + next(&mut x) % (1 + (next(&mut x) % 1_000_000_000)),
                })
                .collect();
            for &rt in &rts {
                base.record(rt).unwrap();
            }
            let moves: Vec<(u64, u64)> = rts[..delayed]
                .iter()
                .map(|&rt| (rt, rt + next(&mut x) % (max_delay + 1)))
                .collect();
            let want = by_hdrhistogram(&base, &moves);
            let base_buckets = buckets(&base);
            let mut delta = BucketDelta::default();
            for &(o, n) in &moves {
                delta.moved(o, n);
            }
            let got = match delta.apply(&base, &base_buckets) {
                Some(b) => Distribution::of(&base, &b),
                None => Distribution::of(&base, &base_buckets),
            };
            assert_eq!(
                got, want,
                "{values} values, {delayed} delayed by up to {max_delay}"
            );
        }
    }
}
