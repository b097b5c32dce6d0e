//! The order in which a scrub visits the target: sequential, or staggered
//! (Oprea & Juels, as Practical Scrubbing §II describes and §IV-A
//! measures): the target is cut into `R` regions and each region into
//! segments of one request; the scrub visits segment 0 of every region,
//! then segment 1 of every region, and so on, so latent sector errors,
//! which come in bursts (§I), are found early in a pass. With 128 regions
//! or more it scrubbed as fast as sequential order on their disks (§IV-A,
//! Fig. 5b).
//!
//! A visit index `k` (0 ≤ k < segments) maps to a segment in closed form,
//! so a checkpoint needs to store only the next `k`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Visiting order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Order {
    /// Segment 0, 1, 2, … to the end.
    Sequential,
    /// Segment `i` of each of `regions` regions before segment `i + 1`.
    Staggered {
        /// Number of regions (≥ 1; more regions than segments is the
        /// same as one segment per region).
        regions: u64,
    },
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Order::Sequential => f.write_str("sequential"),
            Order::Staggered { regions } => write!(f, "staggered, {regions} regions"),
        }
    }
}

/// A target cut into segments of one request, and the order to visit them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Target size, bytes.
    pub target_bytes: u64,
    /// Segment (request) size, bytes; the last segment may be shorter.
    pub segment_bytes: u64,
    /// Number of segments.
    pub segments: u64,
    /// The visiting order.
    pub order: Order,
}

impl Plan {
    /// Cut `target_bytes` into segments of `segment_bytes` (> 0).
    pub fn new(target_bytes: u64, segment_bytes: u64, order: Order) -> Plan {
        assert!(segment_bytes > 0, "segment size must be positive");
        Plan {
            target_bytes,
            segment_bytes,
            segments: target_bytes.div_ceil(segment_bytes),
            order,
        }
    }

    /// The segment visited `k`-th (k < segments).
    pub fn segment_of_visit(&self, k: u64) -> u64 {
        debug_assert!(k < self.segments);
        match self.order {
            Order::Sequential => k,
            Order::Staggered { regions } => {
                // regions of q or q+1 segments: the first `rem` have q+1
                let r_count = regions.clamp(1, self.segments.max(1));
                let q = self.segments / r_count;
                let rem = self.segments % r_count;
                let (round, region) = if k < q * r_count {
                    (k / r_count, k % r_count)
                } else {
                    // the last, partial round: only the longer regions
                    (q, k - q * r_count)
                };
                region * q + region.min(rem) + round
            }
        }
    }

    /// The visit index of segment `s` (s < segments): the inverse of
    /// [`Plan::segment_of_visit`], used to check a checkpoint.
    pub fn visit_of_segment(&self, s: u64) -> u64 {
        debug_assert!(s < self.segments);
        match self.order {
            Order::Sequential => s,
            Order::Staggered { regions } => {
                let (r_count, q, rem) = self.regions(regions);
                // the first `rem` regions have q+1 segments, the others q
                let (region, round) = if s < rem * (q + 1) {
                    (s / (q + 1), s % (q + 1))
                } else {
                    let t = s - rem * (q + 1);
                    (rem + t / q, t % q)
                };
                round * r_count + region
            }
        }
    }

    /// The largest visit index of segments `first..=last` (≤ segments - 1),
    /// in constant time: a range is scrubbed when this is below the
    /// checkpoint's next visit.
    pub fn max_visit_in(&self, first: u64, last: u64) -> u64 {
        debug_assert!(first <= last && last < self.segments);
        match self.order {
            Order::Sequential => last,
            Order::Staggered { regions } => {
                let (r_count, q, rem) = self.regions(regions);
                let region_of = |s: u64| {
                    if s < rem * (q + 1) {
                        s / (q + 1)
                    } else {
                        rem + (s - rem * (q + 1)) / q
                    }
                };
                let (ra, rb) = (region_of(first), region_of(last));
                let mut best = self.visit_of_segment(last);
                if rb > ra {
                    // regions ra..rb-1 are covered to their ends; a region's
                    // last segment is visited in round q (the longer first
                    // `rem`) or q - 1, so the highest-numbered longer one wins
                    let end = if ra < rem {
                        q * r_count + (rb - 1).min(rem - 1)
                    } else {
                        (q - 1) * r_count + (rb - 1)
                    };
                    best = best.max(end);
                }
                best
            }
        }
    }

    /// Bytes of the segments of visits `0..next_visit`.
    pub fn visited_bytes(&self, next_visit: u64) -> u64 {
        debug_assert!(next_visit <= self.segments);
        if next_visit == 0 {
            return 0;
        }
        let full = next_visit * self.segment_bytes;
        let last = self.segments - 1;
        let short = self.segment_bytes - self.segment_range(last).1;
        if self.visit_of_segment(last) < next_visit {
            full - short
        } else {
            full
        }
    }

