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
//! Several settings can share a pass ([`FastSweep::totals_many`]): `tune`
//! keeps a few request sizes going at once and walks their next settings
//! together, so the walks' independent chains overlap in the CPU.
//!
//! What it needs: endless BG work (the supply never runs out mid-trace) and
//! deterministic BG service (exponential service draws random numbers the
//! arithmetic cannot reproduce); otherwise tune simulates.

use crate::policy::IntervalRule;
use crate::sim::{BgService, BgWork, Prepared, SimConfig, Totals};
use rand::SeedableRng;
use std::sync::atomic::{AtomicU64, Ordering};

/// The idle intervals of one prepared trace, ready for many evaluations.
#[derive(Debug)]
pub struct FastSweep<'a> {
    /// Intervals walked so far, by every walk and pass (an interval a pass
    /// skips counts as one, an interval it steps counts once per lane): the
    /// work [`super::tune`]'s `auto` measures on one size before choosing.
    visits: AtomicU64,
    prep: &'a Prepared,
    /// Idle lengths sorted longest first (oracle's rank thresholds, and
    /// how many intervals a threshold leaves).
    sorted_desc_ns: Vec<u64>,
    /// Interval indices in the same order.
    order: Vec<u32>,
    /// `prefix_desc_ns[k]`: the sum of the `k` longest idle lengths (the
    /// throughput bound of [`FastSweep::started_upper_bound`]).
    prefix_desc_ns: Vec<u128>,
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
        let mut prefix_desc_ns = Vec::with_capacity(sorted_desc_ns.len() + 1);
        prefix_desc_ns.push(0u128);
        for &g in &sorted_desc_ns {
            let last = *prefix_desc_ns.last().expect("starts with 0");
            prefix_desc_ns.push(last + g as u128);
        }
        Some(FastSweep {
            visits: AtomicU64::new(0),
            prep,
            prefix_desc_ns,
            idle_total_ns: sorted_desc_ns.iter().sum(),
            sorted_desc_ns,
            order,
        })
    }

    /// Intervals walked so far (see the field): a work count that does not
    /// depend on the machine or its load.
    pub fn visits(&self) -> u64 {
        self.visits.load(Ordering::Relaxed)
    }

    /// Idle intervals the sweep walks (the unit of [`SearchMode::Auto`]'s
    /// cost estimate).
    ///
    /// [`SearchMode::Auto`]: super::SearchMode::Auto
    pub fn intervals(&self) -> usize {
        self.sorted_desc_ns.len()
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
        match self.plan(rule, value, size_bytes, sim, cap_added_ns) {
            Some(plan) => self.walk(&plan, sim.switch_penalty_ns),
            None => Some(self.unused()),
        }
    }

    /// At most how many BG requests a setting starts, from the sorted
    /// lengths alone (two look-ups): only intervals longer than the
    /// threshold are ever used (a shift only shortens an interval), and
    /// one of length `L` starts at most `⌈(L − off)/s⌉` requests (fewer
    /// when a shift eats its start), so the count is at most
    /// `Σ_{L>θ} (L − off + s − 1)/s`. Exact `tune` skips every setting
    /// whose bound is below the best feasible count found: it cannot win.
    pub fn started_upper_bound(
        &self,
        rule: IntervalRule,
        value: f64,
        size_bytes: u64,
        sim: &SimConfig,
    ) -> u64 {
        let Some(plan) = self.plan(rule, value, size_bytes, sim, None) else {
            return 0;
        };
        let c = plan.used as u128;
        let s = plan.service_ns.max(1) as u128;
        // every used interval is longer than the threshold ≥ the offset
        let room = self.prefix_desc_ns[plan.used] - c * plan.off_ns as u128 + c * (s - 1);
        u64::try_from(room / s).unwrap_or(u64::MAX)
    }

    /// Exactly how many BG requests each setting of `values` would start
    /// at `size_bytes` if no collision's shift ever reached the next
    /// interval: `Σ ⌈(L − off)/s⌉` over the intervals longer than its
    /// threshold. An upper bound on what it starts (a shift only shortens
    /// an interval, or leaves it unused), and never above
    /// [`started_upper_bound`](Self::started_upper_bound) (`Σ⌈x/s⌉ ≤
    /// ⌊(Σx + c(s − 1))/s⌋`), which rounds the sum instead of each term:
    /// the difference is about half a request per used interval, which
    /// at short waits is hundreds of ladder steps that the exact search
    /// no longer has to walk (docs/tuning.md, "How it works").
    ///
    /// All values at once, from the lengths sorted longest first: with
    /// `L = a·s + α` and `off = b·s + β` (`L > off`), `⌈(L − off)/s⌉ =
    /// a − b + [α > β]`, so the sum over the `c` longest is
    /// `Σa − c·b + #{α > β}`: a prefix sum of `⌊L/s⌋` and a count of
    /// remainders above `β` among the `c` longest, answered for every
    /// value in one pass over them (a Fenwick tree over the remainders,
    /// the values taken by `c`).
    pub fn started_no_shift(
        &self,
        rule: IntervalRule,
        values: &[f64],
        size_bytes: u64,
        sim: &SimConfig,
    ) -> Vec<u64> {
        let plans: Vec<Option<Plan>> = values
            .iter()
            .map(|&v| self.plan(rule, v, size_bytes, sim, None))
            .collect();
        let Some(s) = plans.iter().flatten().map(|p| p.service_ns).next() else {
            return vec![0; values.len()];
        };
        if s == 0 {
            // no request takes time: the walk has no meaning; keep the old bound
            return values
                .iter()
                .map(|&v| self.started_upper_bound(rule, v, size_bytes, sim))
                .collect();
        }
        let c_max = plans.iter().flatten().map(|p| p.used).max().unwrap_or(0);
        // one scan of the c_max longest intervals (the Fenwick tree's inserts)
        self.visits.fetch_add(c_max as u64, Ordering::Relaxed);
        let longest = &self.sorted_desc_ns[..c_max];
        let mut rems: Vec<u64> = longest.iter().map(|&l| l % s).collect();
        rems.sort_unstable();
        rems.dedup();
        let mut tree = vec![0u32; rems.len() + 1];
        // queries by the number of intervals they use
        let mut by_used: Vec<usize> = (0..plans.len()).filter(|&i| plans[i].is_some()).collect();
        by_used.sort_unstable_by_key(|&i| plans[i].map_or(0, |p| p.used));
        let mut out = vec![0u64; values.len()];
        let (mut inserted, mut floors) = (0usize, 0u128);
        for q in by_used {
            let p = plans[q].expect("filtered");
            while inserted < p.used {
                let l = longest[inserted];
                floors += (l / s) as u128;
                // 1-based Fenwick index of the remainder's rank
                let mut k = rems.partition_point(|&r| r < l % s) + 1;
                while k < tree.len() {
                    tree[k] += 1;
                    k += k & k.wrapping_neg();
                }
                inserted += 1;
            }
            let beta = p.off_ns % s;
            // remainders ≤ β among those inserted
            let mut k = rems.partition_point(|&r| r <= beta);
            let mut at_most = 0u64;
            while k > 0 {
                at_most += tree[k] as u64;
                k &= k - 1;
            }
            let above = p.used as u128 - at_most as u128;
            let total = floors - p.used as u128 * (p.off_ns / s) as u128 + above;
            out[q] = u64::try_from(total).unwrap_or(u64::MAX);
        }
        out
    }

    /// [`totals`](Self::totals) of several settings, the same to the bit,
    /// in fewer passes: settings that use many intervals are walked
    /// together, up to [`LANES`] in one pass over the intervals (see
    /// `walk_lanes`); settings that use few (long waits) each take the
    /// bitset walk, which visits only their intervals.
    pub fn totals_many(
        &self,
        rule: IntervalRule,
        settings: &[Setting],
        sim: &SimConfig,
    ) -> Vec<Option<Totals>> {
        let n = self.sorted_desc_ns.len();
        let penalty_ns = sim.switch_penalty_ns;
        let mut out = vec![None; settings.len()];
        let mut dense: Vec<(usize, Plan)> = Vec::new();
        for (slot, s) in settings.iter().enumerate() {
            match self.plan(rule, s.value, s.size_bytes, sim, s.cap_added_ns) {
                None => out[slot] = Some(self.unused()),
                Some(plan) if plan.used * SPARSE < n => out[slot] = self.walk(&plan, penalty_ns),
                Some(plan) => dense.push((slot, plan)),
            }
        }
        // lanes with close thresholds share the pass's skipped intervals;
        // groups as even as LANES allows
        dense.sort_by_key(|(_, p)| p.threshold_ns);
        let groups = dense.len().div_ceil(LANES).max(1);
        for group in dense.chunks(dense.len().div_ceil(groups).max(1)) {
            self.walk_lanes(group, penalty_ns, &mut out);
        }
        out
    }

    /// Where a setting's walk starts and what its requests cost; `None`:
    /// it does no BG work at all.
    fn plan(
        &self,
        rule: IntervalRule,
        value: f64,
        size_bytes: u64,
        sim: &SimConfig,
        cap_added_ns: Option<u128>,
    ) -> Option<Plan> {
        // (threshold: used iff L > threshold, offset where BG starts)
        let (threshold_ns, offset) = match rule {
            IntervalRule::WaitThenRun => (value as u64, Offset::Threshold),
            IntervalRule::WholeIfLonger => (value as u64, Offset::Zero),
            IntervalRule::WholeIfAmongLongestPercent => {
                // as Oracle::prepare: the round(x/100·n)-th longest, used if L ≥ it
                let n = self.sorted_desc_ns.len();
                let k = (value / 100.0 * n as f64).round() as usize;
                if k == 0 || n == 0 {
                    return None;
                }
                (self.sorted_desc_ns[k.min(n) - 1] - 1, Offset::Zero)
            }
        };
        // deterministic service: sample_ns draws nothing, so any stream gives the engine's value
        let service_ns = sim
            .bg_service
            .sample_ns(size_bytes, &mut rand_pcg::Pcg64Mcg::seed_from_u64(0));
        Some(Plan {
            threshold_ns,
            off_ns: match offset {
                Offset::Threshold => threshold_ns,
                Offset::Zero => 0,
            },
            service_ns,
            size_bytes,
            cap_added_ns: cap_added_ns.unwrap_or(u128::MAX),
            // intervals longer than the threshold: the only ones a walk starts at
            used: self.sorted_desc_ns.partition_point(|&g| g > threshold_ns),
        })
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
    /// longer than the plan's threshold get back-to-back requests of its
    /// service time from its offset until the FG arrival. Only used intervals and the
    /// intervals their collisions shift are visited; the idle time of the
    /// others is in the precomputed total.
    fn walk(&self, plan: &Plan, penalty_ns: u64) -> Option<Totals> {
        let p = self.prep.periods();
        let Plan {
            threshold_ns,
            off_ns,
            service_ns,
            size_bytes,
            cap_added_ns,
            used,
        } = *plan;
        let mut w = Walk {
            gaps: &p.idle_len_ns,
            reqs: &p.busy_requests,
            threshold_ns,
            off_ns,
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
        if used * SPARSE < n {
            // few: visit them in index order (a bitset sorts them), each
            // followed by the chain of intervals its collision shifts
            let mut bits = vec![0u64; n.div_ceil(64)];
            for &i in &self.order[..used] {
                bits[i as usize / 64] |= 1 << (i % 64);
            }
            let mut next = 0usize; // first interval not yet visited
            let mut visited = 0u64; // counted once, at the end (threads share the counter)
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
                        visited += 1;
                        if w.visit(k).is_none() {
                            self.visits.fetch_add(visited, Ordering::Relaxed);
                            return None;
                        }
                        k += 1;
                        if w.shift == 0 || k == n {
                            break;
                        }
                    }
                    next = k;
                }
            }
            self.visits.fetch_add(visited, Ordering::Relaxed);
        } else {
            // every interval scanned, as a pass counts it
            self.visits.fetch_add(n as u64, Ordering::Relaxed);
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

    /// Several settings' walks in one pass over the intervals, their
    /// results put in `out` at each setting's slot.
    ///
    /// Why lanes are interleaved: one walk is a chain (an interval's
    /// collision residual is the next one's shift) whose every step waits
    /// for the last, and at the waits that matter whether an interval is
    /// used or collides is a coin toss the branch predictor loses. So each
    /// lane steps branch-free and the lanes' independent chains overlap in
    /// the CPU, sharing the interval loads. An interval that no lane uses
    /// and none is shifted into is skipped; a lane whose added delay passes
    /// its cap leaves the pass (checked every `CHUNK` intervals: it only
    /// grows, so the verdict is the same), and the pass ends when none is
    /// left.
    fn walk_lanes(&self, group: &[(usize, Plan)], penalty_ns: u64, out: &mut [Option<Totals>]) {
        let p = self.prep.periods();
        let n = p.idle_len_ns.len();
        for part in group.chunks(LANES) {
            let mut lanes: Vec<Lane> = part
                .iter()
                .map(|&(slot, plan)| Lane::new(slot, plan))
                .collect();
            let mut start = 0;
            while start < n && !lanes.is_empty() {
                // one pass per number of live lanes, so each is unrolled
                // (and a lone lane's state kept in registers)
                start = match lanes.len() {
                    1 => self.pass::<1>(&mut lanes, start, penalty_ns),
                    2 => self.pass::<2>(&mut lanes, start, penalty_ns),
                    3 => self.pass::<3>(&mut lanes, start, penalty_ns),
                    4 => self.pass::<4>(&mut lanes, start, penalty_ns),
                    5 => self.pass::<5>(&mut lanes, start, penalty_ns),
                    6 => self.pass::<6>(&mut lanes, start, penalty_ns),
                    7 => self.pass::<7>(&mut lanes, start, penalty_ns),
                    _ => self.pass::<8>(&mut lanes, start, penalty_ns),
                };
                // over its cap: over every budget, the lane leaves
                lanes.retain(|l| {
                    let over = l.added_ns > l.plan.cap_added_ns;
                    if over {
                        out[l.slot] = None;
                    }
                    !over
                });
            }
            for l in &lanes {
                out[l.slot] = l.finish(
                    p.busy_requests.get(n).copied(),
                    n as u64,
                    self.idle_total_ns,
                );
            }
        }
    }

    /// Walk the first `K` of `lanes` from interval `start` until the end or
    /// until a lane's added delay passes its cap (checked every `CHUNK`
    /// intervals); the interval where it stopped.
    fn pass<const K: usize>(&self, lanes: &mut [Lane], start: usize, penalty_ns: u64) -> usize {
        let p = self.prep.periods();
        let (gaps, reqs) = (&p.idle_len_ns[..], &p.busy_requests[..]);
        let n = gaps.len();
        let mut ls: [Lane; K] = std::array::from_fn(|i| lanes[i]);
        let min_threshold_ns = ls.iter().map(|l| l.plan.threshold_ns).min().unwrap_or(0);
        // OR of the lanes' shifts after the last visited interval
        let mut any_shift = ls.iter().fold(0, |a, l| a | l.shift);
        let mut at = start;
        while at < n {
            let end = (at + CHUNK).min(n);
            let mut stepped = 0u64;
            for (&gap, &r) in gaps[at..end].iter().zip(&reqs[at..end]) {
                if any_shift == 0 && gap <= min_threshold_ns {
                    continue; // unused by every lane
                }
                any_shift = 0;
                stepped += 1;
                for l in ls.iter_mut() {
                    any_shift |= l.step(gap, r as u64, penalty_ns);
                }
            }
            self.visits
                .fetch_add((end - at) as u64 + stepped * K as u64, Ordering::Relaxed);
            at = end;
            if ls.iter().any(|l| l.added_ns > l.plan.cap_added_ns) {
                break;
            }
        }
        lanes[..K].copy_from_slice(&ls);
        at
    }
}

