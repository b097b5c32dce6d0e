//! Busy-period clustering as in Busy Bee §3–§4: Threshold is the 90th
//! percentile of busy-period length in requests (periods at or above it are
//! long, as in Fig. 4 line iv), P_lag is the probability that the busy
//! period `lag` places later is long given that the current one is long,
//! and the Cluster Window Size is the smallest lag with Σ_{l ≤ lag} P_l ≥ 0.8
//! (Eq. 1), over lags up to 20.

use serde::Serialize;

/// Busy Bee's statistics of a sequence of busy-period lengths in requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BusyClusters {
    /// Mean length in requests.
    pub mean_requests: f64,
    /// Longest, in requests.
    pub max_requests: u64,
    /// p90 of length in requests (nearest rank).
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
    // nearest-rank p90: smallest length whose cumulative count ≥ 0.9 n
    let rank = ((0.9 * n as f64).ceil() as u64).max(1);
    let mut cum = 0;
    let mut threshold = 0;
    for (&len, &c) in &hist {
        cum += c;
        if cum >= rank {
            threshold = len;
            break;
        }
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
        // 10 periods: lengths 1..=10 -> p90 nearest rank = 9th value = 9
        let l: Vec<u32> = vec![1, 2, 9, 10, 3, 4, 5, 6, 7, 8];
        let b = busy_clusters(&l, 3);
        assert_eq!(b.threshold_requests, 9);
        // long at indices 2, 3. lag 1: from 2 -> 3 long, from 3 -> 4 short: 1/2
        assert_eq!(b.p_lag[0], 0.5);
        // lag 2: 2->4 short, 3->5 short: 0
        assert_eq!(b.p_lag[1], 0.0);
        assert_eq!(b.long_fraction, 0.2);
        assert_eq!(b.max_requests, 10);
    }

    #[test]
    fn cws_is_first_lag_reaching_point_eight() {
        assert_eq!(cluster_window_size(&[0.5, 0.2, 0.1, 0.9]), (3, true));
        assert_eq!(cluster_window_size(&[0.9]), (1, true));
        assert_eq!(cluster_window_size(&[0.1, 0.1]), (2, false));
    }
}
