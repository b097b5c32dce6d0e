//! The report's figures, each built from the [`Characterization`] alone:
//! a chart plus a title and a one-sentence caption saying how to read it.
//! Figure numbers in comments refer to the source papers.

use crate::svg::{Axis, BarSeries, Chart, Color, Dash, Layer, Marker, Scale, Swatch, Unit};
use fallow_core::analyze::{headline_wait_s, period_name};
use fallow_core::human::{corr, count, num, pct, prob, requests, secs};
use fallow_core::Characterization;

/// A titled, captioned chart.
pub struct Figure {
    /// Heading above the plot.
    pub title: String,
    /// How to read it, under the plot.
    pub caption: String,
    /// The inline SVG.
    pub svg: String,
    /// Spans the full width of the page.
    pub wide: bool,
}

fn fig(id: &str, title: String, caption: String, chart: Chart) -> Figure {
    let wide = chart.width > 800.0;
    Figure {
        svg: chart.render(id),
        title,
        caption,
        wide,
    }
}

fn line(points: Vec<(f64, f64)>, color: Color, dash: Dash) -> Layer {
    Layer::Line {
        points,
        color,
        dash,
        width: 2.2,
        marker: Marker::None,
        label: String::new(),
    }
}

fn vrule(x: f64, label: impl Into<String>) -> Layer {
    Layer::VRule {
        x,
        color: Color::Muted,
        dash: Dash::Dashed,
        label: label.into(),
    }
}

fn hrule(y: f64, label: impl Into<String>, label_left: bool) -> Layer {
    Layer::HRule {
        y,
        color: Color::Muted,
        dash: Dash::Dashed,
        label: label.into(),
        label_left,
    }
}

/// Idle-time CDF on a log time axis.
pub fn idle_cdf(c: &Characterization) -> Figure {
    let d = &c.idle_cdf;
    let pts = d.x_s.iter().copied().zip(d.cdf.iter().copied()).collect();
    let chart = Chart::new(
        "CDF of idle interval lengths",
        Axis::new("idle interval length", Scale::Log, Unit::Seconds),
        Axis::new("intervals at most this long", Scale::Linear, Unit::Fraction).range(0.0, 1.0),
    )
    .layer(line(pts, Color::C(0), Dash::Solid))
    .layer(vrule(d.mean_s, format!("mean {}", secs(d.mean_s))));
    fig(
        "idle-cdf",
        "Idle interval lengths".into(),
        "A point (x, y) means a share y of idle intervals last at most x. A curve that climbs slowly across several decades means idle lengths vary widely; the dashed line marks the mean.".into(),
        chart,
    )
}

/// The CDF against length over mean, next to an exponential (Mi et al. Fig. 1).
pub fn idle_cdf_normalised(c: &Characterization) -> Figure {
    let d = &c.idle_cdf;
    const XMAX: f64 = 5.0;
    let mut pts = vec![(0.0, 0.0)];
    if d.mean_s > 0.0 {
        pts.extend(
            d.x_s
                .iter()
                .zip(&d.cdf)
                .map(|(&x, &y)| (x / d.mean_s, y))
                .take_while(|&(x, _)| x <= XMAX * 1.05),
        );
    }
    let expo: Vec<(f64, f64)> = (0..=200)
        .map(|i| {
            let x = XMAX * i as f64 / 200.0;
            (x, 1.0 - (-x).exp())
        })
        .collect();
    let chart = Chart::new(
        "CDF of idle lengths normalised by the mean",
        Axis::new("idle interval length / mean", Scale::Linear, Unit::Number).range(0.0, XMAX),
        Axis::new("intervals at most this long", Scale::Linear, Unit::Fraction).range(0.0, 1.0),
    )
    .layer(line(expo, Color::Muted, Dash::Dashed))
    .layer(line(pts, Color::C(0), Dash::Solid))
    .layer(vrule(1.0, "mean"))
    .legend(
        format!("this trace (CV {})", num(c.idle.cv)),
        Color::C(0),
        Swatch::Line(Dash::Solid),
    )
    .legend(
        "exponential (CV 1)",
        Color::Muted,
        Swatch::Line(Dash::Dashed),
    );
    fig(
        "idle-cdf-norm",
        "Idle lengths relative to their mean".into(),
        "As in Mi et al. Fig. 1, x is the idle length divided by the mean. A curve above the exponential at the left means many intervals far shorter than the mean and a long tail of long ones: high variability, where waiting before background work pays.".into(),
        chart,
    )
}

