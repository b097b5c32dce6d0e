//! `cdf-based(angle)`: idle-wait only when idle intervals are highly
//! variable, and then for as long as the body of their distribution lasts;
//! afterwards run BG requests back to back until an FG request arrives.
//!
//! Mi et al. §4 ("CDF-Based") and §4.3 with Fig. 4. The policy keeps an
//! online cumulative histogram of the idle intervals it has seen
//! ([`IdleCdf`]). With x normalised by the mean (§3.1, Fig. 1), when the
//! CV is below 1 it does not wait at all (§3.1: "no idle wait is necessary
//! for systems with idle intervals of low variability"); otherwise the wait
//! is "the point in the histogram where the sharp increasing portion of the
//! body ends and the slow increasing part of the tail starts … when the
//! slope decreases to a predefined angle, for example, 30 degree" (§4.3).
//! For exponential idle intervals (CV = 1) that point is
//! `mean · ln(1/tan 30°) ≈ 0.549 · mean`.
//!
//! Reading the slope off a histogram: the empirical CDF is cut into
//! equal-probability steps (1 % each, fewer while there are less than 16
//! intervals per step) and the slope of each step is its secant,
//! `ΔF / (Δx / mean)`. Steps adapt to the data: narrow where intervals are
//! dense, wide in the sparse tail, so neither empty bins among tiny
//! intervals nor a thin tail fake a crossing, and the noise of each slope
//! is the same everywhere. The wait is where, after the steepest step, the
//! slope first drops to `tan(angle)`, interpolated linearly between the
//! midpoints of the two steps around the crossing — but never further past
//! their common edge than half the steeper step, so that when the next
//! step is much wider (a gap in the data) the body ends where the gap
//! starts. When no step is steeper than `tan(angle)` there is no body to
//! skip and the wait is 0.
//!
//! Warm-up (the paper does not say what happens before there is a
//! histogram): until `warmup` intervals have been seen the policy does not
//! wait, as for low CV — nothing yet says waiting pays — so its first
//! decisions are those of `aggressive`.
//!
//! The histogram is fixed-size (976 bins of u64, 1 ns … 2⁶⁴ ns, relative bin
//! width 3–6 %), so learning is O(1) per interval; the wait and the 90th
//! percentile are re-read from it lazily, at most every 64 new intervals
//! once more than 4096 have been seen (every new interval early on).

use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "cdf-based",
    aliases: &[],
    summary: "no wait when idle CV < 1, else wait until the idle CDF's slope falls to tan(angle); then BG until FG arrives",
    keys: &[
        Param::new("angle", ParamKind::Number("DEGREES"), "30"),
        Param::new("warmup", ParamKind::Count, "32").note("first intervals, no wait"),
        Param::new("min_wait", ParamKind::Duration, "0s").note("floor under the wait").example("50ms"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: CdfBased::build,
    knob: Some(Knob::factor("angle", 1.0, 89.0)),
    size_param: None,
    interval_rule: None,
};

/// Sub-bins per octave (a power of two) and its log2.
const SUB: usize = 16;
const SUB_BITS: u32 = 4;
/// Exact bins below `SUB` ns, then `SUB` linear sub-bins per octave up to 2⁶⁴.
const BINS: usize = SUB + (64 - SUB_BITS as usize) * SUB;
/// Equal-probability steps for the slope: at most 100 (1 % each), and at
/// least 16 intervals in each.
const MAX_STEPS: usize = 100;
const MIN_PER_STEP: u64 = 16;

fn bin_of(x: u64) -> usize {
    if x < SUB as u64 {
        return x as usize;
    }
    let e = 63 - x.leading_zeros(); // ≥ SUB_BITS
    let sub = ((x >> (e - SUB_BITS)) as usize) & (SUB - 1);
    SUB + (e - SUB_BITS) as usize * SUB + sub
}

/// Lower edge of bin `i`, ns; `bin_lo(BINS)` is 2⁶⁴.
fn bin_lo(i: usize) -> f64 {
    if i < SUB {
        return i as f64;
    }
    let k = i - SUB;
    let e = k / SUB; // octave above the first, at most 60
    let sub = (k % SUB) as f64;
    // an exact power of two without powi (this is on the policy's hot path)
    (SUB as f64 + sub) * (1u64 << e) as f64
}

/// What the histogram says at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IdleEstimate {
    /// Intervals seen when it was computed.
    pub n: u64,
    /// Mean idle interval, ns.
    pub mean_ns: f64,
    /// Coefficient of variation (population standard deviation / mean).
    pub cv: f64,
    /// Idle wait read off the CDF's slope (0 when CV < 1), ns.
    pub wait_ns: u64,
    /// 90th percentile of idle intervals, ns.
    pub p90_ns: f64,
}

