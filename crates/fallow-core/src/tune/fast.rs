//! The one-pass sweep: a policy setting evaluated from the idle intervals
//! alone, without simulating (issue: "sweeps that can be computed from the
//! sorted idle intervals in one pass … must be computed that way").
//!
//! Practical Scrubbing §V-B observes that for Waiting the collisions and the
//! idle time used are functions of the threshold over the idle-interval
//! distribution: an interval of length `L > t` is used from `t` on and ends
//! in one collision. With deterministic BG service `s` (constant or
//! size-based, Fig. 4) the rest is arithmetic too: `k = ⌈(L − b)/s⌉`
//! requests start (`b` the offset where BG begins), and the FG arrival finds
//! the last one with `k·s − (L − b)` left to run. The policies whose whole
//! behaviour is such a rule declare it in the registry
//! ([`IntervalRule`]); for them a setting costs a pass over the interval
//! lengths that skips every unused interval in a compare, instead of a
//! simulation with its policy calls and histograms.
//!
//! The sweep is exact, not an approximation of the engine: it also carries
//! each collision's residual into the next busy period and the next idle
//! interval as the engine does (a shift that outlasts a short idle interval
//! carries on), and it reports through the same [`Prepared::figures`], so
//! its figures equal the simulator's to the bit (tested at sampled points,
//! and `fallow tune --no-fast` re-simulates every setting).
//!
//! What it needs: endless BG work (the supply never runs out mid-trace) and
//! deterministic BG service (exponential service draws random numbers the
//! arithmetic cannot reproduce); otherwise tune simulates.

use crate::policy::IntervalRule;
use crate::sim::{BgService, BgWork, Prepared, SimConfig, Totals};
use rand::SeedableRng;

/// The idle intervals of one prepared trace, ready for many evaluations.
#[derive(Debug, Clone)]
pub struct FastSweep<'a> {
    prep: &'a Prepared,
    /// Idle lengths sorted longest first (oracle's rank thresholds, and
    /// how many intervals a threshold leaves).
    sorted_desc_ns: Vec<u64>,
    /// Interval indices in the same order.
    order: Vec<u32>,
    idle_total_ns: u64,
}

