//! `fallow recommend` and `fallow pareto` run as the built binary on a
//! small synthetic workload: the ranking is sorted and its top spec meets
//! the budget when re-simulated; fronts are non-dominated; the HTML page
//! has its plot; a bad budget is a usage error.

use crate::common;

use common::{fallow, json, stderr, stdout};
use serde_json::Value;

const WORKLOAD: &[&str] = &[
    "--workload",
    "hyperexp:cv=4",
    "--utilization",
    "0.2",
    "--requests",
    "400",
    "--service",
    "exp:5ms",
    "--bg",
    "size:base=8ms,knee=64KiB,rate=100MB",
    "--switch-penalty",
    "1ms",
];

#[test]
fn the_ranking_is_sorted_and_its_top_spec_meets_the_budget() {
    let mut args = vec!["recommend", "--budget", "2ms", "--sizes", "64KiB,1MiB"];
    args.extend_from_slice(WORKLOAD);
    let v = json(&args);
    assert_eq!(v["budget_text"], "2ms");
    let ranking = v["ranking"].as_array().expect("a ranking");
    assert!(ranking.len() > 3);
    let tps: Vec<Option<f64>> = ranking
        .iter()
        .map(|r| r["best"]["bg_throughput_bytes_per_s"].as_f64())
        .collect();
    // feasible ones first, most throughput first
    let feasible = tps.iter().take_while(|t| t.is_some()).count();
    assert!(tps[feasible..].iter().all(Option::is_none));
    // most throughput first, but a throughput within the tolerance of a
    // higher one ranks above it only with a lower added delay
    let tol = v["throughput_tolerance"].as_f64().unwrap();
    assert_eq!(tol, 0.01);
    let delay = |i: usize| {
        ranking[i]["best"]["fg_mean_added_delay_s"]
            .as_f64()
            .unwrap()
    };
    for i in 0..feasible {
        for j in i + 1..feasible {
            let (a, b) = (tps[i].unwrap(), tps[j].unwrap());
            assert!(a >= b * (1.0 - tol), "{tps:?}");
            assert!(a >= b || delay(i) <= delay(j), "{i} above {j}");
        }
    }
    assert_eq!(v["schema_version"], fallow_core::JSON_SCHEMA_VERSION);
    for (i, r) in ranking.iter().enumerate() {
        // ranked iff it does BG work within the budget; the others are listed unranked
        let works = tps[i].is_some_and(|t| t > 0.0);
        assert_eq!(
            r["rank"].as_u64(),
            Some(if works { i as u64 + 1 } else { 0 })
        );
        assert!(!r["reason"].as_str().unwrap().is_empty());
    }
    let top = &ranking[0]["best"];
    let spec = top["spec"].as_str().unwrap();
    let size = top["bg_size_bytes"].as_u64().unwrap().to_string();
    let mut sim = vec!["simulate", "--bg-size", &size, "--policy", spec];
    sim.extend_from_slice(WORKLOAD);
    let s = json(&sim);
    let delay = s["fg"]["mean_added_delay_s"].as_f64().unwrap();
    assert!(delay <= 2e-3, "{spec} adds {delay} s");
    assert_eq!(
        s["bg"]["throughput_bytes_per_s"],
        top["bg_throughput_bytes_per_s"]
    );
    // the table names the top policy and its reason
    let o = fallow(&args);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(text.contains(ranking[0]["policy"].as_str().unwrap()));
    assert!(text.contains("fallow simulate "));
}

#[test]
fn a_bad_budget_is_a_usage_error() {
    let mut args = vec!["recommend", "--budget", "soon"];
    args.extend_from_slice(WORKLOAD);
    let o = fallow(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("budget"));
}

