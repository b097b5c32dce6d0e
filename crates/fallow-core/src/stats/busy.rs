//! Busy-period clustering as in Busy Bee §3–§4: Threshold is the 90th
//! percentile of busy-period length in requests and periods at or above it
//! are long (Fig. 4 step 1.b "Threshold … based on 90th percentile", step
//! 2.c.iv `BP_length >= Threshold`), P_lag is the probability that the busy
//! period `lag` places later is long given that the current one is long,
//! and the Cluster Window Size is the smallest lag with Σ_{l ≤ lag} P_l ≥ 0.8
//! (Eq. 1), over lags up to 20.
//!
//! The 90th percentile is the nearest-rank one: the smallest length T with
//! P(length ≤ T) ≥ 90 %. On the paper's traces (Fig. 2: 90 % of periods
//! have ≤ 4 requests, §3.2) that gives T = 4 to 6 and some 10 % of periods
//! long. It degenerates when the percentile is the shortest length: then
//! every period is long (pgbench: over 90 % of busy periods have one
//! request) and the long/short split says nothing. Only then we fall back
//! to the top-decile rule, the smallest T with P(length ≥ T) ≤ 10 %, and
//! say so ([`ThresholdRule::TopDecile`]).
use serde::Serialize;

/// How Threshold was chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThresholdRule {
    /// The 90th percentile (nearest rank), Busy Bee Fig. 4.
    #[default]
    P90,
    /// The 90th percentile made every period long; the smallest T with
    /// P(length ≥ T) ≤ 10 % instead.
    TopDecile,
}

impl ThresholdRule {
    /// In words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            ThresholdRule::P90 => "the 90th percentile (Busy Bee Fig. 4)",
            ThresholdRule::TopDecile => {
                "the top-decile rule (the 90th percentile is the shortest length, which would make every busy period long)"
            }
        }
    }
}

/// Busy Bee's statistics of a sequence of busy-period lengths in requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BusyClusters {
    /// Mean length in requests.
    pub mean_requests: f64,
    /// Longest, in requests.
    pub max_requests: u64,
    /// Threshold T in requests: a period of at least T requests is long.
    pub threshold_requests: u64,
    /// How T was chosen: the 90th percentile, or the top-decile fallback.
    pub threshold_rule: ThresholdRule,
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

/// Threshold, P_lag and CWS of busy-period lengths (in requests), with
/// Threshold the 90th percentile (the top decile where that degenerates).
pub fn busy_clusters(lengths: &[u32], max_lag: usize) -> BusyClusters {
    busy_clusters_with(lengths, max_lag, ThresholdRule::P90)
}

