//! Service-time models of a device, for traces without completion times and
//! for synthetic workloads.
//!
//! Written as `const:5ms`, `exp:5ms` (exponential with that mean),
//! `lognormal:5ms,cv=2` and `hyperexp:5ms,cv=4` (heavier tails, CV given;
//! the hyperexponential has balanced means), or
//! `disk[:rpm=7200,seek=0.6ms..16ms,rate=150MB,capacity=1TB]`: a simple
//! disk whose service time is seek by distance (track-to-track plus
//! full-stroke scaled by the square root of the distance, the classic
//! Ruemmler–Wilkes shape) + rotational latency (uniform over one
//! revolution) + transfer (size / media rate).

use crate::error::{Error, Result};
use crate::polled::{cancelled, CANCEL_EVERY_REQUESTS};
use crate::units::{parse_bytes, parse_duration_ns};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use rand_pcg::Pcg64Mcg;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;

/// A service-time model.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceModel {
    /// Every request takes the same time.
    Constant {
        /// Service time, ns.
        ns: u64,
    },
    /// Exponentially distributed service times.
    Exponential {
        /// Mean service time, ns.
        mean_ns: u64,
    },
    /// Lognormal service times with this mean and CV.
    Lognormal {
        /// Mean service time, ns.
        mean_ns: u64,
        /// Coefficient of variation.
        cv: f64,
    },
    /// Two-phase hyperexponential service times (balanced means), CV ≥ 1.
    Hyperexponential {
        /// Mean service time, ns.
        mean_ns: u64,
        /// Coefficient of variation.
        cv: f64,
    },
    /// Seek + rotation + transfer.
    Disk(DiskModel),
}

/// Parameters of the simple disk model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskModel {
    /// Spindle speed, revolutions per minute.
    pub rpm: f64,
    /// Seek time for a distance of one track (any non-zero distance), ns.
    pub track_to_track_ns: f64,
    /// Seek time across the whole capacity, ns.
    pub full_stroke_ns: f64,
    /// Media transfer rate, bytes per second.
    pub transfer_bytes_per_s: f64,
    /// Capacity over which seek distance is normalised, bytes.
    pub capacity_bytes: f64,
}

impl Default for DiskModel {
    /// A 7200 rpm SATA disk: 0.6 ms track-to-track, 16 ms full stroke,
    /// 150 MB/s, 1 TB.
    fn default() -> Self {
        DiskModel {
            rpm: 7200.0,
            track_to_track_ns: 0.6e6,
            full_stroke_ns: 16e6,
            transfer_bytes_per_s: 150e6,
            capacity_bytes: 1e12,
        }
    }
}

impl DiskModel {
    /// Time of one revolution, ns.
    pub fn revolution_ns(&self) -> f64 {
        60e9 / self.rpm
    }

    /// Seek time for a head movement of `distance_bytes`, ns.
    pub fn seek_ns(&self, distance_bytes: u64) -> f64 {
        if distance_bytes == 0 {
            return 0.0;
        }
        let frac = (distance_bytes as f64 / self.capacity_bytes).min(1.0);
        self.track_to_track_ns + (self.full_stroke_ns - self.track_to_track_ns) * frac.sqrt()
    }

    /// Transfer time of `size_bytes`, ns.
    pub fn transfer_ns(&self, size_bytes: u64) -> f64 {
        size_bytes as f64 / self.transfer_bytes_per_s * 1e9
    }
}

/// How a [`ServiceSampler`] draws the random part of each service time (a
/// disk's rotational position; the whole time of the exponential,
/// lognormal and hyperexponential models).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Draws {
    /// One seeded stream, in the order the requests come: the simulator's.
    #[default]
    InOrder,
    /// A function of the seed and the request (offset and size): two runs
    /// that issue the same requests draw the same times for them, whatever
    /// else runs in between. A paired comparison of two such runs (the FG
    /// alone against the FG beside BG work, on the emulated disk) then
    /// differs only by what the BG work did: its queueing and the head
    /// positions it left. The same request twice in one run draws the
    /// same time twice.
    PerRequest,
}

impl Draws {
    /// Every way, in the order of [`Draws::NAMES`].
    pub const ALL: [Draws; 2] = [Draws::InOrder, Draws::PerRequest];
    /// The names `fallow emulate-disk --draws` takes.
    pub const NAMES: [&'static str; 2] = ["in-order", "per-request"];

    /// The name of this way, as `--draws` takes it.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

impl fmt::Display for Draws {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Draws {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "draws",
                    format!(
                        "`{s}` is not a way to draw service times: give {}",
                        Self::NAMES.join(" or ")
                    ),
                )
            })
    }
}