/// Settings that use fewer than one interval in `SPARSE` take the bitset
/// walk, which visits only those (measured on the bench's traces: up to a
/// third, it beats a pass over every interval).
const SPARSE: usize = 3;

/// Most settings walked in one pass ([`FastSweep::totals_many`]; at most
/// 8), and the sizes `tune` keeps going at once on each thread to fill
/// them.
pub const LANES: usize = 8;
// walk_lanes has passes for 1 to 8 lanes
const _: () = {
    assert!(LANES >= 1);
    assert!(LANES <= 8);
};

/// Intervals between checks of the lanes' caps.
const CHUNK: usize = 1024;

/// One setting for [`FastSweep::totals_many`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// The knob's value: ns for the wait rules, percent for the rank rule.
    pub value: f64,
    /// BG request size, bytes.
    pub size_bytes: u64,
    /// As [`FastSweep::totals`]'s `cap_added_ns`.
    pub cap_added_ns: Option<u128>,
}

/// One setting, ready to walk.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Used iff (after any shift) longer than this.
    threshold_ns: u64,
    /// Where BG work starts in a used interval.
    off_ns: u64,
    service_ns: u64,
    size_bytes: u64,
    cap_added_ns: u128,
    /// Intervals longer than the threshold.
    used: usize,
}

