//! Busy-period clustering as in Busy Bee §3–§4: Threshold is the 90th
//! percentile of busy-period length in requests and periods at or above it
//! are long (Fig. 4 line iv: `BP_length >= Threshold`), P_lag is the probability that the busy
//! period `lag` places later is long given that the current one is long,
//! and the Cluster Window Size is the smallest lag with Σ_{l ≤ lag} P_l ≥ 0.8
//! (Eq. 1), over lags up to 20.
//!
//! Lengths are integers, so "the 90th percentile" needs a tie rule. We take
//! the smallest length T with P(length ≥ T) ≤ 10 %: the long periods are
//! the top decile. The nearest-rank p90 would make *every* period long on
//! traces where over 90 % of busy periods have one request (pgbench: 1.28
//! requests on average), and Busy Bee's long/short split would say nothing.

use serde::Serialize;

/// Busy Bee's statistics of a sequence of busy-period lengths in requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BusyClusters {
    /// Mean length in requests.
    pub mean_requests: f64,
    /// Longest, in requests.
    pub max_requests: u64,
    /// Smallest length T with P(length ≥ T) ≤ 10 %: the top decile is long.
    pub threshold_requests: u64,
    /// Fraction of periods with length ≥ threshold.
    pub long_fraction: f64,
    /// P_lag for lags 1..=max_lag.
    pub p_lag: Vec<f64>,
    /// Cluster Window Size (Eq. 1), capped at max_lag.
    pub cws: u32,
    /// Whether Σ P reached 0.8 within max_lag.
    pub cws_reached: bool,
    /// `[length, count]` pairs, ascending length.
    pub length_histogram: Vec<(u64, u64)>,
}

/// Smallest lag whose running sum of `p_lag` reaches 0.8 (Busy Bee Eq. 1).
pub(crate) fn cluster_window_size(p_lag: &[f64]) -> (u32, bool) {
    let mut sum = 0.0;
    for (i, p) in p_lag.iter().enumerate() {
        sum += p;
        // tolerance: 0.5 + 0.2 + 0.1 is 0.7999… in floating point
        if sum >= 0.8 - 1e-9 {
            return (i as u32 + 1, true);
        }
    }
    (p_lag.len() as u32, false)
}

/// Threshold, P_lag and CWS of busy-period lengths (in requests).
pub fn busy_clusters(lengths: &[u32], max_lag: usize) -> BusyClusters {
    let n = lengths.len();
    if n == 0 {
        return BusyClusters::default();
    }
    let mut hist: std::collections::BTreeMap<u64, u64> = Default::default();
    for &l in lengths {
        *hist.entry(l as u64).or_default() += 1;
    }
    // smallest T with #(length >= T) <= 10 % of n (see the module comment)
    let allowed_long = (0.1 * n as f64).floor() as u64;
    let mut at_or_above = n as u64;
    let mut threshold = 0;
    for (&len, &c) in &hist {
        if at_or_above <= allowed_long {
            threshold = len;
            break;
        }
        at_or_above -= c;
        threshold = len + 1;
    }
    let long: Vec<bool> = lengths.iter().map(|&l| l as u64 >= threshold).collect();
    let long_count = long.iter().filter(|&&l| l).count();
    let p_lag: Vec<f64> = (1..=max_lag)
        .map(|lag| {
            let (mut both, mut from) = (0usize, 0usize);
            for i in 0..n.saturating_sub(lag) {
                if long[i] {
                    from += 1;
                    both += long[i + lag] as usize;
                }
            }
            if from > 0 {
                both as f64 / from as f64
            } else {
                0.0
            }
        })
        .collect();
    let (cws, cws_reached) = cluster_window_size(&p_lag);
    BusyClusters {
        mean_requests: lengths.iter().map(|&l| l as f64).sum::<f64>() / n as f64,
        max_requests: lengths.iter().copied().max().unwrap_or(0) as u64,
        threshold_requests: threshold,
        long_fraction: long_count as f64 / n as f64,
        p_lag,
        cws,
        cws_reached,
        length_histogram: hist.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_and_p_lag_by_hand() {
        // 20 periods: lengths 1..=10 twice. At most 2 may be long: T = 10.
        let l: Vec<u32> = vec![1, 2, 9, 10, 3, 4, 5, 6, 7, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let b = busy_clusters(&l, 3);
        assert_eq!(b.threshold_requests, 10);
        // long at indices 3 and 10. lag 1: 3->4 short, 10->11 short: 0
        assert_eq!(b.p_lag[0], 0.0);
        // lag 7: 3->10 long, 10->17 short: 1/2
        let b7 = busy_clusters(&l, 7);
        assert_eq!(b7.p_lag[6], 0.5);
        assert_eq!(b.long_fraction, 0.1);
        assert_eq!(b.max_requests, 10);
    }

    #[test]
    fn mostly_single_request_periods_still_split() {
        // 95 % of periods have one request: nearest-rank p90 would be 1 and
        // make everything long; the top decile rule gives T = 2.
        let mut l = vec![1u32; 95];
        l.extend([2, 2, 3, 2, 5]);
        let b = busy_clusters(&l, 2);
        assert_eq!(b.threshold_requests, 2);
        assert!((b.long_fraction - 0.05).abs() < 1e-12);
        // all equal: nothing is long
        let b = busy_clusters(&[3, 3, 3], 2);
        assert_eq!((b.threshold_requests, b.long_fraction), (4, 0.0));
    }

    #[test]
    fn cws_is_first_lag_reaching_point_eight() {
        assert_eq!(cluster_window_size(&[0.5, 0.2, 0.1, 0.9]), (3, true));
        assert_eq!(cluster_window_size(&[0.9]), (1, true));
        assert_eq!(cluster_window_size(&[0.1, 0.1]), (2, false));
    }
}
