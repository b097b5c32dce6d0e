//! Mean latent error time (MLET) of a scrub order under bursts of latent
//! sector errors: how an operator chooses `fallow scrub --order` and
//! `--regions` (docs/scrub-plan.md).
//!
//! Practical Scrubbing defines MLET as the time between the
//! occurrence of an LSE and its detection (§I), describes staggered
//! scrubbing after Oprea et al. (§II: the disk is cut into R regions, each
//! of segments; round j reads segment j of every region in LBN order) and
//! its point: LSEs come in bursts, so probing every region often finds a
//! burst sooner and "then immediately scrub[s] the entire region" (§I). Its
//! §IV-A measures the cost: VERIFY time is flat up to 64 KB (Fig. 4), and a
//! staggered scrub with ≥ 128 regions is as fast as a sequential one
//! (Fig. 5b), because back-to-back sequential VERIFYs miss a revolution
//! each while a staggered one pays a short seek and half a revolution.
//!
//! ## The model
//! - **Disk**: `capacity_bytes` cut into `segment_bytes` requests (a whole
//!   number of them per region), scrubbed continuously pass after pass; a
//!   fraction `duty` of the time goes to scrubbing, so every time below is
//!   divided by `duty`.
//! - **Request time**: transfer (`segment_bytes / rate`) plus, when the
//!   request starts where the previous one ended, one full revolution
//!   (Practical Scrubbing §IV-A's missed revolution); otherwise a seek over
//!   the distance `d` plus half a revolution. Seek time is
//!   `a + b·√(d / capacity)` (the usual square-root seek curve), with
//!   `a + b` the full-stroke time and `a` set so that a staggered scrub of
//!   128 regions costs what a sequential one does (Fig. 5b's crossover).
//! - **LSE bursts**: a burst corrupts a span of `burst_span_bytes`, its
//!   start uniform over the disk, at a time uniform over the scrub cycle
//!   (a stationary process seen by a periodic scrubber). It is detected
//!   when the scrubber first reads a segment overlapping the span, and all
//!   its errors then (the region is scrubbed at once, §I); MLET is the mean
//!   time from occurrence to that read. A span of one sector is an isolated
//!   error. The seed gives no burst sizes (it cites Bairavasundaram et al.
//!   and Schroeder et al. for the locality): the span is the user's.
//!
//! ## Analytically
//! With visits to a burst's segments at cycle times t₁ < … < t_k and cyclic
//! gaps g_i (Σ g_i = P, the pass time), an occurrence uniform over the
//! cycle waits E = Σ g_i² / (2P) (the residual-life formula). A span of
//! L = qS + r bytes (S the segment) covers q + 1 segments for a fraction
//! (S − r)/S of start offsets and q + 2 for r/S. Sequentially any k
//! consecutive segments are read τ apart: E = ((k−1)τ² + (P−(k−1)τ)²)/(2P).
//! Staggered, k segments of one region are read a round T apart, the same
//! formula with T; the few placements that cross a region boundary are
//! summed one by one. [`mlet_monte_carlo`] checks all of it by sampling
//! bursts against visit times got by walking the order request by request.

use crate::error::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

/// Scrub order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Increasing LBN.
    Sequential,
    /// Segment j of every region, then j + 1 (Oprea et al., §II).
    Staggered,
}

/// The disk and its scrubber.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Disk {
    /// Capacity scrubbed, bytes.
    pub capacity_bytes: u64,
    /// Revolution time, ns.
    pub revolution_ns: f64,
    /// Media transfer rate, bytes/s.
    pub rate_bytes_per_s: f64,
    /// Full-stroke seek time, ns.
    pub full_stroke_ns: f64,
    /// Fraction of the time spent scrubbing (1: back to back).
    pub duty: f64,
}

impl Default for Disk {
    /// Practical Scrubbing §IV-A's Hitachi Ultrastar 15K450 (300 GB,
    /// 15,000 rpm: a 4 ms revolution); 100 MB/s media rate (the simulator's
    /// `size` model, Fig. 4's shape); 8 ms full stroke (assumed, typical of
    /// 15K rpm drives).
    fn default() -> Self {
        Disk {
            capacity_bytes: 300_000_000_000,
            revolution_ns: 4e6,
            rate_bytes_per_s: 100e6,
            full_stroke_ns: 8e6,
            duty: 1.0,
        }
    }
}

