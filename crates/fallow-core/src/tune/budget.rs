//! What the foreground may lose: a [`Budget`] (`5%` relative slowdown, or
//! `1ms` mean added delay per FG request).

use crate::error::{Error, Result};
use crate::sim::SimResult;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// The most the foreground may lose on average.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Budget {
    /// Relative slowdown of the mean FG response time (`0.05` = 5 %).
    Slowdown {
        /// Fraction, not percent.
        fraction: f64,
    },
    /// Mean delay added to each FG request, ns (Practical Scrubbing's
    /// "average slowdown" of 1, 2, 4 ms in Table III).
    AddedDelay {
        /// ns.
        ns: u64,
    },
}

impl Budget {
    /// True if `r` stays within the budget.
    pub fn meets(&self, r: &SimResult) -> bool {
        self.meets_means(r.fg.slowdown, r.fg.mean_added_delay_s)
    }

    /// True if a run with this relative slowdown and mean added delay (s)
    /// stays within the budget.
    pub fn meets_means(&self, slowdown: f64, mean_added_delay_s: f64) -> bool {
        match *self {
            Budget::Slowdown { fraction } => slowdown <= fraction,
            Budget::AddedDelay { ns } => mean_added_delay_s <= ns as f64 / 1e9,
        }
    }

    /// Parse a comma-separated list (`1ms,2ms,4ms`).
    pub fn parse_list(s: &str) -> Result<Vec<Budget>> {
        let list: Vec<Budget> = s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::parse)
            .collect::<Result<_>>()?;
        if list.is_empty() {
            return Err(Error::invalid(
                "budget",
                "empty: give a slowdown such as `5%` or a mean added delay such as `1ms`",
            ));
        }
        Ok(list)
    }
}

impl FromStr for Budget {
    type Err = Error;

    /// `5%` (relative slowdown) or a duration with a unit (`1ms`, `500us`).
    fn from_str(s: &str) -> Result<Budget> {
        let t = s.trim();
        let bad = |m: &str| {
            Error::invalid(
                "budget",
                format!(
                    "`{s}`: {m}; give a slowdown such as `5%` or a mean added delay such as `1ms`"
                ),
            )
        };
        if t.is_empty() {
            return Err(bad("empty"));
        }
        if let Some(num) = t.strip_suffix('%') {
            let p: f64 = num.trim().parse().map_err(|_| bad("not a percentage"))?;
            if !p.is_finite() || p <= 0.0 {
                return Err(bad("the slowdown must be positive"));
            }
            return Ok(Budget::Slowdown {
                fraction: p / 100.0,
            });
        }
        // A bare number is ambiguous (seconds? a fraction?): ask for a unit.
        if t.parse::<f64>().is_ok() {
            return Err(bad("a bare number has no unit"));
        }
        let ns = crate::units::parse_duration_ns(t)
            .map_err(|_| bad("not a percentage or a duration"))?;
        if ns == 0 {
            return Err(bad("the added delay must be positive"));
        }
        Ok(Budget::AddedDelay { ns })
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Budget::Slowdown { fraction } => write!(f, "{}%", fraction * 100.0),
            Budget::AddedDelay { ns } => f.write_str(&super::ladder::duration_text(ns)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slowdowns_and_delays() {
        assert_eq!(
            "5%".parse::<Budget>().unwrap(),
            Budget::Slowdown { fraction: 0.05 }
        );
        assert_eq!(
            " 1ms ".parse::<Budget>().unwrap(),
            Budget::AddedDelay { ns: 1_000_000 }
        );
        assert_eq!(Budget::parse_list("1ms,2ms, 4ms").unwrap().len(), 3);
        assert_eq!("2ms".parse::<Budget>().unwrap().to_string(), "2ms");
        assert_eq!("5%".parse::<Budget>().unwrap().to_string(), "5%");
    }

    #[test]
    fn bad_budgets_say_what_to_write() {
        for (bad, why) in [
            ("", "empty"),
            ("5", "a bare number has no unit"),
            ("fast", "not a percentage or a duration"),
            ("x%", "not a percentage"),
            ("-3%", "must be positive"),
            ("0ms", "must be positive"),
            ("1 parsec", "not a percentage or a duration"),
        ] {
            let e = bad.parse::<Budget>().unwrap_err().to_string();
            assert!(e.contains(why), "`{bad}`: {e}");
            assert!(e.contains("such as `5%`"), "`{bad}`: {e}");
        }
        assert!(Budget::parse_list(",")
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert!(Budget::parse_list("1ms,oops").is_err());
    }
}
