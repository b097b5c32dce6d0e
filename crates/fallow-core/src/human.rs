//! Numbers for people: durations with a unit and three significant digits,
//! counts with thousands separators, fractions as percentages. Shared by the
//! terminal summary, the findings and the HTML report so they agree.

/// `v` rounded to `digits` significant digits.
pub fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let p = digits - 1 - v.abs().log10().floor() as i32;
    let m = 10f64.powi(p);
    (v * m).round() / m
}

/// A number with three significant digits and no needless exponent.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let r = round_sig(v, 3);
    let a = r.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        count(r.round() as u64)
    } else if a >= 100.0 {
        format!("{r:.0}")
    } else if a >= 10.0 {
        format!("{r:.1}")
    } else if a >= 1.0 {
        format!("{r:.2}")
    } else if a >= 0.001 {
        // 0.0123 -> "0.0123"
        let decimals = (2 - a.log10().floor() as i32).max(0) as usize;
        format!("{r:.decimals$}")
    } else {
        format!("{r:.2e}")
    }
}

/// A duration given in seconds: `812 µs`, `12.3 ms`, `4.50 s`, `21.6 min`.
pub fn secs(s: f64) -> String {
    if !s.is_finite() {
        return "–".into();
    }
    let r = round_sig(s, 3);
    let a = r.abs();
    let (v, unit) = if a == 0.0 {
        return "0\u{a0}s".into();
    } else if a < 1e-6 {
        (r * 1e9, "ns")
    } else if a < 1e-3 {
        (r * 1e6, "µs")
    } else if a < 1.0 {
        (r * 1e3, "ms")
    } else if a < 600.0 {
        (r, "s")
    } else if a < 3.0 * 3600.0 {
        (r / 60.0, "min")
    } else if a < 3.0 * 86400.0 {
        (r / 3600.0, "h")
    } else {
        (r / 86400.0, "days")
    };
    format!("{}\u{a0}{unit}", num(v))
}

/// A count and its noun, singular for one: `1 write`, `24,708 writes`.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n), if n == 1 { one } else { many })
}

/// A count with thousands separators: `24,708`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A fraction in [0, 1] as a percentage with sensible precision: `87 %`, `1.7 %`, `0.03 %`.
pub fn pct(f: f64) -> String {
    if !f.is_finite() {
        return "–".into();
    }
    let p = f * 100.0;
    let a = p.abs();
    if a == 0.0 {
        "0\u{a0}%".into()
    } else if (99.5..100.0).contains(&a) {
        // do not round 99.7 % up to a misleading 100 %
        format!("{:.1}\u{a0}%", (p * 10.0).floor() / 10.0)
    } else if a >= 10.0 {
        format!("{p:.0}\u{a0}%")
    } else if a >= 1.0 {
        format!("{p:.1}\u{a0}%")
    } else {
        format!("{}\u{a0}%", num(p))
    }
}

/// A correlation coefficient: `-0.098`.
pub fn corr(r: f64) -> String {
    if !r.is_finite() {
        return "–".into();
    }
    format!("{r:.3}")
}

/// `1 request`, `38 requests`.
pub fn requests(n: u64) -> String {
    format!("{} request{}", count(n), if n == 1 { "" } else { "s" })
}

/// A probability: `0.41`.
pub fn prob(p: f64) -> String {
    if !p.is_finite() {
        return "–".into();
    }
    format!("{p:.2}")
}

/// A p-value the way papers print it: `p < 0.001` or `p = 0.004`.
pub fn p_value(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else {
        format!("p = {p:.3}")
    }
}

/// Bytes with a binary unit: `64 KiB`, `1.5 GiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b}\u{a0}B")
    } else {
        format!("{}\u{a0}{}", num(v), UNITS[u])
    }
}

/// `+21.8 %`, `−0.3 %`, `0 %`.
pub fn signed_pct(f: f64) -> String {
    if f > 0.0 {
        format!("+{}", pct(f))
    } else {
        pct(f)
    }
}

/// A network bandwidth in bits per second: `1 Gbit/s`.
pub fn bandwidth(bytes_per_s: f64) -> String {
    let bits = bytes_per_s * 8.0;
    if bits >= 1e9 {
        format!("{}\u{a0}Gbit/s", num(bits / 1e9))
    } else {
        format!("{}\u{a0}Mbit/s", num(bits / 1e6))
    }
}

/// Joules with a unit: `952 J`, `1.54 MJ`.
pub fn joules(j: f64) -> String {
    let a = j.abs();
    if a >= 1e6 {
        format!("{}\u{a0}MJ", num(j / 1e6))
    } else if a >= 1e3 {
        format!("{}\u{a0}kJ", num(j / 1e3))
    } else {
        format!("{}\u{a0}J", num(j))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> String {
        super::secs(s).replace('\u{a0}', " ")
    }
    fn pct(f: f64) -> String {
        super::pct(f).replace('\u{a0}', " ")
    }
    fn bytes(b: u64) -> String {
        super::bytes(b).replace('\u{a0}', " ")
    }

    #[test]
    fn durations() {
        assert_eq!(secs(0.0123), "12.3 ms");
        assert_eq!(secs(0.70), "700 ms");
        assert_eq!(secs(1.28), "1.28 s");
        assert_eq!(secs(0.0009996), "1.00 ms");
        assert_eq!(secs(241.7), "242 s");
        assert_eq!(secs(1770.0), "29.5 min");
        assert_eq!(secs(7.0 * 86400.0), "7.00 days");
        assert_eq!(secs(850e-9), "850 ns");
        assert_eq!(secs(0.0), "0 s");
    }

    #[test]
    fn numbers() {
        assert_eq!(count(24708), "24,708");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(num(2.3149), "2.31");
        assert_eq!(num(0.0123), "0.0123");
        assert_eq!(num(1.28), "1.28");
        assert_eq!(pct(0.87), "87 %");
        assert_eq!(pct(0.017), "1.7 %");
        assert_eq!(pct(0.9996), "99.9 %");
        assert_eq!(bytes(65536), "64.0 KiB");
        assert_eq!(p_value(0.0001), "p < 0.001");
    }
}
