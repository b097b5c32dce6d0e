//! Sample autocorrelation function of a sequence (Practical Scrubbing §V-A).

use serde::Serialize;

/// ACF values at lags 1..=max_lag.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Acf {
    /// Lags.
    pub lags: Vec<usize>,
    /// Autocorrelation at each lag.
    pub values: Vec<f64>,
    /// ±1.96/√n: values outside are significant at 5 % for white noise.
    pub band: f64,
}

/// Biased autocovariances γ_0..γ_max_lag (divided by n), the estimator whose
/// Toeplitz matrix is positive definite, as Yule–Walker needs.
pub(crate) fn autocovariance(x: &[f64], max_lag: usize) -> Vec<f64> {
    let n = x.len();
    if n == 0 {
        return vec![];
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let d: Vec<f64> = x.iter().map(|v| v - mean).collect();
    (0..=max_lag.min(n - 1))
        .map(|k| {
            d[..n - k]
                .iter()
                .zip(&d[k..])
                .map(|(a, b)| a * b)
                .sum::<f64>()
                / n as f64
        })
        .collect()
}

impl Acf {
    /// The ACF of `x` up to `max_lag`.
    pub fn of(x: &[f64], max_lag: usize) -> Acf {
        let g = autocovariance(x, max_lag);
        if g.is_empty() || g[0] <= 0.0 {
            return Acf::default();
        }
        Acf {
            lags: (1..g.len()).collect(),
            values: g[1..].iter().map(|v| v / g[0]).collect(),
            band: 1.96 / (x.len() as f64).sqrt(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternating_sequence() {
        // 1,-1,1,-1,... : r_k = (n-k)/n * (-1)^k
        let x: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let a = Acf::of(&x, 3);
        assert!((a.values[0] + 0.9).abs() < 1e-12);
        assert!((a.values[1] - 0.8).abs() < 1e-12);
        assert!((a.values[2] + 0.7).abs() < 1e-12);
    }

    #[test]
    fn ar1_has_geometric_acf() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(4);
        let e = Normal::new(0.0, 1.0).unwrap();
        let mut x = vec![0.0];
        for _ in 0..100_000 {
            let last = *x.last().unwrap();
            x.push(0.7 * last + e.sample(&mut rng));
        }
        let a = Acf::of(&x, 3);
        for (k, v) in a.values.iter().enumerate() {
            assert!(
                (v - 0.7f64.powi(k as i32 + 1)).abs() < 0.02,
                "lag {}: {v}",
                k + 1
            );
        }
    }
}