/// Share of idle time in the longest intervals (Practical Scrubbing Fig. 10).
pub fn concentration(c: &Characterization) -> Figure {
    let k = &c.concentration;
    let pts = k
        .top_percent
        .iter()
        .zip(&k.idle_fraction)
        .map(|(&p, &f)| (p / 100.0, f))
        .collect();
    let chart = Chart::new(
        "Share of idle time in the longest intervals",
        Axis::new(
            "longest intervals (share of all intervals)",
            Scale::Log,
            Unit::Fraction,
        ),
        Axis::new("share of all idle time", Scale::Linear, Unit::Fraction).range(0.0, 1.0),
    )
    .wide()
    .layer(hrule(
        k.top10_fraction,
        format!("{} of idle time", pct(k.top10_fraction)),
        true,
    ))
    .layer(vrule(0.1, "longest 10 %"))
    .layer(line(pts, Color::C(2), Dash::Solid));
    fig(
        "concentration",
        "Where the idle time is".into(),
        "A point (x, y) means the longest x of idle intervals hold a share y of all idle time (Practical Scrubbing Fig. 10). A curve that shoots up at the left means a few long intervals hold most idle time: those are the ones worth waiting for.".into(),
        chart,
    )
}

/// Expected and 1st-percentile remaining idle time (Practical Scrubbing Figs. 11–12).
pub fn remaining(c: &Characterization) -> Figure {
    let r = &c.remaining;
    let top = r
        .expected_s
        .iter()
        .flatten()
        .copied()
        .fold(0.0f64, f64::max);
    // the 1st percentile can fall to nanoseconds; below a ten-thousandth
    // of the top it only stretches the axis
    let floor = top * 1e-4;
    let pick = |v: &[Option<f64>]| -> Vec<(f64, f64)> {
        r.waited_s
            .iter()
            .zip(v)
            .map(|(&x, y)| (x, y.filter(|&y| y >= floor).unwrap_or(f64::NAN)))
            .collect()
    };
    let mut chart = Chart::new(
        "Remaining idle time after waiting",
        Axis::new("time the device has been idle", Scale::Log, Unit::Seconds),
        Axis::new("idle time still to come", Scale::Log, Unit::Seconds),
    )
    .layer(hrule(
        c.idle.mean_s,
        format!("mean interval {}", secs(c.idle.mean_s)),
        false,
    ))
    .layer(line(pick(&r.expected_s), Color::C(0), Dash::Solid))
    .layer(line(pick(&r.p1_s), Color::C(1), Dash::Dashed))
    .legend("expected", Color::C(0), Swatch::Line(Dash::Solid))
    .legend("1st percentile", Color::C(1), Swatch::Line(Dash::Dashed));
    if let Some(w) = headline_wait_s(c) {
        chart = chart.layer(vrule(w, format!("wait {}", secs(w))));
    }
    fig(
        "remaining",
        "How much longer will it stay idle?".into(),
        "Having been idle for x, the device stays idle y longer on average (solid) and at least y longer in 99 % of cases (dashed). Rising lines mean a decreasing hazard rate: the longer it has been idle, the safer it is to start background work (Practical Scrubbing Figs. 11–12).".into(),
        chart,
    )
}

