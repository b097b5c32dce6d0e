//! Candidate BG request sizes: `64KiB..4MiB` (log-spaced, 30 by default,
//! `64KiB..4MiB/10` for 10), or a list `64KiB,256KiB,1MiB`.

use crate::error::{Error, Result};
use crate::units::parse_bytes;

/// Sizes tried when none are given: 30 log-spaced from 64 KiB to 4 MiB,
/// the range of Practical Scrubbing §V-C.
pub fn default_sizes() -> Vec<u64> {
    log_spaced(64 << 10, 4 << 20, 30)
}

/// `n` sizes from `lo` to `hi`, log-spaced, rounded to 4 KiB multiples
/// above 4 KiB (disks work in sectors and pages), deduplicated.
pub fn log_spaced(lo: u64, hi: u64, n: usize) -> Vec<u64> {
    if n <= 1 || lo >= hi {
        return vec![lo];
    }
    let ratio = (hi as f64 / lo as f64).powf(1.0 / (n - 1) as f64);
    let mut out: Vec<u64> = (0..n)
        .map(|i| {
            if i == 0 {
                return lo;
            }
            if i == n - 1 {
                return hi;
            }
            let x = lo as f64 * ratio.powi(i as i32);
            if x > 4096.0 {
                ((x / 4096.0).round() as u64) * 4096
            } else {
                x.round() as u64
            }
        })
        .collect();
    out.dedup();
    out
}

/// Most sizes a range may ask for (`LO..HI/N`): each is a tuning run of
/// its own, and a larger N is a typo (`/1000000000` used to abort).
pub const MAX_SIZES: usize = 1000;

/// Parse `LO..HI[/N]` or `A,B,C` (N at most [`MAX_SIZES`]).
pub fn parse_sizes(s: &str) -> Result<Vec<u64>> {
    let bad = |m: String| {
        Error::invalid(
            "sizes",
            format!("`{s}`: {m}; give a range such as `64KiB..4MiB` (or `64KiB..4MiB/10`) or a list such as `64KiB,1MiB`"),
        )
    };
    let size = |t: &str| -> Result<u64> {
        match parse_bytes(t) {
            Ok(0) => Err(bad(format!("`{t}` must be at least 1 byte"))),
            Ok(b) => Ok(b),
            Err(e) => Err(bad(e.to_string())),
        }
    };
    if let Some((lo, rest)) = s.split_once("..") {
        let (hi, n) = match rest.split_once('/') {
            Some((hi, n)) => (
                hi,
                n.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| bad(format!("`{n}` is not a count of sizes")))
                    .and_then(|n| {
                        if n > MAX_SIZES {
                            Err(bad(format!(
                                "{n} sizes are more than the {MAX_SIZES} allowed"
                            )))
                        } else {
                            Ok(n)
                        }
                    })?,
            ),
            None => (rest, 30),
        };
        let (lo, hi) = (size(lo)?, size(hi)?);
        if lo > hi {
            return Err(bad("the range is backwards".into()));
        }
        return Ok(log_spaced(lo, hi, n));
    }
    let mut v = s
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(size)
        .collect::<Result<Vec<u64>>>()?;
    if v.is_empty() {
        return Err(bad("no sizes".into()));
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_sizes_is_bounded() {
        assert!(parse_sizes("4KiB..1MiB/1000").is_ok());
        for n in [
            "1001",
            "1000000000",
            "18446744073709551615",
            "99999999999999999999999",
        ] {
            let e = parse_sizes(&format!("4KiB..1MiB/{n}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("sizes"), "{e}");
        }
    }

    #[test]
    fn default_is_30_sizes_from_64k_to_4m() {
        let d = default_sizes();
        assert_eq!(d.len(), 30);
        assert_eq!(d[0], 65536);
        assert_eq!(d[29], 4 << 20);
        assert!(d.windows(2).all(|w| w[0] < w[1]));
        assert!(d.iter().all(|s| s % 4096 == 0));
    }

    #[test]
    fn ranges_and_lists() {
        assert_eq!(parse_sizes("64KiB..4MiB").unwrap(), default_sizes());
        assert_eq!(
            parse_sizes("64KiB..4MiB/3").unwrap(),
            vec![65536, 524288, 4 << 20]
        );
        assert_eq!(parse_sizes("1MiB, 64KiB").unwrap(), vec![65536, 1 << 20]);
        assert_eq!(parse_sizes("1MiB..1MiB").unwrap(), vec![1 << 20]);
        for bad in [
            "",
            "4MiB..64KiB",
            "64KiB..4MiB/0",
            "64KiB..4MiB/x",
            "0",
            "1 parsec",
        ] {
            let e = parse_sizes(bad).unwrap_err().to_string();
            assert!(e.contains("such as `64KiB..4MiB`"), "`{bad}`: {e}");
        }
    }
}
