//! The HTML fleet page of `fallow analyze FILE --device all --html`: how
//! idle time is spread over the devices of one file (its distribution,
//! the devices with the most and the least), and requests against idle
//! time, one labelled point per device. Same stylesheet and plotting
//! module as the other reports.

use crate::svg::{esc, series_style, Axis, Chart, Color, Dash, Layer, Marker, Point, Scale, Unit};
use fallow_core::fleet::{DeviceRow, Fleet};
use fallow_core::human::{count, pct, secs};
use std::fmt::Write as _;
use std::path::Path;

/// Devices listed in each of the "most" and "least" tables.
pub const RANKED: usize = 5;

/// Write the fleet page to `path` atomically.
pub fn write(path: &Path, fleet: &Fleet) -> std::io::Result<()> {
    let html = render(fleet);
    crate::page::write(path, &html)
}

fn name(d: &DeviceRow) -> String {
    d.name.clone().unwrap_or_else(|| d.id.to_string())
}

/// The devices by idle time, most first (ties by id).
pub fn by_idle(fleet: &Fleet) -> Vec<&DeviceRow> {
    let mut v: Vec<&DeviceRow> = fleet.devices.iter().collect();
    v.sort_by(|a, b| {
        b.idle_total_s
            .total_cmp(&a.idle_total_s)
            .then(a.id.cmp(&b.id))
    });
    v
}

/// The whole page.
pub fn render(fleet: &Fleet) -> String {
    let mut h = String::with_capacity(64 << 10);
    crate::page::open_page(
        &mut h,
        "fleet",
        &fleet.path,
        &[(
            "sub",
            format!(
                "{} devices, {} requests, one streaming pass",
                count(fleet.devices.len() as u64),
                count(fleet.requests)
            ),
        )],
    );
    let ranked = by_idle(fleet);
    let _ = write!(
        h,
        "<section>\n<h2>Idle time across devices</h2>\n<p class=\"intro\">{}</p>\n<div class=\"grid\">\n",
        esc("Idle time is each device's total time between busy periods, from its first arrival to its last completion: the time background work could use before any policy's wait.")
    );
    for (title, caption, svg) in [
        (
            "Distribution of idle time",
            "A point (x, y) means a share y of the devices has at most x of idle time.",
            distribution(fleet).render("fleet-cdf"),
        ),
        (
            "Requests against idle time",
            "One point per device, labelled with its name: busy devices sit right, devices with much idle time high.",
            scatter(fleet).render("fleet-scatter"),
        ),
    ] {
        let _ = write!(
            h,
            "<figure class=\"card\">\n<h3>{}</h3>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
            esc(title),
            svg,
            esc(caption)
        );
    }
    h.push_str("</div>\n</section>\n");
    // the two lists never share a device
    let k = RANKED.min(ranked.len().div_ceil(2));
    h.push_str(&table("Most idle time", &ranked[..k]));
    let least: Vec<&DeviceRow> = ranked[k..].iter().rev().take(RANKED).copied().collect();
    if !least.is_empty() {
        h.push_str(&table("Least idle time", &least));
    }
    crate::page::close_page(
        &mut h,
        "the same rows as JSON or CSV: <code>fallow analyze FILE --device all --json</code> or <code>--csv</code>.",
    );
    h
}

fn table(title: &str, rows: &[&DeviceRow]) -> String {
    let mut h = format!(
        "<section>\n<h2>{}</h2>\n<div style=\"overflow-x:auto\">\n<table>\n<thead><tr><th>device</th><th>idle time</th><th>requests</th><th>utilisation</th><th>idle intervals</th><th>idle mean</th></tr></thead>\n<tbody>\n",
        esc(title)
    );
    for d in rows {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&name(d)),
            secs(d.idle_total_s),
            count(d.requests),
            pct(d.utilization),
            count(d.idle_count),
            secs(d.idle_mean_s)
        );
    }
    h.push_str("</tbody>\n</table>\n</div>\n</section>\n");
    h
}

/// The empirical CDF of idle time over devices, as a step line.
pub fn cdf_points(fleet: &Fleet) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = fleet.devices.iter().map(|d| d.idle_total_s).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut pts = Vec::with_capacity(2 * v.len());
    for (i, x) in v.iter().enumerate() {
        pts.push((*x, i as f64 / n));
        pts.push((*x, (i + 1) as f64 / n));
    }
    pts
}

