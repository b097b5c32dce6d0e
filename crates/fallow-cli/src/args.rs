//! Value parsers shared by the subcommands' flags, written once. The syntax
//! is the core's (`fallow_core::units`): clap gets the core's error as the
//! text it prints after the flag's name.

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

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_std_duration};
    use std::time::Duration;

    #[test]
    fn durations_in_every_unit_are_nanoseconds() {
        // by hand: 1 s = 1e9 ns, 1 min = 60 s, 1 h = 3600 s
        for (text, ns) in [
            ("3", 3_000_000_000),
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
    }

    #[test]
    fn a_bad_duration_says_what_is_wrong() {
        let e = parse_duration("5 fortnights").unwrap_err();
        assert!(e.contains("fortnights") && e.contains("ms"), "{e}");
        assert!(parse_duration("").is_err());
        assert!(parse_std_duration("-1s").is_err());
    }
}
