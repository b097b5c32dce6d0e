//! How concentrated idle time is in the longest intervals (Practical
//! Scrubbing §V-A, Fig. 10): the x % longest intervals hold y % of all idle time.

use super::summary::sorted;
use serde::Serialize;

/// Share of idle time in the longest intervals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Concentration {
    /// Percentage of intervals, longest first (0–100].
    pub top_percent: Vec<f64>,
    /// Fraction of total idle time they hold.
    pub idle_fraction: Vec<f64>,
    /// Fraction of idle time in the longest 10 % of intervals.
    pub top10_fraction: f64,
    /// Smallest percentage of intervals that holds 80 % of idle time.
    pub percent_for_80: f64,
}

impl Concentration {
    /// Evaluate at up to `points` percentages (log-spaced, so the steep start is visible).
    pub fn of(x: &[f64], points: usize) -> Concentration {
        let mut s = sorted(x);
        s.reverse();
        let n = s.len();
        if n == 0 {
            return Concentration::default();
        }
        let mut cum = Vec::with_capacity(n + 1);
        cum.push(0.0);
        for v in &s {
            cum.push(cum.last().copied().unwrap_or(0.0) + v);
        }
        let total = cum[n];
        let frac_top = |count: usize| if total > 0.0 { cum[count] / total } else { 0.0 };
        let count_for = |pct: f64| (((pct / 100.0) * n as f64).ceil() as usize).clamp(1, n);
        let pct_grid = super::log_grid((100.0 / n as f64).min(100.0), 100.0, points);
        let percent_for_80 = match cum.iter().position(|&c| total > 0.0 && c >= 0.8 * total) {
            Some(k) => 100.0 * k as f64 / n as f64,
            None => 100.0,
        };
        Concentration {
            idle_fraction: pct_grid.iter().map(|&p| frac_top(count_for(p))).collect(),
            top_percent: pct_grid,
            top10_fraction: frac_top(count_for(10.0)),
            percent_for_80,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_hand() {
        // ten intervals: one of 91, nine of 1 -> total 100
        let mut x = vec![1.0; 9];
        x.push(91.0);
        let c = Concentration::of(&x, 20);
        assert!((c.top10_fraction - 0.91).abs() < 1e-12);
        assert!((c.percent_for_80 - 10.0).abs() < 1e-12);
        assert!((c.idle_fraction.last().unwrap() - 1.0).abs() < 1e-12);
        // monotone
        assert!(c.idle_fraction.windows(2).all(|w| w[0] <= w[1]));
    }
}