/// Idle time still usable after a wait (Practical Scrubbing Fig. 13).
pub fn usable(c: &Characterization) -> Figure {
    let r = &c.remaining;
    let u = r
        .waited_s
        .iter()
        .copied()
        .zip(r.usable_fraction.iter().copied())
        .collect();
    let s = r
        .waited_s
        .iter()
        .copied()
        .zip(r.surviving_fraction.iter().copied())
        .collect();
    let mut chart = Chart::new(
        "Idle time usable after a wait",
        Axis::new(
            "wait before starting background work",
            Scale::Log,
            Unit::Seconds,
        ),
        Axis::new("share remaining", Scale::Linear, Unit::Fraction).range(0.0, 1.0),
    )
    .layer(line(u, Color::C(0), Dash::Solid))
    .layer(line(s, Color::C(1), Dash::Dashed))
    .legend(
        "idle time still usable",
        Color::C(0),
        Swatch::Line(Dash::Solid),
    )
    .legend(
        "intervals longer than the wait",
        Color::C(1),
        Swatch::Line(Dash::Dashed),
    );
    if let Some(w) = headline_wait_s(c) {
        chart = chart.layer(vrule(w, format!("wait {}", secs(w))));
    }
    fig(
        "usable",
        "The price of waiting".into(),
        "A policy that waits x after the device falls idle can still use the solid line's share of all idle time, while only the dashed share of intervals lasts long enough to be used at all (Practical Scrubbing Fig. 13). A wide gap between the lines means waiting skips many intervals but little idle time.".into(),
        chart,
    )
}

/// Stacked small/large bars at lags 1..9 given the current class (Mi et al. Fig. 2).
pub fn lag_pairs(c: &Characterization, given_large: bool) -> Figure {
    let lp = &c.lag_pairs;
    let labels: Vec<String> = lp.lags.iter().map(|l| l.lag.to_string()).collect();
    let from = if given_large { "large" } else { "small" };
    let (small, large): (Vec<f64>, Vec<f64>) = lp
        .lags
        .iter()
        .map(|l| {
            let (s, g) = if given_large {
                (l.large_small, l.large_large)
            } else {
                (l.small_small, l.small_large)
            };
            (s.unwrap_or(f64::NAN), g.unwrap_or(f64::NAN))
        })
        .unzip();
    let titles = |next: &str, v: &[f64]| -> Vec<String> {
        lp.lags
            .iter()
            .zip(v)
            .map(|(l, p)| format!("lag {}: P({from} → {next}) = {}", l.lag, prob(*p)))
            .collect()
    };
    let x: Vec<f64> = (0..labels.len()).map(|i| i as f64).collect();
    let chart = Chart::new(
        format!("Class of the interval lag places after a {from} one"),
        Axis::new("lag (intervals later)", Scale::Linear, Unit::Number).categories(&labels, 1),
        Axis::new(
            format!("probability given {from} now"),
            Scale::Linear,
            Unit::Fraction,
        )
        .range(0.0, 1.0),
    )
    .layer(Layer::Bars {
        x,
        width: 0.7,
        series: vec![
            BarSeries {
                titles: titles("small", &small),
                values: small,
                colors: vec![Color::C(0)],
            },
            BarSeries {
                titles: titles("large", &large),
                values: large,
                colors: vec![Color::C(1)],
            },
        ],
    })
    .layer(Layer::HRule {
        y: lp.small_fraction,
        color: Color::Muted,
        dash: Dash::Dashed,
        label: String::new(),
        label_left: false,
    })
    .legend("small next", Color::C(0), Swatch::Box)
    .legend("large next", Color::C(1), Swatch::Box)
    .legend("if independent", Color::Muted, Swatch::Line(Dash::Dashed));
    let caption = if given_large {
        format!(
            "After a large idle interval (longer than {}), the share of small (blue) and large (orange) intervals lag places later, as in Mi et al. Fig. 2. Orange reaching far below the dashed line means large intervals come in bursts: after one, expect another.",
            secs(lp.split_s)
        )
    } else {
        format!(
            "After a small idle interval (at most {} = (CV+1)·mean), the share of small (blue) and large (orange) intervals lag places later. With independent intervals the colours meet at the dashed line, the overall share of small intervals ({}).",
            secs(lp.split_s),
            pct(lp.small_fraction)
        )
    };
    fig(
        if given_large {
            "lag-large"
        } else {
            "lag-small"
        },
        format!("After a {from} idle interval"),
        caption,
        chart,
    )
}

