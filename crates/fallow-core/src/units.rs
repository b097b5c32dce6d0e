//! Parsing of human-written durations and sizes (`5ms`, `1.5s`, `64KiB`).
//! A bare size is bytes; a bare duration is refused (except 0): it names
//! no unit, and `t=100` read as seconds surprised users who meant ms.

use crate::error::{Error, Result};

/// The longest duration any flag or parameter takes, ns (about 317 years,
/// below the 584 years of 2⁶⁴ ns). Settings with their own tighter bound
/// (a service time) say so where they are read.
pub const MAX_DURATION_NS: u64 = 10_000_000_000_000_000_000;

/// Parse a duration (`ns`, `us`/`µs`, `ms`, `s`, `min`, `h`; the unit is
/// required, except for 0) into ns, at most [`MAX_DURATION_NS`].
pub fn parse_duration_ns(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')
        })
        .unwrap_or(t.len());
    // `e` inside a unit name is not an exponent: only treat it as such if digits follow.
    let (num, unit) = t.split_at(split);
    let unit_ns: f64 = match unit.trim() {
        // A bare number has no unit to read it by (`t=100`: 100 s or
        // 100 ms?); refused everywhere, as `--budget 5` is. Zero is zero
        // in every unit.
        "" if num.parse::<f64>() == Ok(0.0) => 1.0,
        "" => {
            return Err(Error::invalid(
                "duration",
                format!("`{s}` has no unit; write it with one (ns, us, ms, s, min or h), such as `{s}ms` or `{s}s`"),
            ))
        }
        "s" | "sec" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "min" | "m" => 60e9,
        "h" => 3600e9,
        other => {
            return Err(Error::invalid(
                "duration",
                format!("`{s}`: unknown unit `{other}` (use ns, us, ms, s, min or h)"),
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| Error::invalid("duration", format!("`{s}` is not a number with a unit")))?;
    if !v.is_finite() || v < 0.0 {
        return Err(Error::invalid(
            "duration",
            format!("`{s}` must be a non-negative duration"),
        ));
    }
    let ns = v * unit_ns;
    if ns > MAX_DURATION_NS as f64 {
        return Err(Error::invalid(
            "duration",
            format!("`{s}` is longer than the maximum, {MAX_DURATION_NS} ns (about 317 years)"),
        ));
    }
    Ok(ns.round() as u64)
}

/// Parse a size (`B`, `KiB`, `MiB`, `GiB`, `TiB`, `KB`, `MB`, `GB`, `TB`, `k`; bare = bytes).
pub fn parse_bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => {
            return Err(Error::invalid(
                "size",
                format!(
                    "`{s}`: unknown unit `{other}` (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
                ),
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| Error::invalid("size", format!("`{s}` is not a number with a unit")))?;
    let b = v * mult;
    if !b.is_finite() || b > 1.8e19 {
        return Err(Error::invalid("size", format!("`{s}` is too large")));
    }
    Ok(b.round() as u64)
}

/// Format ns as a short human duration (`812 µs`, `3.20 s`).
pub fn format_duration_ns(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0} ns")
    } else if a < 1e6 {
        format!("{:.3} µs", ns / 1e3).replace(".000 ", " ")
    } else if a < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else if a < 60e9 * 10.0 {
        format!("{:.3} s", ns / 1e9)
    } else if a < 3600e9 * 10.0 {
        format!("{:.1} min", ns / 60e9)
    } else {
        format!("{:.1} h", ns / 3600e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("5ms").unwrap(), 5_000_000);
        assert_eq!(parse_duration_ns("1.5s").unwrap(), 1_500_000_000);
        // a bare number is refused (no unit to read it by), except zero
        for bare in ["1.5", "100", "5"] {
            let e = parse_duration_ns(bare).unwrap_err().to_string();
            assert!(e.contains("has no unit"), "{e}");
        }
        assert_eq!(parse_duration_ns("0").unwrap(), 0);
        assert_eq!(parse_duration_ns("1e19ns").unwrap(), MAX_DURATION_NS);
        let e = parse_duration_ns("1.1e19ns").unwrap_err().to_string();
        assert!(e.contains("maximum"), "{e}");
        assert_eq!(parse_duration_ns("250us").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("2 min").unwrap(), 120_000_000_000);
        assert_eq!(parse_duration_ns("100ns").unwrap(), 100);
        assert!(parse_duration_ns("5 parsecs")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(parse_duration_ns("-1s").is_err());
        assert!(parse_duration_ns("ms").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64KiB").unwrap(), 65536);
        assert_eq!(parse_bytes("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_bytes("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_bytes("512").unwrap(), 512);
        assert!(parse_bytes("3 furlongs").is_err());
    }
}
