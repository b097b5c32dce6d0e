//! Progress that moves (bars that move at least once a
//! second on any command that runs over a second): `tune`, `recommend`,
//! `pareto`, `compare`, `simulate --retune` and `scrub-plan --check` run
//! with `FALLOW_PROGRESS=lines`, which prints one
//! line per progress update, and the number of lines is checked against the
//! number of work units the JSON reports (sizes, policies × sizes,
//! settings, policies): a bar that only moved between policies would print
//! fewer. No wall-clock assertions: the count is what the command reports,
//! however loaded the machine.

use crate::common::{fallow_cmd, json_of, stderr};
use std::process::{Output, Stdio};

const WORKLOAD: &[&str] = &[
    "--workload",
    "hyperexp:cv=4",
    "--utilization",
    "0.2",
    "--requests",
    "3000",
    "--service",
    "exp:5ms",
    "--bg",
    "size:base=8ms,knee=64KiB,rate=100MB",
    "--switch-penalty",
    "1ms",
];

/// `fallow ARGS WORKLOAD --json` with progress printed as lines, one thread.
fn with_lines(args: &[&str]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["--threads", "1"]);
    run_lines(&all)
}

/// `fallow ARGS WORKLOAD --json` with progress printed as lines.
fn run_lines(args: &[&str]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(WORKLOAD);
    all.push("--json");
    let o = fallow_cmd(&all)
        .env("FALLOW_PROGRESS", "lines")
        .stdin(Stdio::null())
        .output()
        .expect("the fallow binary runs");
    assert!(o.status.success(), "{all:?}: {}", stderr(&o));
    o
}

/// The progress lines of `what` (`steps`, `settings`, `policies`): (done,
/// total, message) each.
fn lines(o: &Output, what: &str) -> Vec<(u64, u64, String)> {
    let prefix = format!("progress: {what} ");
    stderr(o)
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|l| {
            let (count, msg) = l.split_once(' ').unwrap_or((l, ""));
            let (d, t) = count.split_once('/').expect("done/total");
            (d.parse().unwrap(), t.parse().unwrap(), msg.to_string())
        })
        .collect()
}

#[test]
fn tune_reports_progress_within_every_size() {
    let o = with_lines(&[
        "tune",
        "--policy",
        "waiting",
        "--budget",
        "1ms,2ms",
        "--sizes",
        "64KiB,256KiB,1MiB,2MiB",
    ]);
    let v = json_of(&o);
    let sizes = v["budgets"][0]["sizes"].as_array().unwrap().len() as u64;
    let steps = v["knob"]["steps"].as_u64().unwrap();
    let l = lines(&o, "steps");
    // the exact search reports every batch of settings: many per size
    assert!(
        l.len() as u64 > sizes,
        "{} updates for {sizes} sizes",
        l.len()
    );
    // one thread: the count only grows and ends at the whole ladder of every size
    assert!(l.windows(2).all(|w| w[0].0 <= w[1].0), "{l:?}");
    let last = l.last().unwrap();
    assert_eq!((last.0, last.1), (steps * sizes, steps * sizes));
}

#[test]
fn recommend_moves_within_each_policy() {
    let o = with_lines(&["recommend", "--budget", "2ms", "--sizes", "64KiB,1MiB"]);
    let v = json_of(&o);
    let policies = v["ranking"].as_array().unwrap().len();
    let l = lines(&o, "settings");
    // the message names each policy as it starts; positions move within it
    let positions = l.iter().filter(|x| x.0 > 0).count();
    assert!(
        positions >= policies * 2,
        "{positions} updates for {policies} policies x 2 sizes"
    );
    for r in v["ranking"].as_array().unwrap() {
        let name = r["policy"].as_str().unwrap();
        assert!(
            l.iter().any(|x| x.2.ends_with(&format!(" {name}"))),
            "no progress message for {name}"
        );
    }
}

#[test]
fn pareto_reports_every_setting() {
    let o = with_lines(&[
        "pareto",
        "--policy",
        "waiting",
        "--policy",
        "busy-bee",
        "--bg-size",
        "256KiB",
    ]);
    let v = json_of(&o);
    let settings: usize = v
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["points"].as_array().unwrap().len())
        .sum();
    let moved = lines(&o, "settings").iter().filter(|x| x.0 > 0).count();
    assert!(moved >= settings, "{moved} updates for {settings} settings");
}

