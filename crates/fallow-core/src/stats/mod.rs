//! Characterisation of idle intervals and busy periods, one analysis per
//! file. Every function takes plain slices (seconds as `f64`, or the
//! integer columns) so it can be tested against hand calculations and
//! reused by the simulator and Python.

mod acf;
mod anova;
mod ar;
mod busy;
mod concentration;
mod hazard;
mod lag_pairs;
mod rate;
mod summary;

pub use acf::Acf;
pub use anova::{PeriodTest, Periodicity};
pub use ar::ArFit;
pub use busy::{busy_clusters, busy_clusters_with, BusyClusters, ThresholdRule};
pub use concentration::Concentration;
pub use hazard::Remaining;
pub use lag_pairs::{LagPair, LagPairs};
pub use rate::RateSeries;
pub use summary::{mean_cv, percentile_sorted, Cdf, Summary};

/// `n` points spaced evenly in log scale over `[lo, hi]` (both > 0).
pub(crate) fn log_grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    // written to also reject NaN
    if n == 0 || lo.is_nan() || hi.is_nan() || lo <= 0.0 || hi < lo {
        return Vec::new();
    }
    if n == 1 || hi == lo {
        return vec![lo];
    }
    let (a, b) = (lo.ln(), hi.ln());
    let mut g: Vec<f64> = (0..n)
        .map(|i| (a + (b - a) * i as f64 / (n - 1) as f64).exp())
        .collect();
    // exact endpoints: exp(ln(x)) can land just below x
    g[0] = lo;
    g[n - 1] = hi;
    g
}
