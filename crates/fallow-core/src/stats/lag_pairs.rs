//! Burstiness of idle intervals as in Mi et al. §3.2 (Fig. 2) and §5: split
//! intervals into small and large at (CV+1)·mean and estimate, for lags
//! 1..9, the conditional probabilities (X, Y)_i that an interval i places
//! later is of class Y given that the current one is of class X. For each
//! X the two probabilities sum to one.

use super::summary::mean_cv;
use serde::Serialize;

/// Conditional class probabilities at one lag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LagPair {
    /// Distance in intervals.
    pub lag: usize,
    /// P(small at +lag | small now).
    pub small_small: Option<f64>,
    /// P(large at +lag | small now).
    pub small_large: Option<f64>,
    /// P(small at +lag | large now).
    pub large_small: Option<f64>,
    /// P(large at +lag | large now).
    pub large_large: Option<f64>,
}

/// The small/large split and the lag-pair table.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LagPairs {
    /// Split point (CV+1)·mean, seconds: intervals above it are large.
    pub split_s: f64,
    /// Fraction of intervals that are small.
    pub small_fraction: f64,
    /// One row per lag.
    pub lags: Vec<LagPair>,
}

impl LagPairs {
    /// The table for lags 1..=`max_lag`.
    pub fn of(x: &[f64], max_lag: usize) -> LagPairs {
        let (mean, cv) = mean_cv(x);
        let split = (cv + 1.0) * mean;
        let large: Vec<bool> = x.iter().map(|&v| v > split).collect();
        Self::from_classes(&large, split, max_lag)
    }

    /// The table from given classes (`true` = large), for online use.
    pub fn from_classes(large: &[bool], split_s: f64, max_lag: usize) -> LagPairs {
        let n = large.len();
        let small_count = large.iter().filter(|&&l| !l).count();
        let ratio = |a: usize, b: usize| (b > 0).then(|| a as f64 / b as f64);
        let lags = (1..=max_lag)
            .map(|lag| {
                // counts[x][y] over pairs (i, i+lag)
                let mut c = [[0usize; 2]; 2];
                for i in 0..n.saturating_sub(lag) {
                    c[large[i] as usize][large[i + lag] as usize] += 1;
                }
                let from_small = c[0][0] + c[0][1];
                let from_large = c[1][0] + c[1][1];
                LagPair {
                    lag,
                    small_small: ratio(c[0][0], from_small),
                    small_large: ratio(c[0][1], from_small),
                    large_small: ratio(c[1][0], from_large),
                    large_large: ratio(c[1][1], from_large),
                }
            })
            .collect();
        LagPairs {
            split_s,
            small_fraction: if n > 0 {
                small_count as f64 / n as f64
            } else {
                0.0
            },
            lags,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_hand() {
        // classes S S L L S L (true = large)
        let c = [false, false, true, true, false, true];
        let t = LagPairs::from_classes(&c, 1.0, 2);
        // lag 1 pairs: SS, SL, LL, LS, SL -> from S: SS=1, SL=2; from L: LL=1, LS=1
        let l1 = t.lags[0];
        assert_eq!(l1.small_small, Some(1.0 / 3.0));
        assert_eq!(l1.small_large, Some(2.0 / 3.0));
        assert_eq!(l1.large_large, Some(0.5));
        assert_eq!(l1.large_small, Some(0.5));
        // lag 2 pairs: (S,L) (S,L) (L,S) (L,L)
        let l2 = t.lags[1];
        assert_eq!(l2.small_large, Some(1.0));
        assert_eq!(l2.large_small, Some(0.5));
        assert!((t.small_fraction - 0.5).abs() < 1e-12);
    }

    #[test]
    fn split_at_cv_plus_one_times_mean() {
        let x = [1.0, 1.0, 1.0, 9.0];
        let t = LagPairs::of(&x, 1);
        let (m, cv) = mean_cv(&x);
        assert!((t.split_s - (cv + 1.0) * m).abs() < 1e-12);
        assert_eq!(t.small_fraction, 0.75);
    }
}
