//! One call that runs every idleness analysis on a trace and gathers the
//! results in a [`Characterization`], the data behind `fallow analyze`, its
//! JSON and HTML report, and `fallow.characterize` in Python.
//!
//! The JSON keys are a stable interface: renaming a field here is a breaking
//! change for users' scripts.

use crate::error::{Error, Result};
use crate::period::{periods_of, CompletionSource, Periods};
use crate::service::ServiceModel;
use crate::stats;
use crate::trace::{DeviceCount, Format, Trace};
use serde::Serialize;

/// Options of [`characterize`].
#[derive(Debug, Clone)]
pub struct CharacterizeOptions {
    /// Service model for traces without completion times (required for them).
    /// When given for a trace with completions, it replaces them.
    pub service: Option<ServiceModel>,
    /// Seed of the service model's random stream.
    pub seed: u64,
    /// Largest lag of the idle-interval ACF.
    pub acf_max_lag: usize,
    /// Largest AR order tried by AIC.
    pub ar_max_order: usize,
    /// Bin width of the request-rate series, ns (0 = choose from the span).
    pub rate_bin_ns: u64,
    /// Points kept in curves (CDF, remaining idle time, concentration).
    pub curve_points: usize,
}

/// Upper bounds of [`CharacterizeOptions`]: each is far above any use
/// (defaults 50, 10 and 200) and keeps the work and the output bounded
/// (the ACF costs idle intervals × lags, the AR fit orders², a curve its
/// points) whatever a caller passes.
pub const MAX_ACF_LAG: usize = 10_000;
/// See [`MAX_ACF_LAG`].
pub const MAX_AR_ORDER: usize = 1_000;
/// See [`MAX_ACF_LAG`].
pub const MAX_CURVE_POINTS: usize = 100_000;

impl CharacterizeOptions {
    /// Refuse options past the bounds above, naming the option.
    pub fn validate(&self) -> Result<()> {
        for (name, v, max) in [
            ("acf_max_lag", self.acf_max_lag, MAX_ACF_LAG),
            ("ar_max_order", self.ar_max_order, MAX_AR_ORDER),
            ("curve_points", self.curve_points, MAX_CURVE_POINTS),
        ] {
            if v > max {
                return Err(Error::invalid(name, format!("{v} is more than {max}")));
            }
        }
        Ok(())
    }
}

impl Default for CharacterizeOptions {
    fn default() -> Self {
        CharacterizeOptions {
            service: None,
            seed: crate::dist::DEFAULT_SEED,
            acf_max_lag: 50,
            ar_max_order: 10,
            rate_bin_ns: 0,
            curve_points: 200,
        }
    }
}

/// Everything `fallow analyze` reports about one device's trace.
#[derive(Debug, Clone, Serialize)]
pub struct Characterization {
    /// The input.
    pub trace: TraceSummary,
    /// Idle intervals: summary statistics.
    pub idle: stats::Summary,
    /// Busy periods: summary statistics.
    pub busy: BusySummary,
    /// Fraction of `[first arrival, last completion]` the device was busy.
    pub utilization: f64,
    /// Empirical CDF of idle interval lengths.
    pub idle_cdf: stats::Cdf,
    /// Expected and 1st-percentile remaining idle time, and usable idle
    /// fraction, after having waited x (Practical Scrubbing Figs. 11–13).
    pub remaining: stats::Remaining,
    /// Share of idle time in the longest k % of intervals (Practical Scrubbing Fig. 10).
    pub concentration: stats::Concentration,
    /// Small/large split at (CV+1)·mean and lag-pair probabilities (Mi et al. §3.2, Fig. 2).
    pub lag_pairs: stats::LagPairs,
    /// Autocorrelation of the idle-interval sequence.
    pub acf: stats::Acf,
    /// AR(p) model of idle intervals, p by AIC (Practical Scrubbing §V-B).
    pub ar: Option<stats::ArFit>,
    /// One-way ANOVA periodicity of hourly request counts (Practical Scrubbing §V-A, Fig. 9).
    pub periodicity: Option<stats::Periodicity>,
    /// Request rate over time.
    pub rate: stats::RateSeries,
    /// Idle intervals far beyond the rest: likely timestamp typos
    /// ([`long_gaps`]), longest first; empty for most traces.
    pub long_gaps: Vec<LongGap>,
}