/// Regions at which a staggered scrub costs what a sequential one does
/// (Practical Scrubbing Fig. 5b); the seek curve is calibrated to it.
pub const CROSSOVER_REGIONS: f64 = 128.0;

impl Disk {
    /// The revolution time of a spindle at `rpm` revolutions per minute, ns.
    pub fn revolution_ns_at(rpm: f64) -> Result<f64> {
        if !(rpm.is_finite() && rpm > 0.0) {
            return Err(Error::invalid("rpm", format!("{rpm}: must be positive")));
        }
        Ok(60e9 / rpm)
    }

    fn validate(&self) -> Result<()> {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if self.capacity_bytes == 0
            || !ok(self.revolution_ns)
            || !ok(self.rate_bytes_per_s)
            || !ok(self.full_stroke_ns)
        {
            return Err(Error::invalid(
                "disk",
                "capacity, revolution, rate and full stroke must be positive",
            ));
        }
        if !(self.duty > 0.0 && self.duty <= 1.0) {
            return Err(Error::invalid("duty", "must be in (0, 1]"));
        }
        let a = self.seek_min_ns();
        if a < 0.0 || a > self.full_stroke_ns {
            return Err(Error::invalid(
                "full stroke",
                format!(
                    "{} ms: no seek curve a + b·√(d/capacity) rising to it costs half a revolution at 1/{CROSSOVER_REGIONS} of the disk (the calibration to Practical Scrubbing Fig. 5b)",
                    self.full_stroke_ns / 1e6
                ),
            ));
        }
        Ok(())
    }

    /// `a` of the seek curve: a + (F − a)·√(1/128) = revolution / 2.
    fn seek_min_ns(&self) -> f64 {
        let f = (1.0 / CROSSOVER_REGIONS).sqrt();
        (self.revolution_ns / 2.0 - self.full_stroke_ns * f) / (1.0 - f)
    }

    /// Seek over `d` bytes, ns (0 for no distance).
    pub fn seek_ns(&self, d: u64) -> f64 {
        if d == 0 {
            return 0.0;
        }
        let a = self.seek_min_ns();
        a + (self.full_stroke_ns - a) * (d as f64 / self.capacity_bytes as f64).sqrt()
    }

    /// One request of `size` bytes `d` bytes from where the last ended, ns.
    pub fn request_ns(&self, size: u64, d: u64) -> f64 {
        let xfer = size as f64 / self.rate_bytes_per_s * 1e9;
        if d == 0 {
            xfer + self.revolution_ns
        } else {
            xfer + self.seek_ns(d) + self.revolution_ns / 2.0
        }
    }
}

/// A scrub plan to evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Plan {
    /// Order.
    pub order: Order,
    /// Regions (1 for sequential).
    pub regions: u64,
    /// Request (segment) size, bytes.
    pub segment_bytes: u64,
}

/// The layout of a plan on a disk.
#[derive(Debug, Clone, Copy)]
struct Layout {
    regions: u64,
    /// Segments per region.
    m: u64,
    seg: u64,
}

impl Layout {
    fn new(disk: &Disk, plan: &Plan) -> Result<Layout> {
        disk.validate()?;
        let regions = match plan.order {
            Order::Sequential => 1,
            Order::Staggered => plan.regions,
        };
        if plan.segment_bytes == 0 || regions == 0 {
            return Err(Error::invalid(
                "plan",
                "segment size and regions must be positive",
            ));
        }
        let m = disk.capacity_bytes / regions / plan.segment_bytes;
        if m == 0 {
            return Err(Error::invalid(
                "regions",
                format!(
                    "{regions} regions of {} byte segments do not fit {} bytes",
                    plan.segment_bytes, disk.capacity_bytes
                ),
            ));
        }
        Ok(Layout {
            regions,
            m,
            seg: plan.segment_bytes,
        })
    }

    fn segments(&self) -> u64 {
        self.regions * self.m
    }

    fn bytes(&self) -> u64 {
        self.segments() * self.seg
    }
}

/// Visit times of a staggered order (sequential: one region) in closed form.
struct Times {
    lay: Layout,
    /// Time of request (0, 0): the pass-wrap seek and the request, ns.
    first_ns: f64,
    /// From (r, j) to (r + 1, j), ns.
    step_ns: f64,
    /// From (r, j) to (r, j + 1): one round, ns.
    round_ns: f64,
    /// The pass, ns.
    pass_ns: f64,
}