impl ServiceModel {
    /// A sampler with its own seeded random stream.
    pub fn sampler(&self, seed: u64) -> ServiceSampler {
        self.sampler_drawing(seed, Draws::InOrder)
    }

    /// A sampler drawing as `draws` says, from `seed`.
    pub fn sampler_drawing(&self, seed: u64, draws: Draws) -> ServiceSampler {
        ServiceSampler {
            model: self.clone(),
            rng: Pcg64Mcg::seed_from_u64(seed),
            head_bytes: 0,
            seed,
            draws,
        }
    }

    /// Mean service time for requests of `size_bytes` at random positions, ns
    /// (for the disk model: mean seek over uniform distance + half a turn + transfer).
    pub fn mean_ns(&self, size_bytes: u64) -> f64 {
        match self {
            ServiceModel::Constant { ns } => *ns as f64,
            ServiceModel::Exponential { mean_ns }
            | ServiceModel::Lognormal { mean_ns, .. }
            | ServiceModel::Hyperexponential { mean_ns, .. } => *mean_ns as f64,
            ServiceModel::Disk(d) => {
                // distance between two uniform points on [0,1] has density
                // 2(1-x); E[sqrt(X)] = ∫ 2(1-x) sqrt(x) dx = 8/15.
                d.track_to_track_ns
                    + (d.full_stroke_ns - d.track_to_track_ns) * 8.0 / 15.0
                    + d.revolution_ns() / 2.0
                    + d.transfer_ns(size_bytes)
            }
        }
    }
}

/// Draws service times for successive requests.
#[derive(Debug, Clone)]
pub struct ServiceSampler {
    model: ServiceModel,
    rng: Pcg64Mcg,
    head_bytes: u64,
    seed: u64,
    draws: Draws,
}

/// The seed of one request's draws under [`Draws::PerRequest`]: the
/// sampler's seed, offset and size through SplitMix64's finaliser, so
/// requests a sector apart draw unrelated times.
fn request_seed(seed: u64, offset_bytes: u64, size_bytes: u32) -> u64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    mix(mix(seed ^ mix(offset_bytes)).wrapping_add(u64::from(size_bytes)))
}

impl ServiceSampler {
    /// Service time of the next request, ns (at least 1).
    pub fn service_ns(&mut self, offset_bytes: u64, size_bytes: u32) -> u64 {
        if self.draws == Draws::PerRequest {
            self.rng = Pcg64Mcg::seed_from_u64(request_seed(self.seed, offset_bytes, size_bytes));
        }
        let ns = match &self.model {
            ServiceModel::Constant { ns } => *ns as f64,
            ServiceModel::Exponential { mean_ns } => Exp::new(1.0 / *mean_ns as f64)
                .expect("mean checked positive at parse")
                .sample(&mut self.rng),
            ServiceModel::Lognormal { mean_ns, cv } => crate::dist::lognormal(*mean_ns as f64, *cv)
                .expect("mean and cv checked positive at parse")
                .sample(&mut self.rng),
            ServiceModel::Hyperexponential { mean_ns, cv } => {
                let (p, m1, m2) = crate::dist::h2_balanced(*mean_ns as f64, *cv);
                let m = if self.rng.random::<f64>() < p { m1 } else { m2 };
                m * Exp::new(1.0).expect("rate 1").sample(&mut self.rng)
            }
            ServiceModel::Disk(d) => {
                let seek = d.seek_ns(offset_bytes.abs_diff(self.head_bytes));
                let rotation = self.rng.random::<f64>() * d.revolution_ns();
                self.head_bytes = offset_bytes.saturating_add(size_bytes as u64);
                seek + rotation + d.transfer_ns(size_bytes as u64)
            }
        };
        (ns.round() as u64).max(1)
    }
}

/// Completion times of a FCFS single-server queue: each request starts when
/// it arrives or when the one before it completes, whichever is later.
pub fn fcfs_completions(
    arrival_ns: &[u64],
    offset_bytes: &[u64],
    size_bytes: &[u32],
    model: &ServiceModel,
    seed: u64,
) -> Vec<u64> {
    fcfs_completions_cancellable(arrival_ns, offset_bytes, size_bytes, model, seed, None)
        .expect("no cancel flag, never stopped")
}