/// An idle interval far beyond the rest of the trace's ([`long_gaps`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LongGap {
    /// Its length, seconds.
    pub idle_s: f64,
    /// The longest idle interval that is not flagged, seconds (`None`: the
    /// trace has no other).
    pub rest_max_s: Option<f64>,
    /// Position of the request whose arrival ends it, from 1 in the
    /// analysed device's requests in arrival order (the file's line of that
    /// request when each request is a line and nothing was skipped).
    pub request: u64,
    /// That request's arrival, seconds from the trace's first arrival.
    pub arrival_s: f64,
}

/// A flagged interval is at least this many times the longest of the rest.
pub const LONG_GAP_RATIO: f64 = 100.0;
/// … and at least this long, ns (an hour): shorter quiet spells are workload.
pub const LONG_GAP_MIN_NS: u64 = 3_600_000_000_000;
/// An interval at least this long is flagged whatever the rest (a year):
/// no storage trace records a year without a request.
pub const LONG_GAP_ALWAYS_NS: u64 = 365 * 86_400_000_000_000;
/// Most intervals flagged by the ratio rule.
const LONG_GAP_MAX: usize = 10;

/// Idle intervals far beyond the rest, longest first: a mistyped timestamp
/// digit turns one gap into years, which then dominates every figure over
/// the trace's span (throughput, utilisation) and is worth a look before
/// any figure is trusted. Flagged: the `k` longest intervals, for the
/// largest `k ≤ 10` whose k-th longest is ≥ [`LONG_GAP_RATIO`] × the
/// (k+1)-th and ≥ an hour; and every interval of a year or more.
pub fn long_gaps(periods: &Periods) -> Vec<LongGap> {
    let idle = &periods.idle_len_ns;
    let mut order: Vec<usize> = (0..idle.len()).collect();
    order.sort_by(|&a, &b| idle[b].cmp(&idle[a]).then(a.cmp(&b)));
    let mut flagged = order
        .iter()
        .take_while(|&&j| idle[j] >= LONG_GAP_ALWAYS_NS)
        .count();
    for k in 1..=LONG_GAP_MAX.min(order.len().saturating_sub(1)) {
        let (kth, next) = (idle[order[k - 1]], idle[order[k]]);
        if kth >= LONG_GAP_MIN_NS && kth as f64 >= LONG_GAP_RATIO * next as f64 {
            flagged = flagged.max(k);
        }
    }
    let rest_max_s = order.get(flagged).map(|&j| idle[j] as f64 / 1e9);
    let first_arrival = periods.busy_start_ns.first().copied().unwrap_or(0);
    // requests before each busy period: the one after idle interval j is
    // the first of busy period j + 1
    let mut before = Vec::with_capacity(periods.busy_requests.len());
    let mut n = 0u64;
    for &r in &periods.busy_requests {
        before.push(n);
        n += u64::from(r);
    }
    order[..flagged]
        .iter()
        .map(|&j| LongGap {
            idle_s: idle[j] as f64 / 1e9,
            rest_max_s,
            request: before.get(j + 1).map_or(n, |&b| b + 1),
            arrival_s: periods
                .busy_start_ns
                .get(j + 1)
                .map_or(0.0, |&t| (t - first_arrival) as f64 / 1e9),
        })
        .collect()
}

/// What was analysed.
#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    /// Path of the trace file (empty for in-memory data).
    pub path: String,
    /// Format read.
    pub format: Option<Format>,
    /// Requests analysed (of the selected device).
    pub requests: u64,
    /// Every device in the file with its request count.
    pub devices: Vec<DeviceCount>,
    /// Device analysed, when one was selected.
    pub device: Option<u32>,
    /// From first arrival to last arrival or completion, seconds.
    pub span_s: f64,
    /// Where completion times came from.
    pub completions: CompletionSource,
    /// Records skipped as malformed (`--skip-bad`).
    pub skipped: u64,
    /// Records sorted into place because they arrived out of order.
    pub reordered: u64,
    /// Records ignored by design, by reason (blkparse: unmatched events,
    /// requeues, events moving no data, …); absent when there is none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub ignored_by_reason: std::collections::BTreeMap<&'static str, u64>,
    /// Reads and writes.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
}

/// Busy periods: statistics of their length in time, plus Busy Bee's
/// request-count statistics (Threshold, P_lag, CWS; Busy Bee §4, Eq. 1),
/// flattened into one JSON object.
#[derive(Debug, Clone, Serialize)]
pub struct BusySummary {
    /// Number of busy periods.
    pub count: u64,
    /// Mean length, seconds.
    pub mean_s: f64,
    /// CV of the length in time.
    pub cv: f64,
    /// Median length, seconds.
    pub p50_s: f64,
    /// 90th percentile length, seconds.
    pub p90_s: f64,
    /// 99th percentile length, seconds.
    pub p99_s: f64,
    /// Longest, seconds.
    pub max_s: f64,
    /// Lengths in requests and their clustering.
    #[serde(flatten)]
    pub clusters: stats::BusyClusters,
}

