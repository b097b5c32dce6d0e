//! The HTML page of `fallow pareto --html`: each policy's Pareto front,
//! BG throughput against mean added FG delay, one line per policy;
//! clairvoyant references dashed and drawn wider. Same stylesheet and
//! plotting module as the other reports.

use crate::describe::Subject;
use crate::svg::{
    esc, series_style, Axis, Chart, Color, Dash, Layer, Marker, Point, Scale, Swatch, Unit,
};
use fallow_core::human::{bytes, num, secs};
use fallow_core::tune::pareto::Front;
use std::fmt::Write as _;
use std::path::Path;

/// Write the page to `path` atomically.
pub fn write(path: &Path, input: &Subject, bg: &str, fronts: &[Front]) -> std::io::Result<()> {
    let html = render(input, bg, fronts);
    crate::page::write(path, &html)
}

/// The whole page.
pub fn render(input: &Subject, bg: &str, fronts: &[Front]) -> String {
    let mut h = String::with_capacity(64 << 10);
    crate::page::open_page(
        &mut h,
        "Pareto fronts",
        &input.title,
        &[("sub", input.detail.clone()), ("sub note", bg.to_string())],
    );
    let _ = write!(
        h,
        "<section>\n<h2>Throughput against added delay</h2>\n<p class=\"intro\">{}</p>\n<div class=\"grid\">\n<figure class=\"card wide\">\n<h3>{}</h3>\n{}\n<figcaption>{}</figcaption>\n</figure>\n</div>\n</section>\n",
        esc("Each policy's knob swept from its most conservative to its most aggressive setting; only the settings no other setting of the same policy beats on both axes are drawn. Up and to the left is better; dashed lines are clairvoyant references, a ceiling no deployable policy can pass."),
        esc("BG throughput against mean added FG delay"),
        chart(fronts).render("pareto"),
        esc("x: mean delay added to each foreground request; y: background throughput. One line per policy, one marker per setting on its front, labelled with its knob value (every setting's value, throughput and delay on hover).")
    );
    h.push_str(&table(fronts));
    crate::page::close_page(
        &mut h,
        "the same results as JSON: <code>fallow pareto --json</code>.",
    );
    h
}

fn chart(fronts: &[Front]) -> Chart {
    let delays = || {
        fronts
            .iter()
            .flat_map(|f| f.front.iter().map(|p| p.fg_mean_added_delay_s))
    };
    let all_positive = delays().all(|d| d > 0.0);
    let (lo, hi) = delays().fold((f64::INFINITY, 0.0f64), |(l, h), d| (l.min(d), h.max(d)));
    let x_scale = if all_positive && hi > 100.0 * lo {
        Scale::Log
    } else {
        Scale::Linear
    };
    let mut x = Axis::new("mean added delay per FG request", x_scale, Unit::Seconds);
    if x_scale == Scale::Linear && hi > 0.0 {
        x = x.range(0.0, hi * 1.08);
    }
    let top = fronts
        .iter()
        .flat_map(|f| f.front.iter().map(|p| p.bg_throughput_bytes_per_s / 1e6))
        .fold(0.0f64, f64::max);
    let mut y = Axis::new("BG throughput (MB/s)", Scale::Linear, Unit::Number);
    if top > 0.0 {
        y = y.range(0.0, top * 1.08);
    }
    let mut c = Chart::new("Pareto fronts", x, y).wide();
    let mut deployable = 0usize;
    let mut clairvoyant = 0usize;
    let mut marks: Vec<Point> = Vec::new();
    for f in fronts {
        // every front its own (colour, dash, marker); references grey and
        // wider, told apart from each other by dash and marker
        let (color, dash, marker, width) = if f.clairvoyant {
            clairvoyant += 1;
            let k = clairvoyant - 1;
            let dash = [Dash::Dashed, Dash::LongShort, Dash::Dotted][k % 3];
            (Color::Muted, dash, Marker::CYCLE[(k + 3) % 7], 2.6)
        } else {
            deployable += 1;
            let (color, dash, marker) = series_style(deployable - 1);
            (color, dash, marker, 1.8)
        };
        let points = f
            .front
            .iter()
            .map(|p| (p.fg_mean_added_delay_s, p.bg_throughput_bytes_per_s / 1e6))
            .collect();
        let label = if f.clairvoyant {
            format!("{} (clairvoyant)", f.policy)
        } else {
            f.policy.clone()
        };
        // the knob value beside every k-th setting (about eight per front),
        // every setting in its hover text
        let every = f.front.len().div_ceil(8).max(1);
        for (j, p) in f.front.iter().enumerate() {
            let knob = match (f.knob, &p.knob) {
                (Some(k), Some(v)) => format!("{k}={v}"),
                _ => String::new(),
            };
            let shown = j % every == 0 || j + 1 == f.front.len();
            marks.push(Point {
                x: p.fg_mean_added_delay_s,
                y: p.bg_throughput_bytes_per_s / 1e6,
                label: if shown { knob } else { String::new() },
                color,
                hollow: f.clairvoyant,
                marker,
                title: Some(format!(
                    "{}: {} MB/s, {} added per FG request, {} requests",
                    p.spec,
                    num(p.bg_throughput_bytes_per_s / 1e6),
                    secs(p.fg_mean_added_delay_s),
                    bytes(f.request_size_bytes)
                )),
                series: label.clone(),
            });
        }
        c = c
            .layer(Layer::Line {
                points,
                color,
                dash,
                width,
                // the line carries its shape too, so a front is told from
                // another it runs over by its marker as well as its dash
                marker,
                label: label.clone(),
            })
            .legend(label, color, Swatch::Marked(dash, marker));
    }
    c = c.layer(Layer::Points(marks));
    c.height = 340.0 + 20.0 * (fronts.len() as f64 / 6.0).floor();
    c
}

fn table(fronts: &[Front]) -> String {
    let mut s = String::from(
        "<section>\n<h2>Fronts</h2>\n<div style=\"overflow-x:auto\">\n<table>\n<thead><tr>",
    );
    for head in [
        "policy",
        "knob",
        "request size",
        "on front",
        "best BG MB/s",
        "least added delay",
        "most added delay",
    ] {
        let _ = write!(s, "<th>{}</th>", esc(head));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for f in fronts {
        let name = if f.clairvoyant {
            format!("{} (clairvoyant)", f.policy)
        } else {
            f.policy.clone()
        };
        let best = f
            .front
            .iter()
            .map(|p| p.bg_throughput_bytes_per_s)
            .fold(0.0f64, f64::max);
        let d = |p: Option<&fallow_core::tune::pareto::ParetoPoint>| {
            p.map_or("–".to_string(), |p| secs(p.fg_mean_added_delay_s))
        };
        let cells = [
            f.knob.unwrap_or("–").to_string(),
            bytes(f.request_size_bytes),
            format!("{} of {}", f.front.len(), f.points.len()),
            num(best / 1e6),
            d(f.front.first()),
            d(f.front.last()),
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