/// One setting's state in a multi-lane pass (`FastSweep::walk_lanes`): the
/// same counts as [`Walk`], kept branch-free.
#[derive(Debug, Clone, Copy)]
struct Lane {
    /// Its index in the caller's settings.
    slot: usize,
    plan: Plan,
    inv_service: f64,
    shift: u64,
    added_ns: u128,
    delayed_requests: u64,
    collisions: u64,
    bg_busy_ns: u64,
    idle_lost_ns: u64,
    intervals_lost: u64,
    started: u64,
}

/// All ones if `b`, else zero: a select without a branch.
#[inline(always)]
fn mask(b: bool) -> u64 {
    (b as u64).wrapping_neg()
}

impl Lane {
    fn new(slot: usize, plan: Plan) -> Lane {
        Lane {
            slot,
            plan,
            inv_service: 1.0 / plan.service_ns as f64,
            shift: 0,
            added_ns: 0,
            delayed_requests: 0,
            collisions: 0,
            bg_busy_ns: 0,
            idle_lost_ns: 0,
            intervals_lost: 0,
            started: 0,
        }
    }

    /// `Walk::visit` without branches on the data (but the rare shift of
    /// whole services): busy period `j` with its `requests`, then idle
    /// interval `j` of `gap` ns. Returns the new shift.
    #[inline(always)]
    fn step(&mut self, gap: u64, requests: u64, penalty_ns: u64) -> u64 {
        let s = self.plan.service_ns;
        let off = self.plan.off_ns;
        let shift = self.shift;
        let (q, rem) = div_rem(gap.saturating_sub(off), s, self.inv_service);
        // the busy period ends `shift` late: each of its requests waits that long
        let shifted = mask(shift > 0);
        self.added_ns += shift as u128 * requests as u128;
        self.delayed_requests += requests & shifted;
        // the shift eats the start of the interval, or all of it
        let eaten = gap.min(shift);
        let swallowed = shifted & mask(gap <= shift);
        self.idle_lost_ns += eaten;
        self.intervals_lost += swallowed & 1;
        let rest = gap - eaten;
        let used = mask(rest > self.plan.threshold_ns);
        // as Walk::visit, masked off when the interval is not used
        let busy_ns = rest.wrapping_sub(off) & used;
        let m = rem as i64 - shift as i64;
        let (k, residual) = if m > -(s as i64) {
            let up = mask(m > 0);
            (q + (up & 1), ((s & up) as i64 - m) as u64)
        } else {
            // the shift spans whole services (a large switch penalty)
            let k = div_ceil(busy_ns, s, self.inv_service);
            (k, k * s - busy_ns)
        };
        let (k, residual) = (k & used, residual & used);
        self.started += k;
        self.bg_busy_ns += busy_ns;
        let collided = mask(residual > 0);
        self.collisions += collided & 1;
        // a collision carries its residual and the penalty; a swallowed
        // interval passes the rest of the shift on
        self.shift = ((residual + penalty_ns) & collided) | (shift.wrapping_sub(gap) & swallowed);
        self.shift
    }

