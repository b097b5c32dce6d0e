//! Periodicity of the request rate by one-way ANOVA (Practical Scrubbing
//! §V-A, Fig. 9): bin arrivals into hourly counts; for each candidate period
//! P (in hours) group the counts by hour-of-period (h mod P) and test whether
//! the group means differ. The period with the smallest p-value (largest F
//! on ties) is the strongest; none below 1 % means no periodicity.
//!
//! The hourly counts scale with the data, not with the span: they cover at
//! most the first [`MAX_HOURS`] hours (52 weeks: the longest candidate,
//! 168 h, repeats 52 times), and a trace with fewer requests than hours in
//! that window (most hours empty: the counts say nothing about a cycle) is
//! not tested. A 2-request trace spanning 584 years once produced 5 million
//! counts (46 MB of JSON, 14 s); it now has none.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, FisherSnedecor};

const HOUR_NS: u64 = 3_600_000_000_000;
/// Most hourly counts kept and tested: 52 weeks.
pub const MAX_HOURS: usize = 52 * 168;
/// p-value below which a period counts as detected.
pub const SIGNIFICANCE: f64 = 0.01;

/// The test of one candidate period.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PeriodTest {
    /// Candidate period, hours.
    pub period_h: u32,
    /// F statistic.
    pub f: f64,
    /// p-value of F under "no periodic effect".
    pub p_value: f64,
}

/// Result of the periodicity analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Periodicity {
    /// Hourly request counts the test ran on (at most [`MAX_HOURS`]: the
    /// trace's first hours when it is longer).
    pub hourly_counts: Vec<u64>,
    /// Strongest significant period, hours (`None`: no periodicity found).
    pub best_period_h: Option<u32>,
    /// Every candidate tested.
    pub candidates: Vec<PeriodTest>,
}

/// One-way ANOVA F and p-value of `counts` grouped by index mod `period`.
pub fn anova_period(counts: &[u64], period: usize) -> Option<PeriodTest> {
    let n = counts.len();
    if period < 2 || n < 2 * period || n <= period {
        return None;
    }
    let grand = counts.iter().sum::<u64>() as f64 / n as f64;
    let mut sum = vec![0.0; period];
    let mut cnt = vec![0usize; period];
    for (i, &c) in counts.iter().enumerate() {
        sum[i % period] += c as f64;
        cnt[i % period] += 1;
    }
    let means: Vec<f64> = sum.iter().zip(&cnt).map(|(s, &c)| s / c as f64).collect();
    let ssb: f64 = means
        .iter()
        .zip(&cnt)
        .map(|(m, &c)| c as f64 * (m - grand).powi(2))
        .sum();
    let ssw: f64 = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| (c as f64 - means[i % period]).powi(2))
        .sum();
    let (df1, df2) = ((period - 1) as f64, (n - period) as f64);
    let (f, p_value) = if ssw <= 0.0 {
        if ssb > 0.0 {
            (f64::INFINITY, 0.0)
        } else {
            (0.0, 1.0)
        }
    } else {
        let f = (ssb / df1) / (ssw / df2);
        let dist = FisherSnedecor::new(df1, df2).ok()?;
        (f, (1.0 - dist.cdf(f)).clamp(0.0, 1.0))
    };
    Some(PeriodTest {
        period_h: period as u32,
        f,
        p_value,
    })
}