/// Autocorrelation of idle lengths with the ±1.96/√n band.
pub fn acf(c: &Characterization) -> Figure {
    let a = &c.acf;
    let x: Vec<f64> = a.lags.iter().map(|&l| l as f64).collect();
    let titles = a
        .lags
        .iter()
        .zip(&a.values)
        .map(|(l, v)| format!("lag {l}: {}", corr(*v)))
        .collect();
    let colors = a
        .values
        .iter()
        .map(|v| {
            if v.abs() > a.band {
                Color::C(3)
            } else {
                Color::Muted
            }
        })
        .collect();
    let maxlag = a.lags.last().copied().unwrap_or(1) as f64;
    let chart = Chart::new(
        "Autocorrelation of idle interval lengths",
        Axis::new("lag (intervals)", Scale::Linear, Unit::Number).range(0.0, maxlag + 1.0),
        Axis::new("autocorrelation", Scale::Linear, Unit::Number),
    )
    .wide()
    .layer(Layer::HBand {
        y0: -a.band,
        y1: a.band,
        color: Color::Muted,
    })
    .layer(Layer::HRule {
        y: 0.0,
        color: Color::Muted,
        dash: Dash::Solid,
        label: String::new(),
        label_left: false,
    })
    .layer(Layer::Bars {
        x,
        width: 0.55,
        series: vec![BarSeries {
            values: a.values.clone(),
            colors,
            titles,
        }],
    })
    .legend("significant", Color::C(3), Swatch::Box)
    .legend(
        format!("noise band ±{}", corr(a.band)),
        Color::Muted,
        Swatch::Box,
    );
    let ar =
        c.ar.as_ref()
            .map(|f| {
                format!(
                    " AIC chooses an AR({}) model to predict the next interval.",
                    f.order
                )
            })
            .unwrap_or_default();
    fig(
        "acf",
        "Do long intervals follow long ones?".into(),
        format!("Correlation between an idle interval's length and the length of the one k places later; bars outside the grey ±1.96/√n band are significant at 5 %. Positive bars at small lags mean the recent past predicts the next interval.{ar}"),
        chart,
    )
}

/// Busy Bee's P_lag with the Cluster Window Size marked.
pub fn p_lag(c: &Characterization) -> Figure {
    let b = &c.busy;
    let labels: Vec<String> = (1..=b.clusters.p_lag.len())
        .map(|l| l.to_string())
        .collect();
    let x: Vec<f64> = (0..labels.len()).map(|i| i as f64).collect();
    let colors = (1..=b.clusters.p_lag.len())
        .map(|lag| {
            if lag as u32 <= b.clusters.cws {
                Color::C(2)
            } else {
                Color::Muted
            }
        })
        .collect();
    let titles = b
        .clusters
        .p_lag
        .iter()
        .enumerate()
        .map(|(i, p)| format!("lag {}: P = {}", i + 1, prob(*p)))
        .collect();
    let cws_label = if b.clusters.cws_reached {
        format!("CWS = {}", b.clusters.cws)
    } else {
        format!("CWS = {} (cap)", b.clusters.cws)
    };
    let chart = Chart::new(
        "P_lag of long busy periods",
        Axis::new("lag (busy periods later)", Scale::Linear, Unit::Number).categories(&labels, 1),
        Axis::new("P(long | long now)", Scale::Linear, Unit::Number).range(0.0, 1.0),
    )
    .layer(Layer::Bars {
        x,
        width: 0.7,
        series: vec![BarSeries {
            values: b.clusters.p_lag.clone(),
            colors,
            titles,
        }],
    })
    .layer(hrule(b.clusters.long_fraction, "", false))
    .layer(Layer::VRule {
        x: b.clusters.cws as f64 - 0.5,
        color: Color::C(2),
        dash: Dash::Dashed,
        label: cws_label,
    })
    .legend("lags within the CWS", Color::C(2), Swatch::Box)
    .legend(
        format!("base rate {}", prob(b.clusters.long_fraction)),
        Color::Muted,
        Swatch::Line(Dash::Dashed),
    );
    fig(
        "p-lag",
        "Do long busy periods cluster?".into(),
        format!(
            "P_lag: the probability that the busy period lag places later is long (≥ {}, Busy Bee's Threshold) given that the current one is. Bars well above the dashed base rate mean clustering; green bars run up to the Cluster Window Size, where their sum first reaches 0.8 (Busy Bee Eq. 1).",
            requests(b.clusters.threshold_requests)
        ),
        chart,
    )
}

