//! Every `--json` document carries `"schema_version"`
//! (`fallow_core::JSON_SCHEMA_VERSION`) — an object as a key (first in the text), a
//! list in each of its objects. Each subcommand that prints `--json` and
//! runs unprivileged on a fixture or a synthetic workload is run here;
//! `record`, `emulate-disk` and `peer` need tracefs, FUSE or a peer and are
//! covered by their own tests' setups (they print `skip:` here).

use crate::common;

use common::{fallow, fixture, json_of, path_str, stderr};
use serde_json::Value;

const SMALL: &[&str] = &[
    "--workload",
    "poisson",
    "--utilization",
    "0.2",
    "--requests",
    "300",
    "--service",
    "exp:5ms",
    "--bg",
    "size:base=8ms,knee=64KiB,rate=100MB",
];

fn check(name: &str, v: &Value) {
    let want = Value::from(fallow_core::JSON_SCHEMA_VERSION);
    match v {
        Value::Object(m) => {
            assert_eq!(m.get("schema_version"), Some(&want), "{name}: {v}");
        }
        Value::Array(items) => {
            assert!(!items.is_empty(), "{name}: an empty list");
            for it in items {
                assert_eq!(it.get("schema_version"), Some(&want), "{name}: {it}");
            }
        }
        other => panic!("{name}: not an object or a list: {other}"),
    }
}

fn run(name: &str, args: &[&str]) {
    let o = fallow(args);
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    check(name, &json_of(&o));
}

#[test]
fn every_json_document_carries_the_schema_version() {
    let tiny = fixture("tiny.csv");
    let tiny = path_str(&tiny);
    run("analyze", &["analyze", tiny, "--json"]);
    run("policies", &["policies", "--json"]);
    run("scrub-plan", &["scrub-plan", "--json"]);
    let with = |head: &[&'static str]| -> Vec<&'static str> {
        let mut a = head.to_vec();
        a.extend_from_slice(SMALL);
        a.push("--json");
        a
    };
    run(
        "simulate",
        &with(&["simulate", "--policy", "fixed-wait:t=20ms"]),
    );
    run(
        "compare",
        &with(&[
            "compare",
            "--policy",
            "fixed-wait",
            "--policy",
            "aggressive",
        ]),
    );
    run(
        "tune",
        &with(&[
            "tune",
            "--policy",
            "fixed-wait",
            "--budget",
            "2ms",
            "--sizes",
            "64KiB,1MiB",
        ]),
    );
    run(
        "recommend",
        &with(&["recommend", "--budget", "2ms", "--sizes", "64KiB,1MiB"]),
    );
    run("pareto", &with(&["pareto", "--policy", "fixed-wait"]));
    run(
        "tune, three budgets",
        &with(&[
            "tune",
            "--policy",
            "busy-bee",
            "--budget",
            "1ms,2ms,5%",
            "--sizes",
            "64KiB",
        ]),
    );
    run(
        "simulate --retune",
        &with(&[
            "simulate",
            "--policy",
            "fixed-wait",
            "--retune",
            "2ms",
            "--window",
            "40",
        ]),
    );
    run(
        "simulate --then",
        &[
            "simulate",
            tiny,
            "--then",
            tiny,
            "--service",
            "exp:5ms",
            "--policy",
            "fixed-wait:t=20ms",
            "--json",
        ],
    );
    let energy = fixture("energy.csv");
    run(
        "energy",
        &[
            "energy",
            path_str(&energy),
            "--policy",
            "timeout:t=10s",
            "--local-fraction",
            "1",
            "--json",
        ],
    );
    // scrub a small file of our own, read-only, with no monitor
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("disk.img");
    std::fs::write(&target, vec![0u8; 1 << 20]).unwrap();
    let o = fallow(&[
        "scrub",
        target.to_str().unwrap(),
        "--monitor",
        "none",
        "--policy",
        "aggressive",
        "--json",
    ]);
    if o.status.success() {
        check("scrub", &json_of(&o));
        // and its progress lines on stderr, `event` first as readers match it
        let progress: Vec<Value> = stderr(&o)
            .lines()
            .filter(|l| l.starts_with(r#"{"event":"progress","schema_version":"#))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!progress.is_empty(), "{}", stderr(&o));
        for p in &progress {
            assert_eq!(p["schema_version"], fallow_core::JSON_SCHEMA_VERSION, "{p}");
        }
    } else {
        println!(
            "skip: scrub --json on a file did not run here: {}",
            stderr(&o)
        );
    }
    println!("skip: record, emulate-disk, peer, spindown --json need tracefs, FUSE or a peer (spindown: its root test checks the status, status --json and --log lines)");
}