#[test]
fn pareto_fronts_are_non_dominated_and_the_page_has_a_plot() {
    let dir = std::env::temp_dir().join(format!("fallow-pareto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("pareto.html");
    let html_s = html.to_str().unwrap();
    let mut args = vec![
        "pareto",
        "--policy",
        "fixed-wait",
        "--policy",
        "oracle",
        "--policy",
        "aggressive",
        "--bg-size",
        "256KiB",
        "--html",
        html_s,
    ];
    args.extend_from_slice(WORKLOAD);
    let v = json(&args);
    let fronts = v.as_array().expect("a list of fronts");
    assert_eq!(fronts.len(), 3);
    let get = |p: &Value| {
        (
            p["bg_throughput_bytes_per_s"].as_f64().unwrap(),
            p["fg_mean_added_delay_s"].as_f64().unwrap(),
        )
    };
    for f in fronts {
        assert_eq!(f["request_size_bytes"], 262144);
        let front: Vec<(f64, f64)> = f["front"].as_array().unwrap().iter().map(get).collect();
        let points: Vec<(f64, f64)> = f["points"].as_array().unwrap().iter().map(get).collect();
        assert!(!front.is_empty());
        for &(t, d) in &front {
            assert!(
                !points
                    .iter()
                    .any(|&(u, e)| u >= t && e <= d && (u > t || e < d)),
                "{} has a dominated point on its front",
                f["policy"]
            );
        }
        assert!(front.windows(2).all(|w| w[0].1 <= w[1].1));
    }
    assert_eq!(fronts[1]["clairvoyant"], true);
    assert_eq!(fronts[2]["points"].as_array().unwrap().len(), 1);
    let page = std::fs::read_to_string(&html).expect("the page is written");
    assert!(page.contains("<svg"));
    assert!(page.contains("oracle (clairvoyant)"));
    std::fs::remove_dir_all(&dir).ok();
}

/// Every entry's `reproduce_args` reproduce its figures; Busy Bee, which
/// never finishes learning on this 10-second trace (its window is 5 h),
/// says so and ranks below fixed-wait, which it behaves as; adaptive-size
/// reports the mean size of the requests it completed.
#[test]
fn every_entry_reproduces_and_a_policy_that_never_learned_says_so() {
    let mut args = vec!["recommend", "--budget", "2ms", "--sizes", "64KiB,1MiB"];
    args.extend_from_slice(WORKLOAD);
    let v = json(&args);
    let ranking = v["ranking"].as_array().unwrap();
    let find = |name: &str| {
        ranking
            .iter()
            .position(|r| r["policy"] == name)
            .unwrap_or_else(|| panic!("{name} ranked"))
    };
    let (bb, fw) = (find("busy-bee"), find("fixed-wait"));
    assert_eq!(ranking[bb]["never_learned"], "fixed-wait");
    assert!(ranking[bb]["reason"]
        .as_str()
        .unwrap()
        .contains("never finished learning"));
    if ranking[bb]["rank"].as_u64() > Some(0) {
        assert!(bb > fw, "busy-bee {bb} above fixed-wait {fw}");
    }
    assert!(ranking[fw].get("never_learned").is_none());
    let mut reproduced = 0;
    for r in ranking {
        let Some(best) = r.get("best").filter(|b| !b.is_null()) else {
            assert!(r.get("reproduce_args").is_none());
            continue;
        };
        let a: Vec<String> = r["reproduce_args"]
            .as_array()
            .unwrap_or_else(|| panic!("{} has reproduce_args", r["policy"]))
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect();
        assert!(r["reproduce"]
            .as_str()
            .unwrap()
            .starts_with("fallow simulate "));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let s = json(&a);
        assert_eq!(
            s["bg"]["throughput_bytes_per_s"], best["bg_throughput_bytes_per_s"],
            "{}",
            r["policy"]
        );
        assert_eq!(
            s["fg"]["mean_added_delay_s"], best["fg_mean_added_delay_s"],
            "{}",
            r["policy"]
        );
        if r["policy"] == "adaptive-size" && r["rank"].as_u64() > Some(0) {
            let mean = s["bg"]["bytes"].as_f64().unwrap() / s["bg"]["completed"].as_f64().unwrap();
            assert_eq!(r["mean_bg_request_bytes"].as_f64(), Some(mean));
        } else {
            assert!(r.get("mean_bg_request_bytes").is_none(), "{}", r["policy"]);
        }
        reproduced += 1;
    }
    assert!(reproduced > 3);
}