/// Bins of busy-period length in requests that double in length — 1, 2–3,
/// 4–7, 8–15, … up to `max` — with the Threshold as a bin edge so long and
/// short never share a bar (the bin it falls in is split in two).
fn length_bins(max: u64, threshold: u64) -> Vec<(u64, u64)> {
    let mut starts: Vec<u64> = std::iter::successors(Some(1u64), |&s| s.checked_mul(2))
        .take_while(|&s| s <= max)
        .collect();
    if threshold > 1 && threshold <= max {
        starts.push(threshold);
    }
    starts.sort_unstable();
    starts.dedup();
    starts
        .iter()
        .enumerate()
        .map(|(i, &lo)| (lo, starts.get(i + 1).map_or(max, |&n| n - 1)))
        .collect()
}

/// Width of the bin `lo..=hi` in doublings: log2((hi + 1) / lo), 1 for a
/// whole bin of [`length_bins`].
fn doublings(lo: u64, hi: u64) -> f64 {
    ((hi + 1) as f64 / lo as f64).log2()
}

/// The busy-length histogram: `(length, busy periods)` pairs in, one bar
/// per [`length_bins`] bin, each spanning its lengths `lo..hi + 1` on a log
/// axis (so a bar is as wide as its bin, in doublings) and as tall as the
/// busy periods per doubling in it (so a split or cut bin is not shorter
/// for being narrower).
fn busy_chart(histogram: &[(u64, u64)], threshold: u64) -> Chart {
    let max = histogram.last().map(|&(l, _)| l).unwrap_or(0);
    let bins = length_bins(max, threshold);
    let total: u64 = histogram.iter().map(|&(_, n)| n).sum();
    let counts: Vec<u64> = bins
        .iter()
        .map(|&(lo, hi)| {
            histogram
                .iter()
                .filter(|&&(l, _)| l >= lo && l <= hi)
                .map(|&(_, n)| n)
                .sum()
        })
        .collect();
    let mut edges: Vec<f64> = bins.iter().map(|&(lo, _)| lo as f64).collect();
    if let Some(&(_, hi)) = bins.last() {
        edges.push((hi + 1) as f64);
    }
    let values = bins
        .iter()
        .zip(&counts)
        .map(|(&(lo, hi), &n)| n as f64 / doublings(lo, hi))
        .collect();
    let colors = bins
        .iter()
        .map(|&(lo, _)| {
            if lo >= threshold {
                Color::C(1)
            } else {
                Color::C(0)
            }
        })
        .collect();
    let titles = bins
        .iter()
        .zip(&counts)
        .map(|(&(lo, hi), &n)| {
            let range = if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}–{hi}")
            };
            format!(
                "{range} requests: {} busy periods ({})",
                count(n),
                pct(n as f64 / total.max(1) as f64)
            )
        })
        .collect();
    Chart::new(
        "Busy period lengths in requests",
        Axis::new("busy period length (requests)", Scale::Log, Unit::Number),
        Axis::new(
            "busy periods per doubling of length",
            Scale::Log,
            Unit::Number,
        ),
    )
    .layer(Layer::Histogram {
        edges,
        values,
        colors,
        titles,
    })
    .legend("short", Color::C(0), Swatch::Box)
    .legend(
        format!("long (≥ Threshold {threshold})"),
        Color::C(1),
        Swatch::Box,
    )
}

