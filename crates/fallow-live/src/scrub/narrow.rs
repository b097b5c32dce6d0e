//! Verifying a byte range and, when it fails, narrowing the failure down
//! to the sectors that cannot be read.
//!
//! A failed request is retried (a transient error is not a latent sector
//! error), then split in halves at sector boundaries, recursively, down to
//! one logical sector; what still fails after its retries is a bad range.
//! A short read (the device returned the first `n` bytes, then stopped) is
//! progress: the rest is verified from where it stopped. The cost is
//! about `2 · log2(request / sector)` reads per bad sector, paid only where
//! errors are.

use std::io;

/// The read path, as a trait so tests can inject faults.
pub trait Verifier {
    /// Verify `len` bytes at `offset` (multiples of the granule, except a
    /// tail that ends the target). `Ok(n)`: the first `n` bytes are good
    /// (`n < len` is a short read); `Err`: the request failed.
    fn check(&mut self, offset: u64, len: u64) -> io::Result<u64>;
}

/// An unreadable range found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRange {
    /// First unreadable byte.
    pub first_byte: u64,
    /// Last unreadable byte.
    pub last_byte: u64,
    /// The error the last attempt returned.
    pub error: String,
}

/// What verifying one range took and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    /// Requests issued (first tries, retries and narrowing).
    pub requests: u64,
    /// Of which retries of a failed request.
    pub retries: u64,
    /// Unreadable ranges, in order, each at most adjacent to the next.
    pub bad: Vec<BadRange>,
}

/// Verify `[offset, offset + len)`; `granule` is the logical sector size
/// (the smallest unit a read can fail in), `retries` the extra attempts a
/// failing sector-sized (or first, whole) request gets.
pub fn verify_range(
    v: &mut dyn Verifier,
    offset: u64,
    len: u64,
    granule: u64,
    retries: u32,
) -> Verified {
    let mut out = Verified::default();
    scan(v, offset, len, granule.max(1), retries, true, &mut out);
    out
}

