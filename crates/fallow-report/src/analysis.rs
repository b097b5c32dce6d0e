//! The characterisation page of `fallow analyze --html`, `fallow demo` and
//! `fallow.analyze(html=)`: a summary, the headline findings and the plots
//! of the source papers, each with a caption saying how to read it.

use crate::decision::Decision;
use crate::describe::{describe_input, Source};
use crate::page::{close_page, open_page};
use crate::plots::{self, Figure};
use crate::svg::esc;
use fallow_core::analyze::Finding;
use fallow_core::human::{count, num, pct, requests, secs};
use fallow_core::Characterization;
use std::fmt::Write as _;
use std::path::Path;

/// Write the page for `c` to `path` atomically ([`crate::page::write`]).
/// `source` describes the input when it is not a file (the demo's
/// synthetic workload); `decision` (the demo's) opens the page.
pub fn write(
    path: &Path,
    c: &Characterization,
    findings: &[Finding],
    source: Option<&Source>,
    decision: Option<&Decision>,
) -> std::io::Result<()> {
    crate::page::write(path, &render(c, findings, source, decision))
}

/// The whole page.
pub fn render(
    c: &Characterization,
    findings: &[Finding],
    source: Option<&Source>,
    decision: Option<&Decision>,
) -> String {
    let t = &c.trace;
    let name = match source {
        Some(src) => src.title.clone(),
        None => crate::describe::trace_title(Path::new(&t.path)),
    };
    let mut h = String::with_capacity(256 << 10);
    let mut lines = vec![("sub", describe_input(c))];
    if let Some(src) = source {
        lines.push(("sub note", src.detail.clone()));
    } else if !t.path.is_empty() {
        lines.push(("sub path", t.path.clone()));
    }
    open_page(&mut h, "idle-time report", &name, &lines);
    if let Some(d) = decision {
        // the decision first, then the characterisation behind it
        h.push_str(&d.html());
        h.push_str("<h2 class=\"part\">The workload</h2>\n");
    }
    h.push_str(&cards(c));
    h.push_str(&tables(c));
    h.push_str(&findings_html(findings));

    let sections: Vec<(&str, &str, Vec<Figure>)> = vec![
        (
            "Idle intervals",
            "How long the device stays idle once it falls idle, and how that idle time is spread over intervals.",
            vec![plots::idle_cdf(c), plots::idle_cdf_normalised(c), plots::concentration(c)],
        ),
        (
            "Waiting before background work",
            "The hazard-rate view: what a policy that waits before starting background work can expect, and what it gives up.",
            vec![plots::remaining(c), plots::usable(c)],
        ),
        (
            "Burstiness of idle intervals",
            "Intervals are small or large, split at (CV+1)·mean. If the classes cluster, the last interval tells a policy how much background work the next one can take.",
            vec![plots::lag_pairs(c, false), plots::lag_pairs(c, true), plots::acf(c)],
        ),
        (
            "Busy periods",
            "Busy Bee measures busy periods in requests. When long ones (at or above the Threshold, where the longest 10 % begin) come in clusters, background work should turn conservative for the next few idle intervals after one.",
            vec![plots::busy_histogram(c), plots::p_lag(c)],
        ),
        (
            "Load over time",
            "The foreground load behind the idle intervals, and whether it repeats.",
            std::iter::once(plots::rate(c)).chain(plots::hourly(c)).collect(),
        ),
    ];
    let no_idle = c.idle.count == 0;
    if no_idle {
        h.push_str("<section>\n<h2>Idle intervals</h2>\n<div class=\"card empty\"><p>The device never fell idle between requests, so there are no idle intervals to characterise: every request arrived while another was still being served.</p></div>\n</section>\n");
    }
    for (title, intro, figs) in sections {
        // without idle intervals the idle-time plots would all be empty
        let idle_section = !matches!(title, "Busy periods" | "Load over time");
        if no_idle && idle_section {
            continue;
        }
        let _ = write!(
            h,
            "<section>\n<h2>{}</h2>\n<p class=\"intro\">{}</p>\n<div class=\"grid\">\n",
            esc(title),
            esc(intro)
        );
        for f in figs {
            let _ = write!(
                h,
                "<figure class=\"card{}\">\n<h3>{}</h3>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
                if f.wide { " wide" } else { "" },
                esc(&f.title),
                f.svg,
                esc(&f.caption)
            );
        }
        if title == "Load over time" && c.periodicity.is_none() {
            let _ = writeln!(
                h,
                "<div class=\"card wide empty\"><h3>Hourly load and periodicity</h3><p>The trace spans {}: too short to test for periodic load, which needs at least 4 hours of hourly request counts.</p></div>",
                esc(&secs(c.trace.span_s))
            );
        }
        h.push_str("</div>\n</section>\n");
    }
    close_page(
        &mut h,
        "all statistics are also available as JSON with <code>fallow analyze --json</code>.",
    );
    h
}