/// As [`busy_clusters`], with the Threshold rule chosen: `P90` falls back
/// to the top decile only where every period would be long; `TopDecile`
/// always uses the top decile (fallow's earlier rule; docs/policies.md).
pub fn busy_clusters_with(lengths: &[u32], max_lag: usize, rule: ThresholdRule) -> BusyClusters {
    let n = lengths.len();
    if n == 0 {
        return BusyClusters::default();
    }
    let mut hist: std::collections::BTreeMap<u64, u64> = Default::default();
    for &l in lengths {
        *hist.entry(l as u64).or_default() += 1;
    }
    // nearest-rank 90th percentile: smallest T with #(length <= T) >= 0.9 n
    let rank = (0.9 * n as f64).ceil().max(1.0) as u64;
    let mut at_or_below = 0u64;
    let mut threshold = 0;
    for (&len, &c) in &hist {
        at_or_below += c;
        if at_or_below >= rank {
            threshold = len;
            break;
        }
    }
    let shortest = *hist.keys().next().expect("n > 0");
    let mut rule = rule;
    if rule == ThresholdRule::TopDecile || threshold <= shortest {
        // every period would be long: the top decile instead (module comment)
        rule = ThresholdRule::TopDecile;
        let allowed_long = (0.1 * n as f64).floor() as u64;
        let mut at_or_above = n as u64;
        for (&len, &c) in &hist {
            if at_or_above <= allowed_long {
                threshold = len;
                break;
            }
            at_or_above -= c;
            threshold = len + 1;
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
        threshold_rule: rule,
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
        // 20 periods: lengths 1..=10 twice. Nearest-rank p90: the 18th
        // smallest of 1,1,2,2,…,9,9,10,10 is 9; periods of ≥ 9 are long.
        let l: Vec<u32> = vec![1, 2, 9, 10, 3, 4, 5, 6, 7, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let b = busy_clusters(&l, 3);
        assert_eq!(b.threshold_requests, 9);
        assert_eq!(b.threshold_rule, ThresholdRule::P90);
        // long at indices 2, 3, 10, 19. lag 1: 2->3 long, 3->4 short,
        // 10->11 short (19 has no successor): 1/3
        assert!((b.p_lag[0] - 1.0 / 3.0).abs() < 1e-12);
        // lag 7: 2->9 short, 3->10 long, 10->17 short: 1/3
        let b7 = busy_clusters(&l, 7);
        assert!((b7.p_lag[6] - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(b.long_fraction, 0.2);
        assert_eq!(b.max_requests, 10);
    }

    #[test]
    fn paper_shaped_lengths_use_the_90th_percentile() {
        // 100 periods: 50 of 1, 20 of 2, 15 of 3, 5 of 4, 10 of 6: the
        // 90th smallest is 4, so T = 4 and 15 % are long (ties at T count)
        let mut l = vec![1u32; 50];
        l.extend([2; 20]);
        l.extend([3; 15]);
        l.extend([4; 5]);
        l.extend([6; 10]);
        let b = busy_clusters(&l, 2);
        assert_eq!(
            (b.threshold_requests, b.threshold_rule),
            (4, ThresholdRule::P90)
        );
        assert!((b.long_fraction - 0.15).abs() < 1e-12);
    }

    #[test]
    fn mostly_single_request_periods_fall_back_to_the_top_decile() {
        // 95 % of periods have one request: p90 is 1 and would make every
        // period long; the top-decile rule gives T = 2
        let mut l = vec![1u32; 95];
        l.extend([2, 2, 3, 2, 5]);
        let b = busy_clusters(&l, 2);
        assert_eq!(
            (b.threshold_requests, b.threshold_rule),
            (2, ThresholdRule::TopDecile)
        );
        assert!((b.long_fraction - 0.05).abs() < 1e-12);
        // exactly 90 % of one request: p90 is still 1, the fallback applies
        let mut l = vec![1u32; 90];
        l.extend([7; 10]);
        let b = busy_clusters(&l, 2);
        assert_eq!(
            (b.threshold_requests, b.threshold_rule),
            (7, ThresholdRule::TopDecile)
        );
        // 89 %: p90 is 7 already
        let mut l = vec![1u32; 89];
        l.extend([7; 11]);
        let b = busy_clusters(&l, 2);
        assert_eq!(
            (b.threshold_requests, b.threshold_rule),
            (7, ThresholdRule::P90)
        );
        // all equal: nothing is long
        let b = busy_clusters(&[3, 3, 3], 2);
        assert_eq!((b.threshold_requests, b.long_fraction), (4, 0.0));
        assert_eq!(b.threshold_rule, ThresholdRule::TopDecile);
    }

    #[test]
    fn the_top_decile_rule_can_be_asked_for() {
        // the paper-shaped lengths: at most 10 of 100 may be long, so T = 6
        // (the 10 periods of 6; 5 would classify alike, the rule names an
        // observed length)
        let mut l = vec![1u32; 50];
        l.extend([2; 20]);
        l.extend([3; 15]);
        l.extend([4; 5]);
        l.extend([6; 10]);
        let b = busy_clusters_with(&l, 2, ThresholdRule::TopDecile);
        assert_eq!(b.threshold_requests, 6);
        assert!((b.long_fraction - 0.10).abs() < 1e-12);
    }

    #[test]
    fn cws_is_first_lag_reaching_point_eight() {
        assert_eq!(cluster_window_size(&[0.5, 0.2, 0.1, 0.9]), (3, true));
        assert_eq!(cluster_window_size(&[0.9]), (1, true));
        assert_eq!(cluster_window_size(&[0.1, 0.1]), (2, false));
    }
}
