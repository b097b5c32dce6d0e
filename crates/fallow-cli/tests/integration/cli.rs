//! Runs the built `fallow` binary on the small hand-made fixtures in
//! `tests/data/cli/` (MSR Cambridge CSV: Timestamp and ResponseTime in
//! 100-ns ticks, so 10,000 ticks = 1 ms) and checks its output against
//! values worked out by hand in the comments.

use crate::common;

use common::{
    assert_close, bad_input, fallow, fixture, json, num, path_str, shared_trace, stderr,
    stdout_text,
};
use serde_json::Value;

/// tiny.csv, arrivals and response times in ms:
///   r1 0+10 → [0,10], r2 5+10 → [5,15]        busy period 1 = [0,15],   2 requests
///   r3 40+10 → [40,50]                         busy period 2 = [40,50],  1 request
///   r4 100+20 → [100,120], r5 110+5 ⊂ r4,
///   r6 120+30 → [120,150] (arrives as r4 ends, so it continues the period)
///                                              busy period 3 = [100,150], 3 requests
/// Idle intervals: 15→40 = 25 ms, 50→100 = 50 ms: count 2, mean 37.5 ms,
/// population std 12.5 ms, CV 1/3, p50 37.5 ms (midway), max 50 ms.
/// Busy: 3 periods of 15, 10, 50 ms (mean 25 ms), 2, 1, 3 requests (mean 2,
/// max 3). Threshold = the nearest-rank 90th percentile: the ⌈2.7⌉ = 3rd
/// smallest of 1, 2, 3 is 3 (not the shortest, so no fallback): T = 3.
/// Utilisation: busy 75 ms of the 150 ms window = 0.5.
#[test]
fn analyze_tiny_trace_matches_hand_calculation() {
    let v = json(&["analyze", path_str(&fixture("tiny.csv"))]);
    assert_eq!(v["trace"]["requests"], 6);
    assert_eq!(
        v["trace"]["devices"],
        serde_json::json!([{"id": 0, "requests": 6}])
    );
    assert_close(num(&v, "trace.span_s"), 0.150, 1e-12);
    assert_eq!(v["idle"]["count"], 2);
    assert_close(num(&v, "idle.mean_s"), 0.0375, 1e-12);
    assert_close(num(&v, "idle.cv"), 1.0 / 3.0, 1e-9);
    assert_close(num(&v, "idle.p50_s"), 0.0375, 1e-12);
    assert_close(num(&v, "idle.max_s"), 0.050, 1e-12);
    assert_eq!(v["busy"]["count"], 3);
    assert_close(num(&v, "busy.mean_s"), 0.025, 1e-12);
    assert_close(num(&v, "busy.mean_requests"), 2.0, 1e-12);
    assert_eq!(v["busy"]["max_requests"], 3);
    assert_eq!(v["busy"]["threshold_requests"], 3);
    assert_eq!(v["busy"]["threshold_rule"], "p90");
    assert_close(num(&v, "utilization"), 0.5, 1e-12);
}

#[test]
fn json_has_the_stable_keys() {
    let v = json(&["analyze", path_str(&fixture("tiny.csv"))]);
    for key in [
        "trace.requests",
        "trace.span_s",
        "idle.count",
        "idle.mean_s",
        "idle.cv",
        "idle.p50_s",
        "idle.p90_s",
        "idle.p99_s",
        "idle.max_s",
        "busy.count",
        "busy.mean_s",
        "busy.mean_requests",
        "busy.max_requests",
        "busy.threshold_requests",
        "busy.cws",
        "utilization",
    ] {
        num(&v, key); // panics naming the key when absent or not a number
    }
    let devices = v["trace"]["devices"]
        .as_array()
        .expect("trace.devices is a list");
    for d in devices {
        assert!(d["id"].is_u64() && d["requests"].is_u64(), "{d}");
    }
}

