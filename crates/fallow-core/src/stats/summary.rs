//! Count, mean, CV, percentiles and the empirical CDF of a sample.

use serde::Serialize;

/// Summary statistics of a sample of durations in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Sum, seconds.
    pub total_s: f64,
    /// Mean, seconds (0 for an empty sample).
    pub mean_s: f64,
    /// Population standard deviation, seconds.
    pub std_s: f64,
    /// Coefficient of variation: std / mean.
    pub cv: f64,
    /// Smallest, seconds.
    pub min_s: f64,
    /// Median, seconds.
    pub p50_s: f64,
    /// 90th percentile, seconds.
    pub p90_s: f64,
    /// 99th percentile, seconds.
    pub p99_s: f64,
    /// 99.9th percentile, seconds.
    pub p999_s: f64,
    /// Largest, seconds.
    pub max_s: f64,
}

/// Mean and CV (population standard deviation over mean) of a sample.
pub fn mean_cv(x: &[f64]) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
    (mean, cv)
}

/// Percentile `q` in [0, 100] of sorted data, interpolating linearly between
/// order statistics (numpy's default, "type 7").
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let h = (n - 1) as f64 * (q / 100.0).clamp(0.0, 1.0);
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
        }
    }
}

pub(crate) fn sorted(x: &[f64]) -> Vec<f64> {
    let mut s = x.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

impl Summary {
    /// Summarise a sample (seconds).
    pub fn of(x: &[f64]) -> Summary {
        if x.is_empty() {
            return Summary::default();
        }
        let s = sorted(x);
        let (mean, cv) = mean_cv(x);
        Summary {
            count: x.len() as u64,
            total_s: x.iter().sum(),
            mean_s: mean,
            std_s: cv * mean,
            cv,
            min_s: s[0],
            p50_s: percentile_sorted(&s, 50.0),
            p90_s: percentile_sorted(&s, 90.0),
            p99_s: percentile_sorted(&s, 99.0),
            p999_s: percentile_sorted(&s, 99.9),
            max_s: *s.last().expect("non-empty"),
        }
    }
}

/// Empirical CDF sampled at log-spaced points from the smallest to the
/// largest value: `cdf[i]` = fraction of values ≤ `x_s[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cdf {
    /// Points, seconds.
    pub x_s: Vec<f64>,
    /// Fraction of values at or below each point.
    pub cdf: Vec<f64>,
    /// Mean of the sample, so plots can normalise x by it (Mi et al. Fig. 1).
    pub mean_s: f64,
}

impl Cdf {
    /// The CDF of `x` at up to `points` points.
    pub fn of(x: &[f64], points: usize) -> Cdf {
        let s = sorted(x);
        let Some(&max) = s.last() else {
            return Cdf::default();
        };
        let min_pos = s.iter().copied().find(|&v| v > 0.0).unwrap_or(max);
        let x_s = super::log_grid(min_pos, max, points);
        let n = s.len() as f64;
        let cdf = x_s
            .iter()
            .map(|&p| s.partition_point(|&v| v <= p) as f64 / n)
            .collect();
        Cdf {
            x_s,
            cdf,
            mean_s: s.iter().sum::<f64>() / n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_by_hand() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 10.0]);
        assert_eq!(s.count, 5);
        assert_eq!(s.mean_s, 4.0);
        // var = (9+4+1+0+36)/5 = 10
        assert!((s.cv - 10f64.sqrt() / 4.0).abs() < 1e-12);
        assert_eq!(s.p50_s, 3.0);
        // h = 4*0.9 = 3.6 -> 4 + 0.6*6 = 7.6
        assert!((s.p90_s - 7.6).abs() < 1e-12);
        assert_eq!((s.min_s, s.max_s, s.total_s), (1.0, 10.0, 20.0));
    }

    #[test]
    fn cdf_counts() {
        let c = Cdf::of(&[1.0, 1.0, 1.5, 8.0], 4);
        // grid 1, 2, 4, 8
        assert_eq!(c.x_s.len(), 4);
        assert!((c.x_s[2] - 4.0).abs() < 1e-9);
        assert_eq!(c.cdf, vec![0.5, 0.75, 0.75, 1.0]);
    }
}
