//! `fallow tune` run as the built binary: the best point re-simulated with
//! the printed `fallow simulate` arguments gives exactly the reported
//! figures; bad budgets fail with a clear message; and, when the HP trace
//! is present, Practical Scrubbing Table III's shape.

use crate::common;

use common::{fallow, json, path_str, shared_trace, stderr, stdout};

const WORKLOAD: &[&str] = &[
    "--workload",
    "hyperexp:cv=4",
    "--utilization",
    "0.2",
    "--requests",
    "2000",
    "--service",
    "exp:5ms",
    "--bg",
    "size:base=8ms,knee=64KiB,rate=100MB",
    "--switch-penalty",
    "1ms",
];

#[test]
fn the_printed_command_reproduces_the_best_point_exactly() {
    let mut args = vec!["tune", "--policy", "waiting", "--budget", "1ms,3%"];
    args.extend_from_slice(WORKLOAD);
    args.extend_from_slice(&["--sizes", "64KiB,1MiB,4MiB", "--max-delay", "30ms"]);
    let v = json(&args);
    assert_eq!(v["schema_version"], fallow_core::JSON_SCHEMA_VERSION);
    assert_eq!(v["guarantee"], "exact");
    let docs = v["budgets"].as_array().expect("a list of budgets");
    assert_eq!(docs.len(), 2);
    for doc in docs {
        let best = &doc["best"];
        assert_eq!(best["policy"], "fixed-wait");
        assert!(best["params"]["t"].is_string());
        let size = best["request_size_bytes"].as_u64().unwrap();
        assert!(size == 65536 || size == 1 << 20, "4 MiB exceeds 30 ms");
        // the 4 MiB row is excluded
        let rows = doc["sizes"].as_array().unwrap();
        assert_eq!(rows[2]["status"], "excluded");
        let re: Vec<String> = best["reproduce_args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let re: Vec<&str> = re.iter().map(String::as_str).collect();
        let sim = json(&re);
        assert_eq!(
            sim["bg"]["throughput_bytes_per_s"],
            best["bg_throughput_bytes_per_s"]
        );
        assert_eq!(
            sim["fg"]["mean_added_delay_s"],
            best["fg_mean_added_delay_s"]
        );
        assert_eq!(sim["fg"]["slowdown"], best["fg_slowdown"]);
        let budget = &doc["budget"];
        match budget["kind"].as_str().unwrap() {
            "added_delay" => assert!(
                sim["fg"]["mean_added_delay_s"].as_f64().unwrap()
                    <= budget["ns"].as_f64().unwrap() / 1e9
            ),
            _ => assert!(
                sim["fg"]["slowdown"].as_f64().unwrap() <= budget["fraction"].as_f64().unwrap()
            ),
        }
        // the baseline is reported beside, reproducible too
        assert_eq!(v["baseline"]["request_size_bytes"], 65536);
        assert!(v["baseline"]["reproduce"]
            .as_str()
            .unwrap()
            .starts_with("fallow simulate "));
    }
    let t0 = docs[0]["best"]["bg_throughput_bytes_per_s"]
        .as_f64()
        .unwrap();
    assert!(t0 > 0.0);
}

#[test]
fn one_budget_gives_the_same_shape_and_the_table_prints_the_command() {
    let mut args = vec!["tune", "--policy", "fixed-wait", "--budget", "2ms"];
    args.extend_from_slice(WORKLOAD);
    args.extend_from_slice(&["--sizes", "256KiB"]);
    let v = json(&args);
    assert_eq!(v["schema_version"], fallow_core::JSON_SCHEMA_VERSION);
    assert_eq!(v["budgets"].as_array().map(Vec::len), Some(1));
    let v = &v["budgets"][0];
    for key in [
        "policy",
        "params",
        "request_size_bytes",
        "bg_throughput_bytes_per_s",
        "fg_mean_added_delay_s",
        "fg_slowdown",
    ] {
        assert!(!v["best"][key].is_null(), "best.{key}");
    }
    let o = fallow(&args);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(
        out.contains("fallow simulate --workload hyperexp:cv=4"),
        "{out}"
    );
    assert!(out.contains("kernel-idle-class"), "{out}");
}

#[test]
fn bad_budgets_and_knobs_fail_clearly() {
    for (budget, want) in [
        ("5", "a bare number has no unit"),
        ("fast", "not a percentage or a duration"),
        ("0ms", "must be positive"),
    ] {
        let mut args = vec!["tune", "--policy", "waiting", "--budget", budget];
        args.extend_from_slice(WORKLOAD);
        let o = fallow(&args);
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(err.contains(want) && err.contains("such as `5%`"), "{err}");
    }
    let mut args = vec!["tune", "--policy", "waiting:t=1s", "--budget", "1ms"];
    args.extend_from_slice(WORKLOAD);
    let o = fallow(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the parameter tune searches"));
}

#[test]
fn search_flag_sets_the_guarantee_and_bad_modes_fail() {
    let run = |mode: &str| {
        let mut args = vec!["tune", "--policy", "waiting", "--budget", "1ms,4ms"];
        args.extend_from_slice(WORKLOAD);
        args.extend_from_slice(&["--sizes", "64KiB,1MiB", "--search", mode]);
        json(&args)
    };
    let exact = run("exact");
    assert_eq!(exact["guarantee"], "exact");
    assert_eq!(exact["search"], "exact");
    let coarse = run("coarse");
    assert_eq!(coarse["guarantee"], "coarse-grid");
    assert_eq!(coarse["search"], "coarse");
    assert!(coarse["search_note"].is_null(), "coarse was asked for");
    // a small trace is far below auto's limit
    let auto = run("auto");
    assert_eq!(auto["guarantee"], "exact");
    assert!(auto["exact_estimate_s"].as_f64().unwrap() < 10.0);
    // exact is the best of the whole ladder: never less than the coarse answer
    let thr = |v: &serde_json::Value, i: usize| {
        v["budgets"][i]["best"]["bg_throughput_bytes_per_s"]
            .as_f64()
            .unwrap_or(0.0)
    };
    // coarse where the sweep applies carries a proven bound on every
    // setting's throughput (so on the exact answers); exact none
    let bound = coarse["exact_bound_bytes_per_s"].as_f64().unwrap();
    assert!(exact.get("exact_bound_bytes_per_s").is_none(), "{exact}");
    for i in 0..2 {
        assert!(thr(&exact, i) <= bound, "{bound}");
        assert!(thr(&exact, i) >= thr(&coarse, i));
    }
    let mut args = vec!["tune", "--policy", "waiting", "--budget", "1ms"];
    args.extend_from_slice(WORKLOAD);
    args.extend_from_slice(&["--search", "fastest"]);
    let o = fallow(&args);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("--search") && err.contains("auto, exact or coarse"),
        "{err}"
    );
}

/// Practical Scrubbing Table III's shape on the HP trace (disk 0): a larger
/// budget gives more throughput with a shorter wait and a request size at
/// least as large. Few sizes, to stay fast in a debug build.
#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn hp_trace_has_the_shape_of_table_iii() {
    let hp = shared_trace("hp-hplajw-1992/ajw.1week.srt");
    let v = json(&[
        "tune",
        path_str(&hp),
        "--device",
        "0",
        "--policy",
        "waiting",
        "--budget",
        "1ms,2ms,4ms",
        "--bg",
        "size:base=8ms,knee=64KiB,rate=100MB",
        "--sizes",
        "1MiB,4MiB",
        "--max-delay",
        "50.4ms",
    ]);
    let docs = v["budgets"].as_array().unwrap();
    let get = |i: usize, k: &str| docs[i]["best"][k].clone();
    let wait = |i: usize| fallow_core_duration(get(i, "params")["t"].as_str().unwrap());
    let tp = |i: usize| get(i, "bg_throughput_bytes_per_s").as_f64().unwrap();
    assert!(tp(0) < tp(2));
    for i in 0..2 {
        assert!(tp(i) <= tp(i + 1));
        assert!(wait(i) >= wait(i + 1));
        assert!(get(i, "request_size_bytes").as_u64() <= get(i + 1, "request_size_bytes").as_u64());
    }
}

/// `205ms` → seconds (the test crate does not link the core).
fn fallow_core_duration(s: &str) -> f64 {
    let (num, mult) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix("us") {
        (v, 1e-6)
    } else if let Some(v) = s.strip_suffix("ns") {
        (v, 1e-9)
    } else {
        (s.strip_suffix('s').unwrap(), 1.0)
    };
    num.parse::<f64>().unwrap() * mult
}
