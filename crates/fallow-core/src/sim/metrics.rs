//! What a simulation run reports (docs/simulation.md, "Metrics").
//! Field names are the stable JSON keys of `fallow simulate --json`.

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

/// CCDF points at log-spaced response times from the histogram.
pub(crate) fn ccdf(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let total = h.len();
    if total == 0 {
        return Vec::new();
    }
    let lo = h.min().max(1) as f64;
    let hi = h.max().max(1) as f64;
    // One pass over the recorded buckets (ascending) instead of a
    // `count_between` scan per point: a bucket is at or below x when its
    // lowest equivalent value is, which is what `count_between(0, x)` counts.
    let mut buckets = h
        .iter_recorded()
        .map(|v| {
            (
                h.lowest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .peekable();
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
}