impl Times {
    fn new(disk: &Disk, lay: Layout) -> Times {
        let (r, m, s) = (lay.regions, lay.m, lay.seg);
        // distances between the end of one request and the start of the next
        let step_d = (m - 1) * s; // (r, j) → (r+1, j)
        let wrap_d = (r - 1) * m * s; // (R−1, j) → (0, j+1)
        let pass_d = r * m * s; // (R−1, m−1) → (0, 0)
        let step = disk.request_ns(s, step_d);
        let wrap = disk.request_ns(s, wrap_d);
        let first = disk.request_ns(s, pass_d);
        let round = wrap + (r - 1) as f64 * step;
        let pass = first + (r - 1) as f64 * step + (m - 1) as f64 * round;
        Times {
            lay,
            first_ns: first,
            step_ns: step,
            round_ns: round,
            pass_ns: pass / disk.duty,
        }
    }

    /// When segment `g` (LBN order) is read, from the start of a pass, ns.
    fn at(&self, g: u64, duty: f64) -> f64 {
        let (r, j) = (g / self.lay.m, g % self.lay.m);
        (self.first_ns + r as f64 * self.step_ns + j as f64 * self.round_ns) / duty
    }
}

/// E[wait] of an occurrence uniform over a cycle of `p` until one of `t`.
fn residual(t: &mut [f64], p: f64) -> f64 {
    t.sort_by(f64::total_cmp);
    let mut sum = 0.0;
    for w in t.windows(2) {
        sum += (w[1] - w[0]).powi(2);
    }
    let wrap = p - (t[t.len() - 1] - t[0]);
    (sum + wrap * wrap) / (2.0 * p)
}

/// E[wait] for `k` visits evenly `gap` apart in a cycle of `p`.
fn even_residual(k: u64, gap: f64, p: f64) -> f64 {
    let k1 = (k - 1) as f64;
    (k1 * gap * gap + (p - k1 * gap).powi(2)) / (2.0 * p)
}

/// Most segments one burst may cover in [`mlet`] (placements across a
/// region boundary cost k² log k).
pub const MAX_BURST_SEGMENTS: u64 = 4096;

/// MLET and scrub time of one plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The plan.
    pub plan: Plan,
    /// Segments per region.
    pub segments_per_region: u64,
    /// Time of one full pass, s (with the duty cycle).
    pub pass_s: f64,
    /// Scrub throughput while scrubbing, bytes/s.
    pub throughput_bytes_per_s: f64,
    /// Mean latent error time of a burst, s.
    pub mlet_s: f64,
}

/// MLET of `plan` on `disk` for bursts of `span_bytes`, analytically.
pub fn mlet(disk: &Disk, plan: &Plan, span_bytes: u64) -> Result<Estimate> {
    let lay = Layout::new(disk, plan)?;
    let region_bytes = lay.m * lay.seg;
    if span_bytes == 0 || span_bytes > region_bytes {
        return Err(Error::invalid(
            "burst span",
            format!("{span_bytes} bytes: use 1 byte to one region ({region_bytes} bytes)"),
        ));
    }
    let times = Times::new(disk, lay);
    let p = times.pass_ns;
    let n = lay.segments();
    let (s, l) = (lay.seg, span_bytes);
    let (q, r) = (l / s, l % s);
    // Consecutive segments of one region are read a round apart (for a
    // sequential scrub, one region, a round is one request).
    let gap = times.round_ns / disk.duty;
    // Placements by their first segment i: weight S − r covers i..=i+q,
    // weight r covers i..=i+q+1 (and must end by the disk's end). Sum E ×
    // weight: ranges inside one region by the closed form, counted; the
    // ones across a region boundary one by one.
    let starts = n - q; // first segments with room for q + 1 segments
    if q + 2 > MAX_BURST_SEGMENTS {
        return Err(Error::invalid(
            "burst span",
            format!(
                "{span_bytes} bytes cover up to {} segments of {s} bytes: at most {MAX_BURST_SEGMENTS} (use larger segments)",
                q + 2
            ),
        ));
    }
    let (mut sum, mut weight) = (0.0f64, 0.0f64);
    for (k, w, limit) in [
        (q + 1, (s - r) as f64, starts),
        (q + 2, r as f64, starts - 1),
    ] {
        if w == 0.0 || limit == 0 {
            continue;
        }
        // Starts at offset o < m − (k − 1) of a region stay inside it.
        let inside_to = lay.m.saturating_sub(k - 1);
        for o in 0..lay.m {
            // regions whose start at offset o is a valid placement
            let count = (0..lay.regions)
                .take_while(|reg| reg * lay.m + o < limit)
                .count() as u64;
            if count == 0 {
                continue;
            }
            let e = if o < inside_to {
                even_residual(k, gap, p)
            } else {
                // Across a boundary: the visit times of region reg + 1 are
                // those of region reg plus one step, so the gaps, and E,
                // are the same for every region: work it out on region 0.
                let mut t: Vec<f64> = (o..o + k).map(|g| times.at(g, disk.duty)).collect();
                residual(&mut t, p)
            };
            sum += e * w * count as f64;
            weight += w * count as f64;
        }
    }
    let mlet_ns = sum / weight;
    Ok(Estimate {
        plan: *plan,
        segments_per_region: lay.m,
        pass_s: p / 1e9,
        throughput_bytes_per_s: lay.bytes() as f64 / (p * disk.duty) * 1e9,
        mlet_s: mlet_ns / 1e9,
    })
}