#[test]
fn compare_reports_every_policy() {
    let o = with_lines(&[
        "compare",
        "--policy",
        "waiting:t=100ms",
        "--policy",
        "busy-bee",
        "--policy",
        "kernel-idle-class",
    ]);
    let v = json_of(&o);
    let runs = v.as_array().map_or(0, Vec::len);
    let moved = lines(&o, "policies").iter().filter(|x| x.0 > 0).count();
    assert!(runs >= 3, "{v}");
    assert!(moved >= runs, "{moved} updates for {runs} runs");
}

#[test]
fn a_bad_progress_mode_is_a_usage_error() {
    let mut args = vec!["tune", "--policy", "waiting", "--budget", "1ms"];
    args.extend_from_slice(WORKLOAD);
    let o = fallow_cmd(&args)
        .env("FALLOW_PROGRESS", "sometimes")
        .stdin(Stdio::null())
        .output()
        .expect("the fallow binary runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("FALLOW_PROGRESS"), "{}", stderr(&o));
}

#[test]
fn simulate_retune_moves_with_every_refit() {
    let o = run_lines(&[
        "simulate",
        "--policy",
        "fixed-wait",
        "--retune",
        "1ms",
        "--window",
        "200",
    ]);
    let v = json_of(&o);
    let refits = v["retune"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["fit"].is_null())
        .count();
    let l = lines(&o, "intervals");
    assert!(refits >= 5, "{refits} refits: the workload is too short");
    // one line per refit, then the last one at the whole trace
    assert_eq!(l.len(), refits + 1, "{l:?}");
    assert!(l.windows(2).all(|w| w[0].0 < w[1].0), "{l:?}");
    let last = l.last().unwrap();
    assert_eq!(last.0, last.1);
}

#[test]
fn scrub_plan_check_reports_every_plan() {
    let o = fallow_cmd(&[
        "scrub-plan",
        "--capacity",
        "10GB",
        "--regions",
        "16,128",
        "--segment",
        "64KiB,1MiB",
        "--check",
        "200",
        "--json",
    ])
    .env("FALLOW_PROGRESS", "lines")
    .stdin(Stdio::null())
    .output()
    .expect("the fallow binary runs");
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = json_of(&o)["rows"].as_array().unwrap().len() as u64;
    assert_eq!(rows, 6, "2 segments x (sequential + 2 region counts)");
    let l = lines(&o, "plans");
    let done: Vec<(u64, u64)> = l.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(done, (1..=rows).map(|k| (k, rows)).collect::<Vec<_>>());
}

/// `fallow demo` once said nothing for its whole run (41 s under
/// load). It says each phase on stderr, and its tuning moves like
/// `recommend`'s, naming every policy it tunes (the list from its own
/// report.json); `FALLOW_PROGRESS=never` silences both.
#[test]
fn demo_says_what_it_does_and_its_tuning_moves() {
    let dir = tempfile::tempdir().unwrap();
    let run = |mode: &str| {
        let o = fallow_cmd(&["demo", "--requests", "300", "--out"])
            .arg(dir.path().join("d"))
            .env("FALLOW_PROGRESS", mode)
            .stdin(Stdio::null())
            .output()
            .expect("the fallow binary runs");
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    let o = run("lines");
    let err = stderr(&o);
    for phase in [
        "fallow demo: generating 300 requests",
        "fallow demo: analysing",
        "fallow demo: tuning",
    ] {
        assert!(err.contains(phase), "no `{phase}` in: {err}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("d/report.json")).unwrap())
            .unwrap();
    let ranked = report["decision"]["recommendation"]["ranking"]
        .as_array()
        .expect("the demo's ranking");
    assert!(ranked.len() >= 10, "{ranked:?}");
    let l = lines(&o, "settings");
    assert!(
        l.iter().filter(|x| x.0 > 0).count() >= ranked.len(),
        "{err}"
    );
    for r in ranked {
        let name = r["policy"].as_str().unwrap();
        assert!(
            l.iter().any(|x| x.2.ends_with(&format!(" {name}"))),
            "no progress message for {name}: {err}"
        );
    }
    let quiet = run("never");
    assert!(
        !stderr(&quiet).contains("fallow demo:"),
        "{}",
        stderr(&quiet)
    );
}
