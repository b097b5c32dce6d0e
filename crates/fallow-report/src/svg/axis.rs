//! Scales and ticks: linear axes get 1-2-5 steps (hours and days get
//! 1-2-3-6-12 and whole days); log axes get decades, with 2 and 5 labelled
//! when the range is short and every other decade labelled when it is long.
//! Tick labels carry units (`10 ms`, `20 %`, `1k`).

/// Linear or logarithmic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Equal distances for equal differences.
    Linear,
    /// Equal distances for equal ratios (base 10).
    Log,
}

/// What the values on an axis are, which decides tick labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Plain numbers (`0.5`, `20`, `12k`).
    Number,
    /// Durations in seconds (`10 ms`, `2 h`).
    Seconds,
    /// Fractions shown as percentages (0.2 → `20 %`).
    Fraction,
    /// Hours, for hourly series (`24`, `48`).
    Hours,
}

/// A tick: position in data units and its label (empty = unlabelled minor tick).
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    /// Position, data units.
    pub value: f64,
    /// Label, empty for minor ticks.
    pub label: String,
    /// Major ticks get a grid line.
    pub major: bool,
}

/// Unit of a linear time axis chosen from its largest value: (seconds per unit, suffix).
pub fn time_unit_for(max_abs_s: f64) -> (f64, &'static str) {
    if max_abs_s < 2e-3 {
        (1e-6, "µs")
    } else if max_abs_s < 2.0 {
        (1e-3, "ms")
    } else if max_abs_s < 300.0 {
        (1.0, "s")
    } else if max_abs_s < 3.0 * 3600.0 {
        (60.0, "min")
    } else if max_abs_s < 4.0 * 86400.0 {
        (3600.0, "h")
    } else {
        (86400.0, "days")
    }
}

/// A step of roughly `raw` from the sequence 1, 2, 5, 10, … (or a custom mantissa list).
fn nice_step(raw: f64, mantissas: &[f64]) -> f64 {
    if !(raw > 0.0 && raw.is_finite()) {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    for &m in mantissas {
        if m * p >= raw * 0.999 {
            return m * p;
        }
    }
    10.0 * p
}

/// Step for hours: 1, 2, 3, 6, 12, 24, 48, 72, 168, then whole weeks.
fn hour_step(raw: f64) -> f64 {
    for s in [
        1.0, 2.0, 3.0, 6.0, 12.0, 24.0, 48.0, 72.0, 168.0, 336.0, 672.0,
    ] {
        if s >= raw {
            return s;
        }
    }
    nice_step(raw / 168.0, &[1.0, 2.0, 5.0]) * 168.0
}

/// The range after expanding to tick boundaries, and the ticks, for a linear axis.
pub fn linear_ticks(lo: f64, hi: f64, unit: Unit, target: usize) -> (f64, f64, Vec<Tick>) {
    let (lo, hi) = sane_range(lo, hi);
    // time axes tick in a display unit (minutes, hours, …)
    let (scale, _) = match unit {
        Unit::Seconds => time_unit_for(lo.abs().max(hi.abs())),
        _ => (1.0, ""),
    };
    let (a, b) = (lo / scale, hi / scale);
    let raw = (b - a) / target.max(2) as f64;
    let step = match unit {
        Unit::Hours => hour_step(raw),
        Unit::Seconds if scale == 3600.0 => hour_step(raw),
        _ => nice_step(raw, &[1.0, 2.0, 2.5, 5.0]),
    };
    // tolerate rounding: 0.6 / 0.2 is 2.9999999999999996
    let start = (a / step + 1e-9).floor() * step;
    let end = (b / step - 1e-9).ceil() * step;
    let n = ((end - start) / step).round() as i64;
    let ticks = (0..=n.clamp(0, 200))
        .map(|i| {
            let v = start + i as f64 * step;
            let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
            Tick {
                value: v * scale,
                label: linear_label(v, step, unit),
                major: true,
            }
        })
        .collect();
    (start * scale, end * scale, ticks)
}

fn sane_range(lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo.min(hi), lo.max(hi))
    } else {
        (0.0, 1.0)
    };
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        (lo - pad, hi + pad)
    } else {
        (lo, hi)
    }
}

/// Decimals needed to show multiples of `step` exactly.
fn decimals_for(step: f64) -> usize {
    let mut d = 0;
    let mut s = step.abs();
    while d < 6 && (s - s.round()).abs() > 1e-6 * s.max(1e-12) {
        s *= 10.0;
        d += 1;
    }
    d
}

fn linear_label(v: f64, step: f64, unit: Unit) -> String {
    match unit {
        Unit::Fraction => format!("{} %", trim_num(v * 100.0)),
        Unit::Number | Unit::Hours | Unit::Seconds => {
            if v.abs() >= 10_000.0 && step >= 1000.0 {
                si(v)
            } else if v.abs() >= 1000.0 && decimals_for(step) == 0 {
                let c = fallow_core::human::count(v.abs().round() as u64);
                if v < 0.0 {
                    format!("-{c}")
                } else {
                    c
                }
            } else {
                trim_num(v)
            }
        }
    }
}

/// 12000 → `12k`, 2.5e6 → `2.5M`.
fn si(v: f64) -> String {
    let a = v.abs();
    let (d, suffix) = if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let x = v / d;
    let s = if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    };
    format!("{s}{suffix}")
}

