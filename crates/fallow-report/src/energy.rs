//! The HTML page of `fallow energy --html`: the SARD paper's plots for our
//! trace — idle periods and their length (Table V), exposed spin-up delay
//! (Table VI), energy by state normalised to the standalone disk (Figure
//! 8, one chart per policy), energy-delay product (Figure 9) and energy
//! against the always-on disk — plus the tables. Same stylesheet and
//! plotting module as the other reports.

use crate::energy_text::{bg_cells, describe_power, headlines};
use crate::svg::{esc, series_style, Axis, BarSeries, Chart, Color, Layer, Scale, Swatch, Unit};
use fallow_core::energy::{EnergyReport, EnergyRun};
use fallow_core::human::{bytes, count, joules, pct, secs};
use std::fmt::Write as _;
use std::path::Path;

/// Write the page to `path` atomically.
pub fn write(path: &Path, report: &EnergyReport) -> std::io::Result<()> {
    let html = render(report);
    crate::page::write(path, &html)
}

/// Policies in order of first appearance, with their runs.
fn by_policy(runs: &[EnergyRun]) -> Vec<(&str, Vec<&EnergyRun>)> {
    let mut out: Vec<(&str, Vec<&EnergyRun>)> = Vec::new();
    for r in runs {
        match out.iter_mut().find(|(p, _)| *p == r.policy) {
            Some((_, v)) => v.push(r),
            None => out.push((&r.policy, vec![r])),
        }
    }
    out
}

/// The settings (x axis), from the first policy's runs.
fn settings(runs: &[EnergyRun]) -> Vec<String> {
    by_policy(runs)
        .first()
        .map(|(_, v)| v.iter().map(|r| r.setting.clone()).collect())
        .unwrap_or_default()
}

fn figure(h: &mut String, title: &str, caption: &str, svg: String, wide: bool) {
    let _ = write!(
        h,
        "<figure class=\"card{}\">\n<h3>{}</h3>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
        if wide { " wide" } else { "" },
        esc(title),
        svg,
        esc(caption)
    );
}

/// The whole page.
pub fn render(r: &EnergyReport) -> String {
    let mut h = String::with_capacity(128 << 10);
    let name = Path::new(&r.input.path)
        .file_name()
        .map_or(r.input.path.clone(), |n| n.to_string_lossy().into_owned());
    let detail = format!(
        "{}{} requests over {}; completions {}",
        r.input
            .device
            .map_or(String::new(), |d| format!("device {d} · ")),
        count(r.input.requests),
        secs(r.input.span_s),
        r.input.completions
    );
    let power = describe_power(&r.power, r.break_even_s);
    crate::page::open_page(
        &mut h,
        "disk energy and SARD",
        &name,
        &[("sub", detail), ("sub note", power)],
    );
    let lines = headlines(r);
    if !lines.is_empty() {
        h.push_str("<section class=\"findings\">\n<h2>Findings</h2>\n<ul>\n");
        for l in lines {
            let _ = writeln!(
                h,
                "<li><span class=\"tag\">delay</span><span>{}</span></li>",
                esc(&l)
            );
        }
        h.push_str("</ul>\n</section>\n");
    }
    let _ = write!(
        h,
        "<section>\n<h2>Idle periods and spin-up delay</h2>\n<p class=\"intro\">{}</p>\n<div class=\"grid\">\n",
        esc("Requests served by peers while the disk sleeps do not wake it: idle periods merge into fewer, longer ones, and fewer spin-ups expose their delay to the user (SARD Tables V and VI).")
    );
    let labels = settings(&r.runs);
    if let Some(note) = r.no_spindown_note() {
        // every chart of this section would be a flat line at zero
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(&note));
    } else {
        spindown_figures(&mut h, r, &labels);
    }
    h.push_str("</div>\n</section>\n");

    let _ = write!(
        h,
        "<section>\n<h2>Energy by state</h2>\n<p class=\"intro\">{}</p>\n<div class=\"grid\">\n",
        esc("Busy: serving requests; idle: spinning with nothing to do (the timeout); power cycle: shutdowns and spin-ups; standby: spun down. Bars are shares of the standalone disk's total energy under the same policy (SARD Figure 8, which leaves standby out; here it is the top segment).")
    );
    for (i, (policy, runs)) in by_policy(&r.runs).iter().enumerate() {
        if runs.iter().all(|x| x.spinups == 0 && x.idle_periods == 0) {
            continue; // always-on: one colour, nothing to compare
        }
        figure(
            &mut h,
            &format!("{policy}: energy by state (Figure 8)"),
            "Each bar is one setting; its segments are the energy of each state over the standalone disk's total.",
            stacked(runs).render(&format!("en-state-{i}")),
            false,
        );
    }
    figure(
        &mut h,
        "Energy against the always-on disk",
        "Total energy over that of the standalone disk without power management (always-on).",
        lines_chart(r, &labels, "energy / always-on", Unit::Fraction, |x| {
            x.vs_always_on.and_then(|v| v.energy).unwrap_or(f64::NAN)
        })
        .render("en-on"),
        false,
    );
    h.push_str("</div>\n</section>\n");
    h.push_str(&table(r));
    if r.bg.is_some() {
        h.push_str(&bg_table(r));
    }
    crate::page::close_page(
        &mut h,
        "the same results as JSON: <code>fallow energy --json</code>.",
    );
    h
}

