//! `fallow scrub-plan` as the built binary: a pass time and an MLET worked
//! out by hand, bad flags; and `fallow simulate`'s notes on Busy Bee's
//! Threshold rule.

use crate::common;

use common::{assert_close, bad_input, json, num};

/// 1 GiB in 1 MiB segments (1,024), 15,000 rpm (4 ms), 100 MB/s (a 1 MiB
/// transfer takes 10.48576 ms), 8 ms full stroke. Sequentially every
/// request after the first starts where the last ended: transfer + one
/// revolution = 14.48576 ms; the first seeks back over the whole disk: 8 ms
/// full stroke + half a revolution + transfer = 20.48576 ms. Pass P =
/// 20.48576 + 1023 × 14.48576 ms. A 512-byte error lies in one segment
/// (weight 1 MiB − 512 per segment, 1,024 segments: waits P/2) or straddles
/// two read τ = 14.48576 ms apart (weight 512, 1,023 places: waits
/// (τ² + (P − τ)²) / 2P).
#[test]
fn sequential_pass_and_isolated_error_by_hand() {
    let v = json(&[
        "scrub-plan",
        "--capacity",
        "1GiB",
        "--segment",
        "1MiB",
        "--regions",
        "8",
        "--burst-span",
        "512",
    ]);
    assert_eq!(v["schema_version"], fallow_core::JSON_SCHEMA_VERSION);
    let row = &v["rows"][0];
    assert_eq!(row["plan"]["order"], "sequential");
    let tau = 14.48576e-3;
    let p = 20.48576e-3 + 1023.0 * tau;
    assert_close(num(row, "pass_s"), p, 1e-9);
    let (w1, w2) = (1024.0 * (1_048_576.0 - 512.0), 1023.0 * 512.0);
    let e2 = (tau * tau + (p - tau) * (p - tau)) / (2.0 * p);
    let want = (w1 * p / 2.0 + w2 * e2) / (w1 + w2);
    assert_close(num(row, "mlet_s"), want, 1e-9);
    assert_eq!(v["rows"][1]["plan"]["regions"], 8);
}

#[test]
fn bad_flags_exit_2_naming_them() {
    bad_input(&["scrub-plan", "--regions", "0"], &["--regions"]);
    bad_input(&["scrub-plan", "--segment", "1x"], &["--segment"]);
    bad_input(
        &["scrub-plan", "--capacity", "1GiB", "--regions", "1024"],
        &["burst span"],
    );
    bad_input(&["scrub-plan", "--duty", "2"], &["duty"]);
    bad_input(
        &["scrub-plan", "--capacity", "4TB", "--check", "10"],
        &["invalid --check: a Monte Carlo walks every segment"],
    );
}

#[test]
fn simulate_notes_busy_bees_threshold_rule() {
    let run = |rate: &str| {
        json(&[
            "simulate",
            "--workload",
            "poisson",
            "--arrival-rate",
            rate,
            "--service",
            "exp:5ms",
            "--requests",
            "20000",
            "--policy",
            "busy-bee:idle-wait=20ms,window=500bp",
        ])
    };
    // ρ = 0.25: an M/M/1 busy period has one request with probability
    // 1/(1 + ρ) = 0.8, so the 90th percentile is above one request
    let v = run("50");
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("by the 90th percentile"), "{notes:?}");
    // ρ = 0.01: 99 % of busy periods have one request: the fallback
    let v = run("2");
    let notes = v["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[1]
            .as_str()
            .unwrap()
            .contains("fell back to the top-decile rule"),
        "{notes:?}"
    );
}

/// `scrub-plan` recommends a region count (docs/scrub-plan.md): the one of lowest
/// MLET among sequential and every power-of-two staggered count a 4 MiB
/// burst allows, here the argmin of the rows the same command prints when
/// asked for all of them.
#[test]
fn it_recommends_the_region_count_of_lowest_mlet() {
    let powers: Vec<String> = (1..=11).map(|k| (1u64 << k).to_string()).collect();
    let list = powers.join(",");
    let v = common::json(&[
        "scrub-plan",
        "--capacity",
        "10GB",
        "--segment",
        "64KiB",
        "--regions",
        &list,
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 12);
    let best = rows
        .iter()
        .min_by(|a, b| {
            a["mlet_s"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["mlet_s"].as_f64().unwrap())
        })
        .unwrap();
    let rec = &v["recommended"][0];
    assert_eq!(rec["regions"], best["plan"]["regions"]);
    assert_eq!(rec["mlet_s"], best["mlet_s"]);
    // 10 GB / 4 MiB: 2,384 regions at most hold a burst; 2..2048 and sequential
    assert_eq!(rec["candidates"], 12);
    // the text names it too, whatever --regions lists
    let o = common::fallow(&[
        "scrub-plan",
        "--capacity",
        "10GB",
        "--segment",
        "64KiB",
        "--regions",
        "16,128",
    ]);
    let text = common::stdout(&o).replace('\u{a0}', " ");
    let want = format!("--order staggered --regions {}", best["plan"]["regions"]);
    assert!(
        text.contains(&format!("Recommended at 64.0 KiB: {want}")),
        "{text}"
    );
}
