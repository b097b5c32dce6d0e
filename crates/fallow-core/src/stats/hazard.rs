//! The hazard-rate view of idle intervals (Practical Scrubbing §V-A,
//! Figs. 11–13): having waited x, how much longer will the device stay idle
//! (mean and 1st percentile), and what fraction of all idle time is still
//! usable by a policy that waits x before starting.

use super::summary::{percentile_sorted, sorted};
use serde::Serialize;

/// Remaining idle time as a function of time already waited.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Remaining {
    /// Time already idle, seconds (log-spaced).
    pub waited_s: Vec<f64>,
    /// E[L − x | L > x], seconds (`null` once no interval is that long).
    pub expected_s: Vec<Option<f64>>,
    /// 1st percentile of L − x given L > x, seconds: in 99 % of cases at
    /// least this much idle time remains.
    pub p1_s: Vec<Option<f64>>,
    /// Σ max(L − x, 0) / Σ L: idle time left to a policy that waits x.
    pub usable_fraction: Vec<f64>,
    /// Fraction of intervals longer than x.
    pub surviving_fraction: Vec<f64>,
}

impl Remaining {
    /// Evaluate at up to `points` waits from the shortest to the longest interval.
    pub fn of(x: &[f64], points: usize) -> Remaining {
        let s = sorted(x);
        let Some(&max) = s.last() else {
            return Remaining::default();
        };
        let min_pos = s.iter().copied().find(|&v| v > 0.0).unwrap_or(max);
        let grid = super::log_grid(min_pos / 10.0, max, points);
        // suffix sums: tail[k] = Σ s[k..]
        let mut tail = vec![0.0; s.len() + 1];
        for k in (0..s.len()).rev() {
            tail[k] = tail[k + 1] + s[k];
        }
        let total = tail[0];
        let n = s.len() as f64;
        let mut r = Remaining::default();
        for &w in &grid {
            let k = s.partition_point(|&v| v <= w); // first index with L > w
            let m = s.len() - k;
            r.waited_s.push(w);
            if m == 0 {
                r.expected_s.push(None);
                r.p1_s.push(None);
                r.usable_fraction.push(0.0);
            } else {
                let rest = tail[k] - w * m as f64;
                r.expected_s.push(Some(rest / m as f64));
                r.p1_s.push(Some(percentile_sorted(&s[k..], 1.0) - w));
                r.usable_fraction
                    .push(if total > 0.0 { rest / total } else { 0.0 });
            }
            r.surviving_fraction.push(m as f64 / n);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_hand() {
        // intervals 1, 2, 3, 10; waiting 2.5 leaves 3 and 10 -> remaining 0.5 and 7.5
        let r = Remaining::of(&[1.0, 2.0, 3.0, 10.0], 50);
        let i = r.waited_s.iter().position(|&w| w > 2.5 && w < 3.0).unwrap();
        let w = r.waited_s[i];
        let exp = ((3.0 - w) + (10.0 - w)) / 2.0;
        assert!((r.expected_s[i].unwrap() - exp).abs() < 1e-9);
        assert!((r.usable_fraction[i] - ((3.0 - w) + (10.0 - w)) / 16.0).abs() < 1e-9);
        assert_eq!(r.surviving_fraction[i], 0.5);
        // p1 of {3-w, 10-w}: 3-w + 0.01*(7)
        assert!((r.p1_s[i].unwrap() - (3.0 - w + 0.07)).abs() < 1e-9);
        assert_eq!(*r.expected_s.last().unwrap(), None);
    }

    #[test]
    fn exponential_is_memoryless() {
        // For exponential intervals the expected remaining time stays at the mean.
        use rand::SeedableRng;
        use rand_distr::{Distribution, Exp};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let d = Exp::new(1.0).unwrap();
        let x: Vec<f64> = (0..200_000).map(|_| d.sample(&mut rng)).collect();
        let r = Remaining::of(&x, 100);
        for (w, e) in r.waited_s.iter().zip(&r.expected_s) {
            if *w < 3.0 {
                assert!((e.unwrap() - 1.0).abs() < 0.05, "at {w}: {e:?}");
            }
        }
    }
}