/// The range expanded to whole decades, and the ticks, for a log axis.
/// `lo` must be positive (callers drop non-positive data first).
pub fn log_ticks(lo: f64, hi: f64, unit: Unit) -> (f64, f64, Vec<Tick>) {
    let lo = if lo > 0.0 && lo.is_finite() { lo } else { 1.0 };
    let hi = if hi > lo && hi.is_finite() {
        hi
    } else {
        lo * 10.0
    };
    let mut a = (lo.log10() + 1e-9).floor() as i32;
    let mut b = (hi.log10() - 1e-9).ceil() as i32;
    if b <= a {
        b = a + 1;
    }
    if b - a > 24 {
        a = b - 24; // never more than 24 decades: the rest is clipped
    }
    let decades = b - a;
    let label_every = if decades > 7 { 2 } else { 1 };
    let mut ticks = Vec::new();
    for e in a..=b {
        let base = 10f64.powi(e);
        let labelled = (e - a) % label_every == 0;
        ticks.push(Tick {
            value: base,
            label: if labelled {
                log_label(base, unit)
            } else {
                String::new()
            },
            major: true,
        });
        if e < b {
            for m in 2..=9 {
                let v = m as f64 * base;
                let label = if decades <= 2 && (m == 2 || m == 5) {
                    log_label(v, unit)
                } else {
                    String::new()
                };
                ticks.push(Tick {
                    value: v,
                    label,
                    major: false,
                });
            }
        }
    }
    (10f64.powi(a), 10f64.powi(b), ticks)
}

fn log_label(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Seconds => {
            if v >= 1e4 {
                format!("10{} s", superscript(v.log10().round() as i32))
            } else if v >= 1.0 {
                format!("{} s", trim_num(v))
            } else if v >= 1e-3 {
                format!("{} ms", trim_num(v * 1e3))
            } else if v >= 1e-6 {
                format!("{} µs", trim_num(v * 1e6))
            } else {
                format!("{} ns", trim_num(v * 1e9))
            }
        }
        Unit::Fraction => format!("{} %", trim_num(v * 100.0)),
        Unit::Number | Unit::Hours => {
            if v >= 1000.0 {
                si(v)
            } else if v >= 1e-3 {
                trim_num(v)
            } else {
                format!("10{}", superscript(v.log10().round() as i32))
            }
        }
    }
}

/// A round number without trailing zeros: 0.001 → `0.001`, 20 → `20`.
fn trim_num(v: f64) -> String {
    let s = format!("{:.6}", fallow_core::human::round_sig(v, 6));
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn superscript(e: i32) -> String {
    e.to_string()
        .chars()
        .map(|c| match c {
            '-' => '⁻',
            '0' => '⁰',
            '1' => '¹',
            '2' => '²',
            '3' => '³',
            '4' => '⁴',
            '5' => '⁵',
            '6' => '⁶',
            '7' => '⁷',
            '8' => '⁸',
            '9' => '⁹',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(t: &[Tick]) -> Vec<&str> {
        t.iter()
            .filter(|t| !t.label.is_empty())
            .map(|t| t.label.as_str())
            .collect()
    }

    #[test]
    fn linear_fraction_ticks() {
        let (lo, hi, t) = linear_ticks(0.0, 1.0, Unit::Fraction, 5);
        assert_eq!((lo, hi), (0.0, 1.0));
        assert_eq!(
            labels(&t),
            vec!["0 %", "20 %", "40 %", "60 %", "80 %", "100 %"]
        );
    }

    #[test]
    fn linear_number_ticks_expand_to_steps() {
        let (lo, hi, t) = linear_ticks(0.0, 47.0, Unit::Number, 5);
        assert_eq!((lo, hi), (0.0, 50.0));
        assert_eq!(labels(&t), vec!["0", "10", "20", "30", "40", "50"]);
        let (_, _, t) = linear_ticks(0.0, 0.9, Unit::Number, 4);
        assert_eq!(labels(&t), vec!["0", "0.25", "0.5", "0.75", "1"]);
    }

    #[test]
    fn time_axis_in_hours() {
        // 4 h in seconds: ticks in hours
        let (_, hi, t) = linear_ticks(0.0, 4.0 * 3600.0, Unit::Seconds, 5);
        assert_eq!(hi, 4.0 * 3600.0);
        assert_eq!(labels(&t), vec!["0", "1", "2", "3", "4"]);
        assert_eq!(time_unit_for(4.0 * 3600.0).1, "h");
    }

    #[test]
    fn hours_axis_steps_by_days() {
        let (_, _, t) = linear_ticks(0.0, 168.0, Unit::Hours, 7);
        assert_eq!(
            labels(&t),
            vec!["0", "24", "48", "72", "96", "120", "144", "168"]
        );
    }

    #[test]
    fn log_seconds_ticks() {
        let (lo, hi, t) = log_ticks(3e-6, 0.7, Unit::Seconds);
        assert_eq!((lo, hi), (1e-6, 1.0));
        assert_eq!(
            labels(&t),
            vec!["1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"]
        );
    }

    #[test]
    fn short_log_range_labels_2_and_5() {
        let (_, _, t) = log_ticks(0.02, 0.9, Unit::Fraction);
        assert_eq!(
            labels(&t),
            vec!["1 %", "2 %", "5 %", "10 %", "20 %", "50 %", "100 %"]
        );
    }

    #[test]
    fn long_log_range_labels_every_other_decade() {
        let (_, _, t) = log_ticks(1.0, 1e9, Unit::Number);
        assert_eq!(labels(&t), vec!["1", "100", "10k", "1M", "100M"]);
    }

    #[test]
    fn degenerate_ranges_do_not_panic() {
        let (lo, hi, _) = linear_ticks(5.0, 5.0, Unit::Number, 5);
        assert!(lo < 5.0 && hi > 5.0);
        let (lo, hi, _) = linear_ticks(f64::NAN, f64::INFINITY, Unit::Number, 5);
        assert!(lo < hi);
        let (lo, hi, _) = log_ticks(0.0, -1.0, Unit::Seconds);
        assert!(lo < hi);
    }
}