fn distribution(fleet: &Fleet) -> Chart {
    Chart::new(
        "CDF of idle time over devices",
        Axis::new("idle time", Scale::Linear, Unit::Seconds),
        Axis::new("share of devices", Scale::Linear, Unit::Fraction).range(0.0, 1.0),
    )
    .layer(Layer::Line {
        points: cdf_points(fleet),
        color: Color::C(0),
        dash: Dash::Solid,
        width: 2.0,
        marker: Marker::None,
        label: String::new(),
    })
}

fn scatter(fleet: &Fleet) -> Chart {
    let max = |f: fn(&DeviceRow) -> f64| {
        fleet
            .devices
            .iter()
            .map(f)
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max)
    };
    let (xmax, ymax) = (max(|d| d.requests as f64), max(|d| d.idle_total_s));
    let axis = |label: &str, unit, hi: f64| {
        let a = Axis::new(label, Scale::Linear, unit);
        if hi > 0.0 {
            a.range(0.0, hi * 1.08)
        } else {
            a
        }
    };
    let points = fleet
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (color, _, marker) = series_style(i);
            Point {
                x: d.requests as f64,
                y: d.idle_total_s,
                label: name(d),
                color,
                hollow: false,
                marker,
                title: Some(format!(
                    "{}: {} requests, {} idle, {} busy",
                    name(d),
                    count(d.requests),
                    secs(d.idle_total_s),
                    pct(d.utilization)
                )),
                series: String::new(),
            }
        })
        .collect();
    Chart::new(
        "Idle time against requests",
        axis("requests", Unit::Number, xmax),
        axis("idle time", Unit::Seconds, ymax),
    )
    .layer(Layer::Points(points))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fallow_core::period::CompletionSource;

    fn fleet(idle_s: &[(u32, f64)]) -> Fleet {
        Fleet {
            path: "f.csv".into(),
            format: None,
            requests: 0,
            completions: CompletionSource::Recorded,
            skipped: 0,
            streamed: true,
            p90_relative_error: 0.01,
            devices: idle_s
                .iter()
                .map(|&(id, idle_total_s)| DeviceRow {
                    id,
                    name: None,
                    requests: 1,
                    span_s: 1.0,
                    utilization: 0.5,
                    idle_count: 1,
                    idle_total_s,
                    idle_mean_s: idle_total_s,
                    idle_cv: 0.0,
                    idle_p90_s: idle_total_s,
                    busy_count: 1,
                    busy_mean_s: 0.5,
                })
                .collect(),
        }
    }

    #[test]
    fn the_cdf_steps_one_device_at_a_time() {
        let f = fleet(&[(0, 3.0), (1, 1.0), (2, 2.0)]);
        let third = 1.0 / 3.0;
        assert_eq!(
            cdf_points(&f),
            [
                (1.0, 0.0),
                (1.0, third),
                (2.0, third),
                (2.0, 2.0 * third),
                (3.0, 2.0 * third),
                (3.0, 1.0)
            ]
        );
    }

    #[test]
    fn ranking_is_by_idle_time_then_id_and_the_lists_do_not_overlap() {
        let f = fleet(&[(5, 1.0), (2, 4.0), (9, 4.0), (1, 0.5)]);
        let ids: Vec<u32> = by_idle(&f).iter().map(|d| d.id).collect();
        assert_eq!(ids, [2, 9, 5, 1]);
        let page = render(&f);
        // the device column opens each row
        let rows = |sec: &str| -> Vec<String> {
            sec.split("<tr><td>")
                .skip(1)
                .map(|r| r.split("</td>").next().unwrap().to_string())
                .collect()
        };
        let most = page.split_once("<h2>Most idle time</h2>").unwrap().1;
        let (most, least) = most.split_once("<h2>Least idle time</h2>").unwrap();
        assert_eq!(rows(most), ["2", "9"]);
        // least first
        assert_eq!(rows(least), ["1", "5"]);
        // one device: no "least" list repeating it
        assert!(!render(&fleet(&[(3, 1.0)])).contains("Least idle time"));
    }
}
