//! The decision `fallow demo` makes on its workload — every deployable
//! policy tuned for an FG budget and ranked, against the kernel's idle I/O
//! class — as the "what to do" section that opens its HTML report, and as
//! the lines it prints.

use crate::svg::{esc, series_style, Axis, Chart, Color, Layer, Marker, Point, Scale, Unit};
use fallow_core::human::{bytes, num, pct, secs, signed_pct};
use fallow_core::tune::recommend::Recommendation;
use fallow_core::tune::Choice;
use serde::Serialize;
use std::fmt::Write as _;

/// What to run, why, and what it costs.
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    /// The FG budget as written (`5%`).
    pub budget_text: String,
    /// The BG work in words.
    pub bg: String,
    /// Mean FG response time without BG work, s.
    pub baseline_fg_mean_response_s: f64,
    /// The top-ranked setting (`None`: no policy does BG work within the budget).
    pub best: Option<Choice>,
    /// The kernel's idle I/O class at its defaults, 64 KiB requests.
    pub baseline: Choice,
    /// The top policy tuned for the idle class's own FG slowdown.
    pub at_baseline_cost: Option<Choice>,
    /// `fallow scrub` running the best setting on a real device.
    pub live_command: Option<String>,
    /// `fallow simulate` reproducing the best setting's figures exactly.
    pub simulate_command: Option<String>,
    /// `fallow tune … --json > tune.json`, for `fallow scrub --tuned`.
    pub tune_command: Option<String>,
    /// Every policy, ranked.
    pub recommendation: Recommendation,
}

/// `fixed-wait:t=1.2s with 1 MiB requests`.
fn setting(c: &Choice) -> String {
    format!("{} with {} requests", c.spec, bytes(c.request_size_bytes))
}

/// `12.3 MB/s of BG work for +4.1 % FG slowdown (1.2 ms added per request)`.
fn figures(c: &Choice) -> String {
    format!(
        "{} MB/s of BG work for {} FG slowdown ({} added per request)",
        num(c.bg_throughput_bytes_per_s / 1e6),
        signed_pct(c.fg_slowdown),
        secs(c.fg_mean_added_delay_s)
    )
}

impl Decision {
    /// The best setting's throughput over the idle class's (`None` when
    /// either is missing or the idle class does no BG work).
    pub fn gain(&self) -> Option<f64> {
        let b = self.best.as_ref()?;
        (self.baseline.bg_throughput_bytes_per_s > 0.0)
            .then(|| b.bg_throughput_bytes_per_s / self.baseline.bg_throughput_bytes_per_s)
    }

    /// The terminal lines: what to do, against the idle class, the command.
    pub fn text(&self) -> String {
        let mut s = String::from("\nWhat to do\n");
        match &self.best {
            Some(b) => {
                let _ = writeln!(
                    s,
                    "  Run {} (the best of {} policies tuned for a {} budget): {}.",
                    setting(b),
                    self.recommendation.ranking.len(),
                    self.budget_text,
                    figures(b)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  No policy does BG work within a {} budget: loosen it (--budget).",
                    self.budget_text
                );
            }
        }
        let _ = writeln!(
            s,
            "  The kernel's idle class (ionice -c3 model, 64 KiB): {}{}.",
            figures(&self.baseline),
            self.gain()
                .map(|g| format!("; the setting above does {}× its BG work", num(g)))
                .unwrap_or_default()
        );
        if let Some(c) = &self.at_baseline_cost {
            let _ = writeln!(
                s,
                "  At the idle class's own FG cost, {}: {}.",
                setting(c),
                figures(c)
            );
        }
        if let Some(c) = &self.live_command {
            let _ = writeln!(s, "  Live (as root, on the disk to scrub): {c}");
        }
        if let Some(c) = &self.simulate_command {
            let _ = writeln!(s, "  Reproduce: {c}");
        }
        s
    }

