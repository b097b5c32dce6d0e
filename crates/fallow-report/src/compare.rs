//! The HTML page of `fallow compare --html`: the input, a table of every
//! policy's cost and yield, slowdown against BG throughput (one labelled
//! point per policy) and the FG response-time CCDFs next to the baseline.
//! Same stylesheet and plotting module as the characterisation report.

use crate::describe::Subject;
use crate::svg::{
    esc, series_style, Axis, Chart, Color, Dash, Layer, Marker, Point, Scale, Swatch, Unit,
};
use fallow_core::human::{count, num, pct, secs, signed_pct};
use fallow_core::sim::SimResult;
use std::fmt::Write as _;
use std::path::Path;

/// Write the comparison page to `path` atomically.
pub fn write(
    path: &Path,
    input: &Subject,
    bg: &str,
    runs: &[(String, SimResult)],
) -> std::io::Result<()> {
    let html = render(input, bg, runs);
    crate::page::write(path, &html)
}

/// The whole page.
pub fn render(input: &Subject, bg: &str, runs: &[(String, SimResult)]) -> String {
    let mut h = String::with_capacity(128 << 10);
    crate::page::open_page(
        &mut h,
        "policy comparison",
        &input.title,
        &[("sub", input.detail.clone()), ("sub note", bg.to_string())],
    );
    h.push_str(&cards(input, runs));
    h.push_str(&table(runs));
    let _ = write!(
        h,
        "<section>\n<h2>Cost and yield</h2>\n<p class=\"intro\">{}</p>\n<div class=\"grid\">\n",
        esc("Each policy trades foreground slowdown for background work done. Down and to the right is better; clairvoyant references (open rings) bound what any policy could reach.")
    );
    for (title, caption, svg, wide) in [
        (
            "Slowdown against BG throughput",
            "One point per policy: x is the background throughput it achieved, y the relative foreground slowdown (mean response time with background work over without, minus one). Hover a point for its name when labels would overlap.",
            scatter(runs).render("cmp-scatter"),
            false,
        ),
        (
            "Added delay against idle time used",
            "x is the share of idle time spent on background work, y the mean delay added to each foreground request.",
            delay_vs_idle(runs).render("cmp-delay"),
            false,
        ),
        (
            "Foreground response times (CCDF)",
            "A point (x, y) means a share y of foreground requests took longer than x. The dashed grey curve is the baseline without background work; a policy's curve departs from it where background work delays requests.",
            ccdf(runs).render("cmp-ccdf"),
            true,
        ),
    ] {
        let _ = write!(
            h,
            "<figure class=\"card{}\">\n<h3>{}</h3>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
            if wide { " wide" } else { "" },
            esc(title),
            svg,
            esc(caption)
        );
    }
    h.push_str("</div>\n</section>\n");
    crate::page::close_page(
        &mut h,
        "the same results as JSON: <code>fallow compare --json</code>.",
    );
    h
}

fn cards(input: &Subject, runs: &[(String, SimResult)]) -> String {
    let Some((_, first)) = runs.first() else {
        return String::new();
    };
    let items = [
        (
            "requests",
            count(first.fg.requests),
            format!("over {}", secs(first.span_s)),
        ),
        (
            "FG utilisation",
            pct(input.fg_utilization),
            "without BG work".to_string(),
        ),
        (
            "baseline mean RT",
            secs(first.fg.baseline_mean_response_s),
            format!("p99 {}", secs(first.fg.baseline_p99_response_s)),
        ),
        (
            "policies",
            count(runs.len() as u64),
            format!(
                "{} clairvoyant",
                count(runs.iter().filter(|(_, r)| r.clairvoyant).count() as u64)
            ),
        ),
    ];
    let mut s = String::from("<div class=\"cards\">\n");
    for (label, value, sub) in items {
        let _ = writeln!(
            s,
            "<div class=\"stat\"><div class=\"label\">{}</div><div class=\"value\">{}</div><div class=\"subv\">{}</div></div>",
            esc(label),
            esc(&value),
            esc(&sub)
        );
    }
    s.push_str("</div>\n");
    s
}