impl<'a> FastSweep<'a> {
    /// Set up the sweep for `prep` if `sim` allows it (endless BG work,
    /// deterministic service); `None` otherwise.
    pub fn new(prep: &'a Prepared, sim: &SimConfig) -> Option<FastSweep<'a>> {
        let deterministic = !matches!(sim.bg_service, BgService::Exponential { .. });
        if !deterministic || sim.bg_work != BgWork::Endless {
            return None;
        }
        let gaps = &prep.periods().idle_len_ns;
        let mut order: Vec<u32> = (0..gaps.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| gaps[b as usize].cmp(&gaps[a as usize]));
        let sorted_desc_ns: Vec<u64> = order.iter().map(|&i| gaps[i as usize]).collect();
        Some(FastSweep {
            prep,
            idle_total_ns: sorted_desc_ns.iter().sum(),
            sorted_desc_ns,
            order,
        })
    }

    /// Totals of a run of the policy with `rule` at knob `value` (ns for
    /// the wait rules, percent for the rank rule), BG requests of
    /// `size_bytes`: what [`simulate`](crate::sim::simulate) would count.
    /// With `cap_added_ns`, the walk stops as soon as the FG delay added so
    /// far exceeds it (it only grows) and returns `None`: the setting breaks
    /// every budget whose limit is below the cap.
    pub fn totals(
        &self,
        rule: IntervalRule,
        value: f64,
        size_bytes: u64,
        sim: &SimConfig,
        cap_added_ns: Option<u128>,
    ) -> Option<Totals> {
        // (threshold: used iff L > threshold, offset where BG starts)
        let (threshold_ns, offset) = match rule {
            IntervalRule::WaitThenRun => (value as u64, Offset::Threshold),
            IntervalRule::WholeIfLonger => (value as u64, Offset::Zero),
            IntervalRule::WholeIfAmongLongestPercent => {
                // as Oracle::prepare: the round(x/100·n)-th longest, used if L ≥ it
                let n = self.sorted_desc_ns.len();
                let k = (value / 100.0 * n as f64).round() as usize;
                if k == 0 || n == 0 {
                    return Some(self.unused());
                }
                (self.sorted_desc_ns[k.min(n) - 1] - 1, Offset::Zero)
            }
        };
        // deterministic service: sample_ns draws nothing, so any stream gives the engine's value
        let service_ns = sim
            .bg_service
            .sample_ns(size_bytes, &mut rand_pcg::Pcg64Mcg::seed_from_u64(0));
        self.walk(
            threshold_ns,
            offset,
            service_ns,
            size_bytes,
            sim.switch_penalty_ns,
            cap_added_ns.unwrap_or(u128::MAX),
        )
    }

    /// No BG work at all.
    fn unused(&self) -> Totals {
        Totals {
            idle_total_ns: self.idle_total_ns,
            idle_intervals: self.sorted_desc_ns.len() as u64,
            ..Totals::default()
        }
    }

    /// The engine's loop (`sim::Run::go`) specialised to one rule: intervals
    /// longer than `threshold_ns` get back-to-back requests of `service_ns`
    /// from `offset` until the FG arrival. Only used intervals and the
    /// intervals their collisions shift are visited; the idle time of the
    /// others is in the precomputed total.
    fn walk(
        &self,
        threshold_ns: u64,
        offset: Offset,
        service_ns: u64,
        size_bytes: u64,
        penalty_ns: u64,
        cap_added_ns: u128,
    ) -> Option<Totals> {
        let p = self.prep.periods();
        let mut w = Walk {
            gaps: &p.idle_len_ns,
            reqs: &p.busy_requests,
            threshold_ns,
            off_ns: match offset {
                Offset::Threshold => threshold_ns,
                Offset::Zero => 0,
            },
            service_ns,
            inv_service: 1.0 / service_ns as f64,
            penalty_ns,
            cap_added_ns,
            t: Totals::default(),
            shift: 0,
            idle_lost_ns: 0,
            intervals_lost: 0,
            started: 0,
        };
        let n = w.gaps.len();
        // intervals longer than the threshold: the only ones a walk starts at
        let used = self.sorted_desc_ns.partition_point(|&g| g > threshold_ns);
        if used * 16 < n {
            // few: visit them in index order (a bitset sorts them), each
            // followed by the chain of intervals its collision shifts
            let mut bits = vec![0u64; n.div_ceil(64)];
            for &i in &self.order[..used] {
                bits[i as usize / 64] |= 1 << (i % 64);
            }
            let mut next = 0usize; // first interval not yet visited
            for (wi, &word) in bits.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    let j = wi * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    if j < next {
                        continue; // visited by a chain
                    }
                    let mut k = j;
                    loop {
                        w.visit(k)?;
                        k += 1;
                        if w.shift == 0 || k == n {
                            break;
                        }
                    }
                    next = k;
                }
            }
        } else {
            for j in 0..n {
                if w.shift == 0 && w.gaps[j] <= threshold_ns {
                    continue; // an unused interval
                }
                w.visit(j)?;
            }
        }
        let mut t = w.t;
        // a shift out of the last idle interval delays the last busy period
        if w.shift > 0 {
            if let Some(&r) = w.reqs.get(n) {
                t.added_ns += w.shift as u128 * r as u128;
                t.delayed_requests += r as u64;
            }
        }
        t.bg_completed = w.started;
        t.bg_bytes = w.started * size_bytes;
        t.idle_total_ns = self.idle_total_ns - w.idle_lost_ns;
        t.idle_intervals = n as u64 - w.intervals_lost;
        (t.added_ns <= cap_added_ns).then_some(t)
    }
}

/// The state of one walk.
struct Walk<'g> {
    gaps: &'g [u64],
    reqs: &'g [u32],
    threshold_ns: u64,
    off_ns: u64,
    service_ns: u64,
    inv_service: f64,
    penalty_ns: u64,
    cap_added_ns: u128,
    t: Totals,
    /// Delay carried into the busy period before the next interval.
    shift: u64,
    /// Idle time eaten by shifts.
    idle_lost_ns: u64,
    /// Intervals a shift swallowed whole.
    intervals_lost: u64,
    /// BG requests started.
    started: u64,
}

