//! The flags the subcommands share, declared once, and every value parser
//! once. A subcommand flattens the groups it takes (`#[command(flatten)]`):
//!
//! - [`read`]: how to read a trace (`--format`, `--skip-bad`, the `plain`
//!   units); every trace-reading command.
//! - [`input`]: a trace or a synthetic workload, its service model and seed
//!   (`simulate`, `compare`, `tune`, `recommend`, `pareto`).
//! - [`bg`]: the BG work and its device model (the same five).
//! - [`scrub`]: `fallow scrub` / `fallow trim`, shared by the block scrubber
//!   and the native executors.
//!
//! Output flags (`--csv`: [`crate::table::CsvArg`], `-o`/`--force`:
//! [`crate::atomic::OverwriteArg`]) live with the writers they drive.
//!
//! The syntax of values is the core's (`fallow_core::units`, `Budget`,
//! `SearchMode`): clap gets the core's error as the text it prints after
//! the flag's name.

pub mod bg;
pub mod input;
pub mod read;
pub mod scrub;

pub use bg::BgArgs;
pub use input::InputArgs;

use fallow_core::tune::{self, Budget, SearchMode};
use std::time::Duration;

/// A duration flag (`250ms`, `1.5s`, `2min`; a bare number is seconds) in
/// nanoseconds.
pub(crate) fn parse_duration(s: &str) -> Result<u64, String> {
    fallow_core::units::parse_duration_ns(s).map_err(|e| e.to_string())
}

/// [`parse_duration`] as a [`Duration`], for flags that are timeouts.
pub(crate) fn parse_std_duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map(Duration::from_nanos)
}

/// A size flag (`64KiB`, `1MB`, a bare number is bytes) that must be at
/// least one byte: request sizes, units, bandwidths.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    match fallow_core::units::parse_bytes(s) {
        Ok(0) => Err("must be at least 1 byte".into()),
        Ok(b) => Ok(b),
        Err(e) => Err(e.to_string()),
    }
}

/// A fraction flag: a finite number from 0 to 1 (`0.2`), nothing that
/// could wrap or be read as a percentage (`20`, `1e300`, `nan`).
pub(crate) fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Ok(v) => Err(format!(
            "`{s}` ({v}) is not a fraction from 0 to 1 (0.2 is 20 %)"
        )),
        Err(_) => Err(format!(
            "`{s}` is not a number; give a fraction from 0 to 1"
        )),
    }
}

/// A size flag where 0 is allowed (a cache that may be off).
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    fallow_core::units::parse_bytes(s).map_err(|e| e.to_string())
}

/// An FG budget: a mean slowdown (`5%`) or a mean added delay (`1ms`).
pub(crate) fn parse_budget(s: &str) -> Result<Budget, String> {
    s.parse::<Budget>().map_err(|e| e.to_string())
}

/// Parsed `--budget` of `tune` (a newtype: clap treats a bare `Vec` as
/// repeated values).
#[derive(Debug, Clone)]
pub struct Budgets(pub(crate) Vec<Budget>);

/// Several budgets, comma-separated.
pub(crate) fn parse_budgets(s: &str) -> Result<Budgets, String> {
    Budget::parse_list(s)
        .map(Budgets)
        .map_err(|e| e.to_string())
}

/// Parsed `--sizes` (a newtype: clap treats a bare `Vec` as repeated values).
#[derive(Debug, Clone)]
pub struct Sizes(pub(crate) Vec<u64>);

/// Candidate request sizes: `LO..HI`, `LO..HI/N` or a list.
pub(crate) fn parse_sizes(s: &str) -> Result<Sizes, String> {
    tune::parse_sizes(s).map(Sizes).map_err(|e| e.to_string())
}

/// `--search`: `exact`, `coarse` or `auto`.
pub(crate) fn parse_search(s: &str) -> Result<SearchMode, String> {
    SearchMode::parse(s).map_err(|e| e.to_string())
}

/// The values `--threads` takes: 1 to 1024.
pub(crate) fn threads_parser() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=1024)
}

/// `--threads`, or the core's default (the number of cores, or
/// `FALLOW_THREADS`).
pub(crate) fn threads(arg: Option<u64>) -> usize {
    arg.map_or_else(tune::default_threads, |n| n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use fallow_core::sim;

    #[test]
    fn durations_in_every_unit_are_nanoseconds() {
        // by hand: 1 s = 1e9 ns, 1 min = 60 s, 1 h = 3600 s
        for (text, ns) in [
            ("3s", 3_000_000_000),
            ("1.5s", 1_500_000_000),
            ("250ms", 250_000_000),
            ("40us", 40_000),
            ("7ns", 7),
            ("2min", 120_000_000_000),
            ("1h", 3_600_000_000_000),
        ] {
            assert_eq!(parse_duration(text), Ok(ns), "{text}");
        }
        assert_eq!(parse_std_duration("1.5s"), Ok(Duration::from_millis(1500)));
        // a bare number has no unit (`fixed-wait:t=100` was once read
        // as 100 s while `--budget 5` was refused): an error naming it,
        // except 0, which is 0 in every unit
        let e = parse_duration("3").unwrap_err();
        assert!(e.contains("no unit") && e.contains("3s"), "{e}");
        assert_eq!(parse_duration("0"), Ok(0));
    }

    #[test]
    fn a_bad_duration_says_what_is_wrong() {
        let e = parse_duration("5 fortnights").unwrap_err();
        assert!(e.contains("fortnights") && e.contains("ms"), "{e}");
        assert!(parse_duration("").is_err());
        assert!(parse_std_duration("-1s").is_err());
    }

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        bg: BgArgs,
    }

    /// The flags' defaults (written as text for `--help`) are the core's
    /// request defaults, which Python takes too: one default, two spellings.
    #[test]
    fn flag_defaults_are_the_core_request_defaults() {
        let p = Probe::try_parse_from(["probe", "--workload", "poisson"]).unwrap();
        let req = p
            .input
            .request(sim::Input::Workload(sim::Workload::new("poisson")));
        let sim::Input::Workload(w) = &req.input else {
            unreachable!("a workload input")
        };
        assert_eq!(p.input.requests, w.requests);
        assert_eq!(p.input.request_size, w.request_size_bytes);
        assert_eq!(p.input.write_fraction, w.write_fraction);
        assert_eq!(p.input.seed, req.seed);
        assert_eq!(p.bg.config(p.input.seed), req.config());
        assert_eq!(w.requests, 1_000_000);
    }

    #[test]
    fn sizes_are_positive_bytes() {
        // by hand: KiB = 1024, MB = 1e6
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("0").unwrap_err(), "must be at least 1 byte");
        assert_eq!(parse_bytes("0"), Ok(0));
        assert!(parse_size("many").is_err());
    }
}