/// Characterise one device's trace. A trace holding several devices is
/// refused: select one first ([`Trace::select_device`]). `devices` is the
/// file's device list, kept for the report.
pub fn characterize(
    trace: &Trace,
    devices: Vec<DeviceCount>,
    device: Option<u32>,
    opts: &CharacterizeOptions,
) -> Result<Characterization> {
    opts.validate()?;
    let present = trace.devices();
    if present.len() > 1 {
        let list: Vec<String> = present
            .iter()
            .map(|d| match &d.name {
                Some(name) => format!("{name} ({} requests)", d.requests),
                None => format!("{} ({} requests)", d.id, d.requests),
            })
            .collect();
        // Busy and idle periods are per device: merging disks would invent overlap.
        return Err(crate::Error::Unsupported(format!(
            "{}: the trace holds {} devices ({}); select one to analyse (--device ID)",
            trace.report().path.display(),
            present.len(),
            list.join(", ")
        )));
    }
    let (periods, completions) = periods_of(trace, opts.service.as_ref(), opts.seed)?;
    // First arrival to last completion, modelled completions included
    // (the last busy period ends at the last completion).
    let span_ns = match (periods.busy_start_ns.first(), periods.busy_start_ns.last()) {
        (Some(&first), Some(&last)) => {
            let end = last + periods.busy_len_ns.last().copied().unwrap_or(0);
            trace.span_ns().max(end - first)
        }
        _ => trace.span_ns(),
    };
    let summary = trace_summary(trace, devices, device, completions, span_ns);
    Ok(characterize_periods(trace, &periods, summary, opts))
}

fn trace_summary(
    trace: &Trace,
    devices: Vec<DeviceCount>,
    device: Option<u32>,
    completions: CompletionSource,
    span_ns: u64,
) -> TraceSummary {
    let writes = trace
        .op()
        .iter()
        .filter(|&&o| o == crate::trace::Op::Write)
        .count() as u64;
    let r = trace.report();
    TraceSummary {
        path: r.path.display().to_string(),
        format: r.format,
        requests: trace.len() as u64,
        devices,
        device,
        span_s: span_ns as f64 / 1e9,
        completions,
        skipped: r.skipped,
        reordered: r.reordered,
        ignored_by_reason: r.ignored_by_reason.clone(),
        reads: trace.len() as u64 - writes,
        writes,
    }
}