    /// Regions actually used, segments per region (q; the first `rem` have q+1).
    fn regions(&self, regions: u64) -> (u64, u64, u64) {
        let r_count = regions.clamp(1, self.segments.max(1));
        (r_count, self.segments / r_count, self.segments % r_count)
    }

    /// Byte range `[offset, offset + len)` of segment `s`.
    pub fn segment_range(&self, s: u64) -> (u64, u64) {
        let off = s * self.segment_bytes;
        (off, self.segment_bytes.min(self.target_bytes - off))
    }

    /// Visits `k`, `k + 1`, … that are contiguous on the target, starting
    /// at `k`, at most `max`: how many, and the byte range they cover.
    /// Sequential visits are all contiguous, so a policy's larger request
    /// can cover several segments in one read; staggered visits jump, one
    /// per request.
    pub fn contiguous_from(&self, k: u64, max: u64) -> (u64, u64, u64) {
        let first = self.segment_of_visit(k);
        let n = match self.order {
            Order::Sequential => max.clamp(1, self.segments - k),
            Order::Staggered { .. } => 1,
        };
        let (off, _) = self.segment_range(first);
        let (last_off, last_len) = self.segment_range(first + n - 1);
        (n, off, last_off + last_len - off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visits(p: &Plan) -> Vec<u64> {
        (0..p.segments).map(|k| p.segment_of_visit(k)).collect()
    }

    #[test]
    fn staggered_by_hand() {
        // 10 segments, 3 regions of 4, 3, 3: [0..4) [4..7) [7..10)
        let p = Plan::new(10 * 4096, 4096, Order::Staggered { regions: 3 });
        assert_eq!(visits(&p), vec![0, 4, 7, 1, 5, 8, 2, 6, 9, 3]);
        // one region is sequential
        let p = Plan::new(5, 1, Order::Staggered { regions: 1 });
        assert_eq!(visits(&p), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn staggered_visits_every_segment_exactly_once() {
        for segments in [1u64, 2, 3, 7, 64, 100, 1000, 1023] {
            for regions in [1u64, 2, 3, 5, 8, 16, 128, 999, 5000] {
                let p = Plan::new(segments * 512, 512, Order::Staggered { regions });
                let mut seen = vec![0u32; segments as usize];
                for k in 0..segments {
                    seen[p.segment_of_visit(k) as usize] += 1;
                }
                assert!(
                    seen.iter().all(|&c| c == 1),
                    "segments {segments} regions {regions}: {seen:?}"
                );
                // the first visits are the regions' first segments, in order
                let r = regions.min(segments);
                let firsts: Vec<u64> = (0..r).map(|k| p.segment_of_visit(k)).collect();
                assert!(firsts.windows(2).all(|w| w[0] < w[1]));
                assert_eq!(firsts[0], 0);
            }
        }
    }

    #[test]
    fn inverse_and_range_maxima_agree_with_brute_force() {
        for segments in [1u64, 2, 3, 7, 10, 64, 100] {
            for order in [
                Order::Sequential,
                Order::Staggered { regions: 1 },
                Order::Staggered { regions: 3 },
                Order::Staggered { regions: 7 },
                Order::Staggered { regions: 128 },
            ] {
                // a short last segment: 100 bytes of 512
                let p = Plan::new(segments * 512 - 412, 512, order);
                for k in 0..segments {
                    assert_eq!(p.visit_of_segment(p.segment_of_visit(k)), k);
                }
                for a in 0..segments {
                    for b in a..segments {
                        let brute = (a..=b).map(|s| p.visit_of_segment(s)).max().unwrap();
                        assert_eq!(p.max_visit_in(a, b), brute, "{order} {segments} {a}..={b}");
                    }
                }
                let mut bytes = 0;
                for k in 0..=segments {
                    assert_eq!(p.visited_bytes(k), bytes, "{order} {segments} {k}");
                    if k < segments {
                        bytes += p.segment_range(p.segment_of_visit(k)).1;
                    }
                }
                assert_eq!(bytes, p.target_bytes);
            }
        }
    }

    #[test]
    fn segment_ranges_cover_the_target_with_a_short_tail() {
        let p = Plan::new(10_000, 4096, Order::Sequential);
        assert_eq!(p.segments, 3);
        assert_eq!(p.segment_range(0), (0, 4096));
        assert_eq!(p.segment_range(2), (8192, 10_000 - 8192));
        assert_eq!(Plan::new(0, 4096, Order::Sequential).segments, 0);
    }

    #[test]
    fn contiguous_runs() {
        let p = Plan::new(10_000, 4096, Order::Sequential);
        assert_eq!(p.contiguous_from(0, 2), (2, 0, 8192));
        assert_eq!(p.contiguous_from(1, 10), (2, 4096, 10_000 - 4096));
        assert_eq!(p.contiguous_from(0, 0), (1, 0, 4096));
        let s = Plan::new(10 * 4096, 4096, Order::Staggered { regions: 3 });
        assert_eq!(s.contiguous_from(1, 5), (1, 4 * 4096, 4096));
    }
}