    /// The "What to do" section of the report.
    pub fn html(&self) -> String {
        let mut h = String::from("<section class=\"decision card\">\n<h2>What to do</h2>\n");
        let _ = writeln!(
            h,
            "<p class=\"intro\">{}</p>",
            esc(&format!(
                "Every deployable policy of fallow's registry tuned for a budget of {} (mean FG slowdown or added delay), its knob and request size searched as `fallow recommend` does, for {}.",
                self.budget_text, self.bg
            ))
        );
        match &self.best {
            Some(b) => {
                let _ = writeln!(
                    h,
                    "<p class=\"lead\">Run <code>{}</code> with {} requests.</p>",
                    esc(&b.spec),
                    esc(&bytes(b.request_size_bytes))
                );
                h.push_str("<div class=\"cards inline\">\n");
                let gain = self
                    .gain()
                    .map(|g| format!("{}× the idle class", num(g)))
                    .unwrap_or_else(|| "the idle class does none".into());
                for (label, value, sub) in [
                    (
                        "BG throughput",
                        format!("{} MB/s", num(b.bg_throughput_bytes_per_s / 1e6)),
                        gain,
                    ),
                    (
                        "FG cost",
                        signed_pct(b.fg_slowdown),
                        format!(
                            "{} added per request (mean RT {})",
                            secs(b.fg_mean_added_delay_s),
                            secs(self.baseline_fg_mean_response_s)
                        ),
                    ),
                    (
                        "idle time used",
                        pct(b.idle_used_fraction),
                        format!("{} of FG requests delayed", pct(b.fg_collision_rate)),
                    ),
                    (
                        "kernel idle class",
                        format!(
                            "{} MB/s",
                            num(self.baseline.bg_throughput_bytes_per_s / 1e6)
                        ),
                        format!("at {} FG slowdown", signed_pct(self.baseline.fg_slowdown)),
                    ),
                ]
                .into_iter()
                .chain(self.at_baseline_cost.as_ref().map(|c| {
                    (
                        "at the idle class's cost",
                        format!("{} MB/s", num(c.bg_throughput_bytes_per_s / 1e6)),
                        format!("{} at {}", setting(c), signed_pct(c.fg_slowdown)),
                    )
                })) {
                    let _ = writeln!(
                        h,
                        "<div class=\"stat\"><div class=\"label\">{}</div><div class=\"value\">{}</div><div class=\"subv\">{}</div></div>",
                        esc(label),
                        esc(&value),
                        esc(&sub)
                    );
                }
                h.push_str("</div>\n");
            }
            None => {
                let _ = writeln!(
                    h,
                    "<p class=\"lead\">No policy does BG work within {}: give a looser budget (<code>fallow demo --budget 10%</code>).</p>",
                    esc(&self.budget_text)
                );
            }
        }
        for (what, cmd) in [
            (
                "Run it live (as root; replace /dev/sdX with the disk to scrub):",
                &self.live_command,
            ),
            (
                "Reproduce these figures in simulation:",
                &self.simulate_command,
            ),
            (
                "Tune on your own trace, then `fallow scrub /dev/sdX --tuned tune.json`:",
                &self.tune_command,
            ),
        ] {
            if let Some(c) = cmd {
                let _ = writeln!(
                    h,
                    "<p class=\"cmd-what\">{}</p>\n<pre class=\"cmd\"><code>{}</code></pre>",
                    esc(what),
                    esc(c)
                );
            }
        }
        h.push_str("</section>\n<section>\n<h2>Every policy, tuned</h2>\n");
        h.push_str(&self.table());
        let _ = write!(
            h,
            "<div class=\"grid\">\n<figure class=\"card wide\">\n<h3>Tuned policies against the kernel's idle class</h3>\n{}\n<figcaption>{}</figcaption>\n</figure>\n</div>\n",
            self.chart().render("decision"),
            esc("Each policy at its best setting within the budget: x is the BG throughput, y the FG slowdown. The open ring is the kernel's idle class at its defaults; further right at the same height is better. Hover a point for its setting.")
        );
        h.push_str("</section>\n");
        h
    }

