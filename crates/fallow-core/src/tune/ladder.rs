//! The values a knob is searched over: every number with three significant
//! digits in the knob's range (100 µs, 101 µs, …, 99.9 s, 100 s), ordered
//! from the most conservative to the most aggressive.
//!
//! A discrete ladder rather than a continuous bisection, for two reasons:
//! each value is written exactly as the policy will parse it (`88.1ms`,
//! `0.125`), so the chosen parameters re-simulated with `fallow simulate`
//! give the reported figures to the bit; and the simulations can be cached
//! by (request size, ladder index) and shared between budgets. Three
//! significant digits (900 values a decade) is the resolution of
//! Practical Scrubbing Table III (205 ms, 88.1 ms, 32.4 ms). The 1-2-5
//! values of each decade form the coarse grid the search scans first.

use crate::policy::{Knob, KnobKind, MoreAggressive};

/// One value of a knob: as written and as parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// As written in the policy spec (`88.1ms`, `0.125`).
    pub text: String,
    /// As the policy parses it (ns for durations).
    pub value: f64,
    /// On the coarse 1-2-5 grid (100 µs, 200 µs, 500 µs, 1 ms, …) that
    /// the search scans in full before it bisects.
    pub coarse: bool,
}

/// The knob's values, most conservative first.
pub fn ladder(knob: &Knob) -> Vec<Step> {
    let mut steps = Vec::new();
    let lo = knob.min.max(f64::MIN_POSITIVE);
    let first_exp = lo.log10().floor() as i32 - 2;
    let last_exp = knob.max.log10().ceil() as i32;
    for e in first_exp..=last_exp {
        for m in 100u64..=999 {
            let text = match knob.kind {
                KnobKind::Duration => {
                    if e < 0 {
                        continue; // below 1 ns
                    }
                    let Some(ns) = 10u64.checked_pow(e as u32).and_then(|p| p.checked_mul(m))
                    else {
                        continue;
                    };
                    duration_text(ns)
                }
                KnobKind::Number => number_text(m, e),
            };
            let value = match knob.kind {
                KnobKind::Duration => match crate::units::parse_duration_ns(&text) {
                    Ok(ns) => ns as f64,
                    Err(_) => continue,
                },
                KnobKind::Number => match text.parse::<f64>() {
                    Ok(v) => v,
                    Err(_) => continue,
                },
            };
            // compare with a relative slack: the bounds are written as floats
            if value >= knob.min * (1.0 - 1e-9) && value <= knob.max * (1.0 + 1e-9) {
                steps.push(Step {
                    text,
                    value,
                    coarse: matches!(m, 100 | 200 | 500),
                });
            }
        }
    }
    steps.sort_by(|a, b| a.value.total_cmp(&b.value));
    steps.dedup_by(|a, b| a.value == b.value);
    if knob.more_aggressive == MoreAggressive::Smaller {
        steps.reverse();
    }
    steps
}

/// `m × 10^e` as an exact decimal (`125`, `0.0125`, `12500`).
fn number_text(m: u64, e: i32) -> String {
    if e >= 0 {
        return format!("{m}{}", "0".repeat(e as usize));
    }
    let digits = m.to_string();
    let shift = (-e) as usize;
    let s = if shift >= digits.len() {
        format!("0.{}{digits}", "0".repeat(shift - digits.len()))
    } else {
        let (i, f) = digits.split_at(digits.len() - shift);
        format!("{i}.{f}")
    };
    trim_decimal(s)
}

fn trim_decimal(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// ns as an exact duration in the largest unit not above it (`88.1ms`,
/// `1.5s`, `250us`): parses back to the same ns.
pub fn duration_text(ns: u64) -> String {
    let (unit, name) = match ns {
        n if n >= 1_000_000_000 => (1_000_000_000u64, "s"),
        n if n >= 1_000_000 => (1_000_000, "ms"),
        n if n >= 1_000 => (1_000, "us"),
        _ => (1, "ns"),
    };
    let whole = ns / unit;
    let frac = ns % unit;
    if frac == 0 {
        return format!("{whole}{name}");
    }
    let width = unit.ilog10() as usize;
    trim_decimal(format!("{whole}.{frac:0width$}")) + name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_write_exactly() {
        assert_eq!(duration_text(88_100_000), "88.1ms");
        assert_eq!(duration_text(205_000_000), "205ms");
        assert_eq!(duration_text(1_500_000_000), "1.5s");
        assert_eq!(duration_text(250_000), "250us");
        assert_eq!(duration_text(999), "999ns");
        assert_eq!(duration_text(1_000_000_001), "1.000000001s");
        assert_eq!(number_text(125, -4), "0.0125");
        assert_eq!(number_text(125, -1), "12.5");
        assert_eq!(number_text(100, -2), "1");
        assert_eq!(number_text(125, 2), "12500");
    }

    #[test]
    fn every_step_parses_back_to_its_value() {
        for e in crate::policy::registry() {
            let Some(k) = e.knob else { continue };
            let l = ladder(&k);
            assert!(l.len() > 100, "{}: {} steps", e.name, l.len());
            for s in &l {
                let back = match k.kind {
                    KnobKind::Duration => crate::units::parse_duration_ns(&s.text).unwrap() as f64,
                    KnobKind::Number => s.text.parse::<f64>().unwrap(),
                };
                assert_eq!(back, s.value, "{}: {}", e.name, s.text);
            }
            // most conservative first
            let (a, b) = (l[0].value, l[l.len() - 1].value);
            match k.more_aggressive {
                MoreAggressive::Smaller => assert!(a > b),
                MoreAggressive::Larger => assert!(a < b),
            }
        }
    }

    #[test]
    fn the_wait_ladder_spans_100us_to_100s() {
        let k = crate::policy::entry("fixed-wait").unwrap().knob.unwrap();
        let l = ladder(&k);
        assert_eq!(l[0].text, "100s");
        assert_eq!(l.last().unwrap().text, "100us");
        assert_eq!(l.len(), 6 * 900 + 1);
        let coarse: Vec<&str> = l
            .iter()
            .filter(|s| s.coarse)
            .map(|s| s.text.as_str())
            .collect();
        assert_eq!(coarse.len(), 19);
        assert_eq!(coarse[..4], ["100s", "50s", "20s", "10s"]);
    }
}