fn cards(c: &Characterization) -> String {
    let t = &c.trace;
    let items = [
        (
            "requests",
            count(t.requests),
            format!("over {}", secs(t.span_s)),
        ),
        (
            "utilisation",
            pct(c.utilization),
            "share of time busy".to_string(),
        ),
        (
            "idle intervals",
            count(c.idle.count),
            format!("{} in total", secs(c.idle.total_s)),
        ),
        (
            "mean idle",
            secs(c.idle.mean_s),
            format!("CV {}", num(c.idle.cv)),
        ),
        (
            "longest idle",
            secs(c.idle.max_s),
            format!("p99 {}", secs(c.idle.p99_s)),
        ),
        (
            "mean busy period",
            format!("{} req", num(c.busy.clusters.mean_requests)),
            secs(c.busy.mean_s),
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

fn table(title: &str, rows: &[(&str, String)]) -> String {
    let mut s = format!("<table>\n<caption>{}</caption>\n<tbody>\n", esc(title));
    for (k, v) in rows {
        let _ = writeln!(s, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

fn tables(c: &Characterization) -> String {
    let i = &c.idle;
    let b = &c.busy;
    let t = &c.trace;
    let idle = table(
        "Idle intervals",
        &[
            ("count", count(i.count)),
            ("total", secs(i.total_s)),
            ("mean", secs(i.mean_s)),
            ("CV", num(i.cv)),
            ("median (p50)", secs(i.p50_s)),
            ("p90", secs(i.p90_s)),
            ("p99", secs(i.p99_s)),
            ("longest", secs(i.max_s)),
        ],
    );
    let busy = table(
        "Busy periods",
        &[
            ("count", count(b.count)),
            (
                "mean",
                format!(
                    "{} · {} requests",
                    secs(b.mean_s),
                    num(b.clusters.mean_requests)
                ),
            ),
            ("CV (time)", num(b.cv)),
            ("p90 (time)", secs(b.p90_s)),
            (
                "longest",
                format!("{} · {}", secs(b.max_s), requests(b.clusters.max_requests)),
            ),
            (
                "Threshold (longest 10 %)",
                requests(b.clusters.threshold_requests),
            ),
            ("long periods", pct(b.clusters.long_fraction)),
            (
                "Cluster Window Size",
                if b.clusters.cws_reached {
                    b.clusters.cws.to_string()
                } else {
                    format!("{} (cap: Σ P_lag < 0.8)", b.clusters.cws)
                },
            ),
        ],
    );
    let mut trace_rows = vec![
        ("requests", count(t.requests)),
        (
            "reads / writes",
            format!("{} / {}", count(t.reads), count(t.writes)),
        ),
        ("span", secs(t.span_s)),
        ("utilisation", pct(c.utilization)),
    ];
    if t.devices.len() > 1 {
        let list = t
            .devices
            .iter()
            .map(|d| format!("{}: {}", d.label(), count(d.requests)))
            .collect::<Vec<_>>()
            .join(", ");
        trace_rows.push(("devices (requests)", list));
    }
    if t.skipped > 0 {
        trace_rows.push(("skipped records", count(t.skipped)));
    }
    if t.reordered > 0 {
        trace_rows.push(("reordered records", count(t.reordered)));
    }
    if let Some(ar) = &c.ar {
        trace_rows.push((
            "AR model of idle lengths",
            format!("AR({}) by AIC", ar.order),
        ));
    }
    let tr = table("Trace", &trace_rows);
    format!("<div class=\"tables\">\n{tr}{idle}{busy}</div>\n")
}

fn findings_html(findings: &[Finding]) -> String {
    let mut s = String::from("<section class=\"findings\">\n<h2>Findings</h2>\n<ul>\n");
    for f in findings {
        let _ = writeln!(
            s,
            "<li><span class=\"tag\">{}</span><span>{}</span></li>",
            esc(f.topic),
            esc(&f.text)
        );
    }
    s.push_str("</ul>\n</section>\n");
    s
}