/// Online cumulative histogram of idle intervals with exact running mean
/// and variance (Welford) — the structure of Mi et al. §4.3, shared by
/// `cdf-based`, `cdf-estimates` and `bursty-cdf-estimates`.
#[derive(Debug, Clone)]
pub struct IdleCdf {
    counts: Box<[u64]>,
    n: u64,
    mean: f64,
    m2: f64,
    /// Occupied bin range (valid when `n > 0`).
    lo: usize,
    hi: usize,
    tan: f64,
    est: IdleEstimate,
}

impl IdleCdf {
    /// An empty histogram whose wait is read at slope `tan(angle_deg)`.
    pub fn new(angle_deg: f64) -> Self {
        IdleCdf {
            counts: vec![0; BINS].into_boxed_slice(),
            n: 0,
            mean: 0.0,
            m2: 0.0,
            lo: BINS,
            hi: 0,
            tan: angle_deg.to_radians().tan(),
            est: IdleEstimate::default(),
        }
    }

    /// Learn one idle interval, ns.
    pub fn observe(&mut self, idle_ns: u64) {
        let b = bin_of(idle_ns);
        self.counts[b] += 1;
        self.lo = self.lo.min(b);
        self.hi = self.hi.max(b);
        self.n += 1;
        let x = idle_ns as f64;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Intervals seen.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean idle interval, ns (exact).
    pub fn mean_ns(&self) -> f64 {
        self.mean
    }

    /// Coefficient of variation (exact; population standard deviation, as
    /// [`crate::stats::mean_cv`]).
    pub fn cv(&self) -> f64 {
        if self.n == 0 || self.mean <= 0.0 {
            return 0.0;
        }
        (self.m2 / self.n as f64).sqrt() / self.mean
    }

    /// Split between small and large intervals, (CV + 1) · mean, ns (§3.2).
    pub fn split_ns(&self) -> f64 {
        (self.cv() + 1.0) * self.mean
    }

    /// The wait and the 90th percentile, recomputed when enough new
    /// intervals arrived since the last time (see the module doc).
    pub fn estimate(&mut self) -> IdleEstimate {
        let stale = self.n - self.est.n;
        if stale > 0 && stale >= (self.est.n / 64).clamp(1, 64) {
            self.est = self.compute();
        }
        self.est
    }

    /// The wait and the 90th percentile from the histogram as it is now.
    pub fn compute(&self) -> IdleEstimate {
        let cv = self.cv();
        IdleEstimate {
            n: self.n,
            mean_ns: self.mean,
            cv,
            wait_ns: if cv < 1.0 { 0 } else { self.body_end_ns() },
            p90_ns: self.quantile_ns(0.9),
        }
    }

    /// Quantile `q` in [0, 1], ns, interpolating linearly inside a bin.
    pub fn quantile_ns(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let target = q.clamp(0.0, 1.0) * self.n as f64;
        let mut below = 0.0;
        for i in self.lo..=self.hi {
            let c = self.counts[i] as f64;
            if c > 0.0 && below + c >= target {
                let (a, b) = (bin_lo(i), bin_lo(i + 1));
                return a + (target - below) / c * (b - a);
            }
            below += c;
        }
        bin_lo(self.hi + 1)
    }

    /// Where the CDF's slope (x in units of the mean) first falls to
    /// `tan(angle)` after its steepest point, ns (§4.3, Fig. 4).
    fn body_end_ns(&self) -> u64 {
        // Secants between equal-probability steps (see the module doc).
        let k = (self.n / MIN_PER_STEP).min(MAX_STEPS as u64) as usize;
        if k < 2 || self.mean <= 0.0 {
            return 0;
        }
        let mut x = [0.0f64; MAX_STEPS + 1];
        self.quantiles_into(&mut x[..=k]);
        let rise = self.mean / k as f64; // ΔF = 1/k, times the mean for x/mean
        let step = |j: usize| {
            let dx = x[j + 1] - x[j];
            let s = if dx > 0.0 { rise / dx } else { f64::INFINITY };
            (s, 0.5 * (x[j] + x[j + 1]))
        };
        let peak = (0..k)
            .max_by(|&a, &b| step(a).0.total_cmp(&step(b).0))
            .expect("k ≥ 2");
        if step(peak).0 <= self.tan {
            return 0;
        }
        let (mut prev_s, mut prev_x) = step(peak);
        for (j, &edge) in x.iter().enumerate().take(k).skip(peak + 1) {
            let (s, m) = step(j);
            if s <= self.tan {
                // interpolate between the midpoints of the two steps, but
                // no further past their common edge than the steeper
                // step's half-width: a much wider step is a gap in the data,
                // and the body ends where the gap starts
                let f = if prev_s.is_finite() {
                    (prev_s - self.tan) / (prev_s - s)
                } else {
                    1.0
                };
                let at = (prev_x + f * (m - prev_x)).min(2.0 * edge - prev_x);
                return at.round() as u64;
            }
            (prev_s, prev_x) = (s, m);
        }
        // the slope never falls to the angle: the whole range is body
        x[k].round() as u64
    }

    /// Quantiles at `j / (len − 1)` for `j = 0..len`, in one pass.
    fn quantiles_into(&self, out: &mut [f64]) {
        let steps = (out.len() - 1) as f64;
        let mut below = 0.0;
        let mut j = 0;
        for i in self.lo..=self.hi {
            let c = self.counts[i] as f64;
            if c == 0.0 {
                continue;
            }
            let (a, b) = (bin_lo(i), bin_lo(i + 1));
            while j < out.len() {
                let target = j as f64 / steps * self.n as f64;
                if target > below + c {
                    break;
                }
                out[j] = a + (target - below).max(0.0) / c * (b - a);
                j += 1;
            }
            below += c;
        }
        // rounding can leave the top quantile past the last bin's count
        for v in &mut out[j..] {
            *v = bin_lo(self.hi + 1);
        }
    }
}

/// Parameters of [`CdfBased`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CdfBasedConfig {
    /// Slope angle that ends the CDF's body, degrees in (0, 90).
    pub angle_deg: f64,
    /// Idle intervals to see before the histogram is trusted.
    pub warmup: u64,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
    /// Least idle wait, ns, whatever the histogram says (0: none, as in
    /// the paper). Not Mi et al.'s: live, FG bursts whose reads are
    /// served unevenly leave idle gaps of a few ms inside them; those join
    /// the histogram, its body ends after them and the wait comes out a
    /// few ms, so BG work starts inside bursts (docs/native.md: the 4–8 s
    /// shape's third round, 26 collisions). A floor no such gap passes
    /// keeps the paper's wait everywhere else.
    pub min_wait_ns: u64,
}