fn table(runs: &[(String, SimResult)]) -> String {
    let mut s = String::from(
        "<section>\n<h2>Policies</h2>\n<div style=\"overflow-x:auto\">\n<table>\n<thead><tr>",
    );
    for head in [
        "policy",
        "slowdown",
        "added delay",
        "mean RT",
        "p99",
        "p99.9",
        "delayed",
        "BG requests",
        "BG MB/s",
        "idle used",
    ] {
        let _ = write!(s, "<th>{}</th>", esc(head));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (spec, r) in runs {
        let name = if r.clairvoyant {
            format!("{spec} (clairvoyant)")
        } else {
            spec.clone()
        };
        let cells = [
            signed_pct(r.fg.slowdown),
            secs(r.fg.mean_added_delay_s),
            secs(r.fg.mean_response_s),
            secs(r.fg.p99_response_s),
            secs(r.fg.p999_response_s),
            pct(r.fg.collision_rate),
            count(r.bg.completed),
            num(r.bg.throughput_bytes_per_s / 1e6),
            pct(r.idle_used_fraction),
        ];
        let _ = write!(s, "<tr><th>{}</th>", esc(&name));
        for c in cells {
            let _ = write!(s, "<td>{}</td>", esc(&c));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n</div>\n</section>\n");
    s
}

fn points(runs: &[(String, SimResult)], xy: impl Fn(&SimResult) -> (f64, f64)) -> Vec<Point> {
    runs.iter()
        .enumerate()
        .map(|(i, (spec, r))| {
            let (x, y) = xy(r);
            let (color, _, marker) = series_style(i);
            Point {
                x,
                y,
                label: spec.clone(),
                color,
                hollow: r.clairvoyant,
                marker,
                title: Some(format!(
                    "{spec}: {} MB/s of BG work, FG slowdown {}, {} added per request",
                    num(r.bg.throughput_bytes_per_s / 1e6),
                    signed_pct(r.fg.slowdown),
                    secs(r.fg.mean_added_delay_s)
                )),
                series: String::new(),
            }
        })
        .collect()
}

/// Log scale when every value is positive and they span more than two decades.
fn scale_for(values: impl Iterator<Item = f64>) -> Scale {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in values {
        if v.is_nan() || v <= 0.0 {
            return Scale::Linear;
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if hi > 100.0 * lo {
        Scale::Log
    } else {
        Scale::Linear
    }
}

/// A linear axis from 0 with a margin above the largest value, so markers
/// at the maximum are not cut by the plot's edge; log axes fit the data.
fn axis(label: &str, scale: Scale, unit: Unit, values: impl Iterator<Item = f64>) -> Axis {
    let a = Axis::new(label, scale, unit);
    let max = values.filter(|v| v.is_finite()).fold(f64::NAN, f64::max);
    if scale == Scale::Linear && max > 0.0 {
        a.range(0.0, max * 1.08)
    } else {
        a
    }
}

fn scatter(runs: &[(String, SimResult)]) -> Chart {
    let y_scale = scale_for(runs.iter().map(|(_, r)| r.fg.slowdown));
    Chart::new(
        "FG slowdown against BG throughput",
        axis(
            "BG throughput (MB/s)",
            Scale::Linear,
            Unit::Number,
            runs.iter().map(|(_, r)| r.bg.throughput_bytes_per_s / 1e6),
        ),
        axis(
            "FG slowdown",
            y_scale,
            Unit::Fraction,
            runs.iter().map(|(_, r)| r.fg.slowdown),
        ),
    )
    .layer(Layer::Points(points(runs, |r| {
        (r.bg.throughput_bytes_per_s / 1e6, r.fg.slowdown)
    })))
}

fn delay_vs_idle(runs: &[(String, SimResult)]) -> Chart {
    let y_scale = scale_for(runs.iter().map(|(_, r)| r.fg.mean_added_delay_s));
    Chart::new(
        "Added delay per FG request against idle time used",
        axis(
            "idle time used by BG work",
            Scale::Linear,
            Unit::Fraction,
            runs.iter().map(|(_, r)| r.idle_used_fraction),
        ),
        axis(
            "added delay per FG request",
            y_scale,
            Unit::Seconds,
            runs.iter().map(|(_, r)| r.fg.mean_added_delay_s),
        ),
    )
    .layer(Layer::Points(points(runs, |r| {
        (r.idle_used_fraction, r.fg.mean_added_delay_s)
    })))
}

fn ccdf(runs: &[(String, SimResult)]) -> Chart {
    let mut c = Chart::new(
        "CCDF of FG response times",
        Axis::new("response time", Scale::Log, Unit::Seconds),
        Axis::new("requests slower than x", Scale::Log, Unit::Fraction),
    )
    .wide();
    if let Some((_, first)) = runs.first() {
        c = c
            .layer(Layer::Line {
                points: first.fg.baseline_ccdf.clone(),
                color: Color::Muted,
                dash: Dash::Dashed,
                width: 2.6,
                marker: Marker::None,
                label: "baseline (no BG)".into(),
            })
            .legend("baseline (no BG)", Color::Muted, Swatch::Line(Dash::Dashed));
    }
    for (i, (spec, r)) in runs.iter().enumerate() {
        let (color, dash, marker) = series_style(i);
        c = c
            .layer(Layer::Line {
                points: r.fg.ccdf.clone(),
                color,
                dash,
                width: 1.8,
                marker,
                label: spec.clone(),
            })
            .legend(spec.clone(), color, Swatch::Marked(dash, marker));
    }
    // room for a legend of many rows
    c.height = 300.0 + 20.0 * (runs.len() as f64 / 6.0).floor();
    c
}