    /// The totals after the last interval (`last_requests`: the FG requests
    /// of the busy period after it), `None` if over the cap.
    fn finish(
        &self,
        last_requests: Option<u32>,
        intervals: u64,
        idle_total_ns: u64,
    ) -> Option<Totals> {
        let mut t = Totals {
            added_ns: self.added_ns,
            delayed_requests: self.delayed_requests,
            collisions: self.collisions,
            bg_completed: self.started,
            bg_bytes: self.started * self.plan.size_bytes,
            bg_busy_ns: self.bg_busy_ns,
            // every request started runs its whole service: inside the
            // idle time, or past the FG arrival
            bg_overrun_ns: self.started * self.plan.service_ns - self.bg_busy_ns,
            idle_total_ns: idle_total_ns - self.idle_lost_ns,
            idle_intervals: intervals - self.intervals_lost,
        };
        if let (true, Some(r)) = (self.shift > 0, last_requests) {
            t.added_ns += self.shift as u128 * r as u128;
            t.delayed_requests += r as u64;
        }
        (t.added_ns <= self.plan.cap_added_ns).then_some(t)
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

    /// Busy periods and idle intervals from a seeded generator: idle
    /// lengths from 1 ns to 50 ms, most short, 1–4 requests a busy period.
    fn random_prep(n: usize, seed: u64) -> Prepared {
        let mut x = seed;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 11
        };
        let idle: Vec<u64> = (0..n)
            .map(|_| {
                let r = next();
                1 + ((r % 50_000_000) >> (r % 6))
            })
            .collect();
        let busy: Vec<u64> = (0..=n).map(|_| 1_000_000 + next() % 10_000_000).collect();
        let reqs: Vec<u32> = (0..=n).map(|_| 1 + (next() % 4) as u32).collect();
        Prepared::from_periods(&busy, &reqs, &idle).unwrap()
    }