impl Walk<'_> {
    /// Busy period `j` (delayed by the carried shift) and idle interval `j`.
    /// `None` once the added delay passes the cap.
    #[inline]
    fn visit(&mut self, j: usize) -> Option<()> {
        let gap = self.gaps[j];
        let s = self.service_ns;
        // `gap − off` split into whole services and a remainder before the
        // shift is known: this division does not wait for the previous
        // interval, so the loop's carried chain is a few adds
        let (q, rem) = div_rem(gap.saturating_sub(self.off_ns), s, self.inv_service);
        let shift = self.shift;
        if shift > 0 {
            let n = self.reqs[j] as u64;
            self.t.added_ns += shift as u128 * n as u128;
            self.t.delayed_requests += n;
            if self.t.added_ns > self.cap_added_ns {
                return None;
            }
            if gap <= shift {
                self.shift = shift - gap;
                self.idle_lost_ns += gap;
                self.intervals_lost += 1;
                return Some(());
            }
            self.idle_lost_ns += shift;
            if gap - shift <= self.threshold_ns {
                self.shift = 0;
                return Some(());
            }
        } else if gap <= self.threshold_ns {
            return Some(());
        }
        // BG runs for busy = gap − off − shift = q·s + (rem − shift):
        // k = ⌈busy/s⌉ requests start, the last with k·s − busy left
        let busy_ns = gap - self.off_ns - shift;
        let m = rem as i64 - shift as i64; // in (−s, s) unless a penalty is large
        let (k, residual) = if m > -(s as i64) {
            // branch-free: the sign of m is a coin toss for the predictor
            let up = (m > 0) as u64;
            (q + up, ((up * s) as i64 - m) as u64)
        } else {
            // the shift spans whole services (a large switch penalty)
            let k = div_ceil(busy_ns, s, self.inv_service);
            (k, k * s - busy_ns)
        };
        self.started += k;
        self.t.bg_busy_ns += busy_ns;
        self.shift = if residual > 0 {
            self.t.collisions += 1;
            self.t.bg_overrun_ns += residual;
            residual + self.penalty_ns
        } else {
            0
        };
        Some(())
    }
}

/// `(⌊a / d⌋, a mod d)` from a float estimate and an exact integer
/// correction (a 64-bit division is the slowest step of the walk).
#[inline]
fn div_rem(a: u64, d: u64, inv_d: f64) -> (u64, u64) {
    if a >= 1 << 50 {
        return (a / d, a % d); // beyond the estimate's exact range
    }
    // exact to within one below 2^50: one correction each way suffices
    // (branch-free: the estimate falls on either side at random)
    let q = (a as i64 as f64 * inv_d) as i64;
    let r = a as i64 - q.wrapping_mul(d as i64);
    let below = r >> 63; // −1 if the estimate was one too high
    let (q, r) = (q + below, r + (d as i64 & below));
    let above = ((r >= d as i64) as i64).wrapping_neg(); // −1 if one too low
    let (q, r) = (q - above, r - (d as i64 & above));
    (q as u64, r as u64)
}

/// `⌈a / d⌉` from a float estimate and an exact integer correction: a
/// 64-bit division is the slowest step of the walk, and its result feeds
/// the next interval's shift.
#[inline]
fn div_ceil(a: u64, d: u64, inv_d: f64) -> u64 {
    let mut k = (a as f64 * inv_d) as u64;
    // the estimate is off by at most a few units below 2^52
    while k.saturating_mul(d) < a {
        k += 1;
    }
    while k > 0 && (k - 1) * d >= a {
        k -= 1;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_div_ceil_is_exact() {
        let mut x = 12345u64;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let a = x >> (x % 40);
            let d = 1 + (x >> 20) % 100_000_000;
            assert_eq!(div_ceil(a, d, 1.0 / d as f64), a.div_ceil(d), "{a} / {d}");
        }
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let a = x >> (x % 64);
            let d = 1 + (x >> 20) % 1_000_000_000;
            assert_eq!(div_rem(a, d, 1.0 / d as f64), (a / d, a % d), "{a} / {d}");
        }
        assert_eq!(div_ceil(0, 7, 1.0 / 7.0), 0);
        assert_eq!(div_ceil(14, 7, 1.0 / 7.0), 2);
        assert_eq!(div_ceil(15, 7, 1.0 / 7.0), 3);
    }
}

/// Where BG work starts in a used interval.
#[derive(Debug, Clone, Copy)]
enum Offset {
    /// At the threshold (wait, then run).
    Threshold,
    /// At the interval's start.
    Zero,
}