/// Histogram of busy-period lengths in requests.
pub fn busy_histogram(c: &Characterization) -> Figure {
    let b = &c.busy;
    let chart = busy_chart(&b.clusters.length_histogram, b.clusters.threshold_requests);
    fig(
        "busy-hist",
        "Busy period lengths".into(),
        format!(
            "How many busy periods served each number of requests, in bins that double in length (1, 2–3, 4–7, …; both axes log): each bar spans its bin, and its height is busy periods per doubling, so a bin split at the Threshold or cut at the longest period is drawn to its share. Orange bars are long periods, at or above Busy Bee's Threshold ({}, where the longest 10 % begin); the mean is {} requests.",
            requests(b.clusters.threshold_requests),
            num(b.clusters.mean_requests)
        ),
        chart,
    )
}

/// Request rate over time.
pub fn rate(c: &Characterization) -> Figure {
    let r = &c.rate;
    let mut pts: Vec<(f64, f64)> = r
        .start_s
        .iter()
        .zip(&r.requests_per_s)
        .map(|(&t, &v)| (t + r.bin_s / 2.0, v))
        .collect();
    // the last bin is usually cut short by the end of the trace: rescale it
    // to the time it covers, or drop it when that is too little to judge
    if let (Some(&start), Some(last)) = (r.start_s.last(), pts.last_mut()) {
        let covered = c.trace.span_s - start;
        if covered >= 0.25 * r.bin_s && covered < r.bin_s {
            last.1 *= r.bin_s / covered;
        } else if covered < 0.25 * r.bin_s && pts.len() > 2 {
            pts.pop();
        }
    }
    let mean = if c.trace.span_s > 0.0 {
        c.trace.requests as f64 / c.trace.span_s
    } else {
        0.0
    };
    let chart = Chart::new(
        "Request rate over time",
        Axis::new("time since the first request", Scale::Linear, Unit::Seconds),
        Axis::new("requests per second", Scale::Linear, Unit::Number),
    )
    .wide()
    .layer(Layer::Line {
        points: pts,
        color: Color::C(0),
        dash: Dash::Solid,
        width: 1.6,
        marker: Marker::None,
        label: String::new(),
    })
    .layer(hrule(mean, format!("mean {} req/s", num(mean)), true));
    fig(
        "rate",
        "Load over time".into(),
        format!(
            "Requests per second in bins of {}. Spikes are bursts of foreground work; a shape that repeats hints at periodic load, tested below.",
            secs(r.bin_s)
        ),
        chart,
    )
}

/// Hourly request counts with the strongest period's mean profile.
pub fn hourly(c: &Characterization) -> Option<Figure> {
    let p = c.periodicity.as_ref()?;
    let (chart, partial) = hourly_chart(&p.hourly_counts, p.best_period_h, c.trace.span_s);
    let end = match partial {
        Some(h) => format!(
            " The last bar is {} wide: the trace ends {} into that hour, so it holds fewer requests.",
            secs(h * 3600.0),
            secs(h * 3600.0)
        ),
        None => String::new(),
    };
    let caption = match p.best_period_h {
        Some(period) => format!(
            "Requests in each hour of the trace. The orange line repeats the mean count for each hour of the strongest period found by one-way ANOVA, {} (dotted lines mark period boundaries); the closer it follows the bars, the more predictable the load.{end}",
            period_name(period)
        ),
        None => format!("Requests in each hour of the trace. One-way ANOVA found no period (2 h up to a week) whose hour-of-period explains the counts at the 1 % level.{end}"),
    };
    Some(fig(
        "hourly",
        "Hourly load and periodicity".into(),
        caption,
        chart,
    ))
}