/// A Monte-Carlo estimate: mean and standard error, s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sampled {
    /// Mean latent error time, s.
    pub mlet_s: f64,
    /// Its standard error, s.
    pub std_error_s: f64,
    /// Scrub pass time from walking the order, s.
    pub pass_s: f64,
}

/// Most segments [`mlet_monte_carlo`] walks (it keeps a visit time per segment).
pub const MONTE_CARLO_MAX_SEGMENTS: u64 = 1 << 24;

/// The same model by sampling: walk the order request by request (each
/// request's time from the distance to the previous one), then draw
/// `samples` bursts (start uniform over the disk, occurrence uniform over
/// the pass) and time each until the first read of a segment it overlaps.
pub fn mlet_monte_carlo(
    disk: &Disk,
    plan: &Plan,
    span_bytes: u64,
    samples: u64,
    seed: u64,
) -> Result<Sampled> {
    let lay = Layout::new(disk, plan)?;
    let n = lay.segments();
    if n > MONTE_CARLO_MAX_SEGMENTS {
        return Err(Error::invalid(
            "monte carlo",
            format!("{n} segments: at most {MONTE_CARLO_MAX_SEGMENTS}"),
        ));
    }
    if span_bytes == 0 || span_bytes > lay.bytes() || samples < 2 {
        return Err(Error::invalid(
            "monte carlo",
            "span must fit the disk and samples be at least 2",
        ));
    }
    // the order, literally
    let mut order = Vec::with_capacity(n as usize);
    for j in 0..lay.m {
        for r in 0..lay.regions {
            order.push(r * lay.m + j);
        }
    }
    let mut visit = vec![0f64; n as usize];
    let mut now = 0.0;
    let mut head = lay.bytes(); // the previous pass ended at the last segment
    for &g in &order {
        let start = g * lay.seg;
        now += disk.request_ns(lay.seg, start.abs_diff(head)) / disk.duty;
        visit[g as usize] = now;
        head = start + lay.seg;
    }
    let p = now;
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let (mut sum, mut sum2) = (0.0, 0.0);
    let max_start = lay.bytes() - span_bytes;
    for _ in 0..samples {
        let x = rng.random_range(0..=max_start);
        let t = rng.random::<f64>() * p;
        let (a, b) = (x / lay.seg, (x + span_bytes - 1) / lay.seg);
        let wait = (a..=b)
            .map(|g| {
                let v = visit[g as usize];
                if v >= t {
                    v - t
                } else {
                    v + p - t
                }
            })
            .fold(f64::INFINITY, f64::min);
        sum += wait;
        sum2 += wait * wait;
    }
    let k = samples as f64;
    let mean = sum / k;
    let var = (sum2 / k - mean * mean).max(0.0) * k / (k - 1.0);
    Ok(Sampled {
        mlet_s: mean / 1e9,
        std_error_s: (var / k).sqrt() / 1e9,
        pass_s: p / 1e9,
    })
}

