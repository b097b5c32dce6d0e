//! Synthetic FG workloads: an arrival process plus a service model through a
//! FCFS queue, giving a [`Trace`] with completion times. Seeded and
//! reproducible: the same seed gives the same trace, byte for byte.
//!
//! Arrival processes follow Mi et al. §4.1 (Erlang for low-CV idle times,
//! MMPP for bursty ones) plus Poisson, lognormal and hyperexponential
//! inter-arrival times. Each is written the same way on the command line,
//! in Python and in configs (`poisson`, `erlang:k=4`, `lognormal:cv=3`,
//! `hyperexp:cv=4`, `mmpp:cv=9,burst=1000`, `mmpp:rates=40/1,sojourn=20s/60s`;
//! any of them with `rate=R`), parsed by one [`FromStr`](std::str::FromStr)
//! (see [`ArrivalProcess::parse_with_rate`]). The two-state MMPP can be
//! given by its rates and mean sojourn times, or fitted to a mean rate, a
//! CV and a burst length ([`fit_mmpp2`], whose documentation explains the
//! fit).
//!
//! Utilisation as an input: [`rate_for_utilization`] gives the arrival rate
//! that keeps a device with a service model busy a given share of the time.

mod args;
mod mmpp;
mod parse;

pub use args::ArrivalArgs;
pub use mmpp::{fit_mmpp2, mmpp2_stats, Mmpp2Stats};

use crate::dist::{h2_balanced, lognormal};
use crate::error::{Error, Result};
use crate::service::{fcfs_completions, ServiceModel};
use crate::trace::{Op, Trace};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Gamma};
use rand_pcg::Pcg64Mcg;

/// Most requests a synthetic workload may have. Generating and simulating
/// take about 100 bytes per request (`fallow simulate --workload poisson
/// --requests 1000000`: 101 MB peak RSS), so this is about 10 GB: more is
/// refused with an error rather than an allocation abort.
pub const MAX_SYNTHETIC_REQUESTS: usize = 100_000_000;
/// Latest arrival a synthetic workload may have, ns (2⁶², 146 years): a
/// timestamp is a u64 of ns (584 years), and completion times and the
/// simulation's BG work are added on top, so arrivals keep a 4× margin.
pub const MAX_SPAN_NS: f64 = (1u64 << 62) as f64;

/// Arrival rate (1/s) that keeps a FCFS device with `service` busy a share
/// `utilization` of the time for requests of `size_bytes`: ρ = λ·E[S].
pub fn rate_for_utilization(
    utilization: f64,
    service: &ServiceModel,
    size_bytes: u64,
) -> Result<f64> {
    if !(utilization.is_finite() && utilization > 0.0 && utilization < 1.0) {
        return Err(Error::invalid(
            "utilization",
            format!("must be a fraction between 0 and 1 (0.3 = 30 %), got {utilization}"),
        ));
    }
    Ok(utilization / (service.mean_ns(size_bytes) / 1e9))
}

/// An arrival process, rates in requests per second.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrivalProcess {
    /// Exponential inter-arrival times (CV = 1).
    Poisson {
        /// Mean arrival rate, 1/s.
        rate_per_s: f64,
    },
    /// Erlang-k inter-arrival times (CV = 1/√k).
    Erlang {
        /// Mean arrival rate, 1/s.
        rate_per_s: f64,
        /// Number of phases.
        k: u32,
    },
    /// Lognormal inter-arrival times with the given mean and CV.
    Lognormal {
        /// Mean arrival rate, 1/s.
        rate_per_s: f64,
        /// Coefficient of variation of inter-arrival times.
        cv: f64,
    },
    /// Two-phase hyperexponential with balanced means, CV ≥ 1.
    Hyperexponential {
        /// Mean arrival rate, 1/s.
        rate_per_s: f64,
        /// Coefficient of variation of inter-arrival times.
        cv: f64,
    },
    /// Two-state Markov-modulated Poisson process.
    Mmpp2 {
        /// Arrival rate in state 0 and 1, 1/s.
        rate_per_s: [f64; 2],
        /// Rate of leaving state 0 and state 1, 1/s.
        switch_per_s: [f64; 2],
    },
}