impl Default for CdfBasedConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(CdfBasedConfig::take)
    }
}

impl CdfBasedConfig {
    /// Take `angle=`, `warmup=`, `size=` and `min_wait=` (shared with the estimate
    /// policies), each not given from the key table.
    pub(crate) fn take(p: &mut Params) -> Result<Self> {
        let angle_deg = p.number("angle")?;
        if !(angle_deg > 0.0 && angle_deg < 90.0) {
            return Err(Error::invalid(
                "policy angle",
                format!("must be between 0 and 90 degrees, got {angle_deg}"),
            ));
        }
        let warmup = p.number("warmup")?;
        if !(warmup >= 0.0 && warmup.fract() == 0.0) {
            return Err(Error::invalid(
                "policy warmup",
                format!("must be a whole number of idle intervals, got {warmup}"),
            ));
        }
        Ok(CdfBasedConfig {
            angle_deg,
            warmup: warmup as u64,
            size_bytes: p.bytes("size")?,
            min_wait_ns: p.duration_ns("min_wait")?,
        })
    }

    /// The wait to use for the histogram's `wait_ns`: no shorter than
    /// `min_wait`.
    pub fn floored(&self, wait_ns: u64) -> u64 {
        wait_ns.max(self.min_wait_ns)
    }
}

/// The CDF-based policy.
#[derive(Debug, Clone)]
pub struct CdfBased {
    /// Its parameters.
    pub config: CdfBasedConfig,
    cdf: IdleCdf,
}

impl CdfBased {
    /// A policy with these parameters and no history.
    pub fn new(config: CdfBasedConfig) -> Self {
        CdfBased {
            cdf: IdleCdf::new(config.angle_deg),
            config,
        }
    }

    /// Build from `angle=`, `warmup=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = CdfBasedConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(CdfBased::new(config)))
    }

    /// The idle wait it would use now, ns.
    pub fn wait_ns(&mut self) -> u64 {
        self.config.floored(if self.cdf.count() < self.config.warmup {
            0
        } else {
            self.cdf.estimate().wait_ns
        })
    }
}

impl Policy for CdfBased {
    fn name(&self) -> &str {
        "cdf-based"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        let size = self.config.size_bytes.unwrap_or(ctx.bg_size_bytes);
        Decision::Start(Start::until_fg(self.wait_ns(), size))
    }

