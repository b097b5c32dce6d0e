//! Headline findings: the few sentences a storage engineer wants from a
//! characterisation before looking at any plot. Each is derived from the
//! [`Characterization`] alone, so the terminal summary and the HTML report
//! say the same thing.

use crate::human::{corr, count, num, p_value, pct, prob, secs};
use crate::stats::Remaining;
use crate::Characterization;
use serde::Serialize;

/// One finding: a short topic label and a sentence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What it is about (`waiting`, `burstiness`, …).
    pub topic: &'static str,
    /// The sentence.
    pub text: String,
}

fn finding(topic: &'static str, text: String) -> Finding {
    Finding { topic, text }
}

/// The findings for `c`, most important first.
pub fn findings(c: &Characterization) -> Vec<Finding> {
    let mut out = Vec::new();
    let idle = &c.idle;
    if idle.count == 0 {
        out.push(finding(
            "idle time",
            "The device never fell idle between requests: there is no idle time to put to work."
                .into(),
        ));
        return out;
    }
    out.push(finding(
        "idle time",
        format!(
            "The device is busy {} of the time: {} of idle time in {} intervals over {}.",
            pct(c.utilization),
            secs(idle.total_s),
            count(idle.count),
            secs(c.trace.span_s),
        ),
    ));
    out.push(variability(c));
    if idle.count >= 10 {
        let k = &c.concentration;
        out.push(finding(
            "concentration",
            format!(
                "The longest 10 % of idle intervals hold {} of all idle time; 80 % of it sits in the longest {} of intervals.",
                pct(k.top10_fraction),
                pct(k.percent_for_80 / 100.0),
            ),
        ));
    }
    out.extend(waiting(c));
    out.extend(lag_pairs(c));
    out.extend(busy(c));
    out.extend(correlation(c));
    out.push(periodicity(c));
    out
}

fn variability(c: &Characterization) -> Finding {
    let cv = c.idle.cv;
    let text = if cv > 1.0 {
        format!(
            "Idle times are highly variable (CV {} > 1): most intervals are short and a few long ones hold most idle time, so waiting a little before starting background work pays (Mi et al.).",
            num(cv)
        )
    } else {
        format!(
            "Idle times are fairly regular (CV {} ≤ 1): the mean {} is a good guess for the next interval, and background work can start as soon as the device falls idle (Mi et al.).",
            num(cv),
            secs(c.idle.mean_s)
        )
    };
    finding("variability", text)
}

/// `y(x)` from a curve sampled at increasing `xs`, interpolating linearly in log x.
pub fn interp_log(xs: &[f64], ys: &[Option<f64>], x: f64) -> Option<f64> {
    let i = xs.partition_point(|&v| v < x);
    if i >= xs.len() {
        return None;
    }
    if xs[i] == x || i == 0 {
        return if xs[i] == x { ys[i] } else { None };
    }
    let (x0, x1) = (xs[i - 1], xs[i]);
    let (y0, y1) = (ys[i - 1]?, ys[i]?);
    if !(x0 > 0.0 && x1 > x0) {
        return Some(y1);
    }
    let t = (x.ln() - x0.ln()) / (x1.ln() - x0.ln());
    Some(y0 + t * (y1 - y0))
}

/// The 1-2-5 value nearest to `v` in log scale.
pub fn round_125(v: f64) -> f64 {
    if !(v > 0.0 && v.is_finite()) {
        return v;
    }
    let p = 10f64.powf(v.log10().floor());
    let candidates = [1.0, 2.0, 5.0, 10.0].map(|m| m * p);
    candidates
        .into_iter()
        .min_by(|a, b| (a.ln() - v.ln()).abs().total_cmp(&(b.ln() - v.ln()).abs()))
        .unwrap_or(v)
}

/// The wait the findings talk about: the median idle interval rounded to
/// 1-2-5, a wait that skips about half the intervals.
pub fn headline_wait_s(c: &Characterization) -> Option<f64> {
    let r: &Remaining = &c.remaining;
    let w = round_125(c.idle.p50_s);
    let surviving = interp_log(
        &r.waited_s,
        &r.surviving_fraction
            .iter()
            .map(|&v| Some(v))
            .collect::<Vec<_>>(),
        w,
    )?;
    (w > 0.0 && surviving >= 0.01).then_some(w)
}

