//! The two-state Markov-modulated Poisson process (MMPP2): the moments and
//! autocorrelation of its inter-arrival times, and the fit from three
//! numbers a user can reason about — mean rate, CV of inter-arrival times
//! and burst length.
//!
//! ## Moments
//! An MMPP2 with arrival rates λ₁, λ₂ and rates r₁, r₂ of leaving state 1
//! and 2 is the Markovian arrival process (D₀, D₁) with
//! `D₀ = [[−(λ₁+r₁), r₁], [r₂, −(λ₂+r₂)]]`, `D₁ = diag(λ₁, λ₂)`. With
//! `M = (−D₀)⁻¹`, the phase at an arrival `φ = π D₁ / λ̄` (π the stationary
//! phase, λ̄ = π·λ) and `P = M D₁` (the phase from one arrival to the next):
//!
//! - `E[X^k] = k! φ M^k 1`;
//! - `E[X₀ X_j] = φ M P^j M 1`, so the lag-j autocorrelation of
//!   inter-arrival times is `ρ_j = ρ₁ γ^{j−1}`, where γ = trace(P) − 1 is
//!   P's second eigenvalue (Fischer & Meier-Hellstern, *The MMPP cookbook*,
//!   1993, §3; Casale et al., *KPC-Toolbox*, 2008).
//!
//! ## The fit (`mmpp:cv=C,burst=B`)
//! Four parameters, three targets, so one choice is ours: both states hold
//! half of the time (r₁ = r₂ = r). That is the *balanced-means* choice of
//! the two-phase hyperexponential ([`super::ArrivalProcess::Hyperexponential`]):
//! when switching is slow the MMPP's inter-arrival time tends to exactly that
//! H₂, and the MMPP adds the ordering — gaps of the fast state follow one
//! another, then gaps of the slow state do.
//!
//! - mean rate λ̄: λ₁ + λ₂ = 2λ̄;
//! - burst B: the mean number of arrivals in one visit to the fast state,
//!   B = λ₁ / r. A longer burst means slower switching and a stronger, longer
//!   correlation between successive gaps (Mi et al. §3.2: large gaps come in
//!   runs);
//! - CV C: the SCV of the inter-arrival time, from the moments above, grows
//!   monotonically from 1 (λ₁ = λ̄, Poisson) towards 1 + B/2 (λ₂ → 0, an
//!   interrupted Poisson process whose SCV is 1 + 2λ₁r/(2r)²); λ₁ is found by
//!   bisection. So a fit exists iff B > 2(C² − 1): CV 9 needs bursts of more
//!   than 160 arrivals. Near that bound the process is almost an interrupted
//!   Poisson process, which is a renewal process: gaps are then barely
//!   correlated. For clearly bursty sequences take B several times the bound.

use crate::error::{Error, Result};

/// Inter-arrival statistics of an MMPP2, from the closed forms above.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mmpp2Stats {
    /// Mean inter-arrival time, seconds (1/λ̄).
    pub mean_s: f64,
    /// Coefficient of variation of inter-arrival times.
    pub cv: f64,
    /// Lag-1 autocorrelation of successive inter-arrival times.
    pub lag1: f64,
    /// Ratio of successive autocorrelations (ρ_{j+1} = decay · ρ_j).
    pub decay: f64,
}

/// Statistics of the MMPP2 with `rate_per_s` (λ₁, λ₂) and `switch_per_s`
/// (r₁, r₂, rates of leaving state 1 and 2). Rates must be valid (switch
/// rates positive, mean rate positive).
pub fn mmpp2_stats(rate_per_s: [f64; 2], switch_per_s: [f64; 2]) -> Mmpp2Stats {
    let [l1, l2] = rate_per_s;
    let [r1, r2] = switch_per_s;
    let (a, b) = (l1 + r1, l2 + r2);
    let det = a * b - r1 * r2;
    // M = (−D₀)⁻¹ = [[b, r1], [r2, a]] / det
    let m = [[b / det, r1 / det], [r2 / det, a / det]];
    let pi = [r2 / (r1 + r2), r1 / (r1 + r2)];
    let mean_rate = pi[0] * l1 + pi[1] * l2;
    let phi = [pi[0] * l1 / mean_rate, pi[1] * l2 / mean_rate];
    let mul = |v: [f64; 2]| {
        [
            m[0][0] * v[0] + m[0][1] * v[1],
            m[1][0] * v[0] + m[1][1] * v[1],
        ]
    };
    let dot = |x: [f64; 2], y: [f64; 2]| x[0] * y[0] + x[1] * y[1];
    let u = mul([1.0, 1.0]); // M 1
    let m1 = dot(phi, u);
    let m2 = 2.0 * dot(phi, mul(u));
    let var = (m2 - m1 * m1).max(0.0);
    // P = M D₁; φ M is a row vector
    let p = [[m[0][0] * l1, m[0][1] * l2], [m[1][0] * l1, m[1][1] * l2]];
    let pu = [
        p[0][0] * u[0] + p[0][1] * u[1],
        p[1][0] * u[0] + p[1][1] * u[1],
    ];
    let phi_m = [
        phi[0] * m[0][0] + phi[1] * m[1][0],
        phi[0] * m[0][1] + phi[1] * m[1][1],
    ];
    let lag1 = if var > 0.0 {
        (dot(phi_m, pu) - m1 * m1) / var
    } else {
        0.0
    };
    Mmpp2Stats {
        mean_s: m1,
        cv: var.sqrt() / m1,
        lag1,
        decay: p[0][0] + p[1][1] - 1.0,
    }
}

