//! Synthetic FG workloads: an arrival process plus a service model through a
//! FCFS queue, giving a [`Trace`] with completion times. Seeded and
//! reproducible: the same seed gives the same trace, byte for byte.
//!
//! Arrival processes follow Mi et al. §4.1 (Erlang for low-CV idle times,
//! MMPP for bursty ones) plus Poisson, lognormal and hyperexponential
//! inter-arrival times.

use crate::device::ServiceModel;
use crate::error::{Error, Result};
use crate::trace::{Op, Trace};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Gamma, LogNormal};
use rand_pcg::Pcg64Mcg;

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
        let mut out = Vec::with_capacity(n);
        let mut t = 0.0f64; // seconds
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
                        out.push((t * 1e9).round() as u64);
                    } else {
                        state ^= 1;
                    }
                }
            }
            _ => {
                let mut gap = self.gap_sampler()?;
                for _ in 0..n {
                    t += gap(rng);
                    out.push((t * 1e9).round() as u64);
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
                let mean = 1.0 / rate_per_s;
                let sigma2 = (1.0 + cv * cv).ln();
                let mu = mean.ln() - sigma2 / 2.0;
                let d = LogNormal::new(mu, sigma2.sqrt()).map_err(|e| bad(e.to_string()))?;
                Box::new(move |r| d.sample(r))
            }
            ArrivalProcess::Hyperexponential { rate_per_s, cv } => {
                // balanced means: p/λ1 = (1-p)/λ2; p = (1 + sqrt((c²-1)/(c²+1)))/2
                let c2 = cv * cv;
                let p = 0.5 * (1.0 + ((c2 - 1.0) / (c2 + 1.0)).sqrt());
                let l1 = 2.0 * p * rate_per_s;
                let l2 = 2.0 * (1.0 - p) * rate_per_s;
                let d1 = Exp::new(l1).map_err(|e| bad(e.to_string()))?;
                let d2 = Exp::new(l2.max(f64::MIN_POSITIVE)).map_err(|e| bad(e.to_string()))?;
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
        let completion_ns = crate::period::fcfs_completions(
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