fn waiting(c: &Characterization) -> Vec<Finding> {
    let r = &c.remaining;
    let Some(w) = headline_wait_s(c) else {
        return vec![];
    };
    let mut out = Vec::new();
    if let Some(e) = interp_log(&r.waited_s, &r.expected_s, w) {
        let mean = c.idle.mean_s;
        let ratio = e / mean;
        // the 1st percentile is worth quoting only when it is a sizeable
        // part of the expectation, not a few microseconds of noise
        let p1 = interp_log(&r.waited_s, &r.p1_s, w).filter(|&p| p >= 0.05 * e);
        let p1_text = p1
            .map(|p| format!(" (in 99 % of cases at least {})", secs(p)))
            .unwrap_or_default();
        let text = if ratio >= 1.2 {
            format!(
                "After {} of idleness the expected remaining idle time is {}{p1_text}, {}× the {} of a fresh interval: the longer the device has been idle, the longer it will stay idle (decreasing hazard rate).",
                secs(w), secs(e), num(ratio), secs(mean)
            )
        } else if ratio <= 0.8 {
            format!(
                "After {} of idleness the expected remaining idle time is {}, less than the {} of a fresh interval: the longer the device has been idle, the sooner the next request is due (increasing hazard rate), so waiting does not pay.",
                secs(w), secs(e), secs(mean)
            )
        } else {
            format!(
                "After {} of idleness the expected remaining idle time is {}, about the {} of a fresh interval: idle lengths are nearly memoryless.",
                secs(w), secs(e), secs(mean)
            )
        };
        out.push(finding("waiting", text));
    }
    let as_opt: Vec<Option<f64>> = r.usable_fraction.iter().map(|&v| Some(v)).collect();
    let surv: Vec<Option<f64>> = r.surviving_fraction.iter().map(|&v| Some(v)).collect();
    if let (Some(u), Some(s)) = (
        interp_log(&r.waited_s, &as_opt, w),
        interp_log(&r.waited_s, &surv, w),
    ) {
        out.push(finding(
            "waiting",
            format!(
                "Waiting {} before starting background work passes over {} of idle intervals yet keeps {} of all idle time.",
                secs(w),
                pct(1.0 - s),
                pct(u)
            ),
        ));
    }
    out
}

/// How many standard errors an observed conditional probability `p` lies
/// from the base rate `p0`, over `n` trials (normal approximation of the
/// binomial): small samples must not be reported as clustering.
fn z_score(p: f64, p0: f64, n: f64) -> f64 {
    if !(n > 0.0 && p0 > 0.0 && p0 < 1.0) {
        return 0.0;
    }
    (p - p0) / (p0 * (1.0 - p0) / n).sqrt()
}

fn lag_pairs(c: &Characterization) -> Option<Finding> {
    let lp = &c.lag_pairs;
    let first = lp.lags.first()?;
    let ll = first.large_large?;
    let base = 1.0 - lp.small_fraction;
    if base <= 0.0 {
        return None;
    }
    // pairs starting at a large interval, for the sampling error of P(large→large)
    let from_large = base * c.idle.count.saturating_sub(1) as f64;
    let z = z_score(ll, base, from_large);
    let verb = if ll >= 1.5 * base && z >= 3.0 {
        "cluster"
    } else if ll <= base / 1.5 && z <= -3.0 {
        "avoid each other"
    } else {
        "do not clearly cluster"
    };
    Some(finding(
        "burstiness",
        format!(
            "Large idle intervals (longer than {} = (CV+1)·mean, {} of all) {verb}: P(large→large) at lag 1 is {} vs {} if independent.",
            secs(lp.split_s),
            pct(base),
            prob(ll),
            prob(base)
        ),
    ))
}

fn busy(c: &Characterization) -> Option<Finding> {
    let b = &c.busy;
    if b.count < 2 {
        return None;
    }
    let t = b.clusters.threshold_requests;
    let plural = |n: u64| if n == 1 { "request" } else { "requests" };
    if b.clusters.long_fraction == 0.0 {
        return Some(finding(
            "busy periods",
            format!(
                "Busy periods are too uniform for Busy Bee's Threshold to single out long ones: none reaches it ({t} {}; mean {} requests).",
                plural(t),
                num(b.clusters.mean_requests)
            ),
        ));
    }
    if b.clusters.long_fraction >= 0.5 {
        return Some(finding(
            "busy periods",
            format!(
                "Busy periods are too uniform for Busy Bee's Threshold to single out long ones: their p90 is just {t} {}, so {} of them count as long (mean {} requests).",
                plural(t),
                pct(b.clusters.long_fraction),
                num(b.clusters.mean_requests)
            ),
        ));
    }
    let p1 = b.clusters.p_lag.first().copied().unwrap_or(0.0);
    let from_long = b.clusters.long_fraction * b.count.saturating_sub(1) as f64;
    let verb = if p1 >= 1.5 * b.clusters.long_fraction
        && z_score(p1, b.clusters.long_fraction, from_long) >= 3.0
    {
        "cluster"
    } else {
        "do not clearly cluster"
    };
    let cws = if b.clusters.cws_reached {
        format!(
            "Σ P_lag reaches 0.8 at lag {}, Busy Bee's cluster window size",
            b.clusters.cws
        )
    } else {
        format!(
            "Σ P_lag stays below 0.8 over {} lags, so the cluster window size is capped at {}",
            b.clusters.p_lag.len(),
            b.clusters.cws
        )
    };
    Some(finding(
        "busy periods",
        format!(
            "Long busy periods (≥ {t} {}, Busy Bee's Threshold) {verb}: after a long one the next is long with probability {} vs {} overall; {cws}.",
            plural(t),
            prob(p1),
            prob(b.clusters.long_fraction)
        ),
    ))
}

