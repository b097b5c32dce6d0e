//! The integration tests of the `fallow` binary, one test binary (one link
//! step instead of one per file) with one module per area. Shared helpers,
//! the [`common::TestCommand`] builder among them, are in `common/`.
//!
//! Tests that need root or the shared traces are `#[ignore = "needs …"]`
//! and counted as ignored; `--include-ignored` runs them (docs/testing.md).
//! Run one area with a filter: `cargo test -p fallow-cli --test integration scrub::`.

mod common;

mod advertised;
mod bounds;
mod charts;
mod cli;
mod columnar;
mod config_errors;
mod conveniences;
mod convert_hosts;
mod energy;
mod first_hour;
mod fleet;
mod json_schema;
mod live_tools;
mod long_gaps;
mod native;
mod native_checkpoint;
mod native_recorded;
mod outputs;
mod peer;
mod per_device;
mod progress;
mod readme;
mod recommend;
mod recorded_formats;
mod retune;
mod run;
mod run_kernel;
mod scrub;
mod scrub_plan;
mod simulate;
mod spindown;
mod systemd_units;
mod tune;
