//! Distributions given by a mean and a coefficient of variation, shared by
//! the service models ([`crate::service`]) and the synthetic arrival
//! processes ([`crate::workload`]): one parameterisation, so `cv=4` means
//! the same thing for a service time and for an inter-arrival time.

use crate::error::{Error, Result};
use rand_distr::LogNormal;

/// Seed of every random stream when not given: the one value behind
/// `sim::DEFAULT_SEED`, every `--seed` and every `seed=` keyword.
pub const DEFAULT_SEED: u64 = 1;

/// The lognormal distribution with this mean and CV (σ² = ln(1 + CV²),
/// μ = ln(mean) − σ²/2).
pub fn lognormal(mean: f64, cv: f64) -> Result<LogNormal<f64>> {
    let sigma2 = (1.0 + cv * cv).ln();
    let mu = mean.ln() - sigma2 / 2.0;
    LogNormal::new(mu, sigma2.sqrt()).map_err(|e| Error::invalid("lognormal", e.to_string()))
}

/// Two-phase hyperexponential with balanced means and this CV (≥ 1): phase
/// 1 is taken with probability p and has mean `mean/(2p)`, phase 2 has mean
/// `mean/(2(1−p))`, where p = (1 + √((c²−1)/(c²+1)))/2 (balanced means:
/// p·mean₁ = (1−p)·mean₂). Returns (p, mean₁, mean₂).
pub fn h2_balanced(mean: f64, cv: f64) -> (f64, f64, f64) {
    let c2 = cv * cv;
    let p = 0.5 * (1.0 + ((c2 - 1.0) / (c2 + 1.0)).sqrt());
    (p, mean / (2.0 * p), mean / (2.0 * (1.0 - p)))
}