/// The hourly chart of `counts` for a trace spanning `span_s`: hour h is a
/// bar from h to h + 1, except a last hour the trace ends within, drawn
/// only as wide as the part it covers (returned, in hours).
fn hourly_chart(counts: &[u64], best_period_h: Option<u32>, span_s: f64) -> (Chart, Option<f64>) {
    let n = counts.len();
    let span_h = span_s / 3600.0;
    let last_edge = if span_h > (n - 1) as f64 && span_h < n as f64 {
        span_h
    } else {
        n as f64
    };
    let partial = (last_edge < n as f64).then(|| last_edge - (n - 1) as f64);
    let mut edges: Vec<f64> = (0..n).map(|h| h as f64).collect();
    edges.push(last_edge);
    let values: Vec<f64> = counts.iter().map(|&v| v as f64).collect();
    let titles = counts
        .iter()
        .enumerate()
        .map(|(h, &v)| match partial {
            Some(f) if h + 1 == n => format!(
                "hour {h}, its first {} (the trace ends): {} requests",
                secs(f * 3600.0),
                count(v)
            ),
            _ => format!("hour {h}: {} requests", count(v)),
        })
        .collect();
    let mut chart = Chart::new(
        "Requests per hour",
        Axis::new("hours since the first request", Scale::Linear, Unit::Hours).range(0.0, n as f64),
        Axis::new("requests per hour", Scale::Linear, Unit::Number),
    )
    .wide()
    .layer(Layer::Histogram {
        edges,
        values,
        colors: vec![Color::C(0)],
        titles,
    })
    .legend("requests in the hour", Color::C(0), Swatch::Box);
    if let Some(period) = best_period_h {
        let pl = period as usize;
        let mut sum = vec![0.0; pl];
        let mut cnt = vec![0usize; pl];
        for (h, &v) in counts.iter().enumerate() {
            sum[h % pl] += v as f64;
            cnt[h % pl] += 1;
        }
        let profile: Vec<(f64, f64)> = (0..n)
            .flat_map(|h| {
                let m = sum[h % pl] / cnt[h % pl].max(1) as f64;
                [(h as f64, m), ((h as f64 + 1.0).min(last_edge), m)]
            })
            .collect();
        let mut k = pl;
        while k < n {
            chart = chart.layer(Layer::VRule {
                x: k as f64,
                color: Color::Muted,
                dash: Dash::Dotted,
                label: String::new(),
            });
            k += pl;
        }
        chart = chart
            .layer(Layer::Line {
                points: profile,
                color: Color::C(1),
                dash: Dash::Solid,
                width: 2.0,
                marker: Marker::None,
                label: String::new(),
            })
            .legend(
                format!("mean for that hour of the {period} h period"),
                Color::C(1),
                Swatch::Line(Dash::Solid),
            );
    }
    (chart, partial)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (x, width) of every `<rect class="bar` in `svg`, in pixels.
    fn bars(svg: &str) -> Vec<(f64, f64, f64)> {
        let attr = |t: &str, k: &str| -> f64 {
            let i = t.find(&format!(" {k}=\"")).unwrap() + k.len() + 3;
            t[i..].split('"').next().unwrap().parse().unwrap()
        };
        svg.split("<rect class=\"bar")
            .skip(1)
            .map(|t| (attr(t, "x"), attr(t, "width"), attr(t, "height")))
            .collect()
    }

    #[test]
    fn bins_cover_every_length_once() {
        for (max, thr) in [
            (1, 1),
            (7, 3),
            (10, 9),
            (11, 2),
            (57, 15),
            (504, 3),
            (1000, 200),
        ] {
            let bins = length_bins(max, thr);
            assert_eq!(bins.first().unwrap().0, 1, "{max}");
            assert_eq!(bins.last().unwrap().1, max, "{max}: {bins:?}");
            for w in bins.windows(2) {
                assert_eq!(w[0].1 + 1, w[1].0, "{max}: {bins:?}");
            }
            // the threshold starts a bin
            assert!(
                bins.iter().any(|&(lo, _)| lo == thr),
                "{max} {thr}: {bins:?}"
            );
        }
        assert_eq!(
            length_bins(57, 3),
            [(1, 1), (2, 2), (3, 3), (4, 7), (8, 15), (16, 31), (32, 57)]
        );
    }

    #[test]
    fn busy_histogram_bars_are_as_wide_as_their_bins() {
        // lengths 1..=100, ten busy periods each, Threshold 12: bins 1, 2–3,
        // 4–7, 8–11, 12–15, 16–31, 32–63, 64–100
        let hist: Vec<(u64, u64)> = (1..=100).map(|l| (l, 10)).collect();
        let svg = busy_chart(&hist, 12).render("t");
        let b = bars(&svg);
        let bins = [
            (1u64, 1u64),
            (2, 3),
            (4, 7),
            (8, 11),
            (12, 15),
            (16, 31),
            (32, 63),
            (64, 100),
        ];
        assert_eq!(b.len(), bins.len(), "{svg}");
        // on the log axis a bin lo..=hi spans ln((hi+1)/lo): compare every
        // bar's width (plus the 1 px gap) with the first's, by hand
        let span = |(lo, hi): (u64, u64)| ((hi + 1) as f64 / lo as f64).ln();
        let px_per_ln = (b[0].1 + 1.0) / span(bins[0]);
        for (i, (&bin, &(x, w, _))) in bins.iter().zip(&b).enumerate() {
            let expect = span(bin) * px_per_ln;
            assert!(
                ((w + 1.0) - expect).abs() < 0.05,
                "bar {i} {bin:?}: {w} px + gap, expected {expect}"
            );
            // bars touch (but for the gap): each starts where the last ended
            if i > 0 {
                let (px, pw, _) = b[i - 1];
                assert!(
                    (px + pw + 1.0 - x).abs() < 0.05,
                    "bar {i}: {px}+{pw} vs {x}"
                );
            }
        }
        // the 4–7 bin has 40 periods in one doubling, 8–11 30 in
        // log2(12/8) = 0.585 doublings: 51.3 per doubling, taller, as the
        // uniform lengths say it should be (10 per length, doubling bins
        // holding more lengths as they go)
        let h = |i: usize| b[i].2;
        assert!(h(3) > h(2), "{b:?}");
    }

    #[test]
    fn a_partial_last_hour_is_drawn_to_scale() {
        // 4.64 hours: the last bar covers 0.64 h
        let counts = [100u64, 120, 90, 110, 64];
        let (chart, partial) = hourly_chart(&counts, None, 4.64 * 3600.0);
        assert!((partial.unwrap() - 0.64).abs() < 1e-9);
        let b = bars(&chart.render("h"));
        assert_eq!(b.len(), 5);
        let full = b[0].1 + 1.0;
        for (x, w, _) in &b[..4] {
            assert!(((w + 1.0) - full).abs() < 0.05, "{x} {w}");
        }
        let last = b[4].1 + 1.0;
        assert!(
            (last / full - 0.64).abs() < 0.01,
            "last bar {last} px against {full} px a full hour"
        );
        // a trace that ends on the hour keeps full bars
        let (chart, partial) = hourly_chart(&counts, None, 5.0 * 3600.0);
        assert!(partial.is_none());
        let b = bars(&chart.render("h"));
        assert!(((b[4].1 + 1.0) - full).abs() < 0.05);
    }
}