    fn on_idle_end(&mut self, idle_ns: u64, _collided: bool) {
        self.cdf.observe(idle_ns);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `n` evenly spaced quantiles of a distribution given its inverse CDF:
    /// a sample whose histogram is the distribution, without noise.
    fn quantiles(n: usize, inv: impl Fn(f64) -> f64) -> Vec<u64> {
        (0..n)
            .map(|i| inv((i as f64 + 0.5) / n as f64).round() as u64)
            .collect()
    }

    fn cdf_of(xs: &[u64]) -> IdleCdf {
        let mut c = IdleCdf::new(30.0);
        for &x in xs {
            c.observe(x);
        }
        c
    }

    #[test]
    fn bins_tile_the_line() {
        for i in 0..BINS {
            assert!(bin_lo(i) < bin_lo(i + 1), "{i}");
            let lo = bin_lo(i) as u64;
            assert_eq!(bin_of(lo), i, "lower edge of {i}");
            if i + 1 < BINS {
                assert_eq!(bin_of(bin_lo(i + 1) as u64 - 1), i, "upper end of {i}");
            }
        }
        assert_eq!(bin_of(u64::MAX), BINS - 1);
        assert_eq!(bin_lo(BINS), 2f64.powi(64));
        // relative width between 1/32 and 1/16 above the exact bins
        for i in SUB..BINS {
            let w = (bin_lo(i + 1) - bin_lo(i)) / bin_lo(i);
            assert!((1.0 / 32.0..=1.0 / 16.0).contains(&w), "{i}: {w}");
        }
    }

    #[test]
    fn mean_cv_and_quantiles_by_hand() {
        // 1, 2, …, 1000 ms: mean 500.5 ms, population sd √((1000²−1)/12) ms
        let xs: Vec<u64> = (1..=1000).map(|i| i * 1_000_000).collect();
        let c = cdf_of(&xs);
        assert_eq!(c.count(), 1000);
        assert!((c.mean_ns() - 500.5e6).abs() < 1e-3);
        let sd = ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt() * 1e6;
        assert!((c.cv() - sd / 500.5e6).abs() < 1e-12);
        // 900 of the 1000 values are ≤ 900 ms; bin resolution ≤ 1/16
        let p90 = c.quantile_ns(0.9);
        assert!((p90 - 900e6).abs() < 900e6 / 32.0, "{p90}");
        let p50 = c.quantile_ns(0.5);
        assert!((p50 - 500e6).abs() < 500e6 / 32.0, "{p50}");
    }

    #[test]
    fn low_cv_means_no_wait() {
        // uniform on [50, 150] ms: CV = 50/(√3·100) ≈ 0.29
        let xs = quantiles(10_000, |u| 50e6 + 100e6 * u);
        let c = cdf_of(&xs);
        assert!(c.cv() < 1.0);
        assert_eq!(c.compute().wait_ns, 0);
    }

    #[test]
    fn exponential_slope_reaches_tan_30_at_ln_sqrt3() {
        // F(x) = 1 − e^{−x/m}; in units of the mean the slope is e^{−u},
        // which is tan 30° = 1/√3 at u = ln √3 ≈ 0.5493. (CV is exactly 1,
        // on the gate's edge, so read the slope directly.)
        let m = 10e6;
        let xs = quantiles(200_000, |u| -m * (1.0 - u).ln());
        let c = cdf_of(&xs);
        let want = m * 3f64.sqrt().ln();
        let got = c.body_end_ns() as f64;
        assert!((got - want).abs() < 0.02 * want, "wait {got}, want {want}");
        // a smaller angle ends the body later: tan 20° at u = −ln tan 20°
        let mut c20 = IdleCdf::new(20.0);
        for &x in &xs {
            c20.observe(x);
        }
        let want20 = -m * 20f64.to_radians().tan().ln();
        let got20 = c20.body_end_ns() as f64;
        assert!(
            (got20 - want20).abs() < 0.02 * want20,
            "{got20} vs {want20}"
        );
    }

    /// Lomax (Pareto II) intervals, shape 3, scale `lambda`: F(x) = 1 −
    /// (1 + x/λ)^−3, mean λ/2, CV √3. In units of the mean the slope is
    /// 1.5·(1 + x/λ)^−4, which is tan 30° at x = λ·((1.5/tan 30°)^¼ − 1)
    /// ≈ 0.2696·λ; the 90th percentile is λ·(10^⅓ − 1) ≈ 1.1544·λ.
    pub(crate) fn lomax3(n: usize, lambda: f64) -> Vec<u64> {
        quantiles(n, |u| lambda * ((1.0 - u).powf(-1.0 / 3.0) - 1.0))
    }

    pub(crate) fn lomax3_wait(lambda: f64) -> f64 {
        lambda * ((1.5 / 30f64.to_radians().tan()).powf(0.25) - 1.0)
    }

    #[test]
    fn heavy_tailed_wait_and_p90_in_closed_form() {
        let lambda = 20e6;
        let c = cdf_of(&lomax3(200_000, lambda));
        assert!(c.cv() > 1.0, "{}", c.cv());
        let e = c.compute();
        let want = lomax3_wait(lambda);
        assert!(
            (e.wait_ns as f64 - want).abs() < 0.02 * want,
            "wait {}, want {want}",
            e.wait_ns
        );
        let p90 = lambda * (10f64.powf(1.0 / 3.0) - 1.0);
        assert!((e.p90_ns - p90).abs() < 0.01 * p90, "{}", e.p90_ns);
    }

    #[test]
    fn hyperexponential_wait_matches_a_separate_root_finder() {
        // mixture p·Exp(mean a) + (1−p)·Exp(mean b), CV > 1
        let (p, a, b) = (0.8, 1e6, 20e6);
        let mean = p * a + (1.0 - p) * b;
        let cdf = |x: f64| 1.0 - p * (-x / a).exp() - (1.0 - p) * (-x / b).exp();
        let inv = |u: f64| {
            let (mut lo, mut hi) = (0.0, 1e12);
            for _ in 0..200 {
                let mid = 0.5 * (lo + hi);
                if cdf(mid) < u {
                    lo = mid
                } else {
                    hi = mid
                }
            }
            0.5 * (lo + hi)
        };
        // slope in mean units: mean · density, decreasing; solve = tan 30°
        let slope = |x: f64| mean * (p / a * (-x / a).exp() + (1.0 - p) / b * (-x / b).exp());
        let tan = 30f64.to_radians().tan();
        let (mut lo, mut hi) = (0.0, 1e9);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if slope(mid) > tan {
                lo = mid
            } else {
                hi = mid
            }
        }
        let want = 0.5 * (lo + hi);
        let c = cdf_of(&quantiles(200_000, inv));
        assert!(c.cv() > 1.0);
        let got = c.compute().wait_ns as f64;
        assert!((got - want).abs() < 0.03 * want, "wait {got}, want {want}");
    }