    fn table(&self) -> String {
        let mut s = String::from(
            "<div class=\"scroll\">\n<table class=\"wide-table\">\n<caption>Every policy tuned for the budget</caption>\n<thead><tr>",
        );
        for head in [
            "rank",
            "policy",
            "setting",
            "request size",
            "BG MB/s",
            "FG slowdown",
            "added delay",
            "idle used",
        ] {
            let _ = write!(s, "<th>{}</th>", esc(head));
        }
        s.push_str("</tr></thead>\n<tbody>\n");
        let row = |s: &mut String, rank: &str, policy: &str, c: Option<&Choice>, note: &str| {
            let cells = match c {
                Some(c) => [
                    c.spec.clone(),
                    bytes(c.request_size_bytes),
                    num(c.bg_throughput_bytes_per_s / 1e6),
                    signed_pct(c.fg_slowdown),
                    secs(c.fg_mean_added_delay_s),
                    pct(c.idle_used_fraction),
                ],
                None => [
                    note.to_string(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ],
            };
            let _ = write!(s, "<tr><td>{}</td><th>{}</th>", esc(rank), esc(policy));
            for c in cells {
                let _ = write!(s, "<td>{}</td>", esc(&c));
            }
            s.push_str("</tr>\n");
        };
        for r in &self.recommendation.ranking {
            let rank = if r.rank == 0 {
                "–".to_string()
            } else {
                r.rank.to_string()
            };
            let note = "no setting meets the budget";
            match &r.best {
                Some(_) if r.rank == 0 => row(
                    &mut s,
                    &rank,
                    &r.policy,
                    None,
                    "no BG work within the budget",
                ),
                c => row(&mut s, &rank, &r.policy, c.as_ref(), note),
            }
        }
        row(
            &mut s,
            "baseline",
            "kernel idle class (ionice -c3)",
            Some(&self.baseline),
            "",
        );
        if let Some(c) = &self.at_baseline_cost {
            row(&mut s, "at its cost", &c.policy, Some(c), "");
        }
        s.push_str("</tbody>\n</table>\n</div>\n");
        s
    }

    fn chart(&self) -> Chart {
        let mut points: Vec<Point> = self
            .recommendation
            .ranking
            .iter()
            .filter(|r| r.rank > 0)
            .filter_map(|r| r.best.as_ref())
            .enumerate()
            .map(|(i, c)| {
                let (color, _, marker) = series_style(i);
                Point {
                    x: c.bg_throughput_bytes_per_s / 1e6,
                    y: c.fg_slowdown,
                    label: format!("{} · {}", c.spec, bytes(c.request_size_bytes)),
                    color,
                    hollow: false,
                    marker,
                    title: Some(format!(
                        "{} with {} requests: {}",
                        c.spec,
                        bytes(c.request_size_bytes),
                        figures(c)
                    )),
                    series: String::new(),
                }
            })
            .collect();
        if let Some(c) = &self.at_baseline_cost {
            points.push(Point {
                x: c.bg_throughput_bytes_per_s / 1e6,
                y: c.fg_slowdown,
                label: format!("{} at the idle class's cost", c.spec),
                color: Color::C(0),
                hollow: true,
                marker: Marker::Square,
                title: Some(format!(
                    "{}, tuned to the idle class's slowdown: {}",
                    setting(c),
                    figures(c)
                )),
                series: String::new(),
            });
        }
        points.push(Point {
            x: self.baseline.bg_throughput_bytes_per_s / 1e6,
            y: self.baseline.fg_slowdown,
            label: "kernel idle class".into(),
            color: Color::Muted,
            hollow: true,
            marker: Marker::Circle,
            title: Some(format!(
                "the kernel's idle class (ionice -c3 model), 64 KiB requests: {}",
                figures(&self.baseline)
            )),
            series: String::new(),
        });
        let xmax = points.iter().map(|p| p.x).fold(0.0f64, f64::max);
        let ymax = points.iter().map(|p| p.y).fold(0.0f64, f64::max);
        let mut x = Axis::new("BG throughput (MB/s)", Scale::Linear, Unit::Number);
        if xmax > 0.0 {
            x = x.range(0.0, xmax * 1.15);
        }
        let mut y = Axis::new("FG slowdown", Scale::Linear, Unit::Fraction);
        if ymax > 0.0 {
            y = y.range(0.0, ymax * 1.15);
        }
        Chart::new("Tuned policies against the kernel's idle class", x, y)
            .wide()
            .layer(Layer::Points(points))
    }
}
