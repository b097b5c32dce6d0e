//! Injected media errors: byte ranges whose reads fail with `EIO`.
//!
//! Written as sector lists (`1000-1007,5000`, 512-byte sectors, ranges
//! inclusive) or byte lists (`4096-8191`). A read fails when it overlaps a
//! range by at least one byte; writes succeed, as a real disk remaps a bad
//! sector on write. Reads that only touch neighbouring bytes succeed, so a
//! scrubber's bad-range report can be checked to the sector.

use crate::error::{Error, Result};
use std::fmt;

/// Bytes per sector in `--fail` lists (the Linux block layer's unit).
pub const SECTOR_BYTES: u64 = 512;

/// A sorted set of failing byte ranges, each `[start, end)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailRanges {
    ranges: Vec<(u64, u64)>,
}

impl FailRanges {
    /// No failing bytes.
    pub fn none() -> Self {
        Self::default()
    }

    /// Parse a sector list such as `1000-1007,5000` (512-byte sectors, inclusive).
    pub fn parse_sectors(spec: &str) -> Result<Self> {
        Self::parse(spec, SECTOR_BYTES, "--fail")
    }

    /// Parse a byte list such as `4096-8191,10000` (inclusive).
    pub fn parse_bytes(spec: &str) -> Result<Self> {
        Self::parse(spec, 1, "--fail-bytes")
    }

    fn parse(spec: &str, unit: u64, what: &'static str) -> Result<Self> {
        let bad = |message: String| Error::InvalidParameter { what, message };
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| bad(format!("`{}` is not a non-negative integer", s.trim())))
        };
        let mut ranges = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => {
                    let v = num(item)?;
                    (v, v)
                }
            };
            if hi < lo {
                return Err(bad(format!("range `{item}` ends before it starts")));
            }
            let start = lo
                .checked_mul(unit)
                .ok_or_else(|| bad(format!("`{item}` is too large")))?;
            let end = hi
                .checked_add(1)
                .and_then(|h| h.checked_mul(unit))
                .ok_or_else(|| bad(format!("`{item}` is too large")))?;
            ranges.push((start, end));
        }
        if ranges.is_empty() {
            return Err(bad(format!("`{spec}` names no sector or byte")));
        }
        Ok(Self::from_ranges(ranges))
    }

    /// From `[start, end)` byte ranges in any order; overlaps are merged.
    pub fn from_ranges(mut ranges: Vec<(u64, u64)>) -> Self {
        ranges.retain(|&(s, e)| e > s);
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (s, e) in ranges {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        FailRanges { ranges: merged }
    }

    /// Both sets together.
    pub fn union(&self, other: &FailRanges) -> FailRanges {
        Self::from_ranges(self.ranges.iter().chain(&other.ranges).copied().collect())
    }

    /// The merged `[start, end)` byte ranges, sorted.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Whether no byte fails.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether `[offset_bytes, offset_bytes + len_bytes)` touches a failing byte.
    pub fn overlaps(&self, offset_bytes: u64, len_bytes: u64) -> bool {
        if len_bytes == 0 {
            return false;
        }
        let end = offset_bytes.saturating_add(len_bytes);
        // the first range that ends after the request starts
        let i = self.ranges.partition_point(|&(_, e)| e <= offset_bytes);
        self.ranges.get(i).is_some_and(|&(s, _)| s < end)
    }
}

impl fmt::Display for FailRanges {
    /// Byte ranges, inclusive, e.g. `512000-516095,2560000-2560511`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (s, e)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{s}-{}", e - 1)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sector_lists_become_byte_ranges() {
        let f = FailRanges::parse_sectors("1000-1007, 5000").unwrap();
        assert_eq!(f.ranges(), &[(512_000, 516_096), (2_560_000, 2_560_512)]);
        assert_eq!(f.to_string(), "512000-516095,2560000-2560511");
        let b = FailRanges::parse_bytes("10-19,15-30,40").unwrap();
        assert_eq!(b.ranges(), &[(10, 31), (40, 41)]);
    }

    #[test]
    fn overlap_is_exact_to_the_byte() {
        let f = FailRanges::parse_sectors("8-9").unwrap(); // bytes 4096..5120
        assert!(!f.overlaps(0, 4096)); // ends just before
        assert!(f.overlaps(0, 4097)); // one byte in
        assert!(f.overlaps(5119, 1)); // last failing byte
        assert!(!f.overlaps(5120, 4096)); // starts just after
        assert!(f.overlaps(0, 1 << 20)); // covers it
        assert!(!f.overlaps(4096, 0)); // empty request
        assert!(!FailRanges::none().overlaps(0, u64::MAX));
    }

    #[test]
    fn bad_lists_are_refused_with_the_item() {
        for (spec, needle) in [
            ("", "names no"),
            ("5-3", "`5-3` ends before"),
            ("x", "`x`"),
            ("1-", "``"),
            ("99999999999999999999", "not a non-negative"),
        ] {
            let err = FailRanges::parse_sectors(spec).unwrap_err().to_string();
            assert!(err.contains(needle), "{spec}: {err}");
            assert!(err.starts_with("--fail"), "{err}");
        }
        let err = FailRanges::parse_sectors("36028797018963968").unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
    }
}
