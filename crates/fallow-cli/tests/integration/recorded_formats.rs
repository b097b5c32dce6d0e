//! The readers of docs/formats.md from the command line: `fallow analyze` on the
//! hand-made fixtures of `tests/data/traces` (values worked out in
//! crates/fallow-core/tests/it/readers/recorded.rs), the fio iolog's missing
//! completions said where they matter, and plain's completion column.

use crate::common;

use common::{bad_input, json, path_str};
use std::path::{Path, PathBuf};

fn trace(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/traces")
        .join(name)
}

#[test]
fn analyze_reads_each_recorded_format() {
    // (fixture, --device, requests on it, format)
    for (name, device, requests, format) in [
        ("small.biosnoop", "0", 2, "biosnoop"),
        ("small-q.biosnoop", "0", 3, "biosnoop"),
        ("small.bpftrace", "8388624", 2, "bpftrace"),
        ("takeoverjp-nvme.blktrace.0", "271581184", 963, "blktrace"),
        ("small_clat.1.log", "0", 3, "fio-lat"),
    ] {
        let v = json(&["analyze", path_str(&trace(name)), "--device", device]);
        assert_eq!(v["trace"]["requests"], requests, "{name}");
        assert_eq!(v["trace"]["format"], format, "{name}");
    }
}

#[test]
fn a_fio_iolog_says_it_has_no_completions() {
    bad_input(
        &["analyze", path_str(&trace("small.iolog"))],
        &["fio iolog", "never when it completed", "--service"],
    );
    let v = json(&[
        "analyze",
        path_str(&trace("small.iolog")),
        "--service",
        "const:1ms",
    ]);
    assert_eq!(v["trace"]["requests"], 3);
}

#[test]
fn plain_completion_column_is_asked_for_not_guessed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("six.txt");
    // ms: [1.5, 2.25] and [3, 4]: one idle interval of 0.75 ms.
    std::fs::write(&p, "1.5 0 0 4096 r 2.25\n3 0 8192 512 w 4\n").unwrap();
    bad_input(
        &["analyze", path_str(&p)],
        &["--format plain --completion-column"],
    );
    let v = json(&[
        "analyze",
        path_str(&p),
        "--format",
        "plain",
        "--completion-column",
    ]);
    assert_eq!(v["idle"]["count"], 1);
    assert!((v["idle"]["max_s"].as_f64().unwrap() - 0.000_75).abs() < 1e-12);
}