/// One line per policy over the settings.
/// Idle periods, their length, the exposed delay and the EDP: what a
/// spin-down changes, by share of local requests.
fn spindown_figures(h: &mut String, r: &EnergyReport, labels: &[String]) {
    figure(
        h,
        "Idle periods (Table V)",
        "Number of idle intervals in which the disk spun down, for each share of requests served locally.",
        lines_chart(r, labels, "idle periods", Unit::Number, |x| x.idle_periods as f64)
            .render("en-periods"),
        false,
    );
    figure(
        h,
        "Mean idle period length (Table V)",
        "Mean length of those idle periods, from the disk falling idle to the request that woke it.",
        lines_chart(r, labels, "mean idle period", Unit::Seconds, |x| x.mean_idle_s)
            .render("en-length"),
        false,
    );
    figure(
        h,
        "Exposed spin-up delay (Table VI)",
        "Total time users waited for the disk to spin up: per spin-up, the wait of the request that woke it.",
        lines_chart(r, labels, "exposed delay", Unit::Seconds, |x| x.exposed_delay_s)
            .render("en-delay"),
        false,
    );
    figure(
        h,
        "Energy-delay product (Figure 9)",
        "Energy × (span + exposed delay), normalised to the same policy on the standalone disk (100 % local).",
        lines_chart(r, labels, "EDP / standalone", Unit::Fraction, |x| {
            x.vs_standalone.and_then(|v| v.edp).unwrap_or(f64::NAN)
        })
        .render("en-edp"),
        false,
    );
}

fn lines_chart(
    r: &EnergyReport,
    labels: &[String],
    y_label: &str,
    unit: Unit,
    value: impl Fn(&EnergyRun) -> f64,
) -> Chart {
    let max = r
        .runs
        .iter()
        .map(&value)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let mut y = Axis::new(y_label, Scale::Linear, unit);
    if max > 0.0 {
        y = y.range(0.0, max * 1.08);
    }
    let mut c = Chart::new(
        y_label.to_string(),
        Axis::new("requests served locally", Scale::Linear, Unit::Number).categories(labels, 1),
        y,
    );
    let policies = by_policy(&r.runs);
    // policies with the same values everywhere are drawn as one line named
    // after all of them ("timeout = adaptive"); the others, which may still
    // share some values, are shifted sideways a little within each category
    // so their markers sit side by side (and each has its own colour, dash
    // and marker, and its name at its line's end)
    let n = policies.len() as f64;
    if n > 1.0 {
        c = c.dodge(0.3 / n);
    }
    for (i, (policy, runs)) in policies.iter().enumerate() {
        let (color, dash, marker) = series_style(i);
        let points = runs
            .iter()
            .filter_map(|x| {
                labels
                    .iter()
                    .position(|l| *l == x.setting)
                    .map(|k| (k as f64, value(x)))
            })
            .collect();
        c = c
            .layer(Layer::Line {
                points,
                color,
                dash,
                width: 2.0,
                marker,
                label: policy.to_string(),
            })
            .legend(policy.to_string(), color, Swatch::Marked(dash, marker));
    }
    c
}

/// One state's energy over the standalone total, from a run.
type StateShare = fn(&EnergyRun) -> Option<f64>;