impl ArrivalProcess {
    /// Long-run mean arrival rate, 1/s.
    pub fn mean_rate_per_s(&self) -> f64 {
        match *self {
            ArrivalProcess::Poisson { rate_per_s }
            | ArrivalProcess::Erlang { rate_per_s, .. }
            | ArrivalProcess::Lognormal { rate_per_s, .. }
            | ArrivalProcess::Hyperexponential { rate_per_s, .. } => rate_per_s,
            ArrivalProcess::Mmpp2 {
                rate_per_s,
                switch_per_s,
            } => {
                // stationary probability of state 0 is r10 / (r01 + r10)
                let p0 = switch_per_s[1] / (switch_per_s[0] + switch_per_s[1]);
                p0 * rate_per_s[0] + (1.0 - p0) * rate_per_s[1]
            }
        }
    }

    /// The same process with its time axis stretched so its mean rate is
    /// `rate_per_s`: CVs, burst lengths (in arrivals) and correlations stay.
    pub fn with_mean_rate(&self, rate_per_s: f64) -> Result<ArrivalProcess> {
        if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
            return Err(Error::invalid(
                "arrival rate",
                format!("must be positive and finite, got {rate_per_s}"),
            ));
        }
        self.validate()?;
        let f = rate_per_s / self.mean_rate_per_s();
        Ok(match *self {
            ArrivalProcess::Poisson { .. } => ArrivalProcess::Poisson { rate_per_s },
            ArrivalProcess::Erlang { k, .. } => ArrivalProcess::Erlang { rate_per_s, k },
            ArrivalProcess::Lognormal { cv, .. } => ArrivalProcess::Lognormal { rate_per_s, cv },
            ArrivalProcess::Hyperexponential { cv, .. } => {
                ArrivalProcess::Hyperexponential { rate_per_s, cv }
            }
            ArrivalProcess::Mmpp2 {
                rate_per_s: r,
                switch_per_s: s,
            } => ArrivalProcess::Mmpp2 {
                rate_per_s: [r[0] * f, r[1] * f],
                switch_per_s: [s[0] * f, s[1] * f],
            },
        })
    }

    /// Coefficient of variation of the inter-arrival times.
    pub fn interarrival_cv(&self) -> f64 {
        match *self {
            ArrivalProcess::Poisson { .. } => 1.0,
            ArrivalProcess::Erlang { k, .. } => 1.0 / (k.max(1) as f64).sqrt(),
            ArrivalProcess::Lognormal { cv, .. } | ArrivalProcess::Hyperexponential { cv, .. } => {
                cv
            }
            ArrivalProcess::Mmpp2 {
                rate_per_s,
                switch_per_s,
            } => mmpp2_stats(rate_per_s, switch_per_s).cv,
        }
    }

    /// Fit a two-state MMPP to a mean rate, an inter-arrival CV and a burst
    /// length in arrivals ([`fit_mmpp2`]).
    pub fn mmpp2_fitted(mean_rate_per_s: f64, cv: f64, burst: f64) -> Result<ArrivalProcess> {
        let (rate_per_s, switch_per_s) = fit_mmpp2(mean_rate_per_s, cv, burst)?;
        Ok(ArrivalProcess::Mmpp2 {
            rate_per_s,
            switch_per_s,
        })
    }

    fn validate(&self) -> Result<()> {
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::invalid(
                    name,
                    format!("must be positive and finite, got {v}"),
                ))
            }
        };
        match *self {
            ArrivalProcess::Poisson { rate_per_s } => pos("arrival rate", rate_per_s),
            ArrivalProcess::Erlang { rate_per_s, k } => {
                pos("arrival rate", rate_per_s)?;
                if k == 0 {
                    return Err(Error::invalid("erlang k", "must be at least 1"));
                }
                Ok(())
            }
            ArrivalProcess::Lognormal { rate_per_s, cv } => {
                pos("arrival rate", rate_per_s)?;
                pos("cv", cv)
            }
            ArrivalProcess::Hyperexponential { rate_per_s, cv } => {
                pos("arrival rate", rate_per_s)?;
                if !(cv >= 1.0 && cv.is_finite()) {
                    return Err(Error::invalid(
                        "cv",
                        format!("hyperexponential needs cv >= 1, got {cv}"),
                    ));
                }
                Ok(())
            }
            ArrivalProcess::Mmpp2 {
                rate_per_s,
                switch_per_s,
            } => {
                for v in rate_per_s {
                    if !(v.is_finite() && v >= 0.0) {
                        return Err(Error::invalid(
                            "mmpp rate",
                            format!("must be non-negative, got {v}"),
                        ));
                    }
                }
                pos("mmpp switch rate", switch_per_s[0])?;
                pos("mmpp switch rate", switch_per_s[1])?;
                pos("mmpp mean rate", self.mean_rate_per_s())
            }
        }
    }

    /// `n` arrival times in ns starting after time 0, from `rng`.
    pub fn arrivals_ns(&self, n: usize, rng: &mut Pcg64Mcg) -> Result<Vec<u64>> {
        self.validate()?;
        if n > MAX_SYNTHETIC_REQUESTS {
            return Err(too_many(n));
        }
        let mut out = Vec::with_capacity(n);
        let mut t = 0.0f64; // seconds
                            // a rate so low that the arrivals pass the ns range (before,
                            // --arrival-rate 1e-6 saturated them, and completions then came
                            // before arrivals): checked on each arrival, as the gaps are random
        let fits = |t: f64, k: usize| {
            if t * 1e9 < MAX_SPAN_NS {
                Ok((t * 1e9).round() as u64)
            } else {
                Err(Error::invalid(
                    "arrival rate",
                    format!(
                        "{} requests at a mean rate of {:.3e}/s would span about {:.3e} s; arrival {} is already past {:.0} years, the range of ns timestamps kept: raise the rate or ask for fewer requests",
                        n,
                        self.mean_rate_per_s(),
                        n as f64 / self.mean_rate_per_s(),
                        k + 1,
                        MAX_SPAN_NS / 1e9 / 31_557_600.0
                    ),
                ))
            }
        };
        match *self {
            ArrivalProcess::Mmpp2 {
                rate_per_s,
                switch_per_s,
            } => {
                let p0 = switch_per_s[1] / (switch_per_s[0] + switch_per_s[1]);
                let mut state = usize::from(rng.random::<f64>() >= p0);
                while out.len() < n {
                    // competing exponentials: next arrival vs leaving the state
                    let total = rate_per_s[state] + switch_per_s[state];
                    t += Exp::new(total).expect("validated").sample(rng);
                    if rng.random::<f64>() * total < rate_per_s[state] {
                        out.push(fits(t, out.len())?);
                    } else {
                        state ^= 1;
                    }
                }
            }
            _ => {
                let mut gap = self.gap_sampler()?;
                for k in 0..n {
                    t += gap(rng);
                    out.push(fits(t, k)?);
                }
            }
        }
        Ok(out)
    }

    #[allow(clippy::type_complexity)]
    fn gap_sampler(&self) -> Result<Box<dyn FnMut(&mut Pcg64Mcg) -> f64>> {
        let bad = |e: String| Error::invalid("arrival process", e);
        Ok(match *self {
            ArrivalProcess::Poisson { rate_per_s } => {
                let d = Exp::new(rate_per_s).map_err(|e| bad(e.to_string()))?;
                Box::new(move |r| d.sample(r))
            }
            ArrivalProcess::Erlang { rate_per_s, k } => {
                // sum of k exponentials of rate k·λ: Gamma(k, 1/(kλ))
                let d = Gamma::new(k as f64, 1.0 / (k as f64 * rate_per_s))
                    .map_err(|e| bad(e.to_string()))?;
                Box::new(move |r| d.sample(r))
            }
            ArrivalProcess::Lognormal { rate_per_s, cv } => {
                let d = lognormal(1.0 / rate_per_s, cv)?;
                Box::new(move |r| d.sample(r))
            }
            ArrivalProcess::Hyperexponential { rate_per_s, cv } => {
                let (p, m1, m2) = h2_balanced(1.0 / rate_per_s, cv);
                let d1 = Exp::new(1.0 / m1).map_err(|e| bad(e.to_string()))?;
                let d2 =
                    Exp::new((1.0 / m2).max(f64::MIN_POSITIVE)).map_err(|e| bad(e.to_string()))?;
                Box::new(move |r| {
                    if r.random::<f64>() < p {
                        d1.sample(r)
                    } else {
                        d2.sample(r)
                    }
                })
            }
            ArrivalProcess::Mmpp2 { .. } => unreachable!("handled in arrivals_ns"),
        })
    }
}