#[test]
fn terminal_summary_is_readable() {
    let o = fallow(&["analyze", path_str(&fixture("tiny.csv"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout_text(&o);
    for want in [
        "Idle intervals",
        "Busy periods",
        "Findings",
        "37.5 ms",       // mean idle
        "50.0 ms",       // longest idle
        "2.00 requests", // mean busy period
        "utilisation 50 %",
    ] {
        assert!(out.contains(want), "missing `{want}` in:\n{out}");
    }
}

/// two_devices.csv (no header): device 3 has requests at 0, 20, 50 and
/// 100 ms taking 10 ms each; device 0 at 5 ms (3 ms) and 200 ms (10 ms).
/// The device-0 record at 5 ms comes after device 3's at 20 ms in the file.
/// Device 3: idle 10→20, 30→50, 60→100 = 10, 20, 40 ms (mean 70/3 ms),
/// 4 busy periods of 1 request, utilisation 40 / 110.
/// Device 0: one idle interval 8→200 = 192 ms, 2 busy periods, utilisation 13 / 205.
#[test]
fn several_devices_analyse_the_busiest_and_say_so() {
    let o = fallow(&["analyze", path_str(&fixture("two_devices.csv")), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("analysing the busiest, device 3"), "{err}");
    assert!(
        err.contains("sorted into place"),
        "reordering not reported: {err}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["trace"]["devices"],
        serde_json::json!([{"id": 0, "requests": 2}, {"id": 3, "requests": 4}])
    );
    assert_eq!(v["trace"]["requests"], 4);
    assert_eq!(v["trace"]["reordered"], 1);
    assert_eq!(v["idle"]["count"], 3);
    assert_close(num(&v, "idle.mean_s"), 0.070 / 3.0, 1e-12);
    assert_eq!(v["busy"]["count"], 4);
    assert_eq!(v["busy"]["max_requests"], 1);
    assert_close(num(&v, "utilization"), 40.0 / 110.0, 1e-12);
}

#[test]
fn device_flag_selects_a_device() {
    let v = json(&[
        "analyze",
        path_str(&fixture("two_devices.csv")),
        "--device",
        "0",
    ]);
    assert_eq!(v["trace"]["requests"], 2);
    assert_eq!(v["trace"]["devices"].as_array().unwrap().len(), 2);
    assert_eq!(v["idle"]["count"], 1);
    assert_close(num(&v, "idle.mean_s"), 0.192, 1e-12);
    assert_eq!(v["busy"]["count"], 2);
    assert_close(num(&v, "utilization"), 13.0 / 205.0, 1e-12);
}

#[test]
fn unknown_device_is_a_usage_error() {
    let o = fallow(&[
        "analyze",
        path_str(&fixture("two_devices.csv")),
        "--device",
        "7",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("no device 7") && err.contains("3 (4 requests)"),
        "{err}"
    );
}

/// two_hosts.csv: `hm,0` at 0 and 20 ms, `rsrch,0` at 10, 30 and 40 ms,
/// each taking 1 ms. Two devices (they were once one, and the gaps
/// between them counted as idle). rsrch:0 alone: idle 11→30 and 31→40 ms,
/// two intervals of mean 14 ms, three busy periods.
#[test]
fn msr_hosts_are_devices_named_host_disk() {
    let v = json(&[
        "analyze",
        path_str(&fixture("two_hosts.csv")),
        "--device",
        "rsrch:0",
    ]);
    assert_eq!(
        v["trace"]["devices"],
        serde_json::json!([
            {"id": 0, "requests": 2, "name": "hm:0"},
            {"id": 16777216, "requests": 3, "name": "rsrch:0"}
        ])
    );
    assert_eq!(v["trace"]["requests"], 3);
    assert_eq!(v["idle"]["count"], 2);
    assert_close(num(&v, "idle.mean_s"), 0.014, 1e-12);
    assert_eq!(v["busy"]["count"], 3);
    let o = fallow(&["analyze", path_str(&fixture("two_hosts.csv")), "--json"]);
    let err = stderr(&o);
    assert!(
        err.contains("hm:0: 2, rsrch:0: 3") && err.contains("busiest, device rsrch:0"),
        "{err}"
    );
    let hm = json(&["analyze", path_str(&fixture("two_hosts.csv")), "-d", "hm:0"]);
    assert_eq!(hm["trace"]["requests"], 2);
    // Disk 0 is on both hosts: a plain number is ambiguous.
    bad_input(
        &[
            "analyze",
            path_str(&fixture("two_hosts.csv")),
            "--device",
            "0",
        ],
        &["disk 0 is on several hosts", "hm:0", "rsrch:0"],
    );
    bad_input(
        &[
            "analyze",
            path_str(&fixture("two_hosts.csv")),
            "--device",
            "src1:0",
        ],
        &["no device src1:0", "rsrch:0 (3 requests)"],
    );
}

/// broken.csv: line 4 (after the header and two good records) has size `12x4`.
#[test]
fn malformed_record_names_file_line_and_field() {
    let o = fallow(&["analyze", path_str(&fixture("broken.csv"))]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("broken.csv"), "{err}");
    assert!(err.contains("line 4"), "{err}");
    assert!(err.contains("`size`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.stdout.is_empty());
}

/// With --skip-bad the records at 0, 30 and 90 ms (10 ms each) remain:
/// idle 10→30 and 40→90 = 20 and 50 ms, mean 35 ms.
#[test]
fn skip_bad_counts_and_reports() {
    let o = fallow(&[
        "analyze",
        path_str(&fixture("broken.csv")),
        "--skip-bad",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("skipped 1 malformed record"), "{err}");
    assert!(err.contains("line 4"), "the first reason is shown: {err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["trace"]["skipped"], 1);
    assert_eq!(v["trace"]["requests"], 3);
    assert_eq!(v["idle"]["count"], 2);
    assert_close(num(&v, "idle.mean_s"), 0.035, 1e-12);
}

/// --service const:10ms replaces the recorded completions with a FCFS queue
/// of 10 ms services: arrivals 0, 5, 40, 100, 110, 120 ms give [0,10]
/// [10,20] | [40,50] | [100,110] [110,120] [120,130]: idle 20→40 and
/// 50→100 = 20 and 50 ms (mean 35 ms), busy 60 ms of 130 ms.
#[test]
fn service_model_replaces_completions() {
    let v = json(&[
        "analyze",
        path_str(&fixture("tiny.csv")),
        "--service",
        "const:10ms",
    ]);
    assert_eq!(v["trace"]["completions"]["kind"], "modelled");
    assert_eq!(v["idle"]["count"], 2);
    assert_close(num(&v, "idle.mean_s"), 0.035, 1e-12);
    assert_eq!(v["busy"]["max_requests"], 3);
    assert_close(num(&v, "utilization"), 60.0 / 130.0, 1e-12);
}

#[test]
fn bad_flag_values_are_usage_errors() {
    let tiny = fixture("tiny.csv");
    for args in [
        vec!["analyze", path_str(&tiny), "--service", "warp:9"],
        vec!["analyze", path_str(&tiny), "--format", "punchcards"],
        vec!["analyze", path_str(&tiny), "--time-unit", "fortnights"],
        vec!["analyze", path_str(&tiny), "--no-such-flag"],
        vec!["analyze"],
    ] {
        let o = fallow(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn missing_and_empty_inputs_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.csv");
    let o = fallow(&["analyze", path_str(&missing)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope.csv"), "{}", stderr(&o));

    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let o = fallow(&["analyze", path_str(&empty)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("empty.csv"), "{}", stderr(&o));
}

#[test]
fn html_report_is_one_self_contained_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    let o = fallow(&[
        "analyze",
        path_str(&fixture("tiny.csv")),
        "--html",
        path_str(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout_text(&o).contains("r.html"),
        "the summary names the report"
    );
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg"));
    assert!(
        html.matches("<svg").count() >= 10,
        "every plot is inline SVG"
    );
    for external in ["<script", "<link", " src=", "url(http", "@import"] {
        assert!(!html.contains(external), "report refers to `{external}`");
    }
    assert!(html.contains("<figcaption>"), "plots carry captions");
    // no temporary file is left next to the report
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn json_and_html_together() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    let o = fallow(&[
        "analyze",
        path_str(&fixture("tiny.csv")),
        "--json",
        "--html",
        path_str(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("stdout stays pure JSON");
    assert_eq!(v["idle"]["count"], 2);
    assert!(out.exists());
}

#[test]
fn convert_then_analyze_the_binary_cache() {
    let dir = tempfile::tempdir().unwrap();
    let fbt = dir.path().join("tiny.fbt");
    let tiny = fixture("tiny.csv");
    let o = fallow(&["convert", path_str(&tiny), "-o", path_str(&fbt)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("wrote 6 requests"), "{}", stderr(&o));
    let a = json(&["analyze", path_str(&tiny)]);
    let b = json(&["analyze", path_str(&fbt)]);
    assert_eq!(b["trace"]["format"], "fallow");
    for key in ["idle", "busy", "utilization", "idle_cdf", "lag_pairs"] {
        assert_eq!(a[key], b[key], "`{key}` differs after conversion");
    }
    // only the output is left in the directory: the temporary was renamed
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn convert_refuses_to_overwrite_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("t.csv");
    std::fs::copy(fixture("tiny.csv"), &copy).unwrap();
    let o = fallow(&["convert", path_str(&copy), "-o", path_str(&copy)]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(fixture("tiny.csv")).unwrap()
    );
}

#[test]
fn demo_writes_report_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let o = fallow(&["demo", "--out", path_str(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout_text(&o);
    assert!(
        text.contains("report.html") && text.contains("Findings"),
        "{text}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg"));
    let v: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(v["trace"]["requests"], 200_000);
    assert_eq!(v["schema_version"], fallow_core::JSON_SCHEMA_VERSION);
    // the workload is built for 20 % utilisation on the disk model
    assert_close(num(&v, "utilization"), 0.2, 0.03);
    assert!(num(&v, "idle.cv") > 1.0, "the demo workload is bursty");
}

#[test]
fn help_explains_subcommands_and_units() {
    let o = fallow(&["--help"]);
    assert!(o.status.success());
    let h = stdout_text(&o);
    for want in ["analyze", "convert", "demo", "Examples:"] {
        assert!(h.contains(want), "`{want}` missing from --help:\n{h}");
    }
    let o = fallow(&["analyze", "--help"]);
    let h = stdout_text(&o);
    for want in [
        "--service",
        "exp:5ms",
        "--time-unit",
        "[default:",
        "--offset-unit",
        "512",
        "--skip-bad",
    ] {
        assert!(
            h.contains(want),
            "`{want}` missing from analyze --help:\n{h}"
        );
    }
}

/// The figures stated in the shared traces' README.md for the pgbench trace.
#[test]
#[ignore = "needs ../shared/traces (FALLOW_SHARED_TRACES)"]
fn pgbench_trace_matches_its_readme() {
    let trace = shared_trace("pgbench-ext4-loop/pgbench-ext4-loop.csv.gz");
    let v = json(&["analyze", path_str(&trace)]);
    assert_eq!(v["trace"]["requests"], 24_708);
    assert_eq!(v["trace"]["reads"], 8_969);
    assert_eq!(v["idle"]["count"], 19_287);
    // "mean idle 12.3 ms, CV 2.31, longest 0.70 s, mean busy period 1.28 requests"
    assert_close(num(&v, "idle.mean_s") * 1e3, 12.3, 0.05);
    assert_close(num(&v, "idle.cv"), 2.31, 0.005);
    assert_close(num(&v, "idle.max_s"), 0.70, 0.005);
    assert_close(num(&v, "busy.mean_requests"), 1.28, 0.005);
    assert_close(num(&v, "trace.span_s"), 241.7, 0.05);
}
