//! Request and byte rate over time in fixed bins.

use serde::Serialize;

/// Rates per bin.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RateSeries {
    /// Bin width, seconds.
    pub bin_s: f64,
    /// Start of each bin, seconds since the first arrival.
    pub start_s: Vec<f64>,
    /// Requests per second in each bin.
    pub requests_per_s: Vec<f64>,
    /// Bytes per second in each bin.
    pub bytes_per_s: Vec<f64>,
}

/// A "nice" bin width (1, 2, 5 × 10^k ns) giving at most ~`target` bins.
fn nice_bin_ns(span_ns: u64, target: u64) -> u64 {
    let raw = (span_ns / target).max(1);
    let mut p = 1u64;
    while p.saturating_mul(10) <= raw {
        p *= 10;
    }
    for m in [1, 2, 5, 10] {
        if p.saturating_mul(m) >= raw {
            return p.saturating_mul(m);
        }
    }
    p.saturating_mul(10)
}

impl RateSeries {
    /// Bin arrivals; `bin_ns = 0` picks a width giving about 300 bins.
    pub fn of(arrival_ns: &[u64], size_bytes: &[u32], bin_ns: u64) -> RateSeries {
        let Some(&last) = arrival_ns.last() else {
            return RateSeries::default();
        };
        let bin = if bin_ns == 0 {
            nice_bin_ns(last + 1, 300)
        } else {
            bin_ns
        };
        let bins = (last / bin) as usize + 1;
        let mut req = vec![0u64; bins];
        let mut bytes = vec![0u64; bins];
        for (&a, &s) in arrival_ns.iter().zip(size_bytes) {
            let b = (a / bin) as usize;
            req[b] += 1;
            bytes[b] += s as u64;
        }
        let bin_s = bin as f64 / 1e9;
        RateSeries {
            bin_s,
            start_s: (0..bins).map(|i| i as f64 * bin_s).collect(),
            requests_per_s: req.iter().map(|&c| c as f64 / bin_s).collect(),
            bytes_per_s: bytes.iter().map(|&c| c as f64 / bin_s).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_by_hand() {
        let r = RateSeries::of(
            &[0, 500_000_000, 1_500_000_000],
            &[100, 100, 50],
            1_000_000_000,
        );
        assert_eq!(r.requests_per_s, vec![2.0, 1.0]);
        assert_eq!(r.bytes_per_s, vec![200.0, 50.0]);
        assert_eq!(nice_bin_ns(3000, 300), 10);
        assert_eq!(nice_bin_ns(4500, 300), 20);
    }
}