/// Fit an MMPP2 with both states holding half the time to a mean rate, an
/// inter-arrival CV and a burst length (mean arrivals per visit to the fast
/// state); see the module documentation. Returns (rates, switch rates).
pub fn fit_mmpp2(mean_rate_per_s: f64, cv: f64, burst: f64) -> Result<([f64; 2], [f64; 2])> {
    if !(mean_rate_per_s.is_finite() && mean_rate_per_s > 0.0) {
        return Err(Error::invalid(
            "arrival rate",
            format!("must be positive and finite, got {mean_rate_per_s}"),
        ));
    }
    if !(cv.is_finite() && cv >= 1.0) {
        return Err(Error::invalid(
            "mmpp cv",
            format!("an MMPP has inter-arrival CV >= 1, got {cv} (use erlang for CV < 1)"),
        ));
    }
    if !(burst.is_finite() && burst > 0.0) {
        return Err(Error::invalid(
            "mmpp burst",
            format!("must be a positive number of arrivals, got {burst}"),
        ));
    }
    let bound = 2.0 * (cv * cv - 1.0);
    if cv > 1.0 && burst <= bound * (1.0 + 1e-9) {
        return Err(Error::invalid(
            "mmpp burst",
            format!(
                "cv={cv} needs burst > 2(cv²−1) = {bound} arrivals per burst (got {burst}); \
                 take several times that for clearly correlated gaps"
            ),
        ));
    }
    // Unit mean rate: λ₁ = x, λ₂ = 2 − x, r = x / B; the SCV grows with x.
    let scv = |x: f64| {
        let r = x / burst;
        mmpp2_stats([x, 2.0 - x], [r, r]).cv.powi(2)
    };
    let target = cv * cv;
    let (mut lo, mut hi) = (1.0f64, 2.0f64);
    if cv > 1.0 {
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if scv(mid) < target {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo < 1e-15 {
                break;
            }
        }
    } else {
        hi = 1.0;
    }
    let x = 0.5 * (lo + hi);
    let r = x / burst * mean_rate_per_s;
    Ok(([x * mean_rate_per_s, (2.0 - x) * mean_rate_per_s], [r, r]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_limit() {
        // equal rates: a Poisson process whatever the switching
        let s = mmpp2_stats([3.0, 3.0], [0.5, 2.0]);
        assert!((s.mean_s - 1.0 / 3.0).abs() < 1e-12);
        assert!((s.cv - 1.0).abs() < 1e-12);
        assert!(s.lag1.abs() < 1e-12);
    }

    #[test]
    fn interrupted_poisson_is_hyperexponential() {
        // IPP (λ₂ = 0): SCV = 1 + 2λr₁/(r₁+r₂)² (Fischer & Meier-Hellstern),
        // and it is a renewal process: no correlation between gaps.
        let (l, r1, r2) = (10.0, 0.5, 1.5);
        let s = mmpp2_stats([l, 0.0], [r1, r2]);
        let scv = 1.0 + 2.0 * l * r1 / (r1 + r2).powi(2);
        assert!((s.cv * s.cv - scv).abs() < 1e-9, "{} vs {scv}", s.cv * s.cv);
        assert!(s.lag1.abs() < 1e-12, "{}", s.lag1);
        // mean gap: 1/λ̄ with λ̄ = π₁λ = r₂/(r₁+r₂)·λ
        assert!((s.mean_s - (r1 + r2) / (r2 * l)).abs() < 1e-12);
    }

    #[test]
    fn fit_hits_its_targets() {
        for (cv, burst) in [(3.0, 48.0), (3.0, 1000.0), (9.0, 1000.0), (1.5, 10.0)] {
            let (rates, sw) = fit_mmpp2(0.25, cv, burst).unwrap();
            let s = mmpp2_stats(rates, sw);
            assert!(
                (s.mean_s - 4.0).abs() < 1e-9,
                "{cv} {burst}: mean {}",
                s.mean_s
            );
            assert!((s.cv - cv).abs() < 1e-9, "{cv} {burst}: cv {}", s.cv);
            assert!((rates[0] / sw[0] - burst).abs() < 1e-6 * burst);
            assert_eq!(sw[0], sw[1]);
            assert!(s.lag1 > 0.0 && s.decay > 0.0 && s.decay < 1.0);
        }
        // longer bursts: stronger correlation
        let lag1 = |b| {
            let (r, s) = fit_mmpp2(1.0, 3.0, b).unwrap();
            mmpp2_stats(r, s).lag1
        };
        assert!(lag1(24.0) < lag1(48.0) && lag1(48.0) < lag1(1000.0));
    }

    #[test]
    fn infeasible_fits_say_why() {
        let e = fit_mmpp2(1.0, 9.0, 100.0).unwrap_err().to_string();
        assert!(e.contains("160"), "{e}");
        assert!(fit_mmpp2(1.0, 0.5, 100.0).is_err());
        assert!(fit_mmpp2(0.0, 2.0, 100.0).is_err());
        // CV 1 is Poisson
        let (r, _) = fit_mmpp2(2.0, 1.0, 5.0).unwrap();
        assert_eq!(r, [2.0, 2.0]);
    }
}