fn correlation(c: &Characterization) -> Option<Finding> {
    let acf = &c.acf;
    let r1 = *acf.values.first()?;
    let ar =
        c.ar.as_ref()
            .map(|a| format!("; AIC picks AR({}) to predict the next interval", a.order))
            .unwrap_or_default();
    let significant = acf.values.iter().filter(|v| v.abs() > acf.band).count();
    let lags = format!(
        "{significant} of {} lags lie outside the noise band ±{}",
        acf.values.len(),
        corr(acf.band)
    );
    let text = if r1 > acf.band {
        format!(
            "Successive idle lengths are positively correlated (ACF at lag 1 is {}; {lags}): long intervals tend to follow long ones{ar}.",
            corr(r1)
        )
    } else if r1 < -acf.band {
        format!(
            "Successive idle lengths are negatively correlated (ACF at lag 1 is {}; {lags}): a long interval tends to be followed by a short one{ar}.",
            corr(r1)
        )
    } else {
        format!(
            "Successive idle lengths are nearly uncorrelated (ACF at lag 1 is {}, inside the noise band ±{}): the last interval says little about the next{ar}.",
            corr(r1),
            corr(acf.band)
        )
    };
    Some(finding("predictability", text))
}

fn periodicity(c: &Characterization) -> Finding {
    let text = match &c.periodicity {
        None if c.trace.span_s < 4.0 * 3600.0 => format!(
            "The trace spans {}, too short to test for periodic load (at least 4 hours are needed).",
            secs(c.trace.span_s)
        ),
        // crate::stats::anova: hourly counts only where they mean something
        None => format!(
            "{} requests over {} are fewer than one an hour: too sparse to test hourly counts for periodic load.",
            c.trace.requests,
            secs(c.trace.span_s)
        ),
        Some(p) => match p.best_period_h {
            Some(h) => {
                let pv = p
                    .candidates
                    .iter()
                    .find(|t| t.period_h == h)
                    .map(|t| p_value(t.p_value))
                    .unwrap_or_default();
                format!(
                    "The load repeats every {}: one-way ANOVA of hourly request counts finds it the strongest period ({pv}).",
                    period_name(h)
                )
            }
            None => {
                let max = p.candidates.iter().map(|t| t.period_h).max().unwrap_or(0);
                if max < 24 {
                    format!(
                        "No significant periodicity in hourly request counts; the trace spans {}, too short to test for a daily cycle (two full periods are needed).",
                        secs(c.trace.span_s)
                    )
                } else {
                    format!(
                        "No significant periodicity in hourly request counts (periods of 2–{max} h tested, none with p < 0.01)."
                    )
                }
            }
        },
    };
    finding("periodicity", text)
}

/// `24 h (1 day)`, `168 h (1 week)`, `6 h`.
pub fn period_name(h: u32) -> String {
    match h {
        24 => "24 h (daily)".into(),
        168 => "168 h (weekly)".into(),
        h if h % 24 == 0 => format!("{h} h ({} days)", h / 24),
        h => format!("{h} h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_to_125() {
        assert_eq!(round_125(0.0031), 0.002);
        assert!((round_125(0.0042) - 0.005).abs() < 1e-15);
        assert!((round_125(8.0) - 10.0).abs() < 1e-12);
        assert!((round_125(1.3) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn interpolation_in_log_x() {
        let xs = [1.0, 100.0];
        let ys = [Some(0.0), Some(2.0)];
        assert!((interp_log(&xs, &ys, 10.0).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(interp_log(&xs, &ys, 100.0), Some(2.0));
        assert_eq!(interp_log(&xs, &ys, 0.5), None);
        assert_eq!(interp_log(&xs, &ys, 101.0), None);
        assert_eq!(interp_log(&xs, &[Some(1.0), None], 10.0), None);
    }
}