    #[test]
    fn no_step_steeper_than_the_angle_means_no_wait() {
        // exponential in mean units has slope e^{−u} ≤ 1 < tan 80° ≈ 5.67
        let xs = quantiles(100_000, |u| -10e6 * (1.0 - u).ln());
        let mut c = IdleCdf::new(80.0);
        for &x in &xs {
            c.observe(x);
        }
        assert!(c.cv() > 0.99);
        assert_eq!(c.compute().wait_ns, 0);
    }

    #[test]
    fn warm_up_waits_nothing() {
        let mut p = CdfBased::new(CdfBasedConfig {
            warmup: 100,
            ..CdfBasedConfig::default()
        });
        // nine 1 ms intervals for every 1 s one: CV ≈ 2.8, a steep body at 1 ms
        let xs = (0..100).map(|i| {
            if i % 10 == 9 {
                1_000_000_000
            } else {
                1_000_000
            }
        });
        for (i, x) in xs.enumerate() {
            assert_eq!(p.wait_ns(), 0, "still warming up after {i}");
            p.on_idle_end(x, false);
        }
        assert!(p.cdf.cv() > 1.0);
        let learned = p.cdf.compute().wait_ns;
        assert!(learned >= 1_000_000, "{learned}");
        assert_eq!(p.wait_ns(), learned);
    }

    #[test]
    fn policy_waits_for_the_learned_wait_then_runs_until_fg() {
        use crate::service::BgService;
        let mut p = CdfBased::new(CdfBasedConfig::default());
        for x in lomax3(100_000, 20e6) {
            p.on_idle_end(x, false);
        }
        let want = p.cdf.compute().wait_ns;
        let svc = BgService::Exponential { mean_ns: 1_000_000 };
        assert_eq!(
            crate::policy::testing::on_idle_at(&mut p, 0, svc, 4096),
            Decision::Start(Start::until_fg(want, 4096))
        );
        assert!(want > 0);
    }

    #[test]
    fn parameters_are_checked() {
        let b = |s: &str| ENTRY.build_with(Params::parse(s).unwrap().1);
        assert!(b("cdf-based:angle=45,warmup=10,size=4KiB").is_ok());
        assert!(b("cdf-based:angle=90").is_err());
        assert!(b("cdf-based:angle=0").is_err());
        assert!(b("cdf-based:warmup=1.5").is_err());
        assert!(b("cdf-based:T=1").is_err());
    }
}