/// The analyses proper, on already extracted periods.
pub fn characterize_periods(
    trace: &Trace,
    periods: &Periods,
    summary: TraceSummary,
    opts: &CharacterizeOptions,
) -> Characterization {
    let idle_s: Vec<f64> = periods
        .idle_len_ns
        .iter()
        .map(|&x| x as f64 / 1e9)
        .collect();
    let busy_s: Vec<f64> = periods
        .busy_len_ns
        .iter()
        .map(|&x| x as f64 / 1e9)
        .collect();
    let idle = stats::Summary::of(&idle_s);
    let busy_time = stats::Summary::of(&busy_s);
    let busy = BusySummary {
        count: busy_time.count,
        mean_s: busy_time.mean_s,
        cv: busy_time.cv,
        p50_s: busy_time.p50_s,
        p90_s: busy_time.p90_s,
        p99_s: busy_time.p99_s,
        max_s: busy_time.max_s,
        clusters: stats::busy_clusters(&periods.busy_requests, 20),
    };
    Characterization {
        trace: summary,
        idle,
        busy,
        utilization: periods.utilization(),
        idle_cdf: stats::Cdf::of(&idle_s, opts.curve_points),
        remaining: stats::Remaining::of(&idle_s, opts.curve_points),
        concentration: stats::Concentration::of(&idle_s, opts.curve_points),
        lag_pairs: stats::LagPairs::of(&idle_s, 9),
        acf: stats::Acf::of(&idle_s, opts.acf_max_lag),
        ar: stats::ArFit::by_aic(&idle_s, opts.ar_max_order),
        periodicity: stats::Periodicity::of(trace.arrival_ns()),
        rate: stats::RateSeries::of(trace.arrival_ns(), trace.size_bytes(), opts.rate_bin_ns),
        long_gaps: long_gaps(periods),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Periods of single-request busy periods of 1 ms between these idle
    /// intervals (ns).
    fn periods(idle_ns: &[u64]) -> Periods {
        let mut p = Periods::default();
        let mut t = 5_000u64;
        for (j, &idle) in idle_ns.iter().chain([&0]).enumerate() {
            p.busy_start_ns.push(t);
            p.busy_len_ns.push(1_000_000);
            p.busy_requests.push(if j == 0 { 3 } else { 1 });
            t += 1_000_000;
            if j < idle_ns.len() {
                p.idle_start_ns.push(t);
                p.idle_len_ns.push(idle);
                t += idle;
            }
        }
        p
    }

    #[test]
    fn long_gaps_flag_what_stands_far_beyond_the_rest() {
        const S: u64 = 1_000_000_000;
        const DAY: u64 = 86_400 * S;
        // a 3-year gap among 1-10 s gaps: flagged, naming the request
        // after it (3 requests in the first busy period, then one each:
        // idle interval 2 ends at request 3 + 2 + 1 = 6)
        let mut idle = vec![S, 10 * S, 3 * 365 * DAY, 2 * S, 5 * S];
        let g = long_gaps(&periods(&idle));
        assert_eq!(g.len(), 1, "{g:?}");
        assert_eq!(g[0].request, 6);
        assert_eq!(g[0].idle_s, (3 * 365 * DAY) as f64 / 1e9);
        assert_eq!(g[0].rest_max_s, Some(10.0));
        // arrival of request 6: 3 busy ms + 1 + 10 + 3 years after the first
        assert_eq!(
            g[0].arrival_s,
            (3_000_000 + 11 * S + 3 * 365 * DAY) as f64 / 1e9
        );
        // two typos: both, longest first
        idle.push(5 * 365 * DAY);
        let g = long_gaps(&periods(&idle));
        assert_eq!(g.len(), 2);
        assert!(g[0].idle_s > g[1].idle_s);
        assert_eq!(g[1].rest_max_s, Some(10.0));
        // a quiet hour among seconds is 360× the rest and an hour: flagged;
        // 59 minutes is not (workloads have quiet spells)
        assert_eq!(long_gaps(&periods(&[S, 2 * S, 3_600 * S])).len(), 1);
        assert!(long_gaps(&periods(&[S, 2 * S, 3_540 * S])).is_empty());
        // 99× the rest is not far beyond it
        assert!(long_gaps(&periods(&[S, 2 * S, 100 * S, 9_900 * S])).is_empty());
        assert_eq!(
            long_gaps(&periods(&[S, 2 * S, 100 * S, 10_000 * S])).len(),
            1
        );
        // a lone interval is flagged only from a year on (584 years here)
        let g = long_gaps(&periods(&[u64::MAX / 2]));
        assert_eq!((g.len(), g[0].rest_max_s, g[0].request), (1, None, 4));
        assert!(long_gaps(&periods(&[364 * DAY])).is_empty());
        assert!(long_gaps(&periods(&[])).is_empty());
    }
    use crate::workload::{ArrivalProcess, SyntheticWorkload};

    #[test]
    fn options_past_their_bounds_are_refused_naming_them() {
        let trace = SyntheticWorkload {
            arrivals: ArrivalProcess::Poisson { rate_per_s: 10.0 },
            requests: 500,
            service: ServiceModel::Exponential {
                mean_ns: 10_000_000,
            },
            request_size_bytes: 4096,
            capacity_bytes: 1 << 30,
            write_fraction: 0.5,
            seed: 3,
        }
        .generate()
        .unwrap();
        let run = |opts: CharacterizeOptions| characterize(&trace, trace.devices(), None, &opts);
        for (name, opts) in [
            (
                "acf_max_lag",
                CharacterizeOptions {
                    acf_max_lag: usize::MAX,
                    ..Default::default()
                },
            ),
            (
                "ar_max_order",
                CharacterizeOptions {
                    ar_max_order: MAX_AR_ORDER + 1,
                    ..Default::default()
                },
            ),
            (
                "curve_points",
                CharacterizeOptions {
                    curve_points: 1 << 40,
                    ..Default::default()
                },
            ),
        ] {
            let e = run(opts).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
        // the bounds themselves are accepted
        let c = run(CharacterizeOptions {
            acf_max_lag: MAX_ACF_LAG,
            curve_points: 1000,
            ..Default::default()
        })
        .unwrap();
        // the ACF stops at the last lag the 499 idle intervals or fewer have
        assert!(c.acf.lags.len() <= 500, "{}", c.acf.lags.len());
    }
}