/// [`fcfs_completions`] that gives up (`None`) soon after `cancel` is set:
/// it is read every [`CANCEL_EVERY_REQUESTS`] requests.
pub fn fcfs_completions_cancellable(
    arrival_ns: &[u64],
    offset_bytes: &[u64],
    size_bytes: &[u32],
    model: &ServiceModel,
    seed: u64,
    cancel: Option<&AtomicBool>,
) -> Option<Vec<u64>> {
    let mut sampler = model.sampler(seed);
    let mut free_at = 0u64;
    let mut out = Vec::with_capacity(arrival_ns.len());
    for (from, chunk) in arrival_ns.chunks(CANCEL_EVERY_REQUESTS).enumerate() {
        if cancelled(cancel) {
            return None;
        }
        let from = from * CANCEL_EVERY_REQUESTS;
        for (i, &arrival) in (from..).zip(chunk) {
            let service = sampler.service_ns(offset_bytes[i], size_bytes[i]);
            // saturating: a time past the u64 range stays at its end, never wraps before the arrival
            free_at = arrival.max(free_at).saturating_add(service);
            out.push(free_at);
        }
    }
    Some(out)
}

impl fmt::Display for ServiceModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceModel::Constant { ns } => write!(f, "const:{ns}ns"),
            ServiceModel::Exponential { mean_ns } => write!(f, "exp:{mean_ns}ns"),
            ServiceModel::Lognormal { mean_ns, cv } => write!(f, "lognormal:{mean_ns}ns,cv={cv}"),
            ServiceModel::Hyperexponential { mean_ns, cv } => {
                write!(f, "hyperexp:{mean_ns}ns,cv={cv}")
            }
            ServiceModel::Disk(d) => write!(
                f,
                "disk:rpm={},seek={}ns..{}ns,rate={}B,capacity={}B",
                d.rpm,
                d.track_to_track_ns,
                d.full_stroke_ns,
                d.transfer_bytes_per_s,
                d.capacity_bytes
            ),
        }
    }
}

/// Longest (mean) service time of one request a model takes: an hour, far
/// beyond any device, and small enough that the completions of a trace of
/// millions of requests stay far from 2⁶⁴ ns (`const:1e19ns` saturated).
pub const MAX_SERVICE_NS: u64 = 3_600_000_000_000;

fn too_slow() -> String {
    format!(
        "a service time above {} s (1 h) per request is beyond any device and the maximum",
        MAX_SERVICE_NS / 1_000_000_000
    )
}