fn attempt(
    v: &mut dyn Verifier,
    off: u64,
    len: u64,
    tries: u32,
    out: &mut Verified,
) -> io::Result<u64> {
    let mut last = None;
    for i in 0..=tries {
        out.requests += 1;
        if i > 0 {
            out.retries += 1;
        }
        match v.check(off, len) {
            Ok(0) if len > 0 => {
                last = Some(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "no data where the target should have some",
                ))
            }
            Ok(n) => return Ok(n.min(len)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("at least one attempt"))
}

fn scan(
    v: &mut dyn Verifier,
    mut off: u64,
    mut len: u64,
    granule: u64,
    retries: u32,
    first: bool,
    out: &mut Verified,
) {
    // Retries go to the whole first request and to single sectors; the
    // halves in between get one try each, or narrowing would cost
    // (retries + 1)× more for nothing.
    let mut tries = if first || len <= granule { retries } else { 0 };
    while len > 0 {
        match attempt(v, off, len, tries, out) {
            Ok(n) if n == len => return,
            Ok(n) if n / granule > 0 => {
                // a short read: good up to the last whole sector it returned
                let good = n / granule * granule;
                off += good;
                len -= good;
                tries = if len <= granule { retries } else { 0 };
            }
            Ok(_) | Err(_) if len > granule => {
                let half = (len / 2).div_ceil(granule) * granule;
                let half = half.min(len - 1).max(granule.min(len));
                scan(v, off, half, granule, retries, false, out);
                scan(v, off + half, len - half, granule, retries, false, out);
                return;
            }
            Ok(_) => {
                // a sector that returns nothing at all, after its retries
                push_bad(out, off, len, "short read".into());
                return;
            }
            Err(e) => {
                push_bad(out, off, len, e.to_string());
                return;
            }
        }
    }
}

fn push_bad(out: &mut Verified, off: u64, len: u64, error: String) {
    let last = off + len - 1;
    if let Some(prev) = out.bad.last_mut() {
        if prev.last_byte + 1 == off {
            prev.last_byte = last;
            return;
        }
    }
    out.bad.push(BadRange {
        first_byte: off,
        last_byte: last,
        error,
    });
}

/// A verifier with injected faults, for tests of narrowing and of the
/// scrubber: bad sectors that always fail, transient errors that fail a
/// given number of times, and short reads.
#[cfg(test)]
pub(crate) mod faulty {
    use super::*;
    use std::collections::HashMap;

    pub(crate) struct Faulty {
        pub size: u64,
        pub sector: u64,
        /// Byte ranges `[first, last]` that always fail.
        pub bad: Vec<[u64; 2]>,
        /// Offset → failures left, for any request starting there.
        pub transient: HashMap<u64, u32>,
        /// Return a short read (stop before a bad sector) rather than an error.
        pub short_reads: bool,
        pub calls: Vec<(u64, u64)>,
    }

    impl Faulty {
        pub fn new(size: u64, sector: u64) -> Faulty {
            Faulty {
                size,
                sector,
                bad: vec![],
                transient: HashMap::new(),
                short_reads: false,
                calls: vec![],
            }
        }
    }

    impl Verifier for Faulty {
        fn check(&mut self, offset: u64, len: u64) -> io::Result<u64> {
            self.calls.push((offset, len));
            assert!(offset % self.sector == 0, "unaligned offset {offset}");
            assert!(
                len % self.sector == 0 || offset + len == self.size,
                "unaligned length {len} at {offset}"
            );
            if let Some(n) = self.transient.get_mut(&offset) {
                if *n > 0 {
                    *n -= 1;
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "transient"));
                }
            }
            let end = offset + len;
            let first_bad = self
                .bad
                .iter()
                .filter(|r| r[0] < end && r[1] >= offset)
                .map(|r| r[0].max(offset))
                .min();
            match first_bad {
                None => Ok(len),
                Some(b) if self.short_reads && b > offset => {
                    Ok(b / self.sector * self.sector - offset)
                }
                Some(_) => Err(io::Error::from_raw_os_error(5)), // EIO
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::faulty::Faulty;
    use super::*;

    fn ranges(v: &Verified) -> Vec<[u64; 2]> {
        v.bad.iter().map(|b| [b.first_byte, b.last_byte]).collect()
    }

    #[test]
    fn a_clean_range_is_one_request() {
        let mut f = Faulty::new(1 << 20, 512);
        let r = verify_range(&mut f, 0, 1 << 20, 512, 3);
        assert_eq!(
            r,
            Verified {
                requests: 1,
                ..Verified::default()
            }
        );
    }

    #[test]
    fn one_bad_sector_is_found_exactly() {
        // sector 1000 of a 1 MiB request (sectors 0..2048)
        let mut f = Faulty::new(1 << 20, 512);
        f.bad = vec![[1000 * 512, 1001 * 512 - 1]];
        let r = verify_range(&mut f, 0, 1 << 20, 512, 2);
        assert_eq!(ranges(&r), vec![[512_000, 512_511]]);
        assert!(r.bad[0].error.contains("error 5"), "{:?}", r.bad);
        // the first request and the bad sector get 2 retries each; 11 levels
        // of halving cost 2 reads each: 3 + 2·11 + 2 retries
        assert_eq!(r.retries, 4);
        assert_eq!(r.requests, 3 + 2 * 11 + 2);
    }

    #[test]
    fn adjacent_bad_sectors_merge_and_separate_ones_do_not() {
        let mut f = Faulty::new(1 << 20, 4096);
        f.bad = vec![
            [8192, 3 * 4096 - 1],
            [3 * 4096, 4 * 4096 - 1],
            [100 * 4096, 100 * 4096 + 10],
        ];
        let r = verify_range(&mut f, 0, 1 << 20, 4096, 0);
        assert_eq!(
            ranges(&r),
            vec![[8192, 4 * 4096 - 1], [100 * 4096, 101 * 4096 - 1]]
        );
    }

    #[test]
    fn transient_errors_are_retried_not_reported() {
        let mut f = Faulty::new(1 << 20, 512);
        f.transient.insert(0, 2);
        let r = verify_range(&mut f, 0, 1 << 20, 512, 2);
        assert!(r.bad.is_empty());
        assert_eq!((r.requests, r.retries), (3, 2));
        // with fewer retries than failures, narrowing takes over and the
        // halves (which start elsewhere or succeed on a later try) are good
        let mut f = Faulty::new(1 << 20, 512);
        f.transient.insert(0, 2);
        let r = verify_range(&mut f, 0, 1 << 20, 512, 0);
        assert!(r.bad.is_empty(), "{:?}", r.bad);
    }

    #[test]
    fn short_reads_are_progress() {
        let mut f = Faulty::new(1 << 20, 512);
        f.short_reads = true;
        f.bad = vec![[600 * 512, 601 * 512 - 1]];
        let r = verify_range(&mut f, 0, 1 << 20, 512, 1);
        assert_eq!(ranges(&r), vec![[600 * 512, 601 * 512 - 1]]);
        // the first call stopped at the bad sector; the next started there
        assert_eq!(f.calls[0], (0, 1 << 20));
        assert_eq!(f.calls[1].0, 600 * 512);
    }

    #[test]
    fn an_unaligned_tail_is_verified_whole() {
        let size = 3 * 4096 + 100;
        let mut f = Faulty::new(size, 4096);
        f.bad = vec![[3 * 4096 + 50, 3 * 4096 + 50]];
        let r = verify_range(&mut f, 0, size, 4096, 0);
        assert_eq!(ranges(&r), vec![[3 * 4096, size - 1]]);
    }

    #[test]
    fn every_bad_sector_is_found_in_a_random_pattern() {
        // independent check: the bad ranges equal the bad sectors, merged
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        for _ in 0..50 {
            let sectors = 256u64;
            let bad: Vec<u64> = (0..sectors).filter(|_| rng.random_bool(0.05)).collect();
            let mut f = Faulty::new(sectors * 512, 512);
            f.bad = bad.iter().map(|&s| [s * 512, s * 512 + 511]).collect();
            f.short_reads = rng.random_bool(0.5);
            let r = verify_range(&mut f, 0, sectors * 512, 512, 1);
            let mut want: Vec<[u64; 2]> = Vec::new();
            for &s in &bad {
                match want.last_mut() {
                    Some(w) if w[1] + 1 == s * 512 => w[1] = s * 512 + 511,
                    _ => want.push([s * 512, s * 512 + 511]),
                }
            }
            assert_eq!(ranges(&r), want);
        }
    }
}
