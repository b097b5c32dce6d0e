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
mod registry;
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

/// A file of the shared real traces (`FALLOW_SHARED_TRACES` or
/// `../shared/traces` beside the repository). The tests that read them are
/// `#[ignore = "needs ../shared/traces …"]`, so a run without them counts
/// them as ignored; run with `--include-ignored` where they are missing, a
/// test fails here naming the file instead of passing unchecked.
pub fn shared(rel: &str) -> PathBuf {
    let p = shared_dir().join(rel);
    assert!(
        p.exists(),
        "{} not found: this test needs the shared traces (set FALLOW_SHARED_TRACES, \
         or run without --include-ignored to count it as ignored)",
        p.display()
    );
    p
}

/// `FALLOW_SHARED_TRACES`, else `shared/traces` in the nearest folder above
/// this crate that has one (beside the repository, or beside a parent of a
/// worktree's checkout).
pub fn shared_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FALLOW_SHARED_TRACES") {
        return PathBuf::from(d);
    }
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .map(|a| a.join("shared/traces"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| here.join("../../../shared/traces"))
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
