//! Trace readers: hand-made fixtures (`tests/data/traces`, binaries written
//! by `make_fixtures.py` there), the real traces in `../shared/traces`,
//! an independent HP SRT decoder for the idle-period facts, fuzzing, and
//! the parallel text reader against the sequential one.

mod columnar;
mod fixtures;
mod fuzz;
mod hp_periods;
mod parallel;
mod real;
mod recorded;
mod roundtrip;

use fallow_core::trace::{read_trace, ReadOptions};
use fallow_core::{Error, Trace};
use std::path::PathBuf;

/// A fixture under `tests/data/traces`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/traces"
    ))
    .join(name)
}

/// The shared real traces (`FALLOW_SHARED_TRACES` or `../shared/traces`
/// beside the repository), or `None` with a note when they are missing.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("FALLOW_SHARED_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/traces"
            ))
        });
    let p = dir.join(rel);
    if p.exists() {
        Some(p)
    } else {
        println!(
            "skipped: {} not found (set FALLOW_SHARED_TRACES)",
            p.display()
        );
        None
    }
}

pub fn read(name: &str) -> Trace {
    read_trace(fixture(name), &ReadOptions::default())
        .unwrap_or_else(|e| panic!("reading {name}: {e}"))
}

pub fn read_skipping(name: &str) -> Trace {
    let opts = ReadOptions {
        skip_bad: true,
        ..Default::default()
    };
    read_trace(fixture(name), &opts).unwrap_or_else(|e| panic!("reading {name}: {e}"))
}

/// The error reading a fixture, as the user sees it.
pub fn error(name: &str, skip_bad: bool) -> (Error, String) {
    let opts = ReadOptions {
        skip_bad,
        ..Default::default()
    };
    match read_trace(fixture(name), &opts) {
        Ok(t) => panic!("{name} read without error: {} requests", t.len()),
        Err(e) => {
            let msg = e.to_string();
            (e, msg)
        }
    }
}

/// Assert that `msg` mentions every one of `parts`.
pub fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "`{msg}` does not mention `{p}`");
    }
}
