//! The HTML reports' charts can be read (issue 17 item 4): in the compare,
//! Pareto and energy pages every line series differs from every other in
//! its (colour, dash, marker) triple, carries hover text and a direct label
//! at its end; Pareto points say their knob value; the demo's report opens
//! with the decision. Checked on the SVG the commands write, parsed here.

use crate::common;

use common::{fallow, stderr};
use std::collections::BTreeSet;
use std::path::Path;

/// The `<svg …>…</svg>` elements of a page.
fn svgs(html: &str) -> Vec<&str> {
    html.split("<svg ")
        .skip(1)
        .map(|s| &s[..s.find("</svg>").expect("closed")])
        .collect()
}

/// One line series as drawn: the colour class of its path, its dash
/// pattern (empty: solid), its marker shape (empty: none), whether it has
/// hover text.
#[derive(Debug)]
struct Series {
    color: String,
    dash: String,
    marker: String,
    title: Option<String>,
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let k = format!(" {name}=\"");
    let i = tag.find(&k)? + k.len();
    tag[i..].split('"').next()
}

fn series(svg: &str) -> Vec<Series> {
    svg.split("<g class=\"series\"")
        .skip(1)
        .map(|g| {
            let g = &g[..g.find("</g>").expect("closed group")];
            let path = g.split("<path class=\"line ").nth(1).expect("a line");
            let path = &path[..path.find("/>").unwrap()];
            let color = path.split('"').next().unwrap().trim().to_string();
            let dash = attr(path, "stroke-dasharray").unwrap_or("").to_string();
            let marker = g
                .split("class=\"mk mk-")
                .nth(1)
                .map(|m| m.split(' ').next().unwrap().to_string())
                .unwrap_or_default();
            let title = g
                .split("<title>")
                .nth(1)
                .map(|t| t.split("</title>").next().unwrap().to_string());
            Series {
                color,
                dash,
                marker,
                title,
            }
        })
        .collect()
}

/// Every series of `svg` has its own triple, hover text and an end label.
fn distinct(svg: &str, what: &str) -> usize {
    let s = series(svg);
    let triples: BTreeSet<(&str, &str, &str)> = s
        .iter()
        .map(|x| (x.color.as_str(), x.dash.as_str(), x.marker.as_str()))
        .collect();
    assert_eq!(triples.len(), s.len(), "{what}: {s:#?}");
    for x in &s {
        let t = x.title.as_deref().unwrap_or("");
        assert!(!t.is_empty(), "{what}: a series without hover text: {x:?}");
        assert!(
            svg.contains(&format!("<g class=\"end-label\"><title>{t}</title>")),
            "{what}: no direct label for {t}"
        );
    }
    s.len()
}

fn demo_trace(dir: &Path) -> String {
    let out = dir.join("d");
    let o = fallow(&["demo", "--requests", "2000", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    out.join("trace.csv").to_str().unwrap().to_string()
}

#[test]
fn compare_pareto_and_energy_series_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let trace = demo_trace(dir.path());
    let html = dir.path().join("c.html");
    // every policy of the registry: more series than colours
    let o = fallow(&[
        "compare",
        &trace,
        "--bg",
        "size",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    let ccdf = svgs(&page)
        .into_iter()
        .find(|s| s.contains("CCDF of FG response times"))
        .unwrap();
    let n = distinct(ccdf, "compare CCDF");
    assert!(n > 7, "{n} series: fewer than the registry's policies");
    // the scatter's points: hover text with the figures, shapes vary
    let scatter = svgs(&page)
        .into_iter()
        .find(|s| s.contains("FG slowdown against BG throughput"))
        .unwrap();
    assert!(scatter.contains("MB/s of BG work, FG slowdown"));
    let shapes: BTreeSet<&str> = scatter
        .split("class=\"mk mk-")
        .skip(1)
        .map(|m| m.split(' ').next().unwrap())
        .collect();
    assert!(shapes.len() >= 5, "{shapes:?}");

    let html = dir.path().join("p.html");
    let o = fallow(&[
        "pareto",
        &trace,
        "--bg",
        "size",
        "--bg-size",
        "1MiB",
        "--policy",
        "fixed-wait",
        "--policy",
        "deadline",
        "--policy",
        "oracle",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    let chart = svgs(&page)[0];
    assert_eq!(distinct(chart, "pareto"), 3);
    // knob values beside points, every setting in its hover text
    assert!(chart.contains(">t="), "no fixed-wait knob label");
    assert!(chart.contains("<title>fixed-wait:t="), "no hover text");

    let html = dir.path().join("e.html");
    let o = fallow(&["energy", &trace, "--html", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    let mut charts = 0;
    for svg in svgs(&page) {
        if svg.contains("<g class=\"series\"") {
            assert!(distinct(svg, "energy") >= 2);
            charts += 1;
        }
    }
    assert!(charts >= 4, "{charts} energy line charts");
    // wide tables scroll inside their box instead of running off the page
    assert!(page.contains("<div style=\"overflow-x:auto\">\n<table class=\"wide-table\">"));
}

#[test]
fn the_demo_report_opens_with_the_decision() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d");
    let o = fallow(&["demo", "--requests", "2000", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = common::stdout(&o);
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    // "What to do" comes before the characterisation
    let what = page
        .find("<h2>What to do</h2>")
        .expect("a decision section");
    let workload = page
        .find("The workload</h2>")
        .expect("the characterisation");
    assert!(what < workload);
    // the JSON's recommended setting is the one the page and stdout name,
    // with its live command
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let d = &doc["decision"];
    let spec = d["best"]["spec"].as_str().expect("a recommended setting");
    assert!(page.contains(&format!("Run <code>{spec}</code>")), "{spec}");
    let live = d["live_command"].as_str().unwrap();
    assert!(
        live.starts_with("fallow scrub /dev/sdX --policy "),
        "{live}"
    );
    assert!(text.contains(live), "{text}");
    assert_eq!(d["baseline"]["policy"], "kernel-idle-class");
    // the figures reproduce: the simulate command prints the same throughput
    let sim = d["simulate_command"].as_str().unwrap();
    let args: Vec<&str> = sim.split_whitespace().skip(1).collect();
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args[1] = out.join("trace.csv").display().to_string();
    args.push("--json".into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = fallow(&argv);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let want = d["best"]["bg_throughput_bytes_per_s"].as_f64().unwrap();
    let got = r["bg"]["throughput_bytes_per_s"].as_f64().unwrap();
    assert!(
        (got - want).abs() <= 1e-9 * want.max(1.0),
        "simulate {got} B/s, decision {want} B/s"
    );
    // the page title may wrap between words, never inside one
    assert!(!page.contains("word-break: break-all"));
}
