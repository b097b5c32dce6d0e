//! Request and byte rate over time in fixed bins: about 300 by default,
//! and never more than [`MAX_BINS`], whatever the span: a bin width asked
//! for that would give more is widened to the next "nice" width that gives
//! at most that many (the series says the width it used, `bin_s`).

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

/// Most bins a series has.
pub const MAX_BINS: u64 = 10_000;

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
        let span_ns = last.saturating_add(1);
        let bin = if bin_ns == 0 {
            nice_bin_ns(span_ns, 300)
        } else if last / bin_ns >= MAX_BINS {
            // the nice width at or above span / MAX_BINS, rounded up
            nice_bin_ns(span_ns.div_ceil(MAX_BINS), 1)
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
    fn a_narrow_bin_over_a_long_span_is_widened_to_at_most_max_bins() {
        // 2 requests 584 years apart, 1 ns bins asked for
        let r = RateSeries::of(&[0, u64::MAX - 1], &[4096, 512], 1);
        assert!(r.start_s.len() as u64 <= MAX_BINS, "{}", r.start_s.len());
        // u64::MAX / 10^4 = 1.8e15 ns: the nice width above it is 2e15 ns
        assert_eq!(r.bin_s, 2e6);
        let total: f64 = r.requests_per_s.iter().map(|x| x * r.bin_s).sum();
        assert!((total - 2.0).abs() < 1e-9);
        // a width that fits is kept
        let r = RateSeries::of(&[0, 999], &[1, 1], 100);
        assert_eq!((r.bin_s, r.start_s.len()), (100e-9, 10));
    }

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