/// `fallow scrub-plan` as a request: every plan of `segments` ×
/// (sequential, staggered over each of `regions`), and a recommendation
/// per segment size. Front ends parse into it and print the
/// [`PlanReport`] it gives.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// The disk and its scrubber.
    pub disk: Disk,
    /// Bytes one burst of latent errors spans.
    pub span_bytes: u64,
    /// Segment (request) sizes, bytes.
    pub segments: Vec<u64>,
    /// Region counts of the staggered plans.
    pub regions: Vec<u64>,
    /// Also a Monte Carlo of this many bursts per plan ([`mlet_monte_carlo`]).
    pub check: Option<u64>,
    /// The Monte Carlo's seed.
    pub seed: u64,
}

impl Default for PlanRequest {
    /// Practical Scrubbing's disk ([`Disk::default`]) with bursts of 4 MiB,
    /// 64 KiB and 1 MiB segments (Fig. 4's flat VERIFY time up to 64 KB, and
    /// a large request), and region counts around Fig. 5b's crossover of 128.
    fn default() -> Self {
        PlanRequest {
            disk: Disk::default(),
            span_bytes: 4 << 20,
            segments: vec![64 << 10, 1 << 20],
            regions: vec![16, 128, 1024, 8192],
            check: None,
            seed: crate::dist::DEFAULT_SEED,
        }
    }
}

/// One plan's figures in a [`PlanReport`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PlanRow {
    /// The analytic estimate.
    #[serde(flatten)]
    pub estimate: Estimate,
    /// MLET over the sequential plan's at the same segment size.
    pub mlet_vs_sequential: f64,
    /// The Monte Carlo's, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monte_carlo: Option<Sampled>,
}

/// The order and region count to use at one segment size: the lowest MLET
/// among sequential and staggered orders of every power-of-two region
/// count from 2 to the most regions the burst span allows (a region holds
/// at least one burst), whatever the request's `regions` list.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Recommended {
    /// The segment size.
    pub segment_bytes: u64,
    /// 1 for the sequential order.
    pub regions: u64,
    /// Its MLET, s.
    pub mlet_s: f64,
    /// Its pass time, s.
    pub pass_s: f64,
    /// MLET over the sequential order's.
    pub mlet_vs_sequential: f64,
    /// Pass time over the sequential order's.
    pub pass_vs_sequential: f64,
    /// Region counts compared.
    pub candidates: u32,
}

/// What [`PlanRequest::run`] gives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanReport {
    /// The disk.
    pub disk: Disk,
    /// Bytes one burst spans.
    pub burst_span_bytes: u64,
    /// Each segment size's sequential plan, then its staggered ones.
    pub rows: Vec<PlanRow>,
    /// One per segment size.
    pub recommended: Vec<Recommended>,
}

/// Most region counts [`recommend`] tries at one segment size.
pub const MAX_CANDIDATES: u32 = 40;

/// Most segment sizes, and most region counts, in one [`PlanRequest`].
pub const MAX_LISTED: usize = 64;

impl PlanRequest {
    /// Plans the request evaluates (a progress bar's length).
    pub fn plans(&self) -> u64 {
        (self.segments.len() * (self.regions.len() + 1)) as u64
    }

    /// Evaluate every plan, calling `on_plan` with the number done after
    /// each (a Monte Carlo of a plan can take a second).
    pub fn run(&self, on_plan: &mut dyn FnMut(u64)) -> Result<PlanReport> {
        for (name, n) in [
            ("segments", self.segments.len()),
            ("regions", self.regions.len()),
        ] {
            if n == 0 || n > MAX_LISTED {
                let msg = format!("{n} values: give 1 to {MAX_LISTED}");
                return Err(Error::invalid(name, msg));
            }
        }
        let (disk, span) = (&self.disk, self.span_bytes);
        let mut rows = Vec::new();
        for &seg in &self.segments {
            let sequential = Plan {
                order: Order::Sequential,
                regions: 1,
                segment_bytes: seg,
            };
            let staggered = self.regions.iter().map(|&r| Plan {
                order: Order::Staggered,
                regions: r,
                segment_bytes: seg,
            });
            let mut seq_mlet = None;
            for plan in std::iter::once(sequential).chain(staggered) {
                let estimate = mlet(disk, &plan, span)?;
                let base = *seq_mlet.get_or_insert(estimate.mlet_s);
                let monte_carlo = match self.check {
                    Some(n) => {
                        // `mlet` above refused a zero segment
                        if disk.capacity_bytes / seg > MONTE_CARLO_MAX_SEGMENTS {
                            return Err(Error::invalid(
                                "check",
                                format!(
                                    "a Monte Carlo walks every segment: {} segments of {seg} bytes is over {MONTE_CARLO_MAX_SEGMENTS}; use a smaller capacity or a larger segment",
                                    disk.capacity_bytes / seg
                                ),
                            ));
                        }
                        Some(mlet_monte_carlo(disk, &plan, span, n, self.seed)?)
                    }
                    None => None,
                };
                rows.push(PlanRow {
                    mlet_vs_sequential: estimate.mlet_s / base,
                    estimate,
                    monte_carlo,
                });
                on_plan(rows.len() as u64);
            }
        }
        let recommended = self
            .segments
            .iter()
            .map(|&seg| recommend(disk, seg, span))
            .collect::<Result<Vec<_>>>()?;
        Ok(PlanReport {
            disk: self.disk,
            burst_span_bytes: span,
            rows,
            recommended,
        })
    }
}