impl FromStr for ServiceModel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = |m: String| Error::invalid("service model", format!("`{s}`: {m}"));
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        match kind.trim() {
            "const" | "constant" => {
                let ns = parse_duration_ns(arg)?;
                if ns == 0 {
                    return Err(bad("service time must be positive".into()));
                }
                if ns > MAX_SERVICE_NS {
                    return Err(bad(too_slow()));
                }
                Ok(ServiceModel::Constant { ns })
            }
            "exp" | "exponential" => {
                let mean_ns = parse_duration_ns(arg)?;
                if mean_ns == 0 {
                    return Err(bad("mean must be positive".into()));
                }
                if mean_ns > MAX_SERVICE_NS {
                    return Err(bad(too_slow()));
                }
                Ok(ServiceModel::Exponential { mean_ns })
            }
            "lognormal" | "lognorm" | "hyperexp" | "hyperexponential" | "h2" => {
                // `lognormal:5ms,cv=2` or `lognormal:mean=5ms,cv=2`
                let (mut mean_ns, mut cv) = (None, None);
                for item in arg.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                    match item.split_once('=') {
                        None | Some(("mean", _)) => {
                            let v = item.strip_prefix("mean=").unwrap_or(item);
                            mean_ns = Some(parse_duration_ns(v)?);
                        }
                        Some(("cv", v)) => {
                            cv = Some(
                                v.trim()
                                    .parse::<f64>()
                                    .ok()
                                    .filter(|c| c.is_finite() && *c > 0.0)
                                    .ok_or_else(|| bad(format!("cv `{v}` is not a positive number")))?,
                            )
                        }
                        Some((k, _)) => {
                            return Err(bad(format!("unknown parameter `{k}` (MEAN, cv=C)")))
                        }
                    }
                }
                let mean_ns = mean_ns
                    .filter(|&m| m > 0)
                    .ok_or_else(|| bad("needs a positive mean, e.g. lognormal:5ms,cv=2".into()))?;
                if mean_ns > MAX_SERVICE_NS {
                    return Err(bad(too_slow()));
                }
                let cv = cv.ok_or_else(|| bad("needs cv=, e.g. lognormal:5ms,cv=2".into()))?;
                if kind.trim().starts_with('l') {
                    Ok(ServiceModel::Lognormal { mean_ns, cv })
                } else if cv < 1.0 {
                    Err(bad(format!("a hyperexponential has cv >= 1, got {cv}")))
                } else {
                    Ok(ServiceModel::Hyperexponential { mean_ns, cv })
                }
            }
            "disk" => {
                let mut d = DiskModel::default();
                for kv in arg.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
                    let (k, v) = kv
                        .split_once('=')
                        .ok_or_else(|| bad(format!("`{kv}` is not key=value")))?;
                    match k {
                        "rpm" => {
                            d.rpm = v
                                .parse()
                                .map_err(|_| bad(format!("rpm `{v}` is not a number")))?
                        }
                        "seek" => {
                            let (lo, hi) = v.split_once("..").ok_or_else(|| {
                                bad("seek is `track-to-track..full-stroke`, e.g. 0.6ms..16ms"
                                    .into())
                            })?;
                            d.track_to_track_ns = parse_duration_ns(lo)? as f64;
                            d.full_stroke_ns = parse_duration_ns(hi)? as f64;
                        }
                        "rate" => d.transfer_bytes_per_s = parse_bytes(v)? as f64,
                        "capacity" => d.capacity_bytes = parse_bytes(v)? as f64,
                        _ => {
                            return Err(bad(format!(
                                "unknown disk parameter `{k}` (rpm, seek, rate, capacity)"
                            )))
                        }
                    }
                }
                if !(d.rpm > 0.0 && d.transfer_bytes_per_s > 0.0 && d.capacity_bytes > 0.0) {
                    return Err(bad("rpm, rate and capacity must be positive".into()));
                }
                if d.full_stroke_ns < d.track_to_track_ns {
                    return Err(bad("full-stroke seek is shorter than track-to-track".into()));
                }
                Ok(ServiceModel::Disk(d))
            }
            other => Err(bad(format!(
                "unknown model `{other}` (const:T, exp:MEAN, lognormal:MEAN,cv=C, hyperexp:MEAN,cv=C, disk[:k=v,…])"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-request draws give a request the time it had in a run without
    /// the requests slipped in between, once the head is where it was;
    /// in-order draws do not (the slipped-in requests take the stream's
    /// next values).
    #[test]
    fn per_request_draws_pair_two_runs_request_by_request() {
        let disk = ServiceModel::Disk(DiskModel::default());
        let expo = "exp:5ms".parse::<ServiceModel>().unwrap();
        let fg: Vec<(u64, u32)> = (0..200u64)
            .map(|i| ((i * 7_919 % 1_000) << 30, 4096))
            .collect();
        for model in [&disk, &expo] {
            for draws in [Draws::InOrder, Draws::PerRequest] {
                let mut alone = model.sampler_drawing(7, draws);
                let mut beside = model.sampler_drawing(7, draws);
                let (mut same, mut paired) = (0, 0);
                for (i, &(off, size)) in fg.iter().enumerate() {
                    let t_alone = alone.service_ns(off, size);
                    if i % 3 == 1 {
                        // a BG read elsewhere, then one at the FG's last
                        // position: the head is back where FG alone left it
                        beside.service_ns(1 << 39, 1 << 20);
                        let (prev, prev_size) = fg[i - 1];
                        beside.service_ns(prev, prev_size);
                    }
                    let t_beside = beside.service_ns(off, size);
                    if i % 3 == 1 {
                        paired += 1;
                        same += usize::from(t_alone == t_beside);
                    }
                }
                match draws {
                    Draws::PerRequest => assert_eq!(same, paired, "{model:?}"),
                    Draws::InOrder => assert!(same < paired / 10, "{model:?}: {same} of {paired}"),
                }
            }
        }
        assert_eq!("per-request".parse::<Draws>().unwrap(), Draws::PerRequest);
        assert_eq!("in-order".parse::<Draws>().unwrap(), Draws::InOrder);
        assert_eq!(Draws::InOrder.to_string(), "in-order");
        assert_eq!(Draws::PerRequest.to_string(), "per-request");
        let e = "random".parse::<Draws>().unwrap_err().to_string();
        assert!(e.contains("in-order or per-request"), "{e}");
    }

    /// Per-request draws keep the model's distribution: the disk's mean
    /// service time over random requests is its closed form.
    #[test]
    fn per_request_draws_keep_the_disk_models_mean() {
        let model = ServiceModel::Disk(DiskModel::default());
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        let n = 200_000;
        let offsets: Vec<u64> = (0..n)
            .map(|_| rng.random_range(0..1_000_000_000_000u64))
            .collect();
        // mean and variance of the times over the same requests
        let moments = |draws| {
            let mut s = model.sampler_drawing(3, draws);
            let t: Vec<f64> = offsets
                .iter()
                .map(|&o| s.service_ns(o, 4096) as f64)
                .collect();
            let mean = t.iter().sum::<f64>() / n as f64;
            let var = t.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
            (mean, var)
        };
        let (mean, var) = moments(Draws::PerRequest);
        let want = model.mean_ns(4096);
        assert!((mean / want - 1.0).abs() < 0.01, "{mean} vs {want}");
        // a rotation that did not vary, or varied less, would show here
        let (_, var_in_order) = moments(Draws::InOrder);
        assert!(
            (var / var_in_order - 1.0).abs() < 0.03,
            "{var} vs {var_in_order}"
        );
    }

    #[test]
    fn service_times_are_bounded() {
        for spec in [
            "const:1e19ns",
            "exp:2h",
            "lognormal:3601s,cv=2",
            "const:1e300s",
        ] {
            let e = spec.parse::<ServiceModel>().unwrap_err().to_string();
            assert!(e.contains("maximum"), "{spec}: {e}");
        }
        assert_eq!(
            "const:1h".parse::<ServiceModel>().unwrap(),
            ServiceModel::Constant { ns: MAX_SERVICE_NS }
        );
    }

    #[test]
    fn parses_models() {
        assert_eq!(
            "exp:5ms".parse::<ServiceModel>().unwrap(),
            ServiceModel::Exponential { mean_ns: 5_000_000 }
        );
        assert_eq!(
            "const:1s".parse::<ServiceModel>().unwrap(),
            ServiceModel::Constant { ns: 1_000_000_000 }
        );
        let ServiceModel::Disk(d) = "disk:rpm=5400,seek=1ms..20ms".parse().unwrap() else {
            panic!()
        };
        assert_eq!(
            (d.rpm, d.track_to_track_ns, d.full_stroke_ns),
            (5400.0, 1e6, 20e6)
        );
        assert!("exp:0".parse::<ServiceModel>().is_err());
        assert!("disk:rpm=x"
            .parse::<ServiceModel>()
            .unwrap_err()
            .to_string()
            .contains("rpm"));
        assert!("warp".parse::<ServiceModel>().is_err());
    }

    #[test]
    fn exponential_sample_mean() {
        let mut s = ServiceModel::Exponential { mean_ns: 1_000_000 }.sampler(7);
        let n = 200_000;
        let mean = (0..n).map(|_| s.service_ns(0, 4096) as f64).sum::<f64>() / n as f64;
        // standard error of the mean = 1e6/sqrt(2e5) ≈ 2236 ns; allow 5 sigma
        assert!((mean - 1e6).abs() < 5.0 * 2236.0, "{mean}");
    }

    #[test]
    fn heavy_tailed_models_have_their_mean_and_cv() {
        for (spec, cv) in [("lognormal:2ms,cv=2", 2.0), ("hyperexp:mean=2ms,cv=3", 3.0)] {
            let m: ServiceModel = spec.parse().unwrap();
            assert_eq!(m.mean_ns(4096), 2e6);
            assert_eq!(m.to_string().parse::<ServiceModel>().unwrap(), m);
            let mut s = m.sampler(5);
            let n = 400_000;
            let x: Vec<f64> = (0..n).map(|_| s.service_ns(0, 4096) as f64).collect();
            let mean = x.iter().sum::<f64>() / n as f64;
            let sd = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
            // SE of the mean is cv·mean/√n ≈ 0.5 % at cv 3; allow 2 %
            assert!((mean / 2e6 - 1.0).abs() < 0.02, "{spec}: mean {mean}");
            assert!(
                (sd / mean / cv - 1.0).abs() < 0.08,
                "{spec}: cv {}",
                sd / mean
            );
        }
        assert!("hyperexp:2ms,cv=0.5".parse::<ServiceModel>().is_err());
        assert!("lognormal:2ms".parse::<ServiceModel>().is_err());
        assert!("lognormal:cv=2".parse::<ServiceModel>().is_err());
    }

    #[test]
    fn disk_mean_matches_closed_form() {
        let d = DiskModel::default();
        let m = ServiceModel::Disk(d);
        let mut s = m.sampler(3);
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let n = 200_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let off = (rng.random::<f64>() * d.capacity_bytes) as u64;
            sum += s.service_ns(off, 4096) as f64;
        }
        let mean = sum / n as f64;
        let expect = m.mean_ns(4096);
        assert!((mean / expect - 1.0).abs() < 0.01, "{mean} vs {expect}");
    }
}