/// Figure 8: stacked bars of energy by state over the standalone total.
fn stacked(runs: &[&EnergyRun]) -> Chart {
    let labels: Vec<String> = runs.iter().map(|x| x.setting.clone()).collect();
    let x: Vec<f64> = (0..runs.len()).map(|i| i as f64).collect();
    let parts: [(&str, Color, StateShare); 4] = [
        ("busy", Color::C(0), |x| {
            x.vs_standalone.and_then(|v| v.busy)
        }),
        ("idle", Color::C(1), |x| {
            x.vs_standalone.and_then(|v| v.idle)
        }),
        ("power cycle", Color::C(2), |x| {
            x.vs_standalone.and_then(|v| v.power_cycle)
        }),
        ("standby", Color::Muted, |x| {
            x.vs_standalone.and_then(|v| v.standby)
        }),
    ];
    let top = runs
        .iter()
        .map(|x| x.vs_standalone.and_then(|v| v.energy).unwrap_or(0.0))
        .fold(1.0f64, f64::max);
    let mut series = Vec::new();
    for (name, color, f) in parts {
        let values: Vec<f64> = runs.iter().map(|x| f(x).unwrap_or(0.0)).collect();
        let titles = runs
            .iter()
            .zip(&values)
            .map(|(x, v)| format!("{}: {name} {}", x.setting, pct(*v)))
            .collect();
        series.push(BarSeries {
            values,
            colors: vec![color],
            titles,
        });
    }
    let mut c = Chart::new(
        "Energy by state over the standalone disk's total",
        Axis::new("requests served locally", Scale::Linear, Unit::Number).categories(&labels, 1),
        Axis::new("share of standalone energy", Scale::Linear, Unit::Fraction)
            .range(0.0, top * 1.08),
    )
    .layer(Layer::Bars {
        x,
        width: 0.7,
        series,
    });
    for (name, color, _) in parts {
        c = c.legend(name, color, Swatch::Box);
    }
    c
}

fn table(r: &EnergyReport) -> String {
    let mut s = String::from(
        "<section>\n<h2>Runs</h2>\n<div style=\"overflow-x:auto\">\n<table class=\"wide-table\">\n<thead><tr>",
    );
    for head in [
        "policy",
        "setting",
        "local requests",
        "idle periods",
        "mean length",
        "spin-ups",
        "exposed delay",
        "per request",
        "delay vs standalone",
        "energy",
        "busy",
        "idle",
        "power cycle",
        "standby",
        "energy vs standalone",
        "energy vs always-on",
        "EDP vs standalone",
        "remote requests",
        "remote mean time",
    ] {
        let _ = write!(s, "<th>{}</th>", esc(head));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    let ratio = |v: Option<f64>| v.map_or_else(|| "–".to_string(), pct);
    for x in &r.runs {
        let a = x.vs_standalone.unwrap_or_default();
        let o = x.vs_always_on.unwrap_or_default();
        let cells = [
            x.setting.clone(),
            count(x.local_requests),
            count(x.idle_periods),
            secs(x.mean_idle_s),
            count(x.spinups),
            secs(x.exposed_delay_s),
            secs(x.exposed_delay_per_request_s),
            ratio(a.exposed_delay),
            joules(x.energy_j.total),
            joules(x.energy_j.busy),
            joules(x.energy_j.idle),
            joules(x.energy_j.power_cycle),
            joules(x.energy_j.standby),
            ratio(a.energy),
            ratio(o.energy),
            ratio(a.edp),
            count(x.remote.requests),
            secs(x.remote.mean_response_s),
        ];
        let _ = write!(s, "<tr><th>{}</th>", esc(&x.policy));
        for c in cells {
            let _ = write!(s, "<td>{}</td>", esc(&c));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n</div>\n</section>\n");
    s
}

fn bg_table(r: &EnergyReport) -> String {
    let Some(plan) = &r.bg else {
        return String::new();
    };
    let mut s = format!(
        "<section>\n<h2>BG work while the disk spins anyway</h2>\n<p class=\"intro\">{}</p>\n<div style=\"overflow-x:auto\">\n<table class=\"wide-table\">\n<thead><tr>",
        esc(&format!(
            "{} of BG work in {} requests, started {} into an idle interval, only while the disk spins: it never wakes a sleeping disk and stops at the spin-down. Extra energy is the run with BG work minus the same run without.",
            bytes(plan.work_bytes),
            bytes(plan.size_bytes),
            secs(plan.wait_ns as f64 / 1e9)
        ))
    );
    for head in [
        "policy",
        "setting",
        "done",
        "share",
        "BG time",
        "extra energy",
        "FG requests delayed",
        "FG added delay",
    ] {
        let _ = write!(s, "<th>{}</th>", esc(head));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for x in &r.runs {
        let Some(cells) = bg_cells(x) else { continue };
        let _ = write!(s, "<tr><th>{}</th>", esc(&x.policy));
        for c in cells {
            let _ = write!(s, "<td>{}</td>", esc(&c));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n</div>\n</section>\n");
    s
}