/// The [`Recommended`] plan at `segment` bytes for bursts of `span` bytes.
pub fn recommend(disk: &Disk, segment: u64, span: u64) -> Result<Recommended> {
    let seq = mlet(
        disk,
        &Plan {
            order: Order::Sequential,
            regions: 1,
            segment_bytes: segment,
        },
        span,
    )?;
    let mut best = seq;
    let mut candidates = 1;
    let mut regions = 2u64;
    while candidates < MAX_CANDIDATES {
        let plan = Plan {
            order: Order::Staggered,
            regions,
            segment_bytes: segment,
        };
        // past the burst span (a region smaller than a burst) or the disk
        let Ok(e) = mlet(disk, &plan, span) else {
            break;
        };
        candidates += 1;
        if e.mlet_s < best.mlet_s {
            best = e;
        }
        regions = match regions.checked_mul(2) {
            Some(r) => r,
            None => break,
        };
    }
    Ok(Recommended {
        segment_bytes: segment,
        regions: best.plan.regions,
        mlet_s: best.mlet_s,
        pass_s: best.pass_s,
        mlet_vs_sequential: best.mlet_s / seq.mlet_s,
        pass_vs_sequential: best.pass_s / seq.pass_s,
        candidates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request gives one row per plan, sequential first at each segment
    /// size (each row against it), each row the plan's own estimate, and
    /// one recommendation per segment size, the best of what `recommend`
    /// compares; `on_plan` counts every plan.
    #[test]
    fn a_request_evaluates_every_plan_and_recommends_per_segment() {
        let req = PlanRequest {
            segments: vec![64 << 10, 1 << 20],
            regions: vec![16, 128],
            ..PlanRequest::default()
        };
        let mut calls = Vec::new();
        let r = req.run(&mut |done| calls.push(done)).unwrap();
        assert_eq!(calls, (1..=6).collect::<Vec<u64>>());
        assert_eq!(r.rows.len() as u64, req.plans());
        for (k, row) in r.rows.iter().enumerate() {
            let seg = req.segments[k / 3];
            let plan = row.estimate.plan;
            assert_eq!(plan.segment_bytes, seg);
            let seq = r.rows[k / 3 * 3].estimate;
            assert_eq!(seq.plan.order, Order::Sequential);
            assert_eq!(
                row.estimate,
                mlet(&req.disk, &plan, req.span_bytes).unwrap()
            );
            assert_eq!(row.mlet_vs_sequential, row.estimate.mlet_s / seq.mlet_s);
            assert!(row.monte_carlo.is_none());
        }
        assert_eq!(r.recommended.len(), 2);
        for rec in &r.recommended {
            // no listed plan beats the recommendation (it tries 2, 4, … regions)
            let best = r
                .rows
                .iter()
                .filter(|row| row.estimate.plan.segment_bytes == rec.segment_bytes)
                .map(|row| row.estimate.mlet_s)
                .fold(f64::INFINITY, f64::min);
            assert!(rec.mlet_s <= best * (1.0 + 1e-12), "{rec:?} against {best}");
        }
    }

    /// `check` on a disk of more segments than a Monte Carlo walks is an
    /// error naming `check`, before any sampling.
    #[test]
    fn a_check_too_large_for_the_disk_is_refused() {
        let req = PlanRequest {
            disk: Disk {
                capacity_bytes: 4_000_000_000_000,
                ..Disk::default()
            },
            check: Some(10),
            ..PlanRequest::default()
        };
        let e = req.run(&mut |_| {}).unwrap_err().to_string();
        assert!(
            e.starts_with("invalid check: a Monte Carlo walks every segment"),
            "{e}"
        );
    }

    fn small_disk() -> Disk {
        // 1 GiB, so the Monte Carlo walks 16,384 segments of 64 KiB
        Disk {
            capacity_bytes: 1 << 30,
            ..Disk::default()
        }
    }

    fn plan(order: Order, regions: u64, seg: u64) -> Plan {
        Plan {
            order,
            regions,
            segment_bytes: seg,
        }
    }

    #[test]
    fn analytic_matches_monte_carlo() {
        let d = small_disk();
        let cases = [
            (Order::Sequential, 1, 64 << 10, 1),
            (Order::Sequential, 1, 64 << 10, 1 << 20),
            (Order::Staggered, 16, 64 << 10, 512),
            (Order::Staggered, 16, 64 << 10, (1 << 20) + 12_345),
            (Order::Staggered, 128, 64 << 10, 4 << 20),
            (Order::Staggered, 128, 1 << 20, 3 << 20),
            (Order::Staggered, 7, 256 << 10, 5 << 20),
        ];
        for (k, (order, regions, seg, span)) in cases.into_iter().enumerate() {
            let p = plan(order, regions, seg);
            let a = mlet(&d, &p, span).unwrap();
            let m = mlet_monte_carlo(&d, &p, span, 200_000, 40 + k as u64).unwrap();
            assert!(
                (a.pass_s - m.pass_s).abs() < 1e-9 * a.pass_s,
                "{p:?}: pass {} vs walked {}",
                a.pass_s,
                m.pass_s
            );
            let z = (a.mlet_s - m.mlet_s) / m.std_error_s;
            assert!(
                z.abs() < 4.0,
                "{p:?} span {span}: analytic {} vs Monte Carlo {} ± {} (z = {z:.2})",
                a.mlet_s,
                m.mlet_s,
                m.std_error_s
            );
        }
    }

    #[test]
    fn an_isolated_error_waits_half_a_pass_whatever_the_order() {
        // one segment per burst: the single visit is one pass apart
        let d = Disk::default();
        for p in [
            plan(Order::Sequential, 1, 64 << 10),
            plan(Order::Staggered, 128, 64 << 10),
        ] {
            let e = mlet(&d, &p, 512).unwrap();
            // a 512-byte span straddles two segments in 1/128 of
            // placements, which saves a round at most (≪ the pass)
            assert!(
                (e.mlet_s / (e.pass_s / 2.0) - 1.0).abs() < 1e-4,
                "{p:?}: {e:?}"
            );
        }
    }

    #[test]
    fn one_region_staggered_is_sequential() {
        let d = Disk::default();
        let a = mlet(&d, &plan(Order::Sequential, 1, 1 << 20), 4 << 20).unwrap();
        let b = mlet(&d, &plan(Order::Staggered, 1, 1 << 20), 4 << 20).unwrap();
        assert!((a.mlet_s - b.mlet_s).abs() < 1e-9 * a.mlet_s);
        assert!((a.pass_s - b.pass_s).abs() < 1e-9 * a.pass_s);
    }

    #[test]
    fn the_seek_curve_is_calibrated_to_figure_5b() {
        // at 128 regions a staggered request costs a sequential one
        let d = Disk::default();
        let region = d.capacity_bytes / 128;
        let seq = d.request_ns(64 << 10, 0);
        let stag = d.request_ns(64 << 10, region);
        assert!((seq - stag).abs() < 1e-6 * seq, "{seq} {stag}");
        assert!(d.seek_ns(d.capacity_bytes) == d.full_stroke_ns);
    }

    #[test]
    fn bad_plans_are_refused() {
        let d = Disk::default();
        assert!(mlet(&d, &plan(Order::Staggered, 0, 65536), 512).is_err());
        assert!(mlet(&d, &plan(Order::Staggered, 128, 0), 512).is_err());
        assert!(mlet(&d, &plan(Order::Staggered, 128, 65536), 0).is_err());
        // a span over a region
        assert!(mlet(&d, &plan(Order::Staggered, 1 << 20, 65536), 1 << 20).is_err());
        let slow = Disk {
            full_stroke_ns: 1e6,
            ..Disk::default()
        };
        assert!(mlet(&slow, &plan(Order::Sequential, 1, 65536), 512).is_err());
    }
}
