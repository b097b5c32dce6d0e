//! `fallow simulate --then TRACE2` (per-part figures, by hand on the tiny
//! fixture played twice) and `--retune BUDGET` (the knob's trajectory, its
//! errors, and where it settles on an M/M/1 workload, from theory).

use crate::common;

use common::{assert_close, fallow, json, num, stderr, tiny};

/// tiny.csv then tiny.csv 1 s later (tests/simulate.rs has the fixture by
/// hand: busy periods [0,15] (2 requests), [40,50], [100,150] (3), in ms),
/// fixed-wait(10 ms), constant 20 ms BG requests of 64 KiB.
///
/// First part = the fixture alone: 20 ms added over 6 requests, 4
/// delayed, 2 collisions, 3 BG requests in 150 ms; it ends at 155 ms (r4..r6
/// 5 ms late). The gap: BG from 165 ms; the second part starts at 1150 ms,
/// so 49 requests complete and the 50th, started at 1145, is cut with 15 ms
/// left: r1, r2 of the second part wait 15 ms. Its first idle interval
/// (25 ms) is then 10 ms: no BG (the wait is 10 ms). Its second (50 ms):
/// BG 1210→1230→1250, ending exactly at the arrival: no collision.
/// Second part: 30 ms over 6 requests, 2 delayed, 1 collision, 52 BG
/// requests over 1.3 − 0.15 = 1.15 s.
#[test]
fn then_reports_each_part_by_hand() {
    let v = json(&[
        "simulate",
        &tiny(),
        "--then",
        &tiny(),
        "--gap",
        "1s",
        "--policy",
        "fixed-wait:t=10ms",
        "--bg",
        "const:20ms",
        "--bg-size",
        "64KiB",
    ]);
    let p = &v["parts"];
    assert_eq!(p.as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(p[0]["requests"], 6);
    assert_close(num(&p[0], "mean_added_delay_s"), 0.020 / 6.0, 1e-12);
    assert_eq!(p[0]["delayed_requests"], 4);
    assert_eq!(p[0]["collisions"], 2);
    assert_eq!(p[0]["bg_bytes"], 3 * 65_536);
    assert_close(num(&p[0], "span_s"), 0.150, 1e-12);
    assert_close(
        num(&p[0], "bg_throughput_bytes_per_s"),
        3.0 * 65_536.0 / 0.150,
        1e-6,
    );
    assert_eq!(p[1]["requests"], 6);
    assert_close(num(&p[1], "mean_added_delay_s"), 0.030 / 6.0, 1e-12);
    assert_eq!(p[1]["delayed_requests"], 2);
    assert_eq!(p[1]["collisions"], 1);
    assert_eq!(p[1]["bg_bytes"], 52 * 65_536);
    assert_close(num(&p[1], "span_s"), 1.150, 1e-9);
    // baseline mean 85/6 ms in both parts
    assert_close(num(&p[1], "slowdown"), 30.0 / 85.0, 1e-9);
    // the whole run
    assert_eq!(v["fg"]["requests"], 12);
    assert_close(num(&v, "fg.mean_added_delay_s"), 0.050 / 12.0, 1e-12);
    assert_eq!(v["bg"]["completed"], 55);
    assert!(v["retune"].is_null(), "no --retune");
    let src = p[0]["source"].as_str().unwrap();
    assert!(src.ends_with("tiny.csv"), "{src}");
}

#[test]
fn then_summary_has_a_parts_table() {
    let o = fallow(&[
        "simulate",
        &tiny(),
        "--then",
        &tiny(),
        "--policy",
        "fixed-wait:t=10ms",
        "--bg",
        "const:20ms",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("tiny.csv + tiny.csv"), "{out}");
    assert!(out.contains("Parts"), "{out}");
    assert_eq!(out.matches("\n  tiny.csv ").count(), 2, "{out}");
}

/// M/M/1 at 50 requests/s (5 ms service): idle intervals are Exp(50/s),
/// so fixed-wait(t) with endless Exp(10 ms) BG work adds
/// d(t) = p·m(1 + λm)/(1 + λpm), p = e^{−λt}, per FG request
/// (crates/fallow-core/tests/it/sim.rs); d(t) = 1 ms at t = 53.5 ms. The
/// online wait must settle near it, and the run stay near the budget.
#[test]
fn retune_settles_near_the_theoretical_wait() {
    let v = json(&[
        "simulate",
        "--workload",
        "poisson",
        "--arrival-rate",
        "50",
        "--service",
        "exp:5ms",
        "--requests",
        "8000",
        "--bg",
        "exp:10ms",
        "--policy",
        "fixed-wait",
        "--retune",
        "1ms",
        "--window",
        "1000",
        "--every",
        "250",
    ]);
    let r = &v["retune"];
    assert_eq!(r["budget"], "1ms");
    assert_eq!(r["knob"], "t");
    assert_eq!(r["window"], 1000);
    assert_eq!(r["every"], 250);
    let h = r["history"].as_array().expect("history");
    assert_eq!(h[0]["knob"], "100s", "starts at the most conservative wait");
    assert!(h[0]["fit"].is_null());
    assert!(h.len() >= 15, "{} points", h.len());
    // the second half of the run: within a factor of 2 of 53.5 ms
    for p in &h[h.len() / 2..] {
        let w = p["value"].as_f64().unwrap() / 1e9;
        assert!((w / 0.0535).log2().abs() < 1.0, "{p}");
        assert!(p["fit"]["met"].as_bool().unwrap(), "{p}");
    }
    let last = h.last().unwrap()["knob"].as_str().unwrap();
    assert_eq!(r["final_spec"], format!("fixed-wait:t={last}"));
    let d = v["fg"]["mean_added_delay_s"].as_f64().unwrap();
    assert!((0.0005..0.00125).contains(&d), "{d}");
}

#[test]
fn retune_summary_names_the_knob() {
    let o = fallow(&[
        "simulate",
        "--workload",
        "poisson",
        "--arrival-rate",
        "50",
        "--requests",
        "3000",
        "--policy",
        "waiting",
        "--retune",
        "2%",
        "--window",
        "400",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.contains("Re-tuned `t` online for 2% (window 400 idle intervals, refit every 100)"),
        "{out}"
    );
    assert!(
        out.contains("starting at 100s, ending at fixed-wait:t="),
        "{out}"
    );
}

#[test]
fn bad_retune_and_then_flags_exit_2_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--policy", "fixed-wait:t=1s", "--retune", "1ms"],
            "`t` is the parameter re-tuning sets",
        ),
        (
            &["--policy", "aggressive", "--retune", "1ms"],
            "has no knob",
        ),
        (&["--policy", "oracle", "--retune", "1ms"], "clairvoyant"),
        (&["--policy", "fixed-wait", "--retune", "fast"], "budget"),
        (
            &["--policy", "fixed-wait", "--retune", "1ms", "--window", "1"],
            "at least 2",
        ),
        (
            &["--policy", "fixed-wait", "--retune", "1ms", "--every", "0"],
            "give 1 to the window",
        ),
        (&["--policy", "fixed-wait", "--every", "10"], "--retune"),
        (&["--policy", "fixed-wait", "--gap", "1s"], "--then"),
        (
            &["--policy", "fixed-wait", "--then", "/no/such/trace"],
            "/no/such/trace",
        ),
        (
            &["--policy", "oracle", "--then", "TINY"],
            "clairvoyant reference",
        ),
        (
            &["--policy", "fixed-wait", "--then", "TINY", "--gap", "0"],
            "must be positive",
        ),
    ];
    for (flags, why) in cases {
        let mut args = vec!["simulate".to_string(), tiny()];
        args.extend(
            flags
                .iter()
                .map(|f| if *f == "TINY" { tiny() } else { f.to_string() }),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = fallow(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(why), "{flags:?}: {err}");
    }
    // --then needs a trace first
    let o = fallow(&[
        "simulate",
        "--workload",
        "poisson",
        "--policy",
        "fixed-wait",
        "--then",
        &tiny(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}