impl Periodicity {
    /// Test periods of 2..=168 hours that fit at least twice in the
    /// trace's first [`MAX_HOURS`] hours; `None` for traces shorter than 4
    /// hours or with fewer requests than hours (see the module documentation).
    pub fn of(arrival_ns: &[u64]) -> Option<Periodicity> {
        let last = *arrival_ns.iter().max()?;
        let span_hours = last / HOUR_NS + 1;
        if span_hours < 4 {
            return None;
        }
        let hours = span_hours.min(MAX_HOURS as u64) as usize;
        let mut counts = vec![0u64; hours];
        for &a in arrival_ns {
            if let Some(c) = counts.get_mut((a / HOUR_NS) as usize) {
                *c += 1;
            }
        }
        // drop a final partial hour: it would look like a quiet hour (a
        // trace cut at MAX_HOURS goes on, so its last hour kept is whole)
        if hours as u64 == span_hours && last % HOUR_NS != 0 && hours > 4 {
            counts.pop();
        }
        if counts.iter().sum::<u64>() < counts.len() as u64 {
            return None;
        }
        let candidates: Vec<PeriodTest> = (2..=168.min(counts.len() / 2))
            .filter_map(|p| anova_period(&counts, p))
            .collect();
        let best_period_h = candidates
            .iter()
            .filter(|t| t.p_value < SIGNIFICANCE)
            .min_by(|a, b| a.p_value.total_cmp(&b.p_value).then(b.f.total_cmp(&a.f)))
            .map(|t| t.period_h);
        Some(Periodicity {
            hourly_counts: counts,
            best_period_h,
            candidates,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f_by_hand() {
        // period 2: groups {1,3,1,3}? counts = [1,5,3,7] -> groups [1,3] mean 2, [5,7] mean 6
        let t = anova_period(&[1, 5, 3, 7], 2).unwrap();
        // grand 4; ssb = 2*(4)+2*(4) = 16; ssw = 1+1+1+1 = 4; F = (16/1)/(4/2) = 8
        assert!((t.f - 8.0).abs() < 1e-12);
        // F(1,2) survival at 8: 1 - 2/pi*atan... use closed form: p = 1 - sqrt(8/(8+2)) = 0.1056
        assert!(
            (t.p_value - (1.0 - (8.0f64 / 10.0).sqrt())).abs() < 1e-9,
            "{}",
            t.p_value
        );
    }

    #[test]
    fn finds_a_daily_cycle() {
        // 7 days, busy from 9 to 17 each day, plus deterministic jitter
        let mut arrivals = vec![];
        for h in 0..(7 * 24u64) {
            let busy = (9..17).contains(&(h % 24));
            let n = if busy {
                200 + (h * 37 % 20)
            } else {
                10 + (h * 13 % 7)
            };
            for i in 0..n {
                arrivals.push(h * HOUR_NS + i * (HOUR_NS / n));
            }
        }
        let p = Periodicity::of(&arrivals).unwrap();
        assert_eq!(p.best_period_h.map(|b| b % 24), Some(0));
    }

    #[test]
    fn counts_scale_with_the_data_not_the_span() {
        // two requests 584 years apart
        assert_eq!(Periodicity::of(&[0, u64::MAX - 1]), None);
        // sparse: 100 requests over a week (168 hours) say nothing hourly
        let sparse: Vec<u64> = (0..100).map(|i| i * 168 * HOUR_NS / 100).collect();
        assert_eq!(Periodicity::of(&sparse), None);
        // two years of a daily cycle: the first 52 weeks are tested, and found
        let mut arrivals = vec![];
        for h in 0..(2 * 365 * 24u64) {
            let n = if (9..17).contains(&(h % 24)) {
                20
            } else {
                2 + h % 3
            };
            arrivals.extend((0..n).map(|i| h * HOUR_NS + i * (HOUR_NS / n)));
        }
        let p = Periodicity::of(&arrivals).unwrap();
        assert_eq!(p.hourly_counts.len(), MAX_HOURS);
        // hour 24·7 + 10 is a busy hour of day 8: 20 requests
        assert_eq!(p.hourly_counts[24 * 7 + 10], 20);
        assert_eq!(p.best_period_h.map(|b| b % 24), Some(0));
    }

    #[test]
    fn constant_rate_has_no_period() {
        let arrivals: Vec<u64> = (0..(48 * 60)).map(|m| m * 60_000_000_000).collect();
        let p = Periodicity::of(&arrivals).unwrap();
        assert_eq!(p.best_period_h, None);
    }
}