    #[test]
    fn lanes_walk_as_single_walks_do() {
        let prep = random_prep(20_000, 7);
        let size_based = BgService::SizeBased {
            base_ns: 8_000_000,
            knee_bytes: 64 << 10,
            rate_bytes_per_s: 100e6,
        };
        let mut exits = 0;
        for (bg_service, switch_penalty_ns) in [
            (BgService::Constant { ns: 3_000_000 }, 0),
            (size_based, 1_500_000),
            // shifts of several services: the lanes' slow path
            (BgService::Constant { ns: 3_000_000 }, 20_000_000),
        ] {
            let sim = SimConfig {
                bg_service,
                switch_penalty_ns,
                ..SimConfig::default()
            };
            let sweep = FastSweep::new(&prep, &sim).unwrap();
            // dense and sparse settings, each capped so that lanes leave
            // the pass at different points (or just do not)
            let mut cases = Vec::new();
            let rules = [IntervalRule::WaitThenRun, IntervalRule::WholeIfLonger];
            for (r, rule) in rules.into_iter().enumerate() {
                for (w, wait_ns) in [1e5, 2e6, 7e6, 1.5e7, 3e7, 4.9e7].into_iter().enumerate() {
                    for (z, size) in [4096u64, 1 << 20].into_iter().enumerate() {
                        let plan = sweep.plan(rule, wait_ns, size, &sim, None).unwrap();
                        let full = sweep.walk(&plan, switch_penalty_ns).unwrap().added_ns;
                        let cap_added_ns = match (r + w + z) % 4 {
                            0 => u128::MAX,
                            1 => full,
                            2 => full.saturating_sub(1),
                            _ => full / 3,
                        };
                        let plan = Plan {
                            cap_added_ns,
                            ..plan
                        };
                        let want = sweep.walk(&plan, switch_penalty_ns);
                        exits += want.is_none() as usize;
                        cases.push((plan, want));
                    }
                }
            }
            for k in [1, 2, 3, 4, 5, 8] {
                for (c, group) in cases.chunks(k).enumerate() {
                    let plans: Vec<(usize, Plan)> = group.iter().map(|c| c.0).enumerate().collect();
                    let mut out = vec![Some(Totals::default()); plans.len()];
                    sweep.walk_lanes(&plans, switch_penalty_ns, &mut out);
                    for (slot, (plan, want)) in group.iter().enumerate() {
                        assert_eq!(
                            out[slot], *want,
                            "K={k} group {c} lane {slot}: {plan:?} penalty {switch_penalty_ns}"
                        );
                    }
                }
            }
            // and through the public entry, which routes sparse settings to the bitset walk
            let rule = IntervalRule::WaitThenRun;
            let settings: Vec<Setting> = [1e5, 3e6, 2e7, 4.9e7, 1e9]
                .into_iter()
                .flat_map(|v| {
                    [4096u64, 64 << 10, 1 << 20].map(|size_bytes| Setting {
                        value: v,
                        size_bytes,
                        cap_added_ns: None,
                    })
                })
                .collect();
            let many = sweep.totals_many(rule, &settings, &sim);
            for (s, t) in settings.iter().zip(&many) {
                assert_eq!(
                    *t,
                    sweep.totals(rule, s.value, s.size_bytes, &sim, None),
                    "{s:?}"
                );
            }
        }
        assert!(exits > 10, "{exits} lanes over their caps");
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
