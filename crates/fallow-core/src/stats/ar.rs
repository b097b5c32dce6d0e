//! AR(p) model of a sequence by Yule–Walker (Levinson–Durbin), with the
//! order chosen by AIC = n·ln σ²_p + 2p (Practical Scrubbing §V-B uses
//! AR(p) to predict the next idle interval).

use super::acf::autocovariance;
use serde::Serialize;

/// A fitted AR(p) model: x_t − μ = Σ φ_i (x_{t−i} − μ) + ε_t.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArFit {
    /// Chosen order p (0 = white noise around the mean).
    pub order: usize,
    /// φ_1..φ_p.
    pub coefficients: Vec<f64>,
    /// μ, the sample mean.
    pub mean: f64,
    /// Innovation variance σ²_p.
    pub noise_variance: f64,
    /// AIC for orders 0..=max_order.
    pub aic: Vec<f64>,
}

impl ArFit {
    /// Fit orders 0..=max_order and keep the one with the smallest AIC.
    /// `None` when the sequence is too short or constant.
    pub fn by_aic(x: &[f64], max_order: usize) -> Option<ArFit> {
        let n = x.len();
        if n < 2 * max_order + 10 {
            return None;
        }
        let g = autocovariance(x, max_order);
        if g[0] <= 0.0 {
            return None;
        }
        // Levinson–Durbin recursion
        let mut phi: Vec<Vec<f64>> = vec![vec![]];
        let mut var = vec![g[0]];
        for k in 1..=max_order {
            let prev = &phi[k - 1];
            let num = g[k] - (1..k).map(|j| prev[j - 1] * g[k - j]).sum::<f64>();
            let refl = num / var[k - 1];
            let mut cur = vec![0.0; k];
            for j in 1..k {
                cur[j - 1] = prev[j - 1] - refl * prev[k - j - 1];
            }
            cur[k - 1] = refl;
            var.push(var[k - 1] * (1.0 - refl * refl));
            phi.push(cur);
        }
        let aic: Vec<f64> = var
            .iter()
            .enumerate()
            .map(|(p, v)| n as f64 * v.max(f64::MIN_POSITIVE).ln() + 2.0 * p as f64)
            .collect();
        let order = (0..aic.len())
            .min_by(|&a, &b| aic[a].total_cmp(&aic[b]))
            .unwrap_or(0);
        Some(ArFit {
            order,
            coefficients: phi[order].clone(),
            mean: x.iter().sum::<f64>() / n as f64,
            noise_variance: var[order],
            aic,
        })
    }

    /// One-step prediction from the most recent values (last = newest).
    pub fn predict(&self, history: &[f64]) -> f64 {
        let mut y = self.mean;
        for (i, phi) in self.coefficients.iter().enumerate() {
            if let Some(v) = history.len().checked_sub(i + 1).map(|k| history[k]) {
                y += phi * (v - self.mean);
            }
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    #[test]
    fn recovers_ar2() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(8);
        let e = Normal::new(0.0, 1.0).unwrap();
        let mut x = vec![0.0, 0.0];
        for t in 2..50_000 {
            let v = 0.5 * x[t - 1] - 0.3 * x[t - 2] + e.sample(&mut rng);
            x.push(v);
        }
        let fit = ArFit::by_aic(&x, 8).unwrap();
        assert!(fit.order >= 2, "order {}", fit.order);
        assert!(
            (fit.coefficients[0] - 0.5).abs() < 0.03,
            "{:?}",
            fit.coefficients
        );
        assert!(
            (fit.coefficients[1] + 0.3).abs() < 0.03,
            "{:?}",
            fit.coefficients
        );
        assert!((fit.noise_variance - 1.0).abs() < 0.05);
    }

    #[test]
    fn white_noise_picks_low_order() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(2);
        let e = Normal::new(5.0, 1.0).unwrap();
        let x: Vec<f64> = (0..20_000).map(|_| e.sample(&mut rng)).collect();
        let fit = ArFit::by_aic(&x, 8).unwrap();
        assert!(fit.order <= 2, "order {}", fit.order);
        assert!((fit.predict(&x) - 5.0).abs() < 0.1);
    }

    #[test]
    fn too_short_is_none() {
        assert!(ArFit::by_aic(&[1.0, 2.0, 3.0], 5).is_none());
    }
}