/// The error for more than [`MAX_SYNTHETIC_REQUESTS`].
fn too_many(n: usize) -> Error {
    Error::invalid(
        "requests",
        format!(
            "{n} is more than {MAX_SYNTHETIC_REQUESTS}, the most a synthetic workload may have (about 100 bytes of memory each)"
        ),
    )
}

/// A synthetic workload: arrivals, request shape and a service model.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticWorkload {
    /// The arrival process.
    pub arrivals: ArrivalProcess,
    /// Number of requests.
    pub requests: usize,
    /// Service-time model of the device.
    pub service: ServiceModel,
    /// Size of every FG request, bytes.
    pub request_size_bytes: u32,
    /// Offsets are uniform over `[0, capacity)`, aligned to the request size.
    pub capacity_bytes: u64,
    /// Fraction of writes.
    pub write_fraction: f64,
    /// Seed of all random streams.
    pub seed: u64,
}

impl SyntheticWorkload {
    /// Generate the trace (with FCFS completion times).
    pub fn generate(&self) -> Result<Trace> {
        if self.requests == 0 {
            return Err(Error::invalid("requests", "must be at least 1"));
        }
        if self.requests > MAX_SYNTHETIC_REQUESTS {
            return Err(too_many(self.requests));
        }
        if self.request_size_bytes == 0 {
            return Err(Error::invalid("request size", "must be positive"));
        }
        // Separate streams so changing the service model keeps the arrivals.
        let mut arrival_rng = Pcg64Mcg::seed_from_u64(self.seed);
        let mut shape_rng = Pcg64Mcg::seed_from_u64(self.seed ^ 0x5eed_0f5a_9e00);
        let arrival_ns = self.arrivals.arrivals_ns(self.requests, &mut arrival_rng)?;
        let slots = (self.capacity_bytes / self.request_size_bytes as u64).max(1);
        let n = arrival_ns.len();
        let mut offset_bytes = Vec::with_capacity(n);
        let mut op = Vec::with_capacity(n);
        for _ in 0..n {
            offset_bytes.push(shape_rng.random_range(0..slots) * self.request_size_bytes as u64);
            op.push(if shape_rng.random::<f64>() < self.write_fraction {
                Op::Write
            } else {
                Op::Read
            });
        }
        let size_bytes = vec![self.request_size_bytes; n];
        let completion_ns = fcfs_completions(
            &arrival_ns,
            &offset_bytes,
            &size_bytes,
            &self.service,
            self.seed.wrapping_add(1),
        );
        let device = vec![0u32; n];
        Trace::from_columns(
            arrival_ns,
            Some(completion_ns),
            offset_bytes,
            size_bytes,
            op,
            device,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poisson(rate_per_s: f64, requests: usize) -> SyntheticWorkload {
        SyntheticWorkload {
            arrivals: ArrivalProcess::Poisson { rate_per_s },
            requests,
            service: ServiceModel::Exponential { mean_ns: 1_000_000 },
            request_size_bytes: 4096,
            capacity_bytes: 1 << 30,
            write_fraction: 0.5,
            seed: crate::dist::DEFAULT_SEED,
        }
    }

    #[test]
    fn request_counts_past_the_bound_are_refused_before_allocating() {
        for n in [MAX_SYNTHETIC_REQUESTS + 1, 10_000_000_000, usize::MAX] {
            let e = poisson(100.0, n).generate().unwrap_err();
            assert!(
                matches!(&e, Error::InvalidParameter { name, .. } if name == "requests"),
                "{e}"
            );
            assert!(e.to_string().contains(&n.to_string()), "{e}");
        }
    }

    #[test]
    fn a_rate_too_low_for_the_ns_range_is_an_error_not_a_wrap() {
        // 1e-6/s: arrivals pass 2^62 ns = 4.61e9 s after about 4.61e9 × 1e-6
        // = 4612 of them (Poisson: ± 68 for one standard deviation)
        let e = poisson(1e-6, 1_000_000).generate().unwrap_err();
        let text = e.to_string();
        assert!(text.contains("invalid arrival rate"), "{text}");
        let k: f64 = text
            .split("arrival ")
            .nth(2)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no arrival index in {text}"));
        let expected = MAX_SPAN_NS / 1e9 * 1e-6;
        assert!(
            (k - expected).abs() < 5.0 * expected.sqrt(),
            "{k} vs {expected}"
        );
        // a rate that fits keeps every arrival, in order, below the bound
        let t = poisson(1e-6, 4000).generate().unwrap();
        assert_eq!(t.len(), 4000);
    }

    fn gaps(p: &ArrivalProcess, n: usize) -> Vec<f64> {
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        let a = p.arrivals_ns(n, &mut rng).unwrap();
        let mut prev = 0u64;
        a.iter()
            .map(|&t| {
                let g = (t - prev) as f64 / 1e9;
                prev = t;
                g
            })
            .collect()
    }

    fn mean_cv(x: &[f64]) -> (f64, f64) {
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        let v = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n;
        (m, v.sqrt() / m)
    }

    #[test]
    fn processes_have_their_mean_and_cv() {
        let n = 400_000;
        for (p, cv) in [
            (ArrivalProcess::Poisson { rate_per_s: 10.0 }, 1.0),
            (
                ArrivalProcess::Erlang {
                    rate_per_s: 10.0,
                    k: 9,
                },
                1.0 / 3.0,
            ),
            (
                ArrivalProcess::Lognormal {
                    rate_per_s: 10.0,
                    cv: 2.0,
                },
                2.0,
            ),
            (
                ArrivalProcess::Hyperexponential {
                    rate_per_s: 10.0,
                    cv: 3.0,
                },
                3.0,
            ),
        ] {
            let (m, c) = mean_cv(&gaps(&p, n));
            assert!((m - 0.1).abs() < 0.1 * 0.02, "{p:?}: mean {m}");
            assert!((c - cv).abs() < cv * 0.05, "{p:?}: cv {c}");
        }
    }

    #[test]
    fn mmpp_mean_rate() {
        let p = ArrivalProcess::Mmpp2 {
            rate_per_s: [100.0, 1.0],
            switch_per_s: [1.0, 0.25],
        };
        // p0 = 0.25/1.25 = 0.2 -> rate = 20 + 0.8 = 20.8
        assert!((p.mean_rate_per_s() - 20.8).abs() < 1e-12);
        let (m, c) = mean_cv(&gaps(&p, 400_000));
        assert!((1.0 / m / 20.8 - 1.0).abs() < 0.03, "rate {}", 1.0 / m);
        assert!(c > 1.5, "mmpp should be bursty, cv {c}");
    }

    #[test]
    fn fitted_mmpp_gaps_have_the_fitted_cv_and_correlation() {
        // cv 3, bursts of 48 arrivals: theory (mmpp2_stats) gives lag-1
        // autocorrelation ≈ 0.28 decaying by ≈ 0.63 per lag.
        let p = ArrivalProcess::mmpp2_fitted(10.0, 3.0, 48.0).unwrap();
        let ArrivalProcess::Mmpp2 {
            rate_per_s,
            switch_per_s,
        } = p
        else {
            panic!()
        };
        let want = mmpp2_stats(rate_per_s, switch_per_s);
        let g = gaps(&p, 1_000_000);
        let (m, c) = mean_cv(&g);
        let n = g.len();
        let lag1 = g.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>()
            / (n - 1) as f64
            / (c * m).powi(2);
        // correlated, heavy-ish tailed gaps: the effective sample is a few
        // times smaller than n, so tolerances are a few times the iid SEs
        assert!((m - 0.1).abs() < 0.1 * 0.03, "mean {m}");
        assert!((c / 3.0 - 1.0).abs() < 0.06, "cv {c}");
        assert!(
            (lag1 - want.lag1).abs() < 0.04,
            "lag1 {lag1} vs {}",
            want.lag1
        );
        assert!(want.lag1 > 0.25, "{want:?}");
    }

    #[test]
    fn utilization_sets_the_rate() {
        let exp = ServiceModel::Exponential {
            mean_ns: 1_000_000_000,
        };
        assert_eq!(rate_for_utilization(0.3, &exp, 4096).unwrap(), 0.3);
        assert!(rate_for_utilization(30.0, &exp, 4096).is_err());
        // a Poisson workload at the rate for 40 % keeps the queue 40 % busy
        let w = SyntheticWorkload {
            arrivals: ArrivalProcess::Poisson {
                rate_per_s: rate_for_utilization(
                    0.4,
                    &ServiceModel::Constant { ns: 2_000_000 },
                    4096,
                )
                .unwrap(),
            },
            requests: 200_000,
            service: ServiceModel::Constant { ns: 2_000_000 },
            request_size_bytes: 4096,
            capacity_bytes: 1 << 30,
            write_fraction: 0.0,
            seed: 3,
        };
        let t = w.generate().unwrap();
        let p = crate::period::extract(t.arrival_ns(), t.completion_ns().unwrap());
        let busy: u64 = p.busy_len_ns.iter().sum();
        let u = busy as f64 / *t.completion_ns().unwrap().last().unwrap() as f64;
        assert!((u - 0.4).abs() < 0.01, "{u}");
    }

    #[test]
    fn same_seed_same_trace() {
        let w = SyntheticWorkload {
            arrivals: ArrivalProcess::Poisson { rate_per_s: 50.0 },
            requests: 1000,
            service: ServiceModel::Exponential { mean_ns: 5_000_000 },
            request_size_bytes: 4096,
            capacity_bytes: 1 << 30,
            write_fraction: 0.3,
            seed: 5,
        };
        let a = w.generate().unwrap();
        let b = w.generate().unwrap();
        assert_eq!(a.arrival_ns(), b.arrival_ns());
        assert_eq!(a.completion_ns(), b.completion_ns());
        assert_eq!(a.offset_bytes(), b.offset_bytes());
    }
}
